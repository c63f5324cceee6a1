"""``ActivationStatsDebugger``: summary statistics of a layer's activations, per datapoint."""

from __future__ import annotations

from typing import Any

import torch

from debuggers.batch_mode import BATCHED
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_STATISTICS
from debuggers.pages.buffer_pool import BufferPool
from debuggers.tensor_utils import per_datapoint, require_tensor, std_along_last
from utils.errors import ConfigError

SAMPLE_SIZE = 100


class ActivationStatsDebugger(ForwardDebugger):
    """Cheap numbers that reveal dead, saturated or exploding activations.

    Every statistic is computed over one datapoint's activations (all non-batch
    dimensions); ``std`` is the population std, ``l1_norm`` the mean absolute
    value, ``l2_norm`` the Euclidean norm. Channels are dimension 1 (``(B, C, ...)``).
    The histogram spans each datapoint's own finite [min, max] (like
    ``numpy.histogram``), so its edges differ per datapoint.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, layer_name: str, histogram_bins: int = 32) -> None:
        super().__init__(layer_name)
        if isinstance(histogram_bins, bool) or not isinstance(histogram_bins, int) or histogram_bins < 1:
            raise ConfigError(f"ActivationStatsDebugger histogram_bins must be a positive int, got {histogram_bins!r}")
        self.histogram_bins = histogram_bins

    def process_forward(self, module: torch.nn.Module, input: Any, output: Any) -> dict[str, Any]:
        activation = require_tensor(output, f"layer '{self.layer_name}'", "ActivationStatsDebugger").detach()
        flat = per_datapoint(activation)
        counts, edges = batch_histogram(flat, self.histogram_bins)
        stats = {
            "kind": KIND_STATISTICS,
            "layer_name": self.layer_name,
            "module_type": type(module).__name__,
            "shape": list(activation.shape[1:]),
            **_value_stats(flat, self._pool),
            "histogram": counts,
            "histogram_edges": edges,
            "sample_values": flat[:, :SAMPLE_SIZE],
        }
        if activation.ndim >= 3:
            channels = activation.float().reshape(*activation.shape[:2], -1)
            stats["channel_means"] = channels.mean(2)
            stats["channel_stds"] = std_along_last(channels, stats["channel_means"], self._pool)
        return stats

    def summary_columns(self, output: dict[str, Any]) -> dict[str, Any]:
        """The datapoints' scalar statistics, as they are."""
        return {key: output[key] for key in _SCALARS}


_SCALARS = ("mean", "std", "min", "max", "l1_norm", "l2_norm", "sparsity", "positive_ratio", "saturation_low",
            "saturation_high", "nonfinite_ratio")


def _value_stats(flat: torch.Tensor, pool: BufferPool) -> dict[str, torch.Tensor]:
    """(B,) statistics of (B, N) values (``pool``: reused memory for a scratch of their size)."""
    mean = flat.mean(1)
    return {
        "mean": mean,
        "std": std_along_last(flat, mean, pool),
        "min": flat.amin(1),
        "max": flat.amax(1),
        "l1_norm": flat.abs().mean(1),
        "l2_norm": flat.norm(dim=1),
        "sparsity": (flat == 0).float().mean(1),
        "positive_ratio": (flat > 0).float().mean(1),
        "saturation_low": (flat <= -1).float().mean(1),
        "saturation_high": (flat >= 1).float().mean(1),
        "nonfinite_ratio": (~torch.isfinite(flat)).float().mean(1),
    }


def batch_histogram(flat: torch.Tensor, bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row histograms of (B, N) values: counts (B, bins) and edges (B, bins + 1), as ``numpy.histogram``
    gives them for each row's finite values.

    Each row spans its own finite [min, max] (max - min = 1 around a constant row); the last bin includes
    its right edge; NaN and Inf are not counted. The arithmetic is numpy's, step for step in the values'
    float type, including its correction of values within a rounding error of an edge, so a value on an
    edge falls in the same bin as in numpy.
    """
    values = flat if flat.dtype == torch.float64 else flat.float()
    finite = torch.isfinite(values)
    low = torch.where(finite, values, torch.inf).amin(1, keepdim=True)
    high = torch.where(finite, values, -torch.inf).amax(1, keepdim=True)
    empty = ~finite.any(1, keepdim=True)
    low, high = torch.where(empty, 0.0, low), torch.where(empty, 1.0, high)
    constant = low == high
    low, high = torch.where(constant, low - 0.5, low), torch.where(constant, high + 0.5, high)
    edges = torch.arange(bins + 1, dtype=values.dtype, device=values.device) * ((high - low) / bins) + low
    edges[:, -1:] = high  # numpy.linspace's endpoint
    values = torch.where(finite, values, low)  # not counted; a valid bin all the same
    index = ((values - low) / (high - low) * bins).long().clamp_(max=bins - 1)
    index -= (values < edges.gather(1, index)).long()
    index += ((values >= edges.gather(1, index + 1)) & (index != bins - 1)).long()
    counts = torch.zeros(values.shape[0], bins, dtype=torch.float64, device=values.device)
    counts.scatter_add_(1, index, finite.double())
    return counts.float(), edges.float()
