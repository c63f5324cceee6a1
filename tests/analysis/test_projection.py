"""The map of a feature space (``analysis/projection.py``): clusters apart stay apart, the components are the space's
principal components (checked against NumPy's SVD), nearest neighbours are those of a brute-force search, rows
with NaN are left out and said, and UMAP is used where it is installed (else PCA)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from analysis.projection import ProjectionError, nearest, project


def clusters(seed: int = 0, per: int = 60, dims: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Two tight clusters far apart in ``dims`` dimensions, and which cluster each row is in."""
    rng = np.random.default_rng(seed)
    centre = np.zeros(dims)
    centre[:3] = 8.0
    vectors = np.concatenate([rng.normal(size=(per, dims)), centre + rng.normal(size=(per, dims))])
    return vectors, np.repeat([0, 1], per)


def apart(xy: np.ndarray, group: np.ndarray) -> float:
    """The distance between the groups' centres over the largest spread of a group: > 2 is two separate clouds."""
    centres = [xy[group == g].mean(axis=0) for g in (0, 1)]
    spread = max(np.linalg.norm(xy[group == g] - centres[g], axis=1).max() for g in (0, 1))
    return float(np.linalg.norm(centres[0] - centres[1]) / spread)


def test_pca_keeps_clusters_apart_and_its_components_are_the_space_s_principal_axes():
    vectors, group = clusters()
    found = project(np.arange(len(vectors)) * 3, vectors, method="pca")
    assert found.method == "pca" and found.left_out == 0
    assert found.idx.tolist() == (np.arange(len(vectors)) * 3).tolist()
    assert apart(found.xy, group) > 2
    centred = vectors - vectors.mean(axis=0)
    _, singular, axes = np.linalg.svd(centred, full_matrices=False)
    expected = centred @ axes[:2].T
    for k in range(2):  # the same axis up to its sign
        assert min(np.abs(found.xy[:, k] - expected[:, k]).max(),
                   np.abs(found.xy[:, k] + expected[:, k]).max()) < 1e-3
    assert found.explained == pytest.approx(1.0, abs=1e-6)  # 20 dims, 20 components kept


def test_rows_with_nan_or_inf_are_left_out_and_counted():
    vectors, _ = clusters()
    vectors[[4, 9]] = np.nan
    vectors[11, 2] = np.inf
    found = project(np.arange(len(vectors)), vectors, method="pca")
    assert found.left_out == 3 and 4 not in found.idx and 11 not in found.idx and len(found.idx) == len(vectors) - 3


def test_standardised_columns_weigh_alike():
    """Summaries of different units: unstandardised, a column in thousands is the whole first axis."""
    rng = np.random.default_rng(1)
    vectors = np.stack([rng.normal(size=200) * 1000, rng.normal(size=200)], axis=1)
    raw = project(np.arange(200), vectors, method="pca")
    scaled = project(np.arange(200), vectors, method="pca", standardise=True)
    assert abs(np.corrcoef(raw.xy[:, 0], vectors[:, 0])[0, 1]) > 0.999
    assert np.std(scaled.xy[:, 0]) == pytest.approx(np.std(scaled.xy[:, 1]), rel=0.3)


def test_the_nearest_rows_are_those_of_a_brute_force_search():
    rng = np.random.default_rng(2)
    points = rng.normal(size=(300, 5)).astype(np.float32)
    rows, distances = nearest(points, 17, 10)
    brute = sorted(range(300), key=lambda r: (float(np.sum((points[r].astype(np.float64) - points[17]) ** 2)), r))
    assert rows.tolist() == [r for r in brute if r != 17][:10]
    assert distances == pytest.approx(np.linalg.norm(points[rows] - points[17], axis=1), rel=1e-5)
    assert np.all(np.diff(distances) >= 0)


def test_a_space_too_small_to_draw_or_an_unknown_method_is_refused_saying_why():
    with pytest.raises(ProjectionError, match="too few"):
        project(np.arange(3), np.full((3, 4), np.nan))
    with pytest.raises(ProjectionError, match="unknown projection method"):
        project(np.arange(10), np.ones((10, 4)), method="tsne")


def test_auto_is_pca_where_umap_learn_is_not_installed(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "umap" else find_spec(name, *a))
    vectors, _ = clusters()
    assert project(np.arange(len(vectors)), vectors).method == "pca"
    with pytest.raises(ProjectionError, match="pip install"):
        project(np.arange(len(vectors)), vectors, method="umap")


@pytest.mark.slow
def test_umap_keeps_clusters_apart_and_is_the_same_for_the_same_seed():
    pytest.importorskip("umap")
    vectors, group = clusters(per=80)
    first = project(np.arange(len(vectors)), vectors, method="auto")
    assert first.method == "umap"
    assert apart(first.xy, group) > 2
    np.testing.assert_array_equal(first.xy, project(np.arange(len(vectors)), vectors, method="umap").xy)
