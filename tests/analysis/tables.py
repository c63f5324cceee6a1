"""Crafted epoch tables for the analysis tests, written with the real writer and read back."""

from __future__ import annotations

import numpy as np

from analysis.epoch_table import EpochTable, write_epoch_table


def write_table(path, columns: dict[str, np.ndarray], meta: list[str], scores: dict[str, bool],
                summaries: tuple[str, ...] = (), **roles) -> EpochTable:
    """An epoch table at ``path`` with ``columns`` (meta info ``meta``, debugger summaries ``summaries``, score
    columns with higher_is_better, any other ``roles``)."""
    write_epoch_table(str(path), columns, {"scores": list(scores), "higher_is_better": scores, "meta": meta,
                                           "summaries": list(summaries), **roles})
    return EpochTable(str(path))


def classified(rng: np.random.Generator, failed: np.ndarray, classes: int = 4) -> dict[str, np.ndarray]:
    """Labels and predictions that disagree exactly where ``failed``, with the accuracy score."""
    label = rng.integers(0, classes, len(failed))
    prediction = np.where(failed, (label + rng.integers(1, classes, len(failed))) % classes, label)
    return {"idx": np.arange(len(failed)), "label": label, "prediction": prediction,
            "accuracy": (~failed).astype(np.float64)}


def probabilities_of(rng: np.random.Generator, label: np.ndarray, prediction: np.ndarray, classes: int,
                     confidence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Softmax probabilities whose argmax is ``prediction`` with logit margin ``confidence``, and their logsumexp."""
    logits = rng.normal(0, 0.3, size=(len(label), classes))
    logits[np.arange(len(label)), prediction] += confidence
    logsumexp = np.log(np.exp(logits).sum(axis=1))
    return np.exp(logits - logsumexp[:, None]).astype(np.float32), logsumexp
