"""Known causes of failure, planted on purpose, for the failure analysis to find (docs/analysis.md).

- a shortcut: in training 90% of the images carry a corner marker whose colour names their class; in validation
  a slice (20%) carries a marker that names another class (meta info ``marker``);
- label noise: 8% of training and validation labels name another class;
- a hard slice: 12% of shapes are small and low-contrast (meta info ``scale``, ``contrast``);
- NaN: 4% of validation images hold a saturated pixel block, which ``backbone.layer2.overflow`` turns into NaN;
- a dead channel: channel 5 of ``backbone.layer3`` never responds (``backbone.layer3.dead``).

    python main.py --config-filepath configs/examples/planted_failures_trainer.py
    python -m runners.analyze --run logs/examples/planted_failures_trainer
"""

import torch

from configs.examples.cnn_trainer import config as cnn_config
from data.datasets import SyntheticShapesDataset
from debuggers.feature_layout import output_layout, pooled_units
from debuggers.forward_debugger import ForwardDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import SmallCNN

EPOCHS = 6
DEAD_CHANNEL = ("backbone.layer3", 5)
NAN_LAYER = "backbone.layer2"
PLANTED = {"label_noise": 0.08, "hard_fraction": 0.12}


class ChannelEnergy(ForwardDebugger):
    """Mean squared activation of each channel (unit) of ``layer_name`` over its positions, whatever its layout (a
    Conv1d's time, a Conv2d's rows and columns, a transformer's tokens); its summary gives one column per unit."""

    def process_forward(self, module: torch.nn.Module, input: tuple, output: torch.Tensor) -> dict:
        energy = output.detach().float().pow(2)
        return {"channel_energy": pooled_units(energy, output_layout(module, energy))}

    def summary(self, output: dict) -> dict[str, float]:
        return {f"c{c}": value for c, value in enumerate(output["channel_energy"].tolist())}


config = {
    **cnn_config,
    "epochs": EPOCHS,
    "checkpoint_method": "latest",
    "train_dataset": {"class": SyntheticShapesDataset, "args": {
        "num_datapoints": 2000, "split": "train", "marker_prob": 0.9, **PLANTED}},
    "val_dataset": {"class": SyntheticShapesDataset, "args": {
        "num_datapoints": 1000, "split": "val", "marker_prob": 0.2, "marker_agrees": False,
        "saturated_fraction": 0.04, **PLANTED}},
    "model": {"class": SmallCNN, "args": {"num_classes": 6, "nan_layer": NAN_LAYER, "dead_channel": DEAD_CHANNEL}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 8,
            "debuggers_config": [
                {"name": "nan_origin", "debugger_config": {"class": NaNInfDebugger, "args": {}}},
                {"name": "layer4_output", "debugger_config": {
                    "class": LayerOutputDebugger, "args": {"layer_name": "backbone.layer4"}}},
                {"name": "layer3_energy", "debugger_config": {
                    "class": ChannelEnergy, "args": {"layer_name": "backbone.layer3"}}},
            ],
        },
    },
}
