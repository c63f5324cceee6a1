"""A small promptable segmenter shaped like SAM2: image encoder with levels and its sine position encoding, a prompt
encoder with SAM's random Fourier position encoding, two-way transformer and a mask decoder with an IoU-prediction
head.

Its internals are offered at capture points (``debuggers.capture``) under the component and state names of the SAM2
debug visualization guide, so a ``CaptureDebugger`` and the guide's own code find them:

- ``image_encoder``: ``input_image``, ``trunk_features_level_{i}``, ``fpn_features_level_{i}``,
  ``vision_features_final``, ``position_encoding_level_{i}``;
- ``position_encoding_sine`` (the image encoder's, used by the video model's memory attention):
  ``coordinate_grids_{x,y}``, ``coordinate_grids_{x,y}_normalized``, ``frequency_dimensions``,
  ``sinusoidal_encoding_{x,y}``, ``position_embeddings_final`` (the same for every datapoint: offered without a
  batch, ``metadata['encoding_type']`` 'sine');
- ``position_encoding_random`` (the prompt encoder's, the image tokens' position in the mask decoder):
  ``coordinate_grids_{x,y}``, ``coordinate_grids_{x,y}_normalized`` (cell centres in [-1, 1]),
  ``frequency_dimensions`` (the (2, dim / 2) Gaussian frequencies), ``position_embeddings_final`` (without a batch,
  ``encoding_type`` 'random');
- ``prompt_encoder``: ``point_coords_normalized`` (x, y in [0, 1]), ``point_position_embeddings`` (their random
  encoding), ``sparse_prompt_embeddings`` (the prompt tokens);
- ``two_way_transformer_layer_{i}`` and ``two_way_transformer_final``: ``attention_weights`` (prompt tokens to image,
  (B, heads, tokens, h*w), ``metadata['grid']`` the image grid, ``metadata['query_tokens']`` the tokens' names),
  ``attention_scores`` (before the softmax), ``multihead_queries``, ``multihead_keys``, ``multihead_values``,
  ``self_attention_weights`` (tokens to tokens) and ``image_to_token_attention_weights`` (the image's cells to the
  tokens, ``metadata['key_tokens']``);
- ``sam_mask_decoder``: ``input_image_embeddings``, ``input_sparse_prompt_embeddings``, ``hypernetwork_output_{i}``
  (one per mask), ``upscaled_embedding_stage_1``, ``upscaled_embedding_final``, ``raw_masks_output`` (mask logits
  at the decoder's resolution, before upsampling), ``iou_predictions``.

States that cost something beyond a reference (reshapes, extra tensors) are computed only while someone listens.
As in SAM2, the decoder's masks are at half the image's resolution (here 1/2, SAM2's 1/4) and upsampled: strokes
about one pixel wide are beyond what it can draw.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from debuggers.capture import capture_debug_state, forward_debug_states, is_capturing

Grid = tuple[int, int]
# The random encoding's frequency scale: SAM's is 1 over a 64x64 grid; this 8x8 grid is coarser, and the example
# (configs/examples/promptable_segmentation_trainer.py) reached a validation IoU of 0.72 at 0.5, 0.68 at 1 and 0.62
# at 2 (as many frequencies near a cell's size alias between neighbouring cells)
PROMPT_PE_SCALE = 0.5


class PositionEmbeddingSine(nn.Module):
    """DETR's and SAM2's sine encoding of a (h, w) grid: ``dim / 2`` channels for rows, ``dim / 2`` for columns.

    Each coordinate (1..h, 1..w) is normalised to (0, 2 pi] and divided by ``temperature ** (2 * (k // 2) / n)``;
    even channels take its sine, odd ones its cosine.
    """

    def __init__(self, dim: int, temperature: float = 10000.0) -> None:
        super().__init__()
        if dim % 4 != 0:
            raise ValueError(f"dim must be divisible by 4 for a 2-D sine encoding, got {dim}")
        self.num_feats, self.temperature = dim // 2, temperature

    def _frequencies(self, device: torch.device) -> torch.Tensor:
        index = torch.arange(self.num_feats, device=device, dtype=torch.float32)
        return self.temperature ** (2 * torch.div(index, 2, rounding_mode="floor") / self.num_feats)

    def forward(self, grid: Grid, device: torch.device, offer: bool = False) -> torch.Tensor:
        """The (dim, h, w) encoding; ``offer``: offer its making at the capture points."""
        height, width = grid
        y_grid = torch.arange(1, height + 1, device=device, dtype=torch.float32)[:, None].expand(height, width)
        x_grid = torch.arange(1, width + 1, device=device, dtype=torch.float32)[None, :].expand(height, width)
        y_norm, x_norm = y_grid / height * 2 * math.pi, x_grid / width * 2 * math.pi
        frequencies = self._frequencies(device)
        pos_x, pos_y = _interleave(x_norm[..., None] / frequencies), _interleave(y_norm[..., None] / frequencies)
        encoding = torch.cat([pos_y, pos_x], dim=-1).permute(2, 0, 1)
        if offer and is_capturing():
            shared = {"batch_dim": None, "encoding_type": "sine", "grid": list(grid)}
            for state, data in (("coordinate_grids_x", x_grid), ("coordinate_grids_y", y_grid),
                                ("coordinate_grids_x_normalized", x_norm), ("coordinate_grids_y_normalized", y_norm),
                                ("frequency_dimensions", frequencies), ("sinusoidal_encoding_x", pos_x),
                                ("sinusoidal_encoding_y", pos_y), ("position_embeddings_final", encoding)):
                capture_debug_state("position_encoding_sine", state, data, shared)
        return encoding


class PositionEmbeddingRandom(nn.Module):
    """SAM's and SAM2's prompt encoding: random Fourier features. A position (x, y) in [0, 1] is mapped to
    [-1, 1], projected on ``dim / 2`` fixed Gaussian frequency vectors (a (2, dim / 2) matrix, drawn once at
    ``scale``), and encoded as the sine then the cosine of 2 pi times each projection. Prompt points and the
    image's grid cells get the same encoding, so a prompt token finds the image tokens around it by attention."""

    def __init__(self, dim: int, scale: float = 1.0) -> None:
        super().__init__()
        if dim % 2 != 0:
            raise ValueError(f"dim must be even for a sine and a cosine per frequency, got {dim}")
        self.register_buffer("gaussian_matrix", scale * torch.randn(2, dim // 2))

    def encode(self, coords: torch.Tensor) -> torch.Tensor:
        """(..., 2) positions (x, y) in [0, 1] -> (..., dim) encodings."""
        angles = 2 * math.pi * ((2 * coords - 1) @ self.gaussian_matrix)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)

    def points(self, points: torch.Tensor, image_size: Grid) -> torch.Tensor:
        """(B, N, dim) encodings of (B, N, 2) points (x, y) in pixels of an image of ``image_size``, each at the
        centre of its pixel, as SAM encodes them."""
        return self.encode((points + 0.5) / points.new_tensor([image_size[1], image_size[0]]))

    def forward(self, grid: Grid, device: torch.device) -> torch.Tensor:
        """The (dim, h, w) encoding of the centres of a (h, w) grid's cells, offered at the capture points."""
        height, width = grid
        y_grid = torch.arange(height, device=device, dtype=torch.float32)[:, None].expand(height, width) + 0.5
        x_grid = torch.arange(width, device=device, dtype=torch.float32)[None, :].expand(height, width) + 0.5
        coords = torch.stack([x_grid / width, y_grid / height], dim=-1)
        encoding = self.encode(coords).permute(2, 0, 1)
        if is_capturing():
            shared = {"batch_dim": None, "encoding_type": "random", "grid": list(grid)}
            for state, data in (("coordinate_grids_x", x_grid), ("coordinate_grids_y", y_grid),
                                ("coordinate_grids_x_normalized", 2 * coords[..., 0] - 1),
                                ("coordinate_grids_y_normalized", 2 * coords[..., 1] - 1),
                                ("frequency_dimensions", self.gaussian_matrix),
                                ("position_embeddings_final", encoding)):
                capture_debug_state("position_encoding_random", state, data, shared)
        return encoding


def _interleave(angles: torch.Tensor) -> torch.Tensor:
    """sin of the even channels, cos of the odd ones, in their places."""
    return torch.stack([angles[..., 0::2].sin(), angles[..., 1::2].cos()], dim=-1).flatten(-2)


def _stage(in_channels: int, out_channels: int) -> nn.Sequential:
    """Halve the resolution: conv (stride 2), BN, ReLU, conv, BN, ReLU."""
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU(),
                         nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class ImageEncoder(nn.Module):
    """A trunk of stride-2 stages (levels at 1/2, 1/4, 1/8 of the image) and an FPN over them. As SAM2 does with
    ``scalp=1``, the coarsest level is dropped after the FPN: ``vision_features`` is the 1/4 level (the
    transformer's image tokens), ``high_res_features`` the 1/2 level (for the decoder's upsampling)."""

    def __init__(self, dim: int, widths: tuple[int, ...] = (16, 32, 48), in_channels: int = 3) -> None:
        super().__init__()
        channels = (in_channels, *widths)
        self.trunk = nn.ModuleList(_stage(channels[i], channels[i + 1]) for i in range(len(widths)))
        self.lateral = nn.ModuleList(nn.Conv2d(width, dim, 1) for width in widths)
        self.position_encoding = PositionEmbeddingSine(dim)

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        capture_debug_state("image_encoder", "input_image", image)
        trunk, x = [], image
        for level, stage in enumerate(self.trunk):
            x = stage(x)
            trunk.append(x)
            capture_debug_state("image_encoder", f"trunk_features_level_{level}", x)
        fpn: list[torch.Tensor] = [None] * len(trunk)  # type: ignore[list-item]
        for level in reversed(range(len(trunk))):  # top-down: coarse levels added to finer ones
            fpn[level] = self.lateral[level](trunk[level])
            if level + 1 < len(trunk):
                fpn[level] = fpn[level] + F.interpolate(fpn[level + 1], size=fpn[level].shape[-2:], mode="nearest")
            capture_debug_state("image_encoder", f"fpn_features_level_{level}", fpn[level])
        vision = fpn[1]
        grid = (vision.shape[2], vision.shape[3])
        position = self.position_encoding(grid, image.device, offer=True)
        if is_capturing():
            for level, features in enumerate(fpn[:2]):
                encoding = position if level == 1 else self.position_encoding(features.shape[-2:], image.device)
                capture_debug_state("image_encoder", f"position_encoding_level_{level}", encoding,
                                    {"batch_dim": None, "encoding_type": "sine"})
        capture_debug_state("image_encoder", "vision_features_final", vision, {"kind": "embedding"})
        return {"vision_features": vision, "high_res_features": fpn[0], "vision_pos": position}


class PromptEncoder(nn.Module):
    """Point prompts as tokens, as SAM2's prompt encoder makes them: the random Fourier encoding of where they are
    plus a learned 'positive point' embedding; the same encoding of the image grid's cells (``dense_pe``: the image
    tokens' position in the mask decoder, so a prompt token finds the image tokens around it by attention); and the
    dense embedding SAM adds to every image token when no mask prompt is given."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.pe_layer = PositionEmbeddingRandom(dim, PROMPT_PE_SCALE)
        self.point_embedding = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.no_mask_embed = nn.Parameter(torch.zeros(1, dim, 1, 1))

    def dense_pe(self, grid: Grid, device: torch.device) -> torch.Tensor:
        """The (dim, h, w) encoding of the image grid the prompts are matched against."""
        return self.pe_layer(grid, device)

    def forward(self, points: torch.Tensor, image_size: Grid) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N, 2) points (x, y) in pixels -> sparse (B, N, dim) tokens and the dense (1, dim, 1, 1) embedding."""
        encoding = self.pe_layer.points(points, image_size)
        capture_debug_state("prompt_encoder", "point_coords_normalized",
                            points / points.new_tensor([image_size[1], image_size[0]]))
        capture_debug_state("prompt_encoder", "point_position_embeddings", encoding)
        sparse = encoding + self.point_embedding
        capture_debug_state("prompt_encoder", "sparse_prompt_embeddings", sparse)
        return sparse, self.no_mask_embed


class Attention(nn.Module):
    """Multi-head attention with explicit weights (offered at capture points), projecting to ``dim / downsample``
    internally as SAM's cross-attentions do."""

    def __init__(self, dim: int, num_heads: int, component: str, state: str, downsample: int = 1) -> None:
        super().__init__()
        internal = dim // downsample
        if internal % num_heads != 0:
            raise ValueError(f"dim / downsample ({internal}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(dim, internal) for _ in range(3))
        self.out_proj = nn.Linear(internal, dim)
        self.component, self.state = component, state  # where its weights are offered
        self.metadata: dict = {}  # offered with them: the image grid, the tokens' names (``describe_tokens``)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = (self._heads(proj(x)) for proj, x in ((self.q_proj, q), (self.k_proj, k), (self.v_proj, v)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        weights = scores.softmax(dim=-1)
        capture_debug_state(self.component, self.state, weights, self.metadata)
        if self.state == "attention_weights":  # the guide's other states of the prompt-to-image attention
            for state, data in (("attention_scores", scores), ("multihead_queries", q), ("multihead_keys", k),
                                ("multihead_values", v)):
                capture_debug_state(self.component, state, data, self.metadata)
        out = (weights @ v).transpose(1, 2).flatten(2)
        return self.out_proj(out)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, channels = x.shape
        return x.reshape(batch, tokens, self.num_heads, channels // self.num_heads).transpose(1, 2)


class TwoWayAttentionBlock(nn.Module):
    """SAM's block: tokens attend to themselves, tokens to the image, an MLP on the tokens, the image to the tokens."""

    def __init__(self, dim: int, num_heads: int, mlp_dim: int, skip_first_layer_pe: bool, component: str) -> None:
        super().__init__()
        self.self_attn = Attention(dim, num_heads, component, "self_attention_weights")
        self.cross_attn_token_to_image = Attention(dim, num_heads, component, "attention_weights", downsample=2)
        self.cross_attn_image_to_token = Attention(dim, num_heads, component, "image_to_token_attention_weights",
                                                   downsample=2)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.ReLU(), nn.Linear(mlp_dim, dim))
        self.norm1, self.norm2, self.norm3, self.norm4 = (nn.LayerNorm(dim) for _ in range(4))
        self.skip_first_layer_pe = skip_first_layer_pe

    def forward(self, queries: torch.Tensor, keys: torch.Tensor, query_pe: torch.Tensor,
                key_pe: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.skip_first_layer_pe:
            queries = self.self_attn(queries, queries, queries)
        else:
            q = queries + query_pe
            queries = queries + self.self_attn(q, q, queries)
        queries = self.norm1(queries)
        q, k = queries + query_pe, keys + key_pe
        queries = self.norm2(queries + self.cross_attn_token_to_image(q, k, keys))
        queries = self.norm3(queries + self.mlp(queries))
        q, k = queries + query_pe, keys + key_pe
        keys = self.norm4(keys + self.cross_attn_image_to_token(k, q, queries))
        return queries, keys


class TwoWayTransformer(nn.Module):
    """``depth`` two-way blocks and a last attention from the tokens to the image (SAM's ``final_attn``)."""

    def __init__(self, dim: int, num_heads: int, depth: int, mlp_dim: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(TwoWayAttentionBlock(dim, num_heads, mlp_dim, skip_first_layer_pe=i == 0,
                                                         component=f"two_way_transformer_layer_{i}")
                                    for i in range(depth))
        self.final_attn_token_to_image = Attention(dim, num_heads, "two_way_transformer_final", "attention_weights",
                                                   downsample=2)
        self.norm_final_attn = nn.LayerNorm(dim)

    def describe_tokens(self, grid: Grid, query_tokens: list[str]) -> None:
        """What each attention offers with its weights: the image's grid and the tokens' names."""
        named = {"self_attention_weights": {"query_tokens": query_tokens},
                 "image_to_token_attention_weights": {"grid": list(grid), "key_tokens": query_tokens}}
        for module in self.modules():
            if isinstance(module, Attention):
                module.metadata = named.get(module.state, {"grid": list(grid), "query_tokens": query_tokens})

    def forward(self, image: torch.Tensor, image_pe: torch.Tensor,
                tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, dim, h, w) image, its (dim, h, w) encoding, (B, N, dim) tokens -> tokens and image tokens."""
        keys = image.flatten(2).transpose(1, 2)
        key_pe = image_pe.flatten(1).transpose(0, 1)[None]
        queries = tokens
        for layer in self.layers:
            queries, keys = layer(queries, keys, tokens, key_pe)
        q, k = queries + tokens, keys + key_pe
        queries = self.norm_final_attn(queries + self.final_attn_token_to_image(q, k, keys))
        return queries, keys


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of a (B, C, H, W) map, as SAM's decoder uses."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(channels)), nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(1, keepdim=True)
        variance = (x - mean).pow(2).mean(1, keepdim=True)
        x = (x - mean) / torch.sqrt(variance + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


def _mlp(dim_in: int, hidden: int, dim_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.ReLU(), nn.Linear(hidden, dim_out))


class MaskDecoder(nn.Module):
    """SAM's decoder: an IoU token and ``num_masks`` mask tokens beside the prompt tokens through the two-way
    transformer; the image tokens upscaled x2 (with the encoder's high-resolution level added); each mask token's
    hypernetwork MLP gives the weights of its mask over the upscaled embedding; an MLP on the IoU token predicts
    each mask's IoU."""

    def __init__(self, dim: int, num_heads: int, depth: int, mlp_dim: int, num_masks: int) -> None:
        super().__init__()
        self.num_masks = num_masks
        self.iou_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.mask_tokens = nn.Parameter(torch.randn(1, num_masks, dim) * 0.02)
        self.transformer = TwoWayTransformer(dim, num_heads, depth, mlp_dim)
        self.upscale = nn.ConvTranspose2d(dim, dim // 4, 2, stride=2)
        self.high_res_projection = nn.Conv2d(dim, dim // 4, 1)
        self.upscale_norm = LayerNorm2d(dim // 4)
        self.output_hypernetworks_mlps = nn.ModuleList(_mlp(dim, dim, dim // 4) for _ in range(num_masks))
        self.iou_prediction_head = _mlp(dim, dim, num_masks)

    def forward(self, image: torch.Tensor, image_pe: torch.Tensor, high_res: torch.Tensor, sparse: torch.Tensor,
                dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (B, num_masks, 2h, 2w) mask logits and (B, num_masks) predicted IoUs in [0, 1]."""
        batch = image.shape[0]
        capture_debug_state("sam_mask_decoder", "input_image_embeddings", image)
        capture_debug_state("sam_mask_decoder", "input_sparse_prompt_embeddings", sparse)
        output_tokens = torch.cat([self.iou_token, self.mask_tokens], dim=1).expand(batch, -1, -1)
        tokens = torch.cat([output_tokens, sparse], dim=1)
        if is_capturing():
            names = ["iou", *(f"mask_{i}" for i in range(self.num_masks)),
                     *(f"prompt_{i}" for i in range(sparse.shape[1]))]
            self.transformer.describe_tokens((image.shape[2], image.shape[3]), names)
        queries, keys = self.transformer(image + dense, image_pe, tokens)
        mask_tokens = queries[:, 1:1 + self.num_masks]
        grid = keys.transpose(1, 2).reshape(image.shape)
        upscaled = self.upscale(grid)
        capture_debug_state("sam_mask_decoder", "upscaled_embedding_stage_1", upscaled)
        upscaled = F.gelu(self.upscale_norm(upscaled + self.high_res_projection(high_res)))
        capture_debug_state("sam_mask_decoder", "upscaled_embedding_final", upscaled)
        hyper = []
        for i, mlp in enumerate(self.output_hypernetworks_mlps):
            hyper.append(mlp(mask_tokens[:, i]))
            capture_debug_state("sam_mask_decoder", f"hypernetwork_output_{i}", hyper[-1])
        masks = (torch.stack(hyper, dim=1) @ upscaled.flatten(2)).reshape(batch, self.num_masks,
                                                                          *upscaled.shape[-2:])
        iou = self.iou_prediction_head(queries[:, 0]).sigmoid()
        capture_debug_state("sam_mask_decoder", "raw_masks_output", masks)
        capture_debug_state("sam_mask_decoder", "iou_predictions", iou)
        return masks, iou


class PromptableSegmenter(nn.Module):
    """``forward({'image': (B, 3, H, W), 'point': (B, 2) or (B, N, 2) (x, y) pixels})`` ->
    ``{'masks': (B, 1, H, W) logits, 'iou_predictions': (B,)}``.

    With ``num_masks > 1`` the decoder proposes several masks (SAM's multimask output) and the one with the highest
    predicted IoU is returned; ``all_masks`` (B, M, H, W) and ``all_iou_predictions`` (B, M) hold them all.
    """

    def __init__(self, dim: int = 32, num_heads: int = 4, depth: int = 2, mlp_dim: int = 64, num_masks: int = 1,
                 widths: tuple[int, ...] = (16, 32, 48)) -> None:
        super().__init__()
        if len(widths) != 3:
            raise ValueError(f"widths gives the channels of the trunk's 3 levels, got {widths}")
        self.image_encoder = ImageEncoder(dim, widths)
        self.prompt_encoder = PromptEncoder(dim)
        self.mask_decoder = MaskDecoder(dim, num_heads, depth, mlp_dim, num_masks)

    def forward(self, inputs: dict[str, torch.Tensor], return_debug_states: bool = False) -> dict[str, torch.Tensor]:
        """``return_debug_states=True``: also ``'debug_states'``, the states this forward pass offered, as the guide's
        ``get_debug_states()`` gives them (``debuggers.capture.forward_debug_states``)."""
        with forward_debug_states(return_debug_states) as capture:
            image = inputs["image"]
            outputs = self.decode(self.image_encoder(image), inputs["point"], tuple(image.shape[-2:]))
        if capture is not None:
            outputs["debug_states"] = capture.states
        return outputs

    def decode(self, features: dict[str, torch.Tensor], points: Optional[torch.Tensor],
               image_size: Grid, sparse: Optional[torch.Tensor] = None) -> dict[str, torch.Tensor]:
        """Masks for encoded ``features``, prompted by ``points`` (or by ready ``sparse`` tokens)."""
        if sparse is None:
            sparse, dense = self.prompt_encoder(points if points.ndim == 3 else points[:, None], image_size)
        else:
            dense = self.prompt_encoder.no_mask_embed
        vision = features["vision_features"]
        image_pe = self.prompt_encoder.dense_pe(tuple(vision.shape[-2:]), vision.device)
        low_res, iou = self.mask_decoder(vision, image_pe, features["high_res_features"], sparse, dense)
        masks = F.interpolate(low_res, size=image_size, mode="bilinear", align_corners=False)
        best = iou.argmax(dim=1)
        rows = torch.arange(len(best), device=best.device)
        outputs = {"masks": masks[rows, best][:, None], "iou_predictions": iou[rows, best]}
        if self.mask_decoder.num_masks > 1:
            outputs.update(all_masks=masks, all_iou_predictions=iou)
        return outputs
