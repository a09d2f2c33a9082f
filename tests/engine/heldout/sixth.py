"""The sixth held-out set, written blind (no sight of the mistake catalogue or the grader).

See ``mistakes.py`` for the ``Case`` fields. ``W[n]`` is description n of the wording list.
"""

from tests.engine.heldout.mistakes import Case

W = {
    1: "the mask applied after the softmax, then renormalized: the prohibited keys' weights enter the softmax's sum first, so the permitted ones come out wrong",
    2: "mask applied after the softmax: the weights of prohibited keys are zeroed but the rows no longer sum to 1; mask the scores before the softmax",
    3: "scores not scaled by 1/sqrt(d_k)",
    4: "scores scaled by 1/d_k instead of 1/sqrt(d_k)",
    5: "scores scaled by 1/sqrt(d_v) instead of 1/sqrt(d_k)",
    6: "softmax over the queries axis (dim=-2) instead of the keys (dim=-1)",
    7: "no max subtraction in the softmax: exp overflows on large scores",
    8: "bool mask inverted (True treated as permitted; True means prohibited)",
    9: "a fully masked row gives NaN instead of raising ValueError",
    10: "an in-place operation on an argument (`x -= ...`, `x[...] = ...`, `x.add_(...)`): work on a new tensor",
    11: "a .detach() or a tensor built anew cuts the computation off from the inputs, so no gradient flows back",
    12: "a tensor made on the CPU: torch.arange/zeros/ones/full/tensor(...) without device= stays there; pass the input's device",
    13: "causal mask also hides the diagonal (a query must see its own key)",
    14: "causal mask ignores the t_k > t_q offset (queries are the LAST t_q positions)",
    15: "padding mask off by one (the first padded position is lengths[b])",
    16: "a mask made on the CPU: torch.arange(...) without device= (causal_mask's device, or the lengths' device)",
    17: "d_head = d_model / n_heads gives a float; use d_model // n_heads",
    18: "split_heads reshapes straight to (B, h, T, d_h) without the transpose",
    19: "merge_heads reshapes (B, h, T, d_h) to (B, T, D) without the transpose",
    20: "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
    21: "cross-attention takes keys and values from x instead of context",
    22: "mask=None with a cache treated as a causal mask; None means no masking",
    23: "a float mask turned into a bool one (nonzero = prohibited); a float mask is added to the scores",
    24: "half-split (rotate_half) pairing of i with i + d/2 instead of the interleaved pairs (x[2i], x[2i+1])",
    25: "rotation in the wrong direction (the sign of sin is flipped)",
    26: "frequencies base ** (-i / d_head) instead of base ** (-2 i / d_head)",
    27: "dtype=None taken as a fixed float32; it means torch.get_default_dtype()",
    28: "positions ignored (arange(T) used instead)",
    29: "the residual adds the normalized tensor (h = ln1(x) + attn(ln1(x))); add the incoming x",
    30: "the norms come after the additions (post-norm order) in the pre-norm block",
    31: "mask=None treated as a causal mask; None means no masking",
    32: "the mask is not passed on to attn when a cache is given",
    33: "LayerNorm with the unbiased variance (divide by d - 1); it must divide by d",
    34: "eps added outside the square root: use sqrt(var + eps)",
    35: "the variance taken as E[x^2] - E[x]^2, which loses the digits of rows far from zero; take the mean of (x - mean)^2",
    36: "RMSNorm subtracts the mean; it must not (that is LayerNorm)",
    37: "the values are right but the gradient is not: an intermediate (a statistic) is .detach()ed or computed outside autograd",
    38: "a parameter kept as a buffer or a plain tensor never trains; make it an nn.Parameter",
    39: "only k_new is checked; v_new needs the same dtype, device and shape checks",
    40: "key/value heads tiled (repeat) instead of each repeated for its group (repeat_interleave)",
    41: "the factor 2 is missing (keys AND values are cached)",
    42: "counts bytes (4 per float32 element), not elements",
    43: "the cache receives n_heads (repeated) key/value heads; append the n_kv_heads heads before repeating them",
    44: "the overflowing append wrote the positions that fit; an append that overflows must write nothing",
    45: "k_new and v_new are each checked, but not against each other",
    46: "RoPE rotates the values too; it rotates queries and keys only",
    47: "append does not advance length",
    48: "RoPE positions not offset by the cache length: with a cache, q and k sit at cache.length + arange(T)",
    49: "rope_base ignored: RoPE used the default base 10000",
    50: "length kept as a tensor: keep an int (add k_new.shape[2] to it)",
    51: "the cache's dtype follows torch.get_default_dtype() instead of the dtype it is given",
    52: "append refuses to fill the cache up to max_len exactly (it overflows only when length + t > max_len)",
    53: "the check for no real target made only under reduction='mean'",
    54: "the log of a softmax: the softmax underflows to 0 on logits far apart, and its log is -inf",
    55: "evaluate needs more of its batches than one pass (a second loop, len() or indexing)",
    56: "model.eval() is not called before the loop",
    57: "evaluate builds a graph: run its loop under torch.no_grad()",
    58: "use_cache is ignored (or defaults to False): with it, make the caches and feed only the newest token",
    59: "the prompt fed to the model token by token instead of in one forward pass",
    60: "decode skips IGNORE_INDEX as well as PAD_ID; only PAD_ID is skipped",
    61: "a character got id 0, which is PAD_ID: ids must start at 1",
    62: "left padding: pad at the END of each row (right padding)",
    63: "targets not shifted: targets are s[1:], inputs s[:-1]",
    64: "padding scored as a target of class 0 instead of being ignored",
    65: "mean of batch means (the notebook's epoch average) instead of total loss / total tokens",
    66: "evaluate leaves the model in eval mode (restore the previous mode)",
    67: "the mode is restored after the loop, not in a finally: block",
    68: "a size hard-coded to 128 (mask, position table, cache) instead of max_len",
    69: "cached generation re-feeds the whole sequence, not only the newest token",
    70: "positions restart at 0 in each chunk instead of continuing from the cache",
    71: "PAD_ID's logit is not excluded before sampling or argmax (set it to -inf)",
    72: "`.view(...)` on a tensor that is not contiguous: use `.reshape(...)` instead",
    73: "the vocabulary is not the text's own characters (changed case?)",
    74: "one KVCache shared by every block ([KVCache(...)] * n_layers); each block needs its own",
    75: "train_loss measured after the epoch's updates instead of averaged over the epoch's batches as they train",
    76: "the running training loss is not reset at each epoch",
    77: "zero_grad called once per epoch, not before each batch's backward (the gradients of the epoch's batches add up)",
    78: "one optimizer step per epoch on the gradients of all its batches, not one step per batch",
    79: "optimizer.step() after the batch loop: only the last batch's gradients are applied",
    80: "the default lr is not 1e-3",
    81: "a prompt that is not a 1-D tensor of an integer dtype raises ValueError; never cast it",
    82: "temperature <= 0 is only an error when sampling (greedy ignores it)",
    83: "max_new_tokens=0 still generated a token: the prompt alone comes back",
    84: "max_new_tokens=0 is refused: the prompt followed by 0 new ids is the prompt",
    85: "the distribution is truncated (top-k or top-p) before sampling; sample from all of it",
    86: "the default temperature is not 1.0",
    87: "a default of CharLM.__init__ differs from SPEC.md's",
    88: "evaluate's batches not moved to the model's device",
    89: "generate's prompt not moved to the model's device",
}


def _case(name, base, file, edits, part, n, kind, **more):
    """A case whose expected description is ``W[n]`` (``None`` when ``n`` is ``None``)."""
    return Case(
        name=name,
        base=base,
        file=file,
        edits=tuple(edits),
        part=part,
        expected=None if n is None else W[n],
        kind=kind,
        **more,
    )


def _multi(name, base, file, edits, parts, ns, extra=(), select=""):
    """A ``multi`` case: ``parts[0]`` is broken by ``W[ns[0]]``, the others by the rest."""
    return Case(
        name=name,
        base=base,
        file=file,
        edits=tuple(edits),
        part=parts[0],
        expected=W[ns[0]],
        kind="multi",
        also=tuple(W[n] for n in ns),
        extra=tuple(extra),
        also_parts=tuple(parts[1:]),
        select=select,
    )


DATA = "test_part7_data"
LOSS = "test_part7_loss_training"
GEN = "test_part7_model_generation"

CASES = [
    # ---------------------------------------------------------------- part 1: attention.py
    _case(
        "p1_mask_after_softmax_renormalized",
        "reference",
        "attention.py",
        [
            (
                """        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)""",
                """        if mask.dtype != torch.bool:
            scores = scores + mask
            mask = torch.isneginf(scores)
        if mask.all(dim=-1).any():
            raise ValueError("mask prohibits every key for at least one query row")
        weights = softmax(scores, dim=-1)
        weights = weights.masked_fill(mask, 0.0)
        weights = weights / weights.sum(dim=-1, keepdim=True)  # renormalize
    else:
        weights = softmax(scores, dim=-1)  # (..., Tq, Tk)""",
            )
        ],
        1,
        1,
        "rewritten",
    ),
    _case(
        "p1_bool_mask_zeroed_after_softmax",
        "alice",
        "attention.py",
        [
            (
                """        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)""",
                """        return scores  # bool masks are applied to the weights below""",
            ),
            (
                """        blocked = (scores == _NEG_INF).all(dim=-1)""",
                """        hidden = mask if mask.dtype == torch.bool else scores == _NEG_INF
        blocked = torch.broadcast_to(hidden, scores.shape).all(dim=-1)""",
            ),
            (
                """    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)""",
                """    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None and mask.dtype == torch.bool:
        weights = weights.masked_fill(mask.to(weights.device), 0.0)""",
            ),
        ],
        1,
        2,
        "partial",
    ),
    _case(
        "p1_scale_result_discarded",
        "alice",
        "attention.py",
        [
            (
                """    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)""",
                """    scores = torch.einsum("...id,...jd->...ij", q, k)  # (..., Tq, Tk)
    scores.div(math.sqrt(d_k))  # scale by 1/sqrt(d_k)""",
            )
        ],
        1,
        3,
        "rewritten",
    ),
    _case(
        "p1_scale_inverse_dk_power",
        "reference",
        "attention.py",
        [
            (
                """    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)""",
                """    scale = q.size(-1) ** -1.0
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # (..., Tq, Tk)""",
            )
        ],
        1,
        4,
        "rewritten",
    ),
    _case(
        "p1_scale_by_dv_refactored",
        "reference",
        "attention.py",
        [
            (
                """    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)""",
                """    d_k, d_v = k.shape[-1], v.shape[-1]
    logits = torch.matmul(q, k.transpose(-2, -1))  # (..., Tq, Tk)
    scores = logits / math.sqrt(d_v)""",
            ),
            (
                """    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)""",
                """    attn = softmax(scores, dim=-1)  # (..., Tq, Tk)
    context = torch.matmul(attn, v)  # (..., Tq, d_v)
    return context, attn""",
            ),
        ],
        1,
        5,
        "refactor",
    ),
    _case(
        "p1_softmax_queries_axis_unmasked_branch",
        "alice",
        "attention.py",
        [
            (
                """    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)""",
                """    if mask is None:
        weights = softmax(scores, dim=-2)  # no mask: plain normalization
    else:
        weights = softmax(scores, dim=-1)  # (..., Tq, Tk)""",
            )
        ],
        1,
        6,
        "partial",
    ),
    _case(
        "p1_softmax_no_shift",
        "alice",
        "attention.py",
        [
            (
                """    peak = torch.max(x, dim=dim, keepdim=True).values  # finite: every slice has a finite entry
    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))""",
                """    expo = torch.exp(x).masked_fill(banned, 0.0)""",
            )
        ],
        1,
        7,
        "rewritten",
    ),
    _case(
        "p1_clamped_max_gives_nan",
        "reference",
        "attention.py",
        [
            (
                """    top = x.amax(dim=dim, keepdim=True)
    if torch.isneginf(top).any():
        raise ValueError(
            f"softmax: x has a slice along dim={dim} that is entirely -inf"
        )
    exp = torch.exp(x - top)""",
                """    top = x.amax(dim=dim, keepdim=True).clamp(min=-1e30)  # avoid -inf - -inf
    exp = torch.exp(x - top)""",
            ),
            (
                """    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
""",
                "",
            ),
        ],
        1,
        9,
        "rewritten",
    ),
    _case(
        "p1_float_mask_detaches_scores",
        "reference",
        "attention.py",
        [
            (
                """            scores = scores + mask""",
                """            scores = scores.detach() + mask  # the mask is a constant""",
            )
        ],
        1,
        11,
        "partial",
    ),
    _case(
        "p1_bool_mask_fill_on_cpu",
        "alice",
        "attention.py",
        [
            (
                """        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)""",
                """        fill = torch.full(tuple(scores.shape), _NEG_INF, dtype=scores.dtype)
        return torch.where(mask, fill, scores)""",
            )
        ],
        1,
        12,
        "moved",
    ),
    # ---------------------------------------------------------------- part 2: masks.py
    _case(
        "p2_causal_loop_no_offset",
        "reference",
        "masks.py",
        [
            (
                """    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    return key_pos > query_pos  # (t_q, t_k)""",
                """    mask = torch.zeros(t_q, t_k, dtype=torch.bool, device=device)
    for i in range(t_q):
        mask[i, i + 1 :] = True  # query i may not see the keys after it
    return mask""",
            )
        ],
        2,
        14,
        "rewritten",
    ),
    _case(
        "p2_padding_keep_off_by_one",
        "alice",
        "masks.py",
        [
            (
                """    where = torch.arange(t, device=lengths.device).unsqueeze(0).expand(batch, t)  # (B, t)
    limit = lengths.to(torch.long).unsqueeze(1).expand(batch, t)  # (B, t)
    return where >= limit""",
                """    slots = torch.arange(t, device=lengths.device)[None, :]  # (1, t)
    keep = slots <= lengths.long()[:, None]  # the real tokens
    return ~keep.expand(batch, t)""",
            )
        ],
        2,
        15,
        "refactor",
    ),
    _case(
        "p2_attention_mask_causal_on_cpu",
        "reference",
        "masks.py",
        [
            (
                """        mask = mask | causal_mask(t, device=keys_padded.device)""",
                """        mask = mask | causal_mask(t)""",
            )
        ],
        2,
        16,
        "moved",
    ),
    # ---------------------------------------------------------------- part 3: heads.py
    _case(
        "p3_head_width_true_division",
        "alice",
        "heads.py",
        [
            (
                """    per_head = width // n_heads
    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)
    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)""",
                """    head_dim = width / n_heads
    heads = x.reshape(batch, steps, n_heads, head_dim)  # (B, T, h, d_h)
    return heads.transpose(1, 2)  # (B, h, T, d_h)""",
            )
        ],
        3,
        17,
        "refactor",
    ),
    _case(
        "p3_own_attention_scaled_by_width",
        "reference",
        "heads.py",
        [
            (
                """import torch
from torch import nn

from transformer_hw.attention import scaled_dot_product_attention""",
                """import math

import torch
from torch import nn

from transformer_hw.attention import softmax""",
            ),
            (
                """        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)""",
                """        scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])
        if mask is not None:
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(mask, float("-inf"))
            else:
                scores = scores + mask
        out = softmax(scores, dim=-1) @ v  # (B, h, Tq, d_h)""",
            ),
        ],
        3,
        20,
        "moved",
    ),
    _case(
        "p3_values_from_x_in_cross_attention",
        "alice",
        "heads.py",
        [
            (
                """        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)""",
                """        v = split_heads(self.v_proj(x), self.n_heads)  # (B, h, Tk, d_h)""",
            )
        ],
        3,
        21,
        "partial",
    ),
    _case(
        "p3_cache_defaults_to_causal",
        "reference",
        "heads.py",
        [
            (
                """from transformer_hw.attention import scaled_dot_product_attention""",
                """from transformer_hw.attention import scaled_dot_product_attention
from transformer_hw.masks import causal_mask""",
            ),
            (
                """            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)""",
                """            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
            if mask is None:  # decoding: never look ahead
                mask = causal_mask(q.shape[2], k.shape[2], device=x.device)""",
            ),
        ],
        3,
        22,
        "partial",
    ),
    _case(
        "p3_float_mask_to_bool",
        "alice",
        "heads.py",
        [
            (
                """        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)""",
                """        if mask is not None and mask.is_floating_point():
            mask = mask.ne(0)  # additive -inf -> prohibited
        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)""",
            )
        ],
        3,
        23,
        "rewritten",
    ),
    _case(
        "p3_merge_transposes_in_place",
        "reference",
        "heads.py",
        [
            (
                """    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)""",
                """    x.transpose_(1, 2)  # (B, T, h, d_h)
    return x.reshape(batch, t, n_heads * d_head)  # (B, T, D)""",
            )
        ],
        3,
        10,
        "rewritten",
    ),
    # ---------------------------------------------------------------- part 4: rope.py
    _case(
        "p4_halves_instead_of_pairs",
        "reference",
        "rope.py",
        [
            (
                """    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)""",
                """    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]  # (..., T, d_head/2) each
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)""",
            )
        ],
        4,
        24,
        "rewritten",
    ),
    _case(
        "p4_inv_freq_pow_refactor",
        "reference",
        "rope.py",
        [
            (
                """    pair = torch.arange(
        d_head // 2, device=positions.device, dtype=dtype
    )  # (d_head/2,)
    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)
    return positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, d_head/2)""",
                """    idx = torch.arange(d_head // 2, device=positions.device, dtype=dtype)
    freqs = 1.0 / torch.pow(base, idx / d_head)  # (d_head/2,)
    return torch.outer(positions.to(dtype), freqs)  # (T, d_head/2)""",
            )
        ],
        4,
        26,
        "refactor",
    ),
    _case(
        "p4_dtype_default_float32_signature",
        "reference",
        "rope.py",
        [
            (
                """    positions: torch.Tensor, d_head: int, base: float = 10000.0, dtype=None""",
                """    positions: torch.Tensor,
    d_head: int,
    base: float = 10000.0,
    dtype=torch.float32,""",
            ),
            (
                """    dtype = torch.get_default_dtype() if dtype is None else dtype""",
                """    dtype = dtype or torch.float32""",
            ),
        ],
        4,
        27,
        "moved",
    ),
    _case(
        "p4_angles_from_arange",
        "alice",
        "rope.py",
        [
            (
                """    theta = rope_angles(positions, width, base, dtype=real)  # (T, d/2), at x's precision""",
                """    steps_here = torch.arange(steps, device=x.device)
    theta = rope_angles(steps_here, width, base, dtype=real)  # (T, d/2), at x's precision""",
            )
        ],
        4,
        28,
        "rewritten",
    ),
    _case(
        "p4_rotates_pairs_in_place",
        "reference",
        "rope.py",
        [
            (
                """    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)""",
                """    a, b = x[..., 0::2].clone(), x[..., 1::2].clone()  # (..., T, d_head/2) each
    x[..., 0::2] = a * cos - b * sin
    x[..., 1::2] = a * sin + b * cos
    return x""",
            )
        ],
        4,
        10,
        "rewritten",
    ),
    _case(
        "p4_pair_index_on_cpu",
        "reference",
        "rope.py",
        [
            (
                """    pair = torch.arange(
        d_head // 2, device=positions.device, dtype=dtype
    )  # (d_head/2,)
    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)""",
                """    two_i = torch.arange(0, d_head, 2, dtype=dtype)  # (d_head/2,)
    inv_freq = base ** (-two_i / d_head)""",
            )
        ],
        4,
        12,
        "refactor",
    ),
    # ---------------------------------------------------------------- part 5: norm.py, block.py
    _case(
        "p5_residual_from_normed_x",
        "reference",
        "block.py",
        [
            (
                """        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))""",
                """        x = self.ln1(x)
        h = x + self.attn(x, mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))""",
            )
        ],
        5,
        29,
        "rewritten",
    ),
    _case(
        "p5_second_residual_normed",
        "alice",
        "block.py",
        [
            (
                """        return mixed + self.ffn(self.ln2(mixed))""",
                """        normed = self.ln2(mixed)
        return normed + self.ffn(normed)""",
            )
        ],
        5,
        29,
        "partial",
    ),
    _case(
        "p5_prenorm_block_in_post_order",
        "reference",
        "block.py",
        [
            (
                """        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))""",
                """        h = self.ln1(x + self.attn(x, mask=mask, cache=cache))
        return self.ln2(h + self.ffn(h))""",
            )
        ],
        5,
        30,
        "rewritten",
    ),
    _case(
        "p5_prenorm_causal_default_without_cache",
        "reference",
        "block.py",
        [
            (
                """from transformer_hw.heads import MultiHeadAttention""",
                """from transformer_hw.heads import MultiHeadAttention
from transformer_hw.masks import causal_mask""",
            ),
            (
                """        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)""",
                """        if mask is None and cache is None:
            mask = causal_mask(x.shape[1], device=x.device)  # a decoder block
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)""",
            ),
        ],
        5,
        31,
        "partial",
    ),
    _case(
        "p5_postnorm_builds_triu_default",
        "alice",
        "block.py",
        [
            (
                """    def forward(self, x, mask=None):
        settled""",
                """    def forward(self, x, mask=None):
        if mask is None:
            steps = x.shape[1]
            mask = torch.ones(steps, steps, dtype=torch.bool, device=x.device).triu(1)
        settled""",
            )
        ],
        5,
        31,
        "partial",
    ),
    _case(
        "p5_cache_path_drops_mask",
        "alice",
        "block.py",
        [
            (
                """        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)""",
                """        if cache is None:
            attended = self.attn(self.ln1(x), mask=mask)
        else:
            attended = self.attn(self.ln1(x), cache=cache)  # the cache keeps it causal
        mixed = x + attended""",
            )
        ],
        5,
        32,
        "partial",
    ),
    _case(
        "p5_layernorm_tensor_var",
        "reference",
        "norm.py",
        [
            (
                """        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased""",
                """        var = x.var(dim=-1, keepdim=True)""",
            )
        ],
        5,
        33,
        "rewritten",
    ),
    _case(
        "p5_rmsnorm_eps_after_sqrt",
        "reference",
        "norm.py",
        [
            (
                """        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)""",
                """        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + self.eps""",
            )
        ],
        5,
        34,
        "partial",
    ),
    _case(
        "p5_layernorm_moments_variance",
        "reference",
        "norm.py",
        [
            (
                """        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased""",
                """        var = (x * x).mean(dim=-1, keepdim=True) - mean**2  # E[x^2] - E[x]^2""",
            )
        ],
        5,
        35,
        "rewritten",
    ),
    _case(
        "p5_base_class_centres_both",
        "alice",
        "norm.py",
        [
            (
                """        return self.normalize(x) * self.weight""",
                """        centred = x - x.mean(dim=-1, keepdim=True)
        return self.normalize(centred) * self.weight""",
            )
        ],
        5,
        36,
        "moved",
    ),
    _case(
        "p5_layernorm_mean_detached",
        "reference",
        "norm.py",
        [
            (
                """        mean = x.mean(dim=-1, keepdim=True)
        var""",
                """        mean = x.mean(dim=-1, keepdim=True).detach()  # a statistic, not a weight
        var""",
            )
        ],
        5,
        37,
        "partial",
    ),
    _case(
        "p5_layernorm_bias_plain_tensor",
        "reference",
        "norm.py",
        [
            (
                """        self.bias = nn.Parameter(torch.zeros(d))""",
                """        self.bias = torch.zeros(d)""",
            )
        ],
        5,
        38,
        "partial",
    ),
    # ---------------------------------------------------------------- part 6: gqa.py
    _case(
        "p6_loop_checks_k_only",
        "reference",
        "gqa.py",
        [
            (
                """        for name, new in (("k_new", k_new), ("v_new", v_new)):""",
                """        for name, new in (("k_new", k_new),):  # v_new is written the same way""",
            )
        ],
        6,
        39,
        "rewritten",
    ),
    _case(
        "p6_repeat_kv_expand_tiles",
        "reference",
        "gqa.py",
        [
            (
                """    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)""",
                """    x = x[:, None].expand(batch, n_rep, n_kv, t, d)  # (B, n_rep, h_kv, T, d)""",
            )
        ],
        6,
        40,
        "rewritten",
    ),
    _case(
        "p6_numel_product_refactor",
        "alice",
        "gqa.py",
        [
            (
                """    total = 2
    for name, value in dims.items():
        total *= _positive(value, name, allow_zero=True)
    return int(total)""",
                """    checked = [_positive(value, name, allow_zero=True) for name, value in dims.items()]
    return math.prod(checked)""",
            )
        ],
        6,
        41,
        "refactor",
    ),
    _case(
        "p6_numel_in_bytes",
        "reference",
        "gqa.py",
        [
            (
                """    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head""",
                """    bytes_per = torch.finfo(torch.float32).bits // 8
    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head * bytes_per""",
            )
        ],
        6,
        42,
        "rewritten",
    ),
    _case(
        "p6_repeat_before_caching",
        "reference",
        "gqa.py",
        [
            (
                """        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)
        n_rep = self.n_heads // self.n_kv_heads
        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)
        out, _ = scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask
        )""",
                """        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, h, T, d_h)
        if cache is not None:
            k, v = cache.append(k, v)
        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)
        out, _ = scaled_dot_product_attention(q, k, v, mask)""",
            )
        ],
        6,
        43,
        "moved",
    ),
    _case(
        "p6_pair_check_compares_heads_only",
        "reference",
        "gqa.py",
        [
            (
                """        if k_new.shape != v_new.shape:""",
                """        if k_new.shape[:2] != v_new.shape[:2]:""",
            )
        ],
        6,
        45,
        "partial",
    ),
    _case(
        "p6_rope_over_q_k_v",
        "alice",
        "gqa.py",
        [
            (
                """        q = apply_rope(q, where, self.rope_base)
        k = apply_rope(k, where, self.rope_base)""",
                """        q, k, v = (apply_rope(t, where, self.rope_base) for t in (q, k, v))""",
            )
        ],
        6,
        46,
        "rewritten",
    ),
    _case(
        "p6_append_returns_end_keeps_length",
        "alice",
        "gqa.py",
        [
            (
                """        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]""",
                """        return self.k[:, :, :end], self.v[:, :, :end]""",
            )
        ],
        6,
        47,
        "rewritten",
    ),
    _case(
        "p6_rope_default_positions",
        "reference",
        "gqa.py",
        [
            (
                """        q = apply_rope(q, positions, self.rope_base)
        k = apply_rope(k, positions, self.rope_base)""",
                """        q = apply_rope(q, base=self.rope_base)
        k = apply_rope(k, base=self.rope_base)""",
            )
        ],
        6,
        48,
        "rewritten",
    ),
    _case(
        "p6_rope_base_fixed_in_init",
        "alice",
        "gqa.py",
        [
            (
                """        self.rope_base = rope_base""",
                """        self.rope_base = 10000.0  # the usual RoPE base""",
            )
        ],
        6,
        49,
        "moved",
    ),
    _case(
        "p6_length_zero_dim_tensor",
        "reference",
        "gqa.py",
        [
            (
                """        self.v = torch.zeros_like(self.k)
        self.length = 0""",
                """        self.v = torch.zeros_like(self.k)
        self.length = torch.zeros((), dtype=torch.long, device=self.k.device)""",
            )
        ],
        6,
        50,
        "moved",
    ),
    _case(
        "p6_cache_buffers_default_dtype",
        "alice",
        "gqa.py",
        [
            (
                """        self.k = torch.empty(shape, device=device, dtype=dtype)
        self.v = torch.empty(shape, device=device, dtype=dtype)""",
                """        self.k = torch.empty(shape, device=device)
        self.v = torch.empty_like(self.k)""",
            )
        ],
        6,
        51,
        "refactor",
    ),
    _case(
        "p6_room_check_off_by_one_refactored",
        "reference",
        "gqa.py",
        [
            (
                """        if self.length + t > self.max_len:""",
                """        room = self.max_len - self.length  # free positions left
        if room <= t:""",
            ),
            (
                """        self.k[:, :, self.length : self.length + t] = k_new
        self.v[:, :, self.length : self.length + t] = v_new
        self.length += t""",
                """        start, stop = self.length, self.length + t
        self.k[:, :, start:stop] = k_new
        self.v[:, :, start:stop] = v_new
        self.length = stop""",
            ),
        ],
        6,
        52,
        "refactor",
    ),
    _case(
        "p6_own_triu_mask_on_cpu",
        "reference",
        "gqa.py",
        [
            (
                """        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)""",
                """        total = k.shape[2]
        mask = torch.ones(t, total, dtype=torch.bool).triu(total - t + 1)""",
            )
        ],
        6,
        12,
        "rewritten",
    ),
    # ---------------------------------------------------------------- part 7: charlm.py
    _case(
        "p7_sum_reduction_skips_empty_check",
        "reference",
        "charlm.py",
        [
            (
                """    if not (targets != IGNORE_INDEX).any():""",
                """    if reduction == "mean" and not (targets != IGNORE_INDEX).any():""",
            )
        ],
        7,
        53,
        "partial",
        select=LOSS,
    ),
    _case(
        "p7_log_of_torch_softmax",
        "alice",
        "charlm.py",
        [
            (
                """    log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)""",
                """    probs = torch.softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)
    log_probs = probs.log()""",
            )
        ],
        7,
        54,
        "rewritten",
        select=LOSS,
    ),
    _case(
        "p7_evaluate_counts_first",
        "reference",
        "charlm.py",
        [
            (
                """    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real""",
                """    count = sum(int((t != IGNORE_INDEX).sum()) for _, t in batches)
    total = 0.0
    try:
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                if (targets != IGNORE_INDEX).any():
                    total += lm_loss(model(inputs), targets, reduction="sum").item()""",
            )
        ],
        7,
        55,
        "rewritten",
        select=LOSS,
    ),
    _case(
        "p7_eval_mode_set_by_train",
        "reference",
        "charlm.py",
        [
            (
                """    was_training = model.training
    model.eval()
    total, count = 0.0, 0""",
                """    was_training = model.training
    total, count = 0.0, 0""",
            ),
            (
                """        history.append(
            {""",
                """        model.eval()  # evaluate on the dev set in eval mode
        history.append(
            {""",
            ),
        ],
        7,
        56,
        "moved",
        select=LOSS,
    ),
    _case(
        "p7_evaluate_loop_with_grad",
        "reference",
        "charlm.py",
        [
            (
                """        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real""",
                """        for inputs, targets in batches:
            inputs, targets = inputs.to(device), targets.to(device)
            n_real = int((targets != IGNORE_INDEX).sum())
            if n_real == 0:
                continue
            batch_sum = lm_loss(model(inputs), targets, reduction="sum")
            total += float(batch_sum)  # a Python float: nothing kept
            count += n_real""",
            )
        ],
        7,
        57,
        "refactor",
        select=LOSS,
    ),
    _case(
        "p7_use_cache_default_false",
        "alice",
        "charlm.py",
        [
            (
                """             use_cache=True):""",
                """             use_cache=False):""",
            )
        ],
        7,
        58,
        "moved",
        select=GEN,
    ),
    _case(
        "p7_prompt_prefilled_token_by_token",
        "reference",
        "charlm.py",
        [
            (
                """            caches = model.make_caches() if use_cache else None
            feed = ids""",
                """            caches = model.make_caches() if use_cache else None
            feed = ids
            if use_cache:
                for token in ids[:-1]:  # warm the caches one position at a time
                    model(token.view(1, 1), caches)
                feed = ids[-1:]""",
            )
        ],
        7,
        59,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_decode_skips_ignore_index",
        "alice",
        "charlm.py",
        [
            (
                """            if code == PAD_ID:
                continue""",
                """            if code in (PAD_ID, IGNORE_INDEX):  # special ids
                continue""",
            )
        ],
        7,
        60,
        "partial",
        select=DATA,
    ),
    _case(
        "p7_ids_from_zip_range",
        "reference",
        "charlm.py",
        [
            (
                """        self.stoi = {c: i + 1 for i, c in enumerate(chars)}""",
                """        self.stoi = dict(zip(chars, range(len(chars))))""",
            )
        ],
        7,
        61,
        "rewritten",
        select=DATA,
    ),
    _case(
        "p7_rows_padded_on_the_left",
        "alice",
        "charlm.py",
        [
            (
                """        inputs[row, :span] = s[:-1]
        targets[row, :span] = s[1:]""",
                """        inputs[row, width - span :] = s[:-1]
        targets[row, width - span :] = s[1:]""",
            )
        ],
        7,
        62,
        "rewritten",
        select=DATA,
    ),
    _case(
        "p7_targets_filled_like_inputs",
        "alice",
        "charlm.py",
        [
            (
                """    targets = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long, device=device)""",
                """    targets = torch.full_like(inputs, PAD_ID)""",
            )
        ],
        7,
        64,
        "rewritten",
        select=DATA,
    ),
    _case(
        "p7_evaluate_mean_of_batch_means",
        "reference",
        "charlm.py",
        [
            (
                """                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real""",
                """                if (targets == IGNORE_INDEX).all():
                    continue  # nothing to score in this batch
                batch_loss = lm_loss(model(inputs), targets)
                total += batch_loss.item()
                count += 1""",
            )
        ],
        7,
        65,
        "refactor",
        select=LOSS,
    ),
    _case(
        "p7_train_loss_mean_of_steps",
        "alice",
        "charlm.py",
        [
            (
                """        running = sum(loss * real for loss, real in steps)
        tokens = sum(real for _, real in steps)""",
                """        running = sum(loss for loss, real in steps if real)
        tokens = sum(1 for _, real in steps if real)""",
            )
        ],
        7,
        65,
        "partial",
        select=LOSS,
    ),
    _case(
        "p7_restores_current_mode",
        "reference",
        "charlm.py",
        [
            (
                """    finally:
        model.train(was_training)
    if count == 0:""",
                """    finally:
        model.train(model.training)
    if count == 0:""",
            )
        ],
        7,
        66,
        "rewritten",
        select=LOSS,
    ),
    _case(
        "p7_modes_restored_after_loop",
        "alice",
        "charlm.py",
        [
            (
                """    try:
        model.eval()
        with torch.no_grad():
            for inputs, targets in batches:
                targets = targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real == 0:
                    continue
                logits = model(inputs.to(device))
                total += float(lm_loss(logits, targets, reduction="sum"))
                tokens += real
    finally:
        _restore_modes(saved)""",
                """    model.eval()
    with torch.no_grad():
        for inputs, targets in batches:
            targets = targets.to(device)
            n_real = int((targets != IGNORE_INDEX).sum())
            if n_real:
                batch_logits = model(inputs.to(device))
                total += float(lm_loss(batch_logits, targets, reduction="sum"))
                tokens += n_real
    _restore_modes(saved)""",
            )
        ],
        7,
        67,
        "refactor",
        select=LOSS,
    ),
    _case(
        "p7_caches_sized_128",
        "reference",
        "charlm.py",
        [
            (
                """                self.max_len,
""",
                """                128,
""",
            )
        ],
        7,
        68,
        "moved",
        select=GEN,
    ),
    _case(
        "p7_position_table_128",
        "alice",
        "charlm.py",
        [
            (
                """        self.pos_emb = nn.Embedding(max_len, d_model)""",
                """        self.pos_emb = nn.Embedding(128, d_model)  # the longest context""",
            )
        ],
        7,
        68,
        "partial",
        select=GEN,
    ),
    _case(
        "p7_cached_step_feeds_all_ids",
        "alice",
        "charlm.py",
        [
            (
                """                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]""",
                """                        last = model(torch.tensor([ids], device=device), caches)[0, -1]""",
            )
        ],
        7,
        69,
        "partial",
        select=GEN,
    ),
    _case(
        "p7_position_rows_from_zero",
        "reference",
        "charlm.py",
        [
            (
                """        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, D)""",
                """        x = self.tok_emb(idx) + self.pos_emb.weight[:t]  # (B, T, D)""",
            )
        ],
        7,
        70,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_pad_excluded_only_for_greedy",
        "reference",
        "charlm.py",
        [
            (
                """                logits[PAD_ID] = float("-inf")
                if greedy:
                    new = logits.argmax()[None]""",
                """                if greedy:
                    logits[PAD_ID] = float("-inf")
                    new = logits.argmax()[None]""",
            )
        ],
        7,
        71,
        "partial",
        select=GEN,
    ),
    _case(
        "p7_one_cache_for_all_blocks",
        "alice",
        "charlm.py",
        [
            (
                """        return [
            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,
                    device=device, dtype=dtype)
            for _ in self.blocks
        ]""",
                """        cache = KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,
                        device=device, dtype=dtype)
        return [cache for _ in self.blocks]""",
            )
        ],
        7,
        74,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_train_loss_reevaluated",
        "reference",
        "charlm.py",
        [
            (
                """        history.append(
            {
                "epoch": epoch,
                "train_loss": total / count,
                "dev_loss": evaluate(model, dev_batches),
            }
        )""",
                """        record = {"epoch": epoch, "dev_loss": evaluate(model, dev_batches)}
        record["train_loss"] = evaluate(model, train_batches)  # the epoch's final weights
        history.append(record)""",
            )
        ],
        7,
        75,
        "refactor",
        select=LOSS,
    ),
    _case(
        "p7_totals_before_epoch_loop",
        "reference",
        "charlm.py",
        [
            (
                """    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        total, count = 0.0, 0""",
                """    history = []
    total, count = 0.0, 0
    for epoch in range(1, epochs + 1):
        model.train()""",
            )
        ],
        7,
        76,
        "moved",
        select=LOSS,
    ),
    _case(
        "p7_zero_grad_per_epoch",
        "alice",
        "charlm.py",
        [
            (
                """    optimizer.zero_grad()
    loss = lm_loss(model(inputs), targets)""",
                """    loss = lm_loss(model(inputs), targets)""",
            ),
            (
                """        model.train()
        steps = [""",
                """        model.train()
        optimizer.zero_grad()
        steps = [""",
            ),
        ],
        7,
        77,
        "moved",
        select=LOSS,
    ),
    _case(
        "p7_gradient_accumulation_epoch",
        "reference",
        "charlm.py",
        [
            (
                """        total, count = 0.0, 0
        for inputs, targets in train_batches:""",
                """        total, count = 0.0, 0
        optimizer.zero_grad()
        for inputs, targets in train_batches:""",
            ),
            (
                """            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * real
            count += real""",
                """            loss.backward()
            total += loss.item() * real
            count += real
        optimizer.step()""",
            ),
        ],
        7,
        78,
        "rewritten",
        select=LOSS,
    ),
    _case(
        "p7_step_after_batches",
        "alice",
        "charlm.py",
        [
            (
                """    loss.backward()
    optimizer.step()
    return float(loss.detach()), real""",
                """    loss.backward()
    return float(loss.detach()), real""",
            ),
            (
                """        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]""",
                """        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]
        optimizer.step()""",
            ),
        ],
        7,
        79,
        "moved",
        select=LOSS,
    ),
    _case(
        "p7_lr_default_in_body",
        "reference",
        "charlm.py",
        [
            (
                """epochs: int = 1, lr: float = 1e-3):""",
                """epochs: int = 1, lr=None):""",
            ),
            (
                """    optimizer = torch.optim.Adam(model.parameters(), lr=lr)""",
                """    optimizer = torch.optim.Adam(model.parameters(), lr=lr or 3e-4)""",
            ),
        ],
        7,
        80,
        "moved",
        select=LOSS,
    ),
    _case(
        "p7_float_prompt_cast",
        "reference",
        "charlm.py",
        [
            (
                """        or prompt.dtype.is_floating_point
        or prompt.dtype.is_complex""",
                """        or prompt.dtype.is_complex""",
            )
        ],
        7,
        81,
        "partial",
        select=GEN,
    ),
    _case(
        "p7_list_prompt_converted",
        "alice",
        "charlm.py",
        [
            (
                """    \"\"\"The prompt followed by ``max_new_tokens`` sampled (or greedy) ids, never PAD_ID.\"\"\"
""",
                """    \"\"\"The prompt followed by ``max_new_tokens`` sampled (or greedy) ids, never PAD_ID.\"\"\"
    if isinstance(prompt, (list, tuple)):
        prompt = torch.tensor(prompt, dtype=torch.long)
""",
            )
        ],
        7,
        81,
        "partial",
        select=GEN,
    ),
    _case(
        "p7_temperature_checked_in_helper",
        "reference",
        "charlm.py",
        [
            (
                """def generate(
    model: CharLM,""",
                """def _check_temperature(temperature: float) -> None:
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive")


def generate(
    model: CharLM,""",
            ),
            (
                """    if not greedy and temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive")""",
                """    _check_temperature(temperature)""",
            ),
        ],
        7,
        82,
        "moved",
        select=GEN,
    ),
    _case(
        "p7_do_while_generation",
        "alice",
        "charlm.py",
        [
            (
                """            if max_new_tokens > 0:
                caches = model.make_caches(1) if use_cache else None
                last = model(torch.tensor([ids], device=device), caches)[0, -1]
                for step in range(max_new_tokens):
                    ids.append(_pick(last, temperature, greedy, generator))
                    if step + 1 == max_new_tokens:
                        break
                    if use_cache:
                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]
                    else:
                        last = model(torch.tensor([ids], device=device))[0, -1]""",
                """            caches = model.make_caches(1) if use_cache else None
            last = model(torch.tensor([ids], device=device), caches)[0, -1]
            start = len(ids)
            while True:
                ids.append(_pick(last, temperature, greedy, generator))
                if len(ids) - start >= max_new_tokens:
                    break
                if use_cache:
                    last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]
                else:
                    last = model(torch.tensor([ids], device=device))[0, -1]""",
            ),
        ],
        7,
        83,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_zero_new_tokens_refused",
        "reference",
        "charlm.py",
        [
            (
                """    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must not be negative")""",
                """    if not max_new_tokens > 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be positive")""",
            )
        ],
        7,
        84,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_nucleus_sampling",
        "reference",
        "charlm.py",
        [
            (
                """                    probs = torch.softmax(logits / temperature, dim=-1)
                    new = torch.multinomial(probs, 1, generator=generator)""",
                """                    probs = torch.softmax(logits / temperature, dim=-1)
                    top_p, order = probs.sort(descending=True)
                    keep = top_p.cumsum(-1) - top_p < 0.9  # nucleus
                    probs = torch.zeros_like(probs).scatter(0, order, top_p * keep)
                    new = torch.multinomial(probs, 1, generator=generator)""",
            )
        ],
        7,
        85,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_temperature_default_in_body",
        "alice",
        "charlm.py",
        [
            (
                """def generate(model, prompt, max_new_tokens, temperature=1.0, greedy=False, generator=None,""",
                """def generate(model, prompt, max_new_tokens, temperature=None, greedy=False, generator=None,""",
            ),
            (
                """    \"\"\"The prompt followed by ``max_new_tokens`` sampled (or greedy) ids, never PAD_ID.\"\"\"
""",
                """    \"\"\"The prompt followed by ``max_new_tokens`` sampled (or greedy) ids, never PAD_ID.\"\"\"
    temperature = 0.8 if temperature is None else temperature
""",
            ),
        ],
        7,
        86,
        "moved",
        select=GEN,
    ),
    _case(
        "p7_d_ff_four_times_width",
        "reference",
        "charlm.py",
        [
            (
                """        self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128""",
                """        self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=4 * 64, max_len=128""",
            )
        ],
        7,
        87,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_evaluate_moves_targets_only",
        "reference",
        "charlm.py",
        [
            (
                """                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:""",
                """                targets = targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:""",
            )
        ],
        7,
        88,
        "partial",
        select=LOSS,
    ),
    _case(
        "p7_prompt_cast_long_only",
        "reference",
        "charlm.py",
        [
            (
                """    ids = prompt.to(device=device, dtype=torch.long)""",
                """    ids = prompt.long()""",
            )
        ],
        7,
        89,
        "rewritten",
        select=GEN,
    ),
    _case(
        "p7_batch_inputs_on_cpu",
        "reference",
        "charlm.py",
        [
            (
                """    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)""",
                """    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long)""",
            )
        ],
        7,
        12,
        "partial",
        select=DATA,
    ),
    # ---------------------------------------------------------------- several parts
    _multi(
        "m_unscaled_scores_and_unbiased_var",
        "reference",
        "attention.py",
        [
            (
                """    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)""",
                """    scores = torch.matmul(q, k.mT)  # (..., Tq, Tk)""",
            )
        ],
        (1, 5),
        (3, 33),
        extra=[
            (
                "norm.py",
                """        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased""",
                """        var = torch.var(x, dim=-1, keepdim=True, correction=1)""",
            )
        ],
    ),
    _multi(
        "m_triu_diagonal_and_unshifted_targets",
        "alice",
        "masks.py",
        [
            (
                """    return everything.triu(diagonal=shift + 1)""",
                """    return everything.triu(diagonal=shift)""",
            )
        ],
        (2, 7),
        (13, 63),
        extra=[
            (
                "charlm.py",
                """        targets[row, :span] = s[1:]""",
                """        targets[row, :span] = s[:span]""",
            )
        ],
        select=DATA,
    ),
    _multi(
        "m_merge_reshape_and_t_unchecked",
        "alice",
        "heads.py",
        [
            (
                """    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)""",
                """    return x.reshape(batch, steps, heads * per_head)""",
            )
        ],
        (3, 6),
        (19, 45),
        extra=[
            (
                "gqa.py",
                """        if k_new.shape[2] != v_new.shape[2]:
            raise ValueError(
                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} hold different t"
            )
""",
                "",
            )
        ],
    ),
    _multi(
        "m_rope_sign_and_base_dropped",
        "reference",
        "rope.py",
        [
            (
                """        (a * cos - b * sin, a * sin + b * cos), dim=-1""",
                """        (a * cos + b * sin, b * cos - a * sin), dim=-1""",
            )
        ],
        (4, 6),
        (25, 49),
        extra=[
            (
                "gqa.py",
                """        q = apply_rope(q, positions, self.rope_base)
        k = apply_rope(k, positions, self.rope_base)""",
                """        q = apply_rope(q, positions)
        k = apply_rope(k, positions)""",
            )
        ],
    ),
    _multi(
        "m_eps_outside_and_temperature_default",
        "reference",
        "norm.py",
        [
            (
                """        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias""",
                """        std = torch.sqrt(var) + self.eps
        return (x - mean) / std * self.weight + self.bias""",
            )
        ],
        (5, 7),
        (34, 86),
        extra=[
            (
                "charlm.py",
                """    temperature: float = 1.0,""",
                """    temperature: float = 0.7,""",
            )
        ],
        select=GEN,
    ),
    _multi(
        "m_numel_halved_and_decode_skip_set",
        "reference",
        "gqa.py",
        [
            (
                """    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head""",
                """    per_layer = batch * seq_len * n_kv_heads * d_head
    return n_layers * per_layer""",
            )
        ],
        (6, 7),
        (41, 60),
        extra=[
            (
                "charlm.py",
                """        ids = [int(i) for i in ids]
        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]
        if unknown:
            raise ValueError(f"id {unknown[0]} is not in the vocabulary")
        return "".join(self.itos[i] for i in ids if i != PAD_ID)""",
                """        skip = {PAD_ID, IGNORE_INDEX}
        ids = [int(i) for i in ids if int(i) not in skip]
        unknown = [i for i in ids if i not in self.itos]
        if unknown:
            raise ValueError(f"id {unknown[0]} is not in the vocabulary")
        return "".join(self.itos[i] for i in ids)""",
            )
        ],
        select=DATA,
    ),
    _multi(
        "m_inverted_mask_and_context_ignored",
        "reference",
        "attention.py",
        [
            (
                """            scores = scores.masked_fill(mask, float("-inf"))""",
                """            scores = scores.masked_fill(~mask, float("-inf"))""",
            )
        ],
        (1, 3),
        (8, 21),
        extra=[
            (
                "heads.py",
                """        source = x if context is None else context""",
                """        source = x  # keys and values: the sequence attends to itself""",
            )
        ],
    ),
    _multi(
        "m_padding_strict_and_rms_weight_buffer",
        "reference",
        "masks.py",
        [
            (
                """    return positions >= lengths[:, None]  # (B, t)""",
                """    return positions > lengths[:, None]  # (B, t)""",
            )
        ],
        (2, 5),
        (15, 38),
        extra=[
            (
                "norm.py",
                """        self.weight = nn.Parameter(torch.ones(d))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: divide by the root mean square""",
                """        self.register_buffer("weight", torch.ones(d))
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # TODO: divide by the root mean square""",
            )
        ],
    ),
    _multi(
        "m_angles_float32_and_casefolded_vocab",
        "alice",
        "rope.py",
        [
            (
                """    if dtype is None:
        dtype = torch.get_default_dtype()""",
                """    if dtype is None:
        dtype = torch.float32""",
            )
        ],
        (4, 7),
        (27, 73),
        extra=[
            (
                "charlm.py",
                """        self.chars = sorted(set(text))""",
                """        self.chars = sorted(set(text.casefold()))""",
            )
        ],
        select=DATA,
    ),
    _multi(
        "m_split_view_and_rope_halves",
        "alice",
        "heads.py",
        [
            (
                """    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)
    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)""",
                """    return x.contiguous().view(batch, n_heads, steps, per_head)  # (B, h, T, d_h)""",
            )
        ],
        (3, 4),
        (18, 24),
        extra=[
            (
                "rope.py",
                """    pairs = x.to(real).reshape(*x.shape[:-1], width // 2, 2).contiguous()  # (..., T, d/2, 2)
    turned = torch.view_as_complex(pairs) * spin  # (a + ib) e^{i theta}
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)  # (..., T, d)""",
                """    pairs = x.to(real).reshape(*x.shape[:-1], 2, width // 2).transpose(-1, -2).contiguous()
    turned = torch.view_as_complex(pairs) * spin  # (a + ib) e^{i theta}
    return torch.view_as_real(turned).transpose(-1, -2).flatten(-2).to(x.dtype)""",
            )
        ],
    ),
    _multi(
        "m_rms_centred_cache_dtype_zero_tokens",
        "reference",
        "norm.py",
        [
            (
                """        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)""",
                """        x = x - x.mean(dim=-1, keepdim=True)
        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)""",
            )
        ],
        (5, 6, 7),
        (36, 51, 84),
        extra=[
            (
                "gqa.py",
                """            batch, n_kv_heads, max_len, d_head, device=device, dtype=dtype
        )""",
                """            batch, n_kv_heads, max_len, d_head, device=device
        )""",
            ),
            (
                "charlm.py",
                """    if max_new_tokens < 0:""",
                """    if max_new_tokens <= 0:""",
            ),
        ],
        select=GEN,
    ),
    _multi(
        "m_overflow_partial_write_and_view_loss",
        "reference",
        "gqa.py",
        [
            (
                """        t = k_new.shape[2]
        if self.length + t > self.max_len:
            raise ValueError(
                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"
            )
        self.k[:, :, self.length : self.length + t] = k_new
        self.v[:, :, self.length : self.length + t] = v_new""",
                """        t = k_new.shape[2]
        fits = self.max_len - self.length
        self.k[:, :, self.length : self.length + t] = k_new[:, :, :fits]
        self.v[:, :, self.length : self.length + t] = v_new[:, :, :fits]
        if self.length + t > self.max_len:
            raise ValueError(
                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"
            )""",
            )
        ],
        (6, 7),
        (44, 72),
        extra=[
            (
                "charlm.py",
                """        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1),""",
                """        logits.view(-1, logits.shape[-1]),
        targets.view(-1),""",
            )
        ],
        select=LOSS,
    ),
    _multi(
        "m_unchecked_nan_rows_and_unshifted_mask",
        "alice",
        "attention.py",
        [
            (
                """    dead = banned.all(dim=dim, keepdim=True)
    if bool(dead.any()):
        raise ValueError(
            f"softmax: some slice of x (shape {tuple(x.shape)}) along dim={dim} is all -inf "
            f"({int(dead.sum())} such slice(s)); there is nothing to normalize"
        )
    peak = torch.max(x, dim=dim, keepdim=True).values  # finite: every slice has a finite entry""",
                """    peak = torch.max(x, dim=dim, keepdim=True).values
    peak = torch.nan_to_num(peak, neginf=0.0)""",
            ),
            (
                """        blocked = (scores == _NEG_INF).all(dim=-1)
        if bool(blocked.any()):
            raise ValueError(
                f"mask (shape {tuple(mask.shape)}) prohibits every key for "
                f"{int(blocked.sum())} query row(s); each query needs a permitted key"
            )
""",
                "",
            ),
        ],
        (1, 2),
        (9, 14),
        extra=[
            (
                "masks.py",
                """    return everything.triu(diagonal=shift + 1)""",
                """    return everything.triu(diagonal=1)""",
            )
        ],
    ),
    _multi(
        "m_post_order_prenorm_and_pad_sampled",
        "alice",
        "block.py",
        [
            (
                """        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return mixed + self.ffn(self.ln2(mixed))""",
                """        mixed = self.ln1(x + self.attn(x, mask=mask, cache=cache))
        return self.ln2(mixed + self.ffn(mixed))""",
            )
        ],
        (5, 7),
        (30, 71),
        extra=[
            (
                "charlm.py",
                """    logits = logits.double().clone()
    logits[PAD_ID] = float("-inf")""",
                """    logits = logits.double().clone()""",
            )
        ],
        select=GEN,
    ),
    # ---------------------------------------------------------------- not in the wording list
    _case(
        "u_softmax_sums_last_axis",
        "reference",
        "attention.py",
        [
            (
                """    return exp / exp.sum(dim=dim, keepdim=True)""",
                """    return exp / exp.sum(dim=-1, keepdim=True)""",
            )
        ],
        1,
        None,
        "unknown",
    ),
    _case(
        "u_attention_mask_not_expanded_without_causal",
        "reference",
        "masks.py",
        [
            (
                """    mask = keys_padded.expand(batch, 1, t, t)  # (B, 1, t, t)""",
                """    mask = keys_padded.expand(batch, 1, t, t) if causal else keys_padded""",
            )
        ],
        2,
        None,
        "unknown",
    ),
    _case(
        "u_mha_without_out_proj",
        "reference",
        "heads.py",
        [
            (
                """        return self.out_proj(merge_heads(out))  # (B, Tq, D)""",
                """        return merge_heads(out)  # (B, Tq, D)""",
            )
        ],
        3,
        None,
        "unknown",
    ),
    _case(
        "u_feedforward_gelu",
        "alice",
        "block.py",
        [
            (
                """        return self.fc2(torch.clamp(hidden, min=0))  # (..., d_model)""",
                """        return self.fc2(nn.functional.gelu(hidden))  # (..., d_model)""",
            )
        ],
        5,
        None,
        "unknown",
    ),
    _case(
        "u_reset_clears_buffers_only",
        "reference",
        "gqa.py",
        [
            (
                """        \"\"\"Forget everything cached (``length = 0``).\"\"\"
        # TODO: empty the cache.
        ### BEGIN SOLUTION
        self.length = 0""",
                """        \"\"\"Forget everything cached (``length = 0``).\"\"\"
        # TODO: empty the cache.
        ### BEGIN SOLUTION
        self.k.zero_()
        self.v.zero_()""",
            )
        ],
        6,
        None,
        "unknown",
    ),
    _case(
        "u_encode_drops_unknown_characters",
        "reference",
        "charlm.py",
        [
            (
                """        unknown = [c for c in s if c not in self.stoi]
        if unknown:
            raise ValueError(f"character {unknown[0]!r} is not in the vocabulary")
        return [self.stoi[c] for c in s]""",
                """        return [self.stoi[c] for c in s if c in self.stoi]""",
            )
        ],
        7,
        None,
        "unknown",
        select=DATA,
    ),
    _case(
        "u_epochs_counted_from_zero",
        "reference",
        "charlm.py",
        [
            (
                """                "epoch": epoch,""",
                """                "epoch": epoch - 1,""",
            )
        ],
        7,
        None,
        "unknown",
        select=LOSS,
    ),
    # ---------------------------------------------------------------- correct, another style
    _case(
        "c_attention_einsum_where",
        "reference",
        "attention.py",
        [
            (
                """    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly
    return exp / exp.sum(dim=dim, keepdim=True)""",
                """    shifted = torch.where(torch.isneginf(x), torch.full_like(x, float("-inf")), x - top)
    numer = shifted.exp()
    return numer / numer.sum(dim=dim, keepdim=True)""",
            ),
            (
                """    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)""",
                """    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])""",
            ),
            (
                """            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask""",
                """            blocked = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
            scores = torch.where(mask, blocked, scores)
        else:
            scores = scores + mask.to(scores)""",
            ),
            (
                """    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)""",
                """    return torch.einsum("...qk,...kd->...qd", weights, v), weights""",
            ),
        ],
        1,
        None,
        "correct",
    ),
    _case(
        "c_masks_tril_complement",
        "reference",
        "masks.py",
        [
            (
                """    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    return key_pos > query_pos  # (t_q, t_k)""",
                """    visible = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)
    return ~visible  # (t_q, t_k)""",
            ),
            (
                """    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)
    return positions >= lengths[:, None]  # (B, t)""",
                """    positions = torch.arange(t, device=lengths.device)
    real = positions[None, :] < lengths[:, None]  # (B, t)
    return torch.logical_not(real)""",
            ),
        ],
        2,
        None,
        "correct",
    ),
    _case(
        "c_rope_complex_polar",
        "reference",
        "rope.py",
        [
            (
                """    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)""",
                """    turn = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}, (T, d_head/2)
    pairs = x.reshape(*x.shape[:-1], -1, 2).contiguous()  # (..., T, d_head/2, 2)
    rotated = torch.view_as_complex(pairs) * turn
    return torch.view_as_real(rotated).flatten(-2)  # (..., T, d_head)""",
            )
        ],
        4,
        None,
        "correct",
    ),
    _case(
        "c_norms_rsqrt_centred",
        "reference",
        "norm.py",
        [
            (
                """        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias""",
                """        centred = x - x.mean(dim=-1, keepdim=True)
        var = centred.pow(2).mean(dim=-1, keepdim=True)
        return centred * torch.rsqrt(var + self.eps) * self.weight + self.bias""",
            ),
            (
                """        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight""",
                """        inv_rms = x.pow(2).mean(dim=-1, keepdim=True).add(self.eps).rsqrt()
        return x * inv_rms * self.weight""",
            ),
        ],
        5,
        None,
        "correct",
    ),
    _case(
        "c_gqa_repeat_interleave",
        "reference",
        "gqa.py",
        [
            (
                """    batch, n_kv, t, d = x.shape
    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)
    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)""",
                """    return torch.repeat_interleave(x, n_rep, dim=1)  # (B, h_kv * n_rep, T, d)""",
            ),
            (
                """        self.k[:, :, self.length : self.length + t] = k_new
        self.v[:, :, self.length : self.length + t] = v_new
        self.length += t""",
                """        end = self.length + t
        self.k[:, :, self.length : end].copy_(k_new)
        self.v[:, :, self.length : end].copy_(v_new)
        self.length = end""",
            ),
            (
                """        positions = torch.arange(start, start + t, device=x.device)""",
                """        positions = torch.arange(t, device=x.device) + start""",
            ),
        ],
        6,
        None,
        "correct",
    ),
    _case(
        "c_generate_inference_mode",
        "reference",
        "charlm.py",
        [
            (
                """        with torch.no_grad():
            caches = model.make_caches() if use_cache else None""",
                """        with torch.inference_mode():
            caches = model.make_caches() if use_cache else None""",
            ),
            (
                """        model.train(was_training)
    return ids""",
                """        model.train(was_training)
    return ids.clone()  # a normal tensor outside inference mode""",
            ),
        ],
        7,
        None,
        "correct",
    ),
    _case(
        "c_alice_loss_cross_entropy_device_checks",
        "alice",
        "charlm.py",
        [
            (
                """    log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)
    total = F.nll_loss(log_probs, targets.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum")
    return total if reduction == "sum" else total / count""",
                """    total = F.cross_entropy(
        logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return total if reduction == "sum" else total / count""",
            ),
            (
                """            for inputs, targets in batches:
                targets = targets.to(device)""",
                """            for inputs, targets in batches:
                if targets.device != device:
                    targets = targets.to(device)""",
            ),
        ],
        7,
        None,
        "correct",
    ),
]

SIXTH = tuple(CASES)
