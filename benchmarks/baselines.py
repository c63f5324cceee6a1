"""The failure finders Lantern is compared with on the same epoch table, in ``benchmarks.failure_discovery``.

- **SliceLine** (Sagadeeva and Boehm, SIGMOD 2021; the ``sliceline`` package): slices over every scalar column of
  the table a user would hand it (meta info and every debugger summary; numbers in 5 quantile bins), scored by
  its size-error trade-off (alpha 0.95), at most 3 conditions, the table's minimum slice size.
- **Domino-style error-aware mixture** (Eyuboglu et al., ICLR 2022): a mixture model over the captured
  embeddings (standardised, the first 32 principal components, diagonal Gaussians) whose components also model
  the label (categorical), the predicted probabilities (categorical) and the error (Bernoulli), each weighted 10
  as in Domino's defaults, fitted by EM with 25 components; the components, by error rate, are its slices (their
  datapoints: those most likely in them).
- **Plain cleanlab**: ``find_label_issues`` on the validation probabilities, by self-confidence.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from cleanlab.filter import find_label_issues
from sklearn.decomposition import PCA

BINS = 5
MAX_CONDITIONS = 2  # SliceLine without numba takes over 5 minutes at 3 on a 64-column table
COMPONENTS = 25
DIMENSIONS = 32
WEIGHT = 10.0  # Domino's y and y_hat log-likelihood weights
ITERATIONS = 100


@dataclass
class FoundGroup:
    """One finding of a baseline: its description, the columns it names and its rows (table positions)."""

    description: str
    columns: list[str]
    rows: np.ndarray


def sliceline_slices(columns: dict[str, np.ndarray], failed: np.ndarray, min_size: int, top: int = 10
                     ) -> list[FoundGroup]:
    """SliceLine's top slices over ``columns`` (strings, flags and numbers, binned)."""
    from sliceline import Slicefinder  # optional: pip install --no-deps sliceline

    names = list(columns)
    encoded = np.column_stack([_bins(columns[name]) for name in names])
    finder = Slicefinder(alpha=0.95, k=top, max_l=MAX_CONDITIONS, min_sup=min_size, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        finder.fit(encoded, failed.astype(float))
    found = []
    for chosen in finder.top_slices_[:top]:
        used = [(names[j], value) for j, value in enumerate(chosen) if value is not None]
        rows = np.logical_and.reduce([encoded[:, names.index(name)] == value for name, value in used])
        found.append(FoundGroup(" and ".join(f"{name} in {value}" for name, value in used), [n for n, _ in used],
                                np.flatnonzero(rows)))
    return found


def _bins(values: np.ndarray) -> np.ndarray:
    """A column as strings: its value, or for a number with more than BINS values its quantile bin."""
    if values.dtype == object or values.dtype.kind == "b":
        return np.array([str(v) for v in values], dtype=object)
    numbers = values.astype(np.float64)
    finite = np.isfinite(numbers)
    if len(np.unique(numbers[finite])) <= BINS:
        return np.array([str(v) if f else "missing" for v, f in zip(numbers, finite)], dtype=object)
    edges = np.unique(np.quantile(numbers[finite], np.linspace(0, 1, BINS + 1)[1:-1]))
    codes = np.searchsorted(edges, numbers, side="right")
    labels = [f"<{edges[0]:.3g}"] + [f"[{a:.3g},{b:.3g})" for a, b in zip(edges[:-1], edges[1:])] + \
        [f">={edges[-1]:.3g}"]
    return np.array([labels[c] if f else "missing" for c, f in zip(codes, finite)], dtype=object)


def domino_slices(embeddings: np.ndarray, label: np.ndarray, probabilities: np.ndarray, failed: np.ndarray,
                  top: int = 10, seed: int = 0) -> list[FoundGroup]:
    """The error-aware mixture's components, highest error rate first (module docstring)."""
    rng = np.random.default_rng(seed)
    spread = embeddings.std(axis=0)
    x = (embeddings - embeddings.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    if x.shape[1] > DIMENSIONS:
        x = PCA(DIMENSIONS, random_state=seed).fit_transform(x)
    classes = probabilities.shape[1]
    y = np.eye(classes)[label.astype(np.int64)]
    y_hat, error = probabilities.astype(np.float64), failed.astype(np.float64)
    responsibility = rng.dirichlet(np.ones(COMPONENTS), size=len(x))
    for _ in range(ITERATIONS):
        weight = responsibility.sum(axis=0) + 1e-9
        prior = weight / weight.sum()
        mean = responsibility.T @ x / weight[:, None]
        variance = responsibility.T @ x ** 2 / weight[:, None] - mean ** 2 + 1e-3
        label_share = (responsibility.T @ y + 1e-3) / (weight[:, None] + 1e-3 * classes)
        predicted_share = (responsibility.T @ y_hat + 1e-3) / (weight[:, None] + 1e-3 * classes)
        error_rate = np.clip((responsibility.T @ error) / weight, 1e-3, 1 - 1e-3)
        log_likelihood = (np.log(prior) - 0.5 * (np.log(2 * np.pi * variance).sum(axis=1)
                                                  + ((x[:, None, :] - mean) ** 2 / variance).sum(axis=2))
                          + WEIGHT * (y @ np.log(label_share).T + y_hat @ np.log(predicted_share).T
                                      + error[:, None] * np.log(error_rate) + (1 - error[:, None])
                                      * np.log(1 - error_rate)))
        log_likelihood -= log_likelihood.max(axis=1, keepdims=True)
        updated = np.exp(log_likelihood)
        updated /= updated.sum(axis=1, keepdims=True)
        if np.abs(updated - responsibility).max() < 1e-5:
            responsibility = updated
            break
        responsibility = updated
    member = responsibility.argmax(axis=1)
    rates = [(failed[member == k].mean() if (member == k).any() else -1.0, k) for k in range(COMPONENTS)]
    found = []
    for rate, k in sorted(rates, reverse=True)[:top]:
        rows = np.flatnonzero(member == k)
        if len(rows):
            found.append(FoundGroup(f"component {k} ({len(rows)} datapoints, {rate:.0%} fail)", [], rows))
    return found


def cleanlab_suspects(label: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """Plain cleanlab's label issues (table rows), most suspicious first."""
    usable = np.isfinite(probabilities).all(axis=1)
    rows = np.flatnonzero(usable)
    ranked = find_label_issues(label[rows].astype(np.int64), probabilities[rows].astype(np.float64), n_jobs=1,
                               return_indices_ranked_by="self_confidence")
    return rows[np.asarray(ranked, dtype=np.int64)]
