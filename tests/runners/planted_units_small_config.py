"""The small version of configs/examples/planted_units_trainer.py that tests/runners/test_verify.py trains: 4 classes,
16-pixel images, a narrow CNN, 800 training and 400 validation datapoints, 3 epochs (about 10 s on one thread).

A config file of its own, not the example edited in Python: ``--verify`` rebuilds the model from the config file
a run names, and refuses one that no longer describes the run."""

import copy

from configs.examples.planted_units_trainer import config as example

config = copy.deepcopy(example)
for key, size in (("train_dataset", 800), ("val_dataset", 400)):
    config[key]["args"].update(num_datapoints=size, num_classes=4, resolution=16)
config["model"]["args"].update(num_classes=4, widths=(8, 16, 16, 16))
config["train_dataloader"]["args"]["batch_size"] = 16
config["epochs"] = 3
config["scheduler"]["args"]["T_max"] = 3
