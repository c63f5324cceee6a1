"""The attention model on padded token sequences that tests/runners/test_verify_modalities.py trains: the sequences
benchmark's dataset (benchmarks/planted_benchmarks.py) at 800 training and 400 validation messages, a narrower model,
4 epochs; attention heads, Grad-CAM over the tokens and a block's token outputs captured. A config file of its own:
``--verify`` rebuilds the model from the config file a run names."""

import copy

import torch

from configs.examples.cnn_trainer import config as cnn_config
from data.datasets.planted_sequences import PlantedSequencesDataset
from debuggers.attention_debugger import AttentionDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models import AttentionClassifier

EPOCHS = 4
PLANTED = {"num_classes": 4, "systematic": (1, 2), "garbled_from": 0.38, "label_noise": 0.05}

config = copy.deepcopy({key: value for key, value in cnn_config.items() if key != "debugger"})
config.update(
    epochs=EPOCHS, checkpoint_method="latest", training_monitor=False,
    train_dataset={"class": PlantedSequencesDataset, "args": {"num_datapoints": 800, "split": "train",
                                                             "variant_prob": 0.01, **PLANTED}},
    val_dataset={"class": PlantedSequencesDataset, "args": {"num_datapoints": 400, "split": "val",
                                                           "variant_prob": 0.06, "truncated_channel": "sms",
                                                           **PLANTED}},
    model={"class": AttentionClassifier, "args": {"num_classes": 4, "dim": 32, "depth": 2, "num_heads": 4,
                                                  "vocab_size": PlantedSequencesDataset.VOCAB_SIZE}},
    optimizer={"class": torch.optim.AdamW, "args": {"lr": 2e-3, "weight_decay": 0.05}},
    scheduler={"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    debugger={"class": SequentialDebugger, "args": {"page_size_mb": 8, "debuggers_config": [
        {"name": "block1_attention", "debugger_config": {"class": AttentionDebugger, "args": {
            "layer_name": "blocks.1.attn"}}},
        {"name": "block1_output", "debugger_config": {"class": LayerOutputDebugger, "args": {
            "layer_name": "blocks.1"}}},
        {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "blocks.1",
                                                                                 "input_key": "tokens"}}},
    ]}},
)
config["train_dataloader"]["args"]["batch_size"] = 16
