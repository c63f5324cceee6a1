"""The seeds' ``debugger_examples.md`` as a user pastes it: its five debuggers and its configuration example, written
for one datapoint per forward pass, run with ``main.py`` at validation batch 8 give every datapoint what it gets at
batch 1, and what the seed code computes on a batch-1 forward of that datapoint by hand."""

from __future__ import annotations

import os
import pathlib
import re
import shutil

import numpy as np
import pytest
import torch

from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.runs import run_main
from tests.seeds.seedproj.activation_stats import ActivationStatsDebugger
from tests.seeds.seedproj.attention import AttentionDebugger
from tests.seeds.seedproj.feature_map import FeatureMapDebugger
from tests.seeds.seedproj.gradcam import GradCAMDebugger
from tests.seeds.seedproj.layer_output import LayerOutputDebugger
from tests.seeds.seedproj.models import SeedNet

PROJECT = pathlib.Path(__file__).parent / "seedproj"
PASTED = ["feature_map.py", "attention.py", "activation_stats.py", "layer_output.py", "gradcam.py"]
CONFIG_PART = re.compile(r"# ---- debugger_examples.md, \"Configuration Example\" ----\n(.*?)# ---- end of the example",
                         re.DOTALL)
NAMES = ["backbone_features", "attention_analysis", "activation_stats", "raw_outputs", "gradcam_analysis"]
VAL = {"num_datapoints": 12, "resolution": 16, "split": "val"}  # the project's validation set


def seed_file(name: str) -> pathlib.Path | None:
    """``shared/seeds/<name>`` beside the repository or one of its parents (absent outside this workplace)."""
    for folder in pathlib.Path(__file__).resolve().parents:
        path = folder / "shared" / "seeds" / name
        if path.is_file():
            return path
    return None


def test_the_project_holds_the_seed_code_character_for_character():
    path = seed_file("debugger_examples.md")
    if path is None:
        pytest.skip("the seeds' debugger_examples.md is not beside this checkout")
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), re.DOTALL)
    assert [(PROJECT / name).read_text() for name in PASTED] == blocks[:5]
    assert CONFIG_PART.search((PROJECT / "config.py").read_text()).group(1) == blocks[5]


def every_record(value):
    """Every dict inside a page value (to find error records at any depth)."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from every_record(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from every_record(item)


def assert_same(a, b, path=""):
    """Equal page values, floats to float32 rounding (the batch of 8 runs other kernels than the batch of 1)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for key in a:
            assert_same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)) and not isinstance(a, str):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, float)):
        assert np.shape(a) == np.shape(b), path
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=path)
    else:
        assert a == b, path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The project trained with main.py twice, validated at batch 8 and at batch 1: their work dirs."""
    folder = tmp_path_factory.mktemp("user")
    shutil.copytree(PROJECT, folder / "seedproj")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    work_dirs = {}
    for batch, config in ((8, "config.py"), (1, "config_batch1.py")):
        result = run_main(os.path.join("seedproj", config), cwd=folder, env=env)
        assert result.returncode == 0, result.stderr
        work_dirs[batch] = folder / "logs" / "seedproj" / config.removesuffix(".py")
    return work_dirs


@pytest.mark.timeout(300)
def test_batch_8_gives_every_datapoint_what_batch_1_gives_it_with_no_error_record(runs):
    batched, alone = (load_debug_outputs(str(runs[b] / "epoch_0")) for b in (8, 1))
    assert sorted(batched) == sorted(alone) == list(range(12))
    for idx in range(12):
        assert list(batched[idx]) == NAMES
        assert not [r for r in every_record(batched[idx]) if r.get("kind") == "error"]
        assert_same(batched[idx], alone[idx], f"datapoint {idx}")
    assert batched[3]["backbone_features"]["feature_map"].shape == (16, 4, 4)  # its own map, not the batch's
    assert batched[3]["backbone_features"]["stats"]["shape"] == [1, 16, 4, 4]  # as the seed computes it at batch 1
    assert batched[3]["attention_analysis"]["attention_stats"]["attention_distribution"].shape == (16, 16)
    # the seed's GradCAM example reads datapoint['outputs'] as a tensor; a Lantern model returns a dict of outputs
    assert batched[3]["gradcam_analysis"] == {"error": "Model output is not a tensor"}


@pytest.mark.timeout(300)
def test_the_log_says_once_per_debugger_that_it_runs_per_datapoint_and_why(runs):
    log = (runs[8] / "train.log").read_text()
    for name, why in [("backbone_features", "a Python number at 'stats.mean'"),
                      ("attention_analysis", "a Python number at 'attention_stats.entropy'"),
                      ("activation_stats", "a Python number at 'activation_stats.mean'"),
                      ("raw_outputs", "at 'original_shape[0]' the batch gives 8, alone 1"),
                      ("gradcam_analysis", "every datapoint of the batch gave the same output")]:
        lines = [line for line in log.splitlines() if f"debugger '{name}' runs per datapoint" in line]
        assert len(lines) == 1 and why in lines[0], (name, lines)
    assert "runs per datapoint" not in (runs[1] / "train.log").read_text()  # at batch 1 there is nothing to decide


@pytest.mark.timeout(300)
def test_each_datapoint_holds_what_the_seed_code_computes_on_its_own_forward_pass(runs):
    """Independent of Lantern's batch handling: the seed's process_forward called from a plain torch hook on a
    batch-1 forward of the trained model, for three datapoints."""
    model = SeedNet()
    model.load_state_dict(torch.load(runs[8] / "epoch_0" / "checkpoint.pt", weights_only=True)["model_state_dict"])
    model.eval()
    stored = load_debug_outputs(str(runs[8] / "epoch_0"))
    debuggers = {"backbone_features": FeatureMapDebugger("backbone.layer4"),
                 "attention_analysis": AttentionDebugger("head.attention"),
                 "activation_stats": ActivationStatsDebugger("backbone.layer3"),
                 "raw_outputs": LayerOutputDebugger("backbone.layer2", downsample_factor=2)}
    modules = dict(model.named_modules())
    dataset = SyntheticShapesDataset(**VAL)
    for idx in (0, 5, 11):
        seen = {}
        handles = [modules[d.layer_name].register_forward_hook(
            lambda m, i, o, name=name, d=d, seen=seen: seen.__setitem__(name, d.process_forward(m, i, o)))
            for name, d in debuggers.items()]
        with torch.no_grad():
            model(collate_datapoints([dataset[idx]])["inputs"])
        for handle in handles:
            handle.remove()
        for name, output in seen.items():
            assert_same(stored[idx][name], by_hand(output), f"datapoint {idx} {name}")


def by_hand(value):
    """A batch-1 output as a page holds it: the batch dimension of 1 dropped, tensors as arrays."""
    if isinstance(value, torch.Tensor):
        return value[0].numpy() if value.ndim and value.shape[0] == 1 else value.numpy()
    if isinstance(value, dict):
        return {key: by_hand(item) for key, item in value.items()}
    return value


class TensorOutputNet(SeedNet):
    """The model the seed's GradCAM example expects: its forward returns the logits tensor itself."""

    def forward(self, inputs):
        return super().forward(inputs)["logits"]


def test_the_gradcam_example_on_a_tensor_output_gives_each_datapoint_its_own_map(tmp_path):
    """The example's map is ``torch.rand``: its values cannot be compared across batch sizes, the rest of its
    output is, and each datapoint gets one (8, 8) map with the statistics of that map, as at batch 1."""
    torch.manual_seed(0)
    model = TensorOutputNet().eval()
    dataset = SyntheticShapesDataset(**VAL)
    pages = {}
    for batch in (8, 1):
        debugger = SequentialDebugger([{"name": "gradcam_analysis", "debugger_config": {
            "class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4", "target_class": None}}}],
            model=model)
        debugger.reset_buffer(str(tmp_path / f"b{batch}" / "debugger"))
        debugger.enabled = True
        with torch.no_grad():
            for start in range(0, 12, batch):
                dp = collate_datapoints([dataset[i] for i in range(start, min(start + batch, 12))])
                dp["outputs"] = model(dp["inputs"])
                debugger(dp, model)
        debugger.save_all(str(tmp_path / f"b{batch}" / "debugger"))
        debugger.close()
        pages[batch] = load_debug_outputs(str(tmp_path / f"b{batch}"))
    for idx in range(12):
        one, eight = pages[1][idx]["gradcam_analysis"], pages[8][idx]["gradcam_analysis"]
        assert eight["gradcam"].shape == one["gradcam"].shape == (8, 8)
        assert 0 <= eight["gradcam"].min() and eight["gradcam"].max() < 1
        stats = eight["gradcam_stats"]
        assert stats["shape"] == one["gradcam_stats"]["shape"] == [1, 8, 8]
        assert stats["mean"] == pytest.approx(float(eight["gradcam"].mean()), rel=1e-5)  # of its own map
        assert {k: v for k, v in eight.items() if k not in ("gradcam", "gradcam_stats")} == {
            k: v for k, v in one.items() if k not in ("gradcam", "gradcam_stats")} == {
            "target_layer": "backbone.layer4", "target_class": None}
