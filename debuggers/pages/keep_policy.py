"""Capture policies: whose full debug outputs are written, decided in the evaluation step itself.

Summaries (``BaseDebugger.summary``, the epoch table's columns) are kept for every datapoint whatever the
policy; a policy decides only which datapoints' full outputs go to the pages. It reads the scores the
metric has just given the batch, so capture never needs a second pass. ``keep`` values::

    'all'                                                 every datapoint (the default)
    'failing'                                             wrong predictions: per-datapoint 'accuracy' below 1
    {'failing': {'metric': 'cross_entropy', 'above': 1}}  a score past a threshold ('below' or 'above')
    {'worst': 20, 'by': 'cross_entropy'}                  the 20 worst of the epoch by a score

Worst k holds the outputs of the k worst datapoints seen so far in memory (copied, so the batch is freed)
and writes them when the epoch ends; under ``torchrun`` the k are the worst of all ranks together.
A datapoint's kept outputs are written once, together, when every policy has decided about it.
"""

from __future__ import annotations

import difflib
import heapq
import math
from typing import Any, Optional

import numpy as np
import torch

from debuggers.pages.batch_values import DatapointValues, take_rows
from debuggers.pages.host_copies import copy_arrays
from utils import distributed
from utils.errors import ConfigError

KEEP_HELP = ("keep must be 'all', 'failing', {'failing': {'metric': <score>, 'below' or 'above': <number>}} "
             "or {'worst': <k>, 'by': <score>} (optionally with 'higher_is_better': True or False)")
Scores = dict[str, np.ndarray]
# Datapoint indices, their outputs ({debugger name: output}), and the same outputs as one batch value
# (``debuggers.pages.batch_values``) when they are rows of the batch's outputs, else None.
Batch = tuple[list[int], list[dict[str, Any]], Any]


class KeepAll:
    """Every datapoint's outputs."""

    def check(self, scores: Scores) -> None:
        """Nothing to check: no score is read."""

    def mask(self, scores: Scores, size: int) -> np.ndarray:
        return np.ones(size, dtype=bool)

    def describe(self) -> str:
        return "all"


class KeepFailing:
    """Datapoints whose score ``metric`` is below (or above) ``threshold``, or not a number."""

    def __init__(self, metric: str, threshold: float, below: bool) -> None:
        self.metric, self.threshold, self.below = metric, threshold, below

    def check(self, scores: Scores) -> None:
        """Raise ``ConfigError`` unless the metric gives the score this policy reads."""
        score_column(scores, self.metric)

    def mask(self, scores: Scores, size: int) -> np.ndarray:
        values = score_column(scores, self.metric)
        return np.isnan(values) | (values < self.threshold if self.below else values > self.threshold)

    def describe(self) -> str:
        return f"failing: {self.metric} {'<' if self.below else '>'} {self.threshold:g}"


class KeepWorst:
    """The ``k`` datapoints of the epoch with the worst score ``metric`` (a score that is not a number is worst)."""

    def __init__(self, k: int, metric: str, higher_is_better: Optional[bool]) -> None:
        self.k, self.metric, self.higher_is_better = k, metric, higher_is_better
        self._heap: list[tuple[float, int]] = []  # (badness, idx), the least bad on top

    def start_epoch(self) -> None:
        self._heap = []

    def check(self, scores: Scores) -> None:
        """Raise ``ConfigError`` unless the metric gives the score, and someone says which way is worse (a
        wrong name is reported as such, not as a missing direction)."""
        score_column(scores, self.metric)
        if self.higher_is_better is None:
            raise ConfigError(f"keep {{'worst': {self.k}, 'by': '{self.metric}'}}: the metric does not say whether "
                              f"a higher '{self.metric}' is better; add 'higher_is_better': True or False")

    def badness(self, scores: Scores) -> np.ndarray:
        self.check(scores)
        values = scores[self.metric]
        return np.where(np.isnan(values), np.inf, -values if self.higher_is_better else values)

    def offer(self, idx: int, badness: float) -> tuple[bool, Optional[int]]:
        """Whether ``idx`` is among the k worst so far, and the idx it pushed out (if any)."""
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, (badness, idx))
            return True, None
        if badness <= self._heap[0][0]:
            return False, None
        return True, heapq.heapreplace(self._heap, (badness, idx))[1]

    def chosen(self) -> set[int]:
        """The k worst of every rank's candidates (every rank calls this: it gathers)."""
        candidates = [pair for part in distributed.gather_objects(self._heap) for pair in part]
        return {idx for _, idx in heapq.nlargest(self.k, candidates)}

    def describe(self) -> str:
        return f"worst {self.k} by {self.metric}"


class CapturePolicy:
    """Each debugger's policy, applied batch by batch: ``select`` returns the outputs to write now."""

    def __init__(self, policies: dict[str, KeepAll | KeepFailing | KeepWorst]) -> None:
        self.policies = policies
        self.keeps_all = all(isinstance(p, KeepAll) for p in policies.values())
        self._worst = {name: p for name, p in policies.items() if isinstance(p, KeepWorst)}
        self._now = {name: p for name, p in policies.items() if not isinstance(p, KeepWorst)}
        self._waiting: dict[int, dict[str, Any]] = {}  # outputs of datapoints some worst-k policy still holds

    def use_metric_directions(self, higher_is_better: dict[str, bool]) -> None:
        """Worst-k policies that did not say which way their score is better take the metric's word."""
        for policy in self._worst.values():
            if policy.higher_is_better is None:
                policy.higher_is_better = higher_is_better.get(policy.metric)

    def check_scores(self, scores: Optional[dict[str, Any]], size: int) -> None:
        """Raise ``ConfigError`` when a policy reads a score the metric does not give: called on the first
        validation batch of every epoch, so a wrong name stops the run there, not at the first checkpoint
        epoch (summaries-only and debugger-off epochs select nothing)."""
        arrays = scores_as_arrays(scores, size)
        for policy in self.policies.values():
            policy.check(arrays)

    def start_epoch(self) -> None:
        self._waiting = {}
        for policy in self._worst.values():
            policy.start_epoch()

    def select(self, idx: list[int], per_name: dict[str, list[Any]], scores: Optional[dict[str, Any]],
               batch_values: Optional[dict[str, Any]] = None) -> Batch:
        """The outputs to write now, per datapoint of the batch; worst-k candidates wait for the epoch's end.

        ``batch_values``: each debugger's outputs as a batch value (``split_batch_value``), whose rows the
        returned batch value takes."""
        if self.keeps_all:
            names = list(per_name)
            if batch_values is not None and list(batch_values) == names:  # each datapoint's made if asked for
                return list(idx), DatapointValues(batch_values, range(len(idx))), batch_values
            return list(idx), [dict(zip(names, row)) for row in zip(*per_name.values())], batch_values
        arrays = scores_as_arrays(scores, len(idx))
        masks = {name: policy.mask(arrays, len(idx)) for name, policy in self._now.items()}
        badness = {name: policy.badness(arrays) for name, policy in self._worst.items()}
        ready: list[tuple[int, dict[str, Any]]] = []
        rows: list[int] = []  # positions in the batch of this batch's outputs in ``ready``
        for row, i in enumerate(idx):
            kept = {name: per_name[name][row] for name, mask in masks.items() if mask[row]}
            held = False
            for name, policy in self._worst.items():
                admitted, pushed_out = policy.offer(i, float(badness[name][row]))
                if pushed_out is not None:
                    ready += self._release(pushed_out, name)
                if admitted:
                    kept[name] = per_name[name][row]
                    held = True
            if held:
                self._waiting[i] = copy_arrays(kept)  # a held output must not keep its batch's arrays alive
            elif kept:
                rows.append(row)
                ready.append((i, kept))
        return _as_batch(ready, _rows_of(batch_values, ready, rows))

    def finish(self) -> Batch:
        """The waiting datapoints' outputs that the epoch's worst k keep (every rank calls this: it gathers)."""
        chosen = {name: policy.chosen() for name, policy in self._worst.items()}
        ready = [(i, {name: output for name, output in outputs.items() if name not in chosen or i in chosen[name]})
                 for i, outputs in sorted(self._waiting.items())]
        self._waiting = {}
        return _as_batch([(i, outputs) for i, outputs in ready if outputs], None)

    def describe(self) -> dict[str, str]:
        return {name: policy.describe() for name, policy in self.policies.items()}

    def _release(self, idx: int, name: str) -> list[tuple[int, dict[str, Any]]]:
        """``idx`` left the worst k of ``name``: write what other policies keep once none holds it."""
        self._waiting[idx].pop(name)
        if not self._worst.keys().isdisjoint(self._waiting[idx]):
            return []  # another worst-k policy still holds it
        outputs = self._waiting.pop(idx)
        return [(idx, outputs)] if outputs else []


def build_capture_policy(default: Any, per_debugger: dict[str, Any]) -> CapturePolicy:
    """``per_debugger``: each debugger's own ``keep`` (None: the ``default``)."""
    return CapturePolicy({name: build_keep_policy(default if spec is None else spec,
                                                  f"debugger '{name}'" if spec is not None else "keep")
                          for name, spec in per_debugger.items()})


def build_keep_policy(spec: Any, where: str) -> KeepAll | KeepFailing | KeepWorst:
    """The policy a ``keep`` config value names."""
    if spec == "all":
        return KeepAll()
    if spec == "failing":
        return KeepFailing("accuracy", 1.0, below=True)
    if isinstance(spec, dict) and set(spec) == {"failing"} and isinstance(spec["failing"], dict):
        rule = spec["failing"]
        sides = [side for side in ("below", "above") if side in rule]
        if len(sides) != 1 or set(rule) != {"metric", sides[0]} or not _is_number(rule[sides[0]]):
            raise ConfigError(f"{where}: keep {spec!r} is not one score and one threshold; {KEEP_HELP}")
        return KeepFailing(str(rule["metric"]), float(rule[sides[0]]), below=sides[0] == "below")
    if isinstance(spec, dict) and {"worst", "by"} <= set(spec) <= {"worst", "by", "higher_is_better"}:
        k, direction = spec["worst"], spec.get("higher_is_better")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"{where}: keep 'worst' must be a positive int (how many datapoints), got {k!r}")
        if direction is not None and not isinstance(direction, bool):
            raise ConfigError(f"{where}: keep 'higher_is_better' must be True or False, got {direction!r}")
        return KeepWorst(k, str(spec["by"]), direction)
    raise ConfigError(f"{where}: unknown keep policy {spec!r}; {KEEP_HELP}")


def score_column(scores: Scores, metric: str) -> np.ndarray:
    if metric not in scores:
        close = difflib.get_close_matches(metric, list(scores), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"the keep policy reads the score '{metric}'{hint}, but the metric gives {sorted(scores)} "
                          "per datapoint; name one of those ('failing' alone reads 'accuracy')")
    return scores[metric]


def scores_as_arrays(scores: Optional[dict[str, Any]], size: int) -> Scores:
    """The metric's per-datapoint scores of a batch as float arrays (scores of another length are skipped)."""
    arrays = {}
    for name, values in (scores or {}).items():
        array = torch.as_tensor(values).detach().cpu().double().numpy().reshape(-1)
        if array.shape == (size,):
            arrays[name] = array
    return arrays


def _as_batch(rows: list[tuple[int, dict[str, Any]]], batch_value: Any) -> Batch:
    return [i for i, _ in rows], [outputs for _, outputs in rows], batch_value


def _rows_of(batch_values: Optional[dict[str, Any]], ready: list[tuple[int, dict[str, Any]]], rows: list[int]) -> Any:
    """The batch value of the outputs ``ready`` when they are all the batch's (at ``rows``; none released from
    an earlier batch) with the same debuggers each."""
    if batch_values is None or not ready or len(rows) != len(ready):
        return None
    names = list(ready[0][1])
    if any(list(outputs) != names for _, outputs in ready):
        return None
    return take_rows({name: batch_values[name] for name in names}, rows)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
