"""The seeds' configuration example, pasted as written between the marked lines. Around it, what a user adds:
the imports of their debuggers, and the runner, model and data that the example leaves to the rest of their
config."""

import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import SyntheticShapesDataset, collate_datapoints
from metrics import ClassificationMetric
from runners.trainers import BaseTrainer

from .activation_stats import ActivationStatsDebugger
from .attention import AttentionDebugger
from .feature_map import FeatureMapDebugger
from .gradcam import GradCAMDebugger
from .layer_output import LayerOutputDebugger
from .models import SeedNet

# ---- debugger_examples.md, "Configuration Example" ----
from debuggers.wrappers.sequential_debugger import SequentialDebugger

config = {
    'checkpoint_method': 5,  # Save debug outputs every 5 epochs
    'debugger': {
        'class': SequentialDebugger,
        'args': {
            'page_size_mb': 100,
            'debuggers_config': [
                {
                    'name': 'backbone_features',
                    'debugger_config': {
                        'class': FeatureMapDebugger,
                        'args': {'layer_name': 'backbone.layer4'}
                    }
                },
                {
                    'name': 'attention_analysis',
                    'debugger_config': {
                        'class': AttentionDebugger,
                        'args': {'layer_name': 'head.attention'}
                    }
                },
                {
                    'name': 'activation_stats',
                    'debugger_config': {
                        'class': ActivationStatsDebugger,
                        'args': {'layer_name': 'backbone.layer3'}
                    }
                },
                {
                    'name': 'raw_outputs',
                    'debugger_config': {
                        'class': LayerOutputDebugger,
                        'args': {
                            'layer_name': 'backbone.layer2',
                            'downsample_factor': 2
                        }
                    }
                },
                {
                    'name': 'gradcam_analysis',
                    'debugger_config': {
                        'class': GradCAMDebugger,
                        'args': {
                            'target_layer': 'backbone.layer4',
                            'target_class': None
                        }
                    }
                }
            ]
        }
    }
}
# ---- end of the example ----

config.update({
    "runner": BaseTrainer,
    "seed": 0,
    "epochs": 1,  # its last epoch is a checkpoint epoch, so the debuggers run at its validation
    "train_dataset": {"class": SyntheticShapesDataset,
                      "args": {"num_datapoints": 16, "resolution": 16, "split": "train"}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 8, "collate_fn": collate_datapoints}},
    "val_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 12, "resolution": 16, "split": "val"}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 8, "collate_fn": collate_datapoints}},
    "model": {"class": SeedNet, "args": {}},
    "criterion": {"class": CrossEntropyCriterion, "args": {}},
    "metric": {"class": ClassificationMetric, "args": {}},
    "optimizer": {"class": torch.optim.SGD, "args": {"lr": 0.05}},
})
