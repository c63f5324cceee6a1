"""The seed's contract as its design doc writes it: ``SequentialDebugger.__call__`` returns ``{name: that debugger's own
return value}``, a debugger's ``last_capture`` is that value and None where it did not run; ``enabled = True`` may
come before the hooks; the pages still hold one output per datapoint."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch

from debuggers.base_debugger import BaseDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.forward_debugger import ForwardDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.debuggers.library import entry, make_batch


class BatchFirst(ForwardDebugger):
    batch_mode = "batched"

    def process_forward(self, module, input, output):
        return {"features": output.detach(), "mean": output.detach().flatten(1).mean(1)}


class SeedStats(ForwardDebugger):
    """The seed's example, written for one datapoint per forward pass."""

    def process_forward(self, module, input, output):
        return {"mean": float(output.mean()), "shape": list(output.shape)}


class InputMean(BaseDebugger):
    def __call__(self, datapoint, model):
        return {"input_mean": float(datapoint["inputs"]["image"].mean())}


class WholeBatchFails(BaseDebugger):
    """Runs on one datapoint, refuses a batch of several."""

    def __call__(self, datapoint, model):
        image = datapoint["inputs"]["image"]
        if len(image) > 1:
            raise ValueError("one datapoint at a time")
        return {"input_mean": float(image.mean())}


@pytest.fixture
def images():
    torch.manual_seed(1)
    return torch.randn(8, 3, 16, 16)


def forward(model, images, idx):
    dp = make_batch(images, idx)
    with torch.no_grad():
        dp["outputs"] = model(dp["inputs"])
    return dp


def hooks_on(model):
    return sum(len(m._forward_hooks) for m in model.modules())


def test_call_returns_each_debuggers_own_value_and_last_capture_is_it(model, images, tmp_path):
    debugger = SequentialDebugger([entry("first", BatchFirst, layer_name="backbone.layer2"),
                                   entry("seed", SeedStats, layer_name="backbone.layer2"),
                                   entry("plain", InputMean)], model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    dp = forward(model, images, range(4))
    captured = {name: debugger.debuggers[name].last_capture for name in ("first", "seed")}  # set by the hooks
    returned = debugger(dp, model)
    assert returned["first"] is captured["first"] and returned["seed"] is captured["seed"]
    with torch.no_grad():
        layer2 = model.backbone.layer2(model.backbone.layer1(dp["inputs"]["image"]))
    np.testing.assert_allclose(returned["first"]["features"].numpy(), layer2.numpy(), rtol=1e-5, atol=1e-6)
    # the seed's debugger on the whole batch, as the seed calls it: one number and the batch's shape
    assert returned["seed"] == {"mean": float(layer2.mean()), "shape": [4, *layer2.shape[1:]]}
    assert returned["plain"] == {"input_mean": float(dp["inputs"]["image"].mean())}
    debugger.save_all()
    debugger.close()
    pages = load_debug_outputs(str(tmp_path))
    for i in range(4):  # the pages keep each datapoint's own, as at batch 1
        assert pages[i]["seed"]["shape"] == [1, *layer2.shape[1:]]
        assert pages[i]["seed"]["mean"] == float(layer2[i].mean())
        assert pages[i]["plain"]["input_mean"] == float(images[i].mean())
        np.testing.assert_allclose(pages[i]["first"]["features"], layer2[i].numpy(), rtol=1e-5, atol=1e-6)


def test_at_batch_1_the_value_is_the_debuggers_output_not_a_list(model, images):
    debugger = SequentialDebugger([entry("seed", SeedStats, layer_name="backbone.layer2"),
                                   entry("plain", InputMean)], model=model)
    debugger.reset_buffer()
    debugger.enabled = True
    returned = debugger(forward(model, images, [5]), model)
    assert returned["plain"] == {"input_mean": float(images[5].mean())}
    assert set(returned["seed"]) == {"mean", "shape"} and returned["seed"]["shape"][0] == 1
    debugger.close()


def test_a_debugger_that_did_not_run_is_none_and_its_pages_say_why(model, images, tmp_path):
    debugger = SequentialDebugger([entry("nan", NaNInfDebugger), entry("states", CaptureDebugger),
                                   entry("first", BatchFirst, layer_name="backbone.layer2")], model=model)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    returned = debugger(make_batch(images, [0, 1]), model)  # no forward pass since it was enabled
    assert returned == {"nan": None, "states": None, "first": None}
    debugger.save_all()
    debugger.close()
    pages = load_debug_outputs(str(tmp_path))
    assert pages[1]["first"] == {"kind": "not_run", "message": "layer 'backbone.layer2' did not run in this forward "
                                                                "pass"}
    assert pages[1]["nan"]["kind"] == pages[1]["states"]["kind"] == "not_run"
    assert "no capture point matched" in pages[1]["states"]["message"]


def test_a_whole_batch_failure_of_a_per_datapoint_debugger_is_its_value_only(model, images, tmp_path, caplog):
    debugger = SequentialDebugger([entry("alone", WholeBatchFails)], model=model, strict=True)
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    with caplog.at_level(logging.WARNING, logger="lantern.debugger"):
        returned = debugger(forward(model, images, range(3)), model)
    assert returned["alone"]["kind"] == "error" and returned["alone"]["message"] == "one datapoint at a time"
    assert not [r for r in caplog.records if "failed" in r.getMessage()]  # nothing failed for the pages
    debugger.save_all()
    debugger.close()
    pages = load_debug_outputs(str(tmp_path))
    assert [pages[i]["alone"]["input_mean"] for i in range(3)] == [float(images[i].mean()) for i in range(3)]


def test_enabled_first_then_the_hooks_as_the_seed_orders_them(model, images, tmp_path):
    debugger = SequentialDebugger([entry("first", BatchFirst, layer_name="backbone.layer2")])
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    assert hooks_on(model) == 0
    debugger.register_hooks(model)
    assert hooks_on(model) == 1
    assert "features" in debugger(forward(model, images, [0, 1]), model)["first"]
    debugger.enabled = False
    assert hooks_on(model) == 0
    debugger.close()


def test_enabled_before_any_model_takes_the_model_of_its_first_call(model, images, tmp_path):
    debugger = SequentialDebugger([entry("first", BatchFirst, layer_name="backbone.layer2")])
    debugger.reset_buffer(str(tmp_path / "debugger"))
    debugger.enabled = True
    assert debugger(forward(model, images, [0, 1]), model) == {"first": None}  # its forward ran before the hooks
    assert "features" in debugger(forward(model, images, [2, 3]), model)["first"]
    debugger.save_all()
    debugger.close()
    pages = load_debug_outputs(str(tmp_path))
    assert pages[0]["first"]["kind"] == "not_run" and pages[2]["first"]["features"].shape == (4, 4, 4)


def test_hooks_registered_by_hand_as_the_seeds_trainer_does_are_not_doubled(model, images):
    debugger = SequentialDebugger([entry("first", BatchFirst, layer_name="backbone.layer2")])
    forward_debugger = debugger.forward_debuggers["backbone.layer2"][0]
    by_hand = model.backbone.layer2.register_forward_hook(forward_debugger.forward_hook_fn)
    debugger.register_hooks(model)
    debugger.reset_buffer()
    debugger.enabled = True
    assert hooks_on(model) == 1
    assert "features" in debugger(forward(model, images, [0, 1]), model)["first"]
    debugger.close()
    by_hand.remove()


def test_reset_buffer_twice_says_nothing(model, caplog):
    debugger = SequentialDebugger([entry("first", BatchFirst, layer_name="backbone.layer2")], model=model)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.DEBUG, logger="lantern.debugger"):
        warnings.simplefilter("always")
        debugger.reset_buffer()
        debugger.reset_buffer()
        debugger.reset_buffer()
    debugger.close()
    assert not caught and not caplog.records
