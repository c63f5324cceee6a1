"""A feature space drawn in two dimensions, for the viewer's Embeddings tab (FiftyOne's embeddings panel).

``project`` keeps the space's leading principal components (at most ``MAX_COMPONENTS``: the space's distances, less
the directions it hardly varies in; a datapoint's nearest neighbours are sought there, ``nearest``) and lays them out
in 2-D with UMAP (umap-learn, the ``maps`` extra: neighbourhoods kept, clusters apart), or with the first two
principal components where umap-learn is not installed, is not asked for, or the space has too few datapoints for
it. Rows holding a NaN or an infinity are left out (the map says how many).
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.decomposition import PCA

from utils.errors import LanternUserError

MAX_COMPONENTS = 50  # what UMAP is commonly run on, and where neighbours are sought
FIT_ROWS = 20_000  # rows the principal components are fitted on (all rows are projected)
MIN_UMAP_ROWS = 16  # fewer cannot hold UMAP's neighbourhoods
NEIGHBOURS = 15  # UMAP's n_neighbors: its default
METHODS = ("auto", "umap", "pca")


class ProjectionError(LanternUserError):
    """A space cannot be drawn (no usable vectors, a method that is not installed); the message says why."""


@dataclass
class Projection:
    """Where each usable datapoint lies in the map (``xy``) and in the space's leading components."""

    idx: np.ndarray  # int64, in the order given
    xy: np.ndarray  # (n, 2) float32
    components: np.ndarray  # (n, c) float32
    method: str  # 'umap' or 'pca'
    explained: float  # share of the space's variance the components keep
    left_out: int  # rows with a NaN or an infinity


def umap_installed() -> bool:
    return importlib.util.find_spec("umap") is not None


def project(idx: np.ndarray, vectors: np.ndarray, method: str = "auto", standardise: bool = False,
            seed: int = 0) -> Projection:
    """The 2-D map of ``vectors`` (one row per ``idx``). ``standardise``: scale each column to unit variance first
    (columns of different units, such as summaries). ``method``: ``'umap'``, ``'pca'`` or ``'auto'`` (UMAP where
    umap-learn is installed)."""
    if method not in METHODS:
        raise ProjectionError(f"unknown projection method {method!r}; use one of {METHODS}")
    if method == "umap" and not umap_installed():
        raise ProjectionError("UMAP needs umap-learn: pip install -e '.[maps]' (or choose the method 'pca')")
    vectors = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1)
    usable = np.isfinite(vectors).all(axis=1)
    if usable.sum() < 2:
        raise ProjectionError(f"the space has {int(usable.sum())} datapoint(s) with finite values of "
                              f"{len(vectors)}: too few to draw")
    kept = vectors[usable]
    kept = kept - kept.mean(axis=0)
    if standardise:
        scale = kept.std(axis=0)
        kept = kept[:, scale > 0] / scale[scale > 0]
    components, explained = _leading_components(kept, seed)
    use_umap = method == "umap" or (method == "auto" and umap_installed())
    if use_umap and len(kept) >= MIN_UMAP_ROWS and components.shape[1] >= 2:
        xy, used = _umap(components, seed), "umap"
    else:
        xy, used = _first_two(components), "pca"
    return Projection(np.asarray(idx, dtype=np.int64)[usable], xy.astype(np.float32),
                      components.astype(np.float32), used, explained, int((~usable).sum()))


def nearest(components: np.ndarray, row: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` rows nearest to ``row`` in ``components`` (itself left out), nearest first, and their
    distances."""
    distances = np.sqrt(((components - components[row]) ** 2).sum(axis=1, dtype=np.float64))
    distances[row] = np.inf
    count = min(count, len(components) - 1)
    if count <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    rows = np.argpartition(distances, count - 1)[:count]
    rows = rows[np.lexsort((rows, distances[rows]))]
    return rows, distances[rows]


def _leading_components(centred: np.ndarray, seed: int) -> tuple[np.ndarray, float]:
    """The rows in the space's leading principal components (fitted on at most ``FIT_ROWS`` rows), and the share
    of the variance those keep."""
    count = min(MAX_COMPONENTS, centred.shape[1], len(centred) - 1)
    if count < 1 or not centred.any():
        return np.zeros((len(centred), 1)), 1.0
    rng = np.random.default_rng(seed)
    fit = centred if len(centred) <= FIT_ROWS else centred[rng.choice(len(centred), FIT_ROWS, replace=False)]
    pca = PCA(n_components=count, random_state=seed).fit(fit)
    return pca.transform(centred), float(pca.explained_variance_ratio_.sum())


def _first_two(components: np.ndarray) -> np.ndarray:
    xy = np.zeros((len(components), 2))
    xy[:, :min(2, components.shape[1])] = components[:, :2]
    return xy


def _umap(components: np.ndarray, seed: int) -> np.ndarray:
    import umap  # imported only here: it compiles its code on import, seconds of a core

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's and umap's notes on their own settings
        reducer = umap.UMAP(n_neighbors=min(NEIGHBOURS, len(components) - 1), n_components=2, random_state=seed,
                            n_jobs=1)
        return reducer.fit_transform(components.astype(np.float32))
