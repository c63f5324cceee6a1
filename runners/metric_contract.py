"""What the runner reads of a metric, checked before it could cost an epoch or break Lantern's own code.

``metric(outputs, labels)`` must give a dict of numbers per score name (a tensor, an array or a list, one number
per datapoint): checked on the first batch a process scores (a trainer's first training batch, before its first
step) and on the first batch of every evaluation pass. A metric returning formatted strings stopped the run after
a whole training epoch, inside the capture policy or ``summarize``.
``metric.buffer`` must be a dict keyed by datapoint idx: the runner gathers it from every rank for ``summarize``
(an idx that two ranks scored is refused, ``runners.unique_idx``). What ``reset_buffer`` leaves in it is
summarized with the pass: a buffer kept across passes, each overwriting the same idx, is fine; the runner checks
that no idx comes twice in a pass on the batches' idx, not on the buffer. ``summarize`` must give numbers:
the scores file, the epoch table and the viewer hold them as floats. A score that is not a number, such as
``"1.5"`` (a metric that formats its values), is refused with the score's name, never parsed; ``True``/``False``
count as 1/0 (a metric may return a boolean tensor per datapoint, ``tolist()`` gives bools) and are written so.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

import numpy as np
import torch

from utils.errors import MetricContractError
from utils.ops import describe_value

_FIX = ("see metrics/classification_metric.py and docs/guide.md (\"To score datapoints differently\") for what "
        "a metric gives")


def check_scores(scores: Any, metric: Any) -> None:
    """Refuse what ``metric(outputs, labels)`` returned for a batch unless every score is made of numbers."""
    where = f"config['metric'] ({type(metric).__name__})"
    if not isinstance(scores, dict):
        raise MetricContractError(f"{where} returned {describe_value(scores)} for a batch, not a dict {{score name: "
                                  f"one number per datapoint}}; {_FIX}")
    for key, values in scores.items():
        found = _not_a_number(values)
        if found is not None:
            raise MetricContractError(
                f"{where} returned scores[{key!r}] holding {describe_value(found[0])}, which is not a number: a "
                "metric returns one number per datapoint for each score, as a tensor (e.g. (predicted == "
                f"target).float()), an array or a list, never formatted strings; {_FIX}")


def _not_a_number(values: Any) -> Optional[tuple[Any]]:
    """``(the first value in values that is not a number,)``, or None if all are (None counts as a missing
    number)."""
    if isinstance(values, torch.Tensor):
        return (values,) if values.is_complex() else None
    if isinstance(values, np.ndarray):
        return None if values.dtype.kind in "biuf" else (values.flat[0] if values.size else values,)
    if values is None or isinstance(values, (numbers.Real, np.bool_)):
        return None
    if isinstance(values, (list, tuple)):
        return next((found for found in map(_not_a_number, values) if found is not None), None)
    return (values,)


def check_buffer(metric: Any) -> None:
    """Refuse a metric whose ``buffer`` (just reset) is not a dict keyed by idx."""
    if not isinstance(getattr(metric, "buffer", None), dict):
        raise MetricContractError(
            f"{type(metric).__name__}.buffer is {describe_value(getattr(metric, 'buffer', None))} after "
            "reset_buffer(), but the runner reads it as a dict {idx: scores of that datapoint} (add_to_buffer adds "
            f"one entry per idx); {_FIX}")


def checked_summary(summary: Any, metric: Any) -> dict:
    """``summary`` (what ``metric.summarize`` returned) with its scores as numbers: booleans become 0.0/1.0, an
    aggregated None NaN; anything else that is not a number raises ``MetricContractError``."""
    name = type(metric).__name__
    if not isinstance(summary, dict) or not isinstance(summary.get("aggregated"), dict) \
            or not isinstance(summary.get("per_datapoint"), dict):
        raise MetricContractError(f"{name}.summarize() returned {describe_value(summary)}, not a dict with "
                                  f"'aggregated' and 'per_datapoint' dicts; {_FIX}")
    aggregated = {key: float("nan") if value is None else _number(value, f"['aggregated'][{key!r}]", name)
                  for key, value in summary["aggregated"].items()}
    per_datapoint = {key: _numbers(values, f"['per_datapoint'][{key!r}]", name)
                     for key, values in summary["per_datapoint"].items()}
    return {**summary, "aggregated": aggregated, "per_datapoint": per_datapoint}


def _numbers(values: Any, where: str, metric: str) -> list:
    """A per-datapoint list as it is when it holds only floats, ints and Nones (one look at each value's type),
    else with each value through ``_number``."""
    if not isinstance(values, list):
        raise MetricContractError(f"{metric}.summarize(){where} is {describe_value(values)}, not a list of one "
                                  f"number per datapoint; {_FIX}")
    if set(map(type, values)) <= {float, int, type(None)}:
        return values
    return [None if value is None else _number(value, where, metric) for value in values]


def _number(value: Any, where: str, metric: str) -> float:
    if isinstance(value, (numbers.Real, np.bool_)):
        return float(value)
    raise MetricContractError(
        f"{metric}.summarize(){where} holds {describe_value(value)}, which is not a number: a score is a number "
        "(NaN or None where there is none; True/False count as 1/0). Return numbers, e.g. values.tolist() of the "
        f"metric's score tensors, not formatted strings; {_FIX}")
