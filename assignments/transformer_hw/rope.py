"""Part 4: rotary position embeddings (RoPE), interleaved-pair convention."""

import torch


def rope_angles(
    positions: torch.Tensor, d_head: int, base: float = 10000.0, dtype=None
):
    """Angles ``(T, d_head // 2)``: ``angle[t, i] = positions[t] * base ** (-2 i / d_head)``.

    ``i = 0 .. d_head/2 - 1``. Computed in ``dtype`` (default: ``torch.get_default_dtype()``)
    on ``positions``' device.

    Raises:
        ValueError: ``d_head`` is odd.
    """
    # TODO: one frequency per pair, times each position (an outer product).
    # Shapes: positions (T,) x frequencies (d_head/2,) -> angles (T, d_head/2).
    # Why these frequencies: pair i turns by base ** (-2i/d_head) radians per position, from
    # 1 radian down to about 1/base, fast and slow clocks (Su et al. 2021, RoFormer, 3.2).
    raise NotImplementedError("TODO: rope_angles")


def apply_rope(
    x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0
):
    """Rotate each INTERLEAVED pair ``(x[2i], x[2i+1])`` of ``x (..., T, d_head)``.

    ``(a, b) -> (a cos - b sin, a sin + b cos)`` with the angle of ``rope_angles`` at
    ``positions`` (a LongTensor ``(T,)``, default ``arange(T)``; not necessarily contiguous or
    sorted). The output has ``x``'s dtype and is computed at ``x``'s precision (float64 in:
    angles, cos and sin in float64). Pairing ``i`` with ``i + d/2`` ("rotate_half") is a
    different convention and is wrong here.

    Position 0 is the identity, norms are preserved, and
    ``<apply_rope(q, m), apply_rope(k, n)>`` depends only on ``n - m``.

    Raises:
        ValueError: ``positions`` is not of shape ``(T,)``; ``d_head`` is odd.
    """
    # TODO: get the angles, then rotate the even/odd pairs and interleave them back.
    # Shapes: x (..., T, d) -> pairs x[..., 0::2], x[..., 1::2] (..., T, d/2) each, rotated
    # by angles (T, d/2) -> stacked (..., T, d/2, 2) -> (..., T, d).
    # Why a rotation: <R(m) q, R(n) k> depends only on n - m, so attention scores see
    # relative positions (Su et al. 2021).
    raise NotImplementedError("TODO: apply_rope")
