"""Procedurally drawn coloured shapes: a tiny, fully reproducible vision task.

Every datapoint is drawn on demand from ``numpy.random.default_rng([seed, split, idx])``,
so it depends only on those three numbers: nothing is cached and no file is read.
Noise, low contrast, clutter, small scales and occluders make a few percent of the
datapoints genuinely hard, which gives debugging tools real failures to look at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

Mask = np.ndarray  # bool (R, R)
ShapeFn = Callable[[np.ndarray, np.ndarray], Mask]

SPLIT_CODES = {"train": 0, "val": 1, "test": 2}

# Difficulty knobs, tuned so that the reference models reach roughly 80-95%
# validation accuracy after a few CPU epochs (see models/).
SCALE_RANGE = (0.22, 0.42)  # shape radius as a fraction of the resolution
MAX_JITTER = 0.08  # shape centre offset from the image centre, fraction of resolution
MAX_ROTATION = 0.2  # radians either way
CONTRAST_RANGE = (0.15, 0.6)  # how much lighter the shape is than the background
MAX_CLUTTER = 3  # distractor strokes/blobs per image
OCCLUSION_PROB = 0.3
NOISE_STD_RANGE = (0.02, 0.15)  # Gaussian noise on [0, 1] colours

# Planted causes of failure (all off by default; see configs/examples/planted_failures_trainer.py).
HARD_SCALE_RANGE = (0.1, 0.14)  # the hard slice: small ...
HARD_CONTRAST_RANGE = (0.02, 0.06)  # ... and low-contrast shapes
MARKER_FRACTION = 1 / 8  # side of the square shortcut marker in the top-left corner, fraction of resolution
MARKER_COLOURS = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (1.0, 1.0, 0.0), (1.0, 0.0, 1.0),
                  (0.0, 1.0, 1.0), (1.0, 1.0, 1.0))  # one per class: the marker says a class by its colour
SATURATION_VALUE = 1e4  # a saturated pixel block, after normalisation: extreme activations downstream


@dataclass(frozen=True)
class Planted:
    """Which planted causes a datapoint carries (its own random stream, so images without any are unchanged)."""

    marker_class: int | None  # the class the shortcut marker shows, if one is drawn
    label_flipped: bool  # the returned label is not the drawn shape
    hard: bool  # small, low-contrast shape
    saturated: bool  # a pixel block far outside the normal range


def _regular_polygon(u: np.ndarray, v: np.ndarray, sides: int, apothem: float) -> Mask:
    """Inside test against ``sides`` half-planes (loop over edges, not pixels)."""
    angles = 2 * np.pi * np.arange(sides) / sides + np.pi / 2
    proj = u[..., None] * np.cos(angles) + v[..., None] * np.sin(angles)
    return (proj <= apothem).all(axis=-1)


def _star(u: np.ndarray, v: np.ndarray) -> Mask:
    """Five-pointed star as a radius that oscillates with the angle."""
    theta = np.arctan2(v, u)
    return np.hypot(u, v) <= 0.45 + 0.55 * np.abs(np.cos(2.5 * theta)) ** 3


# Shapes in unit coordinates: (u, v) is the pixel offset from the centre divided by
# the shape radius, already rotated; each returns the pixels that belong to the shape.
SHAPES: dict[str, ShapeFn] = {
    "circle": lambda u, v: u**2 + v**2 <= 1.0,
    "square": lambda u, v: np.maximum(np.abs(u), np.abs(v)) <= 0.75,
    "triangle": lambda u, v: _regular_polygon(u, v, 3, 0.5),
    "cross": lambda u, v: (np.minimum(np.abs(u), np.abs(v)) <= 0.28) & (np.maximum(np.abs(u), np.abs(v)) <= 1.0),
    "ring": lambda u, v: (u**2 + v**2 <= 1.0) & (u**2 + v**2 >= 0.5**2),
    "bar": lambda u, v: (np.abs(u) <= 1.0) & (np.abs(v) <= 0.3),
    "star": _star,
}


class SyntheticShapesDataset(Dataset):
    """Coloured shapes on a cluttered, noisy background, one class per shape.

    Labels index ``CLASS_NAMES``; ``num_classes=k`` uses the first ``k`` shapes.
    The dataset is fully deterministic: ``set_base_seed`` is accepted so that
    training loops may call it per epoch, but it never changes any datapoint.

    Planted causes of failure, for proving that an analysis finds them (``planted(idx)`` tells which
    datapoint carries which):

    - ``marker_prob``: that share of datapoints gets a small coloured square in the top-left corner whose
      colour names a class: the true one when ``marker_agrees`` (a shortcut to learn in training), another
      one otherwise (a validation slice that contradicts it). Meta info ``marker`` says one is drawn.
    - ``label_noise``: that share of labels is replaced by another class (meta info follows the label).
    - ``hard_fraction``: that share of shapes is small and low-contrast (visible in ``scale``, ``contrast``).
    - ``saturated_fraction``: that share of images has a pixel block at ``SATURATION_VALUE``, far outside
      the normal range (a model built with ``SmallCNN(nan_layer=...)`` turns it into NaN there).
    """

    CLASS_NAMES: tuple[str, ...] = tuple(SHAPES)

    def __init__(
        self,
        num_datapoints: int = 2000,
        resolution: int = 32,
        num_classes: int = 6,
        seed: int = 0,
        split: str = "train",
        marker_prob: float = 0.0,
        marker_agrees: bool = True,
        label_noise: float = 0.0,
        hard_fraction: float = 0.0,
        saturated_fraction: float = 0.0,
    ) -> None:
        _check_args(num_datapoints, resolution, num_classes, split, len(self.CLASS_NAMES))
        for name, share in (("marker_prob", marker_prob), ("label_noise", label_noise),
                            ("hard_fraction", hard_fraction), ("saturated_fraction", saturated_fraction)):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} is a share of datapoints between 0 and 1, got {share}")
        self.marker_prob, self.marker_agrees, self.label_noise = marker_prob, marker_agrees, label_noise
        self.hard_fraction, self.saturated_fraction = hard_fraction, saturated_fraction
        self.num_datapoints = num_datapoints
        self.resolution = resolution
        self.num_classes = num_classes
        self.seed = seed
        self.split = split
        self.base_seed: int | None = None

    def set_base_seed(self, seed: int) -> None:
        """Stored for API compatibility only: datapoints never depend on it."""
        self.base_seed = seed

    def __len__(self) -> int:
        return self.num_datapoints

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not -self.num_datapoints <= idx < self.num_datapoints:
            raise IndexError(
                f"index {idx} is out of range for a dataset of {self.num_datapoints} "
                f"datapoints; use 0 <= idx < {self.num_datapoints}"
            )
        idx = int(idx) % self.num_datapoints
        rng = np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx])
        shape = int(rng.integers(self.num_classes))
        planted = self._plant(idx, shape)
        image, meta = _draw(rng, self.CLASS_NAMES[shape], self.resolution, planted)
        image = (image - image.mean()) / max(float(image.std()), 1e-3)
        if planted.saturated:
            block = max(2, self.resolution // 16)
            image[-block:, -block:] = SATURATION_VALUE
        label = self._flip(idx, shape) if planted.label_flipped else shape
        if self.marker_prob > 0:
            meta["marker"] = planted.marker_class is not None
        return {
            "inputs": {"image": torch.from_numpy(image.transpose(2, 0, 1).astype(np.float32))},
            "labels": {"class": torch.tensor(label, dtype=torch.int64)},
            "meta_info": {"idx": idx, "class_name": self.CLASS_NAMES[label], **meta},
        }

    def planted(self, idx: int) -> Planted:
        """The planted causes datapoint ``idx`` carries (ground truth for benchmarks and tests)."""
        shape = int(np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx]).integers(self.num_classes))
        return self._plant(idx, shape)

    def _plant(self, idx: int, shape: int) -> Planted:
        rng = np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, 1])
        draws = rng.random(4)
        marker_class = None
        if draws[0] < self.marker_prob:
            others = [c for c in range(self.num_classes) if c != shape]
            marker_class = shape if self.marker_agrees else int(rng.choice(others))
        return Planted(marker_class, bool(draws[1] < self.label_noise), bool(draws[2] < self.hard_fraction),
                       bool(draws[3] < self.saturated_fraction))

    def _flip(self, idx: int, shape: int) -> int:
        rng = np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, 2])
        return int(rng.choice([c for c in range(self.num_classes) if c != shape]))


def _check_args(num_datapoints: int, resolution: int, num_classes: int, split: str, max_classes: int) -> None:
    """Reject arguments that would give an empty, illegible or mislabelled dataset."""
    if num_datapoints < 1:
        raise ValueError(f"num_datapoints must be at least 1, got {num_datapoints}")
    if resolution < 16:
        raise ValueError(f"resolution must be at least 16 pixels for shapes to be legible, got {resolution}")
    if not 2 <= num_classes <= max_classes:
        raise ValueError(
            f"num_classes must be between 2 and {max_classes} (one per shape in CLASS_NAMES), got {num_classes}"
        )
    if split not in SPLIT_CODES:
        raise ValueError(f"unknown split {split!r}; use one of {sorted(SPLIT_CODES)}")


def _draw(rng: np.random.Generator, class_name: str, res: int, planted: Planted) -> tuple[np.ndarray, dict]:
    """Paint background, clutter, the shape, maybe an occluder over it, the marker, then noise.

    The shape is always lighter than the background (random hues, fixed polarity):
    with random polarity a 2-block ViT needs far more than 2000 images to learn.
    A hard datapoint replaces its scale and contrast draws by the hard ranges (same stream position).
    """
    ys, xs = np.mgrid[0:res, 0:res].astype(np.float64) + 0.5
    colour = rng.uniform(0.4, 1.0, size=3)
    contrast = float(rng.uniform(*CONTRAST_RANGE))
    if planted.hard:
        contrast = float(np.interp(contrast, CONTRAST_RANGE, HARD_CONTRAST_RANGE))
    background = np.clip(colour - contrast * rng.uniform(0.6, 1.0, size=3), 0.0, 1.0)
    image = np.broadcast_to(background, (res, res, 3)).copy()
    clutter = int(rng.integers(0, MAX_CLUTTER + 1))
    for _ in range(clutter):
        _paint(image, _clutter_mask(rng, xs, ys, res), rng.uniform(0.0, 1.0, size=3))

    scale = float(rng.uniform(*SCALE_RANGE))
    if planted.hard:
        scale = float(np.interp(scale, SCALE_RANGE, HARD_SCALE_RANGE))
    centre = res / 2 + rng.uniform(-MAX_JITTER, MAX_JITTER, size=2) * res
    _paint(image, _shape_mask(rng, SHAPES[class_name], xs - centre[0], ys - centre[1], scale * res), colour)

    occluded = bool(rng.random() < OCCLUSION_PROB)
    if occluded:
        occluder = _occluder_mask(rng, xs - centre[0], ys - centre[1], scale * res)
        _paint(image, occluder, rng.uniform(0.0, 1.0, size=3))
    if planted.marker_class is not None:
        side = max(2, round(res * MARKER_FRACTION))
        image[:side, :side] = MARKER_COLOURS[planted.marker_class]
    noise_std = float(rng.uniform(*NOISE_STD_RANGE))
    image += rng.normal(0.0, noise_std, size=image.shape)
    meta = {
        "scale": scale,
        "occluded": occluded,
        "clutter": clutter,
        "noise_std": noise_std,
        "contrast": contrast,
    }
    return image, meta


def _paint(image: np.ndarray, mask: Mask, colour: np.ndarray) -> None:
    image[mask] = colour


def _shape_mask(rng: np.random.Generator, shape: ShapeFn, dx: np.ndarray, dy: np.ndarray, radius: float) -> Mask:
    """Rotate the pixel offsets ``dx, dy`` from the centre randomly and rasterise ``shape``."""
    angle = rng.uniform(-MAX_ROTATION, MAX_ROTATION)
    u = (dx * np.cos(angle) + dy * np.sin(angle)) / radius
    v = (-dx * np.sin(angle) + dy * np.cos(angle)) / radius
    return shape(u, v)


def _clutter_mask(rng: np.random.Generator, xs: np.ndarray, ys: np.ndarray, res: int) -> Mask:
    """A thin random stroke or a small blob: distractors, never a full shape."""
    if rng.random() < 0.5:
        cx, cy = rng.uniform(0, res, size=2)
        return (xs - cx) ** 2 + (ys - cy) ** 2 <= rng.uniform(1.0, 2.0) ** 2
    x0, y0, x1, y1 = rng.uniform(0, res, size=4)
    length = max(np.hypot(x1 - x0, y1 - y0), 1e-6)
    t = np.clip(((xs - x0) * (x1 - x0) + (ys - y0) * (y1 - y0)) / length**2, 0.0, 1.0)
    return np.hypot(xs - x0 - t * (x1 - x0), ys - y0 - t * (y1 - y0)) <= 0.7


def _occluder_mask(rng: np.random.Generator, dx: np.ndarray, dy: np.ndarray, radius: float) -> Mask:
    """An axis-aligned rectangle within one radius of the shape centre, hiding part of it."""
    x0, y0 = rng.uniform(-radius, radius * 0.3, size=2)
    w, h = rng.uniform(0.5, 1.2, size=2) * radius
    return (dx >= x0) & (dx < x0 + w) & (dy >= y0) & (dy < y0 + h)
