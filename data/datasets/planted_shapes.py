"""Shapes photographed at sites, on devices, under an exposure: planted causes of failure of a structure
``SyntheticShapesDataset``'s do not have, each with its ground truth (``planted(idx)``).

Every datapoint carries the meta info a data team records (``site``, ``device``, ``exposure``) and four fields
that have nothing to do with anything (``operator``, ``lot``, ``temperature``, ``night_shift``): an analysis that
names one of those has been fooled by chance. The planted causes, all off by default:

- ``degraded=(site, device)``: that conjunction's images are blurred and noisy (neither value alone matters);
- ``dim_below=e``: the shape fades smoothly as ``exposure`` (uniform in [0, 1]) falls below ``e``;
- ``artifact_prob=p``: that share of images carries a stripe artifact, which no meta field records;
- ``frame_prob=p`` with ``frame_agrees``: a coloured frame that names a class (the true one: a shortcut to
  learn in training; another one: a validation group that contradicts it); meta info ``framed``;
- ``outline_prob=p``: that share of ``outline_class``'s shapes is drawn as a thin outline, which no meta field
  records (a circle drawn so looks like a ring: a confident, consistent confusion of one class pair that is not
  label noise);
- ``pair_flip=(a, b, p)``: labels of classes ``a`` and ``b`` swapped with probability ``p`` (an annotator who
  confuses two classes);
- ``label_noise=p``: that share of labels replaced by another class;
- ``systematic=(a, b, p)``: that share of class ``a``'s shapes is painted red (``SYSTEMATIC_COLOUR``, no meta
  field records it) and labelled ``b`` in training, rightly in validation (an annotator who called every red
  ``a`` a ``b``): a group the model learns the wrong class for, which is not label noise.

Datapoints are drawn from ``numpy.random.default_rng([seed, split, idx])`` as in ``SyntheticShapesDataset``;
each cause draws from a stream of its own, so turning one on changes no other datapoint's draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset

from data.datasets.synthetic_shapes import (
    CONTRAST_RANGE,
    MAX_CLUTTER,
    MAX_JITTER,
    NOISE_STD_RANGE,
    OCCLUSION_PROB,
    SCALE_RANGE,
    SHAPES,
    SPLIT_CODES,
    _check_args,
    _clutter_mask,
    _occluder_mask,
    _shape_mask,
)

SITES = ("A", "B", "C", "D", "E")
DEVICES = ("new", "old")
OLD_DEVICE_SHARE = 0.4
OPERATORS = ("ana", "ben", "chen", "dara", "eli", "femi")
LOTS = 30
MIN_VISIBILITY = 0.06  # the faintest a dim shape gets, as a share of its contrast
DEGRADED_NOISE = 0.45  # extra noise on a degraded image
ARTIFACT_PERIOD = 4  # pixels between the artifact's stripes
ARTIFACT_AMPLITUDE = 0.7
OUTLINE_WIDTH = 0.14  # the outline's thickness, as a share of the shape's radius
FRAME_COLOURS = ((1.0, 0.5, 0.0), (0.0, 0.6, 0.3), (0.5, 0.0, 1.0), (0.9, 0.9, 0.9), (0.0, 0.0, 0.0),
                 (1.0, 0.0, 0.5), (0.3, 0.3, 1.0))  # one per class
SYSTEMATIC_COLOUR = (1.0, 0.1, 0.1)  # outside the shapes' own colours, each channel in [0.4, 1]


@dataclass(frozen=True)
class PlantedCauses:
    """Which planted causes a datapoint carries (ground truth; only ``framed`` and the meta fields are visible)."""

    degraded: bool
    dim: bool  # exposure below dim_below
    artifact: bool
    frame_class: Optional[int]
    outline: bool
    pair_flipped: bool
    label_flipped: bool
    systematic: bool = False  # painted red, labelled as another class in training

    @property
    def mislabelled(self) -> bool:
        return self.pair_flipped or self.label_flipped


class PlantedShapesDataset(Dataset):
    """Coloured shapes with site, device and exposure meta info and the planted causes of the module docstring."""

    CLASS_NAMES: tuple[str, ...] = tuple(SHAPES)

    def __init__(self, num_datapoints: int = 2000, resolution: int = 28, num_classes: int = 5, seed: int = 0,
                 split: str = "train", degraded: Optional[tuple[str, str]] = None, dim_below: float = 0.0,
                 artifact_prob: float = 0.0, frame_prob: float = 0.0, frame_agrees: bool = True,
                 outline_prob: float = 0.0, outline_class: int = 0,
                 pair_flip: Optional[tuple[int, int, float]] = None, label_noise: float = 0.0,
                 systematic: Optional[tuple[int, int, float]] = None) -> None:
        _check_args(num_datapoints, resolution, num_classes, split, len(self.CLASS_NAMES))
        for name, share in (("dim_below", dim_below), ("artifact_prob", artifact_prob), ("frame_prob", frame_prob),
                            ("outline_prob", outline_prob), ("label_noise", label_noise),
                            ("pair_flip's probability", pair_flip[2] if pair_flip else 0.0),
                            ("systematic's share", systematic[2] if systematic else 0.0)):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} is a share between 0 and 1, got {share}")
        if degraded is not None and (degraded[0] not in SITES or degraded[1] not in DEVICES):
            raise ValueError(f"degraded must be a (site, device) pair from {SITES} x {DEVICES}, got {degraded}")
        for name, cls in (("outline_class", outline_class), *(("pair_flip class", c) for c in (pair_flip or ())[:2]),
                          *(("systematic class", c) for c in (systematic or ())[:2])):
            if not 0 <= cls < num_classes:
                raise ValueError(f"{name} {cls} is not a class of {num_classes}")
        self.num_datapoints, self.resolution, self.num_classes = num_datapoints, resolution, num_classes
        self.seed, self.split = seed, split
        self.degraded, self.dim_below, self.artifact_prob = degraded, dim_below, artifact_prob
        self.frame_prob, self.frame_agrees = frame_prob, frame_agrees
        self.outline_prob, self.outline_class = outline_prob, outline_class
        self.pair_flip, self.label_noise, self.systematic = pair_flip, label_noise, systematic

    def set_base_seed(self, seed: int) -> None:
        """Accepted for the runners' sake: datapoints never depend on it."""

    def __len__(self) -> int:
        return self.num_datapoints

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < self.num_datapoints:
            raise IndexError(f"index {idx} is out of range for a dataset of {self.num_datapoints} datapoints")
        shape, meta = self._record(int(idx))
        planted = self._plant(int(idx), shape, meta)
        image = self._draw(int(idx), shape, meta, planted)
        label = self._label(int(idx), shape, planted)
        if self.frame_prob > 0:
            meta["framed"] = planted.frame_class is not None
        return {"inputs": {"image": torch.from_numpy(image.transpose(2, 0, 1).astype(np.float32))},
                "labels": {"class": torch.tensor(label, dtype=torch.int64)},
                "meta_info": {"idx": int(idx), **meta}}

    def planted(self, idx: int) -> PlantedCauses:
        """The planted causes datapoint ``idx`` carries."""
        shape, meta = self._record(idx)
        return self._plant(idx, shape, meta)

    def _rng(self, idx: int, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, stream])

    def _record(self, idx: int) -> tuple[int, dict[str, Any]]:
        """The shape and the meta info a data team would record (the noise fields included)."""
        rng = self._rng(idx, 0)
        shape = int(rng.integers(self.num_classes))
        return shape, {"site": SITES[int(rng.integers(len(SITES)))],
                       "device": DEVICES[int(rng.random() < OLD_DEVICE_SHARE)],
                       "exposure": float(rng.random()),
                       "operator": OPERATORS[int(rng.integers(len(OPERATORS)))],
                       "lot": int(rng.integers(LOTS)),
                       "temperature": float(rng.normal(21.0, 2.0)),
                       "night_shift": bool(rng.random() < 0.3)}

    def _plant(self, idx: int, shape: int, meta: dict[str, Any]) -> PlantedCauses:
        draws = self._rng(idx, 1).random(5)
        frame_class = None
        if draws[0] < self.frame_prob:
            others = [c for c in range(self.num_classes) if c != shape]
            frame_class = shape if self.frame_agrees else int(self._rng(idx, 2).choice(others))
        pair_flipped = False
        if self.pair_flip is not None:
            a, b, p = self.pair_flip
            pair_flipped = shape in (a, b) and bool(draws[1] < p)
        return PlantedCauses(
            degraded=self.degraded is not None and (meta["site"], meta["device"]) == tuple(self.degraded),
            dim=meta["exposure"] < self.dim_below, artifact=bool(draws[2] < self.artifact_prob),
            frame_class=frame_class, outline=shape == self.outline_class and bool(draws[3] < self.outline_prob),
            pair_flipped=pair_flipped, label_flipped=not pair_flipped and bool(draws[4] < self.label_noise),
            systematic=self.systematic is not None and shape == self.systematic[0]
            and bool(self._rng(idx, 5).random() < self.systematic[2]))

    def _label(self, idx: int, shape: int, planted: PlantedCauses) -> int:
        if planted.systematic and self.split == "train":
            return self.systematic[1]
        if planted.pair_flipped:
            a, b, _ = self.pair_flip
            return b if shape == a else a
        if planted.label_flipped:
            return int(self._rng(idx, 3).choice([c for c in range(self.num_classes) if c != shape]))
        return shape

    def _draw(self, idx: int, shape: int, meta: dict[str, Any], planted: PlantedCauses) -> np.ndarray:
        """Background, clutter, the shape (faded by a low exposure, maybe as an outline), an occluder, the frame,
        noise; then the degradation and the artifact; normalised."""
        rng, res = self._rng(idx, 4), self.resolution
        ys, xs = np.mgrid[0:res, 0:res].astype(np.float64) + 0.5
        colour = rng.uniform(0.4, 1.0, size=3)
        if planted.systematic:
            colour = np.array(SYSTEMATIC_COLOUR)
        contrast = float(rng.uniform(*CONTRAST_RANGE))
        if self.dim_below > 0:
            contrast *= float(np.clip(meta["exposure"] / self.dim_below, MIN_VISIBILITY, 1.0))
        background = np.clip(colour - contrast * rng.uniform(0.6, 1.0, size=3), 0.0, 1.0)
        image = np.broadcast_to(background, (res, res, 3)).copy()
        for _ in range(int(rng.integers(0, MAX_CLUTTER + 1))):
            image[_clutter_mask(rng, xs, ys, res)] = rng.uniform(0.0, 1.0, size=3)
        radius = float(rng.uniform(*SCALE_RANGE)) * res
        centre = res / 2 + rng.uniform(-MAX_JITTER, MAX_JITTER, size=2) * res
        dx, dy = xs - centre[0], ys - centre[1]
        mask = _shape_mask(rng, SHAPES[self.CLASS_NAMES[shape]], dx, dy, radius)
        if planted.outline:
            mask &= np.hypot(dx, dy) >= radius * (1 - OUTLINE_WIDTH)
        image[mask] = colour
        if rng.random() < OCCLUSION_PROB:
            image[_occluder_mask(rng, dx, dy, radius)] = rng.uniform(0.0, 1.0, size=3)
        if planted.frame_class is not None:
            side = max(1, res // 14)
            frame = np.zeros((res, res), dtype=bool)
            frame[:side], frame[-side:], frame[:, :side], frame[:, -side:] = True, True, True, True
            image[frame] = FRAME_COLOURS[planted.frame_class]
        image += rng.normal(0.0, float(rng.uniform(*NOISE_STD_RANGE)), size=image.shape)
        if planted.degraded:
            image = _blurred(image, passes=4) + rng.normal(0.0, DEGRADED_NOISE, size=image.shape)
        if planted.artifact:
            phase = rng.integers(ARTIFACT_PERIOD)
            stripes = ((xs + ys + phase) % ARTIFACT_PERIOD < ARTIFACT_PERIOD / 2)[..., None]
            image = image + ARTIFACT_AMPLITUDE * np.where(stripes, 1.0, -1.0)
        return (image - image.mean()) / max(float(image.std()), 1e-3)


def _blurred(image: np.ndarray, passes: int = 3) -> np.ndarray:
    """A 3x3 box blur applied ``passes`` times (edges padded by repetition)."""
    for _ in range(passes):
        padded = np.pad(image, ((1, 1), (1, 1), (0, 0)), mode="edge")
        image = sum(padded[dy:dy + image.shape[0], dx:dx + image.shape[1]] for dy in range(3) for dx in range(3)) / 9
    return image
