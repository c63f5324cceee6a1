"""A debugger written in the project's own code, next to its config.

``ChannelEnergyDebugger`` is not part of Lantern: it shows how a researcher adds
a capture in a few lines. It follows the batch contract (``process_forward``
sees the whole batch and returns tensors with the batch first), so each
validation datapoint gets its own channel energies.

    python main.py --config-filepath configs/examples/custom_debugger_trainer.py
"""

import torch

from configs.examples.cnn_trainer import config as cnn_config
from debuggers.forward_debugger import ForwardDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger


class ChannelEnergyDebugger(ForwardDebugger):
    """Mean squared activation of every channel of ``layer_name``, and the top channels."""

    def __init__(self, layer_name: str, top_k: int = 5) -> None:
        super().__init__(layer_name)
        self.top_k = top_k

    def process_forward(self, module: torch.nn.Module, input: tuple, output: torch.Tensor) -> dict:
        energy = output.detach().float().pow(2).mean(dim=(2, 3))  # (B, C)
        top = energy.topk(min(self.top_k, energy.shape[1]), dim=1)
        return {"channel_energy": energy, "top_channels": top.indices, "top_energy": top.values}


config = {
    **cnn_config,
    "epochs": 3,
    "checkpoint_method": "all",
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": 3}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 4,
            "debuggers_config": [
                {"name": "layer3_energy",
                 "debugger_config": {"class": ChannelEnergyDebugger, "args": {"layer_name": "backbone.layer3"}}},
                {"name": "layer4_energy",
                 "debugger_config": {"class": ChannelEnergyDebugger,
                                     "args": {"layer_name": "backbone.layer4", "top_k": 3}}},
            ],
        },
    },
}
