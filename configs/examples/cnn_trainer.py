"""Default example: a small CNN on synthetic shapes, with feature maps, statistics and Grad-CAM
captured for every validation datapoint at every second epoch (epochs 1, 3 and 5), so the viewer can
compare a datapoint across epochs, and the training monitored (the viewer's Training tab).

    python main.py --config-filepath configs/examples/cnn_trainer.py
"""

import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import SyntheticShapesDataset, collate_datapoints
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
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
    "checkpoint_method": 2,  # checkpoints and debug outputs every 2nd epoch and at the last
    "train_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 2000, "split": "train"}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 32, "collate_fn": collate_datapoints}},
    "val_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 500, "split": "val"}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 64, "collate_fn": collate_datapoints}},
    "model": {"class": SmallCNN, "args": {"num_classes": 6}},
    "criterion": {"class": CrossEntropyCriterion, "args": {}},
    "metric": {"class": ClassificationMetric, "args": {}},
    "optimizer": {"class": torch.optim.Adam, "args": {"lr": 2e-3}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    # loss, learning rate and per-layer gradient norms every 10 steps, NaN/Inf checked every step: the viewer's
    # Training tab (docs/training_monitor.md)
    "training_monitor": True,
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 16,
            "debuggers_config": [
                {"name": "layer4_features",
                 "debugger_config": {"class": FeatureMapDebugger, "args": {"layer_name": "backbone.layer4"}}},
                {"name": "layer3_stats",
                 "debugger_config": {"class": ActivationStatsDebugger, "args": {"layer_name": "backbone.layer3"}}},
                {"name": "gradcam",
                 "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}}},
            ],
        },
    },
}
