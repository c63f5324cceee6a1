"""The seeds' PyTorch chapter (``pytorch_debugging_chapter.md``) as a reader runs it: each of its 15 code blocks
executed as written, in a namespace of what a reader has (``torch``, ``nn``, ``plt``, PIL's ``Image``, a DataLoader
of (image, label) tuples, a criterion and an optimizer), on a plain model (tensor in, logits out: torchvision's
ResNet names, ``conv1`` ... ``layer4``, ``fc``) that Lantern trained with the config's ``model`` entry alone and whose
checkpoint loads into it as it is. The blocks that still fail need a package Lantern does not install (seaborn,
torchsummary, fvcore; Lantern's model report gives parameter counts and FLOPs per module)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import warnings
from collections import OrderedDict

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

from data.datasets import SyntheticShapesDataset
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from runners.checkpoints import load_checkpoint_file
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.runners.test_plain_models import small_cnn_example, train
from tests.seeds.test_debugger_examples import seed_file

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

pytestmark = pytest.mark.slow  # trains the chapter's model: runs in .ci/run's second command (README: the slow tests)

TOP_LEVEL_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
CHECKLIST_BLOCK = re.compile(r"^ +```python\n(.*?)^ +```", re.DOTALL | re.MULTILINE)


def stage(in_channels: int, out_channels: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels),
                         nn.ReLU())


class TinyResNet(nn.Module):
    """A plain model with torchvision ResNet's layer names and 1000 ImageNet logits (the chapter's Grad-CAM asks for
    class 243); ReLUs not in place (the chapter's backward hooks refuse a module output changed in place)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()
        self.layer1, self.layer2 = stage(16, 16), nn.Sequential(nn.MaxPool2d(2), stage(16, 32))
        self.layer3, self.layer4 = nn.Sequential(nn.MaxPool2d(2), stage(32, 32)), stage(32, 32)
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def chapter_blocks() -> tuple[list[str], list[str]]:
    path = seed_file("pytorch_debugging_chapter.md")
    if path is None:
        pytest.skip("the seeds' pytorch_debugging_chapter.md is not beside this checkout")
    text = path.read_text()
    checklist = [re.sub(r"(?m)^ {3}", "", block) for block in CHECKLIST_BLOCK.findall(text)]
    return TOP_LEVEL_BLOCK.findall(text), checklist


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """TinyResNet trained by Lantern (the default example's config, its model entry and Grad-CAM's layer changed),
    and the model loaded from its checkpoint outside Lantern."""
    folder = tmp_path_factory.mktemp("chapter")
    config = small_cnn_example(folder / "run", {"class": TinyResNet, "args": {}})
    config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
        {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "layer4"}}}]}}
    run = train(config)
    model = TinyResNet()
    model.load_state_dict(load_checkpoint_file(run.epoch(1).checkpoint)["model_state_dict"])
    return folder, run, model


def reader_namespace(model: nn.Module) -> dict:
    """What a reader of the chapter has defined before its blocks: imports, data as (image, label) tuples, a loss,
    an optimizer, an image."""
    shapes = SyntheticShapesDataset(num_datapoints=64, split="val")
    images = torch.stack([shapes[i]["inputs"]["image"] for i in range(64)])
    labels = torch.stack([shapes[i]["labels"]["class"] for i in range(64)])
    dataset = TensorDataset(images, labels)
    criterion = nn.CrossEntropyLoss()
    data, target = images[:16], labels[:16]
    logits = model(data)
    return {
        "torch": torch, "nn": nn, "F": F, "optim": optim, "np": np, "plt": plt, "Image": Image,
        "DataLoader": DataLoader, "model": model, "dataset": dataset,
        "train_loader": DataLoader(dataset, batch_size=16), "val_loader": DataLoader(dataset, batch_size=16),
        "criterion": criterion, "optimizer": optim.SGD(model.parameters(), lr=0.01), "num_epochs": 1,
        "data": data, "target": target, "loss": criterion(logits, target), "probs": logits.softmax(1).detach(),
        "input_tensor": images[:4], "x": images[:4], "expensive_layer": model.conv1,
        "test_image": images[0], "preprocessed_image": images[:1], "original_image": images[0],
        "attention_weights": torch.softmax(torch.randn(3, 3), dim=-1),
    }


def run_block(code: str, namespace: dict, folder) -> str:
    """'ok', or the error the block stopped with; it runs in ``folder`` (the TensorBoard block writes runs/ there)."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(code, "<chapter block>", "exec"), namespace)
        return "ok"
    except Exception as exc:  # a block of the chapter failing is what is counted
        return f"{type(exc).__name__}: {exc}"
    finally:
        os.chdir(cwd)
        plt.close("all")


def expected_outcomes() -> dict[int, str]:
    """Blocks that do not run as written, and why (the first one shows its RuntimeError on purpose)."""
    expected = {0: "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x784 and 512x10)"}
    if importlib.util.find_spec("seaborn") is None:
        expected[11] = "ModuleNotFoundError: No module named 'seaborn'"
    if importlib.util.find_spec("torchsummary") is None:
        expected[13] = "ModuleNotFoundError: No module named 'torchsummary'"
    expected[14] = ("ModuleNotFoundError: No module named 'fvcore'" if importlib.util.find_spec("fvcore") is None
                    else "NameError: name 'MyModel' is not defined")
    return expected


@pytest.mark.timeout(400)
def test_the_chapters_blocks_run_as_written_on_a_plain_model_lantern_trained(trained):
    folder, run, model = trained
    blocks, checklist = chapter_blocks()
    assert len(blocks) == 15 and len(checklist) == 4
    outcomes = {i: run_block(code, reader_namespace(model), folder) for i, code in enumerate(blocks)}
    expected = expected_outcomes()
    assert {i: outcome for i, outcome in outcomes.items() if outcome != "ok"} == expected
    assert sum(outcome == "ok" for outcome in outcomes.values()) == 15 - len(expected)  # 11 of 15 here
    for i, code in enumerate(checklist):
        assert run_block(code, reader_namespace(model), folder) == "ok", i
    assert os.path.isdir(folder / "runs" / "experiment1")  # the TensorBoard block's own event files


def test_lantern_debugged_the_same_model_every_datapoint(trained):
    _, run, _ = trained
    outputs = load_debug_outputs(run.epoch(1).path)
    assert sorted(outputs) == list(range(40))
    assert all(outputs[idx]["gradcam"]["cam"].shape == (32, 32) for idx in outputs)


def test_the_chapters_model_names_are_its_own_under_lantern(trained):
    _, run, model = trained
    state = load_checkpoint_file(run.epoch(1).checkpoint)["model_state_dict"]
    assert list(state) == list(model.state_dict()) and list(state)[0] == "conv1.weight"
    assert OrderedDict(model.named_children()).keys() >= {"conv1", "layer4", "fc"}
