"""Crafted epoch tables for the analysis tests, written with the real writer and read back."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from analysis.epoch_table import EpochTable, write_epoch_table
from run_dir.names import DATAPOINTS_DIR


def write_table(path, columns: dict[str, np.ndarray], meta: list[str], scores: dict[str, bool],
                summaries: tuple[str, ...] = (), **roles) -> EpochTable:
    """An epoch table at ``path`` with ``columns`` (meta info ``meta``, debugger summaries ``summaries``, score
    columns with higher_is_better, any other ``roles``)."""
    write_epoch_table(str(path), columns, {"scores": list(scores), "higher_is_better": scores, "meta": meta,
                                           "summaries": list(summaries), **roles})
    return EpochTable(str(path))


def capture_inputs(folder, inputs: dict[str, np.ndarray], batch: int = 250) -> None:
    """``inputs`` (name -> one row per datapoint, idx 0..n-1) written to ``folder``'s captured datapoints by the
    runners' own capture, as a run's evaluation writes them."""
    import logging

    import torch

    from runners.datapoint_capture import CaptureLimits, DatapointCapture

    capture = DatapointCapture(os.path.join(str(folder), DATAPOINTS_DIR), CaptureLimits(), logging.getLogger(__name__))
    rows = len(next(iter(inputs.values())))
    for start in range(0, rows, batch):
        idx = torch.arange(start, min(start + batch, rows))
        capture.add_batch({"inputs": {name: torch.as_tensor(values[start:start + batch])
                                      for name, values in inputs.items()},
                           "labels": {"class": idx % 4}, "meta_info": {"idx": idx}})
    assert capture.finish() is not None


def token_inputs(rng: np.random.Generator, rows: int, rare_rows: np.ndarray, length: int = 30
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Padded token sequences (0 pads; 12 to ``length`` real tokens of 200 common ids, each held by about 1 in 7
    datapoints) and their attention mask; ``rare_rows`` (a bool mask) get 3 of their tokens from 60 rare ids."""
    tokens = np.zeros((rows, length), dtype=np.int64)
    lengths = rng.integers(12, length + 1, rows)
    for row, size in enumerate(lengths):
        tokens[row, :size] = rng.integers(10, 210, size)
        if rare_rows[row]:
            tokens[row, rng.choice(size, 3, replace=False)] = rng.integers(1000, 1060, 3)
    return tokens, (tokens != 0).astype(np.int64)


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


@dataclass
class PlantedGroups:
    """A validation epoch where the truth is known: labels, a model's probabilities and a feature space."""

    label: np.ndarray
    probabilities: np.ndarray
    vectors: np.ndarray
    systematic: np.ndarray  # bool: a subgroup of class 0 the model calls class 1 every time, its labels right
    variant: np.ndarray  # bool: a subgroup of class 2 the model calls 0, 1 or 3 at random, never sure
    flipped: np.ndarray  # bool: a label flipped at random (the datapoint still looks like its class)


def nearest_centre_model(rng: np.random.Generator, vectors: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Probabilities of a model that predicts the class whose centre is nearest to a datapoint's vector."""
    distances = ((vectors[:, None, :] - centres[None]) ** 2).sum(axis=2)
    logits = -3.0 * distances / vectors.shape[1] + rng.normal(0, 0.2, size=distances.shape)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (probabilities / probabilities.sum(axis=1, keepdims=True)).astype(np.float32)


def planted_groups(rng: np.random.Generator, rows: int, classes: int = 5, dim: int = 8) -> PlantedGroups:
    """Classes around far-apart centres. 4% of the labels flipped at random. A systematic group: 40% of class 0 sit
    in a tight cluster near class 1, so the model calls them 1 every time (a model trained on labels 1 for them
    would). A variant: 30% of class 2 sit in a cluster of their own, which the model calls 0, 1 or 3 at random."""
    centres = rng.normal(0, 3, size=(classes, dim))
    truth = rng.integers(0, classes, rows)
    systematic = (truth == 0) & (rng.random(rows) < 0.4)
    variant = (truth == 2) & (rng.random(rows) < 0.3)
    flipped = ~systematic & ~variant & (rng.random(rows) < 0.04)
    label = np.where(flipped, (truth + rng.integers(1, classes, rows)) % classes, truth)
    vectors = centres[truth] + rng.normal(0, 1.0, size=(rows, dim))
    vectors[systematic] = 0.8 * centres[1] + 0.2 * centres[0] + rng.normal(0, 0.3, (int(systematic.sum()), dim))
    vectors[variant] = centres[[0, 1, 3]].mean(axis=0) + rng.normal(0, 0.5, (int(variant.sum()), dim))
    probabilities = nearest_centre_model(rng, vectors, centres)
    probabilities[variant] = 0.1
    probabilities[np.flatnonzero(variant), rng.choice([0, 1, 3], int(variant.sum()))] = 0.6
    return PlantedGroups(label, probabilities, vectors.astype(np.float32), systematic, variant, flipped)
