"""Part 2: boolean attention masks. True means PROHIBITED (the key may not be attended to)."""

import torch


def causal_mask(t_q: int, t_k: int | None = None, device=None) -> torch.Tensor:
    """Bool ``(t_q, t_k)``: True where key ``j`` lies in the future of query ``i``.

    ``t_k`` defaults to ``t_q``. With ``t_k > t_q`` the queries are the LAST ``t_q`` positions:
    query ``i`` sits at absolute position ``t_k - t_q + i`` (as in cached decoding), so it may
    see keys ``0 .. t_k - t_q + i``.

    Raises:
        ValueError: ``t_q`` or ``t_k`` below 1, or ``t_k < t_q``.
    """
    # TODO: build the (t_q, t_k) mask, offsetting the query positions by t_k - t_q.
    t_k = t_q if t_k is None else t_k
    if t_q < 1 or t_k < 1:
        raise ValueError(f"t_q={t_q} and t_k={t_k} must both be at least 1")
    if t_k < t_q:
        raise ValueError(f"t_k={t_k} is smaller than t_q={t_q}")
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    return key_pos > query_pos  # (t_q, t_k)


def padding_mask(lengths, t: int) -> torch.Tensor:
    """Bool ``(B, t)``: True at the padded positions ``>= lengths[b]`` (right padding).

    ``lengths`` is a LongTensor ``(B,)`` (a list is accepted); the mask is on its device.

    Raises:
        ValueError: a length below 1 or above ``t``.
    """
    # TODO: compare the positions 0..t-1 with each sequence's length.
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if (lengths < 1).any() or (lengths > t).any():
        raise ValueError(f"lengths {lengths.tolist()} must lie between 1 and t={t}")
    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)
    return positions >= lengths[:, None]  # (B, t)


def attention_mask(lengths, t: int, causal: bool = True) -> torch.Tensor:
    """Bool ``(B, 1, t, t)``: key padding OR (when ``causal``) the causal mask.

    The head axis has size 1 so the mask broadcasts over heads. With ``causal=False`` it is the
    key-padding mask alone, still expanded to ``(B, 1, t, t)``.
    """
    # TODO: combine padding_mask (over keys) with causal_mask.
    keys_padded = padding_mask(lengths, t)[:, None, None, :]  # (B, 1, 1, t)
    batch = keys_padded.shape[0]
    mask = keys_padded.expand(batch, 1, t, t)  # (B, 1, t, t)
    if causal:
        mask = mask | causal_mask(t, device=keys_padded.device)
    return mask.contiguous()
