"""Histograms of each layer's parameters (or gradients), with two fetches from the device for the whole model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from debuggers.layer_norms import ModelLayers


@dataclass
class LayerHistograms:
    counts: np.ndarray  # (L, bins) int64
    ranges: np.ndarray  # (L, 2) float64: first and last bin edge; nan for a layer without a finite value
    nonfinite: np.ndarray  # (L,) int64: NaN/Inf values, left out of the counts


def layer_histograms(layers: ModelLayers, values_of: Callable[[torch.nn.Parameter], Optional[torch.Tensor]],
                     bins: int) -> LayerHistograms:
    """Per layer, a histogram of ``values_of(param)`` over its parameters (None: that parameter has none, e.g.
    no gradient) between the finite minimum and maximum; a layer whose values are all equal gets a bin
    range around them."""
    flat = _layer_values(layers, values_of)
    finite = [v[torch.isfinite(v)] if v is not None else None for v in flat]
    stats = [torch.stack([f.min(), f.max(), torch.tensor(float(v.numel() - f.numel()), device=f.device)]).double()
             if f is not None and f.numel() else None for f, v in zip(finite, flat)]
    fetched = _fetch(stats)  # one transfer: every layer's min, max and non-finite count
    counts = np.zeros((len(layers.names), bins), np.int64)
    ranges = np.full((len(layers.names), 2), np.nan)
    nonfinite = np.array([v.numel() if v is not None else 0 for v in flat], np.int64)
    histograms, shown = [], []
    for i, (values, stat) in enumerate(zip(finite, fetched)):
        if stat is None:
            continue
        low, high, bad = stat
        if low == high:
            pad = max(0.5, abs(low) * 1e-3)
            low, high = low - pad, high + pad
        ranges[i], nonfinite[i] = (low, high), int(bad)
        histograms.append(torch.histc(values.float(), bins, low, high))
        shown.append(i)
    if histograms:
        counts[shown] = torch.stack([h.to(histograms[0].device) for h in histograms]).cpu().numpy()
    return LayerHistograms(counts, ranges, nonfinite)


def _layer_values(layers: ModelLayers, values_of: Callable[[torch.nn.Parameter], Optional[torch.Tensor]]
                  ) -> list[Optional[torch.Tensor]]:
    """Each layer's values, flattened into one tensor (None where none of its parameters has any)."""
    per_layer: list[list[torch.Tensor]] = [[] for _ in layers.names]
    for param, layer in zip(layers.pair_param.tolist(), layers.pair_layer.tolist()):
        values = values_of(layers.params[param])
        if values is not None:
            per_layer[layer].append(values.detach().reshape(-1))
    return [torch.cat([v.to(parts[0].device) for v in parts]) if parts else None for parts in per_layer]


def _fetch(stats: list[Optional[torch.Tensor]]) -> list[Optional[tuple[float, float, float]]]:
    present = [s for s in stats if s is not None]
    if not present:
        return [None] * len(stats)
    values = iter(torch.stack([s.to(present[0].device) for s in present]).cpu().tolist())
    return [tuple(next(values)) if s is not None else None for s in stats]
