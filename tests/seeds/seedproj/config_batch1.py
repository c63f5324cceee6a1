"""The same run validated one datapoint at a time: what the seeds were written for."""

from .config import config

config["val_dataloader"]["args"]["batch_size"] = 1
