"""Part 2: boolean masks where True means PROHIBITED."""

import torch


def _count(value, name):
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an int, got {value!r}")
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an int, got {value!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {name}={value}")
    return value


def causal_mask(t_q, t_k=None, device=None):
    """(t_q, t_k) bool, True where key j is in the future of query i.

    Queries are the LAST t_q of t_k positions: query i sits at t_k - t_q + i.
    """
    t_q = _count(t_q, "t_q")
    t_k = t_q if t_k is None else _count(t_k, "t_k")
    if t_k < t_q:
        raise ValueError(f"t_k must be >= t_q, got t_q={t_q}, t_k={t_k}")
    shift = t_k - t_q
    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    return everything.triu(diagonal=shift + 1)


def _lengths_tensor(lengths):
    if not isinstance(lengths, torch.Tensor):
        try:
            lengths = torch.tensor(list(lengths), dtype=torch.long)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"lengths must be a 1-D LongTensor or a list of ints, got {lengths!r}") from None
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must hold integers, got dtype {lengths.dtype}")
    return lengths


def padding_mask(lengths, t):
    """(B, t) bool on lengths' device, True at positions >= lengths[b] (right padding)."""
    lengths = _lengths_tensor(lengths)
    t = _count(t, "t")
    if lengths.numel() and (bool((lengths < 1).any()) or bool((lengths > t).any())):
        raise ValueError(
            f"every entry of lengths must lie in [1, t={t}], got lengths={lengths.tolist()}"
        )
    batch = lengths.shape[0]
    where = torch.arange(t, device=lengths.device).unsqueeze(0).expand(batch, t)  # (B, t)
    limit = lengths.to(torch.long).unsqueeze(1).expand(batch, t)  # (B, t)
    return where >= limit


def attention_mask(lengths, t, causal=True):
    """(B, 1, t, t) bool: key padding, OR'ed with the causal mask when ``causal``."""
    keys_off = padding_mask(lengths, t)  # (B, t)
    batch = keys_off.shape[0]
    full = keys_off.view(batch, 1, 1, t).expand(batch, 1, t, t)  # (B, 1, t, t)
    if causal:
        return full | causal_mask(t, device=keys_off.device).view(1, 1, t, t)
    return full.contiguous()
