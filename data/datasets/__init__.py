"""Datasets and batching helpers."""

from data.datasets.collate import collate_datapoints
from data.datasets.synthetic_shapes import SyntheticShapesDataset

__all__ = ["SyntheticShapesDataset", "collate_datapoints"]
