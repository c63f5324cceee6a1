"""``LayerOutputDebugger``: a layer's raw output, average-pooled over its positions to keep pages small."""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn.functional as F

from debuggers.batch_mode import BATCHED
from debuggers.feature_layout import LAYOUTS, MASK_KEY, TOKENS, output_layout, token_mask
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_LAYER_OUTPUT
from debuggers.tensor_utils import as_tensor, require_tensor, std_along_last
from utils.errors import ConfigError

_POOLS = {3: F.avg_pool1d, 4: F.avg_pool2d, 5: F.avg_pool3d}


class LayerOutputDebugger(ForwardDebugger):
    """The output of ``layer_name``, each datapoint pooled on its own, along its positions with its units kept.

    The layout (``debuggers/feature_layout.py``: from the layer's type, ``layout`` to say it) decides which dims are
    positions. Channels-first outputs (B, C, *positions) with 1 to 3 position dims (a Conv1d's time, a Conv2d's rows
    and columns, a Conv3d's depth too) are averaged over ``downsample_factor``-sized blocks along every position dim
    (a last, partial block is averaged over what it holds, so a map smaller than the factor keeps one cell). Token
    outputs (B, T, D) are averaged over blocks of tokens, over the real tokens only where the batch's inputs hold an
    attention mask (``mask_key``); ``token_weight`` (B, T') counts the real tokens of each block, so that the mean
    over a datapoint's real tokens is the weighted mean of its blocks. (B, N) outputs are kept as they are.

    Output ``{'kind': 'layer_output', 'layer_name', 'output', 'original_shape' (one datapoint's shape),
    'downsample_factor', 'layout', 'token_weight' (tokens only)}``.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, layer_name: str, downsample_factor: int = 4, layout: Optional[str] = None,
                 mask_key: str = MASK_KEY) -> None:
        super().__init__(layer_name)
        if isinstance(downsample_factor, bool) or not isinstance(downsample_factor, int) or downsample_factor < 1:
            raise ConfigError(f"LayerOutputDebugger downsample_factor must be a positive int (1 keeps the full "
                              f"resolution), got {downsample_factor!r}")
        if layout is not None and layout not in LAYOUTS:
            raise ConfigError(f"LayerOutputDebugger layout must be one of {', '.join(LAYOUTS)} or None (from the "
                              f"layer's type), got {layout!r}")
        self.downsample_factor = downsample_factor
        self.layout = layout
        self.mask_key = mask_key
        self._inputs: Any = None  # the model's inputs in this forward pass: where the attention mask is

    def attach(self, model: torch.nn.Module) -> list:
        return super().attach(model) + [model.register_forward_pre_hook(self._note_inputs, with_kwargs=True)]

    def _note_inputs(self, model: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        self._inputs = args[0] if args and isinstance(args[0], dict) else kwargs

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> dict[str, Any]:
        tensor = require_tensor(output, f"layer '{self.layer_name}'", "LayerOutputDebugger").detach()
        layout = self.layout or output_layout(module, tensor, self._inputs)
        captured = {"kind": KIND_LAYER_OUTPUT, "layer_name": self.layer_name, "original_shape": list(tensor.shape[1:]),
                    "downsample_factor": self.downsample_factor, "layout": layout}
        if layout == TOKENS and tensor.ndim == 3:
            pooled, weight = self._token_blocks(tensor, token_mask(self._inputs, tensor, self.mask_key))
            return {**captured, "output": pooled, "token_weight": weight}
        return {**captured, "output": self._downsample(tensor)}

    def clear(self) -> None:
        self._inputs = None
        super().clear()

    def summary_columns(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The (pooled) output's Euclidean norm, mean and std, over the blocks holding real tokens where some hold
        none (padding)."""
        values = as_tensor(output["output"])
        flat = values.reshape(len(values), -1).float()
        if "token_weight" not in output:
            mean = flat.mean(1)
            return {"pooled_norm": torch.linalg.vector_norm(flat, dim=1), "mean": mean,
                    "std": std_along_last(flat, mean)}
        real = (as_tensor(output["token_weight"]) > 0).float()[..., None].expand_as(values).reshape(len(values), -1)
        count = real.sum(1)
        mean = (flat * real).sum(1) / count
        variance = (((flat - mean[:, None]) ** 2) * real).sum(1) / count
        return {"pooled_norm": torch.linalg.vector_norm(flat * real, dim=1), "mean": mean, "std": variance.sqrt()}

    def _token_blocks(self, tokens: torch.Tensor, mask: Optional[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T', D) means over the real tokens of each block of ``downsample_factor`` tokens (0 where a block has
        none) and (B, T') their counts."""
        batch, length, _ = tokens.shape
        real = torch.ones(batch, length, device=tokens.device) if mask is None else mask.float()
        blocks = -(-length // self.downsample_factor)
        extra = blocks * self.downsample_factor - length
        values = F.pad(tokens.float() * real[..., None], (0, 0, 0, extra))
        weight = F.pad(real, (0, extra)).view(batch, blocks, -1).sum(dim=2)
        sums = values.view(batch, blocks, self.downsample_factor, -1).sum(dim=2)
        return sums / weight.clamp(min=1)[..., None], weight

    def _downsample(self, tensor: torch.Tensor) -> torch.Tensor:
        pool = _POOLS.get(tensor.ndim)
        if pool is None or self.downsample_factor == 1:
            return tensor  # ForwardDebugger copies it: later in-place ops must not change the capture
        kernel = [min(self.downsample_factor, d) for d in tensor.shape[2:]]
        source = tensor if tensor.is_floating_point() else tensor.float()
        return pool(source, kernel, kernel, ceil_mode=True)
