"""Runs written directly (an epoch table and a scores file per epoch, as a trainer writes them), for what a trained
run cannot show on demand: missing values, a label column of floats with NaN."""

from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from analysis.epoch_table import write_epoch_table
from run_dir.names import EPOCH_TABLE_FILE

CLASS_NAMES = np.array(["circle", "square", "triangle", "cross", "ring", "star"], dtype=object)


def write_table_run(folder: str, name: str, label: np.ndarray, prediction: np.ndarray, loss: np.ndarray,
                    epochs: int = 1, meta: Optional[dict[str, np.ndarray]] = None) -> str:
    """A trainer run ``name`` of ``epochs`` epochs with the same datapoints: ``label`` (float, NaN where a datapoint
    has none, named 'unlabelled') and ``prediction`` as class ids named by ``CLASS_NAMES``, a ``cross_entropy``
    score (NaN for missing), and the meta-info columns ``meta``."""
    run = os.path.join(folder, name)
    os.makedirs(run)
    with open(os.path.join(run, "run_info.json"), "w") as f:
        json.dump({"runner": "BaseTrainer"}, f)
    known = ~np.isnan(label.astype(np.float64))
    label_name = np.array([CLASS_NAMES[int(i)] if ok else "unlabelled" for i, ok in zip(label, known)], dtype=object)
    accuracy = np.where(known, (label == prediction).astype(float), np.nan)
    columns = {"idx": np.arange(len(loss)), "label": label, "prediction": prediction, "label_name": label_name,
               "prediction_name": CLASS_NAMES[prediction], "accuracy": accuracy, "cross_entropy": loss, **(meta or {})}
    roles = {"scores": ["accuracy", "cross_entropy"], "higher_is_better": {"accuracy": True, "cross_entropy": False},
             "meta": list(meta or {}), "summaries": []}
    for epoch in range(epochs):
        epoch_dir = os.path.join(run, f"epoch_{epoch}")
        os.makedirs(epoch_dir)
        write_epoch_table(os.path.join(epoch_dir, EPOCH_TABLE_FILE), columns, roles)
        scores = {"aggregated": {"accuracy": float(np.nanmean(accuracy)), "cross_entropy": float(np.nanmean(loss))},
                  "per_datapoint": {name: [None if np.isnan(v) else float(v) for v in columns[name]]
                                    for name in ("accuracy", "cross_entropy")},
                  "datapoint_idx": list(range(len(loss))), "higher_is_better": roles["higher_is_better"]}
        with open(os.path.join(epoch_dir, "validation_scores.json"), "w") as f:
            json.dump(scores, f)
    return run
