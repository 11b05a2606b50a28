"""Linear models fitted with numpy.linalg: ordinary least squares, ridge, and a
weighted fit, each checked against a known generating model."""

from __future__ import annotations

import numpy as np
import pytest


def make_regression(
    n_samples: int, n_features: int, noise: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Design matrix, targets and the true coefficients of a noisy linear model."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_samples, n_features))
    coef = rng.uniform(-2.0, 2.0, n_features)
    y = x @ coef + noise * rng.standard_normal(n_samples)
    return x, y, coef


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Ridge coefficients from the normal equations (X^T X + alpha I) w = X^T y."""
    gram = x.T @ x
    gram[np.diag_indices_from(gram)] += alpha
    return np.linalg.solve(gram, x.T @ y)


def test_least_squares_recovers_coefficients() -> None:
    x, y, coef = make_regression(2000, 20, noise=0.01, seed=0)
    fitted, residuals, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    assert rank == 20
    np.testing.assert_allclose(fitted, coef, atol=1e-3)
    assert residuals[0] / len(y) < 1e-3


@pytest.mark.profile(row_limit=8)
def test_ridge_shrinks_with_alpha(opprof) -> None:
    x, y, _ = make_regression(1000, 50, noise=0.5, seed=1)
    norms = []
    for alpha in (0.1, 10.0, 1000.0):
        with opprof.record_function(f"ridge alpha={alpha:g}"):
            norms.append(np.linalg.norm(ridge(x, y, alpha)))
    assert norms[0] > norms[1] > norms[2]


def test_ridge_matches_augmented_least_squares() -> None:
    x, y, _ = make_regression(500, 30, noise=0.1, seed=2)
    alpha = 3.0
    augmented_x = np.vstack([x, np.sqrt(alpha) * np.eye(30)])
    augmented_y = np.concatenate([y, np.zeros(30)])
    expected = np.linalg.lstsq(augmented_x, augmented_y, rcond=None)[0]
    np.testing.assert_allclose(ridge(x, y, alpha), expected, rtol=1e-8)


@pytest.mark.profile(row_limit=6, sort_by="cpu_time_total")
def test_weighted_least_squares_downweights_outliers(opprof) -> None:
    x, y, coef = make_regression(800, 5, noise=0.05, seed=3)
    y[:40] += 25.0  # gross outliers
    weights = np.ones_like(y)
    for _ in range(5):  # iteratively reweighted least squares (Huber-like)
        with opprof.record_function("irls step"):
            sw = np.sqrt(weights)
            fitted = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)[0]
            residual = np.abs(y - x @ fitted)
            weights = np.minimum(1.0, 0.5 / np.maximum(residual, 1e-12))
    assert np.max(np.abs(fitted - coef)) < 0.1
