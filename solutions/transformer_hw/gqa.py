"""Part 6: grouped-query attention (GQA) with RoPE and a preallocated KV cache.

Forbidden here: any library softmax or attention, as in part 1.
"""

import torch
from torch import nn

from transformer_hw.attention import scaled_dot_product_attention
from transformer_hw.heads import merge_heads, split_heads
from transformer_hw.masks import causal_mask
from transformer_hw.rope import apply_rope


def kv_cache_numel(
    batch: int, n_layers: int, seq_len: int, n_kv_heads: int, d_head: int
) -> int:
    """Elements a KV cache holds: ``2 * B * L * T * h_kv * d_h`` (keys AND values)."""
    # TODO: count the elements of the keys and the values of every layer.
    # Why it matters: decoding one token reads the whole cache, so its size, not the
    # arithmetic, bounds the speed; fewer kv heads shrink it by n_heads / n_kv_heads.
    ### BEGIN SOLUTION
    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head
    ### END SOLUTION


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, h_kv, T, d) -> (B, h_kv * n_rep, T, d)``: query head ``j`` uses kv head ``j // n_rep``.

    Each kv head is repeated ``n_rep`` times consecutively (``[k0, k0, k1, k1]``), NOT the whole
    stack tiled (``[k0, k1, k0, k1]``).

    Raises:
        ValueError: ``x`` is not 4-D or ``n_rep`` is below 1.
    """
    # TODO: repeat each kv head n_rep times next to itself.
    # Shapes: (B, h_kv, T, d) -> (B, h_kv * n_rep, T, d), heads [k0, k0, k1, k1] for n_rep=2.
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x must be (B, h_kv, T, d), got shape {tuple(x.shape)}")
    if n_rep < 1:
        raise ValueError(f"n_rep={n_rep} must be at least 1")
    batch, n_kv, t, d = x.shape
    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)
    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)
    ### END SOLUTION


class KVCache:
    """Preallocated keys and values, ``k`` and ``v`` of shape ``(B, h_kv, max_len, d_head)``.

    ``length`` counts the positions written so far; the others may hold anything (zeros, or
    ``torch.empty``'s). It stores ``h_kv`` heads, never ``h_q``. The caller picks ``device``
    and ``dtype``.
    """

    def __init__(
        self, batch, n_kv_heads, max_len, d_head, device=None, dtype=torch.float32
    ):
        # TODO: allocate k and v, set length to 0.
        ### BEGIN SOLUTION
        sizes = {
            "batch": batch,
            "n_kv_heads": n_kv_heads,
            "max_len": max_len,
            "d_head": d_head,
        }
        for name, value in sizes.items():
            if value < 1:
                raise ValueError(f"{name}={value} must be at least 1")
        self.max_len = max_len
        self.k = torch.zeros(
            batch, n_kv_heads, max_len, d_head, device=device, dtype=dtype
        )
        self.v = torch.zeros_like(self.k)
        self.length = 0
        ### END SOLUTION

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor):
        """Write ``(B, h_kv, t, d_head)`` keys and values at ``length``; return the first
        ``length + t`` positions of ``k`` and ``v``.

        Raises:
            ValueError: shapes other than ``(B, h_kv, t, d_head)``, another dtype or device,
                or more than ``max_len`` positions in all (then nothing is written).
        """
        # TODO: validate, write at length, advance length, return the filled prefix.
        # Shapes: k_new, v_new (B, h_kv, T_new, d_h) go to [:, :, length:length + T_new];
        # the result is k[:, :, :length], v[:, :, :length] after the write.
        # Why a cache: each new token attends to all earlier keys and values; keeping them
        # makes a decoding step O(T) instead of recomputing the O(T^2) prefix.
        ### BEGIN SOLUTION
        batch, n_kv, _, d_head = self.k.shape
        for name, new in (("k_new", k_new), ("v_new", v_new)):
            if new.dim() != 4 or (new.shape[0], new.shape[1], new.shape[3]) != (
                batch,
                n_kv,
                d_head,
            ):
                raise ValueError(
                    f"{name} has shape {tuple(new.shape)}, expected ({batch}, {n_kv}, t, {d_head})"
                )
            if new.dtype != self.k.dtype or new.device != self.k.device:
                raise ValueError(
                    f"{name} is {new.dtype} on {new.device}, the cache {self.k.dtype} on "
                    f"{self.k.device}"
                )
        if k_new.shape != v_new.shape:
            raise ValueError(
                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} differ"
            )
        t = k_new.shape[2]
        if self.length + t > self.max_len:
            raise ValueError(
                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"
            )
        self.k[:, :, self.length : self.length + t] = k_new
        self.v[:, :, self.length : self.length + t] = v_new
        self.length += t
        return self.k[:, :, : self.length], self.v[:, :, : self.length]
        ### END SOLUTION

    def reset(self) -> None:
        """Forget everything cached (``length = 0``)."""
        # TODO: empty the cache.
        ### BEGIN SOLUTION
        self.length = 0
        ### END SOLUTION


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``n_kv_heads`` key/value heads shared by ``n_heads`` query heads.

    ``d_h = d_model // n_heads``; ``q_proj: D -> h*d_h``, ``k_proj`` and ``v_proj: D -> h_kv*d_h``,
    ``out_proj: h*d_h -> D``, all without bias. RoPE (part 4) is applied to q and k at their
    absolute positions (``cache.length + arange(T)`` with a cache). ``n_kv_heads == n_heads`` is
    multi-head attention; ``n_kv_heads == 1`` is multi-query attention.

    Raises:
        ValueError: ``n_heads % n_kv_heads != 0``, ``d_model % n_heads != 0``, or odd ``d_h``.
    """

    def __init__(
        self, d_model: int, n_heads: int, n_kv_heads: int, rope_base: float = 10000.0
    ):
        super().__init__()
        # TODO: check the sizes, store the attributes, create the four projections.
        ### BEGIN SOLUTION
        if n_heads < 1 or d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_kv_heads < 1 or n_heads % n_kv_heads != 0:
            raise ValueError(
                f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}"
            )
        d_head = d_model // n_heads
        if d_head % 2 != 0:
            raise ValueError(
                f"d_head = d_model // n_heads = {d_head} must be even for RoPE"
            )
        self.n_heads, self.n_kv_heads, self.d_head = n_heads, n_kv_heads, d_head
        self.rope_base = rope_base
        self.q_proj = nn.Linear(d_model, n_heads * d_head, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=False)
        self.out_proj = nn.Linear(n_heads * d_head, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """``x (B, T, D) -> (B, T, D)``; with a ``cache`` the rotated k and v are appended and
        the queries attend over the whole cache. Token-by-token decoding with a cache equals
        one full causal pass."""
        # TODO: project, split heads, RoPE at absolute positions, (cache), repeat kv heads,
        # causal attention, merge heads, project out.
        # Shapes: x (B, T, D) -> q (B, h, T, d_h), k and v (B, h_kv, T, d_h) -> (cached keys
        # and values (B, h_kv, T_k, d_h)) -> repeat_kv -> (B, h, T_k, d_h) -> (B, T, D).
        # Why groups: n_rep query heads share one kv head, cutting the cache by n_rep at
        # almost the quality of full multi-head attention (Ainslie et al. 2023).
        ### BEGIN SOLUTION
        t = x.shape[1]
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + t, device=x.device)
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T, d_h)
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_h)
        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_h)
        q = apply_rope(q, positions, self.rope_base)
        k = apply_rope(k, positions, self.rope_base)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)
        n_rep = self.n_heads // self.n_kv_heads
        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)
        out, _ = scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask
        )
        return self.out_proj(merge_heads(out))  # (B, T, D)
        ### END SOLUTION
