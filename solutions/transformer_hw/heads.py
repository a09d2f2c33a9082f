"""Part 3: splitting the model width into heads, and multi-head attention.

Forbidden here: any library softmax or attention, as in part 1 (use your own
``attention.scaled_dot_product_attention``).
"""

import torch
from torch import nn

from transformer_hw.attention import scaled_dot_product_attention


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(B, T, D) -> (B, h, T, d_h)`` with ``d_h = D // h``.

    Reshape to ``(B, T, h, d_h)`` FIRST, then transpose; reshaping straight to
    ``(B, h, T, d_h)`` mixes positions into heads.

    Raises:
        ValueError: ``x`` is not 3-D, or ``D`` is not divisible by ``n_heads``.
    """
    # TODO: reshape to (B, T, h, d_h), then swap the T and h axes.
    # Shapes: (B, T, D) -> (B, T, h, d_h) -> (B, h, T, d_h). Why not reshape straight to
    # (B, h, T, d_h): that cuts each token's features across time steps; head j must hold
    # features j*d_h .. (j+1)*d_h - 1 of every token (Vaswani et al. 2017, 3.2.2).
    ### BEGIN SOLUTION
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, D), got shape {tuple(x.shape)}")
    batch, t, d_model = x.shape
    if n_heads < 1 or d_model % n_heads != 0:
        raise ValueError(f"D={d_model} is not divisible by n_heads={n_heads}")
    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)
    return x.transpose(1, 2)  # (B, h, T, d_h)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, T, d_h) -> (B, T, h * d_h)``: the exact inverse of ``split_heads``.

    Raises:
        ValueError: ``x`` is not 4-D.
    """
    # TODO: swap the h and T axes back, then flatten the heads into the width.
    # Shapes: (B, h, T, d_h) -> (B, T, h, d_h) -> (B, T, h * d_h): the exact inverse of
    # split_heads.
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x must be (B, h, T, d_h), got shape {tuple(x.shape)}")
    batch, n_heads, t, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)
    ### END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head attention with ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``.

    Each projection is ``nn.Linear(d_model, d_model, bias=bias)``. Attributes ``n_heads`` and
    ``d_head = d_model // n_heads``. With the same weights its output equals
    ``torch.nn.MultiheadAttention``'s (``batch_first=True``).

    Raises:
        ValueError: ``d_model`` is not divisible by ``n_heads``.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True):
        super().__init__()
        # TODO: check the sizes, store n_heads and d_head, create the four projections.
        ### BEGIN SOLUTION
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        ### END SOLUTION

    def forward(self, x, context=None, mask=None, cache=None) -> torch.Tensor:
        """``x (B, Tq, D)`` -> ``(B, Tq, D)``.

        Self-attention when ``context`` is None; cross-attention otherwise (queries from ``x``,
        keys and values from ``context (B, Tk, D)``). ``mask`` follows part 1 (True =
        prohibited) and broadcasts to ``(B, h, Tq, Tk)``. With a ``cache`` (a ``KVCache`` with
        ``n_kv_heads = n_heads``) the new keys and values are appended and the queries attend
        over everything cached; ``mask`` then covers all cached keys (``None`` means no
        masking, which is causal for one new token; a chunk of ``t`` new tokens after ``t0``
        cached ones needs ``causal_mask(t, t0 + t)``).
        """
        # TODO: project, split heads, (append to the cache), attend, merge heads, project out.
        # Shapes: x (B, Tq, D) -> q (B, h, Tq, d_h); context (B, Tk, D) -> k, v (B, h, Tk, d_h)
        # -> attention (B, h, Tq, d_h) -> merged (B, Tq, D) -> out_proj (B, Tq, D).
        ### BEGIN SOLUTION
        source = x if context is None else context
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)
        return self.out_proj(merge_heads(out))  # (B, Tq, D)
        ### END SOLUTION
