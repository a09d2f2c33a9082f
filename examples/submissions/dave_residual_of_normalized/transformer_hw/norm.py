"""Part 5a: LayerNorm and RMSNorm from tensor operations.

Forbidden here: any library normalization (``F.layer_norm``, ``torch.layer_norm``,
``nn.LayerNorm``, ``F.rms_norm``, ``torch.rms_norm``, ``nn.RMSNorm``, ``F.group_norm``, ...).
"""

import torch
from torch import nn


class LayerNorm(nn.Module):
    """Normalize over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    ``var`` is the BIASED variance (divide by ``d``, not ``d - 1``); ``eps`` goes inside the
    square root. Parameters ``weight`` (ones) and ``bias`` (zeros) of shape ``(d,)``. Matches
    ``torch.nn.LayerNorm(d, eps)``.
    """

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        # TODO: store eps; create the weight and bias parameters.
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: mean and biased variance over the last axis, normalize, scale and shift.
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis.

    No mean subtraction and no bias; one parameter ``weight`` (ones) of shape ``(d,)``.
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        # TODO: store eps; create the weight parameter.
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: divide by the root mean square over the last axis, then scale.
        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight
