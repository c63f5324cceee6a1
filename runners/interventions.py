"""How each intervention of ``analysis/intervention.py`` acts on a forward pass of the rebuilt model.

- ``UnitPatch``: forward hooks. The reference run sums what the patch replaces (``Mean``), the patched run
  returns the module's output with those units set to the mean (``Patch``). ``UnitShift``: the patched run adds
  each unit's offset at every position (``Shift``). Units lie along the output's unit dim
  (``debuggers/feature_layout.py``: from the module's type, else the batch's attention mask): a conv layer's
  channels keep their map (the element-wise mean over the reference), tokens take each unit's mean over the real
  tokens of the reference (any sequence length). Attention heads are the slices of the heads' concatenation that
  the attention module's output projection (the last Linear inside it) reads: a pre-hook patches its input.
- ``InputMask``: the batch's input edited before the forward pass: positions set to the reference's mean input,
  or token ids replaced by padding (the batch's own padding id, its attention mask 0 there).
- ``PromptMove``: the point prompt moved to the pixel of the target's mask farthest from its edge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import torch
from scipy.ndimage import distance_transform_edt

from analysis.intervention import HEADS, PADDING, InputMask, Intervention, PromptMove, UnitPatch, UnitShift
from debuggers.feature_layout import MASK_KEY, TOKENS, output_layout, pooled_units, token_mask, unit_dim
from debuggers.utils import require_layer
from utils.errors import LanternUserError
from utils.ops import describe_value

_HEAD_COUNTS = ("num_heads", "num_attention_heads", "n_heads", "heads")  # how attention modules name theirs


class VerifyError(LanternUserError):
    """A finding cannot be verified as asked; the message says why and what to do."""


@dataclass
class PatchSite:
    """Where a ``UnitPatch`` acts: a module's output, or (heads) its output projection's input; ``channels``: the
    units along the unit dim (a head expanded to its slice), None for all."""

    module: torch.nn.Module
    name: str
    channels: Optional[list[int]]
    on_input: bool = False

    def watch(self, hook: Callable[[torch.Tensor], Optional[torch.Tensor]]) -> Any:
        """Register ``hook`` on the site's tensor (returning a tensor replaces it); the handle."""
        if self.on_input:
            return self.module.register_forward_pre_hook(
                lambda module, args: _replaced_first(args, hook(_tensor(args[0] if args else None, self.name))))
        return self.module.register_forward_hook(lambda module, args, output: hook(_tensor(output, self.name)))


def patch_site(model: torch.nn.Module, patch: Union[UnitPatch, UnitShift]) -> PatchSite:
    """The site of ``patch`` in ``model``."""
    module = require_layer(model, patch.module)
    channels = None if patch.channels is None else list(patch.channels)
    if patch.kind != HEADS:
        return PatchSite(module, patch.module, channels)
    named = [(name, inner) for name, inner in module.named_modules() if name and isinstance(inner, torch.nn.Linear)]
    heads = next((value for attribute in _HEAD_COUNTS if isinstance(value := getattr(module, attribute, None), int)
                  and value > 0), None)
    if not named or heads is None or named[-1][1].in_features % heads:
        raise VerifyError(f"{patch.module} is no attention module whose heads can be patched: it needs an output "
                          f"projection (a Linear inside it, the last one registered) and its number of heads as an "
                          f"attribute ({', '.join(_HEAD_COUNTS)})")
    name, projection = named[-1]
    width = projection.in_features // heads
    units = None if channels is None else [head * width + unit for head in channels for unit in range(width)]
    return PatchSite(projection, f"{patch.module}.{name}", units, on_input=True)


class Mean:
    """The mean over datapoints of what a patch replaces, over the datapoints with no NaN or Inf in it: a conv
    layer's (C, *positions) element-wise, tokens' (D,) over each datapoint's real tokens, an input element-wise."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.total: Optional[torch.Tensor] = None
        self.rows = 0

    def add(self, batch: torch.Tensor) -> None:
        batch = batch.detach()
        finite = torch.isfinite(batch.flatten(1)).all(dim=1) if batch.ndim > 1 else torch.isfinite(batch)
        if self.total is None:
            self.total = torch.zeros(batch.shape[1:], dtype=torch.float64, device=batch.device)
        if batch.shape[1:] != self.total.shape:
            raise VerifyError(f"{self.what} has the shape {tuple(batch.shape[1:])} in one batch and "
                              f"{tuple(self.total.shape)} in another: it cannot be replaced by a mean")
        self.total += batch[finite].double().sum(dim=0)
        self.rows += int(finite.sum())

    def mean(self) -> torch.Tensor:
        if self.total is None or not self.rows:
            raise VerifyError(f"{self.what} has no finite value on any passing datapoint of the reference (did it "
                              "run?)")
        return (self.total / self.rows).float()


def reduced(site: PatchSite, tensor: torch.Tensor, inputs: Any) -> torch.Tensor:
    """What the reference's mean is taken of: tokens pooled over their real tokens, anything else as it is."""
    if _layout(site, tensor, inputs) == TOKENS and tensor.ndim >= 3:
        return pooled_units(tensor, TOKENS, token_mask(inputs, tensor))
    return tensor


class Patch:
    """The hook that returns the site's tensor with the patched units set to ``mean``; counts its calls.
    ``inputs``: the batch's inputs in the forward pass under way (for the layout and the attention mask)."""

    def __init__(self, patch: UnitPatch, site: PatchSite, mean: torch.Tensor) -> None:
        self.patch, self.site, self.mean, self.calls = patch, site, mean, 0
        self.inputs: Any = None

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        layout = _layout(self.site, tensor, self.inputs)
        tokens = layout == TOKENS and tensor.ndim >= 3
        per_datapoint = tuple(tensor.shape[-1:] if tokens else tensor.shape[1:])
        if per_datapoint != tuple(self.mean.shape):
            raise VerifyError(f"{self.site.name} gives {tuple(tensor.shape[1:])} per datapoint here but "
                              f"{tuple(self.mean.shape)} on the reference: only a layer whose output has one shape "
                              "for every datapoint can be patched to a mean")
        replace = _unit_mask(self.site, tensor, layout)
        if self.patch.nonfinite_only:
            replace = replace & ~torch.isfinite(tensor)
        return torch.where(replace, self.mean.to(tensor.dtype), tensor)


class Shift:
    """The hook that returns the site's tensor with ``offsets`` added to its units; counts its calls."""

    def __init__(self, shift: UnitShift, site: PatchSite) -> None:
        self.shift, self.site, self.calls = shift, site, 0
        self.inputs: Any = None

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        layout = _layout(self.site, tensor, self.inputs)
        dim = unit_dim(tensor.ndim, layout)
        _unit_mask(self.site, tensor, layout)  # says which unit the layer lacks, if any
        offsets = torch.zeros(tensor.shape[dim], dtype=tensor.dtype, device=tensor.device)
        offsets[self.site.channels] = torch.tensor(self.shift.offsets, dtype=tensor.dtype, device=tensor.device)
        shape = [1] * tensor.ndim
        shape[dim] = len(offsets)
        return tensor + offsets.view(shape)


def _unit_mask(site: PatchSite, tensor: torch.Tensor, layout: str) -> torch.Tensor:
    if site.channels is None:
        return torch.ones((), dtype=torch.bool, device=tensor.device)
    dim = unit_dim(tensor.ndim, layout)
    units = tensor.shape[dim]
    outside = [c for c in site.channels if not 0 <= c < units]
    if outside:
        raise VerifyError(f"{site.name} has no unit {outside[0]}: its output {tuple(tensor.shape)} holds {units} "
                          f"units along dim {dim}")
    mask = torch.zeros(units, dtype=torch.bool, device=tensor.device)
    mask[site.channels] = True
    shape = [1] * tensor.ndim
    shape[dim] = units
    return mask.view(shape)


def _layout(site: PatchSite, tensor: torch.Tensor, inputs: Any) -> str:
    return TOKENS if site.on_input else output_layout(site.module, tensor, inputs)


def edited(batch: dict[str, Any], intervention: Intervention, mean: Optional[torch.Tensor]) -> dict[str, Any]:
    """The batch with its inputs changed by an ``InputMask`` or a ``PromptMove`` (the same batch otherwise)."""
    if isinstance(intervention, PromptMove):
        return moved_prompts(batch, intervention)
    if not isinstance(intervention, InputMask):
        return batch
    values = input_tensor(batch, intervention.input_key)
    region = _region(intervention, values)
    inputs = dict(batch["inputs"])
    if intervention.fill == PADDING:
        mask = token_mask(inputs, values[..., None]) if values.ndim == 2 else None
        inputs[intervention.input_key] = torch.where(region, _padding_id(values, mask), values)
        if isinstance(inputs.get(MASK_KEY), torch.Tensor) and mask is not None:
            inputs[MASK_KEY] = torch.where(region, torch.zeros_like(inputs[MASK_KEY]), inputs[MASK_KEY])
    else:
        inputs[intervention.input_key] = torch.where(region, mean.to(values.dtype), values)
    return {**batch, "inputs": inputs}


def _region(mask: InputMask, values: torch.Tensor) -> torch.Tensor:
    """The region over the input's trailing dims, from their start."""
    dims = mask.region.ndim
    size = tuple(values.shape[-dims:]) if values.ndim >= dims else ()
    if len(size) != dims or any(r > s for r, s in zip(mask.region.shape, size)):
        raise VerifyError(f"the region {mask.region.shape} does not fit input '{mask.input_key}' "
                          f"{tuple(values.shape[1:])} per datapoint")
    region = np.zeros(size, dtype=bool)
    region[tuple(slice(0, r) for r in mask.region.shape)] = mask.region
    return torch.from_numpy(region).to(values.device)


def _padding_id(tokens: torch.Tensor, real: Optional[torch.Tensor]) -> torch.Tensor:
    """The id the batch pads with (the commonest where its attention mask is 0), else 0."""
    padded = tokens[~real].tolist() if real is not None else []
    return torch.tensor(Counter(padded).most_common(1)[0][0] if padded else 0, dtype=tokens.dtype,
                        device=tokens.device)


def moved_prompts(batch: dict[str, Any], move: PromptMove) -> dict[str, Any]:
    """Each datapoint's point prompt(s) at the pixel centre of its target mask farthest from the mask's edge; a
    datapoint with an empty mask keeps its prompt."""
    points = input_tensor(batch, move.point_key, min_ndim=2)
    labels = batch.get("labels")
    target = labels.get(move.mask_key) if isinstance(labels, dict) else None
    if not isinstance(target, torch.Tensor) or target.ndim < 3 or len(target) != len(points):
        raise VerifyError(f"moving the prompt needs the target masks as labels['{move.mask_key}'] (B, H, W) or "
                          f"(B, 1, H, W), found {describe_value(target)}")
    moved = points.clone()
    for row, mask in enumerate(target.detach().cpu().numpy().reshape(len(points), *target.shape[-2:]) > 0.5):
        if mask.any():
            y, x = np.unravel_index(np.argmax(distance_transform_edt(mask)), mask.shape)
            moved[row] = torch.tensor([x + 0.5, y + 0.5], dtype=points.dtype)
    return {**batch, "inputs": {**batch["inputs"], move.point_key: moved}}


def input_tensor(batch: dict[str, Any], key: str, min_ndim: int = 2) -> torch.Tensor:
    """The batched input ``key``."""
    inputs = batch.get("inputs")
    values = inputs.get(key) if isinstance(inputs, dict) else None
    if not isinstance(values, torch.Tensor) or values.ndim < min_ndim:
        found = sorted(map(str, inputs)) if isinstance(inputs, dict) else describe_value(inputs)
        raise VerifyError(f"the intervention is on input '{key}', but the datapoints' inputs hold no batched tensor "
                          f"under that name (inputs: {found})")
    return values


def _tensor(value: Any, where: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor) or value.ndim < 2:
        raise VerifyError(f"{where} gives {describe_value(value)}: only a layer that returns one batched tensor "
                          "can be patched; name the layer inside it that computes the units")
    return value


def _replaced_first(args: tuple, first: Optional[torch.Tensor]) -> Optional[tuple]:
    return None if first is None else (first, *args[1:])
