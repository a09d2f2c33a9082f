"""Part 1: a numerically stable softmax and scaled dot-product attention (einsum style)."""

import math
import warnings

import torch

_NEG_INF = float("-inf")


def _require_tensor(value, name):
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")


def softmax(x, dim=-1):
    """exp(x - max) / sum(exp(x - max)) along ``dim``; -inf entries get weight exactly 0.

    A slice along ``dim`` that is entirely -inf has no defined distribution: ValueError.
    """
    _require_tensor(x, "x")
    if x.dim() == 0:
        raise ValueError(f"x must have at least one dimension, got shape {tuple(x.shape)}")
    banned = x == _NEG_INF
    dead = banned.all(dim=dim, keepdim=True)
    if bool(dead.any()):
        raise ValueError(
            f"softmax: some slice of x (shape {tuple(x.shape)}) along dim={dim} is all -inf "
            f"({int(dead.sum())} such slice(s)); there is nothing to normalize"
        )
    peak = torch.max(x, dim=dim, keepdim=True).values  # finite: every slice has a finite entry
    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))
    return expo / expo.sum(dim=dim, keepdim=True)


def _as_additive(mask, scores):
    """Turn a bool (True = prohibited) or float (additive) mask into scores + mask."""
    _require_tensor(mask, "mask")
    try:
        torch.broadcast_shapes(mask.shape, scores.shape)
    except RuntimeError:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
            f"{tuple(scores.shape)} (..., Tq, Tk)"
        ) from None
    mask = mask.to(scores.device)
    if mask.dtype == torch.bool:
        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)
    if not mask.is_floating_point():
        raise ValueError(f"mask must be bool or floating point, got dtype {mask.dtype}")
    warnings.warn(
        "alice: float mask given; adding it to the scaled scores (0 = keep, -inf = prohibit)",
        stacklevel=3,
    )
    return scores + mask.to(scores.dtype)


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k) + M) v.

    q (..., Tq, d_k), k (..., Tk, d_k), v (..., Tk, d_v) -> (out (..., Tq, d_v), weights (..., Tq, Tk)).
    A bool mask marks PROHIBITED pairs with True; a float mask is added to the scores.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        _require_tensor(t, name)
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, d), got {tuple(t.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"d_k mismatch: q has shape {tuple(q.shape)} (d_k={q.shape[-1]}) but k has shape "
            f"{tuple(k.shape)} (d_k={k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"Tk mismatch: k has shape {tuple(k.shape)} (Tk={k.shape[-2]}) but v has shape "
            f"{tuple(v.shape)} (Tk={v.shape[-2]})"
        )
    d_k = q.shape[-1]
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)
    if mask is not None:
        scores = _as_additive(mask, scores)
        blocked = (scores == _NEG_INF).all(dim=-1)
        if bool(blocked.any()):
            raise ValueError(
                f"mask (shape {tuple(mask.shape)}) prohibits every key for "
                f"{int(blocked.sum())} query row(s); each query needs a permitted key"
            )
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    out = torch.einsum("...ij,...jd->...id", weights, v)  # (..., Tq, d_v)
    return out, weights
