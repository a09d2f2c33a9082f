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
    raise NotImplementedError("TODO: causal_mask")


def padding_mask(lengths, t: int) -> torch.Tensor:
    """Bool ``(B, t)``: True at the padded positions ``>= lengths[b]`` (right padding).

    ``lengths`` is a LongTensor ``(B,)`` (a list is accepted); the mask is on its device.

    Raises:
        ValueError: a length below 1 or above ``t``.
    """
    # TODO: compare the positions 0..t-1 with each sequence's length.
    raise NotImplementedError("TODO: padding_mask")


def attention_mask(lengths, t: int, causal: bool = True) -> torch.Tensor:
    """Bool ``(B, 1, t, t)``: key padding OR (when ``causal``) the causal mask.

    The head axis has size 1 so the mask broadcasts over heads. With ``causal=False`` it is the
    key-padding mask alone, still expanded to ``(B, 1, t, t)``.
    """
    # TODO: combine padding_mask (over keys) with causal_mask.
    raise NotImplementedError("TODO: attention_mask")
