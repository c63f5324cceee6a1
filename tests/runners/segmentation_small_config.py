"""The promptable segmentation example (configs/examples/promptable_segmentation_trainer.py) at 400 training and 240
validation scenes, a narrower model and 3 epochs, its masks and the decoder's tokens captured: the run
tests/runners/test_verify_modalities.py verifies from the command line. A config file of its own: ``--verify``
rebuilds the model from the config file a run names."""

import copy

from configs.examples.promptable_segmentation_trainer import MASKS
from configs.examples.promptable_segmentation_trainer import config as example
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger

EPOCHS = 3

config = copy.deepcopy(example)
config["train_dataset"]["args"]["num_datapoints"] = 400
config["val_dataset"]["args"]["num_datapoints"] = 240
config["model"]["args"].update(dim=16, depth=1)
config["epochs"] = EPOCHS
config["scheduler"]["args"]["T_max"] = EPOCHS
config["training_monitor"] = False
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 8, "debuggers_config": [
    MASKS, {"name": "decoder_tokens", "debugger_config": {"class": LayerOutputDebugger, "args": {
        "layer_name": "mask_decoder.transformer.norm_final_attn"}}}]}}
