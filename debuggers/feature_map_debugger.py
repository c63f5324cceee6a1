"""``FeatureMapDebugger``: a convolutional layer's feature maps, per datapoint."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from debuggers.batch_mode import BATCHED
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_FEATURE_MAP
from debuggers.tensor_utils import per_datapoint, require_tensor, to_numpy
from utils.errors import ConfigError


class FeatureMapDebugger(ForwardDebugger):
    """The (B, C, H, W) output of ``layer_name`` with per-datapoint statistics.

    Args:
        layer_name: dotted module path, e.g. ``backbone.layer4``.
        max_channels: keep only this many channels per datapoint, the ones with the
            highest mean activation (pages stay small on wide layers); None keeps all.

    Output ``{'kind': 'feature_map', 'layer_name', 'feature_map': (B, C', H, W),
    'channel_indices': (B, C'), 'stats': {'mean', 'std', 'min', 'max': (B,)}, 'shape': [C, H, W]}``.
    Statistics cover the whole map (every channel); ``std`` is the population std.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, layer_name: str, max_channels: int | None = None) -> None:
        super().__init__(layer_name)
        if max_channels is not None and (isinstance(max_channels, bool) or not isinstance(max_channels, int)
                                         or max_channels < 1):
            raise ConfigError(f"FeatureMapDebugger max_channels must be a positive int or None, got {max_channels!r}")
        self.max_channels = max_channels

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> dict[str, Any]:
        fmap = require_tensor(output, f"layer '{self.layer_name}'", "FeatureMapDebugger", ndim=4,
                              what="a (B, C, H, W) feature map").detach()
        flat = per_datapoint(fmap)
        channels = self._strongest_channels(fmap)
        return {
            "kind": KIND_FEATURE_MAP,
            "layer_name": self.layer_name,
            "feature_map": fmap.gather(1, channels[:, :, None, None].expand(-1, -1, *fmap.shape[2:])),
            "channel_indices": channels,
            "stats": {"mean": flat.mean(1), "std": flat.std(1, correction=0),
                      "min": flat.amin(1), "max": flat.amax(1)},
            "shape": list(fmap.shape[1:]),
        }

    def summary(self, output: dict[str, Any]) -> dict[str, float]:
        """The whole map's statistics, the kept channels' energy (mean square), the share of them that are
        dead (all zero) and the strongest channel's index (highest mean)."""
        fmap = to_numpy(output["feature_map"])
        channels = fmap.reshape(fmap.shape[0], -1)
        stats = {key: float(to_numpy(value)) for key, value in output["stats"].items()}
        return {**stats, "energy": float(np.mean(channels ** 2)),
                "dead_channel_fraction": float(np.mean(~channels.any(axis=1))),
                "strongest_channel": float(to_numpy(output["channel_indices"])[np.argmax(channels.mean(axis=1))])}

    def _strongest_channels(self, fmap: torch.Tensor) -> torch.Tensor:
        """(B, C') channel indices: all of them, or the ``max_channels`` of highest mean activation."""
        batch, num_channels = fmap.shape[:2]
        if self.max_channels is None or self.max_channels >= num_channels:
            return torch.arange(num_channels, device=fmap.device).expand(batch, -1)
        return fmap.float().mean(dim=(2, 3)).topk(self.max_channels, dim=1).indices
