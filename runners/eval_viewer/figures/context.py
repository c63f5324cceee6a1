"""``DrawContext``: what one datapoint's figures are drawn with besides the output itself, the second argument of
every function the registry holds (``registry.FIGURES``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from runners.eval_viewer.figures.values import IMAGE_CHANNELS, array_or_none, first_image, token_strings

Calibration = dict[str, dict[str, np.ndarray]]  # score -> {'true', 'predicted', 'idx'} over an epoch


@dataclass(frozen=True)
class DrawContext:
    """The datapoint's input image (drawn under Grad-CAM, patch attention and masks) and inputs (a clip's frames),
    the epoch's class names (titles) and calibration pairs (``shared/calibration.py``), the datapoint's tokens
    (attention axes) and, in a comparison, the feature-map channels every column draws."""

    image: Optional[np.ndarray] = None
    inputs: Optional[dict[str, Any]] = None
    class_names: Optional[dict[int, str]] = None
    tokens: Optional[list[str]] = None
    calibration: Optional[Calibration] = None
    channels: Optional[list[int]] = None

    @classmethod
    def of(cls, datapoint: dict[str, Any]) -> DrawContext:
        """The context of a datapoint as ``shared.datapoint.load_datapoint`` gives it."""
        return cls(first_image(datapoint.get("inputs")), datapoint.get("inputs"), datapoint.get("class_names"),
                   token_strings(datapoint), datapoint.get("calibration"))

    @property
    def frames(self) -> Optional[np.ndarray]:
        """A clip's frames (T, C, H, W) among the inputs, if it has one."""
        for value in (self.inputs or {}).values():
            array = array_or_none(value)
            if array is not None and array.ndim == 4 and array.shape[1] in IMAGE_CHANNELS and array.dtype.kind == "f":
                return array
        return None


NO_CONTEXT = DrawContext()  # an output drawn on its own: no image, class names or tokens
