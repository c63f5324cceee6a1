"""SAM2's video mode in small: the promptable segmenter run frame by frame, each frame's image tokens attending to a
memory of earlier frames' features and masks.

Frame 0 is decoded from the point prompt; every later frame from its memory-conditioned features alone (a learned
'no prompt' token stands for the prompt). After each frame the memory encoder fuses its features with its predicted
mask into a memory; the bank keeps the prompted frame and the ``num_memory_frames - 1`` latest ones, as SAM2 keeps
its conditioning frame and recent frames.

Capture points: before each frame the model offers ``video.frame_index`` (the frame's number; None after the last),
so a ``FrameCaptureDebugger`` and the guide's debug session file what follows under that frame; then the image
model's states (see ``models.promptable_segmenter``) and, from frame 1 on, ``memory_attention``:
``attention_weights`` (B, heads, h*w, memories*h*w) with ``metadata['memory_frames']`` (which frame each block of
keys comes from) and ``metadata['grid']``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from debuggers.capture import FRAME_STATE, capture_debug_state, forward_debug_states, is_capturing
from models.promptable_segmenter import Attention, PromptableSegmenter


class MemoryAttention(nn.Module):
    """The current frame's image tokens attend to the memories (each with its position and a learned embedding of
    its place in the bank), then an MLP; both residual, post-norm."""

    def __init__(self, dim: int, num_heads: int, num_memory_frames: int) -> None:
        super().__init__()
        self.cross_attention = Attention(dim, num_heads, "memory_attention", "attention_weights")
        self.slot_embedding = nn.Parameter(torch.zeros(num_memory_frames, dim))
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, dim))
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, vision: torch.Tensor, position: torch.Tensor, memories: list[torch.Tensor],
                memory_frames: list[int]) -> torch.Tensor:
        """(B, D, h, w) features conditioned on (B, D, h, w) ``memories`` of frames ``memory_frames``."""
        batch, dim, height, width = vision.shape
        pos = position.flatten(1).transpose(0, 1)[None]
        queries = vision.flatten(2).transpose(1, 2)
        keys = torch.cat([m.flatten(2).transpose(1, 2) + pos + self.slot_embedding[slot]
                          for slot, m in enumerate(memories)], dim=1)
        values = torch.cat([m.flatten(2).transpose(1, 2) for m in memories], dim=1)
        if is_capturing():
            self.cross_attention.metadata = {"memory_frames": list(memory_frames), "grid": [height, width]}
        queries = self.norm1(queries + self.cross_attention(queries + pos, keys, values))
        queries = self.norm2(queries + self.mlp(queries))
        return queries.transpose(1, 2).reshape(batch, dim, height, width)


class MemoryEncoder(nn.Module):
    """A frame's memory: its features plus its predicted mask, downsampled to the features' grid, fused by a conv."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.mask_projection = nn.Conv2d(1, dim, 1)
        self.fuser = nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.GELU(), nn.Conv2d(dim, dim, 1))

    def forward(self, vision: torch.Tensor, mask_logits: torch.Tensor) -> torch.Tensor:
        mask = F.interpolate(mask_logits.sigmoid(), size=vision.shape[-2:], mode="bilinear", align_corners=False)
        return vision + self.fuser(vision + self.mask_projection(mask))


class PromptableVideoSegmenter(nn.Module):
    """``forward({'frames': (B, T, 3, H, W), 'point': (B, 2) on frame 0})`` ->
    ``{'masks': (B, T, 1, H, W) logits, 'iou_predictions': (B, T)}``."""

    def __init__(self, dim: int = 32, num_heads: int = 4, depth: int = 2, mlp_dim: int = 64,
                 num_memory_frames: int = 3, widths: tuple[int, ...] = (16, 32, 48)) -> None:
        super().__init__()
        if num_memory_frames < 1:
            raise ValueError(f"num_memory_frames must be at least 1 (the prompted frame), got {num_memory_frames}")
        self.segmenter = PromptableSegmenter(dim, num_heads, depth, mlp_dim, num_masks=1, widths=widths)
        self.memory_attention = MemoryAttention(dim, num_heads, num_memory_frames)
        self.memory_encoder = MemoryEncoder(dim)
        self.no_prompt_embedding = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.num_memory_frames = num_memory_frames

    def forward(self, inputs: dict[str, torch.Tensor], return_debug_states: bool = False) -> dict[str, torch.Tensor]:
        """``return_debug_states=True``: also ``'debug_states'``, every frame's states as the guide's
        ``get_debug_states()`` gives them (``debuggers.capture.forward_debug_states``)."""
        with forward_debug_states(return_debug_states) as capture:
            outputs = self._clip(inputs)
        if capture is not None:
            outputs["debug_states"] = capture.states
        return outputs

    def _clip(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        frames = inputs["frames"]
        image_size = tuple(frames.shape[-2:])
        memories: list[torch.Tensor] = []
        memory_frames: list[int] = []
        masks, ious = [], []
        for t in range(frames.shape[1]):
            capture_debug_state(*FRAME_STATE, t, {"batch_dim": None})
            features = self.segmenter.image_encoder(frames[:, t])
            if t == 0:
                outputs = self.segmenter.decode(features, inputs["point"], image_size)
            else:
                conditioned = self.memory_attention(features["vision_features"], features["vision_pos"], memories,
                                                    memory_frames)
                sparse = self.no_prompt_embedding.repeat(frames.shape[0], 1, 1)  # a copy: a view made under no_grad
                # has no grad_fn, which torch's module tracker (the model report's FLOP counter) cannot take
                outputs = self.segmenter.decode({**features, "vision_features": conditioned}, None, image_size,
                                                sparse=sparse)
            masks.append(outputs["masks"])
            ious.append(outputs["iou_predictions"])
            memories.append(self.memory_encoder(features["vision_features"], outputs["masks"]))
            memory_frames.append(t)
            if len(memories) > self.num_memory_frames:  # keep the prompted frame and the latest ones
                del memories[1], memory_frames[1]
        capture_debug_state(*FRAME_STATE, None, {"batch_dim": None})
        return {"masks": torch.stack(masks, dim=1), "iou_predictions": torch.stack(ious, dim=1)}
