"""Part 1: a numerically stable softmax and scaled dot-product attention.

Forbidden here: any library softmax or attention (``torch.softmax``, ``Tensor.softmax``,
``F.softmax``, ``nn.Softmax``, ``torch.special.softmax``, the ``log_softmax`` and ``logsumexp``
variants, ``F.softmin``, ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``,
``F.multi_head_attention_forward``, and any private or equivalent form). Build them from tensor
operations (``exp``, ``sum``, ``amax``, ``matmul``, ...).
"""

import math

import torch


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of ``x`` along ``dim``, numerically stable.

    Subtract the maximum along ``dim`` before exponentiating, so logits near 1000 do not
    overflow. Entries equal to ``-inf`` get weight exactly 0.

    Raises:
        ValueError: a slice along ``dim`` is entirely ``-inf`` (nothing to normalize over);
            the message names ``x`` and ``dim``.
    """
    # TODO: subtract the max along dim, exponentiate, divide by the sum along dim; raise
    # ValueError when a whole slice is -inf.
    # Why the max: softmax(x) = softmax(x - c) for any c, and with c = max(x) every exponent
    # is <= 0, so exp never overflows (logits near 1000 would give inf / inf = NaN).
    ### BEGIN SOLUTION
    top = x.amax(dim=dim, keepdim=True)
    if torch.isneginf(top).any():
        raise ValueError(
            f"softmax: x has a slice along dim={dim} that is entirely -inf"
        )
    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly
    return exp / exp.sum(dim=dim, keepdim=True)
    ### END SOLUTION


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention ``weights = softmax(q k^T / sqrt(d_k) + M)`` and ``out = weights @ v``.

    Shapes: ``q (..., Tq, d_k)``, ``k (..., Tk, d_k)``, ``v (..., Tk, d_v)``; returns
    ``out (..., Tq, d_v)`` and ``weights (..., Tq, Tk)``. ``d_k`` may differ from ``d_v`` and
    ``Tq`` from ``Tk``.

    ``mask`` is one of:
      * ``None``: every key is permitted;
      * a bool tensor broadcastable to ``(..., Tq, Tk)`` where **True means prohibited**
        (the convention of ``nn.MultiheadAttention`` and ``masked_fill``);
      * a float tensor added to the scaled scores (0 permitted, ``-inf`` prohibited).
    Mask BEFORE the softmax, so the normalizer covers only the permitted keys.

    Example: scaled logits ``(0, log 2, log 4)`` and scalar values ``(2, 7, 99)`` give
    ``(1*2 + 2*7 + 4*99) / 7 = 412/7``; prohibiting the third key gives ``16/3``.

    Raises:
        ValueError: ``d_k`` differs between ``q`` and ``k``; ``Tk`` differs between ``k`` and
            ``v``; ``mask`` does not broadcast to ``(..., Tq, Tk)``; or some query row has no
            permitted key.
    """
    # TODO: check the shapes, scale the scores by 1/sqrt(d_k), apply the mask, softmax over
    # the keys (your softmax above), then weight the values.
    # Shapes: q (..., Tq, d_k) @ k^T (..., d_k, Tk) -> scores (..., Tq, Tk);
    # weights (..., Tq, Tk) @ v (..., Tk, d_v) -> out (..., Tq, d_v).
    # Why 1/sqrt(d_k): a dot product of d_k unit-variance terms has variance d_k, and large
    # logits push the softmax into regions of tiny gradients (Vaswani et al. 2017, 3.2.1).
    ### BEGIN SOLUTION
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has Tk={k.shape[-2]} but v has Tk={v.shape[-2]}")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)
    if mask is not None:
        try:
            mask = mask.expand(scores.shape)  # (..., Tq, Tk)
        except RuntimeError:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' "
                f"shape {tuple(scores.shape)}"
            ) from None
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)
    ### END SOLUTION
