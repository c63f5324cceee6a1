"""A small vision transformer on synthetic shapes, with its attention maps and the states
its capture points offer (patch embeddings, position encodings) for every validation datapoint.

    python main.py --config-filepath configs/examples/attention_trainer.py
"""

import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from metrics import ClassificationMetric
from models import AttentionClassifier
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
    "model": {"class": AttentionClassifier, "args": {"num_classes": 6}},
    "criterion": {"class": CrossEntropyCriterion, "args": {}},
    "metric": {"class": ClassificationMetric, "args": {}},
    "optimizer": {"class": torch.optim.AdamW, "args": {"lr": 1e-3, "weight_decay": 0.05}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 16,
            "debuggers_config": [
                {"name": "block1_attention",
                 "debugger_config": {"class": AttentionDebugger, "args": {"layer_name": "blocks.1.attn"}}},
                # attention weights are already shown above: keep embeddings and position encodings
                {"name": "captured",
                 "debugger_config": {"class": CaptureDebugger, "args": {"capture_attention": False}}},
            ],
        },
    },
}
