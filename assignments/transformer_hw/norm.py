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
        raise NotImplementedError("TODO: LayerNorm.__init__")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: mean and biased variance over the last axis, normalize, scale and shift.
        raise NotImplementedError("TODO: LayerNorm.forward")


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis.

    No mean subtraction and no bias; one parameter ``weight`` (ones) of shape ``(d,)``.
    """

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        # TODO: store eps; create the weight parameter.
        raise NotImplementedError("TODO: RMSNorm.__init__")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: divide by the root mean square over the last axis, then scale.
        raise NotImplementedError("TODO: RMSNorm.forward")
