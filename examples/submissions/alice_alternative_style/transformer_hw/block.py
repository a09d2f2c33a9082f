"""Part 5b: position-wise feed-forward and pre-/post-norm Transformer blocks."""

import torch
from torch import nn

from transformer_hw import heads as _heads
from transformer_hw import norm as _norm


class FeedForward(nn.Module):
    """fc2(relu(fc1(x))), applied at every position."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        hidden = self.fc1(x)  # (..., d_ff)
        return self.fc2(torch.clamp(hidden, min=0))  # (..., d_model)


class _Block(nn.Module):
    """The sub-layers both blocks share: LayerNorm, attention, LayerNorm, feed-forward."""

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln1 = _norm.LayerNorm(d_model)
        self.attn = _heads.MultiHeadAttention(d_model, n_heads)
        self.ln2 = _norm.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)


class PreNormBlock(_Block):
    """h = x + attn(ln1(x)); out = h + ffn(ln2(h)). Residuals add the incoming tensor."""

    def forward(self, x, mask=None, cache=None):
        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return mixed + self.ffn(self.ln2(mixed))


class PostNormBlock(_Block):
    """h = ln1(x + attn(x)); out = ln2(h + ffn(h))."""

    def forward(self, x, mask=None):
        settled = self.ln1(x + self.attn(x, mask=mask))
        return self.ln2(settled + self.ffn(settled))
