"""Evaluate the default example's best checkpoint on a held-out test split, capturing
feature maps, statistics and Grad-CAM for every datapoint.

    python main.py --config-filepath configs/examples/cnn_trainer.py     # first
    python main.py --config-filepath configs/examples/cnn_evaluator.py
"""

from torch.utils.data import DataLoader

from configs.examples.cnn_trainer import config as trainer_config
from data.datasets import SyntheticShapesDataset, collate_datapoints
from runners.evaluators import BaseEvaluator

config = {
    "runner": BaseEvaluator,
    "seed": 0,
    "device": "cpu",
    "checkpoint": "logs/examples/cnn_trainer",  # a trainer work dir: its best epoch's checkpoint
    "eval_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 500, "split": "test"}},
    "eval_dataloader": {"class": DataLoader, "args": {"batch_size": 64, "collate_fn": collate_datapoints}},
    "model": trainer_config["model"],
    "metric": trainer_config["metric"],
    "debugger": trainer_config["debugger"],
}
