"""Real data, nothing planted: scikit-learn's handwritten digits (``DigitsDataset``: 8x8 scans upsampled to 16
pixels, a third of them for validation, the split fixed by the seed) and a small CNN, with the stroke's ink,
thickness, size, slant and centre as meta info for the failure analysis. About 97% validation accuracy in about
10 seconds on two cores.

    python main.py --config-filepath configs/examples/digits_trainer.py
    python -m runners.analyze --run logs/examples/digits_trainer
"""

import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import collate_datapoints
from data.datasets.digits import DigitsDataset
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
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
    "train_dataset": {"class": DigitsDataset, "args": {"split": "train"}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 32, "collate_fn": collate_datapoints}},
    "val_dataset": {"class": DigitsDataset, "args": {"split": "val"}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 128, "collate_fn": collate_datapoints}},
    "model": {"class": SmallCNN, "args": {"num_classes": 10, "in_channels": 1, "widths": (8, 16, 16, 16)}},
    "criterion": {"class": CrossEntropyCriterion, "args": {}},
    "metric": {"class": ClassificationMetric, "args": {}},
    "optimizer": {"class": torch.optim.Adam, "args": {"lr": 2e-3}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 8,
            "debuggers_config": [
                {"name": "layer4_output",
                 "debugger_config": {"class": LayerOutputDebugger, "args": {"layer_name": "backbone.layer4"}}},
                {"name": "layer3_stats",
                 "debugger_config": {"class": ActivationStatsDebugger, "args": {"layer_name": "backbone.layer3"}}},
                {"name": "gradcam",
                 "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}}},
            ],
        },
    },
}
