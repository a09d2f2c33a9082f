"""Part 3: splitting/merging heads and multi-head attention (einsum scores)."""

import torch
from torch import nn

from .attention import scaled_dot_product_attention


def split_heads(x, n_heads):
    """(B, T, D) -> (B, h, T, D // h): view as (B, T, h, d_h), then swap T and h."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"x must be a (B, T, D) tensor, got shape {tuple(getattr(x, 'shape', ()))}")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got n_heads={n_heads!r}")
    batch, steps, width = x.shape
    if width % n_heads:
        raise ValueError(
            f"D={width} (x shape {tuple(x.shape)}) is not divisible by n_heads={n_heads}"
        )
    per_head = width // n_heads
    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)
    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)


def merge_heads(x):
    """(B, h, T, d_h) -> (B, T, h * d_h), the exact inverse of split_heads."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"x must be a (B, h, T, d_h) tensor, got shape {tuple(getattr(x, 'shape', ()))}")
    batch, heads, steps, per_head = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)


class MultiHeadAttention(nn.Module):
    """Multi-head (self or cross) attention with optional KV cache."""

    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
            raise ValueError(f"n_heads must be a positive int, got n_heads={n_heads!r}")
        if d_model < 1 or d_model % n_heads:
            raise ValueError(
                f"d_model={d_model} must be a positive multiple of n_heads={n_heads}"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))

    def _check(self, t, name):
        if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[-1] != self.d_model:
            raise ValueError(
                f"{name} must have shape (B, T, d_model={self.d_model}), "
                f"got {tuple(getattr(t, 'shape', ()))}"
            )

    def forward(self, x, context=None, mask=None, cache=None):
        self._check(x, "x")
        source = x if context is None else context
        if context is not None:
            self._check(context, "context")
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    f"context batch {context.shape[0]} differs from x batch {x.shape[0]} "
                    f"(x {tuple(x.shape)}, context {tuple(context.shape)})"
                )
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)
        return self.out_proj(merge_heads(mixed))  # (B, Tq, D)
