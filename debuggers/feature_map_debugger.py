"""``FeatureMapDebugger``: a convolutional layer's feature maps, per datapoint."""

from __future__ import annotations

from typing import Any

import torch

from debuggers.batch_mode import BATCHED
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_FEATURE_MAP
from debuggers.tensor_utils import as_tensor, channel_totals, mean_and_std_of_sums, per_datapoint, require_tensor
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
        self._kept_totals: tuple[torch.Tensor, torch.Tensor, bool] | None = None  # of the last capture, for its
        # columns: the kept channels' sums and sums of squares, and whether every channel is kept

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> dict[str, Any]:
        fmap = require_tensor(output, f"layer '{self.layer_name}'", "FeatureMapDebugger", ndim=4,
                              what="a (B, C, H, W) feature map").detach()
        flat = per_datapoint(fmap)
        total, squares = channel_totals(flat.view_as(fmap))  # each channel's: every statistic comes from them
        kept, channels = self._strongest_channels(fmap, total)
        mean, std = mean_and_std_of_sums(flat, total.sum(1), squares.sum(1))
        self._kept_totals = (total, squares, True) if kept is fmap else (total.gather(1, channels),
                                                                         squares.gather(1, channels), False)
        return {
            "kind": KIND_FEATURE_MAP,
            "layer_name": self.layer_name,
            "feature_map": kept,
            "channel_indices": channels,
            "stats": {"mean": mean.float(), "std": std.float(), "min": flat.amin(1), "max": flat.amax(1)},
            "shape": list(fmap.shape[1:]),
        }

    def capture_columns(self, capture: dict[str, Any]) -> dict[str, torch.Tensor]:
        """``summary_columns`` from the kept channels' sums that ``process_forward`` computed just now, where they
        are this capture's: where the batch mode is being decided, each datapoint alone ran after the batch."""
        totals, self._kept_totals = self._kept_totals, None
        if totals is None or totals[0].shape != as_tensor(capture["channel_indices"]).shape:
            return self.summary_columns(capture)
        return self._columns(capture, *totals)

    def summary_columns(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The whole map's statistics, the kept channels' energy (mean square), the share of them that are
        dead (all zero) and the strongest channel's index (highest mean)."""
        return self._columns(output, *channel_totals(as_tensor(output["feature_map"]).float()), every_channel=False)

    def _columns(self, output: dict[str, Any], total: torch.Tensor, squares: torch.Tensor,
                 every_channel: bool) -> dict[str, torch.Tensor]:
        """``summary_columns`` given the kept channels' sums and sums of squares (B, C'); ``every_channel``: they
        are every channel, in order (a channel's index is then its position)."""
        kept = as_tensor(output["feature_map"])
        dead = squares == 0
        if dead.any():  # tiny values' squares underflow to 0 in float32: those few channels are looked at whole
            dead[dead.clone()] = kept.flatten(2)[dead].abs().amax(1) == 0
        strongest = total.argmax(1)
        if not every_channel:  # the kept channels' own numbers
            strongest = as_tensor(output["channel_indices"]).to(total.device).gather(1, strongest[:, None])[:, 0]
        return {**{key: as_tensor(value) for key, value in output["stats"].items()},
                "energy": squares.sum(1) / kept[0].numel(),
                "dead_channel_fraction": dead.float().mean(1),
                "strongest_channel": strongest}

    def _strongest_channels(self, fmap: torch.Tensor, total: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The kept maps (B, C', H, W) and their channel indices (B, C'): all of them, or the ``max_channels`` of
        highest mean activation (``total``: each channel's sum), in that order."""
        batch, num_channels = fmap.shape[:2]
        if self.max_channels is None or self.max_channels >= num_channels:
            return fmap, torch.arange(num_channels, device=fmap.device).expand(batch, -1)
        channels = total.topk(self.max_channels, dim=1).indices
        rows = channels + torch.arange(batch, device=fmap.device)[:, None] * num_channels  # in (B * C, H, W)
        kept = fmap.reshape(batch * num_channels, *fmap.shape[2:]).index_select(0, rows.reshape(-1))
        return kept.reshape(batch, self.max_channels, *fmap.shape[2:]), channels
