"""A small transformer classifier whose internals are exposed through capture points.

It reads images (``inputs['image']``, cut into patches) or, built with ``vocab_size``, token sequences
(``inputs['tokens']``, (B, T) ids padded with ``PAD``): padding keys get no attention weight and the pooled
embedding averages the real tokens only, so a sequence's prediction does not depend on its padding.

Attention scores, attention weights, patch embeddings and position encodings are
offered to ``debuggers.capture`` listeners; when nobody listens the capture calls
return at once and the extra work (expanding, etc.) is skipped.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from debuggers.capture import capture_debug_state, is_capturing

Grid = tuple[int, int]
PAD = 0  # the token id of padding


class PositionEncoding(nn.Module):
    """Adds fixed 2-D sinusoidal encodings: half the channels for rows, half for columns."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        if dim % 4 != 0:
            raise ValueError(f"dim must be divisible by 4 for 2-D sin/cos encodings, got {dim}")
        self.dim = dim

    def encoding(self, grid: Grid, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The (1, Hp*Wp, dim) encoding of a row-major token grid."""
        quarter = self.dim // 4
        freqs = 1.0 / (10000 ** (torch.arange(quarter, device=device, dtype=dtype) / quarter))
        rows = torch.arange(grid[0], device=device, dtype=dtype)[:, None] * freqs
        cols = torch.arange(grid[1], device=device, dtype=dtype)[:, None] * freqs
        row_enc = torch.cat([rows.sin(), rows.cos()], dim=1)[:, None].expand(-1, grid[1], -1)
        col_enc = torch.cat([cols.sin(), cols.cos()], dim=1)[None].expand(grid[0], -1, -1)
        return torch.cat([row_enc, col_enc], dim=2).reshape(1, grid[0] * grid[1], self.dim)

    def forward(self, tokens: torch.Tensor, grid: Grid) -> torch.Tensor:
        encoding = self.encoding(grid, tokens.device, tokens.dtype)
        if is_capturing():  # the same for every datapoint: offered once, without a batch dimension
            capture_debug_state("pos_embed", "position_encoding", encoding[0], {"grid": grid, "batch_dim": None})
        return tokens + encoding


class MultiHeadSelfAttention(nn.Module):
    """Explicit softmax(q k^T / sqrt(d)) attention, so the weights can be captured.

    ``name`` is the module's path in the model (e.g. ``blocks.0.attn``) and is used
    as the capture component. Set ``return_attention`` to get ``(output, weights)``.
    """

    def __init__(self, dim: int, num_heads: int, name: str) -> None:
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"dim ({dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.name = name
        self.return_attention = False
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, grid: Grid, padding: torch.Tensor | None = None
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``padding``: (B, T) True where a token is padding; no query attends to it."""
        batch, tokens, dim = x.shape
        qkv = self.qkv(x).reshape(batch, tokens, 3, self.num_heads, dim // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        capture_debug_state(self.name, "attention_scores", scores, {"grid": grid})
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
        weights = scores.softmax(dim=-1)
        capture_debug_state(self.name, "attention_weights", weights, {"grid": grid})
        out = self.proj((weights @ v).transpose(1, 2).reshape(batch, tokens, dim))
        return (out, weights) if self.return_attention else out


class TransformerBlock(nn.Module):
    """Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: int, name: str) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadSelfAttention(dim, num_heads, name=f"{name}.attn")
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor, grid: Grid, padding: torch.Tensor | None = None) -> torch.Tensor:
        attended = self.attn(self.norm1(x), grid, padding)
        if isinstance(attended, tuple):  # a debugger switched on return_attention
            attended = attended[0]
        x = x + attended
        return x + self.mlp(self.norm2(x))


class MaskedMeanPool(nn.Module):
    """The mean of each datapoint's real tokens (all of them without ``padding``): (B, T, D) -> (B, D), the
    embedding a debugger on ``pool`` captures."""

    def forward(self, x: torch.Tensor, padding: torch.Tensor | None = None) -> torch.Tensor:
        if padding is None:
            return x.mean(dim=1)
        real = (~padding).unsqueeze(-1).to(x.dtype)
        return (x * real).sum(dim=1) / real.sum(dim=1).clamp(min=1)


class AttentionClassifier(nn.Module):
    """Patchify (or embed tokens), add 2-D position encodings (a sequence is a grid of one row), run transformer
    blocks, mean-pool the real tokens, classify."""

    def __init__(
        self,
        num_classes: int = 6,
        in_channels: int = 3,
        patch_size: int = 4,
        dim: int = 64,
        depth: int = 2,
        num_heads: int = 4,
        mlp_ratio: int = 2,
        vocab_size: int | None = None,
    ) -> None:
        super().__init__()
        if vocab_size is None:
            self.patch_embed = nn.Conv2d(in_channels, dim, patch_size, stride=patch_size)
        else:
            self.token_embed = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.pos_embed = PositionEncoding(dim)
        self.blocks = nn.ModuleList(
            TransformerBlock(dim, num_heads, mlp_ratio, name=f"blocks.{i}") for i in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.pool = MaskedMeanPool()
        self.head = nn.Linear(dim, num_classes)

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        x, grid, padding = self._embedded(inputs)
        for block in self.blocks:
            x = block(x, grid, padding)
        return {"logits": self.head(self.pool(self.norm(x), padding))}

    def _embedded(self, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Grid, torch.Tensor | None]:
        """(B, T, dim) tokens with their position encodings, their grid and their padding (None for images)."""
        if hasattr(self, "token_embed"):
            tokens = inputs["tokens"]
            grid = (1, tokens.shape[1])
            return self.pos_embed(self.token_embed(tokens), grid), grid, tokens == PAD
        embeddings = self.patch_embed(inputs["image"])
        grid = (embeddings.shape[2], embeddings.shape[3])
        capture_debug_state("patch_embed", "embeddings", embeddings, {"grid": grid})
        return self.pos_embed(embeddings.flatten(2).transpose(1, 2), grid), grid, None
