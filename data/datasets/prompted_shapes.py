"""Scenes of a few coloured shapes, each with its own mask, and a point prompt that picks one of them: promptable
segmentation as SAM does it, small enough to train on a CPU in a minute.

Every datapoint is drawn on demand from ``numpy.random.default_rng([seed, split, idx])``: nothing is cached and no
file is read. The target object is drawn last (on top); the prompt is a pixel inside its visible mask.

Meta info to slice by: ``object_size`` (share of the image the target covers), ``contrast`` (distance between its
colour and the background's, RGB in [0, 1]), ``touching`` (another object touches it), ``thin_parts`` (it has strokes
about one pixel wide), ``prompt_margin`` (pixels from the prompt to the mask's edge), ``shape``, ``num_objects``,
and ``hue`` and ``background_level``, which make no difference (distractors for an analysis).

Planted causes of failure (shares of datapoints, all off by default; ``planted(idx)`` tells which datapoint carries
which, ``planted_causes()`` gives them as ``PlantedCause`` ground truth, ``data/datasets/planted_scenes.py``):

- ``low_contrast``: the target's colour is close to the background's (meta ``contrast``);
- ``touching``: an object of the target's own colour touches it, so colour alone cannot tell where it ends
  (meta ``touching``);
- ``thin``: the target is a thin stroke, a ring outline or a disc with a thin handle, finer than the model's mask
  resolution (meta ``thin_parts``);
- ``streaked``: diagonal streaks over the whole image, as a faulty sensor makes, seen only in the inputs (no meta
  column says so).
"""

from __future__ import annotations

import colorsys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from data.datasets.planted_scenes import PlantedScenes

RADIUS_RANGE = (0.17, 0.3)  # object radius as a fraction of the resolution
CONTRAST_RANGE = (0.35, 0.75)  # colour distance between an object and the background
LOW_CONTRAST_RANGE = (0.05, 0.1)  # ... for a planted low-contrast target
NOISE_STD_RANGE = (0.02, 0.07)
MAX_DISTRACTORS = 3
STROKE_HALF_WIDTH = 0.6  # pixels: a thin part is about one pixel wide
STREAK_AMPLITUDE = 0.8
STREAK_PERIOD = 5.0  # pixels between streaks
PLACEMENT_TRIES = 12
MEAN, STD = 0.5, 0.25  # image normalisation: (colour - MEAN) / STD
SHAPES = ("ellipse", "rectangle", "triangle", "blob")
THIN_SHAPES = ("stick", "ring_outline", "lollipop")

Mask = np.ndarray  # bool (R, R)


@dataclass(frozen=True)
class PlantedSegmentation:
    """Which planted causes a datapoint carries (drawn from its own random stream)."""

    low_contrast: bool
    touching: bool
    thin: bool
    streaked: bool


@dataclass(frozen=True)
class ShapeSpec:
    """One object's shape, size and orientation; ``mask`` rasterises it around any centre (a clip moves it)."""

    kind: str
    radius: float  # pixels
    angle: float
    aspect: float

    def mask(self, xs: np.ndarray, ys: np.ndarray, cx: float, cy: float) -> Mask:
        dx, dy = xs - cx, ys - cy
        u = (dx * np.cos(self.angle) + dy * np.sin(self.angle)) / self.radius
        v = (-dx * np.sin(self.angle) + dy * np.cos(self.angle)) / self.radius
        return _RASTERS[self.kind](u, v, self.aspect, self.radius)


def _polygon(u: np.ndarray, v: np.ndarray, sides: int, apothem: float) -> Mask:
    angles = 2 * np.pi * np.arange(sides) / sides + np.pi / 2
    return ((u[..., None] * np.cos(angles) + v[..., None] * np.sin(angles)) <= apothem).all(axis=-1)


def _stroke(u: np.ndarray, v: np.ndarray, radius: float, length: float = 1.0) -> Mask:
    """A segment along u of half-length ``length`` (in radii), about one pixel wide."""
    along = np.clip(u, -length, length)
    return np.hypot(u - along, v) * radius <= STROKE_HALF_WIDTH


# (u, v): pixel offsets from the centre in radii, rotated; aspect squeezes v; radius (pixels) sets stroke widths
_RASTERS: dict[str, Callable[[np.ndarray, np.ndarray, float, float], Mask]] = {
    "ellipse": lambda u, v, aspect, radius: u**2 + (v / aspect) ** 2 <= 1.0,
    "rectangle": lambda u, v, aspect, radius: (np.abs(u) <= 0.85) & (np.abs(v) <= 0.85 * aspect),
    "triangle": lambda u, v, aspect, radius: _polygon(u, v / aspect, 3, 0.55),
    "blob": lambda u, v, aspect, radius: np.hypot(u, v) <= 0.75 + 0.25 * np.cos(3 * np.arctan2(v, u)),
    "stick": lambda u, v, aspect, radius: _stroke(u, v, radius),
    "ring_outline": lambda u, v, aspect, radius: np.abs(np.hypot(u, v) - 0.85) * radius <= STROKE_HALF_WIDTH,
    "lollipop": lambda u, v, aspect, radius: (np.hypot(u + 0.55, v) <= 0.45) | _stroke(u - 0.3, v, radius, 0.7),
}


def random_shape(rng: np.random.Generator, res: int, thin: bool) -> ShapeSpec:
    """A random object of the normal kinds, or of the thin ones."""
    kind = str(rng.choice(THIN_SHAPES if thin else SHAPES))
    radius = float(rng.uniform(*RADIUS_RANGE)) * res * (1.3 if thin else 1.0)
    return ShapeSpec(kind, radius, float(rng.uniform(0, np.pi)), float(rng.uniform(0.6, 1.0)))


def colour_at(rng: np.random.Generator, background: np.ndarray, contrast: float) -> np.ndarray:
    """A colour ``contrast`` away from ``background`` in a random direction (as far as [0, 1] allows)."""
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    towards_room = np.where(direction > 0, 1.0 - background, background)  # keep clear of clipping
    direction = np.where(towards_room < 0.3, -direction, direction)
    return np.clip(background + contrast * direction, 0.0, 1.0)


def background_image(rng: np.random.Generator, res: int) -> tuple[np.ndarray, np.ndarray]:
    """A smooth two-colour gradient (H, W, 3) and its colour at the centre."""
    base = rng.uniform(0.25, 0.75, size=3)
    tilt = rng.normal(0.0, 0.06, size=(2, 3))
    ramp = np.linspace(-0.5, 0.5, res)
    image = base + ramp[None, :, None] * tilt[0] + ramp[:, None, None] * tilt[1]
    return np.clip(image, 0.0, 1.0), base


def finish_image(rng: np.random.Generator, image: np.ndarray, streaked: bool) -> torch.Tensor:
    """Streaks (planted), noise, normalisation: the (3, H, W) float32 input."""
    res = image.shape[0]
    if streaked:
        ys, xs = np.mgrid[0:res, 0:res]
        phase = rng.uniform(0, STREAK_PERIOD)
        image = image + STREAK_AMPLITUDE * (((xs + ys + phase) % STREAK_PERIOD) < 1.5)[..., None]
    image = image + rng.normal(0.0, rng.uniform(*NOISE_STD_RANGE), size=image.shape)
    return torch.from_numpy(((image - MEAN) / STD).transpose(2, 0, 1).astype(np.float32))


def prompt_inside(rng: np.random.Generator, mask: Mask) -> tuple[np.ndarray, int]:
    """A random pixel of ``mask`` as an (x, y) point at the pixel's centre, and its distance in pixels to the
    mask's edge (how many erosions it survives, up to 8)."""
    ys, xs = np.nonzero(mask)
    pick = int(rng.integers(len(xs)))
    x, y = int(xs[pick]), int(ys[pick])
    margin, eroded = 0, mask
    while margin < 8:
        eroded = _eroded(eroded)
        if not eroded[y, x]:
            break
        margin += 1
    return np.array([x + 0.5, y + 0.5], dtype=np.float32), margin


def _eroded(mask: Mask) -> Mask:
    """The pixels of ``mask`` whose 4 neighbours are in it too (outside the image counts as outside the mask)."""
    out = mask.copy()
    out[1:] &= mask[:-1]
    out[:-1] &= mask[1:]
    out[:, 1:] &= mask[:, :-1]
    out[:, :-1] &= mask[:, 1:]
    out[[0, -1]] = False
    out[:, [0, -1]] = False
    return out


def touches(a: Mask, b: Mask) -> bool:
    """Whether ``b`` overlaps ``a`` or lies next to it (4-neighbourhood)."""
    grown = a.copy()
    grown[1:] |= a[:-1]
    grown[:-1] |= a[1:]
    grown[:, 1:] |= a[:, :-1]
    grown[:, :-1] |= a[:, 1:]
    return bool((grown & b).any())


def hue_of(colour: np.ndarray) -> float:
    return float(colorsys.rgb_to_hsv(*colour)[0])


class PromptedShapesDataset(PlantedScenes):
    """Scenes of 1 to 4 shapes; the point prompt picks the target, whose mask is the label.

    Datapoint: ``inputs`` ``{'image': (3, R, R) float32, 'point': (2,) float32 (x, y) in pixels}``,
    ``labels`` ``{'mask': (1, R, R) float32 in {0, 1}}``, ``meta_info`` as in the module docstring.
    """

    PLANTED = {
        "low_contrast": (("contrast",), "slice", "the target's colour is close to the background's"),
        "touching": (("touching",), "slice", "an object of the target's colour touches it"),
        "thin": (("thin_parts", "shape"), "slice", "the target has strokes about one pixel wide (a stick, a ring "
                                                   "outline, a disc with a handle)"),
        "streaked": ((), "group", "diagonal streaks over the image, seen only in the inputs"),
    }

    def __init__(self, num_datapoints: int = 2000, resolution: int = 32, seed: int = 0, split: str = "train",
                 low_contrast: float = 0.0, touching: float = 0.0, thin: float = 0.0, streaked: float = 0.0) -> None:
        super().__init__(num_datapoints, resolution, seed, split, {
            "low_contrast": low_contrast, "touching": touching, "thin": thin, "streaked": streaked})

    def __getitem__(self, idx: int) -> dict[str, Any]:
        idx, rng = self.stream(idx)
        planted = self.planted(idx)
        image, mask, meta = draw_scene(rng, self.resolution, planted)
        point, margin = prompt_inside(rng, mask)
        return {
            "inputs": {"image": finish_image(rng, image, planted.streaked), "point": torch.from_numpy(point)},
            "labels": {"mask": torch.from_numpy(mask[None].astype(np.float32))},
            "meta_info": {"idx": idx, **meta, "prompt_margin": margin},
        }

    def planted(self, idx: int) -> PlantedSegmentation:
        """The planted causes datapoint ``idx`` carries."""
        return PlantedSegmentation(*self.carries(idx))


def draw_scene(rng: np.random.Generator, res: int, planted: PlantedSegmentation) -> tuple[np.ndarray, Mask, dict]:
    """Background, distractors, then the target on top: the (R, R, 3) colours in [0, 1], the target's visible
    mask and its meta info."""
    ys, xs = np.mgrid[0:res, 0:res].astype(np.float64) + 0.5
    image, background = background_image(rng, res)
    target = random_shape(rng, res, planted.thin)
    contrast = float(rng.uniform(*(LOW_CONTRAST_RANGE if planted.low_contrast else CONTRAST_RANGE)))
    colour = colour_at(rng, background, contrast)
    margin = target.radius + 1
    centre = rng.uniform(margin, res - margin, size=2) if res > 2 * margin else np.array([res / 2, res / 2])
    target_mask = target.mask(xs, ys, *centre)
    others = _distractors(rng, res, xs, ys, target_mask, background, int(rng.integers(0, MAX_DISTRACTORS + 1)))
    if planted.touching:
        others.append((_touching_neighbour(rng, res, xs, ys, target, centre), colour))
    for mask, other_colour in others:
        image[mask] = other_colour
    image[target_mask] = colour
    meta = {
        "object_size": float(target_mask.mean()),
        "contrast": float(np.linalg.norm(colour - background)),
        "touching": any(touches(target_mask, mask) for mask, _ in others),
        "thin_parts": planted.thin,
        "shape": target.kind,
        "num_objects": 1 + len(others),
        "hue": hue_of(colour),
        "background_level": float(background.mean()),
    }
    return image, target_mask, meta


def _distractors(rng: np.random.Generator, res: int, xs: np.ndarray, ys: np.ndarray, target: Mask,
                 background: np.ndarray, count: int) -> list[tuple[Mask, np.ndarray]]:
    """``count`` objects placed clear of the target (and one another), each in a colour of its own."""
    placed: list[tuple[Mask, np.ndarray]] = []
    taken = target.copy()
    for _ in range(count):
        shape = random_shape(rng, res, thin=False)
        colour = colour_at(rng, background, float(rng.uniform(*CONTRAST_RANGE)))
        for _ in range(PLACEMENT_TRIES):
            mask = shape.mask(xs, ys, *rng.uniform(0, res, size=2))
            if mask.any() and not touches(taken, mask):
                placed.append((mask, colour))
                taken |= mask
                break
    return placed


def _touching_neighbour(rng: np.random.Generator, res: int, xs: np.ndarray, ys: np.ndarray, target: ShapeSpec,
                        centre: np.ndarray) -> Mask:
    """An object beside the target whose edge meets the target's (the caller paints it in the target's colour)."""
    shape = random_shape(rng, res, thin=False)
    angle = rng.uniform(0, 2 * np.pi)
    direction = np.array([np.cos(angle), np.sin(angle)])
    target_mask = target.mask(xs, ys, *centre)
    for distance in np.arange(target.radius + shape.radius, 0, -1.0):  # slide in until the two meet
        mask = shape.mask(xs, ys, *(centre + distance * direction))
        if touches(target_mask, mask):
            return mask
    return shape.mask(xs, ys, *centre)
