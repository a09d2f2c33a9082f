"""The bug zoo: realistic wrong solutions, each the reference with one exact, asserted edit.

Every mutant names the part it breaks and a phrase its feedback must carry (the targeted
diagnosis). ``apply`` refuses an edit whose text does not occur exactly once, so a mutant can
never silently equal the reference. This module quotes reference code: it stays out of every
handout and Gradescope zip.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.facts.points import PACKAGE


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    edits: tuple[tuple[str, str], ...]  # (exact reference text, replacement)
    part: int  # the part whose own code it breaks
    diagnosis: str  # must appear (case-insensitively) in that part's feedback

    @property
    def description(self) -> str:
        """The mistake as feedback names it (``WORDING``): it holds the diagnosis."""
        return WORDING.get(self.diagnosis, self.diagnosis)


class MutantError(ValueError):
    """An edit that does not apply exactly once: the catalogue and the reference drifted."""


def single(name, file, old, new, part, diagnosis) -> Mutant:
    """A mutant made of one edit."""
    return Mutant(name, file, ((old, new),), part, diagnosis)


#: The reference's interleaved rotation (rope.py), which two mutants rewrite.
ROPE_ROTATION = """    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)"""


#: The reference's masking and softmax (attention.py), which two mutants move around.
MASKING = """        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
"""


CATALOGUE: tuple[Mutant, ...] = (
    # Part 1 -----------------------------------------------------------------------------------
    Mutant(
        "mask-after-softmax-renormalized",
        "attention.py",
        (
            (
                MASKING,
                """        prohibited = mask if mask.dtype == torch.bool else torch.isneginf(mask)
        if prohibited.expand(scores.shape).all(dim=-1).any():
            raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        weights = weights.masked_fill(prohibited, 0.0)
        weights = weights / weights.sum(dim=-1, keepdim=True)
""",
            ),
        ),
        1,
        "then renormalized",
    ),
    Mutant(
        "mask-after-softmax",
        "attention.py",
        (
            (
                MASKING,
                """        prohibited = mask if mask.dtype == torch.bool else torch.isneginf(mask)
        if prohibited.expand(scores.shape).all(dim=-1).any():
            raise ValueError("mask prohibits every key for at least one query row")
        scores = scores.masked_fill(prohibited, 0.0)
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        weights = weights.masked_fill(prohibited, 0.0)
""",
            ),
        ),
        1,
        "mask applied after the softmax",
    ),
    single(
        "mask-after-softmax-as-a-factor",
        "attention.py",
        MASKING,
        """        keep = ~mask if mask.dtype == torch.bool else torch.exp(mask)
        if (keep == 0).expand(scores.shape).all(dim=-1).any():
            raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        weights = weights * keep
""",
        1,
        "mask applied after the softmax",
    ),
    single(
        "float-mask-applied-after-softmax",
        "attention.py",
        MASKING,
        """        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None and mask.dtype != torch.bool:
        weights = weights * torch.exp(mask)  # -inf -> 0, 0 -> 1
""",
        1,
        "mask applied after the softmax",
    ),
    single(
        "no-scale",
        "attention.py",
        " / math.sqrt(q.shape[-1])",
        "",
        1,
        "not scaled by 1/sqrt(d_k)",
    ),
    single(
        "scale-by-d_k",
        "attention.py",
        "math.sqrt(q.shape[-1])",
        "q.shape[-1]",
        1,
        "scaled by 1/d_k instead",
    ),
    single(
        "scale-by-sqrt-d_v",
        "attention.py",
        "math.sqrt(q.shape[-1])",
        "math.sqrt(v.shape[-1])",
        1,
        "1/sqrt(d_v)",
    ),
    single(
        "softmax-wrong-axis",
        "attention.py",
        "weights = softmax(scores, dim=-1)",
        "weights = softmax(scores, dim=-2)",
        1,
        "softmax over the queries axis",
    ),
    single(
        "softmax-no-max",
        "attention.py",
        "torch.exp(x - top)",
        "torch.exp(x)",
        1,
        "no max subtraction",
    ),
    single(
        "inverted-bool-mask",
        "attention.py",
        'scores.masked_fill(mask, float("-inf"))',
        'scores.masked_fill(~mask, float("-inf"))',
        1,
        "bool mask inverted",
    ),
    Mutant(
        "fully-masked-row-nan",
        "attention.py",
        (
            (
                """    if torch.isneginf(top).any():
        raise ValueError(
            f"softmax: x has a slice along dim={dim} that is entirely -inf"
        )
""",
                "",
            ),
            (
                """    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
""",
                "",
            ),
        ),
        1,
        "NaN instead of raising",
    ),
    single(
        "softmax-subtracts-in-place",
        "attention.py",
        "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n",
        "    x -= top  # shifts the caller's tensor too\n    exp = torch.exp(x)\n",
        1,
        "in-place operation on an argument",
    ),
    single(
        "attention-detaches-weights",
        "attention.py",
        "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)\n",
        "    return weights.detach() @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)\n",
        1,
        "cuts the computation off",
    ),
    single(
        "attention-detaches-bool-masked-scores",
        "attention.py",
        'scores = scores.masked_fill(mask, float("-inf"))',
        'scores = scores.detach().masked_fill(mask, float("-inf"))',
        1,
        "cuts the computation off",
    ),
    # Part 2 -----------------------------------------------------------------------------------
    single(
        "causal-hides-diagonal",
        "masks.py",
        "key_pos > query_pos",
        "key_pos >= query_pos",
        2,
        "hides the diagonal",
    ),
    single(
        "causal-ignores-offset",
        "masks.py",
        "[:, None] + (t_k - t_q)",
        "[:, None]",
        2,
        "ignores the t_k > t_q offset",
    ),
    single(
        "padding-off-by-one",
        "masks.py",
        "positions >= lengths[:, None]",
        "positions > lengths[:, None]",
        2,
        "padding mask off by one",
    ),
    # Part 3 -----------------------------------------------------------------------------------
    single(
        "d-head-true-division",
        "heads.py",
        "self.d_head = d_model // n_heads",
        "self.d_head = d_model / n_heads",
        3,
        "gives a float",
    ),
    single(
        "split-heads-true-division",
        "heads.py",
        "x = x.reshape(batch, t, n_heads, d_model // n_heads)",
        "x = x.reshape(batch, t, n_heads, d_model / n_heads)",
        3,
        "gives a float",
    ),
    single(
        "split-heads-no-transpose",
        "heads.py",
        """    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)
    return x.transpose(1, 2)  # (B, h, T, d_h)""",
        "    return x.reshape(batch, n_heads, t, d_model // n_heads)",
        3,
        "split_heads reshapes straight",
    ),
    single(
        "queries-reshaped-without-the-transpose",
        "heads.py",
        "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)\n",
        "        q = self.q_proj(x).reshape(x.shape[0], self.n_heads, x.shape[1], -1)\n",
        3,
        "split_heads reshapes straight",
    ),
    single(
        "merge-heads-no-transpose",
        "heads.py",
        "return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)",
        "return x.reshape(batch, t, n_heads * d_head)",
        3,
        "merge_heads reshapes",
    ),
    single(
        "mha-scale-by-d_model",
        "heads.py",
        "out, _ = scaled_dot_product_attention(q, k, v, mask)",
        "out, _ = scaled_dot_product_attention(q / self.n_heads**0.5, k, v, mask)",
        3,
        "1/sqrt(d_model)",
    ),
    single(
        "cross-attention-from-x",
        "heads.py",
        "source = x if context is None else context",
        "source = x",
        3,
        "keys and values from x",
    ),
    single(
        "mha-cache-mask-none-is-causal",
        "heads.py",
        "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n",
        """            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
            if mask is None:  # decoding through a cache is causal
                t_q, t_k = q.shape[2], k.shape[2]
                mask = torch.ones(t_q, t_k, dtype=torch.bool, device=x.device)
                mask = mask.triu(t_k - t_q + 1)
""",
        3,
        "mask=None with a cache treated as a causal mask",
    ),
    single(
        "mha-float-mask-as-bool",
        "heads.py",
        "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
        """        if mask is not None and mask.is_floating_point():
            mask = mask != 0  # -inf where prohibited: the same as a bool mask
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)
""",
        3,
        "a float mask turned into a bool one",
    ),
    single(
        "mha-float-mask-changed-in-place",
        "heads.py",
        "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
        """        if mask is not None and mask.is_floating_point():
            mask[torch.isneginf(mask)] = -1e9  # finite: no NaN from -inf - -inf
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)
""",
        3,
        "in-place operation on an argument",
    ),
    # Part 4 -----------------------------------------------------------------------------------
    single(
        "rope-half-split",
        "rope.py",
        ROPE_ROTATION,
        """    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)""",
        4,
        "half-split",
    ),
    single(
        "rope-wrong-direction",
        "rope.py",
        "(a * cos - b * sin, a * sin + b * cos)",
        "(a * cos + b * sin, -a * sin + b * cos)",
        4,
        "wrong direction",
    ),
    single(
        "rope-frequency-without-2",
        "rope.py",
        "base ** (-2.0 * pair / d_head)",
        "base ** (-pair / d_head)",
        4,
        "base ** (-i / d_head)",
    ),
    single(
        "rope-angles-default-float32",
        "rope.py",
        "dtype = torch.get_default_dtype() if dtype is None else dtype",
        "dtype = torch.float32 if dtype is None else dtype",
        4,
        "taken as a fixed float32",
    ),
    single(
        "rope-ignores-positions",
        "rope.py",
        "angles = rope_angles(positions, x.shape[-1]",
        "angles = rope_angles(torch.arange(t, device=x.device), x.shape[-1]",
        4,
        "positions ignored",
    ),
    single(
        "rope-positions-taken-as-consecutive",
        "rope.py",
        "angles = rope_angles(positions, x.shape[-1]",
        "angles = rope_angles(positions[0] + torch.arange(t, device=x.device), x.shape[-1]",
        4,
        "positions ignored",
    ),
    single(
        "rope-rotates-in-place",
        "rope.py",
        ROPE_ROTATION,
        """    a, b = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = a * cos - b * sin
    x[..., 1::2] = a * sin + b * cos
    return x""",
        4,
        "in-place operation on an argument",
    ),
    # Part 5 -----------------------------------------------------------------------------------
    single(
        "layernorm-unbiased-variance",
        "norm.py",
        "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
        "var = x.var(dim=-1, keepdim=True, correction=1)",
        5,
        "unbiased variance",
    ),
    single(
        "layernorm-eps-outside-sqrt",
        "norm.py",
        "(x - mean) / torch.sqrt(var + self.eps)",
        "(x - mean) / (torch.sqrt(var) + self.eps)",
        5,
        "eps added outside the square root",
    ),
    single(
        "rmsnorm-eps-outside-sqrt",
        "norm.py",
        "rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
        "rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + self.eps",
        5,
        "eps added outside the square root",
    ),
    single(
        "layernorm-variance-by-moments",
        "norm.py",
        "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
        "var = (x * x).mean(dim=-1, keepdim=True) - mean**2",
        5,
        "E[x^2] - E[x]^2",
    ),
    single(
        "rmsnorm-subtracts-mean",
        "norm.py",
        "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
        "        x = x - x.mean(dim=-1, keepdim=True)\n"
        "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
        5,
        "RMSNorm subtracts the mean",
    ),
    single(
        "residual-adds-normalized",
        "block.py",
        "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
        "        x = self.ln1(x)\n        h = x + self.attn(x, mask=mask, cache=cache)\n",
        5,
        "residual adds the normalized tensor",
    ),
    single(
        "ffn-residual-adds-normalized",
        "block.py",
        "        return h + self.ffn(self.ln2(h))\n",
        "        h = self.ln2(h)\n        return h + self.ffn(h)\n",
        5,
        "residual adds the normalized tensor",
    ),
    single(
        "pre-post-norm-swapped",
        "block.py",
        """        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))""",
        """        h = self.ln1(x + self.attn(x, mask=mask, cache=cache))
        return self.ln2(h + self.ffn(h))""",
        5,
        "post-norm order",
    ),
    single(
        "attention-sublayer-in-post-norm-order",
        "block.py",
        "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
        "        h = self.ln1(x + self.attn(x, mask=mask, cache=cache))\n",
        5,
        "post-norm order",
    ),
    single(
        "rmsnorm-divides-in-place",
        "norm.py",
        "        return x / rms * self.weight\n",
        "        return x.div_(rms) * self.weight\n",
        5,
        "in-place operation on an argument",
    ),
    single(
        "layernorm-normalizes-in-place",
        "norm.py",
        "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n",
        "        return x.sub_(mean).div_(torch.sqrt(var + self.eps)) * self.weight + self.bias\n",
        5,
        "in-place operation on an argument",
    ),
    single(
        "rmsnorm-detaches-rms",
        "norm.py",
        "        return x / rms * self.weight\n",
        "        return x / rms.detach() * self.weight\n",
        5,
        "the gradient is not",
    ),
    single(
        "layernorm-detaches-mean",
        "norm.py",
        "        mean = x.mean(dim=-1, keepdim=True)\n",
        "        mean = x.mean(dim=-1, keepdim=True).detach()\n",
        5,
        "the gradient is not",
    ),
    single(
        "layernorm-detaches-variance",
        "norm.py",
        "(x - mean) / torch.sqrt(var + self.eps)",
        "(x - mean) / torch.sqrt(var.detach() + self.eps)",
        5,
        "the gradient is not",
    ),
    single(
        "layernorm-bias-buffer",
        "norm.py",
        "        self.bias = nn.Parameter(torch.zeros(d))\n",
        '        self.register_buffer("bias", torch.zeros(d))\n',
        5,
        "make it an nn.Parameter",
    ),
    single(
        "block-mask-none-is-causal",
        "block.py",
        "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
        """        if mask is None and cache is None:  # a decoder block is causal
            t = x.shape[1]
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
""",
        5,
        "mask=None treated as a causal mask",
    ),
    single(
        "block-drops-mask-with-cache",
        "block.py",
        "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
        """        if cache is not None:  # decoding: one new token sees the whole cache anyway
            mask = None
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
""",
        5,
        "the mask is not passed on to attn when a cache is given",
    ),
    # Part 6 -----------------------------------------------------------------------------------
    single(
        "kv-append-checks-keys-only",
        "gqa.py",
        'for name, new in (("k_new", k_new), ("v_new", v_new)):',
        'for name, new in (("k_new", k_new),):',
        6,
        "only k_new is checked",
    ),
    single(
        "repeat-kv-tiled",
        "gqa.py",
        "x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)",
        "x = x[:, None].expand(batch, n_rep, n_kv, t, d)",
        6,
        "tiled",
    ),
    single(
        "kv-numel-without-2",
        "gqa.py",
        "return 2 * batch * n_layers",
        "return batch * n_layers",
        6,
        "factor 2 is missing",
    ),
    single(
        "kv-numel-counts-bytes",
        "gqa.py",
        "return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
        "return 2 * batch * n_layers * seq_len * n_kv_heads * d_head * 4",
        6,
        "counts bytes",
    ),
    single(
        "cache-stores-query-heads",
        "gqa.py",
        """        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)
        n_rep = self.n_heads // self.n_kv_heads""",
        """        n_rep = self.n_heads // self.n_kv_heads
        if cache is not None:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
            n_rep = 1
            k, v = cache.append(k, v)""",
        6,
        "cache receives n_heads",
    ),
    single(
        "cache-overflow-writes-partially",
        "gqa.py",
        """        t = k_new.shape[2]
        if self.length + t > self.max_len:""",
        """        t = k_new.shape[2]
        room = self.max_len - self.length
        self.k[:, :, self.length : self.length + t] = k_new[:, :, :room]
        self.v[:, :, self.length : self.length + t] = v_new[:, :, :room]
        if self.length + t > self.max_len:""",
        6,
        "overflowing append wrote",
    ),
    single(
        "kv-append-trusts-v-length",
        "gqa.py",
        """        if k_new.shape != v_new.shape:
            raise ValueError(
                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} differ"
            )
""",
        "",
        6,
        "not against each other",
    ),
    single(
        "rope-on-values",
        "gqa.py",
        "        k = apply_rope(k, positions, self.rope_base)\n",
        """        k = apply_rope(k, positions, self.rope_base)
        v = apply_rope(v, positions, self.rope_base)
""",
        6,
        "RoPE rotates the values too",
    ),
    single(
        "cache-length-not-advanced",
        "gqa.py",
        """        self.length += t
        return self.k[:, :, : self.length], self.v[:, :, : self.length]""",
        """        return self.k[:, :, : self.length + t], self.v[:, :, : self.length + t]""",
        6,
        "append does not advance length",
    ),
    single(
        "cache-length-increment-left-out",
        "gqa.py",
        "        self.length += t\n",
        "",
        6,
        "append does not advance length",
    ),
    single(
        "rope-positions-not-offset-by-cache",
        "gqa.py",
        "positions = torch.arange(start, start + t, device=x.device)",
        "positions = torch.arange(t, device=x.device)",
        6,
        "not offset by the cache length",
    ),
    single(
        "rope-query-positions-not-offset-by-cache",
        "gqa.py",
        "q = apply_rope(q, positions, self.rope_base)",
        "q = apply_rope(q, torch.arange(t, device=x.device), self.rope_base)",
        6,
        "not offset by the cache length",
    ),
    Mutant(
        "gqa-ignores-rope-base",
        "gqa.py",
        (
            (
                "q = apply_rope(q, positions, self.rope_base)",
                "q = apply_rope(q, positions)",
            ),
            (
                "k = apply_rope(k, positions, self.rope_base)",
                "k = apply_rope(k, positions)",
            ),
        ),
        6,
        "rope_base ignored",
    ),
    single(  # on the queries alone
        "gqa-queries-ignore-rope-base",
        "gqa.py",
        "q = apply_rope(q, positions, self.rope_base)",
        "q = apply_rope(q, positions)",
        6,
        "rope_base ignored",
    ),
    single(  # on the keys alone
        "gqa-keys-ignore-rope-base",
        "gqa.py",
        "k = apply_rope(k, positions, self.rope_base)",
        "k = apply_rope(k, positions)",
        6,
        "rope_base ignored",
    ),
    single(
        "kv-length-a-tensor",
        "gqa.py",
        "        self.v = torch.zeros_like(self.k)\n        self.length = 0\n",
        "        self.v = torch.zeros_like(self.k)\n        self.length = torch.tensor(0)\n",
        6,
        "length kept as a tensor",
    ),
    single(
        "kv-length-grows-as-a-tensor",
        "gqa.py",
        "        self.length += t\n",
        "        self.length = self.length + torch.tensor(t)\n",
        6,
        "length kept as a tensor",
    ),
    single(
        "kv-dtype-from-torch-default",
        "gqa.py",
        """        self.max_len = max_len
        self.k = torch.zeros(""",
        """        self.max_len = max_len
        dtype = torch.get_default_dtype() if dtype == torch.float32 else dtype
        self.k = torch.zeros(""",
        6,
        "follows torch.get_default_dtype()",
    ),
    single(
        "kv-values-in-the-default-dtype",
        "gqa.py",
        "        self.v = torch.zeros_like(self.k)\n",
        "        self.v = torch.zeros(self.k.shape, device=self.k.device)\n",
        6,
        "follows torch.get_default_dtype()",
    ),
    single(
        "kv-full-cache-overflows",
        "gqa.py",
        "        if self.length + t > self.max_len:\n",
        "        if self.length + t >= self.max_len:\n",
        6,
        "refuses to fill the cache up to max_len exactly",
    ),
    # Part 7 -----------------------------------------------------------------------------------
    single(
        "lm-loss-sum-skips-no-target-check",
        "charlm.py",
        "    if not (targets != IGNORE_INDEX).any():",
        '    if reduction == "mean" and not (targets != IGNORE_INDEX).any():',
        7,
        "only under reduction='mean'",
    ),
    single(
        "lm-loss-log-of-softmax",
        "charlm.py",
        """    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    )""",
        """    flat = targets.reshape(-1)
    real = flat != IGNORE_INDEX
    logp = torch.softmax(logits.reshape(-1, logits.shape[-1]), dim=-1).log()
    nll = -logp[real].gather(1, flat[real, None])[:, 0]
    return nll.mean() if reduction == "mean" else nll.sum()""",
        7,
        "log of a softmax",
    ),
    single(
        "evaluate-counts-in-a-first-pass",
        "charlm.py",
        """            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real
""",
        """            count = sum(int((t != IGNORE_INDEX).sum()) for _, t in batches)
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                if (targets != IGNORE_INDEX).any():
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
""",
        7,
        "more of its batches than one pass",
    ),
    single(
        "evaluate-in-train-mode",
        "charlm.py",
        """    model.eval()
    total, count = 0.0, 0""",
        """    total, count = 0.0, 0""",
        7,
        "model.eval() is not called",
    ),
    single(
        "evaluate-keeps-grad",
        "charlm.py",
        """        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real""",
        """        for inputs, targets in batches:
            inputs, targets = inputs.to(device), targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if real:
                total += lm_loss(model(inputs), targets, reduction="sum").item()
                count += real""",
        7,
        "torch.no_grad()",
    ),
    Mutant(
        "generate-ignores-cache",
        "charlm.py",
        (
            (
                "caches = model.make_caches() if use_cache else None",
                "caches = None",
            ),
            ("feed = new if use_cache else ids", "feed = ids"),
        ),
        7,
        "use_cache is ignored",
    ),
    single(
        "generate-prompt-token-by-token",
        "charlm.py",
        "            feed = ids\n",
        """            if use_cache:
                for i in range(len(ids) - 1):
                    model(ids[None, i : i + 1], caches)
            feed = ids[-1:] if use_cache else ids
""",
        7,
        "token by token",
    ),
    single(
        "decode-skips-ignore-index",
        "charlm.py",
        """        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]""",
        """        ids = [i for i in ids if i != IGNORE_INDEX]
        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]""",
        7,
        "skips IGNORE_INDEX",
    ),
    single(
        "tokenizer-uses-id-0",
        "charlm.py",
        "self.stoi = {c: i + 1 for i, c in enumerate(chars)}",
        "self.stoi = {c: i for i, c in enumerate(chars)}",
        7,
        "id 0, which is PAD_ID",
    ),
    single(
        "lm-batch-left-padding",
        "charlm.py",
        """        inputs[row, : len(s) - 1] = s[:-1]
        targets[row, : len(s) - 1] = s[1:]""",
        """        inputs[row, t - len(s) + 1 :] = s[:-1]
        targets[row, t - len(s) + 1 :] = s[1:]""",
        7,
        "left padding",
    ),
    single(
        "lm-batch-unshifted-targets",
        "charlm.py",
        "targets[row, : len(s) - 1] = s[1:]",
        "targets[row, : len(s) - 1] = s[:-1]",
        7,
        "targets not shifted",
    ),
    single(
        "lm-loss-counts-padding",
        "charlm.py",
        """        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,""",
        """        targets.reshape(-1).clamp(min=PAD_ID),""",
        7,
        "padding scored as a target",
    ),
    single(  # made in the batches: their targets padded with id 0
        "lm-batch-pads-targets-with-id-0",
        "charlm.py",
        "(len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device",
        "(len(sequences), t), PAD_ID, dtype=torch.long, device=device",
        7,
        "padding scored as a target",
    ),
    single(
        "evaluate-mean-of-batch-means",
        "charlm.py",
        """                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real""",
        """                    total += lm_loss(model(inputs), targets).item()
                    count += 1""",
        7,
        "mean of batch means",
    ),
    single(  # made in train's train_loss
        "train-loss-mean-of-batch-means",
        "charlm.py",
        """            total += loss.item() * real
            count += real""",
        """            total += loss.item()
            count += 1""",
        7,
        "mean of batch means",
    ),
    single(
        "evaluate-leaves-eval-mode",
        "charlm.py",
        """    finally:
        model.train(was_training)
    if count == 0:""",
        """    finally:
        pass
    if count == 0:""",
        7,
        "leaves the model in eval mode",
    ),
    single(
        "evaluate-restores-mode-outside-finally",
        "charlm.py",
        "    finally:\n        model.train(was_training)\n    if count == 0:\n",
        "    except Exception:\n        raise\n    model.train(was_training)\n"
        "    if count == 0:\n",
        7,
        "not in a finally",
    ),
    single(
        "hard-coded-128-mask",
        "charlm.py",
        "mask = causal_mask(t, start + t, device=idx.device)  # (T, start + T)",
        "mask = causal_mask(128, device=idx.device)[start : start + t, : start + t]",
        7,
        "hard-coded to 128",
    ),
    single(
        "generate-refeeds-prefix",
        "charlm.py",
        "feed = new if use_cache else ids",
        "feed = ids",
        7,
        "re-feeds the whole sequence",
    ),
    single(
        "cached-forward-wrong-positions",
        "charlm.py",
        "start = 0 if caches is None else caches[0].length",
        "start = 0",
        7,
        "positions restart at 0",
    ),
    single(  # the positions alone: the mask still spans the cached keys
        "cached-positions-from-zero",
        "charlm.py",
        "positions = torch.arange(start, start + t, device=idx.device)",
        "positions = torch.arange(t, device=idx.device)",
        7,
        "positions restart at 0",
    ),
    single(
        "generate-can-emit-pad",
        "charlm.py",
        '                logits[PAD_ID] = float("-inf")\n',
        "",
        7,
        "PAD_ID's logit is not excluded",
    ),
    single(
        "lm-loss-views",
        "charlm.py",
        """        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1),""",
        """        logits.view(-1, logits.shape[-1]),
        targets.view(-1),""",
        7,
        "not contiguous",
    ),
    single(
        "tokenizer-lowercases",
        "charlm.py",
        "        chars = sorted(set(text))\n",
        "        chars = sorted(set(text.lower()))\n",
        7,
        "changed case",
    ),
    single(
        "charlm-embeds-a-view",
        "charlm.py",
        "        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, D)\n",
        """        flat = self.tok_emb(idx.view(-1))  # (B * T, D)
        x = flat.view(*idx.shape, -1) + self.pos_emb(positions)  # (B, T, D)
""",
        7,
        "`.view(...)` on a tensor that is not contiguous",
    ),
    single(
        "make-caches-shares-one",
        "charlm.py",
        """            for block in self.blocks
        ]
""",
        """            for block in self.blocks[:1]
        ] * len(self.blocks)
""",
        7,
        "one KVCache shared by every block",
    ),
    single(
        "train-loss-after-the-epoch",
        "charlm.py",
        '"train_loss": total / count,',
        '"train_loss": evaluate(model, train_batches),',
        7,
        "train_loss measured after the epoch",
    ),
    single(
        "train-loss-not-reset-per-epoch",
        "charlm.py",
        """    for epoch in range(1, epochs + 1):
        model.train()
        total, count = 0.0, 0
""",
        """    total, count = 0.0, 0
    for epoch in range(1, epochs + 1):
        model.train()
""",
        7,
        "not reset at each epoch",
    ),
    single(
        "train-zero-grad-once-per-epoch",
        "charlm.py",
        """        for inputs, targets in train_batches:
            inputs, targets = inputs.to(device), targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if not real:
                continue
            loss = lm_loss(model(inputs), targets)
            optimizer.zero_grad()
""",
        """        optimizer.zero_grad()
        for inputs, targets in train_batches:
            inputs, targets = inputs.to(device), targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if not real:
                continue
            loss = lm_loss(model(inputs), targets)
""",
        7,
        "zero_grad called once per epoch",
    ),
    single(
        "train-one-step-per-epoch",
        "charlm.py",
        """            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * real
            count += real
""",
        """            loss.backward()
            total += loss.item() * real
            count += real
        optimizer.step()
        optimizer.zero_grad()
""",
        7,
        "one optimizer step per epoch",
    ),
    single(
        "train-steps-after-the-loop",
        "charlm.py",
        """            optimizer.step()
            total += loss.item() * real
            count += real
""",
        """            total += loss.item() * real
            count += real
        optimizer.step()
""",
        7,
        "only the last batch's gradients are applied",
    ),
    single(
        "train-default-lr-3e-4",
        "charlm.py",
        "epochs: int = 1, lr: float = 1e-3",
        "epochs: int = 1, lr: float = 3e-4",
        7,
        "the default lr is not 1e-3",
    ),
    single(
        "generate-casts-float-prompt",
        "charlm.py",
        """        or prompt.dtype.is_floating_point
        or prompt.dtype.is_complex
        or prompt.dtype == torch.bool
""",
        "",
        7,
        "never cast it",
    ),
    single(
        "generate-greedy-refuses-zero-temperature",
        "charlm.py",
        "if not greedy and temperature <= 0:",
        "if temperature <= 0:",
        7,
        "greedy ignores it",
    ),
    single(
        "generate-at-least-one-token",
        "charlm.py",
        "            for _ in range(max_new_tokens):\n",
        "            for _ in range(max(max_new_tokens, 1)):\n",
        7,
        "max_new_tokens=0",
    ),
    single(
        "generate-refuses-zero-new-tokens",
        "charlm.py",
        "    if max_new_tokens < 0:\n",
        "    if max_new_tokens < 1:\n",
        7,
        "max_new_tokens=0 is refused",
    ),
    single(
        "generate-top-p-0.9",
        "charlm.py",
        "                    probs = torch.softmax(logits / temperature, dim=-1)\n",
        """                    probs = torch.softmax(logits / temperature, dim=-1)
                    top, order = probs.sort(descending=True)
                    probs[order[top.cumsum(0) - top > 0.9]] = 0  # nucleus sampling
""",
        7,
        "the distribution is truncated",
    ),
    single(
        "generate-default-temperature-0.8",
        "charlm.py",
        "    temperature: float = 1.0,\n",
        "    temperature: float = 0.8,\n",
        7,
        "default temperature is not 1.0",
    ),
    single(
        "charlm-default-four-heads",
        "charlm.py",
        "self, vocab_size, d_model=64, n_heads=2, n_layers=2",
        "self, vocab_size, d_model=64, n_heads=4, n_layers=2",
        7,
        "a default of CharLM.__init__ differs",
    ),
    # Device mistakes: right on the CPU, wrong on any other device (the graded suite's second
    # device shows them on a machine without a GPU) -------------------------------------------
    single(
        "bool-mask-added-as-float-on-cpu",
        "attention.py",
        'scores = scores.masked_fill(mask, float("-inf"))',
        "scores = scores + torch.zeros(mask.shape, dtype=scores.dtype).masked_fill(\n"
        '                mask, float("-inf")\n'
        "            )",
        1,
        "tensor made on the CPU",
    ),
    Mutant(
        "causal-mask-ignores-device",
        "masks.py",
        (
            ("torch.arange(t_q, device=device)", "torch.arange(t_q)"),
            ("torch.arange(t_k, device=device)", "torch.arange(t_k)"),
        ),
        2,
        "mask made on the CPU",
    ),
    single(
        "attention-mask-causal-part-on-cpu",
        "masks.py",
        "causal_mask(t, device=keys_padded.device)",
        "causal_mask(t)",
        2,
        "mask made on the CPU",
    ),
    single(
        "padding-mask-arange-on-cpu",
        "masks.py",
        "torch.arange(t, device=lengths.device)",
        "torch.arange(t)",
        2,
        "mask made on the CPU",
    ),
    single(
        "rope-frequencies-on-cpu",
        "rope.py",
        "d_head // 2, device=positions.device, dtype=dtype",
        "d_head // 2, dtype=dtype",
        4,
        "tensor made on the CPU",
    ),
    single(
        "kv-cache-ignores-device",
        "gqa.py",
        "batch, n_kv_heads, max_len, d_head, device=device, dtype=dtype",
        "batch, n_kv_heads, max_len, d_head, dtype=dtype",
        6,
        "tensor made on the CPU",
    ),
    single(
        "gqa-causal-mask-on-cpu",
        "gqa.py",
        "causal_mask(t, k.shape[2], device=x.device)",
        "causal_mask(t, k.shape[2])",
        6,
        "tensor made on the CPU",
    ),
    single(
        "charlm-causal-mask-on-cpu",
        "charlm.py",
        "mask = causal_mask(t, start + t, device=idx.device)",
        "mask = causal_mask(t, start + t)",
        7,
        "tensor made on the CPU",
    ),
    single(
        "charlm-positions-on-cpu",
        "charlm.py",
        "positions = torch.arange(start, start + t, device=idx.device)",
        "positions = torch.arange(start, start + t)",
        7,
        "tensor made on the CPU",
    ),
    single(
        "make-caches-on-cpu",
        "charlm.py",
        "                device=weight.device,\n",
        "",
        7,
        "tensor made on the CPU",
    ),
    single(
        "lm-batch-on-cpu",
        "charlm.py",
        "    device = sequences[0].device\n",
        '    device = torch.device("cpu")\n',
        7,
        "tensor made on the CPU",
    ),
    single(
        "evaluate-batches-not-moved",
        "charlm.py",
        "                inputs, targets = inputs.to(device), targets.to(device)\n"
        "                real =",
        "                real =",
        7,
        "batches not moved to the model's device",
    ),
    single(
        "generate-prompt-not-moved",
        "charlm.py",
        "ids = prompt.to(device=device, dtype=torch.long)",
        "ids = prompt.to(dtype=torch.long)",
        7,
        "prompt not moved to the model's device",
    ),
)


def apply(mutant: Mutant, solutions: Path, out: Path) -> Path:
    """Write the reference with the mutant's edits to ``out/transformer_hw``; return ``out``."""
    package = out / PACKAGE
    shutil.copytree(solutions, package, dirs_exist_ok=True)
    path = package / mutant.file
    text = path.read_text(encoding="utf-8")
    for old, new in mutant.edits:
        count = text.count(old)
        if count != 1:
            raise MutantError(
                f"{mutant.name}: edit found {count} times in {mutant.file}"
            )
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return out


#: Worded apart from the graded suite's own line (tests/graded/inputs.py), which ships.
VIEW = "`.view(...)` on a tensor that is not contiguous: use `.reshape(...)` instead"
#: Each diagnosis phrase in the words feedback names the mistake with (``autograder.grading.diagnosis``):
#: the mutants that share a phrase are one mistake, told one way.
WORDING = {
    "then renormalized": (
        "the mask applied after the softmax, then renormalized: the prohibited keys' "
        "weights enter the softmax's sum first, so the permitted ones come out wrong"
    ),
    "mask applied after the softmax": (
        "mask applied after the softmax: the weights of prohibited keys are zeroed but the "
        "rows no longer sum to 1; mask the scores before the softmax"
    ),
    "not scaled by 1/sqrt(d_k)": "scores not scaled by 1/sqrt(d_k)",
    "scaled by 1/d_k instead": "scores scaled by 1/d_k instead of 1/sqrt(d_k)",
    "1/sqrt(d_v)": "scores scaled by 1/sqrt(d_v) instead of 1/sqrt(d_k)",
    "softmax over the queries axis": (
        "softmax over the queries axis (dim=-2) instead of the keys (dim=-1)"
    ),
    "no max subtraction": (
        "no max subtraction in the softmax: exp overflows on large scores"
    ),
    "bool mask inverted": (
        "bool mask inverted (True treated as permitted; True means prohibited)"
    ),
    "NaN instead of raising": (
        "a fully masked row gives NaN instead of raising ValueError"
    ),
    "in-place operation on an argument": (
        "an in-place operation on an argument (`x -= ...`, `x[...] = ...`, `x.add_(...)`): "
        "work on a new tensor"
    ),
    "cuts the computation off": (
        "a .detach() or a tensor built anew cuts the computation off from the inputs, so "
        "no gradient flows back"
    ),
    "hides the diagonal": (
        "causal mask also hides the diagonal (a query must see its own key)"
    ),
    "ignores the t_k > t_q offset": (
        "causal mask ignores the t_k > t_q offset (queries are the LAST t_q positions)"
    ),
    "padding mask off by one": (
        "padding mask off by one (the first padded position is lengths[b])"
    ),
    "gives a float": "d_head = d_model / n_heads gives a float; use d_model // n_heads",
    "split_heads reshapes straight": (
        "split_heads reshapes straight to (B, h, T, d_h) without the transpose"
    ),
    "merge_heads reshapes": (
        "merge_heads reshapes (B, h, T, d_h) to (B, T, D) without the transpose"
    ),
    "1/sqrt(d_model)": "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
    "keys and values from x": (
        "cross-attention takes keys and values from x instead of context"
    ),
    "mask=None with a cache treated as a causal mask": (
        "mask=None with a cache treated as a causal mask; None means no masking"
    ),
    "a float mask turned into a bool one": (
        "a float mask turned into a bool one (nonzero = prohibited); a float mask is "
        "added to the scores"
    ),
    "half-split": (
        "half-split (rotate_half) pairing of i with i + d/2 instead of the interleaved "
        "pairs (x[2i], x[2i+1])"
    ),
    "wrong direction": "rotation in the wrong direction (the sign of sin is flipped)",
    "base ** (-i / d_head)": (
        "frequencies base ** (-i / d_head) instead of base ** (-2 i / d_head)"
    ),
    "taken as a fixed float32": (
        "dtype=None taken as a fixed float32; it means torch.get_default_dtype()"
    ),
    "positions ignored": "positions ignored (arange(T) used instead)",
    "unbiased variance": (
        "LayerNorm with the unbiased variance (divide by d - 1); it must divide by d"
    ),
    "eps added outside the square root": (
        "eps added outside the square root: use sqrt(var + eps)"
    ),
    "E[x^2] - E[x]^2": (
        "the variance taken as E[x^2] - E[x]^2, which loses the digits of rows far from "
        "zero; take the mean of (x - mean)^2"
    ),
    "RMSNorm subtracts the mean": (
        "RMSNorm subtracts the mean; it must not (that is LayerNorm)"
    ),
    "residual adds the normalized tensor": (
        "the residual adds the normalized tensor (h = ln1(x) + attn(ln1(x))); add the "
        "incoming x"
    ),
    "post-norm order": (
        "the norms come after the additions (post-norm order) in the pre-norm block"
    ),
    "the gradient is not": (
        "the values are right but the gradient is not: an intermediate (a statistic) is "
        ".detach()ed or computed outside autograd"
    ),
    "make it an nn.Parameter": (
        "a parameter kept as a buffer or a plain tensor never trains; make it an "
        "nn.Parameter"
    ),
    "mask=None treated as a causal mask": (
        "mask=None treated as a causal mask; None means no masking"
    ),
    "the mask is not passed on to attn when a cache is given": (
        "the mask is not passed on to attn when a cache is given"
    ),
    "only k_new is checked": (
        "only k_new is checked; v_new needs the same dtype, device and shape checks"
    ),
    "tiled": (
        "key/value heads tiled (repeat) instead of each repeated for its group "
        "(repeat_interleave)"
    ),
    "factor 2 is missing": "the factor 2 is missing (keys AND values are cached)",
    "counts bytes": "counts bytes (4 per float32 element), not elements",
    "cache receives n_heads": (
        "the cache receives n_heads (repeated) key/value heads; append the n_kv_heads "
        "heads before repeating them"
    ),
    "overflowing append wrote": (
        "the overflowing append wrote the positions that fit; an append that overflows "
        "must write nothing"
    ),
    "not against each other": (
        "k_new and v_new are each checked, but not against each other"
    ),
    "RoPE rotates the values too": (
        "RoPE rotates the values too; it rotates queries and keys only"
    ),
    "append does not advance length": "append does not advance length",
    "not offset by the cache length": (
        "RoPE positions not offset by the cache length: with a cache, q and k sit at "
        "cache.length + arange(T)"
    ),
    "rope_base ignored": "rope_base ignored: RoPE used the default base 10000",
    "length kept as a tensor": (
        "length kept as a tensor: keep an int (add k_new.shape[2] to it)"
    ),
    "follows torch.get_default_dtype()": (
        "the cache's dtype follows torch.get_default_dtype() instead of the dtype it is "
        "given"
    ),
    "refuses to fill the cache up to max_len exactly": (
        "append refuses to fill the cache up to max_len exactly (it overflows only when "
        "length + t > max_len)"
    ),
    "only under reduction='mean'": (
        "the check for no real target made only under reduction='mean'"
    ),
    "log of a softmax": (
        "the log of a softmax: the softmax underflows to 0 on logits far apart, and its "
        "log is -inf"
    ),
    "more of its batches than one pass": (
        "evaluate needs more of its batches than one pass (a second loop, len() or "
        "indexing)"
    ),
    "model.eval() is not called": "model.eval() is not called before the loop",
    "torch.no_grad()": ("evaluate builds a graph: run its loop under torch.no_grad()"),
    "use_cache is ignored": (
        "use_cache is ignored (or defaults to False): with it, make the caches and feed "
        "only the newest token"
    ),
    "token by token": (
        "the prompt fed to the model token by token instead of in one forward pass"
    ),
    "skips IGNORE_INDEX": (
        "decode skips IGNORE_INDEX as well as PAD_ID; only PAD_ID is skipped"
    ),
    "id 0, which is PAD_ID": (
        "a character got id 0, which is PAD_ID: ids must start at 1"
    ),
    "left padding": "left padding: pad at the END of each row (right padding)",
    "targets not shifted": "targets not shifted: targets are s[1:], inputs s[:-1]",
    "padding scored as a target": (
        "padding scored as a target of class 0 instead of being ignored"
    ),
    "mean of batch means": (
        "mean of batch means (the notebook's epoch average) instead of total loss / "
        "total tokens"
    ),
    "leaves the model in eval mode": (
        "evaluate leaves the model in eval mode (restore the previous mode)"
    ),
    "not in a finally": (
        "the mode is restored after the loop, not in a finally: block"
    ),
    "hard-coded to 128": (
        "a size hard-coded to 128 (mask, position table, cache) instead of max_len"
    ),
    "re-feeds the whole sequence": (
        "cached generation re-feeds the whole sequence, not only the newest token"
    ),
    "positions restart at 0": (
        "positions restart at 0 in each chunk instead of continuing from the cache"
    ),
    "PAD_ID's logit is not excluded": (
        "PAD_ID's logit is not excluded before sampling or argmax (set it to -inf)"
    ),
    "not contiguous": VIEW,
    "changed case": ("the vocabulary is not the text's own characters (changed case?)"),
    "`.view(...)` on a tensor that is not contiguous": VIEW,
    "one KVCache shared by every block": (
        "one KVCache shared by every block ([KVCache(...)] * n_layers); each block "
        "needs its own"
    ),
    "train_loss measured after the epoch": (
        "train_loss measured after the epoch's updates instead of averaged over the "
        "epoch's batches as they train"
    ),
    "not reset at each epoch": ("the running training loss is not reset at each epoch"),
    "zero_grad called once per epoch": (
        "zero_grad called once per epoch, not before each batch's backward (the "
        "gradients of the epoch's batches add up)"
    ),
    "one optimizer step per epoch": (
        "one optimizer step per epoch on the gradients of all its batches, not one step "
        "per batch"
    ),
    "only the last batch's gradients are applied": (
        "optimizer.step() after the batch loop: only the last batch's gradients are "
        "applied"
    ),
    "the default lr is not 1e-3": "the default lr is not 1e-3",
    "never cast it": (
        "a prompt that is not a 1-D tensor of an integer dtype raises ValueError; never "
        "cast it"
    ),
    "greedy ignores it": (
        "temperature <= 0 is only an error when sampling (greedy ignores it)"
    ),
    "max_new_tokens=0": (
        "max_new_tokens=0 still generated a token: the prompt alone comes back"
    ),
    "max_new_tokens=0 is refused": (
        "max_new_tokens=0 is refused: the prompt followed by 0 new ids is the prompt"
    ),
    "the distribution is truncated": (
        "the distribution is truncated (top-k or top-p) before sampling; sample from all "
        "of it"
    ),
    "default temperature is not 1.0": "the default temperature is not 1.0",
    "a default of CharLM.__init__ differs": (
        "a default of CharLM.__init__ differs from SPEC.md's"
    ),
    "tensor made on the CPU": (
        "a tensor made on the CPU: torch.arange/zeros/ones/full/tensor(...) without "
        "device= stays there; pass the input's device"
    ),
    "mask made on the CPU": (
        "a mask made on the CPU: torch.arange(...) without device= (causal_mask's device, "
        "or the lengths' device)"
    ),
    "batches not moved to the model's device": (
        "evaluate's batches not moved to the model's device"
    ),
    "prompt not moved to the model's device": (
        "generate's prompt not moved to the model's device"
    ),
}
