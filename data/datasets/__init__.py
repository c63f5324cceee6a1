"""Datasets and batching helpers."""

from data.datasets.collate import collate_datapoints
from data.datasets.prompted_clips import PromptedClipsDataset
from data.datasets.prompted_masks import collate_prompted_clips, collate_prompted_masks
from data.datasets.prompted_shapes import PromptedShapesDataset
from data.datasets.synthetic_shapes import SyntheticShapesDataset

__all__ = ["PromptedClipsDataset", "PromptedShapesDataset", "SyntheticShapesDataset", "collate_datapoints",
           "collate_prompted_clips", "collate_prompted_masks"]
