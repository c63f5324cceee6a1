"""Batching for prompted masks that lets a run go on past a broken datapoint.

``collate_prompted_masks`` checks each datapoint before ``collate_datapoints`` stacks the batch: a label mask whose
shape does not fit the image, a prompt point outside the image, or an empty mask (the prompted object has no pixel)
would stop the run (a wrong shape cannot be stacked) or teach the model nonsense. Such a datapoint is kept and
marked instead: ``meta_info['input_error']`` says what is wrong and what to do ('' for a sound datapoint),
``labels['valid']`` is False, its mask is replaced by an empty one of the right shape and its point is moved into
the image so the model can run. The criterion leaves it out of the loss, the metric gives it no score (NaN), and
``MaskDebugger`` records the error as that datapoint's output, which the viewer shows in its place.

    'val_dataloader': {'class': DataLoader, 'args': {'batch_size': 64, 'collate_fn': collate_prompted_masks}},
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from data.datasets.collate import collate_datapoints
from metrics.segmentation_metric import VALID_KEY

INPUT_ERROR_KEY = "input_error"


def collate_prompted_masks(datapoints: list[dict], image_key: str = "image", mask_key: str = "mask",
                           point_key: str = "point") -> dict:
    """``collate_datapoints`` of the datapoints, each checked (and, if broken, marked) as the module says.

    The image is ``inputs[image_key]`` (C, H, W) or a clip (T, C, H, W), the mask ``labels[mask_key]`` (1, H, W)
    or (T, 1, H, W) (its first mask is the prompted one), the point ``inputs[point_key]`` (2,) or (N, 2), (x, y)
    in pixels.
    """
    return collate_datapoints([checked(dp, image_key, mask_key, point_key) for dp in datapoints])


def collate_prompted_clips(datapoints: list[dict]) -> dict:
    """``collate_prompted_masks`` for clips (``PromptedClipsDataset``): the image is ``inputs['frames']``."""
    return collate_prompted_masks(datapoints, image_key="frames")


def checked(datapoint: dict, image_key: str = "image", mask_key: str = "mask", point_key: str = "point") -> dict:
    """A copy of ``datapoint`` with ``labels['valid']`` and ``meta_info['input_error']`` set; a broken one repaired
    as the module says. A datapoint without the image, mask or point it names is left to ``collate_datapoints``
    (which says what is missing)."""
    if not all(isinstance(datapoint.get(part), dict) for part in ("inputs", "labels", "meta_info")):
        return datapoint
    inputs, labels = dict(datapoint["inputs"]), dict(datapoint["labels"])
    image, mask, point = inputs.get(image_key), labels.get(mask_key), inputs.get(point_key)
    if not all(isinstance(value, torch.Tensor) for value in (image, mask, point)) or image.ndim < 3:
        return datapoint
    expected = (*image.shape[:-3], 1, *image.shape[-2:])
    problem = _problem(image, mask, point, expected)
    if problem is not None:
        if tuple(mask.shape) != expected:
            labels[mask_key] = torch.zeros(expected, dtype=mask.dtype if mask.is_floating_point() else torch.float32)
        height, width = image.shape[-2:]
        inputs[point_key] = torch.stack([point[..., 0].clamp(0, width), point[..., 1].clamp(0, height)], dim=-1)
    labels[VALID_KEY] = torch.tensor(problem is None)
    meta = {**datapoint["meta_info"], INPUT_ERROR_KEY: problem or ""}
    return {**datapoint, "inputs": inputs, "labels": labels, "meta_info": meta}


def _problem(image: torch.Tensor, mask: torch.Tensor, point: torch.Tensor, expected: tuple) -> Optional[str]:
    """What is wrong with the datapoint, in words that say what to do; None when nothing is."""
    height, width = image.shape[-2:]
    if tuple(mask.shape) != expected:
        return (f"the mask has shape {tuple(mask.shape)}, but the image {tuple(image.shape)} needs a mask of shape "
                f"{expected}: resize or crop the mask together with the image in the dataset")
    if point.shape[-1:] != (2,) or not torch.isfinite(point).all():
        return (f"the prompt point is {_shown(point)}, not (x, y) in pixels (a (2,) or (N, 2) tensor of finite "
                "numbers)")
    x, y = point[..., 0], point[..., 1]
    if bool(((x < 0) | (x > width) | (y < 0) | (y > height)).any()):
        return (f"the prompt point {_shown(point)} lies outside the {width}x{height} image (x in [0, {width}], y in "
                f"[0, {height}]): points are (x, y) in pixels of the image the model sees; check their order and "
                "scale (a point given as (row, column), or for the image before resizing)")
    if not bool((mask.reshape(-1, height, width)[0] > 0).any()):
        return ("the mask is empty: the prompted object has no pixel, so there is nothing to segment; fix the mask "
                "or leave the datapoint out of the dataset")
    return None


def _shown(point: torch.Tensor) -> Any:
    return [round(float(v), 2) for v in point.reshape(-1)[:6]]
