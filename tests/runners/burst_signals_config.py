"""The 1-D run tests/runners/test_verify_modalities.py trains (tests/runners/burst_signals.py): 800 training and 400
validation recordings, a fifth of validation with a burst and a tenth mislabelled (failures outside the bursts, for
the matched controls), 4 epochs. A config file of its own: ``--verify`` rebuilds
the model from the config file a run names."""

import copy

import torch

from configs.examples.cnn_trainer import config as cnn_config
from configs.examples.planted_failures_trainer import ChannelEnergy
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from tests.runners.burst_signals import BurstSignals, BurstUnitSignalCNN

EPOCHS = 4

config = copy.deepcopy({key: value for key, value in cnn_config.items() if key != "debugger"})
config.update(
    epochs=EPOCHS, checkpoint_method="latest", training_monitor=False,
    train_dataset={"class": BurstSignals, "args": {"num_datapoints": 800, "split": "train"}},
    val_dataset={"class": BurstSignals, "args": {"num_datapoints": 400, "split": "val", "burst_prob": 0.2,
                                                 "label_noise": 0.1}},
    model={"class": BurstUnitSignalCNN, "args": {"num_classes": 4}},
    scheduler={"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    debugger={"class": SequentialDebugger, "args": {"page_size_mb": 8, "debuggers_config": [
        {"name": "unit_energy", "debugger_config": {"class": ChannelEnergy, "args": {"layer_name": "trigger"}}},
        {"name": "monitor_energy", "debugger_config": {"class": ChannelEnergy, "args": {"layer_name": "monitor"}}},
        {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "trigger",
                                                                                 "input_key": "signal"}}},
        {"name": "stage3_output", "debugger_config": {"class": LayerOutputDebugger, "args": {
            "layer_name": "backbone.stage3"}}},
    ]}},
)
config["train_dataloader"]["args"]["batch_size"] = 16
