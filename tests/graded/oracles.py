"""The answer key: float64 oracles for every graded quantity, and the known mistakes' outputs.

Every expected value of the graded suite comes from here: torch's own layers where torch has
one (``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``, ``F.layer_norm``,
``F.cross_entropy``), the formula of SPEC.md otherwise, always in float64. The ``*_suspects``
functions give what each known mistake would produce (by its diagnosis), so a failure can name
it. Larger layers compose the smaller ones.

This module never ships in the student handout: there the public tests read the values it
produced at release time (``tests.graded.answers``), and the release's leak check refuses any
function that computes a graded quantity.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from tests.graded.mistakes import (
    AFTER,
    BATCH_MEANS,
    CROSS_FROM_X,
    FLOAT_AS_BOOL,
    INVERTED,
    LAST_BATCH_STEPS,
    MERGE_NO_T,
    NO_SCALE,
    PAD_AS_CLASS,
    PAD_COUNTED,
    RESIDUAL,
    RESIDUALS,
    SCALE_DK,
    SCALE_DV,
    SPLIT_NO_T,
    WRONG_AXIS,
    ZERO_GRAD_PER_EPOCH,
)

INF = math.inf
F64 = torch.float64
PROJ = ("q_proj", "k_proj", "v_proj", "out_proj")  # SPEC.md's parameter names
PAD, IGNORE = 0, -100  # SPEC.md's PAD_ID and IGNORE_INDEX
EPS = 1e-5  # LayerNorm's default eps
CORPUS = (Path(__file__).resolve().parents[2] / "data" / "names.txt").read_text()
CHARS = sorted(set(CORPUS))  # "\n" and a-z


# part1 attention ------------------------------------------------------------
def additive(mask, like: torch.Tensor) -> torch.Tensor:
    """A mask as the float tensor added to the scores: 0 permitted, -inf prohibited."""
    if mask is None:
        return torch.zeros_like(like)
    if mask.dtype == torch.bool:
        return torch.zeros(
            mask.shape, dtype=like.dtype, device=like.device
        ).masked_fill(mask, -INF)
    return mask.to(like)  # its dtype and device


def softmax(x, dim=-1):
    """torch's softmax in float64."""
    return torch.softmax(x.double(), dim)


def attend(q, k, v, mask=None, scale=None, axis=-1, after=False):
    """Attention by the formula in float64; the knobs reproduce known mistakes."""
    q, k, v = q.double(), k.double(), v.double()
    if scale is None:
        scale = 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale  # (..., Tq, Tk)
    bias = additive(mask, scores)
    if after:  # softmax over all keys, then zero the prohibited ones
        weights = torch.softmax(scores, axis) * (bias == 0)
    else:
        weights = torch.softmax(scores + bias, axis)
    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)


def sdpa_oracle(q, k, v, mask=None):
    """torch's attention output (float64) and the weights by the formula."""
    q, k, v = q.double(), k.double(), v.double()
    if mask is not None and mask.dtype == torch.bool:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=~mask)
    else:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else mask.double()
        )
    return out, attend(q, k, v, mask)[1]


def sdpa_suspects(q, k, v, mask=None):
    """(out, weights) of each known mistake, keyed by its diagnosis."""
    d_k, d_v = q.shape[-1], v.shape[-1]
    suspects = {
        NO_SCALE: attend(q, k, v, mask, scale=1.0),
        SCALE_DK: attend(q, k, v, mask, scale=1 / d_k),
        WRONG_AXIS: attend(q, k, v, mask, axis=-2),
    }
    if d_v != d_k:
        suspects[SCALE_DV] = attend(q, k, v, mask, scale=1 / math.sqrt(d_v))
    if mask is not None:
        suspects[AFTER] = attend(q, k, v, mask, after=True)
        if mask.dtype == torch.bool:
            suspects[INVERTED] = attend(q, k, v, ~mask)
    return suspects


def gradients(function, inputs: dict, upstream, parameters=None) -> tuple[dict, dict]:
    """The float64 gradients of ``function(*inputs, *parameters)`` (its first result when a
    tuple) times ``upstream``, keyed as ``Submission.gradients`` keys them: by the inputs'
    labels (``"args[0]"``) and by the parameters' names."""
    parameters = parameters or {}
    leaves = {  # copies: the caller's tensors are left as they were
        k: v.detach().to(F64, copy=True).requires_grad_()
        for k, v in {**inputs, **parameters}.items()
    }
    out = function(*leaves.values())
    out = out[0] if isinstance(out, tuple) else out
    grads = torch.autograd.grad(out, list(leaves.values()), upstream.to(out))
    grads = dict(zip(leaves, grads))
    return {k: grads[k] for k in inputs}, {k: grads[k] for k in parameters}


# part2 masks ------------------------------------------------------------
def future(t_q: int, t_k: int, shift: int = 0, device="cpu") -> torch.Tensor:
    """True where key j lies after query i's absolute position ``t_k - t_q + i`` (+ shift)."""
    query = torch.arange(t_q, device=device)[:, None] + (t_k - t_q) + shift
    return torch.arange(t_k, device=device)[None, :] > query  # (t_q, t_k)


def causal_suspects(t_q: int, t_k: int, device="cpu") -> dict:
    """The masks of known causal-mask mistakes."""
    diagonal = "causal mask also hides the diagonal (a query must see its own key)"
    offset = (
        "causal mask ignores the t_k > t_q offset (queries are the LAST t_q positions)"
    )
    suspects = {offset: future(t_q, t_k, shift=t_q - t_k, device=device)}
    hides = future(t_q, t_k, shift=-1, device=device)
    if t_k == t_q:
        suspects = {diagonal: hides}
    elif t_k == t_q + 1:  # the two mistakes give the same mask here
        suspects = {f"{offset}, or {diagonal}": hides}
    else:
        suspects[diagonal] = hides
    suspects[
        "causal mask inverted (True must mean prohibited, i.e. the future)"
    ] = ~future(t_q, t_k, device=device)
    return suspects


def padded(lengths: list[int], t: int, device="cpu") -> torch.Tensor:
    """True at positions >= lengths[b] (right padding): (B, t)."""
    return (
        torch.arange(t, device=device)[None, :]
        >= torch.tensor(lengths, device=device)[:, None]
    )


def padding_suspects(lengths: list[int], t: int, device="cpu") -> dict:
    pos = torch.arange(t, device=device)[None, :]
    n = torch.tensor(lengths, device=device)[:, None]
    return {
        "padding mask off by one (True from position lengths[b] + 1 on)": pos > n,
        "padding mask off by one (True from position lengths[b] - 1 on)": pos >= n - 1,
        "left padding instead of right padding": pos < t - n,
        "padding mask inverted (True must mean a padded position)": pos < n,
    }


def attention_mask_oracle(lengths: list[int], t: int, device="cpu") -> torch.Tensor:
    """The causal attention mask: key padding OR the future, (B, 1, t, t)."""
    return padded(lengths, t, device=device)[:, None, None, :] | future(
        t, t, device=device
    )


def attention_mask_suspects(lengths: list[int], t: int, causal: bool, device) -> dict:
    """(B, 1, t, t) masks of known mistakes, including those of the two masks it combines."""
    keys = padded(lengths, t, device=device)[:, None, None, :]  # (B, 1, 1, t)
    future_keys = future(t, t, device=device) if causal else False
    suspects = {
        "padding applied to the queries instead of the keys": keys.transpose(-2, -1)
        | future_keys,
    }
    for mistake, pad in padding_suspects(lengths, t, device=device).items():
        suspects[mistake] = pad[:, None, None, :] | future_keys
    if causal:
        suspects["padding and causal masks combined with AND instead of OR"] = (
            keys & future_keys
        )
        suspects["causal mask missing"] = keys
        suspects["causal mask also hides the diagonal"] = keys | future(
            t, t, shift=-1, device=device
        )
    else:
        suspects["causal mask applied although causal=False"] = keys | future(
            t, t, device=device
        )
    b = len(lengths)
    return {name: mask.expand(b, 1, t, t) for name, mask in suspects.items()}


# part3 heads ------------------------------------------------------------
def heads_of(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, h, T, d_h): head j holds features j*d_h .. (j+1)*d_h - 1."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).permute(0, 2, 1, 3)


def heads_no_transpose(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.reshape(b, n_heads, t, d // n_heads)


def width_of(x: torch.Tensor) -> torch.Tensor:
    """(B, h, T, d_h) -> (B, T, h*d_h)."""
    b, h, t, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, t, h * d)


def width_no_transpose(x: torch.Tensor) -> torch.Tensor:
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)


def torch_mha(x, sd, n_heads, context=None, mask=None):
    """torch.nn.MultiheadAttention's output (float64) with the weights ``sd``.

    It calls what the module runs, ``F.multi_head_attention_forward``, on the weights
    themselves rather than on a module that holds copies, so the output is differentiable in
    them: ``oracle_training`` trains the language model built on it.
    """
    d_model = sd["q_proj.weight"].shape[0]
    in_proj = [sd[f"{p}.weight"].double() for p in PROJ[:3]]
    bias = "q_proj.bias" in sd
    in_bias = torch.cat([sd[f"{p}.bias"].double() for p in PROJ[:3]]) if bias else None
    out_bias = sd["out_proj.bias"].double() if bias else None
    # Sequence first, as the module hands it over; self-attention is one tensor three times.
    query = x.double().transpose(0, 1)  # (Tq, B, D)
    source = query if context is None else context.double().transpose(0, 1)
    b, t_q, t_k = x.shape[0], x.shape[1], source.shape[0]
    attn_mask = None
    if mask is not None:  # (B*h, Tq, Tk), as nn.MultiheadAttention wants it
        attn_mask = mask.expand(b, n_heads, t_q, t_k).reshape(b * n_heads, t_q, t_k)
    out, _ = F.multi_head_attention_forward(
        query,
        source,
        source,
        d_model,
        n_heads,
        torch.cat(in_proj),
        in_bias,
        None,
        None,
        False,
        0.0,
        sd["out_proj.weight"].double(),
        out_bias,
        training=False,
        need_weights=False,
        attn_mask=attn_mask,
    )
    return out.transpose(0, 1)  # (B, Tq, D)


def mha_formula(
    x, sd, n_heads, context=None, mask=None, scale=None, split=heads_of, merge=width_of
):
    """Multi-head attention by the formula (float64); the knobs reproduce known mistakes."""

    def proj(t, p):
        return F.linear(t.double(), sd[f"{p}.weight"], sd.get(f"{p}.bias"))

    source = x if context is None else context
    q = split(proj(x, "q_proj"), n_heads)  # (B, h, Tq, d_h)
    k = split(proj(source, "k_proj"), n_heads)  # (B, h, Tk, d_h)
    v = split(proj(source, "v_proj"), n_heads)
    d_head = q.shape[-1]
    scores = q @ k.transpose(-2, -1) * (scale or 1 / math.sqrt(d_head))
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, -math.inf)
        else:
            scores = scores + mask
    return proj(merge(torch.softmax(scores, -1) @ v), "out_proj")  # (B, Tq, D)


def mha_suspects(x, sd, n_heads, context=None, mask=None) -> dict:
    """What each known mistake would output, by its diagnosis (computed on demand)."""
    d_model = x.shape[-1]
    d_head = d_model // n_heads

    def variant(**knobs):
        return lambda: mha_formula(x, sd, n_heads, context, mask, **knobs)

    suspects = {
        "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head)": variant(
            scale=1 / math.sqrt(d_model)
        ),
        "scores scaled by 1/d_model instead of 1/sqrt(d_head)": variant(
            scale=1 / d_model
        ),
        "scores not scaled by 1/sqrt(d_head)": variant(scale=1.0),
        "scores scaled by 1/d_head instead of 1/sqrt(d_head)": variant(
            scale=1 / d_head
        ),
        SPLIT_NO_T: variant(split=heads_no_transpose),
        MERGE_NO_T: variant(merge=width_no_transpose),
    }
    if context is not None:
        suspects[CROSS_FROM_X] = lambda: torch_mha(x, sd, n_heads, None, None)
    if mask is not None and mask.is_floating_point():
        suspects[FLOAT_AS_BOOL] = lambda: torch_mha(x, sd, n_heads, context, mask != 0)
    return suspects


# part4 rope ------------------------------------------------------------
def inv_freq(d_head, base=10000.0, exponent=2.0, device="cpu"):
    """``base ** (-exponent * i / d_head)`` for each pair ``i``, in float64."""
    i = torch.arange(d_head // 2, dtype=torch.float64, device=device)
    return base ** (-exponent * i / d_head)  # (d_head/2,)


def angles_oracle(positions, d_head, base=10000.0, exponent=2.0):
    """``positions[..., None] * base ** (-2 i / d_head)``: (..., d_head/2), float64."""
    freq = inv_freq(d_head, base, exponent, positions.device)
    return positions.double()[..., None] * freq


def rotate_pairs(x, angles, layout="interleaved"):
    """Rotate pairs of ``x (..., d)`` by ``angles (..., d/2)`` (broadcast), in float64."""
    x = x.double()
    half = x.shape[-1] // 2
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]  # (..., d/2) each
    else:  # "rotate_half": pairs (i, i + d/2)
        a, b = x[..., :half], x[..., half:]
    cos, sin = angles.cos(), angles.sin()
    first, second = a * cos - b * sin, a * sin + b * cos  # (..., d/2) each
    if layout == "interleaved":
        return torch.stack((first, second), dim=-1).flatten(-2)  # (..., d)
    return torch.cat((first, second), dim=-1)


def rope_oracle(x, positions, base=10000.0):
    """The interleaved rotation of SPEC.md part 4, in float64; positions broadcast to x[..., 0]."""
    return rotate_pairs(x, angles_oracle(positions, x.shape[-1], base))


def relative_rope_scores(q, k, relative):
    """``<q_i, R(relative[i, j]) k_j>``: the scores of rotated queries and keys, (B, T, T)."""
    return (q[:, :, None, :] * rope_oracle(k[:, None, :, :], relative)).sum(-1)


def rope_suspects(x, positions, base=10000.0):
    """What the known RoPE mistakes would output for ``apply_rope(x, positions, base)``."""
    d, t = x.shape[-1], x.shape[-2]
    arange = torch.arange(t, device=x.device)
    return {
        "half-split (rotate_half) pairing of i with i + d/2 instead of the interleaved "
        "pairs (x[2i], x[2i+1])": lambda: rotate_pairs(
            x, angles_oracle(positions, d, base), "rotate_half"
        ),
        "rotation in the wrong direction (the sign of sin is flipped)": lambda: (
            rotate_pairs(x, -angles_oracle(positions, d, base))
        ),
        "frequencies base ** (-i / d_head) instead of base ** (-2 i / d_head)": lambda: (
            rotate_pairs(x, angles_oracle(positions, d, base, exponent=1.0))
        ),
        "positions ignored (arange(T) used instead)": lambda: rope_oracle(
            x, arange, base
        ),
    }


# part5 norm_block ------------------------------------------------------------
def layer_norm(x, sd, name, eps=1e-5):
    return F.layer_norm(
        x, x.shape[-1:], sd[f"{name}.weight"], sd[f"{name}.bias"], eps=eps
    )


def layer_norm_unbiased(x, sd, name, eps=1e-5):
    """The mistake: variance divided by d - 1."""
    var = x.var(dim=-1, keepdim=True, unbiased=True)
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(var + eps) * sd[
        f"{name}.weight"
    ] + sd[f"{name}.bias"]


def layer_norm_eps_outside(x, sd, name, eps=1e-5):
    """The mistake: ``sqrt(var) + eps``."""
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - x.mean(-1, keepdim=True)) / (torch.sqrt(var) + eps) * sd[
        f"{name}.weight"
    ] + sd[f"{name}.bias"]


def layer_norm_by_moments(x, sd, name, eps=1e-5):
    """The mistake: the variance as ``E[x^2] - E[x]^2``, in ``x``'s own dtype. Right in exact
    arithmetic, but far from zero the two terms cancel and take the float32 digits with them."""
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean**2
    weight, bias = (sd[f"{name}.{p}"].to(x.dtype) for p in ("weight", "bias"))
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def layer_norm_suspects(x, sd, eps, name="ln"):
    return {
        "LayerNorm with the unbiased variance (divide by d - 1); it must divide by d": (
            lambda: layer_norm_unbiased(x, sd, name, eps)
        ),
        "eps added outside the square root: use sqrt(var + eps)": (
            lambda: layer_norm_eps_outside(x, sd, name, eps)
        ),
    }


def rms_norm(x, weight, eps):
    """torch's RMSNorm over the last axis (float64 in, float64 out)."""
    return F.rms_norm(x, x.shape[-1:], weight, eps=eps)


def rms_suspects(x, weight, eps):
    ms = (x * x).mean(-1, keepdim=True)
    centered = x - x.mean(-1, keepdim=True)
    return {
        "RMSNorm subtracts the mean; it must not (that is LayerNorm)": lambda: (
            F.rms_norm(centered, x.shape[-1:], weight, eps=eps)
        ),
        "eps added outside the square root: use sqrt(mean(x^2) + eps)": lambda: (
            x / (torch.sqrt(ms) + eps) * weight
        ),
    }


def feed_forward(x, sd, prefix="ffn."):
    hidden = F.relu(F.linear(x, sd[prefix + "fc1.weight"], sd[prefix + "fc1.bias"]))
    return F.linear(hidden, sd[prefix + "fc2.weight"], sd[prefix + "fc2.bias"])


def block_attention(x, sd, mask, prefix="attn.", n_heads=2):
    """The block's multi-head self-attention: ``torch_mha`` with the parameters under
    ``prefix``; ``mask`` True = prohibited."""
    own = {k[len(prefix) :]: v for k, v in sd.items() if k.startswith(prefix)}
    return torch_mha(x, own, n_heads, mask=mask)


def pre_norm(x, sd, mask, prefix="", n_heads=2):
    """The pre-norm block of SPEC.md part 5 (its parameters under ``prefix``)."""
    h = x + block_attention(
        layer_norm(x, sd, prefix + "ln1"), sd, mask, prefix + "attn.", n_heads
    )
    return h + feed_forward(layer_norm(h, sd, prefix + "ln2"), sd, prefix + "ffn.")


def post_norm(x, sd, mask):
    h = layer_norm(x + block_attention(x, sd, mask), sd, "ln1")
    return layer_norm(h + feed_forward(h, sd), sd, "ln2")


def pre_norm_residual_of_normalized(x, sd, mask):
    """The course notebook's mistake: the residual adds ``ln1(x)``, not ``x``."""
    n = layer_norm(x, sd, "ln1")
    h = n + block_attention(n, sd, mask)
    return h + feed_forward(layer_norm(h, sd, "ln2"), sd)


def pre_norm_residuals_of_normalized(x, sd, mask):
    """The same mistake in both sub-layers: ``ln(x) + f(ln(x))``."""
    n = layer_norm(x, sd, "ln1")
    h = n + block_attention(n, sd, mask)
    n2 = layer_norm(h, sd, "ln2")
    return n2 + feed_forward(n2, sd)


def ffn_residual(x, sd):
    """A pre-norm block whose attention branch is zeroed: ``x + ffn(ln2(x))``."""
    return x + feed_forward(layer_norm(x, sd, "ln2"), sd)


def block_suspects(x, sd, mask, form):
    if form == "pre":
        return {
            "pre- and post-norm swapped (this is the post-norm order)": lambda: (
                post_norm(x, sd, mask)
            ),
            RESIDUAL: lambda: pre_norm_residual_of_normalized(x, sd, mask),
            RESIDUALS: lambda: pre_norm_residuals_of_normalized(x, sd, mask),
        }
    return {
        "pre- and post-norm swapped (this is the pre-norm order)": lambda: pre_norm(
            x, sd, mask
        ),
    }


def causal_square(t, device):
    """(T, T) bool, True = key in the future (prohibited)."""
    return torch.ones(t, t, dtype=torch.bool, device=device).triu(1)


# part6 gqa ------------------------------------------------------------
def project(x, sd, n_heads, n_kv, positions, base=10000.0):
    """Rotated q (B, h, T, d_h), rotated k and plain v (B, h_kv, T, d_h); RoPE of ``base``."""
    batch, t, _ = x.shape
    d_h = sd["q_proj.weight"].shape[0] // n_heads

    def heads(name, n):
        return F.linear(x, sd[name]).view(batch, t, n, d_h).transpose(1, 2)

    q, k = heads("q_proj.weight", n_heads), heads("k_proj.weight", n_kv)
    return (
        rope_oracle(q, positions, base),
        rope_oracle(k, positions, base),
        heads("v_proj.weight", n_kv),
    )


def gqa_oracle(
    x, sd, n_heads=4, n_kv=2, positions=None, tile=False, use_rope=True, base=10000.0
):
    """Causal GQA in float64; ``positions`` (T,) for RoPE of ``base``, default arange(T).

    ``tile=True`` gives the tiled-kv-heads mistake, ``use_rope=False`` no rotation at all.
    """
    x = x.double()
    batch, t, _ = x.shape
    if positions is None:
        positions = torch.arange(t, device=x.device)
    if not use_rope:
        positions = torch.zeros_like(positions)
    q, k, v = project(x, sd, n_heads, n_kv, positions, base)
    if tile:  # [k0, k1, k0, k1] instead of [k0, k0, k1, k1]
        reps = (1, n_heads // n_kv, 1, 1)
        out = F.scaled_dot_product_attention(
            q, k.repeat(reps), v.repeat(reps), is_causal=True
        )
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    out = out.transpose(1, 2).reshape(batch, t, -1)  # (B, T, h*d_h)
    return F.linear(out, sd["out_proj.weight"])


def gqa_suspects(x, sd, n_heads=4, n_kv=2):
    return {
        "kv heads tiled ([k0, k1, k0, k1]) instead of interleaved ([k0, k0, k1, k1]): "
        "query head j must use kv head j // n_rep": lambda: gqa_oracle(
            x, sd, n_heads, n_kv, tile=True
        ),
        "RoPE not applied to q and k": lambda: gqa_oracle(
            x, sd, n_heads, n_kv, use_rope=False
        ),
    }


def repeat_kv(x, n_rep, tiled=False):
    """Each kv head of ``x (B, h_kv, T, d)`` repeated ``n_rep`` times in place: query head j
    uses kv head j // n_rep. ``tiled=True``: the mistake [k0, k1, k0, k1]."""
    if tiled:
        return x.repeat(1, n_rep, 1, 1)
    return x.repeat_interleave(n_rep, dim=1)


def restarting_positions(chunks, device):
    """The mistake of cached decoding: every chunk's positions restart at 0."""
    return torch.cat([torch.arange(c, device=device) for c in chunks])


def kv_cache_numels(cases) -> torch.Tensor:
    """``kv_cache_numel`` of each ``(B, L, T, h_kv, d_h)``: keys and values, 2 * the product."""
    return 2 * torch.tensor([math.prod(case) for case in cases])


def kv_cache_numel_suspects(cases) -> dict[str, torch.Tensor]:
    product = torch.tensor([math.prod(case) for case in cases])
    return {
        "the factor 2 is missing (keys AND values are cached)": product,
        "counts bytes (4 per float32 element), not elements": 8 * product,
        "counts bytes (2 per 16-bit element), not elements": 4 * product,
        "counts bytes (8 per float64 element), not elements": 16 * product,
    }


# part7 charlm ------------------------------------------------------------
def oracle_logits(state, idx, n_heads, positions=None, allowed=None, final_norm=True):
    """float64 logits ``(B, T, V)`` of SPEC.md's CharLM: causal, pre-norm blocks.

    ``positions (T,)`` picks the position embeddings (default ``arange(T)``);
    ``allowed (T, T)`` is the attention pattern, True = take part (default causal).
    """
    s = {k: v.double() for k, v in state.items()}
    t = idx.shape[1]
    dev = idx.device
    positions = torch.arange(t) if positions is None else positions
    if allowed is None:
        allowed = torch.ones(t, t, dtype=torch.bool).tril()
    allowed = allowed.to(dev)
    x = F.embedding(idx, s["tok_emb.weight"])  # (B, T, D)
    x = x + F.embedding(positions.to(dev), s["pos_emb.weight"])
    n_layers = len({k.split(".")[1] for k in s if k.startswith("blocks.")})
    for i in range(n_layers):
        x = pre_norm(x, s, ~allowed, f"blocks.{i}.", n_heads)
    if final_norm:
        x = layer_norm(x, s, "ln_f", eps=EPS)
    return F.linear(x, s["head.weight"], s["head.bias"])  # (B, T, V)


def oracle_greedy(state, prompt, n_new, n_heads, feed="correct"):
    """Greedy ids (prompt first) of the oracle; ``feed`` reproduces a cache bug:
    ``"restart"`` feeds each new token at position 0, ``"refeed"`` appends the whole
    sequence to the caches at every step, ``"mask-without-offset"`` lets each new token see
    the first key only (a causal mask that puts a lone query at position 0)."""
    ids, fed, p = prompt.tolist(), [], len(prompt)
    for _ in range(n_new):
        allowed = None
        if feed in ("correct", "mask-without-offset"):
            tokens, pos = ids, list(range(len(ids)))
        elif feed == "restart":
            tokens, pos = ids, list(range(p)) + [0] * (len(ids) - p)
        else:
            fed = fed + ids
            tokens, pos = fed, list(range(len(fed)))
        if feed == "mask-without-offset":
            allowed = torch.ones(len(ids), len(ids), dtype=torch.bool).tril()
            allowed[p:] = False
            allowed[p:, 0] = True
        idx = torch.tensor([tokens], device=prompt.device)
        logits = oracle_logits(state, idx, n_heads, torch.tensor(pos), allowed)[0, -1]
        logits[PAD] = -math.inf
        ids.append(int(logits.argmax()))
    return torch.tensor(ids, device=prompt.device)


def encode(text: str) -> list[int]:
    """The oracle tokenizer of the corpus: sorted characters get ids 1, 2, ..."""
    return [CHARS.index(c) + 1 for c in text]


def memoized(oracle):
    """Mark an oracle that costs much and gets the same arguments for every submission (a
    training run from fixed weights): ``tests.graded.answers`` computes it once per process
    and hands each caller a copy."""
    oracle.memoized = True
    return oracle


def from_student_outputs(oracle):
    """Mark an oracle whose arguments are the student's own outputs: nothing can be stored for
    it at release, so the handout's tests that need it run only when graded."""
    oracle.from_student_outputs = True
    return oracle


@from_student_outputs
def losses_of(batches) -> list[dict[str, float]]:
    """Per ``(logits (B, T, V), targets (B, T))`` batch, from F.cross_entropy: the summed
    loss ``sum``, the real targets ``n``, all positions ``t``, and ``sum0``, the sum with
    padding scored as class 0."""
    out = []
    for logits, targets in batches:
        flat = logits.double().reshape(-1, logits.shape[-1])
        targets = targets.to(logits.device).reshape(-1)
        total = F.cross_entropy(flat, targets, ignore_index=IGNORE, reduction="sum")
        as_class = F.cross_entropy(flat, targets.clamp(min=0), reduction="sum")
        n = int((targets != IGNORE).sum())
        out.append(
            {"sum": total.item(), "n": n, "t": targets.numel(), "sum0": as_class.item()}
        )
    return out


def scalar(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


@from_student_outputs
def corpus_mean(losses, key="sum") -> torch.Tensor:
    """Total loss / total real targets: what evaluate and train's train_loss report."""
    return scalar(sum(b[key] for b in losses) / sum(b["n"] for b in losses))


def mean_of_means(losses) -> torch.Tensor:
    return scalar(sum(b["sum"] / b["n"] for b in losses) / len(losses))


@from_student_outputs
def eval_suspects(losses) -> dict[str, torch.Tensor]:
    """What evaluate returns under known mistakes (its own, or lm_loss's through it)."""
    return {
        BATCH_MEANS: mean_of_means(losses),
        PAD_COUNTED: scalar(
            sum(b["sum"] for b in losses) / sum(b["t"] for b in losses)
        ),
        f"lm_loss: {PAD_AS_CLASS} (fix lm_loss first)": corpus_mean(losses, "sum0"),
    }


@from_student_outputs
def train_suspects(losses) -> dict[str, torch.Tensor]:
    """What train's train_loss is under known mistakes, from the batches' losses."""
    tokens = sum(b["n"] for b in losses)

    def weighted(key):  # each batch's mean over all its positions, token-weighted
        return scalar(sum(b[key] / b["t"] * b["n"] for b in losses) / tokens)

    return {
        BATCH_MEANS: mean_of_means(losses),
        f"lm_loss: {PAD_COUNTED} (fix lm_loss first)": weighted("sum"),
        f"lm_loss: {PAD_AS_CLASS} (fix lm_loss first)": weighted("sum0"),
    }


def batch_oracle(seqs, pad_id, left=False, shift=True, target_fill=IGNORE):
    """(inputs, targets) of SPEC.md, or of a known mistake."""
    t = max(len(s) for s in seqs) - 1
    inputs = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    targets = torch.full((len(seqs), t), target_fill, dtype=torch.long)
    for r, s in enumerate(seqs):
        n = len(s) - 1
        cols = slice(t - n, t) if left else slice(0, n)
        inputs[r, cols] = torch.tensor(s[:-1])
        targets[r, cols] = torch.tensor(s[1:] if shift else s[:-1])
    return inputs, targets


def ce(logits, targets, reduction):
    """F.cross_entropy in float64 over (B, T, V) logits, skipping IGNORE_INDEX."""
    return F.cross_entropy(
        logits.double().reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE,
        reduction=reduction,
    )


@memoized
def oracle_training(
    state,
    train_batches,
    dev_batches,
    epochs,
    lr,
    n_heads,
    optimizer="Adam",
    schedule=None,
):
    """SPEC.md's train in float64 on the oracle model, with torch.optim's optimizer.

    Returns the history (its losses 0-d float64 tensors, and ``train_after``, the training
    batches' loss after the epoch's updates), the final weights, and for each parameter
    whether its gradient was ever tiny (|g| <= 1e-6, where Adam's g / (|g| + 1e-8) amplifies
    rounding). ``schedule`` names a known mistake in where the loop calls zero_grad and step
    (``ZERO_GRAD_PER_EPOCH``, ``STEP_PER_EPOCH``, ``LAST_BATCH_STEPS``); None is the
    correct loop.
    """
    params = {k: v.detach().double().clone().requires_grad_() for k, v in state.items()}
    opt = getattr(torch.optim, optimizer)(params.values(), lr=lr)
    tiny = {k: torch.zeros_like(v, dtype=torch.bool) for k, v in params.items()}
    zero_grad_per_batch = schedule in (None, LAST_BATCH_STEPS)
    step_per_batch = schedule in (None, ZERO_GRAD_PER_EPOCH)

    def mean_loss(batches):
        total = sum(
            ce(oracle_logits(params, i, n_heads), t, "sum").item() for i, t in batches
        )
        return scalar(total / sum(int((t != IGNORE).sum()) for _, t in batches))

    history = []
    for epoch in range(1, epochs + 1):
        total, count = 0.0, 0
        if not zero_grad_per_batch:
            opt.zero_grad()
        for inputs, targets in train_batches:
            loss = ce(oracle_logits(params, inputs, n_heads), targets, "mean")
            if zero_grad_per_batch:
                opt.zero_grad()
            loss.backward()
            for k, v in params.items():
                tiny[k] |= v.grad.abs() <= 1e-6
            if step_per_batch:
                opt.step()
            real = int((targets != IGNORE).sum())
            total, count = total + loss.item() * real, count + real
        if not step_per_batch:
            opt.step()
        with torch.no_grad():
            after = {
                "train_after": mean_loss(train_batches),
                "dev_loss": mean_loss(dev_batches),
            }
        history.append({"epoch": epoch, "train_loss": scalar(total / count), **after})
    return history, {k: v.detach() for k, v in params.items()}, tiny


def ce_pad_counted(logits, targets):
    """The summed loss over every position, padding included: the mean with padding counted."""
    return ce(logits, targets, "sum") / targets.numel()
