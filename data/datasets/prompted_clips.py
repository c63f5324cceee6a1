"""Short clips of a moving object, prompted by a point on the first frame: video object segmentation as SAM2 does
it, the mask of every frame the label.

Each clip: a background with still distractors; the target (one of ``prompted_shapes``' shapes) slides in a straight
line at ``speed`` pixels a frame and is drawn on top. Meta info: ``speed``, ``object_size`` (its share of the first
frame), ``contrast``, ``crossing``, ``shape``, and ``hue`` (which makes no difference).

Planted causes of failure (shares of datapoints, off by default; ``planted_causes()`` gives the ground truth):

- ``crossing``: an object of the target's own colour slides across the target's path, so a model that follows
  colour rather than its memory of the target's shape follows the wrong one (meta ``crossing``);
- ``fast``: the target moves three times as fast, further between frames than the memory's attention looks
  (meta ``speed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from data.datasets.planted_scenes import PlantedScenes
from data.datasets.prompted_shapes import (
    CONTRAST_RANGE,
    MAX_DISTRACTORS,
    background_image,
    colour_at,
    finish_image,
    hue_of,
    prompt_inside,
    random_shape,
)

MAX_FRAMES = 64  # a clip longer than this is refused: every frame is drawn, stored and run through the model
SPEED_RANGE = (0.6, 1.6)  # pixels a frame
FAST_FACTOR = 3.0


@dataclass(frozen=True)
class PlantedClip:
    crossing: bool
    fast: bool


class PromptedClipsDataset(PlantedScenes):
    """Clips of ``num_frames`` frames; the point prompt on frame 0 picks the target, whose masks are the label.

    Datapoint: ``inputs`` ``{'frames': (T, 3, R, R) float32, 'point': (2,) float32 (x, y) in frame 0's pixels}``,
    ``labels`` ``{'mask': (T, 1, R, R) float32 in {0, 1}}``, ``meta_info`` as in the module docstring.
    """

    PLANTED = {"crossing": (("crossing",), "slice", "an object of the target's colour crosses its path"),
               "fast": (("speed",), "slice", "the target moves three times as fast")}

    def __init__(self, num_datapoints: int = 800, num_frames: int = 6, resolution: int = 32, seed: int = 0,
                 split: str = "train", crossing: float = 0.0, fast: float = 0.0) -> None:
        if isinstance(num_frames, bool) or not isinstance(num_frames, int) or not 2 <= num_frames <= MAX_FRAMES:
            raise ValueError(f"num_frames must be between 2 and {MAX_FRAMES} (the limit of frames a clip may have: "
                             f"each is drawn, stored and run through the model), got {num_frames!r}")
        super().__init__(num_datapoints, resolution, seed, split, {"crossing": crossing, "fast": fast})
        self.num_frames = num_frames

    def __getitem__(self, idx: int) -> dict[str, Any]:
        idx, rng = self.stream(idx)
        frames, masks, meta = self._draw(rng, self.planted(idx))
        point, _ = prompt_inside(rng, masks[0])
        return {
            "inputs": {"frames": torch.stack([finish_image(rng, frame, False) for frame in frames]),
                       "point": torch.from_numpy(point)},
            "labels": {"mask": torch.from_numpy(np.stack(masks)[:, None].astype(np.float32))},
            "meta_info": {"idx": idx, **meta},
        }

    def planted(self, idx: int) -> PlantedClip:
        return PlantedClip(*self.carries(idx))

    def _draw(self, rng: np.random.Generator, planted: PlantedClip) -> tuple[list[np.ndarray], list[np.ndarray], dict]:
        """Every frame's colours and the target's mask in it."""
        res, frames_count = self.resolution, self.num_frames
        ys, xs = np.mgrid[0:res, 0:res].astype(np.float64) + 0.5
        background, base = background_image(rng, res)
        target = random_shape(rng, res, thin=False)
        contrast = float(rng.uniform(*CONTRAST_RANGE))
        colour = colour_at(rng, base, contrast)
        speed = float(rng.uniform(*SPEED_RANGE)) * (FAST_FACTOR if planted.fast else 1.0)
        start, velocity = _path(rng, res, target.radius, speed, frames_count)
        still = [(random_shape(rng, res, thin=False).mask(xs, ys, *rng.uniform(0, res, size=2)),
                  colour_at(rng, base, float(rng.uniform(*CONTRAST_RANGE))))
                 for _ in range(int(rng.integers(0, MAX_DISTRACTORS)))]
        crosser = random_shape(rng, res, thin=False) if planted.crossing else None
        middle = start + velocity * (frames_count - 1) / 2  # the crosser meets the target's path mid-clip
        across = np.array([-velocity[1], velocity[0]]) / max(float(np.linalg.norm(velocity)), 1e-6) * speed
        frames, masks = [], []
        for t in range(frames_count):
            image = background.copy()
            for mask, other in still:
                image[mask] = other
            if crosser is not None:
                image[crosser.mask(xs, ys, *(middle + across * (t - (frames_count - 1) / 2) * 2))] = colour
            mask = target.mask(xs, ys, *(start + velocity * t))
            image[mask] = colour
            frames.append(image)
            masks.append(mask)
        meta = {"speed": speed, "object_size": float(masks[0].mean()), "contrast": float(np.linalg.norm(colour - base)),
                "crossing": planted.crossing, "shape": target.kind, "hue": hue_of(colour)}
        return frames, masks, meta


def _path(rng: np.random.Generator, res: int, radius: float, speed: float,
          frames: int) -> tuple[np.ndarray, np.ndarray]:
    """A start and a velocity that keep the target inside the image for the whole clip (as far as it fits)."""
    angle = rng.uniform(0, 2 * np.pi)
    velocity = speed * np.array([np.cos(angle), np.sin(angle)])
    travel = velocity * (frames - 1)
    low = radius + 1 + np.maximum(-travel, 0)
    high = res - radius - 1 - np.maximum(travel, 0)
    start = np.where(low < high, rng.uniform(np.minimum(low, high), np.maximum(low, high)), res / 2 - travel / 2)
    return np.clip(start, 1.0, res - 1.0), velocity  # the first frame shows the target's centre, to prompt
