"""Two units that light up on the same failing datapoints: one makes them fail, the other only watches.

The failure analysis finds both (their summary columns separate failures from passes equally well); only an
intervention tells the cause from the correlate (docs/analysis.md, "Confirming a finding"):

- a saturated corner block (20% of validation images, none in training) trips a planted unit: unit 3 of
  ``trigger`` (after ``backbone.layer2``) fires there, and the layers above, which never saw it fire, predict
  the wrong class;
- a monitor branch (``monitor``) copies that unit and feeds nothing: its summary correlates with failure as
  well, and causes none of it.

    python main.py --config-filepath configs/examples/planted_units_trainer.py
    python -m runners.analyze --run logs/examples/planted_units_trainer --verify --trust-configs
"""

import torch
import torch.nn.functional as F
from torch import nn

from configs.examples.cnn_trainer import config as cnn_config
from configs.examples.planted_failures_trainer import ChannelEnergy
from data.datasets import SyntheticShapesDataset
from data.datasets.synthetic_shapes import SATURATION_VALUE
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import SmallCNN

EPOCHS = 4
UNIT = 3
CLAMP = 4.0  # the saturated block is clipped to this (a bright corner) before the backbone sees it


class TriggeredUnit(nn.Module):
    """Adds ``gain`` to unit ``unit`` of its input wherever the image was saturated: a unit that fires on an
    artefact."""

    def __init__(self, unit: int, gain: float) -> None:
        super().__init__()
        self.unit, self.gain = unit, gain

    def forward(self, x: torch.Tensor, saturated: torch.Tensor) -> torch.Tensor:
        where = F.adaptive_max_pool2d(saturated, x.shape[-2:])[:, 0]
        fired = x.clone()
        fired[:, self.unit] = x[:, self.unit] + self.gain * where
        return fired


class Monitor(nn.Module):
    """Reads one unit and feeds nothing: a monitoring branch (an auxiliary head kept at evaluation)."""

    def __init__(self, unit: int) -> None:
        super().__init__()
        self.unit = unit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2.0 * x[:, self.unit:self.unit + 1]


class PlantedUnitCNN(SmallCNN):
    """``SmallCNN`` with ``trigger`` (a ``TriggeredUnit``) after ``backbone.layer2`` and a ``monitor`` beside it."""

    def __init__(self, num_classes: int = 6, widths: tuple[int, int, int, int] = (16, 32, 64, 64),
                 unit: int = UNIT, gain: float = 3000.0) -> None:
        super().__init__(num_classes, widths=widths)
        self.trigger = TriggeredUnit(unit, gain)
        self.monitor = Monitor(unit)

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        image = inputs["image"]
        saturated = (image.abs().amax(dim=1, keepdim=True) > SATURATION_VALUE / 2).float()
        x = self.backbone.layer2(self.backbone.layer1(image.clamp(-CLAMP, CLAMP)))
        x = self.trigger(x, saturated)
        self.monitor(x)
        return {"logits": self.head(self.backbone.layer4(self.backbone.layer3(x)))}


config = {
    **cnn_config,
    "epochs": EPOCHS,
    "checkpoint_method": "latest",
    "train_dataset": {"class": SyntheticShapesDataset, "args": {"num_datapoints": 2000, "split": "train"}},
    "val_dataset": {"class": SyntheticShapesDataset, "args": {
        "num_datapoints": 1000, "split": "val", "saturated_fraction": 0.2}},
    "model": {"class": PlantedUnitCNN, "args": {"num_classes": 6}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 8,
            "debuggers_config": [
                {"name": "unit_energy", "debugger_config": {"class": ChannelEnergy, "args": {"layer_name": "trigger"}}},
                {"name": "monitor_energy", "debugger_config": {
                    "class": ChannelEnergy, "args": {"layer_name": "monitor"}}},
                {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "trigger"}}},
            ],
        },
    },
}
