"""Default example: a small CNN on synthetic shapes.

    python main.py --config-filepath configs/examples/cnn_trainer.py
"""

import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import SyntheticShapesDataset, collate_datapoints
from metrics import ClassificationMetric
from models import SmallCNN
from runners.trainers import BaseTrainer

EPOCHS = 6

config = {
    "runner": BaseTrainer,
    "seed": 0,
    "device": "cpu",
    "epochs": EPOCHS,
    "checkpoint_method": "latest",
    "train_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 2000, "split": "train"}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 32, "collate_fn": collate_datapoints}},
    "val_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 500, "split": "val"}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 64, "collate_fn": collate_datapoints}},
    "model": {"class": SmallCNN, "args": {"num_classes": 6}},
    "criterion": {"class": CrossEntropyCriterion, "args": {}},
    "metric": {"class": ClassificationMetric, "args": {}},
    "optimizer": {"class": torch.optim.Adam, "args": {"lr": 2e-3}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
}
