"""Findings that need the captured outputs themselves, read from an epoch's debug pages.

- Embedding clusters: where a debugger captured a pooled feature vector per datapoint (a ``layer_output``
  output, or a plain 1-D array), the failures are clustered in that space with scikit-learn's ``KMeans``;
  every datapoint then joins its nearest cluster, which gives each cluster a failure rate; a cluster is
  reported only when it fails significantly more than the rest of its space (one-sided Fisher exact test,
  Bonferroni over the clusters tried), and is described by the columns that set its failures apart from
  the passing datapoints.
- NaN origins: where a ``NaNInfDebugger`` ran, the modules that first produced a NaN or Inf, by count.

Pages are read through the safe reader (``load_debug_outputs``), one page at a time. An epoch whose debug
outputs cannot be read (a damaged index, locations file or page) gives no internals, and says why: the
table's findings do not need them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
from scipy.stats import hypergeom
from sklearn.cluster import KMeans
from sklearn.preprocessing import StandardScaler

from analysis.slices import ALPHA
from debuggers.outputs import KIND_LAYER_OUTPUT, KIND_NAN_ORIGIN, is_shared_record
from debuggers.pages.errors import DebugDataError, DebugOutputsNotFoundError
from debuggers.pages.reader import load_debug_outputs

MAX_CLUSTERS = 4


@dataclass
class EmbeddingCluster:
    debugger: str
    size: int
    failures: int
    failure_rate: float
    description: str
    idx: list[int] = field(repr=False)


@dataclass
class NaNOrigin:
    module: str
    module_type: str
    count: int
    idx: list[int] = field(repr=False)


@dataclass
class CapturedInternals:
    """What the pages hold that the table does not: pooled vectors and NaN origins, by debugger."""

    vectors: dict[str, tuple[np.ndarray, np.ndarray]]  # debugger -> (idx, (n, d) vectors)
    nan_origins: list[NaNOrigin]
    problem: Optional[str] = None  # why the captured outputs were skipped


def read_internals(epoch_dir: str) -> CapturedInternals:
    """Pooled vectors and NaN origins of every captured datapoint of ``epoch_dir`` (empty when none, or, with
    the reason in ``problem``, when they cannot be read)."""
    try:
        return _read_captured(epoch_dir)
    except DebugDataError as exc:
        return CapturedInternals({}, [], f"the debug outputs of {epoch_dir} were skipped, so embedding clusters "
                                         f"and NaN origins are left out: {exc}")


def _read_captured(epoch_dir: str) -> CapturedInternals:
    try:
        outputs = load_debug_outputs(epoch_dir)
    except DebugOutputsNotFoundError:  # the debugger did not run for this epoch
        outputs = None
    vectors: dict[str, dict[int, np.ndarray]] = defaultdict(dict)
    origins: dict[tuple[str, str], list[int]] = defaultdict(list)
    if outputs is not None:
        for idx, datapoint in outputs.page_by_page():
            _collect(idx, datapoint, vectors, origins)
    stacked = {name: (np.array(sorted(rows)), np.stack([rows[i] for i in sorted(rows)]))
               for name, rows in vectors.items() if len({v.shape for v in rows.values()}) == 1}
    ranked = sorted(origins.items(), key=lambda item: -len(item[1]))
    return CapturedInternals(stacked, [NaNOrigin(module, kind, len(idx), sorted(idx))
                                       for (module, kind), idx in ranked])


def _collect(idx: int, datapoint: dict[str, Any], vectors: dict, origins: dict) -> None:
    for name, output in datapoint.items():
        if is_shared_record(output):
            continue
        vector = _pooled_vector(output)
        if vector is not None:
            vectors[name][idx] = vector
        if isinstance(output, dict) and output.get("kind") == KIND_NAN_ORIGIN and output.get("first_module"):
            origins[(str(output["first_module"]), str(output.get("module_type")))].append(idx)


def _pooled_vector(output: Any) -> np.ndarray | None:
    """A feature vector: a ``layer_output`` (spatial/token mean) or a 1-D array a debugger returned."""
    if isinstance(output, dict) and output.get("kind") == KIND_LAYER_OUTPUT:
        array = np.asarray(output.get("output"), dtype=np.float64)
        if array.ndim == 3:
            return array.mean(axis=(1, 2))
        if array.ndim == 2:
            return array.mean(axis=0)
        return array.reshape(-1) if array.ndim == 1 else None
    if isinstance(output, np.ndarray) and output.ndim == 1 and output.dtype.kind == "f" and len(output) > 1:
        return output.astype(np.float64)
    return None


def embedding_clusters(internals: CapturedInternals, table_idx: np.ndarray, failed: np.ndarray,
                       columns: dict[str, np.ndarray], min_size: int, seed: int = 0,
                       notes: list[str] | None = None) -> list[EmbeddingCluster]:
    """Failure clusters in each captured vector space that fail significantly more than the rest of their space,
    highest failure rate first; ``notes`` gets why a space gives none though it has failures.

    KMeans on the failures always finds clusters, even of random failures; a cluster is kept only when its
    one-sided Fisher exact p-value (``scipy.stats.hypergeom``) is below 0.05 / (clusters tried in all spaces).
    """
    candidates: list[tuple[float, EmbeddingCluster]] = []
    tried = 0
    for name, (idx, vectors) in internals.vectors.items():
        rows = np.searchsorted(table_idx, idx)
        usable = np.isfinite(vectors).all(axis=1)
        rows, vectors = rows[usable], vectors[usable]
        fails = failed[rows]
        k = min(MAX_CLUSTERS, int(fails.sum()) // max(min_size, 1))
        if k >= 1 and fails.all() and notes is not None:
            notes.append(f"no failure clusters in '{name}': they need the outputs of passing datapoints too, and "
                         "it holds failing ones only (keep='failing'?); keep 'all' or the worst k for clusters")
        if k < 1 or fails.all():
            continue
        tried += k
        space = StandardScaler().fit_transform(vectors)
        nearest = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(space[fails]).predict(space)
        for c in range(k):
            member = nearest == c
            if member.sum() < min_size:
                continue
            inside = int((member & fails).sum())
            p_value = float(hypergeom.sf(inside - 1, len(fails), int(fails.sum()), int(member.sum())))
            description = describe_group(rows[member & fails], rows[~fails], columns)
            candidates.append((p_value, EmbeddingCluster(name, int(member.sum()), inside, inside / int(member.sum()),
                                                         description, table_idx[rows[member]].tolist())))
    kept = [cluster for p_value, cluster in candidates if p_value < ALPHA / max(tried, 1)]
    return sorted(kept, key=lambda cluster: -cluster.failure_rate)


def describe_group(group: np.ndarray, reference: np.ndarray, columns: dict[str, np.ndarray], top: int = 3) -> str:
    """The columns that most set the rows ``group`` apart from the rows ``reference`` (positions in ``columns``):
    categorical values by over-representation, numbers by standardised mean difference. Positions, not a copy of
    the columns cut to the captured rows: that copy was the whole table again, once per cluster."""
    findings: list[tuple[float, str]] = []
    for name, values in columns.items():
        if values.dtype == object or values.dtype.kind == "b":
            for value, count in Counter(values[group].tolist()).most_common(1):
                share, base = count / max(len(group), 1), float(np.mean(values[reference] == value))
                findings.append((share - base, f"{name} = {value} ({share:.0%} vs {base:.0%})"))
            continue
        a, b = values[group].astype(np.float64), values[reference].astype(np.float64)
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        if len(a) < 2 or len(b) < 2:
            continue
        spread = np.sqrt((a.var() + b.var()) / 2)
        if spread > 0:
            effect = (a.mean() - b.mean()) / spread
            findings.append((abs(effect) / 2, f"{name} {'high' if effect > 0 else 'low'} "
                                              f"({a.mean():.3g} vs {b.mean():.3g})"))
    findings.sort(key=lambda item: -item[0])
    return "; ".join(text for _, text in findings[:top])
