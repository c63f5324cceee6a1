"""Spikes in a training curve (the loss, the gradient norm): a value far above the median of the values just
before it.

A value is a spike when it exceeds the median of the ``window`` finite values before it by more than
``threshold`` robust standard deviations (1.4826 × their median absolute deviation), and by more than
``min_jump`` of that median (so a curve that has flattened out does not turn rounding noise into spikes).
Non-finite values are never spikes (they are marked apart) and do not count in the windows.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

WINDOW = 50
THRESHOLD = 6.0
MIN_JUMP = 0.25
MAD_TO_STD = 1.4826  # a normal distribution's standard deviation per median absolute deviation


def spikes(values: np.ndarray, window: int = WINDOW, threshold: float = THRESHOLD, min_jump: float = MIN_JUMP
           ) -> np.ndarray:
    """(N,) bool: which of ``values`` are spikes (the first ``window`` values never are)."""
    x = np.asarray(values, np.float64)
    found = np.zeros(len(x), bool)
    if len(x) <= window:
        return found
    before = np.where(np.isfinite(x), x, np.nan)
    windows = sliding_window_view(before[:-1], window)  # windows[i] holds the values before x[i + window]
    enough = np.count_nonzero(np.isfinite(windows), axis=1) >= window // 2
    if not enough.any():
        return found
    with np.errstate(all="ignore"):
        median = np.nanmedian(windows[enough], axis=1)
        spread = MAD_TO_STD * np.nanmedian(np.abs(windows[enough] - median[:, None]), axis=1)
    target = x[window:][enough]
    jump = target - median
    found[window:][enough] = np.isfinite(target) & (jump > threshold * spread) & (jump > min_jump * np.abs(median))
    return found
