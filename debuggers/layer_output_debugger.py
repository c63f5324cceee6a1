"""``LayerOutputDebugger``: a layer's raw output, spatially average-pooled to keep pages small."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from debuggers.batch_mode import BATCHED
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_LAYER_OUTPUT
from debuggers.tensor_utils import as_tensor, require_tensor, std_along_last
from utils.errors import ConfigError

_POOLS = {3: F.avg_pool1d, 4: F.avg_pool2d, 5: F.avg_pool3d}


class LayerOutputDebugger(ForwardDebugger):
    """The output of ``layer_name``, each datapoint pooled on its own.

    Outputs (B, C, *spatial) with 1 to 3 spatial dimensions are averaged over
    ``downsample_factor``-sized blocks along every spatial dimension (a last,
    partial block is averaged over what it holds, so a map smaller than the factor
    keeps one cell); (B, N) outputs are kept as they are.

    Output ``{'kind': 'layer_output', 'layer_name', 'output', 'original_shape'
    (one datapoint's shape), 'downsample_factor'}``.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, layer_name: str, downsample_factor: int = 4) -> None:
        super().__init__(layer_name)
        if isinstance(downsample_factor, bool) or not isinstance(downsample_factor, int) or downsample_factor < 1:
            raise ConfigError(f"LayerOutputDebugger downsample_factor must be a positive int (1 keeps the full "
                              f"resolution), got {downsample_factor!r}")
        self.downsample_factor = downsample_factor

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> dict[str, Any]:
        tensor = require_tensor(output, f"layer '{self.layer_name}'", "LayerOutputDebugger").detach()
        return {
            "kind": KIND_LAYER_OUTPUT,
            "layer_name": self.layer_name,
            "output": self._downsample(tensor),
            "original_shape": list(tensor.shape[1:]),
            "downsample_factor": self.downsample_factor,
        }

    def summary_columns(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The (pooled) output's Euclidean norm, mean and std."""
        values = as_tensor(output["output"])
        flat = values.reshape(len(values), -1).float()
        mean = flat.mean(1)
        return {"pooled_norm": torch.linalg.vector_norm(flat, dim=1), "mean": mean, "std": std_along_last(flat, mean)}

    def _downsample(self, tensor: torch.Tensor) -> torch.Tensor:
        pool = _POOLS.get(tensor.ndim)
        if pool is None or self.downsample_factor == 1:
            return tensor  # ForwardDebugger copies it: later in-place ops must not change the capture
        kernel = [min(self.downsample_factor, d) for d in tensor.shape[2:]]
        source = tensor if tensor.is_floating_point() else tensor.float()
        return pool(source, kernel, kernel, ceil_mode=True)
