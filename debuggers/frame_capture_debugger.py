"""``FrameCaptureDebugger``: the states of every N-th frame of a model that runs frame by frame, under a memory
limit, as the SAM2 guide's video loop captures them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch

from debuggers.capture import FRAME_STATE, FRAME_SUFFIX, frame_component, split_frame
from debuggers.capture_debugger import CaptureDebugger
from utils.config_values import is_positive_number
from utils.errors import ConfigError

MAX_FRAMES = 64  # frames kept per forward pass: more is refused at start-up
MAX_MB_PER_DATAPOINT = 256.0


class FrameCaptureDebugger(CaptureDebugger):
    """A ``CaptureDebugger`` that files each state under the frame it was offered in, and keeps only frames
    0, N, 2N, ... (``every_n_frames``), at most ``max_frames`` of them and at most ``max_mb_per_datapoint`` of
    states per datapoint: a frame whose states do not all fit under the limit is dropped whole, with every
    later one.

    The model announces each frame at a capture point, ``capture_debug_state(*frame_state, t)`` (the
    ``PromptableVideoSegmenter`` offers ``('video', 'frame_index')``, ``debuggers.capture.FRAME_STATE``), and
    ``None`` after its last; the states offered in between are kept as component ``<component>_frame_<t>``;
    states offered outside frames keep their names. The limits count
    bytes per datapoint (a state's size over its batch), so which frames are kept does not depend on the batch.

    Output: ``CaptureDebugger``'s, plus ``'frames': {'every_n_frames', 'kept': [t, ...], 'dropped': [t, ...]}``.
    Other args as ``CaptureDebugger``'s.
    """

    def __init__(self, every_n_frames: int = 2, max_frames: int = 8, max_mb_per_datapoint: float = 4.0,
                 frame_state: Sequence[str] = FRAME_STATE, components: Optional[Sequence[str]] = None,
                 states: Optional[Sequence[str]] = None, capture_attention: bool = True,
                 capture_embeddings: bool = True, capture_position_encoding: bool = True) -> None:
        super().__init__(components, states, capture_attention, capture_embeddings, capture_position_encoding)
        for name, value, limit in (("every_n_frames", every_n_frames, None), ("max_frames", max_frames, MAX_FRAMES)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (limit and value > limit):
                raise ConfigError(f"FrameCaptureDebugger {name} must be a whole number from 1"
                                  f"{f' to {limit} (the limit of frames kept per forward pass)' if limit else ''}, "
                                  f"got {value!r}")
        if not is_positive_number(max_mb_per_datapoint) or max_mb_per_datapoint > MAX_MB_PER_DATAPOINT:
            raise ConfigError(f"FrameCaptureDebugger max_mb_per_datapoint must be a positive number of MB up to "
                              f"{MAX_MB_PER_DATAPOINT:g} (the limit per datapoint), got {max_mb_per_datapoint!r}")
        if not (isinstance(frame_state, (list, tuple)) and len(frame_state) == 2
                and all(isinstance(name, str) for name in frame_state)):
            raise ConfigError(f"FrameCaptureDebugger frame_state is the (component, state) the model offers each "
                              f"frame's number at, got {frame_state!r}")
        self.every_n_frames, self.max_frames = every_n_frames, max_frames
        self.max_bytes = float(max_mb_per_datapoint) * 2**20
        self.frame_state = tuple(frame_state)
        self._reset_frames()

    def _reset_frames(self) -> None:
        self._frame: Optional[int] = None
        self._kept: list[int] = []
        self._dropped: list[int] = []
        self._bytes = 0.0  # per datapoint, of the states kept
        self._frame_bytes = 0.0  # ... of them, of the frame in hand
        self._full = False  # a frame did not fit: it and every later one are dropped

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if (component, state) == self.frame_state:
            self._frame = None if data is None else int(data)
            return
        frame = self._frame
        if frame is None:
            super()._on_capture(component, state, data, metadata)
            return
        if frame % self.every_n_frames or frame in self._dropped or not self.wants(component, state):
            return
        if frame not in self._kept:
            if len(self._kept) >= self.max_frames or self._full:
                self._dropped.append(frame)
                return
            self._kept.append(frame)
            self._frame_bytes = 0.0
        size = _bytes_per_datapoint(data, (metadata or {}).get("batch_dim", 0))
        if self._bytes + size > self.max_bytes:
            self._drop_frame(frame)
            return
        self._bytes += size
        self._frame_bytes += size
        super()._on_capture(frame_component(component, frame), state, data, metadata)

    def _drop_frame(self, frame: int) -> None:
        """The frame in hand does not fit under the limit: forget the states it already gave, and take no more
        frames."""
        suffix = FRAME_SUFFIX.format(frame)
        self._captured = {component: states for component, states in self._captured.items()
                          if not component.endswith(suffix)}
        self._bytes -= self._frame_bytes
        self._kept.remove(frame)
        self._dropped.append(frame)
        self._full = True

    def wants(self, component: str, state: str) -> bool:
        """Whether ``component.state`` passes the filters, a frame's component (``x_frame_4``) judged as ``x``."""
        return super().wants(split_frame(component)[0], state)

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        output = super().__call__(datapoint, model)
        if isinstance(output, dict) and "states" in output:
            output["frames"] = {"every_n_frames": self.every_n_frames, "kept": list(self._kept),
                                "dropped": list(self._dropped)}
        return output

    def clear(self) -> None:
        super().clear()
        self._reset_frames()


def _bytes_per_datapoint(data: Any, batch_dim: Optional[int]) -> float:
    """The bytes ``data`` holds for one datapoint: each array's size over its batch dimension's length."""
    if isinstance(data, dict):
        return sum(_bytes_per_datapoint(value, batch_dim) for value in data.values())
    if isinstance(data, (list, tuple)):
        return sum(_bytes_per_datapoint(value, batch_dim) for value in data)
    if isinstance(data, torch.Tensor):
        size = data.numel() * data.element_size()
    elif isinstance(data, np.ndarray):
        size = data.nbytes
    else:
        return 0.0
    rows = data.shape[batch_dim] if batch_dim is not None and data.ndim > batch_dim else 1
    return size / max(rows, 1)
