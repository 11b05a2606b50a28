"""Signal processing with numpy.fft and numpy.convolve: low-pass filtering,
convolution theorem, and spectral peak detection."""

from __future__ import annotations

import numpy as np
import pytest

RATE_HZ = 8000


def tone(freqs_hz: list[float], seconds: float) -> np.ndarray:
    """Sum of unit sines sampled at RATE_HZ."""
    t = np.arange(int(RATE_HZ * seconds)) / RATE_HZ
    return np.sum([np.sin(2 * np.pi * f * t) for f in freqs_hz], axis=0)


def lowpass(signal: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """Zero every FFT bin above cutoff_hz."""
    spectrum = np.fft.rfft(signal)
    freqs = np.fft.rfftfreq(signal.size, d=1.0 / RATE_HZ)
    spectrum[freqs > cutoff_hz] = 0
    return np.fft.irfft(spectrum, n=signal.size)


@pytest.mark.profile(row_limit=10, time_unit="us")
def test_lowpass_removes_high_tone(opprof) -> None:
    with opprof.record_function("synthesise"):
        mixed = tone([50.0, 1500.0], seconds=1.0)
        low = tone([50.0], seconds=1.0)
    with opprof.record_function("filter"):
        filtered = lowpass(mixed, cutoff_hz=200.0)
    np.testing.assert_allclose(filtered, low, atol=1e-9)


def test_convolution_theorem() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal(4096)
    b = rng.standard_normal(257)
    direct = np.convolve(a, b)
    n = a.size + b.size - 1
    via_fft = np.fft.irfft(np.fft.rfft(a, n) * np.fft.rfft(b, n), n)
    np.testing.assert_allclose(direct, via_fft, atol=1e-9)


def test_spectral_peaks_found() -> None:
    signal = tone([440.0, 880.0, 1320.0], seconds=0.5)
    power = np.abs(np.fft.rfft(signal * np.hanning(signal.size))) ** 2
    freqs = np.fft.rfftfreq(signal.size, d=1.0 / RATE_HZ)
    is_peak = (power[1:-1] > power[:-2]) & (power[1:-1] > power[2:])
    peaks = freqs[1:-1][is_peak & (power[1:-1] > 0.01 * power.max())]
    np.testing.assert_allclose(np.sort(peaks), [440.0, 880.0, 1320.0])


def test_moving_average_smooths_noise() -> None:
    rng = np.random.default_rng(5)
    noisy = np.linspace(0.0, 1.0, 10_000) + 0.2 * rng.standard_normal(10_000)
    window = np.ones(101) / 101
    smooth = np.convolve(noisy, window, mode="valid")
    assert np.std(np.diff(smooth)) < 0.05 * np.std(np.diff(noisy))
