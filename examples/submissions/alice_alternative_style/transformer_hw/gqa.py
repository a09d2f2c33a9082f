"""Part 6: KV-cache sizing, repeat_kv, a preallocated KV cache and grouped-query attention."""

import math
import warnings

import torch
from torch import nn

from .attention import softmax as stable_softmax
from .masks import causal_mask
from .rope import apply_rope


def _positive(value, name, allow_zero=False):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {name}={value!r}")
    if value < (0 if allow_zero else 1):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '>= 1'}, got {name}={value}")
    return value


def kv_cache_numel(batch, n_layers, seq_len, n_kv_heads, d_head):
    """Entries held by a KV cache: keys and values, 2 * B * L * T * h_kv * d_h."""
    dims = {
        "batch": batch,
        "n_layers": n_layers,
        "seq_len": seq_len,
        "n_kv_heads": n_kv_heads,
        "d_head": d_head,
    }
    total = 2
    for name, value in dims.items():
        total *= _positive(value, name, allow_zero=True)
    return int(total)


def repeat_kv(x, n_rep):
    """(B, h_kv, T, d) -> (B, h_kv * n_rep, T, d); query head j reads kv head j // n_rep."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise ValueError(f"x must have shape (B, h_kv, T, d), got {tuple(getattr(x, 'shape', ()))}")
    _positive(n_rep, "n_rep")
    return torch.repeat_interleave(x, n_rep, dim=1)


class KVCache:
    """Preallocated keys/values (B, h_kv, max_len, d_head); ``length`` positions are filled."""

    def __init__(self, batch, n_kv_heads, max_len, d_head, device=None, dtype=torch.float32):
        self.batch = _positive(batch, "batch")
        self.n_kv_heads = _positive(n_kv_heads, "n_kv_heads")
        self.max_len = _positive(max_len, "max_len")
        self.d_head = _positive(d_head, "d_head")
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"dtype must be a torch.dtype, got {dtype!r}")
        shape = (batch, n_kv_heads, max_len, d_head)
        self.k = torch.empty(shape, device=device, dtype=dtype)
        self.v = torch.empty(shape, device=device, dtype=dtype)
        self.dtype = dtype
        self.device = self.k.device
        self.length = 0

    def _check(self, t, name):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a tensor, got {type(t).__name__}")
        want = (self.batch, self.n_kv_heads, self.d_head)
        if t.dim() != 4 or (t.shape[0], t.shape[1], t.shape[3]) != want:
            raise ValueError(
                f"{name} must have shape (B={self.batch}, h_kv={self.n_kv_heads}, t, "
                f"d_head={self.d_head}), got {tuple(t.shape)}"
            )
        if t.dtype != self.dtype:
            raise ValueError(f"{name} has dtype {t.dtype}, but the cache holds {self.dtype}")
        if t.device != self.device:
            raise ValueError(f"{name} is on {t.device}, but the cache lives on {self.device}")

    def append(self, k_new, v_new):
        """Write (B, h_kv, t, d_head) keys/values at ``length``; return the first length + t."""
        self._check(k_new, "k_new")
        self._check(v_new, "v_new")
        if k_new.shape[2] != v_new.shape[2]:
            raise ValueError(
                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} hold different t"
            )
        fresh = k_new.shape[2]
        end = self.length + fresh
        if end > self.max_len:
            raise ValueError(
                f"KV cache overflow: length={self.length} + t={fresh} exceeds max_len={self.max_len}"
            )
        self.k[:, :, self.length:end].copy_(k_new)
        self.v[:, :, self.length:end].copy_(v_new)
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def reset(self):
        """Forget everything (the storage is reused)."""
        self.length = 0


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with h query heads sharing h_kv key/value heads, and RoPE."""

    def __init__(self, d_model, n_heads, n_kv_heads, rope_base=10000.0):
        super().__init__()
        _positive(d_model, "d_model")
        _positive(n_heads, "n_heads")
        _positive(n_kv_heads, "n_kv_heads")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={n_kv_heads}")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        d_head = d_model // n_heads
        if d_head % 2:
            raise ValueError(
                f"d_head = d_model // n_heads = {d_model} // {n_heads} = {d_head} is odd; RoPE needs pairs"
            )
        if n_kv_heads == n_heads:
            warnings.warn("alice: n_kv_heads == n_heads, this GQA is plain multi-head attention")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.d_head = d_head
        self.rope_base = rope_base
        self.q_proj = nn.Linear(d_model, n_heads * d_head, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_heads * d_head, bias=False)
        self.out_proj = nn.Linear(n_heads * d_head, d_model, bias=False)

    def forward(self, x, cache=None):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (B, T, d_model={self.d_model}), got {tuple(getattr(x, 'shape', ()))}"
            )
        batch, steps, _ = x.shape
        groups, rep, dh = self.n_kv_heads, self.n_heads // self.n_kv_heads, self.d_head
        start = 0 if cache is None else cache.length
        where = torch.arange(start, start + steps, device=x.device)  # absolute positions (T,)

        q = self.q_proj(x).view(batch, steps, self.n_heads, dh).transpose(1, 2)  # (B, h, T, d)
        k = self.k_proj(x).view(batch, steps, groups, dh).transpose(1, 2)  # (B, h_kv, T, d)
        v = self.v_proj(x).view(batch, steps, groups, dh).transpose(1, 2)  # (B, h_kv, T, d)
        q = apply_rope(q, where, self.rope_base)
        k = apply_rope(k, where, self.rope_base)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, start + T, d)
        total = k.shape[2]

        grouped_q = q.reshape(batch, groups, rep, steps, dh)  # head j -> (j // rep, j % rep)
        scores = torch.einsum("bgrtd,bgsd->bgrts", grouped_q, k) / math.sqrt(dh)
        future = causal_mask(steps, total, device=x.device)  # (T, start + T)
        scores = torch.where(future, float("-inf"), scores)
        weights = stable_softmax(scores, dim=-1)  # (B, h_kv, rep, T, start + T)
        mixed = torch.einsum("bgrts,bgsd->bgrtd", weights, v)  # (B, h_kv, rep, T, d)
        mixed = mixed.reshape(batch, self.n_heads, steps, dh).permute(0, 2, 1, 3)
        return self.out_proj(mixed.reshape(batch, steps, self.n_heads * dh))  # (B, T, D)
