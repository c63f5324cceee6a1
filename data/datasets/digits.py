"""Real handwritten digits, nothing planted: scikit-learn's ``load_digits`` (1,797 scans of 8x8 pixels, ink 0 to
16, shipped inside the package, so nothing is downloaded), with the meta info a practitioner would compute to
understand its failures.

The split is fixed by ``seed``: a permutation of the 1,797 images, the first ``val_share`` of it validation, the
rest training (``train_limit``: only that many of them, for a weaker model). Images are upsampled to
``resolution`` (bilinear) and standardised, one channel.

Meta info, computed from the 8x8 pixels (``INKED``: a pixel of at least half the full ink; rows and columns
counted from the top left):

- ``ink``: the total ink, in full pixels (the sum of the pixels / 16);
- ``area``: the inked pixels;
- ``thickness``: the mean length of the horizontal runs of inked pixels, the stroke's width in pixels;
- ``width``, ``height``: the bounding box of the pixels with any ink (at least ``TRACE``), in pixels (the scans
  were size-normalised: nearly every one is 8 high, so ``aspect`` is nearly ``width`` / 8);
- ``aspect``: width / height;
- ``slant``: how much the strokes lean right (columns gained per row going up; least squares of the column on
  the row, weighted by ink);
- ``centroid_x``, ``centroid_y``: the ink-weighted centre, in pixels.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

FULL_INK = 16.0
INKED = 8.0
TRACE = 4.0
MEAN, STD = 0.31, 0.32  # of the upsampled pixels over the whole set, to standardise them


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 8, 8) in [0, 16], labels (N,)), read once per process."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images.astype(np.float32), digits.target.astype(np.int64)


def digit_meta(pixels: np.ndarray) -> dict[str, float]:
    """The module docstring's meta info of one 8x8 image of ink 0 to 16."""
    rows, cols = np.mgrid[0:pixels.shape[0], 0:pixels.shape[1]].astype(np.float64)
    ink = pixels.astype(np.float64)
    total = max(float(ink.sum()), 1e-9)
    cx, cy = float((ink * cols).sum() / total), float((ink * rows).sum() / total)
    spread = float((ink * (rows - cy) ** 2).sum())
    slant = -float((ink * (rows - cy) * (cols - cx)).sum()) / spread if spread > 0 else 0.0
    inked = pixels >= INKED
    traced = pixels >= TRACE
    width, height = _extent(traced.any(axis=0)), _extent(traced.any(axis=1))
    return {"ink": round(total / FULL_INK, 3), "area": int(inked.sum()), "thickness": round(_run_length(inked), 3),
            "width": width, "height": height, "aspect": round(width / height, 3) if height else 0.0,
            "slant": round(slant, 3), "centroid_x": round(cx, 3), "centroid_y": round(cy, 3)}


def _extent(present: np.ndarray) -> int:
    """From the first True to the last, inclusive (0 without any)."""
    found = np.flatnonzero(present)
    return int(found[-1] - found[0] + 1) if len(found) else 0


def _run_length(inked: np.ndarray) -> float:
    """The mean length of the horizontal runs of True (0 without any)."""
    padded = np.pad(inked.astype(np.int8), ((0, 0), (1, 1)))
    starts = int((np.diff(padded, axis=1) == 1).sum())
    return float(inked.sum()) / starts if starts else 0.0


class DigitsDataset(Dataset):
    """scikit-learn's handwritten digits with computed meta info (module docstring)."""

    CLASS_NAMES: tuple[str, ...] = tuple(str(digit) for digit in range(10))

    def __init__(self, split: str = "train", seed: int = 0, val_share: float = 1 / 3, resolution: int = 16,
                 train_limit: Optional[int] = None) -> None:
        if split not in ("train", "val"):
            raise ValueError(f"unknown split {split!r}; use 'train' or 'val'")
        if not 0 < val_share < 1:
            raise ValueError(f"val_share must be between 0 and 1, got {val_share}")
        if resolution < 8:
            raise ValueError(f"resolution must be at least the scans' 8 pixels, got {resolution}")
        images, _ = _digits()
        order = np.random.default_rng(seed).permutation(len(images))
        cut = round(val_share * len(images))
        self.rows = order[:cut] if split == "val" else order[cut:][:train_limit]
        self.split, self.resolution = split, resolution

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < len(self.rows):
            raise IndexError(f"index {idx} is out of range for a dataset of {len(self.rows)} datapoints")
        images, labels = _digits()
        pixels = images[self.rows[idx]]
        image = torch.from_numpy(pixels / FULL_INK)[None, None]
        image = F.interpolate(image, size=(self.resolution, self.resolution), mode="bilinear", align_corners=False)
        return {"inputs": {"image": (image[0] - MEAN) / STD},
                "labels": {"class": torch.tensor(int(labels[self.rows[idx]]), dtype=torch.int64)},
                "meta_info": {"idx": int(idx), **digit_meta(pixels)}}
