"""Each datapoint's history over the run's validation epochs: a data map (dataset cartography, Swayamdipta et al.
2020) and forgetting events (Toneva et al. 2019), from the epoch tables every validation epoch writes.

For each datapoint, the probability the model gives its label at each validation epoch up to the analysed one
(the first epoch left out when there are four or more: before the model has learnt anything every datapoint looks
uncertain): **confidence** is its mean, **variability** its standard deviation, a **forgetting event** an epoch
where the prediction was right and is wrong at the next. The kinds of datapoint:

- *easy*: confident and stable (confidence >= 0.5, variability < 0.2);
- *ambiguous*: the model changes its mind (variability >= 0.2);
- *hard to learn*: the model consistently gives its label a low probability (confidence < 0.5, variability < 0.2).
  Mislabelled datapoints gather here, and so do systematic subgroups the model never learns: the suspects'
  neighbourhoods (``analysis/label_noise.py``, ``analysis/failure_groups.py``) tell them apart;
- *still learning*: one that would be ambiguous or hard to learn, but whose probability rose by at least ``RISE``
  from the first epoch to the last and is at its highest (within ``PEAK``) at the last. A model stopped while it was
  still learning leaves such datapoints with a low mean or a wide spread; that is not the model changing its mind.

The whole run is still learning when the mean probability of the labels rose by at least ``RUN_RISE`` over the
epochs and is at its highest at the last: the map then says so (``DataMap.note``).

The validation set is never trained on, so this is the map of how the model's view of unseen data settles.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from analysis.epoch_table import EpochTable, EpochTableError
from analysis.findings import DataMap
from run_dir import RunDir
from run_dir.names import EPOCH_TABLE_FILE, epoch_number

MIN_EPOCHS = 3
CONFIDENCE_CUT, VARIABILITY_CUT = 0.5, 0.2
RISE, PEAK, RUN_RISE = 0.2, 0.05, 0.05
KINDS = ("easy", "ambiguous", "hard to learn", "still learning")
POINTS = 3000  # datapoints drawn in the chart (SVG markers): every failure first (up to half), then a random sample


@dataclass
class History:
    epochs: list[int]
    confidence: np.ndarray  # aligned with the analysed table's idx; NaN where a datapoint has no history
    variability: np.ndarray
    forgetting: np.ndarray
    rising: np.ndarray  # bool: p(label) up by RISE from the first epoch to the last, and at its peak there
    mean_confidence: list[float]  # the mean p(label) of every datapoint with one, per epoch

    def kinds(self) -> np.ndarray:
        """Each datapoint's kind (an index into KINDS)."""
        ambiguous = self.variability >= VARIABILITY_CUT
        hard = ~ambiguous & (self.confidence < CONFIDENCE_CUT)
        kinds = np.where(ambiguous, 1, np.where(hard, 2, 0))
        return np.where((kinds > 0) & self.rising, 3, kinds)

    def still_learning(self) -> Optional[str]:
        """Why the whole run is still learning (its mean confidence still rising at the end), else None."""
        trend = self.mean_confidence
        if not trend[-1] - trend[0] >= RUN_RISE or trend[-1] < max(trend):
            return None
        shown = " → ".join(f"{value:.2f}" for value in self.mean_confidence)
        return (f"the model was still learning: the mean probability of the labels rose over the validation epochs "
                f"{self.epochs} ({shown}); datapoints it had not learnt yet are 'still learning', not ambiguous or "
                "hard to learn")


def read_history(epoch_dir: str, idx: np.ndarray, notes: list[str]) -> Optional[History]:
    """The history of the datapoints ``idx`` over the epochs of ``epoch_dir``'s run up to it; None for an evaluator,
    a run with fewer than MIN_EPOCHS epoch tables, or tables without labels and probabilities."""
    path, name = os.path.split(os.path.normpath(epoch_dir))
    last = epoch_number(name)
    if last is None:
        return None
    run = RunDir(path)
    epochs = [epoch for epoch in run.epochs_holding(EPOCH_TABLE_FILE) if epoch <= last]
    if len(epochs) < MIN_EPOCHS:
        return None
    epochs = epochs[1:] if len(epochs) > MIN_EPOCHS else epochs
    confidence = np.full((len(epochs), len(idx)), np.nan)
    correct = np.zeros((len(epochs), len(idx)), dtype=bool)
    for k, epoch in enumerate(epochs):
        try:
            rows = EpochTable(run.epoch(epoch).table).label_confidence()
        except EpochTableError as exc:
            notes.append(f"the data map leaves out epoch {epoch}: {exc}")
            continue
        if rows is None:
            return None
        where = np.searchsorted(idx, rows["idx"])
        found = (where < len(idx)) & (idx[np.minimum(where, len(idx) - 1)] == rows["idx"])
        confidence[k, where[found]] = rows["confidence"][found]
        correct[k, where[found]] = rows["correct"][found]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a datapoint without any history: NaN, as it should be
        mean, spread = np.nanmean(confidence, axis=0), np.nanstd(confidence, axis=0)
        per_epoch = [float(value) for value in np.nanmean(confidence, axis=1)]
        peak = np.nanmax(confidence, axis=0)
    forgetting = (correct[:-1] & ~correct[1:]).sum(axis=0)
    with np.errstate(invalid="ignore"):  # NaN where an epoch lacks the datapoint: not rising
        rising = (confidence[-1] - confidence[0] >= RISE) & (confidence[-1] >= peak - PEAK)
    return History(epochs, mean, spread, forgetting, rising, per_epoch)


def data_map(history: History, idx: np.ndarray, failed: np.ndarray, seed: int = 0) -> DataMap:
    """Counts of each kind, failures among them, and a sample of points for the chart."""
    kinds = history.kinds()
    known = np.isfinite(history.confidence)
    counts = {kind: int(((kinds == k) & known).sum()) for k, kind in enumerate(KINDS)}
    failures = {kind: int(((kinds == k) & known & failed).sum()) for k, kind in enumerate(KINDS)}
    rng = np.random.default_rng(seed)
    failing, passing = np.flatnonzero(known & failed), np.flatnonzero(known & ~failed)
    failing = rng.choice(failing, min(len(failing), POINTS // 2), replace=False) if len(failing) else failing
    passing = rng.choice(passing, min(len(passing), POINTS - len(failing)), replace=False) if len(passing) else passing
    shown = np.sort(np.concatenate([failing, passing]).astype(np.int64))
    points = {"idx": idx[shown].tolist(), "confidence": np.round(history.confidence[shown], 4).tolist(),
              "variability": np.round(history.variability[shown], 4).tolist(),
              "forgetting": history.forgetting[shown].tolist(), "kind": [KINDS[k] for k in kinds[shown]],
              "failed": failed[shown].tolist()}
    return DataMap(history.epochs, counts, failures, points, idx[known & (kinds == 1)], idx[known & (kinds == 2)],
                   idx[known & (kinds == 3)], [round(value, 4) for value in history.mean_confidence],
                   history.still_learning())
