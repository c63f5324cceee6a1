"""A small vision transformer on synthetic shapes, with its attention maps and the states
its capture points offer (patch embeddings, position encodings) for every validation datapoint.

    python main.py --config-filepath configs/examples/attention_trainer.py
"""

import torch

from configs.examples.cnn_trainer import config as cnn_config
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier

EPOCHS = 10

# the CNN example's data, loss and metric; its own model, optimiser and debuggers
config = {
    **cnn_config,
    "epochs": EPOCHS,
    "model": {"class": AttentionClassifier, "args": {"num_classes": 6}},
    "optimizer": {"class": torch.optim.AdamW, "args": {"lr": 2e-3, "weight_decay": 0.05}},
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
