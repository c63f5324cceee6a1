"""FrameCaptureDebugger: every N-th frame under a frame and memory limit, the same frames whatever the batch, and
enormous limits refused at start-up with the limit named."""

import numpy as np
import pytest
import torch

from debuggers.capture import capture_debug_state
from debuggers.frame_capture_debugger import MAX_FRAMES, FrameCaptureDebugger
from tests.debuggers.library import entry, run_batches
from utils.errors import ConfigError

FRAMES = 7


class FrameByFrame(torch.nn.Module):
    """Offers each frame's number, then a (B, 64) float32 state (256 bytes a datapoint) worth ``frame + row``."""

    def forward(self, inputs):
        x = inputs["x"]
        capture_debug_state("setup", "before_frames", x * 0)
        for t in range(FRAMES):
            capture_debug_state("video", "frame_index", t, {"batch_dim": None})
            capture_debug_state("step", "values", x.expand(-1, 64) + t)
        return {"y": x}


def batches(size):
    x = torch.arange(6, dtype=torch.float32)[:, None]
    return [{"inputs": {"x": x[s:s + size]}, "labels": {}, "meta_info": {"idx": torch.arange(s, min(s + size, 6))}}
            for s in range(0, 6, size)]


def captured(tmp_path, size, **args):
    debugger = [entry("frames", FrameCaptureDebugger, **args)]
    return run_batches(FrameByFrame(), batches(size), tmp_path / f"b{size}", debugger, strict=True)[1]


def test_every_nth_frame_is_kept_under_its_own_name(tmp_path):
    outputs = captured(tmp_path, 3, every_n_frames=3, max_frames=8)
    output = outputs[4]["frames"]
    assert output["frames"] == {"every_n_frames": 3, "kept": [0, 3, 6], "dropped": []}
    assert sorted(output["states"]) == ["setup", "step_frame_0", "step_frame_3", "step_frame_6"]
    np.testing.assert_array_equal(output["states"]["step_frame_3"]["values"]["data"], np.full(64, 4 + 3.0))


def test_the_frame_and_memory_limits_drop_later_frames_the_same_at_any_batch_size(tmp_path):
    by_count = captured(tmp_path, 2, every_n_frames=1, max_frames=2)[0]["frames"]["frames"]
    assert by_count["kept"] == [0, 1] and by_count["dropped"] == [2, 3, 4, 5, 6]
    limit_mb = 3 * 256 / 2**20  # room for three frames' 256 bytes (and 'setup' before them)
    kept = {size: captured(tmp_path / "memory", size, every_n_frames=2, max_frames=8,
                           max_mb_per_datapoint=limit_mb)[5]["frames"]["frames"] for size in (1, 4)}
    assert kept[1] == kept[4] == {"every_n_frames": 2, "kept": [0, 2, 4], "dropped": [6]}


@pytest.mark.parametrize("args, words", [
    ({"max_frames": MAX_FRAMES + 1}, f"to {MAX_FRAMES}"), ({"every_n_frames": 0}, "every_n_frames"),
    ({"max_mb_per_datapoint": 10_000}, "up to 256"), ({"frame_state": "video"}, "frame_state"),
])
def test_enormous_or_malformed_limits_are_refused(args, words):
    with pytest.raises(ConfigError, match=words):
        FrameCaptureDebugger(**args)
