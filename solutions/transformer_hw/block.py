"""Part 5b: the position-wise feed-forward network and pre-/post-norm residual blocks.

Forbidden here: library normalization (as in ``norm.py``) and library softmax or attention (as
in part 1). Use your own ``LayerNorm`` and ``MultiHeadAttention``.
"""

import torch
from torch import nn

from transformer_hw.heads import MultiHeadAttention
from transformer_hw.norm import LayerNorm


class FeedForward(nn.Module):
    """``fc2(relu(fc1(x)))`` with ``fc1 = Linear(d_model, d_ff)``, ``fc2 = Linear(d_ff, d_model)``."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        # TODO: create fc1 and fc2.
        ### BEGIN SOLUTION
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: fc1, ReLU, fc2.
        ### BEGIN SOLUTION
        return self.fc2(torch.relu(self.fc1(x)))
        ### END SOLUTION


class PreNormBlock(nn.Module):
    """``h = x + attn(ln1(x))``, then ``h + ffn(ln2(h))``.

    Submodules ``ln1``, ``attn`` (a ``MultiHeadAttention``), ``ln2``, ``ffn``. The residual adds
    the INCOMING tensor, never the normalized one. Check: with ``attn.out_proj`` zeroed the
    block returns ``x + ffn(ln2(x))``; with ``ffn.fc2`` zeroed too it returns ``x`` exactly.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        # TODO: create ln1, attn, ln2, ffn.
        ### BEGIN SOLUTION
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ln2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, mask=None, cache=None) -> torch.Tensor:
        """``x (B, T, D) -> (B, T, D)``; ``mask`` and ``cache`` go to ``attn``."""
        # TODO: two residual sub-layers, each normalizing its input first.
        # Shapes: x (B, T, D) -> h = x + attn(ln1(x)) (B, T, D) -> h + ffn(ln2(h)) (B, T, D).
        # Why pre-norm: the residual path carries x unchanged, so gradients reach early layers
        # undamped and training is stable without warm-up (Xiong et al. 2020).
        ### BEGIN SOLUTION
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))
        ### END SOLUTION


class PostNormBlock(nn.Module):
    """``h = ln1(x + attn(x))``, then ``ln2(h + ffn(h))`` (the original Transformer's order)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        # TODO: create ln1, attn, ln2, ffn.
        ### BEGIN SOLUTION
        self.ln1 = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ln2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        """``x (B, T, D) -> (B, T, D)``."""
        # TODO: two residual sub-layers, each normalizing after the addition.
        ### BEGIN SOLUTION
        h = self.ln1(x + self.attn(x, mask=mask))
        return self.ln2(h + self.ffn(h))
        ### END SOLUTION
