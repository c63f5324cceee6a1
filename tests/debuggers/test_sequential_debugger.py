"""SequentialDebugger with real hooks, real threads and real pages on disk."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.base_debugger import BaseDebugger
from debuggers.forward_debugger import ForwardDebugger
from debuggers.utils import UnknownLayerError
from debuggers.wrappers.sequential_debugger import DebuggerError, SequentialDebugger
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.debuggers.library import entry, make_batch, run_epoch
from tests.runs import REPO_ROOT, train, write_config
from utils.errors import ConfigError


class FeatureCopy(ForwardDebugger):
    """The layer's output, batch first, plus a per-datapoint mean."""

    def process_forward(self, module, input, output):
        return {"features": output.detach(), "mean": output.detach().mean(dim=tuple(range(1, output.ndim)))}


class Raises(BaseDebugger):
    def __call__(self, datapoint, model):
        raise RuntimeError("planted failure")


class BatchMean(ForwardDebugger):
    """Declared batch-first, yet breaks the batch contract: one number-tensor for the whole batch."""

    batch_mode = "batched"

    def process_forward(self, module, input, output):
        return {"mean": output.mean()}


def batch(images, idx):
    return make_batch(images, idx)


def forward_hook_count(model):
    return sum(len(m._forward_hooks) for m in model.modules())


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(16, 3, 16, 16)


def test_batch_1_and_8_give_the_same_per_datapoint_outputs(model, images, tmp_path):
    debuggers = [entry("l3", FeatureCopy, layer_name="backbone.layer3")]
    _, one = run_epoch(model, images, tmp_path / "b1", 1, debuggers)
    _, eight = run_epoch(model, images, tmp_path / "b8", 8, debuggers)
    assert sorted(one) == sorted(eight) == list(range(16))
    for i in range(16):
        np.testing.assert_allclose(one[i]["l3"]["features"], eight[i]["l3"]["features"], rtol=1e-5, atol=1e-6)
        assert one[i]["l3"]["features"].shape == (8, 2, 2)
        assert one[i]["l3"]["mean"] == pytest.approx(float(eight[i]["l3"]["mean"]), rel=1e-5)


def test_outputs_match_an_independent_forward_pass(model, images, tmp_path):
    _, outputs = run_epoch(model, images, tmp_path, 4, [entry("l2", FeatureCopy, layer_name="backbone.layer2")])
    with torch.no_grad():
        expected = model.backbone.layer2(model.backbone.layer1(images[5:6]))[0]
    np.testing.assert_allclose(outputs[5]["l2"]["features"], expected.numpy(), rtol=1e-5, atol=1e-6)


def test_capture_survives_a_later_in_place_op(model, images, tmp_path):
    # backbone.layer1.bn feeds nn.ReLU(inplace=True): an aliasing capture would come back without negatives
    _, outputs = run_epoch(model, images, tmp_path, 4, [entry("bn", FeatureCopy, layer_name="backbone.layer1.bn")])
    with torch.no_grad():
        expected = model.backbone.layer1.bn(model.backbone.layer1.conv(images[:1]))[0]
    assert (expected < 0).any()
    np.testing.assert_allclose(outputs[0]["bn"]["features"], expected.numpy(), rtol=1e-5, atol=1e-6)


def test_pages_split_and_every_idx_is_saved_once(model, images, tmp_path):
    # each datapoint's layer1 features: 4 channels x 8 x 8 float32 = 1 KiB; pages of ~3 KiB
    summary, outputs = run_epoch(model, images, tmp_path, 5,
                                     [entry("l1", FeatureCopy, layer_name="backbone.layer1")],
                                     page_size_mb=3 / 1024)
    assert summary["datapoints"] == 16
    assert summary["pages"] >= 4
    assert sorted(outputs) == list(range(16))


def test_hooks_exist_only_while_enabled(model, images):
    debugger = SequentialDebugger([entry("a", FeatureCopy, layer_name="backbone.layer4"),
                                   entry("b", FeatureCopy, layer_name="backbone.layer2")], model=model)
    assert forward_hook_count(model) == 0
    debugger.reset_buffer()
    debugger.enabled = True
    assert forward_hook_count(model) == 2
    debugger.enabled = False
    assert forward_hook_count(model) == 0
    model.train()(batch(images, [0, 1])["inputs"])  # a training step sees no hook
    assert debugger.debuggers["a"].last_capture is None
    debugger.enabled = True
    debugger.close()
    assert forward_hook_count(model) == 0


def test_capture_is_never_reused_for_another_batch(model, images, tmp_path):
    class Gate(nn.Module):
        """Runs its branch only for the first batch it sees."""
        def __init__(self, inner):
            super().__init__()
            self.inner, self.branch, self.calls = inner, nn.Identity(), 0

        def forward(self, inputs):
            self.calls += 1
            out = self.inner(inputs)
            if self.calls == 1:
                self.branch(out["logits"])
            return out

    gated = Gate(model)
    debugger = SequentialDebugger([entry("branch", FeatureCopy, layer_name="branch")], model=gated)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    first = batch(images, [0, 1])
    first["outputs"] = gated(first["inputs"])
    assert "features" in debugger(first, gated)["branch"]
    second = batch(images, [2, 3])
    second["outputs"] = gated(second["inputs"])
    assert debugger(second, gated) == {"branch": None}  # as the seed: None for a layer that did not run
    debugger.save_all()
    debugger.close()
    outputs = load_debug_outputs(str(tmp_path))
    assert outputs[3]["branch"] == {"kind": "not_run", "message": "layer 'branch' did not run in this forward pass"}


def test_a_failing_debugger_is_recorded_and_logged_once(model, images, tmp_path, caplog):
    debuggers = [entry("boom", Raises), entry("ok", FeatureCopy, layer_name="backbone.layer4"),
                 entry("contract", BatchMean, layer_name="backbone.layer1")]
    with caplog.at_level(logging.WARNING, logger="lantern.debugger"):
        _, outputs = run_epoch(model, images, tmp_path, 4, debuggers)
    for i in range(16):
        assert outputs[i]["boom"]["kind"] == "error"
        assert outputs[i]["boom"]["type"] == "RuntimeError" and outputs[i]["boom"]["message"] == "planted failure"
        assert outputs[i]["contract"]["kind"] == "error" and "batch first" in outputs[i]["contract"]["message"]
        assert outputs[i]["ok"]["features"].shape == (8, 2, 2)
    assert sum("debugger 'boom' failed" in r.getMessage() for r in caplog.records) == 1


def test_process_forward_failure_does_not_break_the_forward_pass(model, images, tmp_path):
    class Broken(ForwardDebugger):
        def process_forward(self, module, input, output):
            raise ValueError("bad hook")

    _, outputs = run_epoch(model, images, tmp_path, 8, [entry("b", Broken, layer_name="backbone.layer3")])
    assert outputs[0]["b"]["message"] == "bad hook"


def test_strict_mode_raises(model, images, tmp_path):
    with pytest.raises(DebuggerError, match="debugger 'boom' failed: RuntimeError: planted failure"):
        run_epoch(model, images, tmp_path, 4, [entry("boom", Raises)], strict=True)


@pytest.mark.parametrize("strict", [False, True])
def test_an_unusable_page_folder_stops_capture_not_the_run(model, images, tmp_path, strict):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the pages' folder should be")
    debugger = SequentialDebugger([entry("l1", FeatureCopy, layer_name="backbone.layer1")], model=model,
                                  page_size_mb=1 / 1024, strict=strict)
    if strict:
        with pytest.raises(Exception, match="not_a_folder"):
            debugger.reset_buffer(str(blocker / "debugger"))
    else:
        debugger.reset_buffer(str(blocker / "debugger"))
        debugger.enabled = True
        dp = batch(images, [0, 1])
        dp["outputs"] = model(dp["inputs"])
        assert "features" in debugger(dp, model)["l1"]
        summary = debugger.save_all(str(blocker / "debugger"))
        assert summary["datapoints"] == 0 and "not_a_folder" in summary["error"]
    debugger.close()


@pytest.mark.parametrize("args, message", [
    ({"debuggers_config": [entry("x", FeatureCopy, layer_name="a"), entry("x", FeatureCopy, layer_name="b")]},
     "duplicate debugger name 'x'"),
    ({"debuggers_config": [entry("x", FeatureCopy, layer_name="a")], "page_size_mb": 0}, "page_size_mb"),
    ({"debuggers_config": [entry("x", FeatureCopy, layer_name="a")], "page_size_mb": "big"}, "page_size_mb"),
    ({"debuggers_config": [entry("x", FeatureCopy, layer_name="a")], "page_size_mb": float("nan")},
     "page_size_mb"),
    ({"debuggers_config": {"x": 1}}, "debuggers_config must be a list"),
    ({"debuggers_config": [{"name": "x"}]}, "exactly 'name' and 'debugger_config'"),
    ({"debuggers_config": [entry("x", torch.nn.ReLU)]}, "not a BaseDebugger"),
])
def test_config_errors_are_clear(args, message):
    with pytest.raises(ConfigError, match=message):
        SequentialDebugger(**args)


def test_unknown_layer_names_the_closest_ones(model):
    with pytest.raises(UnknownLayerError, match=r"no layer 'backbone.layr4'.*backbone.layer4"):
        SequentialDebugger([entry("x", FeatureCopy, layer_name="backbone.layr4")], model=model)


def test_layers_of_any_debugger_are_checked_at_start_up(model):
    from debuggers.gradcam_debugger import GradCAMDebugger

    with pytest.raises(UnknownLayerError, match=r"debugger 'cam'.*no layer 'backbone.layer5'.*backbone.layer4"):
        SequentialDebugger([entry("cam", GradCAMDebugger, target_layer="backbone.layer5")], model=model)


def test_user_input_checks_hold_under_python_O():
    code = (
        "from debuggers.wrappers.sequential_debugger import SequentialDebugger\n"
        "from tests.debuggers.test_sequential_debugger import FeatureCopy, entry\n"
        "from models import SmallCNN\n"
        "for args in ({'debuggers_config': [entry('x', FeatureCopy, layer_name='a')] * 2},\n"
        "             {'debuggers_config': [entry('x', FeatureCopy, layer_name='a')], 'page_size_mb': -1},\n"
        "             {'debuggers_config': [entry('x', FeatureCopy, layer_name='nope')], 'model': SmallCNN()}):\n"
        "    try:\n"
        "        SequentialDebugger(**args)\n"
        "    except ValueError as exc:\n"
        "        print('refused:', exc)\n"
    )
    result = subprocess.run([sys.executable, "-O", "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refused:") == 3


class ItemMean(ForwardDebugger):
    """Declared batch-first, yet a whole-batch statistic through .item(): one number for every datapoint."""

    batch_mode = "batched"

    def process_forward(self, module, input, output):
        return {"stats": {"mean": output.mean().item()}, "layer": "backbone.layer1", "channels": 4}


def test_a_python_number_is_warned_about_once_naming_the_debugger_and_the_fix(model, images, tmp_path, caplog):
    debuggers = [entry("item", ItemMean, layer_name="backbone.layer1"),
                 entry("fine", FeatureCopy, layer_name="backbone.layer1")]
    with caplog.at_level(logging.WARNING, logger="lantern.debugger"):
        _, outputs = run_epoch(model, images[:8], tmp_path, 4, debuggers)
    warnings = [r.getMessage() for r in caplog.records if "Python number" in r.getMessage()]
    assert len(warnings) == 1
    assert "debugger 'item'" in warnings[0] and "'stats.mean'" in warnings[0]
    assert "output.mean(dim=(1, 2, 3)) instead of float(output.mean())" in warnings[0]
    assert outputs[0]["item"]["stats"]["mean"] == outputs[3]["item"]["stats"]["mean"]  # still stored, as it was


def test_an_empty_debuggers_list_is_a_debugger_that_does_nothing(model, images, tmp_path):
    debugger = SequentialDebugger([], model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    with torch.no_grad():
        dp = batch(images, range(4))
        dp["outputs"] = model(dp["inputs"])
        assert debugger(dp, model) == {}
    assert debugger.save_all(str(tmp_path / "debugger"))["datapoints"] == 0
    debugger.close()
    assert forward_hook_count(model) == 0


def test_a_run_with_every_debugger_commented_out_trains(tmp_path):
    extra = ("config['debugger'] = {'class': SequentialDebugger, 'args': {'debuggers_config': [\n"
             "    # {'name': 'features', 'debugger_config': ...},\n]}}\n")
    work_dir = train(write_config(tmp_path / "off.py", tmp_path / "off", epochs=1, train_size=16, val_size=8,
                                  extra=extra))
    assert os.path.exists(os.path.join(work_dir, "epoch_0", "checkpoint.pt"))
