"""The frame-sequence variant of the promptable segmentation example (the SAM2 guide's video case): a point on the
first frame picks an object, the model follows it through a short clip with a memory of earlier frames.

Every 2nd frame's states are captured (at most 3 frames and 2 MB per datapoint, for the 60 worst clips), among them
the memory attention over earlier frames, drawn per frame; the masks of every frame for every clip. Planted causes:
an object of the target's colour crossing its path, and targets three times as fast.

    python main.py --config-filepath configs/examples/promptable_video_segmentation_trainer.py
"""

import torch
from torch.utils.data import DataLoader

from configs.examples.promptable_segmentation_trainer import MASKS
from configs.examples.promptable_segmentation_trainer import config as image_config
from data.datasets.prompted_clips import PromptedClipsDataset
from data.datasets.prompted_masks import collate_prompted_clips
from debuggers.frame_capture_debugger import FrameCaptureDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from models.promptable_video_segmenter import PromptableVideoSegmenter

EPOCHS = 6
PLANTED = {"crossing": 0.15, "fast": 0.15}

# the image example's loss, metric, failure definition and optimiser; its own data, model and debuggers
config = {
    **image_config,
    "epochs": EPOCHS,
    "train_dataset": {"class": PromptedClipsDataset, "args": {"num_datapoints": 600, "num_frames": 6,
                                                              "split": "train", **PLANTED}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 8, "collate_fn": collate_prompted_clips}},
    "val_dataset": {"class": PromptedClipsDataset, "args": {"num_datapoints": 160, "num_frames": 6, "split": "val",
                                                            **PLANTED}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 32, "collate_fn": collate_prompted_clips}},
    "model": {"class": PromptableVideoSegmenter, "args": {"num_memory_frames": 3}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 16,
            "debuggers_config": [
                MASKS,
                {"name": "frames", "debugger_config": {"class": FrameCaptureDebugger, "args": {
                    "every_n_frames": 2, "max_frames": 3, "max_mb_per_datapoint": 2,
                    "states": ["attention_weights", "input_image", "vision_features_final", "raw_masks_output",
                               "iou_predictions", "point_coords_normalized"]}},
                 "keep": {"worst": 60, "by": "iou"}},
            ],
        },
    },
}
