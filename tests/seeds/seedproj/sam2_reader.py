"""The SAM2 guide's reader's own code around Lantern's ``PromptableSegmenter``: ``build_sam2`` and a
``SAM2ImagePredictor`` in the manner of SAM2's (``set_image`` once, ``predict`` per prompt), which the guide's
``from sam2 import build_sam2`` and ``from sam2.sam2_image_predictor import SAM2ImagePredictor`` import
(``tests/seeds/test_sam2_guide.py`` puts this module in their place)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from data.datasets.prompted_shapes import MEAN, STD
from models.promptable_segmenter import PromptableSegmenter


def build_sam2(model_cfg: str, checkpoint: str) -> PromptableSegmenter:
    """The example's model (``model_cfg`` names no other) with the weights of a Lantern checkpoint."""
    model = PromptableSegmenter(dim=32, num_heads=4, depth=2)
    model.load_state_dict(torch.load(checkpoint, map_location="cpu", weights_only=False)["model_state_dict"])
    return model.eval()


class SAM2ImagePredictor:
    """``predict`` returns SAM2's ``(masks, scores, logits)`` for one image, and the forward pass's debug states
    after them where ``return_debug_states=True`` (the model's own ``forward(..., return_debug_states=True)``)."""

    def __init__(self, sam_model: PromptableSegmenter, debug_mode: bool = False) -> None:
        self.model, self.debug_mode = sam_model, debug_mode
        self.image: torch.Tensor | None = None

    def set_image(self, image: Any) -> None:
        """An (H, W, 3) RGB image, uint8 or in [0, 1], or a PIL image."""
        array = np.asarray(image, dtype=np.float32)
        if array.ndim != 3 or array.shape[2] != 3:
            raise ValueError(f"set_image takes an (H, W, 3) RGB image, got shape {array.shape}")
        array = array / 255.0 if array.max() > 1.0 else array
        self.image = torch.from_numpy((array - MEAN) / STD).permute(2, 0, 1)[None]

    def predict(self, point_coords: Any, point_labels: Any, return_debug_states: bool = False,
                mask_input: Any = None) -> tuple:
        if self.image is None:
            raise RuntimeError("call set_image(image) before predict")
        if mask_input is not None:
            raise ValueError("this model takes no mask prompt (mask_input): prompt it with points")
        if not all(int(label) == 1 for label in point_labels):
            raise ValueError("this model takes positive points only (point_labels of 1)")
        points = torch.as_tensor(np.asarray(point_coords, dtype=np.float32))[None]
        with torch.no_grad():
            outputs = self.model({"image": self.image, "point": points}, return_debug_states=return_debug_states)
        logits = outputs["masks"][0].numpy()
        result = (logits > 0, outputs["iou_predictions"].numpy(), logits)
        return (*result, outputs["debug_states"]) if return_debug_states else result
