"""Statistics with numpy: standardisation, covariance and PCA, and a small k-means."""

from __future__ import annotations

import numpy as np
import pytest


def standardise(x: np.ndarray) -> np.ndarray:
    """Columns with mean 0 and standard deviation 1."""
    return (x - x.mean(axis=0)) / x.std(axis=0)


def kmeans(points: np.ndarray, k: int, iterations: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's algorithm from a farthest-point start: (centroids, labels)."""
    rng = np.random.default_rng(seed)
    centroids = points[[rng.integers(len(points))]]
    while len(centroids) < k:
        nearest = np.min(np.linalg.norm(points[:, None, :] - centroids[None], axis=2), axis=1)
        centroids = np.vstack([centroids, points[np.argmax(nearest)]])
    for _ in range(iterations):
        distances = np.linalg.norm(points[:, None, :] - centroids[None, :, :], axis=2)
        labels = np.argmin(distances, axis=1)
        centroids = np.array([points[labels == j].mean(axis=0) for j in range(k)])
    return centroids, labels


def test_standardise_gives_unit_columns() -> None:
    rng = np.random.default_rng(6)
    x = rng.normal(loc=[1.0, -5.0, 100.0], scale=[0.1, 3.0, 40.0], size=(5000, 3))
    z = standardise(x)
    np.testing.assert_allclose(z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=0), 1.0, rtol=1e-12)


def test_covariance_matches_definition() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2000, 8)) @ rng.standard_normal((8, 8))
    centred = x - x.mean(axis=0)
    by_hand = centred.T @ centred / (len(x) - 1)
    np.testing.assert_allclose(np.cov(x, rowvar=False), by_hand, rtol=1e-10)


@pytest.mark.profile(row_limit=8)
def test_pca_finds_dominant_direction(opprof) -> None:
    rng = np.random.default_rng(8)
    direction = np.array([3.0, 4.0]) / 5.0
    x = np.outer(rng.standard_normal(4000) * 5.0, direction)
    x += 0.1 * rng.standard_normal(x.shape)
    with opprof.record_function("pca"):
        eigenvalues, eigenvectors = np.linalg.eigh(np.cov(standardise(x), rowvar=False))
    with opprof.record_function("pca raw"):
        _, vectors_raw = np.linalg.eigh(np.cov(x, rowvar=False))
    assert eigenvalues[-1] / eigenvalues.sum() > 0.99
    assert abs(eigenvectors[:, -1] @ (np.ones(2) / np.sqrt(2))) > 0.99
    assert abs(vectors_raw[:, -1] @ direction) > 0.999


@pytest.mark.profile(row_limit=10, sort_by="count")
def test_kmeans_separates_blobs(opprof) -> None:
    rng = np.random.default_rng(9)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = np.concatenate([c + rng.standard_normal((300, 2)) for c in centres])
    with opprof.record_function("kmeans"):
        found, labels = kmeans(points, k=3, iterations=10, seed=10)
    order = np.argsort(found[:, 0] + 2 * found[:, 1])
    np.testing.assert_allclose(found[order], centres, atol=0.3)
    assert len(np.unique(labels)) == 3
