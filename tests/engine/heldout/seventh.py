"""The seventh held-out set: student solutions written blind to the grader's mistake catalogue.

Each case edits the reference solution or Alice's solution (see ``mistakes.py`` for the
``Case`` fields). The descriptions below are copied from the grader's wording list.
"""

from tests.engine.heldout.mistakes import Case

D01 = "the mask applied after the softmax, then renormalized: the prohibited keys' weights enter the softmax's sum first, so the permitted ones come out wrong"
D02 = "mask applied after the softmax: the weights of prohibited keys are zeroed but the rows no longer sum to 1; mask the scores before the softmax"
D03 = "scores not scaled by 1/sqrt(d_k)"
D04 = "scores scaled by 1/d_k instead of 1/sqrt(d_k)"
D05 = "scores scaled by 1/sqrt(d_v) instead of 1/sqrt(d_k)"
D06 = "softmax over the queries axis (dim=-2) instead of the keys (dim=-1)"
D07 = "no max subtraction in the softmax: exp overflows on large scores"
D08 = "bool mask inverted (True treated as permitted; True means prohibited)"
D09 = "a fully masked row gives NaN instead of raising ValueError"
D10 = "an in-place operation on an argument (`x -= ...`, `x[...] = ...`, `x.add_(...)`): work on a new tensor"
D11 = "a .detach() or a tensor built anew cuts the computation off from the inputs, so no gradient flows back"
D12 = "a tensor made on the CPU: torch.arange/zeros/ones/full/tensor(...) without device= stays there; pass the input's device"
D13 = "causal mask also hides the diagonal (a query must see its own key)"
D14 = "causal mask ignores the t_k > t_q offset (queries are the LAST t_q positions)"
D15 = "padding mask off by one (the first padded position is lengths[b])"
D16 = "a mask made on the CPU: torch.arange(...) without device= (causal_mask's device, or the lengths' device)"
D17 = "d_head = d_model / n_heads gives a float; use d_model // n_heads"
D18 = "split_heads reshapes straight to (B, h, T, d_h) without the transpose"
D19 = "merge_heads reshapes (B, h, T, d_h) to (B, T, D) without the transpose"
D20 = "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head)"
D21 = "cross-attention takes keys and values from x instead of context"
D22 = "mask=None with a cache treated as a causal mask; None means no masking"
D23 = "a float mask turned into a bool one (nonzero = prohibited); a float mask is added to the scores"
D24 = "half-split (rotate_half) pairing of i with i + d/2 instead of the interleaved pairs (x[2i], x[2i+1])"
D25 = "rotation in the wrong direction (the sign of sin is flipped)"
D26 = "frequencies base ** (-i / d_head) instead of base ** (-2 i / d_head)"
D27 = "dtype=None taken as a fixed float32; it means torch.get_default_dtype()"
D28 = "positions ignored (arange(T) used instead)"
D29 = "the residual adds the normalized tensor (h = ln1(x) + attn(ln1(x))); add the incoming x"
D30 = "the norms come after the additions (post-norm order) in the pre-norm block"
D31 = "mask=None treated as a causal mask; None means no masking"
D32 = "the mask is not passed on to attn when a cache is given"
D33 = "LayerNorm with the unbiased variance (divide by d - 1); it must divide by d"
D34 = "eps added outside the square root: use sqrt(var + eps)"
D35 = "the variance taken as E[x^2] - E[x]^2, which loses the digits of rows far from zero; take the mean of (x - mean)^2"
D36 = "RMSNorm subtracts the mean; it must not (that is LayerNorm)"
D37 = "the values are right but the gradient is not: an intermediate (a statistic) is .detach()ed or computed outside autograd"
D38 = "a parameter kept as a buffer or a plain tensor never trains; make it an nn.Parameter"
D39 = "only k_new is checked; v_new needs the same dtype, device and shape checks"
D40 = "key/value heads tiled (repeat) instead of each repeated for its group (repeat_interleave)"
D41 = "the factor 2 is missing (keys AND values are cached)"
D42 = "counts bytes (4 per float32 element), not elements"
D43 = "the cache receives n_heads (repeated) key/value heads; append the n_kv_heads heads before repeating them"
D44 = "the overflowing append wrote the positions that fit; an append that overflows must write nothing"
D45 = "k_new and v_new are each checked, but not against each other"
D46 = "RoPE rotates the values too; it rotates queries and keys only"
D47 = "append does not advance length"
D48 = "RoPE positions not offset by the cache length: with a cache, q and k sit at cache.length + arange(T)"
D49 = "rope_base ignored: RoPE used the default base 10000"
D50 = "length kept as a tensor: keep an int (add k_new.shape[2] to it)"
D51 = "the cache's dtype follows torch.get_default_dtype() instead of the dtype it is given"
D52 = "append refuses to fill the cache up to max_len exactly (it overflows only when length + t > max_len)"
D53 = "the check for no real target made only under reduction='mean'"
D54 = "the log of a softmax: the softmax underflows to 0 on logits far apart, and its log is -inf"
D55 = "evaluate needs more of its batches than one pass (a second loop, len() or indexing)"
D56 = "model.eval() is not called before the loop"
D57 = "evaluate builds a graph: run its loop under torch.no_grad()"
D58 = "use_cache is ignored (or defaults to False): with it, make the caches and feed only the newest token"
D59 = "the prompt fed to the model token by token instead of in one forward pass"
D60 = "decode skips IGNORE_INDEX as well as PAD_ID; only PAD_ID is skipped"
D61 = "a character got id 0, which is PAD_ID: ids must start at 1"
D62 = "left padding: pad at the END of each row (right padding)"
D63 = "targets not shifted: targets are s[1:], inputs s[:-1]"
D64 = "padding scored as a target of class 0 instead of being ignored"
D65 = "mean of batch means (the notebook's epoch average) instead of total loss / total tokens"
D66 = "evaluate leaves the model in eval mode (restore the previous mode)"
D67 = "the mode is restored after the loop, not in a finally: block"
D68 = "a size hard-coded to 128 (mask, position table, cache) instead of max_len"
D69 = "cached generation re-feeds the whole sequence, not only the newest token"
D70 = "positions restart at 0 in each chunk instead of continuing from the cache"
D71 = "PAD_ID's logit is not excluded before sampling or argmax (set it to -inf)"
D72 = "`.view(...)` on a tensor that is not contiguous: use `.reshape(...)` instead"
D73 = "the vocabulary is not the text's own characters (changed case?)"
D74 = "one KVCache shared by every block ([KVCache(...)] * n_layers); each block needs its own"
D75 = "train_loss measured after the epoch's updates instead of averaged over the epoch's batches as they train"
D76 = "the running training loss is not reset at each epoch"
D77 = "zero_grad called once per epoch, not before each batch's backward (the gradients of the epoch's batches add up)"
D78 = "one optimizer step per epoch on the gradients of all its batches, not one step per batch"
D79 = (
    "optimizer.step() after the batch loop: only the last batch's gradients are applied"
)
D80 = "the default lr is not 1e-3"
D81 = "a prompt that is not a 1-D tensor of an integer dtype raises ValueError; never cast it"
D82 = "temperature <= 0 is only an error when sampling (greedy ignores it)"
D83 = "max_new_tokens=0 still generated a token: the prompt alone comes back"
D84 = "max_new_tokens=0 is refused: the prompt followed by 0 new ids is the prompt"
D85 = "the distribution is truncated (top-k or top-p) before sampling; sample from all of it"
D86 = "the default temperature is not 1.0"
D87 = "a default of CharLM.__init__ differs from SPEC.md's"
D88 = "evaluate's batches not moved to the model's device"
D89 = "generate's prompt not moved to the model's device"

CASES: list[Case] = []


def add(name, base, file, edits, part, expected, kind, **kw):
    """Record one case (``base`` is "reference" or "alice")."""
    CASES.append(Case(name, base, file, tuple(edits), part, expected, kind, **kw))


# ---------------------------------------------------------------- part 1: attention.py

add(
    "s7_attn_einsum_unscaled",
    "reference",
    "attention.py",
    [
        (
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)",
            'scores = torch.einsum("...qd,...kd->...qk", q, k)  # (..., Tq, Tk)',
        )
    ],
    1,
    D03,
    "rewritten",
)
add(
    "s7_attn_alice_inverse_dk",
    "alice",
    "attention.py",
    [
        (
            'scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)',
            'scale = 1.0 / d_k\n    scores = torch.einsum("...id,...jd->...ij", q, k) * scale  # (..., Tq, Tk)',
        )
    ],
    1,
    D04,
    "rewritten",
)
add(
    "s7_attn_scale_from_values",
    "reference",
    "attention.py",
    [
        (
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)",
            (
                "width = v.size(-1)  # head width\n"
                "    scores = q @ k.transpose(-2, -1) * width**-0.5  # (..., Tq, Tk)"
            ),
        )
    ],
    1,
    D05,
    "rewritten",
)
add(
    "s7_attn_softmax_transposed",
    "reference",
    "attention.py",
    [
        (
            "weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
            (
                "# normalise each key column over the queries that look at it\n"
                "    weights = softmax(scores.transpose(-2, -1)).transpose(-2, -1)  # (..., Tq, Tk)"
            ),
        )
    ],
    1,
    D06,
    "rewritten",
)
add(
    "s7_attn_alice_plain_exp",
    "alice",
    "attention.py",
    [
        (
            (
                "    peak = torch.max(x, dim=dim, keepdim=True).values  # finite: every slice has a finite entry\n"
                "    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))\n"
            ),
            "    expo = x.exp().masked_fill(banned, 0.0)  # exp(-inf) is 0 anyway\n",
        )
    ],
    1,
    D07,
    "rewritten",
)
add(
    "s7_attn_alice_where_swapped",
    "alice",
    "attention.py",
    [
        (
            "return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
            (
                "keep = mask  # positions to attend to\n"
                "        return torch.where(keep, scores, torch.full_like(scores, _NEG_INF))"
            ),
        )
    ],
    1,
    D08,
    "rewritten",
)
add(
    "s7_attn_softmax_no_dead_check",
    "reference",
    "attention.py",
    [
        (
            (
                "    top = x.amax(dim=dim, keepdim=True)\n"
                "    if torch.isneginf(top).any():\n"
                "        raise ValueError(\n"
                '            f"softmax: x has a slice along dim={dim} that is entirely -inf"\n'
                "        )\n"
            ),
            "    top = x.amax(dim=dim, keepdim=True)\n",
        )
    ],
    1,
    D09,
    "partial",
)
add(
    "s7_attn_inline_softmax_nan",
    "reference",
    "attention.py",
    [
        (
            (
                "    if torch.isneginf(scores).all(dim=-1).any():\n"
                '        raise ValueError("mask prohibits every key for at least one query row")\n'
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
            ),
            (
                "    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))\n"
                "    weights = e / e.sum(dim=-1, keepdim=True)  # (..., Tq, Tk)\n"
            ),
        )
    ],
    1,
    D09,
    "rewritten",
)
add(
    "s7_attn_renormalise_after",
    "reference",
    "attention.py",
    [
        (
            (
                "        if mask.dtype == torch.bool:\n"
                '            scores = scores.masked_fill(mask, float("-inf"))\n'
                "        else:\n"
                "            scores = scores + mask\n"
                "    if torch.isneginf(scores).all(dim=-1).any():\n"
                '        raise ValueError("mask prohibits every key for at least one query row")\n'
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
            ),
            (
                "        if mask.dtype != torch.bool:\n"
                "            scores = scores + mask\n"
                "        elif mask.all(dim=-1).any():\n"
                '            raise ValueError("mask prohibits every key for at least one query row")\n'
                "    if torch.isneginf(scores).all(dim=-1).any():\n"
                '        raise ValueError("mask prohibits every key for at least one query row")\n'
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                "    if mask is not None and mask.dtype == torch.bool:\n"
                "        weights = weights.masked_fill(mask, 0.0)\n"
                "        weights = weights / weights.sum(dim=-1, keepdim=True)  # renormalise\n"
            ),
        )
    ],
    1,
    D01,
    "rewritten",
)
add(
    "s7_attn_bool_mask_zeroes_weights",
    "reference",
    "attention.py",
    [
        (
            (
                "        if mask.dtype == torch.bool:\n"
                '            scores = scores.masked_fill(mask, float("-inf"))\n'
                "        else:\n"
                "            scores = scores + mask\n"
            ),
            (
                "        if mask.dtype == torch.bool:\n"
                "            if mask.all(dim=-1).any():\n"
                '                raise ValueError("mask prohibits every key for a query row")\n'
                "        else:\n"
                "            scores = scores + mask\n"
            ),
        ),
        (
            "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n",
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                "    if mask is not None and mask.dtype == torch.bool:\n"
                "        weights = weights.masked_fill(mask, 0.0)\n"
            ),
        ),
    ],
    1,
    D02,
    "partial",
)
add(
    "s7_attn_scale_q_inplace",
    "reference",
    "attention.py",
    [
        (
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)",
            (
                "q /= math.sqrt(q.shape[-1])  # scale the queries once\n"
                "    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)"
            ),
        )
    ],
    1,
    D10,
    "rewritten",
)
add(
    "s7_attn_scores_data",
    "reference",
    "attention.py",
    [
        (
            (
                "    if q.shape[-1] != k.shape[-1]:\n"
                '        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]}")\n'
                "    if k.shape[-2] != v.shape[-2]:\n"
                '        raise ValueError(f"k has Tk={k.shape[-2]} but v has Tk={v.shape[-2]}")\n'
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)\n"
                "    if mask is not None:\n"
                "        try:\n"
                "            mask = mask.expand(scores.shape)  # (..., Tq, Tk)\n"
                "        except RuntimeError:\n"
                "            raise ValueError(\n"
                '                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores\' "\n'
                '                f"shape {tuple(scores.shape)}"\n'
                "            ) from None\n"
                "        if mask.dtype == torch.bool:\n"
                '            scores = scores.masked_fill(mask, float("-inf"))\n'
                "        else:\n"
                "            scores = scores + mask\n"
                "    if torch.isneginf(scores).all(dim=-1).any():\n"
                '        raise ValueError("mask prohibits every key for at least one query row")\n'
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)\n"
            ),
            (
                "    d_k = q.shape[-1]\n"
                "    if k.shape[-1] != d_k:\n"
                '        raise ValueError(f"q has d_k={d_k} but k has d_k={k.shape[-1]}")\n'
                "    if v.shape[-2] != k.shape[-2]:\n"
                '        raise ValueError(f"k has Tk={k.shape[-2]} but v has Tk={v.shape[-2]}")\n'
                "    logits = torch.matmul(q, k.transpose(-1, -2)).data / math.sqrt(d_k)\n"
                "    if mask is not None:\n"
                "        try:\n"
                "            mask = mask.expand(logits.shape)\n"
                "        except RuntimeError:\n"
                "            raise ValueError(\n"
                '                f"mask of shape {tuple(mask.shape)} does not broadcast to {tuple(logits.shape)}"\n'
                "            ) from None\n"
                "        if mask.dtype == torch.bool:\n"
                '            logits = logits.masked_fill(mask, float("-inf"))\n'
                "        else:\n"
                "            logits = logits + mask\n"
                "    if torch.isneginf(logits).all(dim=-1).any():\n"
                '        raise ValueError("mask prohibits every key for at least one query row")\n'
                "    attn = softmax(logits, dim=-1)  # (..., Tq, Tk)\n"
                "    return torch.matmul(attn, v), attn\n"
            ),
        )
    ],
    1,
    D11,
    "refactor",
)
add(
    "s7_attn_neg_fill_cpu",
    "reference",
    "attention.py",
    [
        (
            '            scores = scores.masked_fill(mask, float("-inf"))\n',
            (
                '            blocked = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)\n'
                "            scores = torch.where(mask, blocked, scores)\n"
            ),
        )
    ],
    1,
    D12,
    "partial",
)
add(
    "s7_attn_no_tk_check",
    "reference",
    "attention.py",
    [
        (
            (
                "    if k.shape[-2] != v.shape[-2]:\n"
                '        raise ValueError(f"k has Tk={k.shape[-2]} but v has Tk={v.shape[-2]}")\n'
            ),
            "",
        )
    ],
    1,
    None,
    "unknown",
)
add(
    "s7_attn_alice_softmax_subtract_inplace",
    "alice",
    "attention.py",
    [
        (
            (
                "    peak = torch.max(x, dim=dim, keepdim=True).values  # finite: every slice has a finite entry\n"
                "    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))\n"
                "    return expo / expo.sum(dim=dim, keepdim=True)\n"
            ),
            (
                "    x.sub_(x.amax(dim=dim, keepdim=True))  # shift for stability\n"
                "    weights = torch.exp(x).masked_fill(banned, 0.0)\n"
                "    return weights / weights.sum(dim=dim, keepdim=True)\n"
            ),
        )
    ],
    1,
    D10,
    "refactor",
)

# ---------------------------------------------------------------- part 2: masks.py

add(
    "s7_mask_alice_tril_complement",
    "alice",
    "masks.py",
    [
        (
            (
                "    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)\n"
                "    return everything.triu(diagonal=shift + 1)\n"
            ),
            (
                "    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)\n"
                "    visible = everything.tril(diagonal=shift - 1)  # keys a query may read\n"
                "    return ~visible\n"
            ),
        )
    ],
    2,
    D13,
    "refactor",
)
add(
    "s7_mask_causal_loop",
    "reference",
    "masks.py",
    [
        (
            (
                "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
                "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n"
                "    return key_pos > query_pos  # (t_q, t_k)\n"
            ),
            (
                "    mask = torch.zeros(t_q, t_k, dtype=torch.bool, device=device)\n"
                "    for i in range(t_q):\n"
                "        mask[i, i + 1 :] = True  # keys after query i\n"
                "    return mask\n"
            ),
        )
    ],
    2,
    D14,
    "rewritten",
)
add(
    "s7_mask_alice_keep_le",
    "alice",
    "masks.py",
    [("    return where >= limit\n", "    keep = where <= limit\n    return ~keep\n")],
    2,
    D15,
    "rewritten",
)
add(
    "s7_mask_keypos_cpu",
    "reference",
    "masks.py",
    [
        (
            "key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)",
            "key_pos = torch.arange(t_k)[None, :]  # (1, t_k)",
        )
    ],
    2,
    D16,
    "partial",
)
add(
    "s7_mask_attention_mask_cpu_causal",
    "reference",
    "masks.py",
    [
        (
            "mask = mask | causal_mask(t, device=keys_padded.device)",
            "mask = mask | causal_mask(t)",
        )
    ],
    2,
    D16,
    "moved",
)
add(
    "s7_mask_noncausal_unexpanded",
    "reference",
    "masks.py",
    [
        (
            "    mask = keys_padded.expand(batch, 1, t, t)  # (B, 1, t, t)\n",
            "    mask = keys_padded  # broadcasts over the queries\n",
        )
    ],
    2,
    None,
    "unknown",
)

# ---------------------------------------------------------------- part 3: heads.py

add(
    "s7_heads_alice_true_division",
    "alice",
    "heads.py",
    [("self.d_head = d_model // n_heads", "self.d_head = d_model / n_heads")],
    3,
    D17,
    "rewritten",
)
add(
    "s7_heads_alice_view_straight",
    "alice",
    "heads.py",
    [
        (
            (
                "    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)\n"
                "    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)\n"
            ),
            "    return x.contiguous().view(batch, n_heads, steps, per_head)  # (B, h, T, d_h)\n",
        )
    ],
    3,
    D18,
    "rewritten",
)
add(
    "s7_heads_merge_flatten",
    "reference",
    "heads.py",
    [
        (
            "return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
            "return x.flatten(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
        )
    ],
    3,
    D19,
    "rewritten",
)
add(
    "s7_heads_alice_inline_dmodel",
    "alice",
    "heads.py",
    [
        (
            "from .attention import scaled_dot_product_attention\n",
            "import math\n\nfrom .attention import softmax\n",
        ),
        (
            "        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
            (
                "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)\n"
                "        if mask is not None:\n"
                "            if mask.dtype == torch.bool:\n"
                '                scores = scores.masked_fill(mask, float("-inf"))\n'
                "            else:\n"
                "                scores = scores + mask\n"
                "        mixed = softmax(scores, dim=-1) @ v  # (B, h, Tq, d_h)\n"
            ),
        ),
    ],
    3,
    D20,
    "rewritten",
)
add(
    "s7_heads_values_from_x",
    "reference",
    "heads.py",
    [
        (
            "v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)",
            "v = split_heads(self.v_proj(x), self.n_heads)  # (B, h, Tk, d_h)",
        )
    ],
    3,
    D21,
    "partial",
)
add(
    "s7_heads_alice_projection_loop",
    "alice",
    "heads.py",
    [
        (
            (
                "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)\n"
                "        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
                "        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
            ),
            (
                "        q, k, v = (\n"
                "            split_heads(proj(x), self.n_heads)\n"
                "            for proj in (self.q_proj, self.k_proj, self.v_proj)\n"
                "        )  # (B, h, T, d_h) each\n"
            ),
        )
    ],
    3,
    D21,
    "refactor",
)
add(
    "s7_heads_cache_default_causal",
    "reference",
    "heads.py",
    [
        (
            "from transformer_hw.attention import scaled_dot_product_attention\n",
            (
                "from transformer_hw.attention import scaled_dot_product_attention\n"
                "from transformer_hw.masks import causal_mask\n"
            ),
        ),
        (
            "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n",
            (
                "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n"
                "            if mask is None:  # decoding: never peek at later tokens\n"
                "                mask = causal_mask(q.shape[2], k.shape[2], device=q.device)\n"
            ),
        ),
    ],
    3,
    D22,
    "partial",
)
add(
    "s7_heads_float_mask_nonzero",
    "reference",
    "heads.py",
    [
        (
            "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
            (
                "        if mask is not None and mask.dtype != torch.bool:\n"
                "            mask = mask != 0  # nonzero entries block the key\n"
                "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n"
            ),
        )
    ],
    3,
    D23,
    "rewritten",
)
add(
    "s7_heads_merge_transpose_inplace",
    "reference",
    "heads.py",
    [
        (
            "return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
            (
                "x.transpose_(1, 2)  # (B, T, h, d_h)\n"
                "    return x.reshape(batch, t, n_heads * d_head)  # (B, T, D)"
            ),
        )
    ],
    3,
    D10,
    "rewritten",
)
add(
    "s7_heads_no_out_proj",
    "reference",
    "heads.py",
    [
        (
            "return self.out_proj(merge_heads(out))  # (B, Tq, D)",
            "return merge_heads(out)  # (B, Tq, D)",
        )
    ],
    3,
    None,
    "unknown",
)

# ---------------------------------------------------------------- part 4: rope.py

add(
    "s7_rope_halves_cat",
    "reference",
    "rope.py",
    [
        (
            (
                "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                "    rotated = torch.stack(\n"
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                "    )  # (..., T, d/2, 2)\n"
                "    return rotated.flatten(-2)  # (..., T, d_head)\n"
            ),
            (
                "    half = x.shape[-1] // 2\n"
                "    a, b = x[..., :half], x[..., half:]  # (..., T, d_head/2) each\n"
                "    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)\n"
            ),
        )
    ],
    4,
    D24,
    "rewritten",
)
add(
    "s7_rope_renamed_backwards",
    "reference",
    "rope.py",
    [
        (
            (
                "    cos, sin = angles.cos(), angles.sin()\n"
                "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                "    rotated = torch.stack(\n"
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                "    )  # (..., T, d/2, 2)\n"
            ),
            (
                "    c, s = torch.cos(angles), torch.sin(angles)\n"
                "    even, odd = x[..., ::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                "    rotated = torch.stack((even * c + odd * s, odd * c - even * s), dim=-1)\n"
            ),
        )
    ],
    4,
    D25,
    "refactor",
)
add(
    "s7_rope_alice_arange_half",
    "alice",
    "rope.py",
    [
        (
            "pair = torch.arange(0, d_head, 2, device=positions.device, dtype=work)  # 2i",
            "pair = torch.arange(d_head // 2, device=positions.device, dtype=work)  # i",
        )
    ],
    4,
    D26,
    "rewritten",
)
add(
    "s7_rope_dtype_default_arg",
    "reference",
    "rope.py",
    [
        (
            "positions: torch.Tensor, d_head: int, base: float = 10000.0, dtype=None\n",
            "positions: torch.Tensor, d_head: int, base: float = 10000.0, dtype=torch.float32\n",
        )
    ],
    4,
    D27,
    "moved",
)
add(
    "s7_rope_alice_angles_arange",
    "alice",
    "rope.py",
    [
        (
            "angles = torch.outer(positions.reshape(-1).to(work), inverse_freq)  # (T, d/2)",
            (
                "steps = torch.arange(positions.numel(), device=positions.device, dtype=work)\n"
                "    angles = torch.outer(steps, inverse_freq)  # (T, d/2)"
            ),
        )
    ],
    4,
    D28,
    "moved",
)
add(
    "s7_rope_validated_then_arange",
    "reference",
    "rope.py",
    [
        (
            "angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)",
            (
                "steps = torch.arange(t, device=x.device)\n"
                "    angles = rope_angles(steps, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)"
            ),
        )
    ],
    4,
    D28,
    "partial",
)
add(
    "s7_rope_write_back_into_x",
    "reference",
    "rope.py",
    [
        (
            (
                "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                "    rotated = torch.stack(\n"
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                "    )  # (..., T, d/2, 2)\n"
                "    return rotated.flatten(-2)  # (..., T, d_head)\n"
            ),
            (
                "    a, b = x[..., 0::2].clone(), x[..., 1::2].clone()  # (..., T, d_head/2) each\n"
                "    x[..., 0::2] = a * cos - b * sin\n"
                "    x[..., 1::2] = a * sin + b * cos\n"
                "    return x  # (..., T, d_head)\n"
            ),
        )
    ],
    4,
    D10,
    "rewritten",
)
add(
    "s7_rope_pair_index_cpu",
    "reference",
    "rope.py",
    [
        (
            (
                "    pair = torch.arange(\n"
                "        d_head // 2, device=positions.device, dtype=dtype\n"
                "    )  # (d_head/2,)\n"
            ),
            "    pair = torch.arange(d_head // 2, dtype=dtype)  # (d_head/2,)\n",
        )
    ],
    4,
    D12,
    "rewritten",
)
add(
    "s7_rope_odd_width_floor",
    "reference",
    "rope.py",
    [
        (
            (
                "    if d_head % 2 != 0:\n"
                '        raise ValueError(f"d_head={d_head} must be even (RoPE rotates pairs)")\n'
            ),
            "",
        )
    ],
    4,
    None,
    "unknown",
)

# ---------------------------------------------------------------- part 5: norm.py, block.py

add(
    "s7_block_normed_residual",
    "reference",
    "block.py",
    [
        (
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                "        return h + self.ffn(self.ln2(h))\n"
            ),
            (
                "        normed = self.ln1(x)\n"
                "        hidden = normed + self.attn(normed, mask=mask, cache=cache)\n"
                "        return hidden + self.ffn(self.ln2(hidden))\n"
            ),
        )
    ],
    5,
    D29,
    "refactor",
)
add(
    "s7_block_alice_shared_sublayer",
    "alice",
    "block.py",
    [
        (
            "        self.ffn = FeedForward(d_model, d_ff)\n",
            (
                "        self.ffn = FeedForward(d_model, d_ff)\n"
                "\n"
                "    def _sublayer(self, x, norm, layer):\n"
                '        """One residual sub-layer: add, then normalize."""\n'
                "        return norm(x + layer(x))\n"
            ),
        ),
        (
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                "        return mixed + self.ffn(self.ln2(mixed))\n"
            ),
            (
                "        mixed = self._sublayer(\n"
                "            x, self.ln1, lambda y: self.attn(y, mask=mask, cache=cache)\n"
                "        )\n"
                "        return self._sublayer(mixed, self.ln2, self.ffn)\n"
            ),
        ),
    ],
    5,
    D30,
    "moved",
)
add(
    "s7_block_prenorm_default_causal",
    "reference",
    "block.py",
    [
        (
            "from transformer_hw.heads import MultiHeadAttention\n",
            (
                "from transformer_hw.heads import MultiHeadAttention\n"
                "from transformer_hw.masks import causal_mask\n"
            ),
        ),
        (
            "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
            (
                "        if mask is None:\n"
                "            past = 0 if cache is None else cache.length\n"
                "            mask = causal_mask(x.shape[1], past + x.shape[1], device=x.device)\n"
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
            ),
        ),
    ],
    5,
    D31,
    "partial",
)
add(
    "s7_block_alice_cache_branch",
    "alice",
    "block.py",
    [
        (
            "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
            (
                "        if cache is None:\n"
                "            mixed = x + self.attn(self.ln1(x), mask=mask)\n"
                "        else:\n"
                "            mixed = x + self.attn(self.ln1(x), cache=cache)\n"
            ),
        )
    ],
    5,
    D32,
    "partial",
)
add(
    "s7_norm_sum_over_d_minus_1",
    "reference",
    "norm.py",
    [
        (
            "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n",
            (
                "        centred = x - mean\n"
                "        var = (centred * centred).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)\n"
            ),
        )
    ],
    5,
    D33,
    "rewritten",
)
add(
    "s7_norm_alice_sqrt_plus_eps",
    "alice",
    "norm.py",
    [
        (
            "return (x - centre) * torch.rsqrt(spread + self.eps)",
            "return (x - centre) / (spread.sqrt() + self.eps)",
        )
    ],
    5,
    D34,
    "rewritten",
)
add(
    "s7_norm_rms_eps_outside",
    "reference",
    "norm.py",
    [
        (
            "rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
            "rms = (x * x).mean(dim=-1, keepdim=True).sqrt() + self.eps",
        )
    ],
    5,
    D34,
    "partial",
)
add(
    "s7_norm_moment_variance",
    "reference",
    "norm.py",
    [
        (
            "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
            "var = (x**2).mean(dim=-1, keepdim=True) - mean**2  # biased",
        )
    ],
    5,
    D35,
    "rewritten",
)
add(
    "s7_norm_alice_centre_in_base",
    "alice",
    "norm.py",
    [
        (
            (
                "        _check_last(x, self.d, type(self).__name__)\n"
                "        return self.normalize(x) * self.weight\n"
            ),
            (
                "        _check_last(x, self.d, type(self).__name__)\n"
                "        x = x - x.mean(dim=-1, keepdim=True)  # centre once, for both norms\n"
                "        return self.normalize(x) * self.weight\n"
            ),
        )
    ],
    5,
    D36,
    "moved",
)
add(
    "s7_norm_var_of_detached",
    "reference",
    "norm.py",
    [
        (
            (
                "        mean = x.mean(dim=-1, keepdim=True)\n"
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
                "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
            ),
            (
                "        centred = x - x.mean(dim=-1, keepdim=True)\n"
                "        std = torch.sqrt(\n"
                "            x.detach().var(dim=-1, unbiased=False, keepdim=True) + self.eps\n"
                "        )\n"
                "        return self.weight * (centred / std) + self.bias\n"
            ),
        )
    ],
    5,
    D37,
    "refactor",
)
add(
    "s7_norm_alice_rms_no_grad_scale",
    "alice",
    "norm.py",
    [
        (
            "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
            (
                "        with torch.no_grad():\n"
                "            scale = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
                "        return x * scale\n"
            ),
        )
    ],
    5,
    D37,
    "partial",
)
add(
    "s7_norm_alice_weight_buffer",
    "alice",
    "norm.py",
    [
        (
            "self.weight = nn.Parameter(torch.ones(d))",
            'self.register_buffer("weight", torch.ones(d))',
        )
    ],
    5,
    D38,
    "moved",
)
add(
    "s7_norm_bias_plain_tensor",
    "reference",
    "norm.py",
    [
        (
            "self.bias = nn.Parameter(torch.zeros(d))",
            "self.bias = torch.zeros(d)",
        )
    ],
    5,
    D38,
    "partial",
)
add(
    "s7_norm_centre_inplace",
    "reference",
    "norm.py",
    [
        (
            (
                "        mean = x.mean(dim=-1, keepdim=True)\n"
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
                "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
            ),
            (
                "        x -= x.mean(dim=-1, keepdim=True)\n"
                "        var = (x**2).mean(dim=-1, keepdim=True)  # biased\n"
                "        return x / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
            ),
        )
    ],
    5,
    D10,
    "rewritten",
)
add(
    "s7_block_alice_gelu",
    "alice",
    "block.py",
    [
        (
            "return self.fc2(torch.clamp(hidden, min=0))  # (..., d_model)",
            "return self.fc2(torch.nn.functional.gelu(hidden))  # (..., d_model)",
        )
    ],
    5,
    None,
    "unknown",
)

# ---------------------------------------------------------------- part 6: gqa.py

add(
    "s7_gqa_alice_check_k_only",
    "alice",
    "gqa.py",
    [
        (
            '        self._check(k_new, "k_new")\n        self._check(v_new, "v_new")\n',
            '        self._check(k_new, "k_new")\n',
        )
    ],
    6,
    D39,
    "partial",
)
add(
    "s7_gqa_expand_outer_axis",
    "reference",
    "gqa.py",
    [
        (
            "x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)",
            "x = x[:, None].expand(batch, n_rep, n_kv, t, d)  # (B, n_rep, h_kv, T, d)",
        )
    ],
    6,
    D40,
    "rewritten",
)
add(
    "s7_gqa_alice_group_axis_swapped",
    "alice",
    "gqa.py",
    [
        (
            "grouped_q = q.reshape(batch, groups, rep, steps, dh)  # head j -> (j // rep, j % rep)",
            "grouped_q = q.reshape(batch, rep, groups, steps, dh).transpose(1, 2)  # kv head j % groups",
        ),
        (
            "mixed = mixed.reshape(batch, self.n_heads, steps, dh).permute(0, 2, 1, 3)",
            "mixed = mixed.transpose(1, 2).reshape(batch, self.n_heads, steps, dh).permute(0, 2, 1, 3)",
        ),
    ],
    6,
    D40,
    "moved",
)
add(
    "s7_gqa_numel_size_product",
    "reference",
    "gqa.py",
    [
        (
            "return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
            "return torch.Size([batch, n_layers, seq_len, n_kv_heads, d_head]).numel()",
        )
    ],
    6,
    D41,
    "rewritten",
)
add(
    "s7_gqa_alice_numel_bytes",
    "alice",
    "gqa.py",
    [
        (
            "    return int(total)\n",
            (
                "    bytes_per_entry = torch.finfo(torch.float32).bits // 8\n"
                "    return int(total) * bytes_per_entry\n"
            ),
        )
    ],
    6,
    D42,
    "rewritten",
)
add(
    "s7_gqa_repeat_before_cache",
    "reference",
    "gqa.py",
    [
        (
            (
                "        if cache is not None:\n"
                "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n"
                "        n_rep = self.n_heads // self.n_kv_heads\n"
                "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)\n"
                "        out, _ = scaled_dot_product_attention(\n"
                "            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask\n"
                "        )\n"
            ),
            (
                "        n_rep = self.n_heads // self.n_kv_heads\n"
                "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, h, T, d_h)\n"
                "        if cache is not None:\n"
                "            k, v = cache.append(k, v)  # (B, h, start + T, d_h)\n"
                "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)\n"
                "        out, _ = scaled_dot_product_attention(q, k, v, mask)\n"
            ),
        )
    ],
    6,
    D43,
    "rewritten",
)
add(
    "s7_gqa_write_what_fits",
    "reference",
    "gqa.py",
    [
        (
            (
                "        t = k_new.shape[2]\n"
                "        if self.length + t > self.max_len:\n"
                "            raise ValueError(\n"
                '                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"\n'
                "            )\n"
                "        self.k[:, :, self.length : self.length + t] = k_new\n"
                "        self.v[:, :, self.length : self.length + t] = v_new\n"
            ),
            (
                "        t = k_new.shape[2]\n"
                "        fit = min(t, self.max_len - self.length)\n"
                "        self.k[:, :, self.length : self.length + fit] = k_new[:, :, :fit]\n"
                "        self.v[:, :, self.length : self.length + fit] = v_new[:, :, :fit]\n"
                "        if fit < t:\n"
                "            raise ValueError(\n"
                '                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"\n'
                "            )\n"
            ),
        )
    ],
    6,
    D44,
    "rewritten",
)
add(
    "s7_gqa_alice_no_pair_check",
    "alice",
    "gqa.py",
    [
        (
            (
                "        if k_new.shape[2] != v_new.shape[2]:\n"
                "            raise ValueError(\n"
                '                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} hold different t"\n'
                "            )\n"
            ),
            "",
        )
    ],
    6,
    D45,
    "rewritten",
)
add(
    "s7_gqa_rope_all_three",
    "reference",
    "gqa.py",
    [
        (
            (
                "        q = apply_rope(q, positions, self.rope_base)\n"
                "        k = apply_rope(k, positions, self.rope_base)\n"
            ),
            "        q, k, v = (apply_rope(p, positions, self.rope_base) for p in (q, k, v))\n",
        )
    ],
    6,
    D46,
    "refactor",
)
add(
    "s7_gqa_length_advanced_by_caller",
    "reference",
    "gqa.py",
    [
        (
            (
                "        self.length += t\n"
                "        return self.k[:, :, : self.length], self.v[:, :, : self.length]\n"
            ),
            (
                "        end = self.length + t\n"
                "        return self.k[:, :, :end], self.v[:, :, :end]\n"
            ),
        ),
        (
            "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n",
            (
                "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n"
                "            cache.length += t\n"
            ),
        ),
    ],
    6,
    D47,
    "moved",
)
add(
    "s7_gqa_queries_from_zero",
    "reference",
    "gqa.py",
    [
        (
            "        q = apply_rope(q, positions, self.rope_base)\n",
            "        q = apply_rope(q, torch.arange(t, device=x.device), self.rope_base)\n",
        )
    ],
    6,
    D48,
    "partial",
)
add(
    "s7_gqa_alice_rope_default_base",
    "alice",
    "gqa.py",
    [
        (
            (
                "        q = apply_rope(q, where, self.rope_base)\n"
                "        k = apply_rope(k, where, self.rope_base)\n"
            ),
            "        q = apply_rope(q, where)\n        k = apply_rope(k, where)\n",
        )
    ],
    6,
    D49,
    "rewritten",
)
add(
    "s7_gqa_alice_length_tensor",
    "alice",
    "gqa.py",
    [("fresh = k_new.shape[2]", "fresh = torch.tensor(k_new.shape[2])")],
    6,
    D50,
    "rewritten",
)
add(
    "s7_gqa_cache_dtype_dropped",
    "reference",
    "gqa.py",
    [
        (
            (
                "        sizes = {\n"
                '            "batch": batch,\n'
                '            "n_kv_heads": n_kv_heads,\n'
                '            "max_len": max_len,\n'
                '            "d_head": d_head,\n'
                "        }\n"
                "        for name, value in sizes.items():\n"
                "            if value < 1:\n"
                '                raise ValueError(f"{name}={value} must be at least 1")\n'
                "        self.max_len = max_len\n"
                "        self.k = torch.zeros(\n"
                "            batch, n_kv_heads, max_len, d_head, device=device, dtype=dtype\n"
                "        )\n"
                "        self.v = torch.zeros_like(self.k)\n"
            ),
            (
                "        shape = (batch, n_kv_heads, max_len, d_head)\n"
                "        if min(shape) < 1:\n"
                "            raise ValueError(\n"
                '                f"(batch, n_kv_heads, max_len, d_head)={shape} must all be at least 1"\n'
                "            )\n"
                "        self.max_len = max_len\n"
                "        self.k = torch.zeros(shape, device=device)\n"
                "        self.v = torch.zeros(shape, device=device)\n"
            ),
        )
    ],
    6,
    D51,
    "refactor",
)
add(
    "s7_gqa_room_check_le",
    "reference",
    "gqa.py",
    [
        (
            "if self.length + t > self.max_len:",
            "if self.max_len - self.length <= t:",
        )
    ],
    6,
    D52,
    "rewritten",
)
add(
    "s7_gqa_values_buffer_cpu",
    "reference",
    "gqa.py",
    [
        (
            "self.v = torch.zeros_like(self.k)",
            "self.v = torch.zeros(batch, n_kv_heads, max_len, d_head, dtype=dtype)",
        )
    ],
    6,
    D12,
    "partial",
)
add(
    "s7_gqa_reset_zeroes_only",
    "reference",
    "gqa.py",
    [
        (
            "        # TODO: empty the cache.\n        ### BEGIN SOLUTION\n        self.length = 0\n",
            (
                "        # TODO: empty the cache.\n        ### BEGIN SOLUTION\n"
                "        self.k.zero_()\n        self.v.zero_()\n"
            ),
        )
    ],
    6,
    None,
    "unknown",
)

# ---------------------------------------------------------------- part 7: charlm.py

add(
    "s7_lm_alice_empty_check_mean_only",
    "alice",
    "charlm.py",
    [("    if count == 0:\n", '    if count == 0 and reduction == "mean":\n')],
    7,
    D53,
    "partial",
)
add(
    "s7_lm_loss_nan_guard",
    "reference",
    "charlm.py",
    [
        (
            (
                "    if not (targets != IGNORE_INDEX).any():\n"
                '        raise ValueError("targets has no real target (all are IGNORE_INDEX)")\n'
                "    return F.cross_entropy(\n"
                "        logits.reshape(-1, logits.shape[-1]),\n"
                "        targets.reshape(-1),\n"
                "        ignore_index=IGNORE_INDEX,\n"
                "        reduction=reduction,\n"
                "    )\n"
            ),
            (
                "    loss = F.cross_entropy(\n"
                "        logits.reshape(-1, logits.shape[-1]),\n"
                "        targets.reshape(-1),\n"
                "        ignore_index=IGNORE_INDEX,\n"
                "        reduction=reduction,\n"
                "    )\n"
                "    if torch.isnan(loss):  # 0 / 0 when every target is ignored\n"
                '        raise ValueError("targets has no real target (all are IGNORE_INDEX)")\n'
                "    return loss\n"
            ),
        )
    ],
    7,
    D53,
    "rewritten",
)
add(
    "s7_lm_loss_manual_gather",
    "reference",
    "charlm.py",
    [
        (
            (
                "    return F.cross_entropy(\n"
                "        logits.reshape(-1, logits.shape[-1]),\n"
                "        targets.reshape(-1),\n"
                "        ignore_index=IGNORE_INDEX,\n"
                "        reduction=reduction,\n"
                "    )\n"
            ),
            (
                "    flat_logits = logits.reshape(-1, logits.shape[-1])  # (N, V)\n"
                "    flat_targets = targets.reshape(-1)  # (N,)\n"
                "    real = flat_targets != IGNORE_INDEX\n"
                "    probs = torch.softmax(flat_logits[real], dim=-1)  # (n, V)\n"
                "    picked = probs.gather(1, flat_targets[real][:, None])[:, 0]  # (n,)\n"
                "    nll = -torch.log(picked)\n"
                '    return nll.mean() if reduction == "mean" else nll.sum()\n'
            ),
        )
    ],
    7,
    D54,
    "refactor",
)
add(
    "s7_lm_alice_eval_count_first",
    "alice",
    "charlm.py",
    [
        (
            (
                "    saved = _remember_modes(model)\n"
                "    device = _model_device(model)\n"
                "    total, tokens = 0.0, 0\n"
            ),
            (
                "    saved = _remember_modes(model)\n"
                "    device = _model_device(model)\n"
                "    total = 0.0\n"
                "    tokens = sum(int((t != IGNORE_INDEX).sum()) for _, t in batches)\n"
            ),
        ),
        ("                tokens += real\n", ""),
    ],
    7,
    D55,
    "rewritten",
)
add(
    "s7_lm_eval_blocks_only",
    "reference",
    "charlm.py",
    [
        (
            "    model.eval()\n    total, count = 0.0, 0\n",
            (
                "    for block in model.blocks:\n"
                "        block.eval()  # the blocks are what behaves differently\n"
                "    total, count = 0.0, 0\n"
            ),
        )
    ],
    7,
    D56,
    "partial",
)
add(
    "s7_lm_eval_without_no_grad",
    "reference",
    "charlm.py",
    [
        (
            (
                "    try:\n"
                "        with torch.no_grad():\n"
                "            for inputs, targets in batches:\n"
                "                inputs, targets = inputs.to(device), targets.to(device)\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
                '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
                "                    count += real\n"
                "    finally:\n"
            ),
            (
                "    try:\n"
                "        for inputs, targets in batches:\n"
                "            inputs, targets = inputs.to(device), targets.to(device)\n"
                "            real = int((targets != IGNORE_INDEX).sum())\n"
                "            if not real:\n"
                "                continue\n"
                '            total += float(lm_loss(model(inputs), targets, reduction="sum"))\n'
                "            count += real\n"
                "    finally:\n"
            ),
        )
    ],
    7,
    D57,
    "refactor",
)
add(
    "s7_lm_alice_cache_off_by_default",
    "alice",
    "charlm.py",
    [("             use_cache=True):", "             use_cache=False):")],
    7,
    D58,
    "moved",
)
add(
    "s7_lm_generate_never_caches",
    "reference",
    "charlm.py",
    [
        (
            "caches = model.make_caches() if use_cache else None",
            "caches = None  # the model is tiny: recomputing is cheap",
        ),
        ("feed = new if use_cache else ids", "feed = ids"),
    ],
    7,
    D58,
    "rewritten",
)
add(
    "s7_lm_prompt_warmup_loop",
    "reference",
    "charlm.py",
    [
        (
            (
                "            caches = model.make_caches() if use_cache else None\n"
                "            feed = ids\n"
            ),
            (
                "            caches = model.make_caches() if use_cache else None\n"
                "            feed = ids\n"
                "            if use_cache:\n"
                "                for token in ids[:-1]:  # warm the caches one prompt token at a time\n"
                "                    model(token.view(1, 1), caches)\n"
                "                feed = ids[-1:]\n"
            ),
        )
    ],
    7,
    D59,
    "rewritten",
)
add(
    "s7_lm_alice_decode_skip_ignore",
    "alice",
    "charlm.py",
    [
        (
            "            if code == PAD_ID:\n",
            "            if code in (PAD_ID, IGNORE_INDEX):\n",
        )
    ],
    7,
    D60,
    "rewritten",
)
add(
    "s7_lm_stoi_zip_range",
    "reference",
    "charlm.py",
    [
        (
            "self.stoi = {c: i + 1 for i, c in enumerate(chars)}",
            "self.stoi = dict(zip(chars, range(len(chars))))",
        )
    ],
    7,
    D61,
    "rewritten",
)
add(
    "s7_lm_batch_pad_sequence_flipped",
    "reference",
    "charlm.py",
    [
        (
            (
                "    t = max(len(s) for s in sequences) - 1\n"
                "    device = sequences[0].device\n"
                "    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)\n"
                "    targets = torch.full(\n"
                "        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device\n"
                "    )\n"
                "    for row, s in enumerate(sequences):\n"
                "        inputs[row, : len(s) - 1] = s[:-1]\n"
                "        targets[row, : len(s) - 1] = s[1:]\n"
                "    return inputs, targets  # (B, T), (B, T)\n"
            ),
            (
                "    pad = nn.utils.rnn.pad_sequence\n"
                "    # flip, pad, flip back: every row ends in the last column\n"
                "    inputs = pad(\n"
                "        [s[:-1].flip(0) for s in sequences], batch_first=True, padding_value=pad_id\n"
                "    ).flip(1)\n"
                "    targets = pad(\n"
                "        [s[1:].flip(0) for s in sequences],\n"
                "        batch_first=True,\n"
                "        padding_value=IGNORE_INDEX,\n"
                "    ).flip(1)\n"
                "    return inputs.long(), targets.long()  # (B, T), (B, T)\n"
            ),
        )
    ],
    7,
    D62,
    "refactor",
)
add(
    "s7_lm_alice_targets_unshifted",
    "alice",
    "charlm.py",
    [
        (
            "        targets[row, :span] = s[1:]\n",
            "        targets[row, :span] = s[:span]\n",
        )
    ],
    7,
    D63,
    "rewritten",
)
add(
    "s7_lm_targets_full_like_inputs",
    "reference",
    "charlm.py",
    [
        (
            (
                "    targets = torch.full(\n"
                "        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device\n"
                "    )\n"
            ),
            "    targets = torch.full_like(inputs, pad_id)\n",
        )
    ],
    7,
    D64,
    "rewritten",
)
add(
    "s7_lm_alice_eval_batch_means",
    "alice",
    "charlm.py",
    [
        (
            'total += float(lm_loss(logits, targets, reduction="sum"))',
            "total += float(lm_loss(logits, targets))",
        ),
        ("                tokens += real\n", "                tokens += 1\n"),
    ],
    7,
    D65,
    "rewritten",
)
add(
    "s7_lm_train_batch_means",
    "reference",
    "charlm.py",
    [
        (
            "            total += loss.item() * real\n            count += real\n",
            "            total += loss.item()\n            count += 1\n",
        )
    ],
    7,
    D65,
    "partial",
)
add(
    "s7_lm_eval_restore_on_error_only",
    "reference",
    "charlm.py",
    [
        (
            ("    finally:\n        model.train(was_training)\n    if count == 0:\n"),
            (
                "    except Exception:\n"
                "        model.train(was_training)\n"
                "        raise\n"
                "    if count == 0:\n"
            ),
        )
    ],
    7,
    D66,
    "partial",
)
add(
    "s7_lm_eval_restore_after_loop",
    "reference",
    "charlm.py",
    [
        (
            (
                "    try:\n"
                "        with torch.no_grad():\n"
                "            for inputs, targets in batches:\n"
                "                inputs, targets = inputs.to(device), targets.to(device)\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
                '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
                "                    count += real\n"
                "    finally:\n"
                "        model.train(was_training)\n"
            ),
            (
                "    with torch.no_grad():\n"
                "        for inputs, targets in batches:\n"
                "            inputs, targets = inputs.to(device), targets.to(device)\n"
                "            real = int((targets != IGNORE_INDEX).sum())\n"
                "            if real:\n"
                '                total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
                "                count += real\n"
                "    model.train(was_training)\n"
            ),
        )
    ],
    7,
    D67,
    "rewritten",
)
add(
    "s7_lm_mask_sliced_from_128",
    "reference",
    "charlm.py",
    [
        (
            "        mask = causal_mask(t, start + t, device=idx.device)  # (T, start + T)\n",
            (
                "        full = causal_mask(128, device=idx.device)  # built for the longest input\n"
                "        mask = full[start : start + t, : start + t]  # (T, start + T)\n"
            ),
        )
    ],
    7,
    D68,
    "rewritten",
)
add(
    "s7_lm_alice_caches_128",
    "alice",
    "charlm.py",
    [
        (
            "KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,",
            "KVCache(batch, self.n_heads, 128, self.d_model // self.n_heads,",
        )
    ],
    7,
    D68,
    "partial",
)
add(
    "s7_lm_alice_cached_refeed",
    "alice",
    "charlm.py",
    [
        (
            "last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]",
            "last = model(torch.tensor([ids], device=device), caches)[0, -1]",
        )
    ],
    7,
    D69,
    "rewritten",
)
add(
    "s7_lm_pos_table_prefix",
    "reference",
    "charlm.py",
    [
        (
            "x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, D)",
            "x = self.tok_emb(idx) + self.pos_emb.weight[:t]  # (B, T, D)",
        )
    ],
    7,
    D70,
    "rewritten",
)
add(
    "s7_lm_pad_excluded_when_sampling",
    "reference",
    "charlm.py",
    [
        (
            (
                '                logits[PAD_ID] = float("-inf")\n'
                "                if greedy:\n"
                "                    new = logits.argmax()[None]\n"
                "                else:\n"
            ),
            (
                "                if greedy:\n"
                "                    new = logits.argmax()[None]\n"
                "                else:\n"
                '                    logits[PAD_ID] = float("-inf")\n'
            ),
        )
    ],
    7,
    D71,
    "partial",
)
add(
    "s7_lm_alice_pad_logit_zero",
    "alice",
    "charlm.py",
    [
        (
            '    logits[PAD_ID] = float("-inf")\n',
            "    logits[PAD_ID] = 0.0  # switch the pad id off\n",
        )
    ],
    7,
    D71,
    "rewritten",
)
add(
    "s7_lm_alice_log_probs_view",
    "alice",
    "charlm.py",
    [
        (
            "log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)",
            "log_probs = F.log_softmax(logits.view(-1, vocab), dim=-1)  # (N, V)",
        )
    ],
    7,
    D72,
    "rewritten",
)
add(
    "s7_lm_vocab_lowercased",
    "reference",
    "charlm.py",
    [
        (
            (
                "        chars = sorted(set(text))\n"
                "        self.stoi = {c: i + 1 for i, c in enumerate(chars)}\n"
                "        self.itos = {i: c for c, i in self.stoi.items()}\n"
                "        self.vocab_size = len(chars) + 1\n"
            ),
            (
                "        alphabet = sorted({c.lower() for c in text})\n"
                "        self.itos = dict(enumerate(alphabet, start=1))\n"
                "        self.stoi = {c: i for i, c in self.itos.items()}\n"
                "        self.vocab_size = 1 + len(alphabet)  # + PAD_ID\n"
            ),
        ),
        (
            "        unknown = [c for c in s if c not in self.stoi]\n",
            (
                "        s = s.lower()  # the vocabulary ignores case\n"
                "        unknown = [c for c in s if c not in self.stoi]\n"
            ),
        ),
    ],
    7,
    D73,
    "refactor",
)
add(
    "s7_lm_alice_one_cache_object",
    "alice",
    "charlm.py",
    [
        (
            (
                "        return [\n"
                "            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,\n"
                "                    device=device, dtype=dtype)\n"
                "            for _ in self.blocks\n"
                "        ]\n"
            ),
            (
                "        cache = KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,\n"
                "                        device=device, dtype=dtype)\n"
                "        return [cache for _ in self.blocks]\n"
            ),
        )
    ],
    7,
    D74,
    "rewritten",
)
add(
    "s7_lm_train_loss_reevaluated",
    "reference",
    "charlm.py",
    [
        (
            '                "train_loss": total / count,\n',
            '                "train_loss": evaluate(model, train_batches),\n',
        )
    ],
    7,
    D75,
    "rewritten",
)
add(
    "s7_lm_alice_steps_accumulate",
    "alice",
    "charlm.py",
    [
        (
            "    history = []\n    for epoch in range(1, epochs + 1):\n",
            "    history, steps = [], []\n    for epoch in range(1, epochs + 1):\n",
        ),
        (
            "        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]\n",
            "        steps += [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]\n",
        ),
    ],
    7,
    D76,
    "moved",
)
add(
    "s7_lm_zero_grad_per_epoch",
    "reference",
    "charlm.py",
    [
        (
            "        model.train()\n        total, count = 0.0, 0\n",
            "        model.train()\n        optimizer.zero_grad()\n        total, count = 0.0, 0\n",
        ),
        ("            optimizer.zero_grad()\n", ""),
    ],
    7,
    D77,
    "moved",
)
add(
    "s7_lm_alice_step_per_epoch",
    "alice",
    "charlm.py",
    [
        (
            (
                "    optimizer.zero_grad()\n"
                "    loss = lm_loss(model(inputs), targets)\n"
                "    loss.backward()\n"
                "    optimizer.step()\n"
            ),
            "    loss = lm_loss(model(inputs), targets)\n    loss.backward()\n",
        ),
        (
            "        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]\n",
            (
                "        optimizer.zero_grad()\n"
                "        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]\n"
                "        optimizer.step()\n"
            ),
        ),
    ],
    7,
    D78,
    "moved",
)
add(
    "s7_lm_step_after_loop",
    "reference",
    "charlm.py",
    [
        (
            (
                "        for inputs, targets in train_batches:\n"
                "            inputs, targets = inputs.to(device), targets.to(device)\n"
                "            real = int((targets != IGNORE_INDEX).sum())\n"
                "            if not real:\n"
                "                continue\n"
                "            loss = lm_loss(model(inputs), targets)\n"
                "            optimizer.zero_grad()\n"
                "            loss.backward()\n"
                "            optimizer.step()\n"
                "            total += loss.item() * real\n"
                "            count += real\n"
            ),
            (
                "        for batch_inputs, batch_targets in train_batches:\n"
                "            batch_inputs = batch_inputs.to(device)\n"
                "            batch_targets = batch_targets.to(device)\n"
                "            n_real = int((batch_targets != IGNORE_INDEX).sum())\n"
                "            if n_real == 0:\n"
                "                continue\n"
                "            optimizer.zero_grad()\n"
                "            loss = lm_loss(model(batch_inputs), batch_targets)\n"
                "            loss.backward()\n"
                "            total += loss.item() * n_real\n"
                "            count += n_real\n"
                "        optimizer.step()  # apply the update\n"
            ),
        )
    ],
    7,
    D79,
    "refactor",
)
add(
    "s7_lm_train_lr_karpathy",
    "reference",
    "charlm.py",
    [
        (
            "epochs: int = 1, lr: float = 1e-3):",
            "epochs: int = 1, lr: float = 3e-4):",
        )
    ],
    7,
    D80,
    "moved",
)
add(
    "s7_lm_prompt_as_tensor",
    "reference",
    "charlm.py",
    [
        (
            '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n',
            (
                "    prompt = torch.as_tensor(prompt).long()  # lists and float ids are fine\n"
                '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n'
            ),
        )
    ],
    7,
    D81,
    "rewritten",
)
add(
    "s7_lm_alice_prompt_list_accepted",
    "alice",
    "charlm.py",
    [
        (
            "    if (not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.numel() < 1\n",
            (
                "    if isinstance(prompt, (list, tuple)):\n"
                "        prompt = torch.tensor(prompt)\n"
                "    if (not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.numel() < 1\n"
            ),
        )
    ],
    7,
    D81,
    "partial",
)
add(
    "s7_lm_alice_pick_checks_temperature",
    "alice",
    "charlm.py",
    [
        (
            "    logits = logits.double().clone()\n",
            (
                "    if temperature <= 0:\n"
                '        raise ValueError(f"temperature={temperature} must be positive")\n'
                "    logits = logits.double().clone()\n"
            ),
        )
    ],
    7,
    D82,
    "moved",
)
add(
    "s7_lm_generate_do_while",
    "reference",
    "charlm.py",
    [
        (
            "            for _ in range(max_new_tokens):\n",
            "            while True:\n",
        ),
        (
            "                feed = new if use_cache else ids\n",
            (
                "                feed = new if use_cache else ids\n"
                "                if len(ids) >= len(prompt) + max_new_tokens:\n"
                "                    break\n"
            ),
        ),
    ],
    7,
    D83,
    "rewritten",
)
add(
    "s7_lm_alice_zero_new_refused",
    "alice",
    "charlm.py",
    [("or max_new_tokens < 0:", "or max_new_tokens < 1:")],
    7,
    D84,
    "rewritten",
)
add(
    "s7_lm_nucleus_sampling",
    "reference",
    "charlm.py",
    [
        (
            "                    probs = torch.softmax(logits / temperature, dim=-1)\n",
            (
                "                    probs = torch.softmax(logits / temperature, dim=-1)\n"
                "                    # nucleus: keep the smallest set holding 90% of the mass\n"
                "                    ranked, order = probs.sort(descending=True)\n"
                "                    tail = ranked.cumsum(-1) - ranked > 0.9\n"
                "                    probs = probs.scatter(0, order[tail], 0.0)\n"
            ),
        )
    ],
    7,
    D85,
    "rewritten",
)
add(
    "s7_lm_alice_cooler_default",
    "alice",
    "charlm.py",
    [
        (
            "def generate(model, prompt, max_new_tokens, temperature=1.0,",
            "def generate(model, prompt, max_new_tokens, temperature=0.8,",
        )
    ],
    7,
    D86,
    "moved",
)
add(
    "s7_lm_dff_four_times",
    "reference",
    "charlm.py",
    [
        (
            "self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128",
            "self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=256, max_len=128",
        )
    ],
    7,
    D87,
    "moved",
)
add(
    "s7_lm_eval_long_not_moved",
    "reference",
    "charlm.py",
    [
        (
            (
                "                inputs, targets = inputs.to(device), targets.to(device)\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
            ),
            (
                "                inputs, targets = inputs.long(), targets.long()\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
            ),
        )
    ],
    7,
    D88,
    "rewritten",
)
add(
    "s7_lm_prompt_long_only",
    "reference",
    "charlm.py",
    [
        (
            "ids = prompt.to(device=device, dtype=torch.long)",
            "ids = prompt.long()",
        )
    ],
    7,
    D89,
    "rewritten",
)
add(
    "s7_lm_alice_positions_cpu",
    "alice",
    "charlm.py",
    [
        (
            "spots = torch.arange(start, start + steps, device=device)",
            "spots = torch.arange(start, start + steps)",
        )
    ],
    7,
    D12,
    "rewritten",
)
add(
    "s7_lm_batch_inputs_cpu",
    "reference",
    "charlm.py",
    [
        (
            "inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)",
            "inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long)",
        )
    ],
    7,
    D12,
    "partial",
)
add(
    "s7_lm_encode_drops_unknown",
    "reference",
    "charlm.py",
    [
        (
            (
                "        unknown = [c for c in s if c not in self.stoi]\n"
                "        if unknown:\n"
                '            raise ValueError(f"character {unknown[0]!r} is not in the vocabulary")\n'
                "        return [self.stoi[c] for c in s]\n"
            ),
            "        return [self.stoi[c] for c in s if c in self.stoi]\n",
        )
    ],
    7,
    None,
    "unknown",
)

# ---------------------------------------------------------------- correct, in another style

add(
    "s7_ok_attention_einsum_where",
    "reference",
    "attention.py",
    [
        (
            "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)\n",
            (
                "    scale = 1.0 / math.sqrt(q.shape[-1])\n"
                '    scores = torch.einsum("...qd,...kd->...qk", q, k) * scale  # (..., Tq, Tk)\n'
            ),
        ),
        (
            '            scores = scores.masked_fill(mask, float("-inf"))\n',
            (
                '            blocked = torch.full_like(scores, float("-inf"))\n'
                "            scores = torch.where(mask, blocked, scores)\n"
            ),
        ),
        (
            "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)\n",
            (
                '    out = torch.einsum("...qk,...kd->...qd", weights, v)  # (..., Tq, d_v)\n'
                "    return out, weights\n"
            ),
        ),
    ],
    1,
    None,
    "correct",
)
add(
    "s7_ok_rope_complex",
    "reference",
    "rope.py",
    [
        (
            (
                "    cos, sin = angles.cos(), angles.sin()\n"
                "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                "    rotated = torch.stack(\n"
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                "    )  # (..., T, d/2, 2)\n"
                "    return rotated.flatten(-2)  # (..., T, d_head)\n"
            ),
            (
                "    rotor = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}, (T, d/2)\n"
                "    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2).contiguous()\n"
                "    turned = torch.view_as_complex(pairs) * rotor  # (a + ib) e^{i angle}\n"
                "    return torch.view_as_real(turned).flatten(-2)  # (..., T, d_head)\n"
            ),
        )
    ],
    4,
    None,
    "correct",
)
add(
    "s7_ok_masks_triu_where",
    "reference",
    "masks.py",
    [
        (
            (
                "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
                "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n"
                "    return key_pos > query_pos  # (t_q, t_k)\n"
            ),
            (
                "    ones = torch.ones(t_q, t_k, dtype=torch.bool, device=device)\n"
                "    return torch.triu(ones, diagonal=t_k - t_q + 1)  # (t_q, t_k)\n"
            ),
        ),
        (
            "    return positions >= lengths[:, None]  # (B, t)\n",
            (
                "    real = positions < lengths[:, None]  # (B, t)\n"
                "    return torch.where(real, torch.zeros_like(real), torch.ones_like(real))\n"
            ),
        ),
    ],
    2,
    None,
    "correct",
)
add(
    "s7_ok_generate_inference_mode",
    "reference",
    "charlm.py",
    [
        (
            (
                "        with torch.no_grad():\n"
                "            caches = model.make_caches() if use_cache else None\n"
            ),
            (
                "        with torch.inference_mode():\n"
                "            caches = model.make_caches() if use_cache else None\n"
            ),
        ),
        (
            "    return ids\n",
            "    return ids.clone()  # a normal tensor outside inference mode\n",
        ),
        (
            (
                "    device = next(model.parameters()).device\n"
                "    ids = prompt.to(device=device, dtype=torch.long)\n"
            ),
            (
                "    weight = model.tok_emb.weight\n"
                "    ids = prompt.to(weight.device).long()\n"
            ),
        ),
    ],
    7,
    None,
    "correct",
)
add(
    "s7_ok_gqa_group_loop",
    "reference",
    "gqa.py",
    [
        (
            (
                "        out, _ = scaled_dot_product_attention(\n"
                "            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask\n"
                "        )\n"
            ),
            (
                "        outs = []\n"
                "        for g in range(self.n_kv_heads):  # query heads of group g share kv head g\n"
                "            q_g = q[:, g * n_rep : (g + 1) * n_rep]  # (B, n_rep, T, d_h)\n"
                "            o_g, _ = scaled_dot_product_attention(\n"
                "                q_g, k[:, g : g + 1], v[:, g : g + 1], mask\n"
                "            )\n"
                "            outs.append(o_g)\n"
                "        out = torch.cat(outs, dim=1)  # (B, h, T, d_h)\n"
            ),
        ),
        (
            (
                "    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)\n"
                "    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)\n"
            ),
            "    return torch.repeat_interleave(x, n_rep, dim=1)  # (B, h_kv * n_rep, T, d)\n",
        ),
    ],
    6,
    None,
    "correct",
)
add(
    "s7_ok_norm_var_mean_rsqrt",
    "reference",
    "norm.py",
    [
        (
            (
                "        mean = x.mean(dim=-1, keepdim=True)\n"
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
                "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
            ),
            (
                "        var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)\n"
                "        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias\n"
            ),
        ),
        (
            (
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
                "        return x / rms * self.weight\n"
            ),
            (
                "        inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
                "        return self.weight * (x * inv_rms)\n"
            ),
        ),
    ],
    5,
    None,
    "correct",
    extra=(
        (
            "block.py",
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                "        return h + self.ffn(self.ln2(h))\n"
            ),
            (
                "        attended = self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                "        h = x + attended\n"
                "        return h + self.ffn(self.ln2(h))\n"
            ),
        ),
    ),
)
add(
    "s7_ok_charlm_gather_loss",
    "reference",
    "charlm.py",
    [
        (
            (
                "    return F.cross_entropy(\n"
                "        logits.reshape(-1, logits.shape[-1]),\n"
                "        targets.reshape(-1),\n"
                "        ignore_index=IGNORE_INDEX,\n"
                "        reduction=reduction,\n"
                "    )\n"
            ),
            (
                "    flat = logits.reshape(-1, logits.shape[-1])  # (N, V)\n"
                "    tgt = targets.reshape(-1).to(flat.device)  # (N,)\n"
                "    real = tgt != IGNORE_INDEX\n"
                "    logp = torch.log_softmax(flat[real], dim=-1)  # (n, V)\n"
                "    nll = -logp.gather(1, tgt[real][:, None]).squeeze(1)  # (n,)\n"
                '    return nll.mean() if reduction == "mean" else nll.sum()\n'
            ),
        ),
        (
            (
                "                inputs, targets = inputs.to(device), targets.to(device)\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
            ),
            (
                "                inputs = inputs.to(device)\n"
                "                targets = targets.to(inputs)  # same device (and an integer dtype)\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
            ),
        ),
    ],
    7,
    None,
    "correct",
)

# ---------------------------------------------------------------- several parts at once
# A multi case is the student who made two or three of the mistakes above, each in its own
# part: the single cases are taken out of the set and their edits joined.


def merge(name, *singles):
    """Replace the single cases ``singles`` (different parts, one base) by one multi case."""
    picked = []
    for single in singles:
        (case,) = [c for c in CASES if c.name == single]
        CASES.remove(case)
        picked.append(case)
    first, rest = picked[0], picked[1:]
    assert all(c.base == first.base and c.part != first.part for c in rest)
    assert not any(c.extra for c in picked)
    CASES.append(
        Case(
            name,
            first.base,
            first.file,
            first.edits,
            first.part,
            first.expected,
            "multi",
            also=tuple(c.expected for c in picked),
            extra=tuple((c.file, old, new) for c in rest for old, new in c.edits),
            also_parts=tuple(c.part for c in rest),
        )
    )


merge("s7_multi_unscaled_loop_mask", "s7_attn_einsum_unscaled", "s7_mask_causal_loop")
merge("s7_multi_merge_flat_zero_ids", "s7_heads_merge_flatten", "s7_lm_stoi_zip_range")
merge("s7_multi_halves_unbiased", "s7_rope_halves_cat", "s7_norm_sum_over_d_minus_1")
merge(
    "s7_multi_tiled_pad_targets",
    "s7_gqa_expand_outer_axis",
    "s7_lm_targets_full_like_inputs",
)
merge(
    "s7_multi_dv_room_train_eval",
    "s7_attn_scale_from_values",
    "s7_gqa_room_check_le",
    "s7_lm_train_loss_reevaluated",
)
merge("s7_multi_moments_numel", "s7_norm_moment_variance", "s7_gqa_numel_size_product")
merge(
    "s7_multi_float_mask_nucleus",
    "s7_heads_float_mask_nonzero",
    "s7_lm_nucleus_sampling",
)
merge("s7_multi_rope_cpu_prompt", "s7_rope_pair_index_cpu", "s7_lm_prompt_long_only")
merge("s7_multi_alice_masks", "s7_attn_alice_where_swapped", "s7_mask_alice_keep_le")
merge(
    "s7_multi_alice_view_bytes",
    "s7_heads_alice_view_straight",
    "s7_gqa_alice_numel_bytes",
)
merge(
    "s7_multi_alice_freq_base_pad",
    "s7_rope_alice_arange_half",
    "s7_gqa_alice_rope_default_base",
    "s7_lm_alice_pad_logit_zero",
)
merge(
    "s7_multi_alice_eps_length",
    "s7_norm_alice_sqrt_plus_eps",
    "s7_gqa_alice_length_tensor",
)
merge(
    "s7_multi_alice_dk_batch_means",
    "s7_attn_alice_inverse_dk",
    "s7_lm_alice_eval_batch_means",
)
merge(
    "s7_multi_alice_dmodel_decode",
    "s7_heads_alice_inline_dmodel",
    "s7_lm_alice_decode_skip_ignore",
)

SEVENTH = tuple(CASES)
