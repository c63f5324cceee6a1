"""Pieces the benchmark scripts share: a real evaluator on synthetic data, a raw-feature debugger."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader

from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.forward_debugger import ForwardDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from metrics import ClassificationMetric
from models import SmallCNN
from runners.evaluators import BaseEvaluator


class RawFeatures(ForwardDebugger):
    """The layer's whole output for every datapoint: the heaviest capture a user asks for."""

    def process_forward(self, module: torch.nn.Module, input: Any, output: torch.Tensor) -> dict:
        return {"features": output.detach()}


def evaluator_config(work_dir: str, num_datapoints: int, resolution: int, batch_size: int,
                     page_size_mb: float, layer: str = "backbone.layer1") -> dict:
    """A real BaseEvaluator config whose debugger captures ``layer`` for every datapoint."""
    return {
        "runner": BaseEvaluator,
        "work_dir": work_dir,
        "eval_dataset": {"class": SyntheticShapesDataset,
                         "args": {"num_datapoints": num_datapoints, "resolution": resolution, "split": "val"}},
        "eval_dataloader": {"class": DataLoader, "args": {"batch_size": batch_size,
                                                          "collate_fn": collate_datapoints}},
        "model": {"class": SmallCNN, "args": {}},
        "metric": {"class": ClassificationMetric, "args": {}},
        "debugger": {"class": SequentialDebugger, "args": {
            "page_size_mb": page_size_mb,
            "debuggers_config": [{"name": "features",
                                  "debugger_config": {"class": RawFeatures, "args": {"layer_name": layer}}}],
        }},
    }


def ready_evaluator(config: dict) -> BaseEvaluator:
    evaluator = BaseEvaluator(config)
    evaluator._init_components_()
    return evaluator


def cached_batches(evaluator: BaseEvaluator) -> list[dict]:
    """The eval set collated once, so that timing measures the model and the debugger, not drawing."""
    return list(evaluator.eval_dataloader)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
