"""Activation checkpointing in a user's own forward (``torch.utils.checkpoint``), as docs/training_monitor.md shows it:
the debuggers capture under it what they capture without it (feature maps, statistics, Grad-CAM, whose backward
recomputes the checkpointed stages and fires their hooks again), and training runs; BatchNorm inside a checkpointed
stage counts each training batch twice, as the page says."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint

from runners.eval_viewer.backend.initialization import load_debug_outputs
from runners.evaluators import BaseEvaluator
from tests.runners.test_plain_models import PlainCNN, small_cnn_example, train
from tests.runs import one_thread


class CheckpointedCNN(PlainCNN):
    """PlainCNN whose four stages are checkpointed: their activations are recomputed in the backward pass."""

    def __init__(self, always: bool = False, **args) -> None:
        super().__init__(**args)
        self.always = always  # checkpoint in evaluation too, where most models do not

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.backbone:
            x = checkpoint(stage, x, use_reentrant=False) if self.training or self.always else stage(x)
        return self.head(x)


def evaluate(config: dict, work_dir, model: dict) -> dict:
    evaluation = {"runner": BaseEvaluator, "work_dir": str(work_dir), "model": model, "metric": config["metric"],
                  "debugger": config["debugger"], "eval_dataset": config["val_dataset"],
                  "eval_dataloader": config["val_dataloader"], "checkpoint": config["work_dir"]}
    with one_thread():
        BaseEvaluator(evaluation).run()
    return load_debug_outputs(str(work_dir))


def test_the_debuggers_capture_under_checkpointing_what_they_capture_without(tmp_path):
    config = small_cnn_example(tmp_path / "trained", {"class": CheckpointedCNN, "args": {}})
    train(config)  # checkpointed while training
    plain = evaluate(config, tmp_path / "plain", {"class": PlainCNN, "args": {}})
    checkpointed = evaluate(config, tmp_path / "checkpointed", {"class": CheckpointedCNN, "args": {"always": True}})
    assert sorted(plain) == sorted(checkpointed) == list(range(40))
    for idx in range(40):
        assert list(checkpointed[idx]) == ["layer4_features", "layer3_stats", "gradcam"]
        for name, output in plain[idx].items():
            for key, value in output.items():
                if isinstance(value, np.ndarray):
                    np.testing.assert_allclose(checkpointed[idx][name][key], value, atol=1e-5, err_msg=f"{name}.{key}")


def test_batchnorm_inside_a_checkpointed_stage_counts_each_batch_twice():
    model = CheckpointedCNN(widths=(4, 4, 4, 4)).train()
    model(torch.randn(4, 3, 16, 16)).sum().backward()
    assert int(model.backbone.layer1.bn.num_batches_tracked) == 2  # the forward pass and its recomputation
