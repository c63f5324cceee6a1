"""1-D sensor recordings (sums of waves and pulses with noise) with planted causes of failure and their ground
truth (``planted(idx)``): a benchmark of another modality than images for the failure analysis.

Each datapoint is one channel of ``length`` samples: a class's waveform (``CLASS_NAMES``: slow or fast sine,
square wave, sparse pulses, chirp, sawtooth) with a random amplitude, phase and frequency jitter, in a third of
the recordings under a decaying envelope, plus noise. The meta info a lab records: ``sensor`` (A..E) and
``cable_m`` (the cable's length, uniform in [0, 50] m), and four fields that carry nothing (``operator``,
``room``, ``humidity``, ``firmware_beta``). The planted causes, all off by default:

- ``systematic=(a, b)``: class ``a``'s decaying recordings are labelled ``b`` in training (an annotation rule
  gone wrong), rightly in validation: the model learns ``b`` for them. No meta column records the envelope;
- ``interference_prob=p``: that share of recordings carries an interfering wave louder than any class's waveform,
  at a frequency between theirs (a rare variant, no meta column);
- ``faulty_sensor=s``: sensor ``s``'s recordings are buried in noise (meta ``sensor``);
- ``attenuated_from=m``: a cable of ``m`` metres or more attenuates every class's signal to a sixth of its
  amplitude, under the same noise (meta ``cable_m``, a threshold);
- ``label_noise=p``: that share of labels replaced by another class at random.

Datapoints are drawn from ``numpy.random.default_rng([seed, split, idx, stream])``, each cause from a stream of
its own, so turning one on changes no other datapoint's draws.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset

from data.datasets.planted import Marks, check_planted, check_shares, other_class, planted_label
from data.datasets.synthetic_shapes import SPLIT_CODES

SENSORS = ("A", "B", "C", "D", "E")
OPERATORS = ("ana", "ben", "chen", "dara", "eli", "femi")
ROOMS = 20
MAX_CABLE_M = 50.0
DECAYING_SHARE = 1 / 3  # recordings under a decaying envelope, in every class
DECAY_RATE = 4.0  # the envelope exp(-rate * t) over the window t in [0, 1)
NOISE_STD = 0.25
FAULTY_NOISE_STD = 0.9
ATTENUATION = 1 / 6
INTERFERENCE = (3.0, 9.0)  # amplitude, cycles per window: louder than any class's waveform, between its frequencies
PULSE_WIDTH = 0.012  # a Gaussian pulse's width, as a share of the window


def _waveform(name: str, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One class's waveform over ``t`` in [0, 1), with its random phase and frequency jitter."""
    phase, jitter = rng.uniform(0, 2 * np.pi), rng.uniform(0.9, 1.1)
    if name == "slow_sine":
        return np.sin(2 * np.pi * 3 * jitter * t + phase)
    if name == "fast_sine":
        return np.sin(2 * np.pi * 6 * jitter * t + phase)
    if name == "square":
        return 0.8 * np.sign(np.sin(2 * np.pi * 4 * jitter * t + phase))
    if name == "pulses":
        centres = rng.uniform(0.05, 0.95, size=int(rng.integers(4, 7)))
        return 1.5 * np.exp(-0.5 * ((t[:, None] - centres) / PULSE_WIDTH) ** 2).sum(axis=1) - 0.3
    if name == "chirp":
        return np.sin(2 * np.pi * (2 * jitter * t + 5 * t ** 2) + phase)
    return 2 * ((4 * jitter * t + phase / (2 * np.pi)) % 1.0) - 1  # sawtooth


class PlantedSignalsDataset(Dataset):
    """Noisy 1-D waveforms with sensor and cable meta info and the planted causes of the module docstring."""

    CLASS_NAMES: tuple[str, ...] = ("slow_sine", "fast_sine", "square", "pulses", "chirp", "sawtooth")

    def __init__(self, num_datapoints: int = 2000, length: int = 128, num_classes: int = 4, seed: int = 0,
                 split: str = "train", systematic: Optional[tuple[int, int]] = None, interference_prob: float = 0.0,
                 faulty_sensor: Optional[str] = None, attenuated_from: Optional[float] = None,
                 label_noise: float = 0.0) -> None:
        check_planted(num_datapoints, num_classes, len(self.CLASS_NAMES), split, systematic)
        if length < 32:
            raise ValueError(f"length must be at least 32 samples for the waveforms to be told apart, got {length}")
        check_shares(interference_prob=interference_prob, label_noise=label_noise)
        if faulty_sensor is not None and faulty_sensor not in SENSORS:
            raise ValueError(f"faulty_sensor must be one of {SENSORS}, got {faulty_sensor!r}")
        self.num_datapoints, self.length, self.num_classes = num_datapoints, length, num_classes
        self.seed, self.split, self.systematic = seed, split, systematic
        self.interference_prob, self.faulty_sensor = interference_prob, faulty_sensor
        self.attenuated_from, self.label_noise = attenuated_from, label_noise

    def set_base_seed(self, seed: int) -> None:
        """Accepted for the runners' sake: datapoints never depend on it."""

    def __len__(self) -> int:
        return self.num_datapoints

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < self.num_datapoints:
            raise IndexError(f"index {idx} is out of range for a dataset of {self.num_datapoints} datapoints")
        true_class, decaying, meta = self._record(int(idx))
        marks = self._plant(int(idx), true_class, decaying, meta)
        signal = self._draw(int(idx), true_class, decaying, marks)
        label = planted_label(true_class, marks, self.split, self.systematic[1] if self.systematic else true_class,
                              other_class(self._rng(int(idx), 2), true_class, self.num_classes))
        return {"inputs": {"signal": torch.from_numpy(signal[None].astype(np.float32))},
                "labels": {"class": torch.tensor(label, dtype=torch.int64)},
                "meta_info": {"idx": int(idx), **meta}}

    def planted(self, idx: int) -> Marks:
        """The planted causes datapoint ``idx`` carries."""
        true_class, decaying, meta = self._record(idx)
        return self._plant(idx, true_class, decaying, meta)

    def true_class(self, idx: int) -> int:
        """The class datapoint ``idx`` was drawn as (its label unless a planted cause changed it)."""
        return self._record(idx)[0]

    def _rng(self, idx: int, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, stream])

    def _record(self, idx: int) -> tuple[int, bool, dict[str, Any]]:
        """The class, whether the envelope decays, and the meta info a lab records (the noise fields included)."""
        rng = self._rng(idx, 0)
        true_class, decaying = int(rng.integers(self.num_classes)), bool(rng.random() < DECAYING_SHARE)
        return true_class, decaying, {"sensor": SENSORS[int(rng.integers(len(SENSORS)))],
                                      "cable_m": float(rng.uniform(0, MAX_CABLE_M)),
                                      "operator": OPERATORS[int(rng.integers(len(OPERATORS)))],
                                      "room": int(rng.integers(ROOMS)),
                                      "humidity": float(rng.normal(45.0, 8.0)),
                                      "firmware_beta": bool(rng.random() < 0.3)}

    def _plant(self, idx: int, true_class: int, decaying: bool, meta: dict[str, Any]) -> Marks:
        draws = self._rng(idx, 1).random(2)
        return Marks(systematic=self.systematic is not None and decaying and true_class == self.systematic[0],
                     variant=bool(draws[0] < self.interference_prob), flipped=bool(draws[1] < self.label_noise),
                     category=meta["sensor"] == self.faulty_sensor,
                     above=self.attenuated_from is not None and meta["cable_m"] >= self.attenuated_from)

    def _draw(self, idx: int, true_class: int, decaying: bool, marks: Marks) -> np.ndarray:
        """The waveform (decaying, attenuated), then noise (more on the faulty sensor), then the interference."""
        rng = self._rng(idx, 3)
        t = np.arange(self.length) / self.length
        signal = rng.uniform(0.7, 1.2) * _waveform(self.CLASS_NAMES[true_class], t, rng)
        if decaying:
            signal *= 1.6 * np.exp(-DECAY_RATE * t)
        if marks.above:
            signal *= ATTENUATION
        signal += rng.normal(0.0, FAULTY_NOISE_STD if marks.category else NOISE_STD, size=self.length)
        if marks.variant:
            amplitude, cycles = INTERFERENCE
            signal += amplitude * np.sin(2 * np.pi * cycles * t + rng.uniform(0, 2 * np.pi))
        return signal

