"""Part 5a: LayerNorm and RMSNorm from tensor operations."""

import torch
from torch import nn


def _check_last(x, d, owner):
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != d:
        raise ValueError(
            f"{owner}: x must have last dimension d={d}, got shape {tuple(getattr(x, 'shape', ()))}"
        )


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(biased var + eps) * weight + bias over the last dimension."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int, got d={d!r}")
        self.d = d
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        _check_last(x, self.d, "LayerNorm")
        centre = x.mean(dim=-1, keepdim=True)
        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)
        return (x - centre) * torch.rsqrt(spread + self.eps) * self.weight + self.bias


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight; no centring, no bias."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int, got d={d!r}")
        self.d = d
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        _check_last(x, self.d, "RMSNorm")
        power = (x * x).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(power + self.eps) * self.weight
