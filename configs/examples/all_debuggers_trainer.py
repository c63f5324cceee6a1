"""Every ready-made debugger on the demo CNN, at every epoch (a tour of what Lantern captures).

    python main.py --config-filepath configs/examples/all_debuggers_trainer.py

The attention model's tour is ``configs/examples/attention_debuggers_trainer.py``.
"""

import torch

from configs.examples.cnn_trainer import config as cnn_config
from data.datasets import SyntheticShapesDataset
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger

EPOCHS = 3


def entry(name, cls, **args):
    return {"name": name, "debugger_config": {"class": cls, "args": args}}


def tour(base: dict, debuggers: list) -> dict:
    """``base`` for a few epochs, every epoch debugged with ``debuggers``."""
    return {
        **base,
        "epochs": EPOCHS,
        "checkpoint_method": "all",
        # fewer validation datapoints than the base config: gradient flow runs a backward pass per datapoint
        "val_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 200, "split": "val"}},
        "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
        "debugger": {"class": SequentialDebugger, "args": {"page_size_mb": 16, "debuggers_config": debuggers}},
    }


config = tour(cnn_config, [
    entry("layer4_features", FeatureMapDebugger, layer_name="backbone.layer4", max_channels=16),
    entry("layer3_stats", ActivationStatsDebugger, layer_name="backbone.layer3"),
    entry("layer1_output", LayerOutputDebugger, layer_name="backbone.layer1", downsample_factor=4),
    entry("gradcam_predicted", GradCAMDebugger, target_layer="backbone.layer4"),
    entry("gradcam_label", GradCAMDebugger, target_layer="backbone.layer4", target="label"),
    entry("nan_origin", NaNInfDebugger),
    entry("gradient_flow", GradientFlowDebugger),
])
