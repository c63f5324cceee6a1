"""Promptable segmentation, SAM2-style: a point picks one object of a scene and the model draws its mask and
predicts the mask's IoU. The states the SAM2 debug visualization guide names and the masks (label, prediction,
errors, prompt) are captured for every validation datapoint.

Planted causes of failure, with their ground truth in ``PromptedShapesDataset.planted_causes()``: low-contrast
targets, a touching object of the target's own colour, thin strokes, and (validation only, no meta column) streaks
over the image. Failures are the worst 15 % by IoU (``failure_definition``), for the viewer's Failures tab and
``runners.analyze``.

    python main.py --config-filepath configs/examples/promptable_segmentation_trainer.py
    python -m runners.analyze --run logs/examples/promptable_segmentation_trainer
    python -m runners.eval_viewer --log-dirs logs/examples
"""

import torch
from torch.utils.data import DataLoader

from criteria.mask_criterion import PromptedMaskCriterion
from data.datasets.prompted_masks import collate_prompted_masks
from data.datasets.prompted_shapes import PromptedShapesDataset
from debuggers.attention_debugger import AttentionDebugger
from debuggers.capture_debugger import CaptureDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.mask_debugger import MaskDebugger
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from metrics.segmentation_metric import SegmentationMetric
from models.promptable_segmenter import PromptableSegmenter
from runners.trainers import BaseTrainer

EPOCHS = 8
PLANTED = {"low_contrast": 0.1, "touching": 0.1, "thin": 0.1}
# the guide's states, less the largest copies (per-head queries/keys/values, the trunk and the finest FPN level);
# states=None keeps them all
STATES = ["input_image", "fpn_features_level_1", "fpn_features_level_2", "vision_features_final",
          "position_embeddings_final", "frequency_dimensions", "point_coords_normalized", "sparse_prompt_embeddings",
          "attention_weights", "attention_scores", "self_attention_weights", "image_to_token_attention_weights",
          "input_image_embeddings", "upscaled_embedding_final", "hypernetwork_output_*", "raw_masks_output",
          "iou_predictions"]

MASKS = {"name": "masks", "debugger_config": {"class": MaskDebugger, "args": {"iou_key": "iou_predictions"}}}

config = {
    "runner": BaseTrainer,
    "seed": 0,
    "epochs": EPOCHS,
    "checkpoint_method": "latest",
    "train_dataset": {"class": PromptedShapesDataset, "args": {"num_datapoints": 2000, "split": "train", **PLANTED}},
    "train_dataloader": {"class": DataLoader, "args": {"batch_size": 16, "collate_fn": collate_prompted_masks}},
    # 1,200: enough failures for a cause failing 3.5x the rest to pass the analysis's Bonferroni level (at 400, low
    # contrast's slice had p = 1.7e-4 against about 1e-4)
    "val_dataset": {"class": PromptedShapesDataset, "args": {
        "num_datapoints": 1200, "split": "val", "streaked": 0.05, **PLANTED}},
    "val_dataloader": {"class": DataLoader, "args": {"batch_size": 64, "collate_fn": collate_prompted_masks}},
    "model": {"class": PromptableSegmenter, "args": {"dim": 32, "num_heads": 4, "depth": 2}},
    "criterion": {"class": PromptedMaskCriterion, "args": {}},
    "metric": {"class": SegmentationMetric, "args": {"iou_key": "iou_predictions"}},
    "failure_definition": {"metric": "iou", "worst_fraction": 0.15},
    "optimizer": {"class": torch.optim.AdamW, "args": {"lr": 5e-3, "weight_decay": 0.01}},
    "scheduler": {"class": torch.optim.lr_scheduler.CosineAnnealingLR, "args": {"T_max": EPOCHS}},
    "debugger": {
        "class": SequentialDebugger,
        "args": {
            "page_size_mb": 16,
            "debuggers_config": [
                MASKS,
                {"name": "sam2_states", "debugger_config": {"class": CaptureDebugger, "args": {"states": STATES}}},
                {"name": "prompt_attention", "debugger_config": {"class": AttentionDebugger, "args": {
                    "layer_name": "mask_decoder.transformer.final_attn_token_to_image"}}},
                {"name": "decoder_tokens", "debugger_config": {"class": LayerOutputDebugger, "args": {
                    "layer_name": "mask_decoder.transformer.norm_final_attn"}}},
            ],
        },
    },
}
