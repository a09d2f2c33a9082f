"""A fourth held-out set of student solutions, written by a hand that saw only the mistakes'
descriptions (as the grader words them), ``docs/SPEC.md``, the reference solution and Alice's
correct solution in another style; never the grader's mistake catalogue, its diagnosis code, the
graded tests or the other held-out sets.

It is a measure only: never tune the grader on it (nor read its cases while changing diagnosis).
Each case is built and checked like those of ``mistakes.py`` (see its docstring for the kinds
and fields); check that every case behaves as declared, printing pass and fail only:

    .venv/bin/python -m tests.engine.heldout.check_heldout --set fourth --blind [NAME ...]
"""

from tests.engine.heldout.mistakes import (
    AFTER_RENORM,
    AFTER_ZEROED,
    BASE_IGNORED,
    BATCH_MEANS,
    BLOCK_NONE_CAUSAL,
    BUILDS_GRAPH,
    BYTES,
    CACHE_DEFAULT_DTYPE,
    CACHE_H_Q,
    CACHE_IGNORED,
    CACHE_NO_MASK,
    CROSS_FROM_X,
    CUT_GRAPH,
    DECODE_IGNORE,
    DIAGONAL,
    EMPTY_ONLY_MEAN,
    EPS_OUTSIDE,
    EVAL_NOT_MOVED,
    FLOAT_AS_BOOL,
    FREQ,
    HARD_128,
    HEADS_NONE_CAUSAL,
    ID_ZERO,
    IN_PLACE,
    INIT_DEFAULT,
    INVERTED,
    KV_NOT_CROSS,
    LEFT_PAD,
    LENGTH_TENSOR,
    LOG_SOFTMAX,
    LOSS_AFTER,
    LR,
    MADE_ON_CPU,
    MASK_ON_CPU,
    MERGE_NO_T,
    NAN_ROW,
    NO_ADVANCE,
    NO_EVAL,
    NO_FACTOR_2,
    NO_FINALLY,
    NO_MAX,
    NO_OFFSET,
    NO_ROPE_OFFSET,
    NO_SCALE,
    NORM_GRAD,
    NOT_PARAMETER,
    NOT_RESET,
    ONLY_K_CHECKED,
    PAD_CLASS_0,
    PAD_NOT_EXCLUDED,
    PAD_OFF_BY_ONE,
    PARTIAL_WRITE,
    POSITIONS_IGNORED,
    POST_ORDER,
    PROMPT_BY_TOKEN,
    PROMPT_CAST,
    PROMPT_NOT_MOVED,
    QUERY_AXIS,
    RAW_MOMENTS,
    REFEEDS,
    REFUSES_FULL,
    RESIDUAL,
    RMS_CENTRED,
    ROPE_FLOAT32,
    ROPE_ON_V,
    ROTATE_HALF,
    SCALE_D_MODEL,
    SCALE_DK,
    SCALE_DV,
    SHARED_CACHE,
    SIN_SIGN,
    SPLIT_NO_T,
    STAYS_EVAL,
    STEP_AFTER,
    TEMPERATURE_DEFAULT,
    TEMPERATURE_GREEDY,
    TILED,
    TRUE_DIVISION,
    TRUNCATED,
    TWO_PASSES,
    UNBIASED,
    VIEW,
    VOCAB_CASE,
    ZERO_GRAD_ONCE,
    ZERO_REFUSED,
    ZERO_STILL_ONE,
    Case,
)

# The three descriptions with no constant in mistakes.py, in the grader's words.
NOT_SHIFTED = "targets not shifted: targets are s[1:], inputs s[:-1]"
POS_RESTART = (
    "positions restart at 0 in each chunk instead of continuing from the cache"
)
ONE_STEP_EPOCH = "one optimizer step per epoch on the gradients of all its batches, not one step per batch"

FILES = {
    1: "attention.py",
    2: "masks.py",
    3: "heads.py",
    4: "rope.py",
    6: "gqa.py",
    7: "charlm.py",
}


def _case(base, name, part, expected, kind, edits, file=None, **more):
    return Case(
        name=name,
        base=base,
        file=file or FILES[part],
        edits=tuple(edits),
        part=part,
        expected=expected,
        kind=kind,
        **more,
    )


def ref(name, part, expected, kind, edits, file=None, **more):
    """A case on the reference solution."""
    return _case("reference", name, part, expected, kind, edits, file, **more)


def alice(name, part, expected, kind, edits, file=None, **more):
    """A case on Alice's solution."""
    return _case("alice", name, part, expected, kind, edits, file, **more)


CASES = []

# ---------------------------------------------------------------- part 1: attention.py
_SCORES = (
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)\n"
)
_BOOL_FILL = '            scores = scores.masked_fill(mask, float("-inf"))\n'
_WEIGHTS = "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
_ROW_CHECK = (
    "    if torch.isneginf(scores).all(dim=-1).any():\n"
    '        raise ValueError("mask prohibits every key for at least one query row")\n'
)
_SOFTMAX_RAISE = (
    "    if torch.isneginf(top).any():\n"
    "        raise ValueError(\n"
    '            f"softmax: x has a slice along dim={dim} that is entirely -inf"\n'
    "        )\n"
)
_A_SCORES = '    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)\n'

CASES += [
    ref(
        "p1_einsum_unscaled",
        1,
        NO_SCALE,
        "rewritten",
        [
            (
                _SCORES,
                '    scores = torch.einsum("...qd,...kd->...qk", q, k)  # (..., Tq, Tk)\n',
            ),
        ],
    ),
    ref(
        "p1_dk_when_unmasked",
        1,
        SCALE_DK,
        "partial",
        [
            (
                _SCORES,
                "    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk), scaled below\n",
            ),
            (
                "        if mask.dtype == torch.bool:\n" + _BOOL_FILL,
                "        scores = scores / math.sqrt(q.shape[-1])\n"
                "        if mask.dtype == torch.bool:\n" + _BOOL_FILL,
            ),
            (
                "            scores = scores + mask\n",
                (
                    "            scores = scores + mask\n"
                    "    else:\n"
                    "        scores = scores / q.shape[-1]\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_scale_from_values",
        1,
        SCALE_DV,
        "rewritten",
        [
            (
                _SCORES,
                (
                    "    scale = v.shape[-1] ** -0.5\n"
                    "    scores = (q * scale) @ k.transpose(-2, -1)  # (..., Tq, Tk)\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_softmax_of_transpose",
        1,
        QUERY_AXIS,
        "rewritten",
        [
            (
                _WEIGHTS,
                (
                    "    # normalize each key's column\n"
                    "    weights = softmax(scores.transpose(-2, -1), dim=-1).transpose(-2, -1)\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_max_only_float32",
        1,
        NO_MAX,
        "partial",
        [
            (
                "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n",
                (
                    "    # float64 has range enough; only float32 needs the shift\n"
                    "    exp = torch.exp(x - top) if x.dtype == torch.float32 else torch.exp(x)\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_where_keeps_true",
        1,
        INVERTED,
        "rewritten",
        [
            (
                _BOOL_FILL,
                '            scores = torch.where(mask, scores, float("-inf"))\n',
            ),
        ],
    ),
    ref(
        "p1_weights_times_keep",
        1,
        AFTER_ZEROED,
        "partial",
        [
            (
                _BOOL_FILL,
                (
                    "            if mask.all(dim=-1).any():\n"
                    '                raise ValueError("mask prohibits every key of some query row")\n'
                    "            keep = (~mask).to(scores.dtype)\n"
                ),
            ),
            (
                _WEIGHTS,
                _WEIGHTS + "    if mask is not None and mask.dtype == torch.bool:\n"
                "        weights = weights * keep\n",
            ),
        ],
    ),
    ref(
        "p1_nan_to_num_top",
        1,
        NAN_ROW,
        "rewritten",
        [
            (
                "    top = x.amax(dim=dim, keepdim=True)\n" + _SOFTMAX_RAISE,
                "    top = torch.nan_to_num(x.amax(dim=dim, keepdim=True), neginf=0.0)\n",
            ),
            (_ROW_CHECK, ""),
        ],
    ),
    ref(
        "p1_divide_q_in_place",
        1,
        IN_PLACE,
        "rewritten",
        [
            (
                _SCORES,
                (
                    "    q /= math.sqrt(q.shape[-1])\n"
                    "    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_softmax_sub_in_place",
        1,
        IN_PLACE,
        "partial",
        [
            (
                "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n",
                "    exp = torch.exp(x.sub_(top))  # -inf - top = -inf, and exp(-inf) = 0 exactly\n",
            ),
        ],
    ),
    ref(
        "p1_softmax_on_data",
        1,
        CUT_GRAPH,
        "rewritten",
        [
            (
                "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n",
                "    exp = torch.exp(x.data - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n",
            ),
        ],
    ),
    ref(
        "p1_float_mask_on_data",
        1,
        CUT_GRAPH,
        "partial",
        [
            (
                "            scores = scores + mask\n",
                "            scores = scores.data + mask\n",
            ),
        ],
    ),
    ref(
        "p1_full_neg_inf_cpu",
        1,
        MADE_ON_CPU,
        "partial",
        [
            (
                _BOOL_FILL,
                (
                    '            neg = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)\n'
                    "            scores = torch.where(mask, neg, scores)\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_no_dk_check",
        1,
        None,
        "unknown",
        [
            (
                (
                    "    if q.shape[-1] != k.shape[-1]:\n"
                    '        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]}")\n'
                ),
                "",
            ),
        ],
    ),
    alice(
        "a_p1_q_over_dk",
        1,
        SCALE_DK,
        "rewritten",
        [
            (
                _A_SCORES,
                '    scores = torch.einsum("...id,...jd->...ij", q / d_k, k)  # (..., Tq, Tk)\n',
            ),
        ],
    ),
    alice(
        "a_p1_fill_not_mask",
        1,
        INVERTED,
        "rewritten",
        [
            (
                "        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)\n",
                "        return scores.masked_fill(~mask, _NEG_INF)\n",
            ),
        ],
    ),
    alice(
        "a_p1_renorm_weights",
        1,
        AFTER_RENORM,
        "partial",
        [
            (
                "        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)\n",
                "        return scores  # bool masks are applied to the weights\n",
            ),
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n",
                (
                    "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                    "    if mask is not None and mask.dtype == torch.bool:\n"
                    "        if bool(mask.expand(weights.shape).all(dim=-1).any()):\n"
                    '            raise ValueError(f"mask (shape {tuple(mask.shape)}) prohibits a whole row")\n'
                    "        weights = torch.where(mask, torch.zeros_like(weights), weights)\n"
                    "        weights = weights / weights.sum(dim=-1, keepdim=True)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p1_no_dead_checks",
        1,
        NAN_ROW,
        "rewritten",
        [
            (
                (
                    "    if bool(dead.any()):\n"
                    "        raise ValueError(\n"
                    '            f"softmax: some slice of x (shape {tuple(x.shape)}) along dim={dim} is all -inf "\n'
                    '            f"({int(dead.sum())} such slice(s)); there is nothing to normalize"\n'
                    "        )\n"
                ),
                "",
            ),
            (
                (
                    "        blocked = (scores == _NEG_INF).all(dim=-1)\n"
                    "        if bool(blocked.any()):\n"
                    "            raise ValueError(\n"
                    '                f"mask (shape {tuple(mask.shape)}) prohibits every key for "\n'
                    '                f"{int(blocked.sum())} query row(s); each query needs a permitted key"\n'
                    "            )\n"
                ),
                "",
            ),
        ],
    ),
    alice(
        "a_p1_full_not_full_like",
        1,
        MADE_ON_CPU,
        "partial",
        [
            (
                "        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)\n",
                "        return torch.where(mask, torch.full(scores.shape, _NEG_INF), scores)\n",
            ),
        ],
    ),
]

# ---------------------------------------------------------------- part 2: masks.py
_CAUSAL3 = (
    "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
    "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n"
    "    return key_pos > query_pos  # (t_q, t_k)\n"
)
_PAD_POS = "    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)\n"
_AM_CAUSAL = "        mask = mask | causal_mask(t, device=keys_padded.device)\n"

CASES += [
    ref(
        "p2_triu_from_offset",
        2,
        DIAGONAL,
        "rewritten",
        [
            (
                _CAUSAL3,
                (
                    "    upper = torch.ones(t_q, t_k, dtype=torch.bool, device=device)\n"
                    "    return upper.triu(t_k - t_q)  # (t_q, t_k)\n"
                ),
            ),
        ],
    ),
    ref(
        "p2_attention_mask_own_triu",
        2,
        DIAGONAL,
        "moved",
        [
            (
                _AM_CAUSAL,
                (
                    "        future = torch.ones(t, t, dtype=torch.bool, device=keys_padded.device)\n"
                    "        mask = mask | future.triu()\n"
                ),
            ),
        ],
    ),
    ref(
        "p2_offset_only_one_query",
        2,
        NO_OFFSET,
        "partial",
        [
            (
                "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n",
                (
                    "    offset = t_k - 1 if t_q == 1 else 0  # a decoding step sees everything\n"
                    "    query_pos = torch.arange(t_q, device=device)[:, None] + offset  # (t_q, 1)\n"
                ),
            ),
        ],
    ),
    ref(
        "p2_positions_from_one",
        2,
        PAD_OFF_BY_ONE,
        "rewritten",
        [
            (
                _PAD_POS,
                "    positions = torch.arange(1, t + 1, device=lengths.device)[None, :]  # (1, t)\n",
            ),
        ],
    ),
    ref(
        "p2_range_list_positions",
        2,
        MASK_ON_CPU,
        "rewritten",
        [
            (
                _PAD_POS,
                "    positions = torch.tensor(list(range(t)))[None, :]  # (1, t)\n",
            ),
        ],
    ),
    ref(
        "p2_attention_mask_default_device",
        2,
        MASK_ON_CPU,
        "moved",
        [
            (_AM_CAUSAL, "        mask = mask | causal_mask(t)\n"),
        ],
    ),
    ref(
        "p2_key_pos_cpu",
        2,
        MASK_ON_CPU,
        "partial",
        [
            (
                "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n",
                "    key_pos = torch.arange(t_k)[None, :]  # (1, t_k)\n",
            ),
        ],
    ),
    ref(
        "p2_no_tk_below_tq_check",
        2,
        None,
        "unknown",
        [
            (
                (
                    "    if t_k < t_q:\n"
                    '        raise ValueError(f"t_k={t_k} is smaller than t_q={t_q}")\n'
                ),
                "",
            ),
        ],
    ),
    alice(
        "a_p2_triu_one",
        2,
        NO_OFFSET,
        "rewritten",
        [
            (
                "    return everything.triu(diagonal=shift + 1)\n",
                "    return everything.triu(diagonal=1)\n",
            ),
        ],
    ),
    alice(
        "a_p2_last_index_limit",
        2,
        PAD_OFF_BY_ONE,
        "rewritten",
        [
            (
                "    limit = lengths.to(torch.long).unsqueeze(1).expand(batch, t)  # (B, t)\n",
                (
                    "    last = lengths.to(torch.long) - 1  # index of the last real token\n"
                    "    limit = last.unsqueeze(1).expand(batch, t)  # (B, t)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p2_broadcast_refactor_cpu",
        2,
        MASK_ON_CPU,
        "refactor",
        [
            (
                (
                    "    batch = lengths.shape[0]\n"
                    "    where = torch.arange(t, device=lengths.device).unsqueeze(0).expand(batch, t)  # (B, t)\n"
                    "    limit = lengths.to(torch.long).unsqueeze(1).expand(batch, t)  # (B, t)\n"
                    "    return where >= limit\n"
                ),
                (
                    "    steps = torch.arange(t)  # (t,)\n"
                    "    return steps[None, :] >= lengths.to(torch.long)[:, None]  # (B, t)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p2_arange_compare",
        2,
        None,
        "correct",
        [
            (
                (
                    "    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)\n"
                    "    return everything.triu(diagonal=shift + 1)\n"
                ),
                (
                    "    rows = torch.arange(shift, shift + t_q, device=device).unsqueeze(1)  # (t_q, 1)\n"
                    "    cols = torch.arange(t_k, device=device).unsqueeze(0)  # (1, t_k)\n"
                    "    return torch.gt(cols, rows)\n"
                ),
            ),
        ],
    ),
]

# ---------------------------------------------------------------- part 3: heads.py
_SPLIT2 = (
    "    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)\n"
    "    return x.transpose(1, 2)  # (B, h, T, d_h)\n"
)
_MERGE = (
    "    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)\n"
)
_KV2 = (
    "        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
    "        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
)
_ATTEND = (
    "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n"
)

CASES += [
    ref(
        "p3_split_one_line_true_div",
        3,
        TRUE_DIVISION,
        "refactor",
        [
            (
                _SPLIT2,
                (
                    "    d_head = d_model / n_heads\n"
                    "    return x.reshape(batch, t, n_heads, d_head).transpose(1, 2)  # (B, h, T, d_h)\n"
                ),
            ),
        ],
    ),
    ref(
        "p3_attribute_true_div",
        3,
        TRUE_DIVISION,
        "partial",
        [
            (
                "        self.d_head = d_model // n_heads\n",
                "        self.d_head = d_model / self.n_heads\n",
            ),
        ],
    ),
    ref(
        "p3_unflatten_no_transpose",
        3,
        SPLIT_NO_T,
        "rewritten",
        [
            (
                _SPLIT2,
                "    return x.unflatten(-1, (n_heads, -1)).reshape(batch, n_heads, t, -1)\n",
            ),
        ],
    ),
    ref(
        "p3_own_scores_d_model",
        3,
        SCALE_D_MODEL,
        "rewritten",
        [
            (
                "from transformer_hw.attention import scaled_dot_product_attention\n",
                "from transformer_hw.attention import scaled_dot_product_attention, softmax\n",
            ),
            (
                _ATTEND,
                (
                    "        scores = q @ k.transpose(-2, -1) / (self.n_heads * self.d_head) ** 0.5\n"
                    "        if mask is not None:\n"
                    "            if mask.dtype == torch.bool:\n"
                    '                scores = scores.masked_fill(mask, float("-inf"))\n'
                    "            else:\n"
                    "                scores = scores + mask\n"
                    "        out = softmax(scores, dim=-1) @ v  # (B, h, Tq, d_h)\n"
                ),
            ),
        ],
    ),
    ref(
        "p3_kv_helper_called_with_x",
        3,
        CROSS_FROM_X,
        "moved",
        [
            (
                _KV2,
                "        k, v = self._keys_values(x)  # (B, h, Tk, d_h) each\n",
            ),
            (
                "    def forward(self, x, context=None, mask=None, cache=None) -> torch.Tensor:\n",
                (
                    "    def _keys_values(self, source):\n"
                    "        k = split_heads(self.k_proj(source), self.n_heads)\n"
                    "        v = split_heads(self.v_proj(source), self.n_heads)\n"
                    "        return k, v\n"
                    "\n"
                    "    def forward(self, x, context=None, mask=None, cache=None) -> torch.Tensor:\n"
                ),
            ),
        ],
    ),
    ref(
        "p3_cache_defaults_causal",
        3,
        HEADS_NONE_CAUSAL,
        "rewritten",
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
                    "            if mask is None:  # decoding is causal\n"
                    "                mask = causal_mask(q.shape[2], k.shape[2], device=x.device)\n"
                ),
            ),
        ],
    ),
    ref(
        "p3_mask_to_bool",
        3,
        FLOAT_AS_BOOL,
        "rewritten",
        [
            (
                _ATTEND,
                "        mask = None if mask is None else mask.to(torch.bool)\n"
                + _ATTEND,
            ),
        ],
    ),
    ref(
        "p3_merge_transpose_",
        3,
        IN_PLACE,
        "rewritten",
        [
            (
                _MERGE,
                "    return x.transpose_(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)\n",
            ),
        ],
    ),
    ref(
        "p3_no_out_proj",
        3,
        None,
        "unknown",
        [
            (
                "        return self.out_proj(merge_heads(out))  # (B, Tq, D)\n",
                "        return merge_heads(out)  # (B, Tq, D)\n",
            ),
        ],
    ),
    alice(
        "a_p3_cache_triu",
        3,
        HEADS_NONE_CAUSAL,
        "partial",
        [
            (
                "        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
                (
                    "        if cache is not None and mask is None:\n"
                    "            tq, tk = q.shape[2], k.shape[2]\n"
                    "            mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).triu(tk - tq + 1)\n"
                    "        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p3_merge_view_no_permute",
        3,
        MERGE_NO_T,
        "rewritten",
        [
            (
                "    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)\n",
                "    return x.contiguous().view(batch, steps, heads * per_head)\n",
            ),
        ],
    ),
    alice(
        "a_p3_chunk_stack_cat",
        3,
        None,
        "correct",
        [
            (
                (
                    "    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)\n"
                    "    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)\n"
                ),
                "    return torch.stack(x.split(per_head, dim=-1), dim=1)  # (B, h, T, d_h)\n",
            ),
            (
                "    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)\n",
                "    return torch.cat(x.unbind(dim=1), dim=-1)  # (B, T, h * d_h)\n",
            ),
        ],
    ),
]

# ---------------------------------------------------------------- part 4: rope.py
_AB = "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
_ROT = (
    "    rotated = torch.stack(\n"
    "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
    "    )  # (..., T, d/2, 2)\n"
    "    return rotated.flatten(-2)  # (..., T, d_head)\n"
)
_ANGLES = "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)\n"

CASES += [
    ref(
        "p4_chunk_halves",
        4,
        ROTATE_HALF,
        "rewritten",
        [
            (_AB, "    a, b = x.chunk(2, dim=-1)  # first half, second half\n"),
            (
                _ROT,
                "    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)\n",
            ),
        ],
    ),
    ref(
        "p4_sin_of_minus",
        4,
        SIN_SIGN,
        "rewritten",
        [
            (
                "    cos, sin = angles.cos(), angles.sin()\n",
                "    cos, sin = torch.cos(angles), torch.sin(-angles)\n",
            ),
        ],
    ),
    ref(
        "p4_reciprocal_freq",
        4,
        FREQ,
        "rewritten",
        [
            (
                "    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)\n",
                "    inv_freq = 1.0 / base ** (pair / d_head)  # (d_head/2,)\n",
            ),
        ],
    ),
    ref(
        "p4_dtype_or_float32",
        4,
        ROPE_FLOAT32,
        "rewritten",
        [
            (
                "    dtype = torch.get_default_dtype() if dtype is None else dtype\n",
                "    dtype = dtype or torch.float32\n",
            ),
        ],
    ),
    ref(
        "p4_positions_from_first",
        4,
        POSITIONS_IGNORED,
        "partial",
        [
            (
                _ANGLES,
                "    positions = positions[0] + torch.arange(t, device=x.device)  # consecutive\n"
                + _ANGLES,
            ),
        ],
    ),
    ref(
        "p4_write_back_into_x",
        4,
        IN_PLACE,
        "rewritten",
        [
            (_AB, "    a, b = x[..., 0::2].clone(), x[..., 1::2].clone()\n"),
            (
                _ROT,
                (
                    "    x[..., 0::2] = a * cos - b * sin\n"
                    "    x[..., 1::2] = a * sin + b * cos\n"
                    "    return x\n"
                ),
            ),
        ],
    ),
    ref(
        "p4_no_positions_shape_check",
        4,
        None,
        "unknown",
        [
            (
                (
                    "    if positions.shape != (t,):\n"
                    "        raise ValueError(\n"
                    '            f"positions must have shape (T,)=({t},), got {tuple(positions.shape)}"\n'
                    "        )\n"
                ),
                "",
            ),
        ],
    ),
    ref(
        "p4_repeat_interleave_cos",
        4,
        None,
        "correct",
        [
            (
                "    cos, sin = angles.cos(), angles.sin()\n" + _AB + _ROT,
                (
                    "    cos = angles.cos().repeat_interleave(2, dim=-1)  # (T, d_head)\n"
                    "    sin = angles.sin().repeat_interleave(2, dim=-1)  # (T, d_head)\n"
                    "    partner = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)\n"
                    "    return x * cos + partner * sin  # (..., T, d_head)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p4_conj_spin",
        4,
        SIN_SIGN,
        "rewritten",
        [
            (
                "    turned = torch.view_as_complex(pairs) * spin  # (a + ib) e^{i theta}\n",
                "    turned = torch.view_as_complex(pairs) * spin.conj()  # (a + ib) e^{i theta}\n",
            ),
        ],
    ),
    alice(
        "a_p4_dtype_isinstance",
        4,
        ROPE_FLOAT32,
        "rewritten",
        [
            (
                "    if dtype is None:\n        dtype = torch.get_default_dtype()\n",
                "    dtype = dtype if isinstance(dtype, torch.dtype) else torch.float32\n",
            ),
        ],
    ),
    alice(
        "a_p4_validated_then_arange",
        4,
        POSITIONS_IGNORED,
        "rewritten",
        [
            (
                "    positions = positions.to(x.device)\n",
                "    positions = torch.arange(steps, device=x.device)\n",
            ),
        ],
    ),
    alice(
        "a_p4_ones_for_polar",
        4,
        MADE_ON_CPU,
        "rewritten",
        [
            (
                "    spin = torch.polar(torch.ones_like(theta), theta)  # e^{i theta}, complex64/complex128\n",
                "    spin = torch.polar(torch.ones(theta.shape, dtype=theta.dtype), theta)  # e^{i theta}\n",
            ),
        ],
    ),
]

# ---------------------------------------------------------------- part 5: block.py, norm.py
_PRE2 = (
    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
    "        return h + self.ffn(self.ln2(h))\n"
)
_POST2 = (
    "        h = self.ln1(x + self.attn(x, mask=mask))\n"
    "        return self.ln2(h + self.ffn(h))\n"
)
_LN3 = (
    "        mean = x.mean(dim=-1, keepdim=True)\n"
    "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
    "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
)
_VAR = "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
_RMS2 = (
    "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
    "        return x / rms * self.weight\n"
)
_A_PRE = (
    "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
    "        return mixed + self.ffn(self.ln2(mixed))\n"
)
B, N = "block.py", "norm.py"

CASES += [
    ref(
        "p5_reassign_x_normed",
        5,
        RESIDUAL,
        "rewritten",
        [
            (
                _PRE2,
                (
                    "        x = self.ln1(x)\n"
                    "        h = x + self.attn(x, mask=mask, cache=cache)\n"
                    "        return h + self.ffn(self.ln2(h))\n"
                ),
            ),
        ],
        file=B,
    ),
    ref(
        "p5_ffn_adds_normed",
        5,
        RESIDUAL,
        "partial",
        [
            (
                "        return h + self.ffn(self.ln2(h))\n",
                ("        h = self.ln2(h)\n        return h + self.ffn(h)\n"),
            ),
        ],
        file=B,
    ),
    ref(
        "p5_shared_residual_helper",
        5,
        POST_ORDER,
        "moved",
        [
            (
                "class FeedForward(nn.Module):\n",
                (
                    "def _residual(x, norm, sublayer):\n"
                    '    """One residual sub-layer: add, then normalize."""\n'
                    "    return norm(x + sublayer(x))\n"
                    "\n"
                    "\n"
                    "class FeedForward(nn.Module):\n"
                ),
            ),
            (
                _PRE2,
                (
                    "        h = _residual(x, self.ln1, lambda y: self.attn(y, mask=mask, cache=cache))\n"
                    "        return _residual(h, self.ln2, self.ffn)\n"
                ),
            ),
            (
                _POST2,
                (
                    "        h = _residual(x, self.ln1, lambda y: self.attn(y, mask=mask))\n"
                    "        return _residual(h, self.ln2, self.ffn)\n"
                ),
            ),
        ],
        file=B,
    ),
    ref(
        "p5_postnorm_defaults_causal",
        5,
        BLOCK_NONE_CAUSAL,
        "partial",
        [
            (
                "from transformer_hw.heads import MultiHeadAttention\n",
                (
                    "from transformer_hw.heads import MultiHeadAttention\n"
                    "from transformer_hw.masks import causal_mask\n"
                ),
            ),
            (
                _POST2,
                "        t = x.shape[1]\n"
                "        mask = causal_mask(t, device=x.device) if mask is None else mask\n"
                + _POST2,
            ),
        ],
        file=B,
    ),
    ref(
        "p5_cache_branch_drops_mask",
        5,
        CACHE_NO_MASK,
        "rewritten",
        [
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                (
                    "        if cache is not None:\n"
                    "            h = x + self.attn(self.ln1(x), cache=cache)\n"
                    "        else:\n"
                    "            h = x + self.attn(self.ln1(x), mask=mask)\n"
                ),
            ),
        ],
        file=B,
    ),
    ref(
        "p5_ffn_gelu",
        5,
        None,
        "unknown",
        [
            (
                "        return self.fc2(torch.relu(self.fc1(x)))\n",
                "        return self.fc2(nn.functional.gelu(self.fc1(x)))\n",
            ),
        ],
        file=B,
    ),
    alice(
        "a_p5_normed_then_add",
        5,
        RESIDUAL,
        "rewritten",
        [
            (
                _A_PRE,
                (
                    "        normed = self.ln1(x)\n"
                    "        mixed = normed + self.attn(normed, mask=mask, cache=cache)\n"
                    "        return mixed + self.ffn(self.ln2(mixed))\n"
                ),
            ),
        ],
        file=B,
    ),
    alice(
        "a_p5_kwargs_post_order",
        5,
        POST_ORDER,
        "refactor",
        [
            (
                _A_PRE,
                (
                    '        attn_args = {"mask": mask, "cache": cache}\n'
                    "        mixed = self.ln1(x + self.attn(x, **attn_args))\n"
                    "        return self.ln2(mixed + self.ffn(mixed))\n"
                ),
            ),
        ],
        file=B,
    ),
    alice(
        "a_p5_cache_or_mask_kwargs",
        5,
        CACHE_NO_MASK,
        "partial",
        [
            (
                _A_PRE,
                (
                    '        extra = {"cache": cache} if cache is not None else {"mask": mask}\n'
                    "        mixed = x + self.attn(self.ln1(x), **extra)\n"
                    "        return mixed + self.ffn(self.ln2(mixed))\n"
                ),
            ),
        ],
        file=B,
    ),
    alice(
        "a_p5_block_mask_helper",
        5,
        BLOCK_NONE_CAUSAL,
        "moved",
        [
            (
                "        self.ffn = FeedForward(d_model, d_ff)\n",
                (
                    "        self.ffn = FeedForward(d_model, d_ff)\n"
                    "\n"
                    "    def _mask_for(self, x, mask):\n"
                    "        if mask is not None:\n"
                    "            return mask\n"
                    "        steps = x.shape[1]\n"
                    "        return torch.ones(steps, steps, dtype=torch.bool, device=x.device).triu(1)\n"
                ),
            ),
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                "        mixed = x + self.attn(self.ln1(x), mask=self._mask_for(x, mask), cache=cache)\n",
            ),
            (
                "        settled = self.ln1(x + self.attn(x, mask=mask))\n",
                "        settled = self.ln1(x + self.attn(x, mask=self._mask_for(x, mask)))\n",
            ),
        ],
        file=B,
    ),
    ref(
        "p5_var_default_is_biased",
        5,
        UNBIASED,
        "rewritten",
        [
            (_VAR, "        var = x.var(dim=-1, keepdim=True)  # biased\n"),
        ],
        file=N,
    ),
    ref(
        "p5_centred_once_d_minus_one",
        5,
        UNBIASED,
        "refactor",
        [
            (
                _LN3,
                (
                    "        centred = x - x.mean(dim=-1, keepdim=True)\n"
                    "        var = (centred**2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)\n"
                    "        return centred / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
                ),
            ),
        ],
        file=N,
    ),
    ref(
        "p5_std_plus_eps",
        5,
        EPS_OUTSIDE,
        "rewritten",
        [
            (
                _LN3,
                (
                    "        mean = x.mean(dim=-1, keepdim=True)\n"
                    "        std = ((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()\n"
                    "        return (x - mean) / (std + self.eps) * self.weight + self.bias\n"
                ),
            ),
        ],
        file=N,
    ),
    ref(
        "p5_rms_eps_after_sqrt",
        5,
        EPS_OUTSIDE,
        "partial",
        [
            (
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
                "        rms = (x * x).mean(dim=-1, keepdim=True).sqrt() + self.eps\n",
            ),
        ],
        file=N,
    ),
    ref(
        "p5_square_minus_mean_square",
        5,
        RAW_MOMENTS,
        "rewritten",
        [
            (_VAR, "        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean\n"),
        ],
        file=N,
    ),
    ref(
        "p5_stats_no_grad",
        5,
        NORM_GRAD,
        "rewritten",
        [
            (
                _LN3,
                (
                    "        with torch.no_grad():  # statistics are constants\n"
                    "            mean = x.mean(dim=-1, keepdim=True)\n"
                    "            var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
                    "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
                ),
            ),
        ],
        file=N,
    ),
    ref(
        "p5_bias_buffer",
        5,
        NOT_PARAMETER,
        "rewritten",
        [
            (
                "        self.bias = nn.Parameter(torch.zeros(d))\n",
                '        self.register_buffer("bias", torch.zeros(d))\n',
            ),
        ],
        file=N,
    ),
    ref(
        "p5_subtract_mean_in_place",
        5,
        IN_PLACE,
        "rewritten",
        [
            (
                _LN3,
                (
                    "        mean = x.mean(dim=-1, keepdim=True)\n"
                    "        x -= mean\n"
                    "        var = (x**2).mean(dim=-1, keepdim=True)\n"
                    "        return x / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
                ),
            ),
        ],
        file=N,
    ),
    ref(
        "p5_var_mean_rsqrt",
        5,
        None,
        "correct",
        [
            (
                _LN3,
                (
                    "        var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)\n"
                    "        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias\n"
                ),
            ),
            (
                _RMS2,
                "        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight\n",
            ),
        ],
        file=N,
    ),
    alice(
        "a_p5_correction_one",
        5,
        UNBIASED,
        "rewritten",
        [
            (
                "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)\n",
                "        spread = torch.var(x, dim=-1, correction=1, keepdim=True)\n",
            ),
        ],
        file=N,
    ),
    alice(
        "a_p5_base_centres",
        5,
        RMS_CENTRED,
        "moved",
        [
            (
                "        return self.normalize(x) * self.weight\n",
                (
                    "        centred = x - x.mean(dim=-1, keepdim=True)\n"
                    "        return self.normalize(centred) * self.weight\n"
                ),
            ),
        ],
        file=N,
    ),
    alice(
        "a_p5_rms_detached",
        5,
        NORM_GRAD,
        "partial",
        [
            (
                "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
                (
                    "        scale = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps).detach()\n"
                    "        return x * scale\n"
                ),
            ),
        ],
        file=N,
    ),
    alice(
        "a_p5_weight_plain_tensor",
        5,
        NOT_PARAMETER,
        "moved",
        [
            (
                "        self.weight = nn.Parameter(torch.ones(d))\n",
                "        self.weight = torch.ones(d)\n",
            ),
        ],
        file=N,
    ),
    alice(
        "a_p5_rms_eps_outside",
        5,
        EPS_OUTSIDE,
        "partial",
        [
            (
                "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
                "        return x / (torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + self.eps)\n",
            ),
        ],
        file=N,
    ),
]

# ---------------------------------------------------------------- part 6: gqa.py
_NUMEL = "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head\n"
_WRITE4 = (
    "        self.k[:, :, self.length : self.length + t] = k_new\n"
    "        self.v[:, :, self.length : self.length + t] = v_new\n"
    "        self.length += t\n"
    "        return self.k[:, :, : self.length], self.v[:, :, : self.length]\n"
)
_OVERFLOW = (
    "        if self.length + t > self.max_len:\n"
    "            raise ValueError(\n"
    '                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"\n'
    "            )\n"
)
_ROPE2 = (
    "        q = apply_rope(q, positions, self.rope_base)\n"
    "        k = apply_rope(k, positions, self.rope_base)\n"
)
_PAIR_CHECK = (
    "        if k_new.shape != v_new.shape:\n"
    "            raise ValueError(\n"
    '                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} differ"\n'
    "            )\n"
)
_TAIL = (
    "        if cache is not None:\n"
    "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n"
    "        n_rep = self.n_heads // self.n_kv_heads\n"
    "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)\n"
    "        out, _ = scaled_dot_product_attention(\n"
    "            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask\n"
    "        )\n"
)
_A_WRITE = (
    "        self.k[:, :, self.length:end].copy_(k_new)\n"
    "        self.v[:, :, self.length:end].copy_(v_new)\n"
)
_A_ROPE = (
    "        q = apply_rope(q, where, self.rope_base)\n"
    "        k = apply_rope(k, where, self.rope_base)\n"
)
_A_WHERE = "        where = torch.arange(start, start + steps, device=x.device)  # absolute positions (T,)\n"

CASES += [
    ref(
        "p6_prod_of_sizes",
        6,
        NO_FACTOR_2,
        "rewritten",
        [
            ("import torch\n", "import math\n\nimport torch\n"),
            (
                _NUMEL,
                "    return math.prod((batch, n_layers, seq_len, n_kv_heads, d_head))\n",
            ),
        ],
    ),
    ref(
        "p6_finfo_bytes",
        6,
        BYTES,
        "rewritten",
        [
            (
                _NUMEL,
                (
                    "    per_element = torch.finfo(torch.float32).bits // 8\n"
                    "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head * per_element\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_expand_new_axis_first",
        6,
        TILED,
        "rewritten",
        [
            (
                "    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)\n",
                "    x = x[:, None].expand(batch, n_rep, n_kv, t, d)  # (B, n_rep, h_kv, T, d)\n",
            ),
        ],
    ),
    ref(
        "p6_repeat_then_cache",
        6,
        CACHE_H_Q,
        "rewritten",
        [
            (
                _TAIL,
                (
                    "        n_rep = self.n_heads // self.n_kv_heads\n"
                    "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, h, T, d_h)\n"
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h, start + T, d_h)\n"
                    "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)\n"
                    "        out, _ = scaled_dot_product_attention(q, k, v, mask)\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_clip_write_then_raise",
        6,
        PARTIAL_WRITE,
        "rewritten",
        [
            (
                _OVERFLOW + _WRITE4,
                (
                    "        end = min(self.length + t, self.max_len)\n"
                    "        self.k[:, :, self.length : end] = k_new[:, :, : end - self.length]\n"
                    "        self.v[:, :, self.length : end] = v_new[:, :, : end - self.length]\n"
                    "        if self.length + t > self.max_len:\n"
                    '            raise ValueError(f"append of t={t} overflows max_len={self.max_len}")\n'
                    "        self.length = end\n"
                    "        return self.k[:, :, :end], self.v[:, :, :end]\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_pair_check_leading_dims",
        6,
        KV_NOT_CROSS,
        "partial",
        [
            (
                "        if k_new.shape != v_new.shape:\n",
                "        if k_new.shape[:2] != v_new.shape[:2]:\n",
            ),
        ],
    ),
    ref(
        "p6_dtype_device_for_k",
        6,
        ONLY_K_CHECKED,
        "partial",
        [
            (
                "            if new.dtype != self.k.dtype or new.device != self.k.device:\n",
                "            if new is k_new and (new.dtype != self.k.dtype or new.device != self.k.device):\n",
            ),
        ],
    ),
    ref(
        "p6_rope_generator",
        6,
        ROPE_ON_V,
        "rewritten",
        [
            (
                _ROPE2,
                "        q, k, v = (apply_rope(z, positions, self.rope_base) for z in (q, k, v))\n",
            ),
        ],
    ),
    ref(
        "p6_end_without_advancing",
        6,
        NO_ADVANCE,
        "rewritten",
        [
            (
                _WRITE4,
                (
                    "        end = self.length + t\n"
                    "        self.k[:, :, self.length : end] = k_new\n"
                    "        self.v[:, :, self.length : end] = v_new\n"
                    "        return self.k[:, :, :end], self.v[:, :, :end]\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_chunk_positions",
        6,
        NO_ROPE_OFFSET,
        "rewritten",
        [
            (
                "        positions = torch.arange(start, start + t, device=x.device)\n",
                "        positions = torch.arange(t, device=x.device)  # position inside this chunk\n",
            ),
        ],
    ),
    ref(
        "p6_rope_default_base",
        6,
        BASE_IGNORED,
        "rewritten",
        [
            (
                _ROPE2,
                "        q = apply_rope(q, positions)\n        k = apply_rope(k, positions)\n",
            ),
        ],
    ),
    ref(
        "p6_free_slots",
        6,
        REFUSES_FULL,
        "refactor",
        [
            (
                _OVERFLOW,
                (
                    "        free = self.max_len - self.length\n"
                    "        if t >= free:\n"
                    "            raise ValueError(\n"
                    '                f"appending t={t} positions: only {free} of max_len={self.max_len} are free"\n'
                    "            )\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_reset_zeroes_buffers",
        6,
        None,
        "unknown",
        [
            (
                (
                    '        """Forget everything cached (``length = 0``)."""\n'
                    "        # TODO: empty the cache.\n"
                    "        ### BEGIN SOLUTION\n"
                    "        self.length = 0\n"
                ),
                (
                    '        """Forget everything cached (``length = 0``)."""\n'
                    "        # TODO: empty the cache.\n"
                    "        ### BEGIN SOLUTION\n"
                    "        self.k.zero_()\n"
                    "        self.v.zero_()\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_checks_helper_k_only",
        6,
        ONLY_K_CHECKED,
        "refactor",
        [
            (
                "    def append(self, k_new: torch.Tensor, v_new: torch.Tensor):\n",
                (
                    "    def _validate(self, name, new):\n"
                    "        batch, n_kv, _, d_head = self.k.shape\n"
                    "        if new.dim() != 4 or (new.shape[0], new.shape[1], new.shape[3]) != (batch, n_kv, d_head):\n"
                    '            raise ValueError(f"{name} has shape {tuple(new.shape)}")\n'
                    "        if new.dtype != self.k.dtype or new.device != self.k.device:\n"
                    '            raise ValueError(f"{name} is {new.dtype} on {new.device}")\n'
                    "\n"
                    "    def append(self, k_new: torch.Tensor, v_new: torch.Tensor):\n"
                ),
            ),
            (
                (
                    "        batch, n_kv, _, d_head = self.k.shape\n"
                    '        for name, new in (("k_new", k_new), ("v_new", v_new)):\n'
                    "            if new.dim() != 4 or (new.shape[0], new.shape[1], new.shape[3]) != (\n"
                    "                batch,\n"
                    "                n_kv,\n"
                    "                d_head,\n"
                    "            ):\n"
                    "                raise ValueError(\n"
                    '                    f"{name} has shape {tuple(new.shape)}, expected ({batch}, {n_kv}, t, {d_head})"\n'
                    "                )\n"
                    "            if new.dtype != self.k.dtype or new.device != self.k.device:\n"
                    "                raise ValueError(\n"
                    '                    f"{name} is {new.dtype} on {new.device}, the cache {self.k.dtype} on "\n'
                    '                    f"{self.k.device}"\n'
                    "                )\n"
                ),
                '        self._validate("k_new", k_new)\n',
            ),
        ],
    ),
    ref(
        "p6_heads_helper_chunk_positions",
        6,
        NO_ROPE_OFFSET,
        "refactor",
        [
            (
                "        t = x.shape[1]\n"
                "        start = 0 if cache is None else cache.length\n"
                "        positions = torch.arange(start, start + t, device=x.device)\n"
                "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T, d_h)\n"
                "        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_h)\n"
                "        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_h)\n"
                + _ROPE2,
                ("        t = x.shape[1]\n        q, k, v = self._project(x)\n"),
            ),
            (
                "    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:\n",
                (
                    "    def _project(self, x):\n"
                    '        """Rotated queries and keys, and values, each split into heads."""\n'
                    "        positions = torch.arange(x.shape[1], device=x.device)\n"
                    "        q = split_heads(self.q_proj(x), self.n_heads)\n"
                    "        k = split_heads(self.k_proj(x), self.n_kv_heads)\n"
                    "        v = split_heads(self.v_proj(x), self.n_kv_heads)\n"
                    "        q = apply_rope(q, positions, self.rope_base)\n"
                    "        k = apply_rope(k, positions, self.rope_base)\n"
                    "        return q, k, v\n"
                    "\n"
                    "    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_copy_and_interleave",
        6,
        None,
        "correct",
        [
            (
                (
                    "    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)\n"
                    "    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)\n"
                ),
                "    return x.repeat_interleave(n_rep, dim=1)  # (B, h_kv * n_rep, T, d)\n",
            ),
            (
                (
                    "        self.k[:, :, self.length : self.length + t] = k_new\n"
                    "        self.v[:, :, self.length : self.length + t] = v_new\n"
                ),
                (
                    "        self.k.narrow(2, self.length, t).copy_(k_new)\n"
                    "        self.v.narrow(2, self.length, t).copy_(v_new)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p6_times_four",
        6,
        BYTES,
        "rewritten",
        [
            (
                "    return int(total)\n",
                "    return int(total) * 4  # float32 entries\n",
            ),
        ],
    ),
    alice(
        "a_p6_cat_copies",
        6,
        TILED,
        "rewritten",
        [
            (
                "    return torch.repeat_interleave(x, n_rep, dim=1)\n",
                "    return torch.cat([x] * n_rep, dim=1)\n",
            ),
        ],
    ),
    alice(
        "a_p6_grouped_q_tiled",
        6,
        TILED,
        "moved",
        [
            (
                "        grouped_q = q.reshape(batch, groups, rep, steps, dh)  # head j -> (j // rep, j % rep)\n",
                "        grouped_q = q.reshape(batch, rep, groups, steps, dh).transpose(1, 2)\n",
            ),
            (
                "        mixed = mixed.reshape(batch, self.n_heads, steps, dh).permute(0, 2, 1, 3)\n",
                "        mixed = mixed.transpose(1, 2).reshape(batch, self.n_heads, steps, dh).permute(0, 2, 1, 3)\n",
            ),
        ],
    ),
    alice(
        "a_p6_no_t_agreement",
        6,
        KV_NOT_CROSS,
        "rewritten",
        [
            (
                (
                    "        if k_new.shape[2] != v_new.shape[2]:\n"
                    "            raise ValueError(\n"
                    '                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} hold different t"\n'
                    "            )\n"
                ),
                "",
            ),
        ],
    ),
    alice(
        "a_p6_rope_values",
        6,
        ROPE_ON_V,
        "rewritten",
        [
            (_A_ROPE, _A_ROPE + "        v = apply_rope(v, where, self.rope_base)\n"),
        ],
    ),
    alice(
        "a_p6_keys_default_base",
        6,
        BASE_IGNORED,
        "partial",
        [
            (
                "        k = apply_rope(k, where, self.rope_base)\n",
                "        k = apply_rope(k, where)\n",
            ),
        ],
    ),
    alice(
        "a_p6_length_tensor",
        6,
        LENGTH_TENSOR,
        "rewritten",
        [
            (
                "        self.length = 0\n\n    def _check",
                "        self.length = torch.tensor(0)\n\n    def _check",
            ),
        ],
    ),
    alice(
        "a_p6_empty_default_dtype",
        6,
        CACHE_DEFAULT_DTYPE,
        "rewritten",
        [
            (
                (
                    "        self.k = torch.empty(shape, device=device, dtype=dtype)\n"
                    "        self.v = torch.empty(shape, device=device, dtype=dtype)\n"
                ),
                (
                    "        self.k = torch.empty(shape, device=device)\n"
                    "        self.v = torch.empty(shape, device=device)\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p6_future_default_device",
        6,
        MADE_ON_CPU,
        "rewritten",
        [
            (
                "        future = causal_mask(steps, total, device=x.device)  # (T, start + T)\n",
                "        future = causal_mask(steps, total)  # (T, start + T)\n",
            ),
        ],
    ),
]

# ---------------------------------------------------------------- part 7: charlm.py (reference)
_TOK = "tokenizer"
_BATCH = "lm_batch"
_LOSS = "lm_loss"
_EVAL = "evaluate"
_TRAIN = "test_train_"
_MODEL = "charlm or generate"
_GEN = "generate"
_EV_LOOP = (
    "        with torch.no_grad():\n"
    "            for inputs, targets in batches:\n"
    "                inputs, targets = inputs.to(device), targets.to(device)\n"
    "                real = int((targets != IGNORE_INDEX).sum())\n"
    "                if real:\n"
    '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
    "                    count += real\n"
)
_TR_STEP = (
    "            loss = lm_loss(model(inputs), targets)\n"
    "            optimizer.zero_grad()\n"
    "            loss.backward()\n"
    "            optimizer.step()\n"
)
_TR_HEAD = "        model.train()\n        total, count = 0.0, 0\n"
_PICK = (
    '                logits[PAD_ID] = float("-inf")\n'
    "                if greedy:\n"
    "                    new = logits.argmax()[None]\n"
    "                else:\n"
    "                    probs = torch.softmax(logits / temperature, dim=-1)\n"
    "                    new = torch.multinomial(probs, 1, generator=generator)\n"
)
_LOSS_BODY = (
    "    if not (targets != IGNORE_INDEX).any():\n"
    '        raise ValueError("targets has no real target (all are IGNORE_INDEX)")\n'
    "    return F.cross_entropy(\n"
    "        logits.reshape(-1, logits.shape[-1]),\n"
    "        targets.reshape(-1),\n"
    "        ignore_index=IGNORE_INDEX,\n"
    "        reduction=reduction,\n"
    "    )\n"
)
_CACHES = (
    "        weight = self.tok_emb.weight\n"
    "        return [\n"
    "            KVCache(\n"
    "                batch,\n"
    "                block.attn.n_heads,\n"
    "                self.max_len,\n"
    "                block.attn.d_head,\n"
    "                device=weight.device,\n"
    "                dtype=weight.dtype,\n"
    "            )\n"
    "            for block in self.blocks\n"
    "        ]\n"
)

CASES += [
    ref(
        "p7_vocab_lowercased",
        7,
        VOCAB_CASE,
        "rewritten",
        [
            (
                "        chars = sorted(set(text))\n",
                "        chars = sorted({c.lower() for c in text})\n",
            ),
        ],
        select=_TOK,
    ),
    ref(
        "p7_zip_range_ids",
        7,
        ID_ZERO,
        "rewritten",
        [
            (
                "        self.stoi = {c: i + 1 for i, c in enumerate(chars)}\n",
                "        self.stoi = dict(zip(chars, range(len(chars))))\n",
            ),
        ],
        select=_TOK,
    ),
    ref(
        "p7_decode_skip_set",
        7,
        DECODE_IGNORE,
        "rewritten",
        [
            (
                "        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]\n",
                (
                    "        skip = {PAD_ID, IGNORE_INDEX}\n"
                    "        ids = [i for i in ids if i not in skip]\n"
                    "        unknown = [i for i in ids if i not in self.itos]\n"
                ),
            ),
        ],
        select=_TOK,
    ),
    ref(
        "p7_negative_slice_pad",
        7,
        LEFT_PAD,
        "rewritten",
        [
            (
                (
                    "        inputs[row, : len(s) - 1] = s[:-1]\n"
                    "        targets[row, : len(s) - 1] = s[1:]\n"
                ),
                (
                    "        inputs[row, -(len(s) - 1) :] = s[:-1]\n"
                    "        targets[row, -(len(s) - 1) :] = s[1:]\n"
                ),
            ),
        ],
        select=_BATCH,
    ),
    ref(
        "p7_targets_like_inputs",
        7,
        PAD_CLASS_0,
        "rewritten",
        [
            (
                (
                    "    targets = torch.full(\n"
                    "        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device\n"
                    "    )\n"
                ),
                "    targets = torch.full_like(inputs, pad_id)\n",
            ),
        ],
        select=_BATCH,
    ),
    ref(
        "p7_nan_means_empty",
        7,
        EMPTY_ONLY_MEAN,
        "rewritten",
        [
            (
                _LOSS_BODY,
                (
                    "    loss = F.cross_entropy(\n"
                    "        logits.reshape(-1, logits.shape[-1]),\n"
                    "        targets.reshape(-1),\n"
                    "        ignore_index=IGNORE_INDEX,\n"
                    "        reduction=reduction,\n"
                    "    )\n"
                    "    if torch.isnan(loss):  # 0 / 0: nothing to average\n"
                    '        raise ValueError("targets has no real target (all are IGNORE_INDEX)")\n'
                    "    return loss\n"
                ),
            ),
        ],
        select=_LOSS,
    ),
    ref(
        "p7_log_of_softmax",
        7,
        LOG_SOFTMAX,
        "rewritten",
        [
            (
                (
                    "    return F.cross_entropy(\n"
                    "        logits.reshape(-1, logits.shape[-1]),\n"
                ),
                (
                    "    log_probs = torch.log(torch.softmax(logits, dim=-1))\n"
                    "    return F.nll_loss(\n"
                    "        log_probs.reshape(-1, logits.shape[-1]),\n"
                ),
            ),
        ],
        select=_LOSS,
    ),
    ref(
        "p7_view_flatten",
        7,
        VIEW,
        "rewritten",
        [
            (
                "        logits.reshape(-1, logits.shape[-1]),\n        targets.reshape(-1),\n",
                "        logits.view(-1, logits.shape[-1]),\n        targets.view(-1),\n",
            ),
        ],
        select=_LOSS,
    ),
    ref(
        "p7_count_then_sum",
        7,
        TWO_PASSES,
        "rewritten",
        [
            (
                _EV_LOOP,
                (
                    "        count = sum(int((t != IGNORE_INDEX).sum()) for _, t in batches)\n"
                    "        with torch.no_grad():\n"
                    "            for inputs, targets in batches:\n"
                    "                inputs, targets = inputs.to(device), targets.to(device)\n"
                    "                if (targets != IGNORE_INDEX).any():\n"
                    '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
                ),
            ),
        ],
        select=_EVAL,
    ),
    ref(
        "p7_eval_without_call",
        7,
        NO_EVAL,
        "rewritten",
        [
            (
                "    was_training = model.training\n    model.eval()\n    total, count = 0.0, 0\n",
                "    was_training = model.training\n    model.eval\n    total, count = 0.0, 0\n",
            ),
        ],
        select=_EVAL,
    ),
    ref(
        "p7_grad_while_training",
        7,
        BUILDS_GRAPH,
        "partial",
        [
            (
                (
                    "        with torch.no_grad():\n            for inputs, targets in batches:\n"
                    "                inputs, targets = inputs.to(device), targets.to(device)\n"
                ),
                (
                    "        with torch.set_grad_enabled(was_training):\n"
                    "            for inputs, targets in batches:\n"
                    "                inputs, targets = inputs.to(device), targets.to(device)\n"
                ),
            ),
        ],
        select=_EVAL,
    ),
    ref(
        "p7_restore_current_mode",
        7,
        STAYS_EVAL,
        "rewritten",
        [
            (
                "    finally:\n        model.train(was_training)\n    if count == 0:\n",
                "    finally:\n        model.train(model.training)\n    if count == 0:\n",
            ),
        ],
        select=_EVAL,
    ),
    ref(
        "p7_eval_moves_targets_only",
        7,
        EVAL_NOT_MOVED,
        "partial",
        [
            (
                "                inputs, targets = inputs.to(device), targets.to(device)\n",
                "                targets = targets.to(device)  # the loss needs them beside the logits\n",
            ),
        ],
        select=_EVAL,
    ),
    ref(
        "p7_train_loss_per_batch",
        7,
        BATCH_MEANS,
        "partial",
        [
            (
                "            total += loss.item() * real\n            count += real\n",
                "            total += loss.item()\n            count += 1\n",
            ),
        ],
        select=_TRAIN,
    ),
    ref(
        "p7_train_loss_evaluated",
        7,
        LOSS_AFTER,
        "rewritten",
        [
            (
                '                "train_loss": total / count,\n',
                '                "train_loss": evaluate(model, train_batches),\n',
            ),
        ],
        select=_TRAIN,
    ),
    ref(
        "p7_totals_before_epochs",
        7,
        NOT_RESET,
        "rewritten",
        [
            ("    history = []\n", "    history = []\n    total, count = 0.0, 0\n"),
            (_TR_HEAD, "        model.train()\n"),
        ],
        select=_TRAIN,
    ),
    ref(
        "p7_lr_three_e_four",
        7,
        LR,
        "rewritten",
        [
            (
                "def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = 1e-3):\n",
                "def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = 3e-4):\n",
            ),
        ],
        select=_TRAIN,
    ),
    ref(
        "p7_pos_table_128",
        7,
        HARD_128,
        "rewritten",
        [
            (
                "        self.pos_emb = nn.Embedding(max_len, d_model)\n",
                "        self.pos_emb = nn.Embedding(128, d_model)  # longest context\n",
            ),
        ],
        select=_MODEL,
    ),
    ref(
        "p7_one_cache_repeated",
        7,
        SHARED_CACHE,
        "rewritten",
        [
            (
                _CACHES,
                (
                    "        weight = self.tok_emb.weight\n"
                    "        attn = self.blocks[0].attn\n"
                    "        cache = KVCache(\n"
                    "            batch, attn.n_heads, self.max_len, attn.d_head, device=weight.device, dtype=weight.dtype\n"
                    "        )\n"
                    "        return [cache] * self.n_layers\n"
                ),
            ),
        ],
        select=_MODEL,
    ),
    ref(
        "p7_positions_restart_for_chunks",
        7,
        POS_RESTART,
        "partial",
        [
            (
                "        positions = torch.arange(start, start + t, device=idx.device)\n",
                (
                    "        if t == 1:  # one decoding step: the next position\n"
                    "            positions = torch.full((1,), start, device=idx.device)\n"
                    "        else:\n"
                    "            positions = torch.arange(t, device=idx.device)\n"
                ),
            ),
        ],
        select=_MODEL,
    ),
    ref(
        "p7_positions_on_cpu",
        7,
        MADE_ON_CPU,
        "rewritten",
        [
            (
                "        positions = torch.arange(start, start + t, device=idx.device)\n",
                "        positions = torch.arange(start, start + t)\n",
            ),
        ],
        select=_MODEL,
    ),
    ref(
        "p7_use_cache_off_by_default",
        7,
        CACHE_IGNORED,
        "rewritten",
        [
            ("    use_cache: bool = True,\n", "    use_cache: bool = False,\n"),
        ],
        select=_GEN,
    ),
    ref(
        "p7_prompt_into_cache_one_by_one",
        7,
        PROMPT_BY_TOKEN,
        "rewritten",
        [
            (
                "            feed = ids\n",
                (
                    "            feed = ids\n"
                    "            if use_cache:  # warm the caches one token at a time\n"
                    "                for token in ids[:-1]:\n"
                    "                    model(token.view(1, 1), caches)\n"
                    "                feed = ids[-1:]\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_feed_everything",
        7,
        REFEEDS,
        "rewritten",
        [
            (
                "                feed = new if use_cache else ids\n",
                "                feed = ids\n",
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_pad_excluded_when_sampling",
        7,
        PAD_NOT_EXCLUDED,
        "partial",
        [
            (
                _PICK,
                (
                    "                if greedy:\n"
                    "                    new = logits.argmax()[None]\n"
                    "                else:\n"
                    '                    logits[PAD_ID] = float("-inf")\n'
                    "                    probs = torch.softmax(logits / temperature, dim=-1)\n"
                    "                    new = torch.multinomial(probs, 1, generator=generator)\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_float_prompt_rounded",
        7,
        PROMPT_CAST,
        "partial",
        [
            (
                '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n',
                (
                    "    if isinstance(prompt, torch.Tensor) and prompt.is_floating_point():\n"
                    "        prompt = prompt.round().long()  # ids typed as floats\n"
                    '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n'
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_numbers_checked_in_helper",
        7,
        TEMPERATURE_GREEDY,
        "refactor",
        [
            (
                (
                    "    if max_new_tokens < 0:\n"
                    '        raise ValueError(f"max_new_tokens={max_new_tokens} must not be negative")\n'
                    "    if len(prompt) + max_new_tokens > model.max_len:\n"
                    "        raise ValueError(\n"
                    '            f"len(prompt)={len(prompt)} + max_new_tokens={max_new_tokens} exceeds "\n'
                    '            f"max_len={model.max_len}"\n'
                    "        )\n"
                    "    if not greedy and temperature <= 0:\n"
                    '        raise ValueError(f"temperature={temperature} must be positive")\n'
                ),
                "    _check_numbers(len(prompt), max_new_tokens, temperature, model.max_len)\n",
            ),
            (
                "def generate(\n",
                (
                    "def _check_numbers(n_prompt, max_new_tokens, temperature, max_len):\n"
                    '    """The numeric arguments of generate, each checked before any work."""\n'
                    "    if max_new_tokens < 0:\n"
                    '        raise ValueError(f"max_new_tokens={max_new_tokens} must not be negative")\n'
                    "    if n_prompt + max_new_tokens > max_len:\n"
                    "        raise ValueError(\n"
                    '            f"len(prompt)={n_prompt} + max_new_tokens={max_new_tokens} exceeds max_len={max_len}"\n'
                    "        )\n"
                    "    if temperature <= 0:\n"
                    '        raise ValueError(f"temperature={temperature} must be positive")\n'
                    "\n"
                    "\n"
                    "def generate(\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_do_while_generation",
        7,
        ZERO_STILL_ONE,
        "rewritten",
        [
            (
                "            for _ in range(max_new_tokens):\n",
                "            while True:\n",
            ),
            (
                "                feed = new if use_cache else ids\n",
                (
                    "                feed = new if use_cache else ids\n"
                    "                if len(ids) - len(prompt) >= max_new_tokens:\n"
                    "                    break\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_needs_one_token",
        7,
        ZERO_REFUSED,
        "rewritten",
        [
            (
                (
                    "    if max_new_tokens < 0:\n"
                    '        raise ValueError(f"max_new_tokens={max_new_tokens} must not be negative")\n'
                ),
                (
                    "    if max_new_tokens < 1:\n"
                    '        raise ValueError(f"max_new_tokens={max_new_tokens} must be positive")\n'
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_top_k_sampling",
        7,
        TRUNCATED,
        "rewritten",
        [
            (
                "                    new = torch.multinomial(probs, 1, generator=generator)\n",
                (
                    "                    top_p, top_i = probs.topk(min(10, probs.numel()))\n"
                    "                    new = top_i[torch.multinomial(top_p, 1, generator=generator)]\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_cooler_default",
        7,
        TEMPERATURE_DEFAULT,
        "rewritten",
        [
            ("    temperature: float = 1.0,\n", "    temperature: float = 0.8,\n"),
        ],
        select=_GEN,
    ),
    ref(
        "p7_prompt_long_in_place",
        7,
        PROMPT_NOT_MOVED,
        "rewritten",
        [
            (
                "    ids = prompt.to(device=device, dtype=torch.long)\n",
                "    ids = prompt.long()\n",
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_encode_drops_unknown",
        7,
        None,
        "unknown",
        [
            (
                (
                    "        unknown = [c for c in s if c not in self.stoi]\n"
                    "        if unknown:\n"
                    '            raise ValueError(f"character {unknown[0]!r} is not in the vocabulary")\n'
                    "        return [self.stoi[c] for c in s]\n"
                ),
                "        return [self.stoi[c] for c in s if c in self.stoi]\n",
            ),
        ],
        select=_TOK,
    ),
    ref(
        "p7_no_final_norm",
        7,
        None,
        "unknown",
        [
            (
                "        return self.head(self.ln_f(x))  # (B, T, V)\n",
                "        return self.head(x)  # (B, T, V)\n",
            ),
        ],
        select=_MODEL,
    ),
    ref(
        "p7_new_ids_only",
        7,
        None,
        "unknown",
        [
            (
                "    return ids\n    ### END SOLUTION\n",
                "    return ids[len(prompt) :]\n    ### END SOLUTION\n",
            ),
        ],
        select=_GEN,
    ),
    ref(
        "p7_gather_loss",
        7,
        None,
        "correct",
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
                    "    log_probs = torch.log_softmax(flat_logits[real], dim=-1)  # (n, V)\n"
                    "    nll = -log_probs.gather(1, flat_targets[real][:, None]).squeeze(1)\n"
                    '    return nll.sum() if reduction == "sum" else nll.mean()\n'
                ),
            ),
        ],
    ),
]

# ---------------------------------------------------------------- part 7: charlm.py (Alice)
_A_EV_BODY = (
    "    saved = _remember_modes(model)\n"
    "    device = _model_device(model)\n"
    "    total, tokens = 0.0, 0\n"
    "    try:\n"
    "        model.eval()\n"
    "        with torch.no_grad():\n"
    "            for inputs, targets in batches:\n"
    "                targets = targets.to(device)\n"
    "                real = int((targets != IGNORE_INDEX).sum())\n"
    "                if real == 0:\n"
    "                    continue\n"
    "                logits = model(inputs.to(device))\n"
    '                total += float(lm_loss(logits, targets, reduction="sum"))\n'
    "                tokens += real\n"
    "    finally:\n"
    "        _restore_modes(saved)\n"
)
_A_STEP = (
    "    optimizer.zero_grad()\n"
    "    loss = lm_loss(model(inputs), targets)\n"
    "    loss.backward()\n"
    "    optimizer.step()\n"
)
_A_STEPS = "        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]\n"
_A_LOGP = "    log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)\n"

CASES += [
    alice(
        "a_p7_enumerate_from_zero",
        7,
        ID_ZERO,
        "rewritten",
        [
            (
                "        self.stoi = {ch: n for n, ch in enumerate(self.chars, start=1)}\n",
                "        self.stoi = {ch: n for n, ch in enumerate(self.chars)}\n",
            ),
        ],
        select=_TOK,
    ),
    alice(
        "a_p7_targets_copy_inputs",
        7,
        NOT_SHIFTED,
        "rewritten",
        [
            (
                "        targets[row, :span] = s[1:]\n",
                "        targets[row, :span] = inputs[row, :span]\n",
            ),
        ],
        select=_BATCH,
    ),
    alice(
        "a_p7_gather_clamped_targets",
        7,
        PAD_CLASS_0,
        "refactor",
        [
            (
                _A_LOGP
                + '    total = F.nll_loss(log_probs, targets.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum")\n',
                _A_LOGP
                + "    safe = targets.reshape(-1, 1).clamp(min=0)  # IGNORE_INDEX is not a valid index\n"
                "    total = -log_probs.gather(1, safe).sum()\n",
            ),
        ],
        select=_LOSS,
    ),
    alice(
        "a_p7_empty_checked_for_mean",
        7,
        EMPTY_ONLY_MEAN,
        "partial",
        [
            (
                '    if count == 0:\n        raise ValueError(f"targets (shape',
                '    if count == 0 and reduction == "mean":\n        raise ValueError(f"targets (shape',
            ),
        ],
        select=_LOSS,
    ),
    alice(
        "a_p7_indexed_batches",
        7,
        TWO_PASSES,
        "rewritten",
        [
            (
                "            for inputs, targets in batches:\n                targets = targets.to(device)\n",
                (
                    "            for i in range(len(batches)):\n"
                    "                inputs, targets = batches[i]\n"
                    "                targets = targets.to(device)\n"
                ),
            ),
        ],
        select=_EVAL,
    ),
    alice(
        "a_p7_modes_saved_late",
        7,
        STAYS_EVAL,
        "moved",
        [
            (
                (
                    "    saved = _remember_modes(model)\n    device = _model_device(model)\n"
                    "    total, tokens = 0.0, 0\n    try:\n        model.eval()\n"
                ),
                (
                    "    device = _model_device(model)\n"
                    "    total, tokens = 0.0, 0\n    try:\n        model.eval()\n"
                    "        saved = _remember_modes(model)\n"
                ),
            ),
        ],
        select=_EVAL,
    ),
    alice(
        "a_p7_batch_loss_helper",
        7,
        BUILDS_GRAPH,
        "refactor",
        [
            (
                _A_EV_BODY,
                (
                    "    saved = _remember_modes(model)\n"
                    "    device = _model_device(model)\n"
                    "    total, tokens = 0.0, 0\n"
                    "    try:\n"
                    "        model.eval()\n"
                    "        for inputs, targets in batches:\n"
                    "            loss, real = _summed_loss(model, inputs.to(device), targets.to(device))\n"
                    "            total += loss\n"
                    "            tokens += real\n"
                    "    finally:\n"
                    "        _restore_modes(saved)\n"
                ),
            ),
            (
                "def evaluate(model, batches):\n",
                (
                    "def _summed_loss(model, inputs, targets):\n"
                    '    """(summed loss as a tensor, real targets) of one batch; (0.0, 0) without targets."""\n'
                    "    real = int((targets != IGNORE_INDEX).sum())\n"
                    "    if real == 0:\n"
                    "        return 0.0, 0\n"
                    '    return lm_loss(model(inputs), targets, reduction="sum"), real\n'
                    "\n"
                    "\n"
                    "def evaluate(model, batches):\n"
                ),
            ),
            (
                (
                    "    if tokens == 0:\n"
                    '        raise ValueError("batches hold no real target at all; nothing to evaluate")\n'
                    "    return total / tokens\n"
                ),
                (
                    "    if tokens == 0:\n"
                    '        raise ValueError("batches hold no real target at all; nothing to evaluate")\n'
                    "    return float(total / tokens)\n"
                ),
            ),
        ],
        select=_EVAL,
    ),
    alice(
        "a_p7_restore_after_no_grad",
        7,
        NO_FINALLY,
        "refactor",
        [
            (
                _A_EV_BODY,
                (
                    "    saved = _remember_modes(model)\n"
                    "    device = _model_device(model)\n"
                    "    model.eval()\n"
                    "    with torch.no_grad():\n"
                    "        pairs = ((x.to(device), y.to(device)) for x, y in batches)\n"
                    "        sums = [\n"
                    '            (float(lm_loss(model(x), y, reduction="sum")), int((y != IGNORE_INDEX).sum()))\n'
                    "            for x, y in pairs\n"
                    "            if (y != IGNORE_INDEX).any()\n"
                    "        ]\n"
                    "    _restore_modes(saved)\n"
                    "    total = sum(s for s, _ in sums)\n"
                    "    tokens = sum(n for _, n in sums)\n"
                ),
            ),
        ],
        select=_EVAL,
    ),
    alice(
        "a_p7_zero_grad_each_epoch",
        7,
        ZERO_GRAD_ONCE,
        "moved",
        [
            (
                _A_STEP,
                "    loss = lm_loss(model(inputs), targets)\n    loss.backward()\n    optimizer.step()\n",
            ),
            (
                "        model.train()\n" + _A_STEPS,
                "        model.train()\n        optimizer.zero_grad()\n" + _A_STEPS,
            ),
        ],
        select=_TRAIN,
    ),
    alice(
        "a_p7_step_after_steps",
        7,
        STEP_AFTER,
        "moved",
        [
            (
                _A_STEP,
                "    optimizer.zero_grad()\n    loss = lm_loss(model(inputs), targets)\n    loss.backward()\n",
            ),
            (_A_STEPS, _A_STEPS + "        optimizer.step()\n"),
        ],
        select=_TRAIN,
    ),
    alice(
        "a_p7_accumulate_epoch",
        7,
        ONE_STEP_EPOCH,
        "moved",
        [
            (
                _A_STEP,
                "    loss = lm_loss(model(inputs), targets)\n    loss.backward()\n",
            ),
            (
                "        model.train()\n" + _A_STEPS,
                "        model.train()\n        optimizer.zero_grad()\n"
                + _A_STEPS
                + "        optimizer.step()\n",
            ),
        ],
        select=_TRAIN,
    ),
    alice(
        "a_p7_caches_fixed_128",
        7,
        HARD_128,
        "moved",
        [
            (
                "            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,\n",
                "            KVCache(batch, self.n_heads, 128, self.d_model // self.n_heads,\n",
            ),
        ],
        select=_MODEL,
    ),
    alice(
        "a_p7_generate_builds_caches",
        7,
        SHARED_CACHE,
        "moved",
        [
            (
                "                caches = model.make_caches(1) if use_cache else None\n",
                (
                    "                caches = None\n"
                    "                if use_cache:\n"
                    "                    width = model.d_model // model.n_heads\n"
                    "                    cache = KVCache(1, model.n_heads, model.max_len, width, device=device,\n"
                    "                                    dtype=model.head.weight.dtype)\n"
                    "                    caches = [cache] * model.n_layers\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    alice(
        "a_p7_prompt_tokens_into_cache",
        7,
        PROMPT_BY_TOKEN,
        "partial",
        [
            (
                "                last = model(torch.tensor([ids], device=device), caches)[0, -1]\n",
                (
                    "                if use_cache:\n"
                    "                    for token in ids:\n"
                    "                        last = model(torch.tensor([[token]], device=device), caches)[0, -1]\n"
                    "                else:\n"
                    "                    last = model(torch.tensor([ids], device=device), caches)[0, -1]\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    alice(
        "a_p7_pad_masked_for_gumbel",
        7,
        PAD_NOT_EXCLUDED,
        "partial",
        [
            (
                (
                    "    logits = logits.double().clone()\n"
                    '    logits[PAD_ID] = float("-inf")\n'
                    "    if greedy:\n"
                    "        return int(torch.argmax(logits))\n"
                ),
                (
                    "    logits = logits.double().clone()\n"
                    "    if greedy:\n"
                    "        return int(torch.argmax(logits))\n"
                    '    logits[PAD_ID] = float("-inf")\n'
                ),
            ),
        ],
        select=_GEN,
    ),
    alice(
        "a_p7_list_prompt_accepted",
        7,
        PROMPT_CAST,
        "partial",
        [
            (
                "    if (not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.numel() < 1\n",
                (
                    "    if isinstance(prompt, (list, tuple)):\n"
                    "        prompt = torch.tensor(prompt, dtype=torch.long)\n"
                    "    if (not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.numel() < 1\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    alice(
        "a_p7_nucleus",
        7,
        TRUNCATED,
        "rewritten",
        [
            (
                "    noise_device = generator.device if generator is not None else logits.device\n",
                (
                    "    # nucleus: keep the smallest set of ids holding 90% of the mass\n"
                    "    probs = torch.softmax(logits / temperature, dim=-1)\n"
                    "    ordered, order = probs.sort(descending=True)\n"
                    "    outside = ordered.cumsum(-1) - ordered > 0.9\n"
                    "    logits = logits.clone()\n"
                    '    logits[order[outside]] = float("-inf")\n'
                    "    noise_device = generator.device if generator is not None else logits.device\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    alice(
        "a_p7_epochs_from_zero",
        7,
        None,
        "unknown",
        [
            (
                "    for epoch in range(1, epochs + 1):\n",
                "    for epoch in range(epochs):\n",
            ),
        ],
        select=_TRAIN,
    ),
    alice(
        "a_p7_multinomial_pick",
        7,
        None,
        "correct",
        [
            (
                (
                    "    # Gumbel-max: argmax(logits / T + G) with G ~ Gumbel(0, 1) samples softmax(logits / T).\n"
                    "    noise_device = generator.device if generator is not None else logits.device\n"
                    "    uniform = torch.rand(logits.shape, generator=generator, device=noise_device, dtype=torch.float64)\n"
                    "    gumbel = -torch.log(-torch.log(uniform)).to(logits.device)\n"
                    "    return int(torch.argmax(logits / temperature + gumbel))\n"
                ),
                (
                    "    probs = torch.softmax(logits / temperature, dim=-1)\n"
                    "    return int(torch.multinomial(probs, 1, generator=generator))\n"
                ),
            ),
        ],
    ),
]


# ---------------------------------------------------------------- several parts at once
def _named(name):
    return next(case for case in CASES if case.name == name)


def _multi(name, first, *others):
    """Bugs of several single-part cases (same base, other files) in one submission; the
    single-part cases it takes are left out of the set."""
    lead = _named(first)
    rest = [_named(other) for other in others]
    assert all(case.base == lead.base and case.file != lead.file for case in rest), name
    extra = (
        lead.extra
        + tuple(
            item
            for case in rest
            for item in ((case.file, old, new) for old, new in case.edits)
        )
        + tuple(item for case in rest for item in case.extra)
    )
    select = lead.select or next((case.select for case in rest if case.part == 7), "")
    TAKEN.update((first, *others))
    return Case(
        name=name,
        base=lead.base,
        file=lead.file,
        edits=lead.edits,
        part=lead.part,
        expected=lead.expected,
        kind="multi",
        also=(lead.expected, *(case.expected for case in rest)),
        extra=extra,
        also_parts=tuple(case.part for case in rest),
        select=select,
    )


TAKEN = set()
MULTI = [
    _multi("m_dv_scale_and_diagonal", "p1_scale_from_values", "p2_triu_from_offset"),
    _multi("m_unscaled_and_split", "p1_einsum_unscaled", "p3_unflatten_no_transpose"),
    _multi("m_query_axis_and_freq", "p1_softmax_of_transpose", "p4_reciprocal_freq"),
    _multi("m_inverted_and_pad", "p1_where_keeps_true", "p2_positions_from_one"),
    _multi("m_nan_row_and_unbiased", "p1_nan_to_num_top", "p5_var_default_is_biased"),
    _multi("m_q_in_place_and_numel", "p1_divide_q_in_place", "p6_prod_of_sizes"),
    _multi(
        "m_cpu_sin_bytes",
        "p2_range_list_positions",
        "p4_sin_of_minus",
        "p6_finfo_bytes",
    ),
    _multi("m_bool_mask_and_residual", "p3_mask_to_bool", "p5_reassign_x_normed"),
    _multi(
        "m_cache_causal_and_rope_v", "p3_cache_defaults_causal", "p6_rope_generator"
    ),
    _multi("m_float32_and_lowercase", "p4_dtype_or_float32", "p7_vocab_lowercased"),
    _multi("m_halves_and_eps", "p4_chunk_halves", "p5_std_plus_eps"),
    _multi("m_raw_moments_and_ids", "p5_square_minus_mean_square", "p7_zip_range_ids"),
    _multi("m_bias_buffer_and_tiled", "p5_bias_buffer", "p6_expand_new_axis_first"),
    _multi("m_no_advance_and_lr", "p6_end_without_advancing", "p7_lr_three_e_four"),
    _multi("m_clip_write_and_decode", "p6_clip_write_then_raise", "p7_decode_skip_set"),
    _multi("m_chunk_positions_and_view", "p6_chunk_positions", "p7_view_flatten"),
    _multi(
        "m_default_base_and_temperature", "p6_rope_default_base", "p7_cooler_default"
    ),
    _multi("am_dk_and_triu_one", "a_p1_q_over_dk", "a_p2_triu_one"),
    _multi("am_fill_and_conj", "a_p1_fill_not_mask", "a_p4_conj_spin"),
    _multi(
        "am_correction_cat_ids",
        "a_p5_correction_one",
        "a_p6_cat_copies",
        "a_p7_enumerate_from_zero",
    ),
    _multi("am_last_index_and_rope_v", "a_p2_last_index_limit", "a_p6_rope_values"),
    _multi("am_merge_view_and_four", "a_p3_merge_view_no_permute", "a_p6_times_four"),
]
CASES = [case for case in CASES if case.name not in TAKEN] + MULTI

# ---------------------------------------------------------------- more refactors and correct styles
_MASK_BLOCK = (
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
)
_QKV3 = (
    "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)\n"
    "        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
    "        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
)

CASES += [
    ref(
        "p1_mask_helper_keys_rows",
        1,
        QUERY_AXIS,
        "refactor",
        [
            (
                "def scaled_dot_product_attention(\n",
                (
                    "def _masked(scores, mask):\n"
                    '    """The scores with ``mask`` applied: bool True prohibited, float added."""\n'
                    "    if mask is None:\n"
                    "        return scores\n"
                    "    try:\n"
                    "        mask = mask.expand(scores.shape)\n"
                    "    except RuntimeError:\n"
                    "        raise ValueError(\n"
                    '            f"mask of shape {tuple(mask.shape)} does not broadcast to {tuple(scores.shape)}"\n'
                    "        ) from None\n"
                    "    if mask.dtype == torch.bool:\n"
                    '        return scores.masked_fill(mask, float("-inf"))\n'
                    "    return scores + mask\n"
                    "\n"
                    "\n"
                    "def scaled_dot_product_attention(\n"
                ),
            ),
            (_MASK_BLOCK, "    scores = _masked(scores, mask)\n"),
            (
                _WEIGHTS,
                "    weights = softmax(scores, dim=-2)  # normalize over the keys (the rows of k)\n",
            ),
        ],
    ),
    ref(
        "p3_projection_loop",
        3,
        CROSS_FROM_X,
        "refactor",
        [
            (
                _QKV3,
                (
                    "        q, k, v = (\n"
                    "            split_heads(proj(x), self.n_heads)  # (B, h, T, d_h)\n"
                    "            for proj in (self.q_proj, self.k_proj, self.v_proj)\n"
                    "        )\n"
                ),
            ),
        ],
    ),
    ref(
        "p1_einsum_where",
        1,
        None,
        "correct",
        [
            (
                _SCORES,
                '    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5\n',
            ),
            (
                _BOOL_FILL,
                '            scores = torch.where(mask, torch.full_like(scores, float("-inf")), scores)\n',
            ),
            (
                "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)\n",
                '    return torch.einsum("...qk,...kd->...qd", weights, v), weights\n',
            ),
        ],
    ),
    alice(
        "a_p5_centred_square_mean",
        5,
        None,
        "correct",
        [
            (
                (
                    "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)\n"
                    "        return (x - centre) * torch.rsqrt(spread + self.eps)\n"
                ),
                (
                    "        offset = x - centre\n"
                    "        spread = (offset * offset).mean(dim=-1, keepdim=True)\n"
                    "        return offset / torch.sqrt(spread + self.eps)\n"
                ),
            ),
        ],
        file=N,
    ),
    ref(
        "p7_evaluate_with_next",
        7,
        None,
        "correct",
        [
            (
                _EV_LOOP,
                (
                    "        with torch.no_grad():\n"
                    "            iterator = iter(batches)\n"
                    "            while True:\n"
                    "                try:\n"
                    "                    inputs, targets = next(iterator)\n"
                    "                except StopIteration:\n"
                    "                    break\n"
                    "                targets = targets.to(device)\n"
                    "                real = int((targets != IGNORE_INDEX).sum())\n"
                    "                if real:\n"
                    "                    logits = model(inputs.to(device))\n"
                    '                    total += lm_loss(logits, targets, reduction="sum").item()\n'
                    "                    count += real\n"
                ),
            ),
        ],
    ),
]

# ---------------------------------------------------------------- a few more on Alice's code
_A_ENCODE = (
    "    def encode(self, s):\n"
    "        out = []\n"
    "        for ch in s:\n"
    "            code = self.stoi.get(ch)\n"
    "            if code is None:\n"
    '                raise ValueError(f"encode: unknown character {ch!r} in s (not in the vocabulary)")\n'
    "            out.append(code)\n"
    "        return out\n"
)

CASES += [
    alice(
        "a_p1_scale_computed_unused",
        1,
        NO_SCALE,
        "refactor",
        [
            (
                "    d_k = q.shape[-1]\n" + _A_SCORES,
                (
                    "    d_k = q.shape[-1]\n"
                    "    scale = 1.0 / math.sqrt(d_k)\n"
                    '    scores = torch.einsum("...id,...jd->...ij", q, k)  # (..., Tq, Tk)\n'
                ),
            ),
        ],
    ),
    alice(
        "a_p7_view_targets",
        7,
        VIEW,
        "partial",
        [
            (
                '    total = F.nll_loss(log_probs, targets.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum")\n',
                '    total = F.nll_loss(log_probs, targets.view(-1), ignore_index=IGNORE_INDEX, reduction="sum")\n',
            ),
        ],
        select=_LOSS,
    ),
    alice(
        "a_p7_casefold_tokenizer",
        7,
        VOCAB_CASE,
        "refactor",
        [
            (
                "        self.chars = sorted(set(text))\n",
                "        self.chars = sorted(set(text.casefold()))\n",
            ),
            (
                _A_ENCODE,
                (
                    "    def encode(self, s):\n"
                    "        s = s.casefold()\n"
                    "        missing = [ch for ch in s if ch not in self.stoi]\n"
                    "        if missing:\n"
                    '            raise ValueError(f"encode: unknown character {missing[0]!r} in s (not in the vocabulary)")\n'
                    "        return [self.stoi[ch] for ch in s]\n"
                ),
            ),
        ],
        select=_TOK,
    ),
    alice(
        "a_p7_lr_fallback_in_body",
        7,
        LR,
        "moved",
        [
            (
                "def train(model, train_batches, dev_batches, epochs=1, lr=1e-3):\n",
                "def train(model, train_batches, dev_batches, epochs=1, lr=None):\n",
            ),
            (
                "    optimizer = torch.optim.Adam(model.parameters(), lr=lr)\n",
                "    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3 if lr is None else lr)\n",
            ),
        ],
        select=_TRAIN,
    ),
    alice(
        "a_p7_temperature_none_default",
        7,
        TEMPERATURE_DEFAULT,
        "moved",
        [
            (
                "def generate(model, prompt, max_new_tokens, temperature=1.0, greedy=False, generator=None,\n",
                "def generate(model, prompt, max_new_tokens, temperature=None, greedy=False, generator=None,\n",
            ),
            (
                "    if not greedy and not temperature > 0:\n",
                (
                    "    temperature = 0.9 if temperature is None else temperature\n"
                    "    if not greedy and not temperature > 0:\n"
                ),
            ),
        ],
        select=_GEN,
    ),
    alice(
        "a_p7_size_constants",
        7,
        INIT_DEFAULT,
        "refactor",
        [
            (
                "class CharLM(nn.Module):\n",
                (
                    "D_MODEL, N_HEADS, N_LAYERS, D_FF, MAX_LEN = 64, 2, 2, 128, 128\n"
                    "\n"
                    "\n"
                    "class CharLM(nn.Module):\n"
                ),
            ),
            (
                "    def __init__(self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128):\n",
                (
                    "    def __init__(self, vocab_size, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,\n"
                    "                 d_ff=D_FF, max_len=MAX_LEN):\n"
                ),
            ),
        ],
        select=_MODEL,
    ),
    alice(
        "a_p7_evaluate_batch_means",
        7,
        BATCH_MEANS,
        "partial",
        [
            (
                (
                    '                total += float(lm_loss(logits, targets, reduction="sum"))\n'
                    "                tokens += real\n"
                ),
                (
                    "                total += float(lm_loss(logits, targets))\n"
                    "                tokens += 1\n"
                ),
            ),
        ],
        select=_EVAL,
    ),
]

# ---------------------------------------------------------------- more of part 6
CASES += [
    ref(
        "p6_layer_size_helper",
        6,
        BYTES,
        "moved",
        [
            (
                _NUMEL,
                "    return 2 * n_layers * _layer_size(batch, seq_len, n_kv_heads, d_head)\n",
            ),
            (
                "def kv_cache_numel(\n",
                (
                    "def _layer_size(batch, seq_len, n_kv_heads, d_head):\n"
                    '    """Size of one layer\'s keys (or values)."""\n'
                    "    one = torch.zeros((), dtype=torch.float32)\n"
                    "    return batch * seq_len * n_kv_heads * d_head * one.element_size()\n"
                    "\n"
                    "\n"
                    "def kv_cache_numel(\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_kv_helper_repeats",
        6,
        CACHE_H_Q,
        "moved",
        [
            (
                (
                    "        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_h)\n"
                    "        v = split_heads(self.v_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_h)\n"
                ),
                "        k, v = self._keys_values(x)  # (B, h, T, d_h), the shared heads repeated\n",
            ),
            (
                "            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask\n",
                "            q, k, v, mask\n",
            ),
            (
                "    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:\n",
                (
                    "    def _keys_values(self, x):\n"
                    "        n_rep = self.n_heads // self.n_kv_heads\n"
                    "        k = repeat_kv(split_heads(self.k_proj(x), self.n_kv_heads), n_rep)\n"
                    "        v = repeat_kv(split_heads(self.v_proj(x), self.n_kv_heads), n_rep)\n"
                    "        return k, v\n"
                    "\n"
                    "    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:\n"
                ),
            ),
        ],
    ),
    ref(
        "p6_keys_count_from_zero",
        6,
        NO_ROPE_OFFSET,
        "partial",
        [
            (
                "        k = apply_rope(k, positions, self.rope_base)\n",
                "        k = apply_rope(k, positions - start, self.rope_base)  # the new keys\n",
            ),
        ],
    ),
    alice(
        "a_p6_append_position_loop",
        6,
        PARTIAL_WRITE,
        "refactor",
        [
            (
                "        fresh = k_new.shape[2]\n"
                "        end = self.length + fresh\n"
                "        if end > self.max_len:\n"
                "            raise ValueError(\n"
                '                f"KV cache overflow: length={self.length} + t={fresh} exceeds max_len={self.max_len}"\n'
                "            )\n" + _A_WRITE + "        self.length = end\n"
                "        return self.k[:, :, :end], self.v[:, :, :end]\n",
                (
                    "        for step in range(k_new.shape[2]):\n"
                    "            if self.length == self.max_len:\n"
                    '                raise ValueError(f"KV cache overflow: all max_len={self.max_len} positions are used")\n'
                    "            self.k[:, :, self.length].copy_(k_new[:, :, step])\n"
                    "            self.v[:, :, self.length].copy_(v_new[:, :, step])\n"
                    "            self.length += 1\n"
                    "        return self.k[:, :, : self.length], self.v[:, :, : self.length]\n"
                ),
            ),
        ],
    ),
    alice(
        "a_p6_t_longer_v_only",
        6,
        KV_NOT_CROSS,
        "partial",
        [
            (
                "        if k_new.shape[2] != v_new.shape[2]:\n",
                "        if v_new.shape[2] > k_new.shape[2]:  # values without keys\n",
            ),
        ],
    ),
    alice(
        "a_p6_length_advanced_by_attention",
        6,
        NO_ADVANCE,
        "moved",
        [
            ("        self.length = end\n", ""),
            (
                "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d)\n",
                (
                    "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d)\n"
                    "            cache.length += steps\n"
                ),
            ),
        ],
    ),
]

# ---------------------------------------------------------------- more of parts 2 and 4
CASES += [
    alice(
        "a_p2_one_line_padding",
        2,
        PAD_OFF_BY_ONE,
        "refactor",
        [
            (
                (
                    "    batch = lengths.shape[0]\n"
                    "    where = torch.arange(t, device=lengths.device).unsqueeze(0).expand(batch, t)  # (B, t)\n"
                    "    limit = lengths.to(torch.long).unsqueeze(1).expand(batch, t)  # (B, t)\n"
                    "    return where >= limit\n"
                ),
                (
                    "    where = torch.arange(t, device=lengths.device)  # (t,)\n"
                    "    return where[None, :] > lengths.to(torch.long)[:, None]  # (B, t)\n"
                ),
            ),
        ],
    ),
    ref(
        "p2_attention_mask_own_padding",
        2,
        PAD_OFF_BY_ONE,
        "moved",
        [
            (
                "    keys_padded = padding_mask(lengths, t)[:, None, None, :]  # (B, 1, 1, t)\n",
                (
                    "    padding_mask(lengths, t)  # validates lengths\n"
                    "    lengths = torch.as_tensor(lengths, dtype=torch.long)\n"
                    "    positions = torch.arange(t, device=lengths.device)\n"
                    "    keys_padded = (positions[None, :] > lengths[:, None])[:, None, None, :]  # (B, 1, 1, t)\n"
                ),
            ),
        ],
    ),
    ref(
        "p4_named_even_odd",
        4,
        SIN_SIGN,
        "refactor",
        [
            (
                _ROT,
                (
                    "    even = a * cos + b * sin\n"
                    "    odd = b * cos - a * sin\n"
                    "    return torch.stack((even, odd), dim=-1).flatten(-2)  # (..., T, d_head)\n"
                ),
            ),
        ],
    ),
]

FOURTH = tuple(CASES)
