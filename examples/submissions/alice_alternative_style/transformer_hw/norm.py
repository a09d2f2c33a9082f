"""Part 5a: LayerNorm and RMSNorm from tensor operations."""

import torch
from torch import nn


def _check_last(x, d, owner):
    if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != d:
        raise ValueError(
            f"{owner}: x must have last dimension d={d}, got shape {tuple(getattr(x, 'shape', ()))}"
        )


class _LastDimNorm(nn.Module):
    """What both norms share: a checked width ``d``, ``eps`` and a per-feature weight."""

    def __init__(self, d, eps):
        super().__init__()
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"d must be a positive int, got d={d!r}")
        self.d = d
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        _check_last(x, self.d, type(self).__name__)
        return self.normalize(x) * self.weight


class LayerNorm(_LastDimNorm):
    """(x - mean) / sqrt(biased var + eps) * weight + bias over the last dimension."""

    def __init__(self, d, eps=1e-5):
        super().__init__(d, eps)
        self.bias = nn.Parameter(torch.zeros(d))

    def normalize(self, x):
        centre = x.mean(dim=-1, keepdim=True)
        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)
        return (x - centre) * torch.rsqrt(spread + self.eps)

    def forward(self, x):
        return super().forward(x) + self.bias


class RMSNorm(_LastDimNorm):
    """x / sqrt(mean(x^2) + eps) * weight; no centring, no bias."""

    def __init__(self, d, eps=1e-6):
        super().__init__(d, eps)

    def normalize(self, x):
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
