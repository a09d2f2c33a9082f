"""A third held-out set of student solutions, written by a hand that saw only the mistakes'
descriptions (as the grader words them), ``docs/SPEC.md``, the reference solution and Alice's
correct solution in another style; never the grader's mistake catalogue, its diagnosis code, the
graded tests or the other held-out sets.

It is a measure only: never tune the grader on it (nor read its cases while changing diagnosis).
Each case is built and checked like those of ``mistakes.py`` (see its docstring for the kinds
and fields); check that every case behaves as declared, printing pass and fail only:

    .venv/bin/python -m tests.engine.heldout.check_heldout --set third --blind [NAME ...]
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
    TILED,
    TRUE_DIVISION,
    TRUNCATED,
    TWO_PASSES,
    UNBIASED,
    VIEW,
    VOCAB_CASE,
    ZERO_GRAD_ONCE,
    ZERO_REFUSED,
    Case,
)

R, A = "reference", "alice"
ATT, MASKS, HEADS, ROPE = "attention.py", "masks.py", "heads.py", "rope.py"
NORM, BLOCK, GQA, LM = "norm.py", "block.py", "gqa.py", "charlm.py"

# Descriptions without a constant in mistakes.py, copied from the wording list.
NOT_SHIFTED = "targets not shifted: targets are s[1:], inputs s[:-1]"
ONE_STEP = "one optimizer step per epoch on the gradients of all its batches, not one step per batch"
POSITIONS_RESTART = (
    "positions restart at 0 in each chunk instead of continuing from the cache"
)


PARTIAL = (
    Case(
        "p_no_scale_without_mask",
        R,
        ATT,
        (
            (
                (
                    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)\n"
                    "    if mask is not None:\n"
                ),
                (
                    "    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)\n"
                    "    if mask is not None:\n"
                    "        scores = scores / math.sqrt(q.shape[-1])\n"
                ),
            ),
        ),
        1,
        NO_SCALE,
        "partial",
    ),
    Case(
        "p_after_zeroed_bool_only",
        R,
        ATT,
        (
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
                    "        if mask.dtype == torch.bool:\n"
                    "            if mask.all(dim=-1).any():\n"
                    '                raise ValueError("mask prohibits every key for a query row")\n'
                    "        else:\n"
                    "            scores = scores + mask\n"
                    "    if torch.isneginf(scores).all(dim=-1).any():\n"
                    '        raise ValueError("mask prohibits every key for at least one query row")\n'
                    "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                    "    if mask is not None and mask.dtype == torch.bool:\n"
                    "        weights = weights.masked_fill(mask, 0.0)\n"
                ),
            ),
        ),
        1,
        AFTER_ZEROED,
        "partial",
    ),
    Case(
        "p_nan_row_only_when_some_rows_live",
        R,
        ATT,
        (
            (
                "    if torch.isneginf(top).any():\n",
                "    if torch.isneginf(top).all():\n",
            ),
            (
                (
                    "    if torch.isneginf(scores).all(dim=-1).any():\n"
                    '        raise ValueError("mask prohibits every key for at least one query row")\n'
                ),
                "",
            ),
        ),
        1,
        NAN_ROW,
        "partial",
    ),
    Case(
        "p_cut_graph_values_only",
        R,
        ATT,
        (
            (
                "    return weights @ v, weights  #",
                "    return weights @ v.detach(), weights  #",
            ),
        ),
        1,
        CUT_GRAPH,
        "partial",
    ),
    Case(
        "p_inverted_alice_bool_where",
        A,
        ATT,
        (
            (
                "        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
                (
                    "        if mask.dim() > 2:\n"
                    "            mask = ~mask  # per-batch masks come from padding: True = real token\n"
                    "        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)"
                ),
            ),
        ),
        1,
        INVERTED,
        "partial",
    ),
    Case(
        "p_diagonal_only_with_offset",
        A,
        MASKS,
        (
            (
                "    return everything.triu(diagonal=shift + 1)",
                (
                    "    if shift == 0:\n"
                    "        return everything.triu(diagonal=1)\n"
                    "    return everything.triu(diagonal=shift)"
                ),
            ),
        ),
        2,
        DIAGONAL,
        "partial",
    ),
    Case(
        "p_pad_off_by_one_tensor_path",
        R,
        MASKS,
        (
            (
                "    lengths = torch.as_tensor(lengths, dtype=torch.long)\n",
                (
                    "    if isinstance(lengths, (list, tuple)):\n"
                    "        if min(lengths) < 1 or max(lengths) > t:\n"
                    '            raise ValueError(f"lengths {lengths} must lie between 1 and t={t}")\n'
                    "        return torch.tensor([[j >= n for j in range(t)] for n in lengths])\n"
                    "    lengths = torch.as_tensor(lengths, dtype=torch.long)\n"
                ),
            ),
            (
                "    return positions >= lengths[:, None]  # (B, t)",
                "    return positions > lengths[:, None]  # (B, t)",
            ),
        ),
        2,
        PAD_OFF_BY_ONE,
        "partial",
    ),
    Case(
        "p_mask_on_cpu_offset_branch",
        R,
        MASKS,
        (
            (
                (
                    "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
                    "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n"
                ),
                (
                    "    if t_k == t_q:\n"
                    "        return torch.ones(t_q, t_q, dtype=torch.bool, device=device).triu(1)\n"
                    "    query_pos = torch.arange(t_q)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
                    "    key_pos = torch.arange(t_k)[None, :]  # (1, t_k)\n"
                ),
            ),
        ),
        2,
        MASK_ON_CPU,
        "partial",
    ),
    Case(
        "p_cross_values_from_x",
        R,
        HEADS,
        (
            (
                "        v = split_heads(self.v_proj(source), self.n_heads)",
                "        v = split_heads(self.v_proj(x), self.n_heads)",
            ),
        ),
        3,
        CROSS_FROM_X,
        "partial",
    ),
    Case(
        "p_heads_causal_when_cache_not_empty",
        R,
        HEADS,
        (
            (
                (
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n"
                ),
                (
                    "        if cache is not None:\n"
                    "            past = cache.length\n"
                    "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n"
                    "            if mask is None and past > 0:\n"
                    "                t_q, t_k = q.shape[2], k.shape[2]\n"
                    "                mask = torch.ones(\n"
                    "                    t_q, t_k, dtype=torch.bool, device=q.device\n"
                    "                ).triu(t_k - t_q + 1)\n"
                ),
            ),
        ),
        3,
        HEADS_NONE_CAUSAL,
        "partial",
    ),
    Case(
        "p_float_mask_as_bool_2d",
        R,
        HEADS,
        (
            (
                "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)",
                (
                    "        if mask is not None and mask.dtype != torch.bool:\n"
                    "            mask = mask != 0  # additive masks: anything nonzero blocks\n"
                    "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)"
                ),
            ),
        ),
        3,
        FLOAT_AS_BOOL,
        "partial",
    ),
    Case(
        "p_split_no_transpose_queries",
        R,
        HEADS,
        (
            (
                "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)",
                (
                    "        batch, t_q, d_model = x.shape\n"
                    "        q = self.q_proj(x).reshape(batch, self.n_heads, t_q, self.d_head)"
                ),
            ),
        ),
        3,
        SPLIT_NO_T,
        "partial",
    ),
    Case(
        "p_positions_assumed_contiguous",
        R,
        ROPE,
        (
            (
                "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
                (
                    "    start = int(positions[0])\n"
                    "    positions = torch.arange(start, start + t, device=x.device)\n"
                    "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)"
                ),
            ),
        ),
        4,
        POSITIONS_IGNORED,
        "partial",
    ),
    Case(
        "p_rope_float32_when_none",
        R,
        ROPE,
        (
            (
                "    dtype = torch.get_default_dtype() if dtype is None else dtype\n",
                "    dtype = dtype or torch.float32\n",
            ),
        ),
        4,
        ROPE_FLOAT32,
        "partial",
    ),
    Case(
        "p_residual_second_sublayer",
        R,
        BLOCK,
        (
            (
                (
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        return h + self.ffn(self.ln2(h))"
                ),
                (
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        h = self.ln2(h)\n"
                    "        return h + self.ffn(h)"
                ),
            ),
        ),
        5,
        RESIDUAL,
        "partial",
    ),
    Case(
        "p_post_order_attention_sublayer",
        R,
        BLOCK,
        (
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                "        h = self.ln1(x + self.attn(x, mask=mask, cache=cache))\n",
            ),
        ),
        5,
        POST_ORDER,
        "partial",
    ),
    Case(
        "p_eps_outside_rms_only",
        R,
        NORM,
        (
            (
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + self.eps",
            ),
        ),
        5,
        EPS_OUTSIDE,
        "partial",
    ),
    Case(
        "p_norm_grad_variance_detached",
        R,
        NORM,
        (
            (
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True).detach()  # biased",
            ),
        ),
        5,
        NORM_GRAD,
        "partial",
    ),
    Case(
        "p_bias_as_buffer",
        R,
        NORM,
        (
            (
                "        self.bias = nn.Parameter(torch.zeros(d))",
                '        self.register_buffer("bias", torch.zeros(d))',
            ),
        ),
        5,
        NOT_PARAMETER,
        "partial",
    ),
    Case(
        "p_block_causal_without_cache",
        R,
        BLOCK,
        (
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                (
                    "        if mask is None and cache is None:\n"
                    "            t = x.shape[1]\n"
                    "            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)\n"
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                ),
            ),
        ),
        5,
        BLOCK_NONE_CAUSAL,
        "partial",
    ),
    Case(
        "p_cache_v_default_dtype",
        R,
        GQA,
        (
            (
                "        self.v = torch.zeros_like(self.k)",
                "        self.v = torch.zeros(batch, n_kv_heads, max_len, d_head, device=device)",
            ),
        ),
        6,
        CACHE_DEFAULT_DTYPE,
        "partial",
    ),
    Case(
        "p_base_ignored_for_keys",
        R,
        GQA,
        (
            (
                "        k = apply_rope(k, positions, self.rope_base)",
                "        k = apply_rope(k, positions)",
            ),
        ),
        6,
        BASE_IGNORED,
        "partial",
    ),
    Case(
        "p_advance_by_one",
        A,
        GQA,
        (("        self.length = end\n", "        self.length += 1\n"),),
        6,
        NO_ADVANCE,
        "partial",
    ),
    Case(
        "p_only_k_dtype_checked",
        R,
        GQA,
        (
            (
                "            if new.dtype != self.k.dtype or new.device != self.k.device:",
                (
                    '            if name == "k_new" and (\n'
                    "                new.dtype != self.k.dtype or new.device != self.k.device\n"
                    "            ):"
                ),
            ),
        ),
        6,
        ONLY_K_CHECKED,
        "partial",
    ),
    Case(
        "p_rope_offset_only_single_token",
        R,
        GQA,
        (
            (
                "        start = 0 if cache is None else cache.length\n",
                "        start = cache.length if cache is not None and t == 1 else 0\n",
            ),
        ),
        6,
        NO_ROPE_OFFSET,
        "partial",
    ),
    Case(
        "p_partial_write_values_first",
        A,
        GQA,
        (
            (
                (
                    "        fresh = k_new.shape[2]\n"
                    "        end = self.length + fresh\n"
                    "        if end > self.max_len:\n"
                ),
                (
                    "        fresh = k_new.shape[2]\n"
                    "        end = self.length + fresh\n"
                    "        room = self.max_len - self.length\n"
                    "        self.v[:, :, self.length:end].copy_(v_new[:, :, :room])\n"
                    "        if end > self.max_len:\n"
                ),
            ),
        ),
        6,
        PARTIAL_WRITE,
        "partial",
    ),
    Case(
        "p_empty_check_mean_only",
        R,
        LM,
        (
            (
                "    if not (targets != IGNORE_INDEX).any():\n",
                '    if reduction == "mean" and not (targets != IGNORE_INDEX).any():\n',
            ),
        ),
        7,
        EMPTY_ONLY_MEAN,
        "partial",
        select="test_part7_loss_training",
    ),
    Case(
        "p_pad_not_excluded_when_sampling",
        R,
        LM,
        (
            (
                (
                    '                logits[PAD_ID] = float("-inf")\n'
                    "                if greedy:\n"
                    "                    new = logits.argmax()[None]\n"
                ),
                (
                    "                if greedy:\n"
                    '                    logits[PAD_ID] = float("-inf")\n'
                    "                    new = logits.argmax()[None]\n"
                ),
            ),
        ),
        7,
        PAD_NOT_EXCLUDED,
        "partial",
        select="test_part7_model_generation",
    ),
    Case(
        "p_stays_eval_when_training",
        A,
        LM,
        (
            (
                ("    finally:\n        _restore_modes(saved)\n    if tokens == 0:\n"),
                (
                    "    finally:\n"
                    "        if not saved[0][1]:\n"
                    "            _restore_modes(saved)\n"
                    "    if tokens == 0:\n"
                ),
            ),
        ),
        7,
        STAYS_EVAL,
        "partial",
        select="test_part7_loss_training",
    ),
    Case(
        "p_made_on_cpu_cached_mask",
        R,
        GQA,
        (
            (
                "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)",
                (
                    "        if cache is None:\n"
                    "            mask = causal_mask(t, device=x.device)  # (T, T)\n"
                    "        else:\n"
                    "            mask = causal_mask(t, k.shape[2])  # (T, start + T)"
                ),
            ),
        ),
        6,
        MADE_ON_CPU,
        "partial",
    ),
    Case(
        "p_prompt_by_token_with_cache",
        R,
        LM,
        (
            (
                "            feed = ids\n",
                (
                    "            feed = ids\n"
                    "            if use_cache:\n"
                    "                for token in ids[:-1]:\n"
                    "                    model(token.view(1, 1), caches)\n"
                    "                feed = ids[-1:]\n"
                ),
            ),
        ),
        7,
        PROMPT_BY_TOKEN,
        "partial",
        select="test_part7_model_generation",
    ),
    Case(
        "p_positions_restart_with_cache",
        A,
        LM,
        (
            (
                "        spots = torch.arange(start, start + steps, device=device)",
                "        spots = torch.arange(steps, device=device)",
            ),
        ),
        7,
        POSITIONS_RESTART,
        "partial",
        select="test_part7_model_generation",
    ),
    Case(
        "p_eval_targets_not_moved",
        R,
        LM,
        (
            (
                (
                    "                inputs, targets = inputs.to(device), targets.to(device)\n"
                    "                real = int((targets != IGNORE_INDEX).sum())\n"
                    "                if real:\n"
                ),
                (
                    "                inputs = inputs.to(device)\n"
                    "                real = int((targets != IGNORE_INDEX).sum())\n"
                    "                if real:\n"
                ),
            ),
        ),
        7,
        EVAL_NOT_MOVED,
        "partial",
        select="test_part7_loss_training",
    ),
    Case(
        "p_builds_graph_when_training",
        R,
        LM,
        (
            (
                "    try:\n        with torch.no_grad():\n            for inputs, targets in batches:\n",
                (
                    "    try:\n"
                    "        with torch.set_grad_enabled(was_training):\n"
                    "            for inputs, targets in batches:\n"
                ),
            ),
        ),
        7,
        BUILDS_GRAPH,
        "partial",
        select="test_part7_loss_training",
    ),
)


REWRITTEN = (
    Case(
        "r_scale_dk_einsum",
        A,
        ATT,
        (
            (
                '    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)',
                '    scores = torch.einsum("...id,...jd->...ij", q / d_k, k)',
            ),
        ),
        1,
        SCALE_DK,
        "rewritten",
    ),
    Case(
        "r_scale_dv_size",
        R,
        ATT,
        (
            (
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                "    scores = q @ k.transpose(-2, -1) * v.size(-1) ** -0.5",
            ),
        ),
        1,
        SCALE_DV,
        "rewritten",
    ),
    Case(
        "r_query_axis_transpose",
        R,
        ATT,
        (
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
                "    weights = softmax(scores.transpose(-2, -1)).transpose(-2, -1)  # (..., Tq, Tk)",
            ),
        ),
        1,
        QUERY_AXIS,
        "rewritten",
    ),
    Case(
        "r_no_max_alice_where",
        A,
        ATT,
        (
            (
                "    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))",
                "    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x))",
            ),
        ),
        1,
        NO_MAX,
        "rewritten",
    ),
    Case(
        "r_after_renorm_multiply",
        R,
        ATT,
        (
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
                    "        keep = ~mask if mask.dtype == torch.bool else torch.exp(mask)\n"
                    "        if not (keep > 0).any(dim=-1).all():\n"
                    '            raise ValueError("mask prohibits every key for at least one query row")\n'
                    "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                    "    if mask is not None:\n"
                    "        weights = weights * keep\n"
                    "        weights = weights / weights.sum(dim=-1, keepdim=True)\n"
                ),
            ),
        ),
        1,
        AFTER_RENORM,
        "rewritten",
    ),
    Case(
        "r_in_place_softmax_sub",
        R,
        ATT,
        (
            (
                (
                    "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n"
                    "    return exp / exp.sum(dim=dim, keepdim=True)"
                ),
                (
                    "    x.sub_(top)\n"
                    "    x.exp_()\n"
                    "    return x / x.sum(dim=dim, keepdim=True)"
                ),
            ),
        ),
        1,
        IN_PLACE,
        "rewritten",
    ),
    Case(
        "r_no_offset_tril",
        R,
        MASKS,
        (
            (
                (
                    "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
                    "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n"
                    "    return key_pos > query_pos  # (t_q, t_k)"
                ),
                (
                    "    allowed = torch.tril(torch.ones(t_q, t_k, device=device))\n"
                    "    return allowed == 0  # (t_q, t_k)"
                ),
            ),
        ),
        2,
        NO_OFFSET,
        "rewritten",
    ),
    Case(
        "r_merge_no_transpose_view",
        A,
        HEADS,
        (
            (
                "    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)",
                "    return x.contiguous().view(batch, steps, heads * per_head)",
            ),
        ),
        3,
        MERGE_NO_T,
        "rewritten",
    ),
    Case(
        "r_split_no_transpose_view",
        R,
        HEADS,
        (
            (
                (
                    "    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)\n"
                    "    return x.transpose(1, 2)  # (B, h, T, d_h)"
                ),
                "    return x.contiguous().view(batch, n_heads, t, -1)  # (B, h, T, d_h)",
            ),
        ),
        3,
        SPLIT_NO_T,
        "rewritten",
    ),
    Case(
        "r_true_division_d_head",
        A,
        HEADS,
        (
            (
                "        self.d_head = d_model // n_heads",
                "        self.d_head = d_model / n_heads",
            ),
        ),
        3,
        TRUE_DIVISION,
        "rewritten",
    ),
    Case(
        "r_rotate_half_cat",
        R,
        ROPE,
        (
            (
                (
                    "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                    "    rotated = torch.stack(\n"
                    "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                    "    )  # (..., T, d/2, 2)\n"
                    "    return rotated.flatten(-2)  # (..., T, d_head)"
                ),
                (
                    "    a, b = x.chunk(2, dim=-1)  # (..., T, d_head/2) each\n"
                    "    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)"
                ),
            ),
        ),
        4,
        ROTATE_HALF,
        "rewritten",
    ),
    Case(
        "r_sin_sign_conj",
        A,
        ROPE,
        (
            (
                "    turned = torch.view_as_complex(pairs) * spin",
                "    turned = torch.view_as_complex(pairs) * spin.conj()",
            ),
        ),
        4,
        SIN_SIGN,
        "rewritten",
    ),
    Case(
        "r_freq_alice_step_one",
        A,
        ROPE,
        (
            (
                "    pair = torch.arange(0, d_head, 2, device=positions.device, dtype=work)  # 2i",
                "    pair = torch.arange(d_head // 2, device=positions.device, dtype=work)",
            ),
        ),
        4,
        FREQ,
        "rewritten",
    ),
    Case(
        "r_unbiased_torch_var",
        R,
        NORM,
        (
            (
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
                "        var = x.var(dim=-1, keepdim=True)",
            ),
        ),
        5,
        UNBIASED,
        "rewritten",
    ),
    Case(
        "r_raw_moments_alice",
        A,
        NORM,
        (
            (
                "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)",
                "        spread = (x * x).mean(dim=-1, keepdim=True) - centre * centre",
            ),
        ),
        5,
        RAW_MOMENTS,
        "rewritten",
    ),
    Case(
        "r_rms_centred_alice",
        A,
        NORM,
        (
            (
                "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
                (
                    "        x = x - x.mean(dim=-1, keepdim=True)\n"
                    "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)"
                ),
            ),
        ),
        5,
        RMS_CENTRED,
        "rewritten",
    ),
    Case(
        "r_cache_no_mask_branches",
        R,
        BLOCK,
        (
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                (
                    "        if cache is not None:\n"
                    "            h = x + self.attn(self.ln1(x), cache=cache)\n"
                    "        else:\n"
                    "            h = x + self.attn(self.ln1(x), mask=mask)\n"
                ),
            ),
        ),
        5,
        CACHE_NO_MASK,
        "rewritten",
    ),
    Case(
        "r_tiled_cat",
        R,
        GQA,
        (
            (
                (
                    "    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)\n"
                    "    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)"
                ),
                "    return torch.cat([x] * n_rep, dim=1)  # (B, h_kv * n_rep, T, d)",
            ),
        ),
        6,
        TILED,
        "rewritten",
    ),
    Case(
        "r_bytes_itemsize",
        A,
        GQA,
        (
            (
                "    return int(total)",
                "    return int(total) * torch.finfo(torch.float32).bits // 8",
            ),
        ),
        6,
        BYTES,
        "rewritten",
    ),
    Case(
        "r_length_tensor_init",
        R,
        GQA,
        (
            (
                "        self.v = torch.zeros_like(self.k)\n        self.length = 0\n",
                (
                    "        self.v = torch.zeros_like(self.k)\n"
                    "        self.length = torch.tensor(0)\n"
                ),
            ),
        ),
        6,
        LENGTH_TENSOR,
        "rewritten",
    ),
    Case(
        "r_refuses_full_ge",
        A,
        GQA,
        (("        if end > self.max_len:", "        if end >= self.max_len:"),),
        6,
        REFUSES_FULL,
        "rewritten",
    ),
    Case(
        "r_log_softmax_log_of_probs",
        R,
        LM,
        (
            (
                (
                    "    return F.cross_entropy(\n"
                    "        logits.reshape(-1, logits.shape[-1]),\n"
                    "        targets.reshape(-1),\n"
                    "        ignore_index=IGNORE_INDEX,\n"
                    "        reduction=reduction,\n"
                    "    )"
                ),
                (
                    "    probs = torch.softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)\n"
                    "    return F.nll_loss(\n"
                    "        torch.log(probs),\n"
                    "        targets.reshape(-1),\n"
                    "        ignore_index=IGNORE_INDEX,\n"
                    "        reduction=reduction,\n"
                    "    )"
                ),
            ),
        ),
        7,
        LOG_SOFTMAX,
        "rewritten",
        select="test_part7_loss_training",
    ),
    Case(
        "r_id_zero_dict_comprehension",
        A,
        LM,
        (
            (
                "        self.stoi = {ch: n for n, ch in enumerate(self.chars, start=1)}",
                "        self.stoi = {ch: n for n, ch in enumerate(self.chars)}",
            ),
        ),
        7,
        ID_ZERO,
        "rewritten",
        select="test_part7_data",
    ),
    Case(
        "r_step_after_loop",
        R,
        LM,
        (
            (
                (
                    "            optimizer.zero_grad()\n"
                    "            loss.backward()\n"
                    "            optimizer.step()\n"
                    "            total += loss.item() * real\n"
                    "            count += real\n"
                ),
                (
                    "            optimizer.zero_grad()\n"
                    "            loss.backward()\n"
                    "            total += loss.item() * real\n"
                    "            count += real\n"
                    "        optimizer.step()\n"
                ),
            ),
        ),
        7,
        STEP_AFTER,
        "rewritten",
        select="test_part7_loss_training",
    ),
    Case(
        "r_made_on_cpu_inverse_frequencies",
        R,
        ROPE,
        (
            (
                "    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)",
                (
                    "    inv_freq = 1.0 / base ** (\n"
                    "        torch.arange(0, d_head, 2, dtype=dtype) / d_head\n"
                    "    )  # (d_head/2,)"
                ),
            ),
        ),
        4,
        MADE_ON_CPU,
        "rewritten",
    ),
    Case(
        "r_loss_after_reevaluated",
        R,
        LM,
        (
            (
                '                "train_loss": total / count,\n',
                '                "train_loss": evaluate(model, train_batches),\n',
            ),
        ),
        7,
        LOSS_AFTER,
        "rewritten",
        select="test_part7_loss_training",
    ),
    Case(
        "r_two_passes_count_first",
        R,
        LM,
        (
            (
                "    total, count = 0.0, 0\n    try:\n",
                (
                    "    total = 0.0\n"
                    "    count = sum(int((t != IGNORE_INDEX).sum()) for _, t in batches)\n"
                    "    try:\n"
                ),
            ),
            ("                    count += real\n", ""),
        ),
        7,
        TWO_PASSES,
        "rewritten",
        select="test_part7_loss_training",
    ),
    Case(
        "r_no_finally_restore",
        A,
        LM,
        (
            (
                (
                    "    try:\n"
                    "        model.eval()\n"
                    "        with torch.no_grad():\n"
                    "            for inputs, targets in batches:\n"
                ),
                (
                    "    if True:\n"
                    "        model.eval()\n"
                    "        with torch.no_grad():\n"
                    "            for inputs, targets in batches:\n"
                ),
            ),
            (
                "                tokens += real\n    finally:\n        _restore_modes(saved)\n",
                "                tokens += real\n    _restore_modes(saved)\n",
            ),
        ),
        7,
        NO_FINALLY,
        "rewritten",
        select="test_part7_loss_training",
    ),
    Case(
        "r_truncated_top_k",
        R,
        LM,
        (
            (
                "                    probs = torch.softmax(logits / temperature, dim=-1)\n",
                (
                    "                    kth = logits.topk(min(5, logits.numel())).values[-1]\n"
                    '                    logits = logits.masked_fill(logits < kth, float("-inf"))\n'
                    "                    probs = torch.softmax(logits / temperature, dim=-1)\n"
                ),
            ),
        ),
        7,
        TRUNCATED,
        "rewritten",
        select="test_part7_model_generation",
    ),
    Case(
        "r_shared_cache_comprehension",
        A,
        LM,
        (
            (
                (
                    "        return [\n"
                    "            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,\n"
                    "                    device=device, dtype=dtype)\n"
                    "            for _ in self.blocks\n"
                    "        ]"
                ),
                (
                    "        cache = KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,\n"
                    "                        device=device, dtype=dtype)\n"
                    "        return [cache for _ in self.blocks]"
                ),
            ),
        ),
        7,
        SHARED_CACHE,
        "rewritten",
        select="test_part7_model_generation",
    ),
    Case(
        "r_prompt_cast_as_tensor",
        R,
        LM,
        (
            (
                '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n',
                (
                    "    prompt = torch.as_tensor(prompt).long()\n"
                    '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n'
                ),
            ),
        ),
        7,
        PROMPT_CAST,
        "rewritten",
        select="test_part7_model_generation",
    ),
    Case(
        "r_refeeds_whole_sequence",
        A,
        LM,
        (
            (
                "                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]",
                "                        last = model(torch.tensor([ids], device=device), caches)[0, -1]",
            ),
        ),
        7,
        REFEEDS,
        "rewritten",
        select="test_part7_model_generation",
    ),
    Case(
        "r_decode_skips_nonpositive",
        A,
        LM,
        (
            (
                "            if code == PAD_ID:\n                continue\n",
                "            if code <= PAD_ID:  # padding and ignored positions\n                continue\n",
            ),
        ),
        7,
        DECODE_IGNORE,
        "rewritten",
        select="test_part7_data",
    ),
    Case(
        "r_cache_ignored_recompute",
        R,
        LM,
        (
            (
                (
                    "            caches = model.make_caches() if use_cache else None\n"
                    "            feed = ids\n"
                    "            for _ in range(max_new_tokens):\n"
                    "                logits = model(feed[None], caches)[0, -1]  # (V,)\n"
                ),
                (
                    "            for _ in range(max_new_tokens):\n"
                    "                logits = model(ids[None])[0, -1]  # (V,): the whole sequence\n"
                ),
            ),
            ("                feed = new if use_cache else ids\n", ""),
        ),
        7,
        CACHE_IGNORED,
        "rewritten",
        select="test_part7_model_generation",
    ),
    Case(
        "r_targets_not_shifted_alice",
        A,
        LM,
        (
            (
                "        targets[row, :span] = s[1:]\n",
                "        targets[row, :span] = s[:span]\n",
            ),
        ),
        7,
        NOT_SHIFTED,
        "rewritten",
        select="test_part7_data",
    ),
    Case(
        "r_zero_new_tokens_refused",
        R,
        LM,
        (
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
        ),
        7,
        ZERO_REFUSED,
        "rewritten",
        select="test_part7_model_generation",
    ),
    Case(
        "r_prompt_kept_on_its_device",
        R,
        LM,
        (
            (
                "    ids = prompt.to(device=device, dtype=torch.long)\n",
                "    ids = prompt.long()\n",
            ),
        ),
        7,
        PROMPT_NOT_MOVED,
        "rewritten",
        select="test_part7_model_generation",
    ),
)


MOVED = (
    Case(
        "m_no_scale_in_helper",
        R,
        ATT,
        (
            (
                "def scaled_dot_product_attention(\n",
                (
                    "def _scores(q, k):\n"
                    '    """Raw dot products of every query with every key."""\n'
                    "    return q @ k.transpose(-2, -1)\n\n\n"
                    "def scaled_dot_product_attention(\n"
                ),
            ),
            (
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)",
                "    scores = _scores(q, k)  # (..., Tq, Tk)",
            ),
        ),
        1,
        NO_SCALE,
        "moved",
    ),
    Case(
        "m_query_axis_default_dim",
        R,
        ATT,
        (
            (
                "def softmax(x: torch.Tensor, dim: int = -1)",
                "def softmax(x: torch.Tensor, dim: int = -2)",
            ),
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
                "    weights = softmax(scores)  # (..., Tq, Tk)",
            ),
        ),
        1,
        QUERY_AXIS,
        "moved",
    ),
    Case(
        "m_inverted_in_additive_helper",
        A,
        ATT,
        (
            (
                "        return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
                "        return torch.where(mask, scores, torch.full_like(scores, _NEG_INF))",
            ),
        ),
        1,
        INVERTED,
        "moved",
    ),
    Case(
        "m_pad_off_by_one_in_attention_mask",
        R,
        MASKS,
        (
            (
                "    keys_padded = padding_mask(lengths, t)[:, None, None, :]  # (B, 1, 1, t)",
                (
                    "    lengths = torch.as_tensor(lengths, dtype=torch.long)\n"
                    "    padding_mask(lengths, t)  # validates the lengths\n"
                    "    positions = torch.arange(t, device=lengths.device)\n"
                    "    keys_padded = (positions[None, :] > lengths[:, None])[:, None, None, :]"
                ),
            ),
        ),
        2,
        PAD_OFF_BY_ONE,
        "moved",
    ),
    Case(
        "m_merge_inline_in_forward",
        R,
        HEADS,
        (
            (
                "        return self.out_proj(merge_heads(out))  # (B, Tq, D)",
                (
                    "        batch, _, t_q, _ = out.shape\n"
                    "        return self.out_proj(out.reshape(batch, t_q, -1))  # (B, Tq, D)"
                ),
            ),
        ),
        3,
        MERGE_NO_T,
        "moved",
    ),
    Case(
        "m_scale_d_model_own_scores",
        R,
        HEADS,
        (
            ("import torch\n", "import math\n\nimport torch\n"),
            (
                "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)",
                (
                    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.q_proj.in_features)\n"
                    "        if mask is not None:\n"
                    "            if mask.dtype == torch.bool:\n"
                    '                scores = scores.masked_fill(mask, float("-inf"))\n'
                    "            else:\n"
                    "                scores = scores + mask\n"
                    "        scores = scores - scores.amax(dim=-1, keepdim=True)\n"
                    "        weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)\n"
                    "        out = weights @ v  # (B, h, Tq, d_h)"
                ),
            ),
        ),
        3,
        SCALE_D_MODEL,
        "moved",
    ),
    Case(
        "m_positions_ignored_in_angles_call",
        R,
        ROPE,
        (
            (
                "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
                (
                    "    angles = rope_angles(\n"
                    "        torch.arange(t, device=x.device), x.shape[-1], base, dtype=x.dtype\n"
                    "    )"
                ),
            ),
        ),
        4,
        POSITIONS_IGNORED,
        "moved",
    ),
    Case(
        "m_sin_sign_negative_angles",
        R,
        ROPE,
        (
            (
                "    return positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, d_head/2)",
                "    return -positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, d_head/2)",
            ),
        ),
        4,
        SIN_SIGN,
        "moved",
    ),
    Case(
        "m_residual_in_sublayer_helper",
        R,
        BLOCK,
        (
            (
                "class PreNormBlock(nn.Module):\n",
                (
                    "def _pre_norm_sublayer(norm, layer, x):\n"
                    '    """One residual sub-layer of the pre-norm block."""\n'
                    "    y = norm(x)\n"
                    "    return y + layer(y)\n\n\n"
                    "class PreNormBlock(nn.Module):\n"
                ),
            ),
            (
                (
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        return h + self.ffn(self.ln2(h))"
                ),
                (
                    "        h = _pre_norm_sublayer(\n"
                    "            self.ln1, lambda y: self.attn(y, mask=mask, cache=cache), x\n"
                    "        )\n"
                    "        return _pre_norm_sublayer(self.ln2, self.ffn, h)"
                ),
            ),
        ),
        5,
        RESIDUAL,
        "moved",
    ),
    Case(
        "m_norm_grad_stats_no_grad",
        A,
        NORM,
        (
            (
                (
                    "    def normalize(self, x):\n"
                    "        centre = x.mean(dim=-1, keepdim=True)\n"
                    "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)\n"
                ),
                (
                    "    @staticmethod\n"
                    "    def _stats(x):\n"
                    "        with torch.no_grad():\n"
                    "            centre = x.mean(dim=-1, keepdim=True)\n"
                    "            return centre, torch.var(x, dim=-1, unbiased=False, keepdim=True)\n\n"
                    "    def normalize(self, x):\n"
                    "        centre, spread = self._stats(x)\n"
                ),
            ),
        ),
        5,
        NORM_GRAD,
        "moved",
    ),
    Case(
        "m_tiled_in_forward",
        R,
        GQA,
        (
            (
                "            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask\n",
                "            q, k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1), mask\n",
            ),
        ),
        6,
        TILED,
        "moved",
    ),
    Case(
        "m_cache_h_q_repeat_first",
        R,
        GQA,
        (
            (
                (
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n"
                    "        n_rep = self.n_heads // self.n_kv_heads\n"
                ),
                (
                    "        n_rep = self.n_heads // self.n_kv_heads\n"
                    "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)\n"
                    "        n_rep = 1\n"
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h, start + T, d_h)\n"
                ),
            ),
        ),
        6,
        CACHE_H_Q,
        "moved",
    ),
    Case(
        "m_left_pad_in_helper",
        A,
        LM,
        (
            (
                "def lm_batch(sequences, pad_id=PAD_ID):",
                (
                    "def _place(row, values, width):\n"
                    '    """Write ``values`` into ``row`` of a width-``width`` table."""\n'
                    "    row[width - len(values) :] = values\n\n\n"
                    "def lm_batch(sequences, pad_id=PAD_ID):"
                ),
            ),
            (
                "        inputs[row, :span] = s[:-1]\n        targets[row, :span] = s[1:]\n",
                "        _place(inputs[row], s[:-1], width)\n        _place(targets[row], s[1:], width)\n",
            ),
        ),
        7,
        LEFT_PAD,
        "moved",
        select="test_part7_data",
    ),
    Case(
        "m_batch_means_in_step_helper",
        A,
        LM,
        (
            (
                "    return float(loss.detach()), real\n",
                "    return float(loss.detach()), 1  # one batch mean\n",
            ),
        ),
        7,
        BATCH_MEANS,
        "moved",
        select="test_part7_loss_training",
    ),
    Case(
        "m_zero_grad_at_epoch_start",
        A,
        LM,
        (
            (
                "    optimizer.zero_grad()\n    loss = lm_loss(model(inputs), targets)\n",
                "    loss = lm_loss(model(inputs), targets)\n",
            ),
            (
                "        model.train()\n        steps = [",
                "        model.train()\n        optimizer.zero_grad()\n        steps = [",
            ),
        ),
        7,
        ZERO_GRAD_ONCE,
        "moved",
        select="test_part7_loss_training",
    ),
    Case(
        "m_in_place_rms_normalize",
        A,
        NORM,
        (
            (
                "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
                (
                    "        x *= torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
                    "        return x"
                ),
            ),
        ),
        5,
        IN_PLACE,
        "moved",
    ),
)


REFACTOR = (
    Case(
        "f_softmax_helper_no_max",
        R,
        ATT,
        (
            (
                (
                    "    top = x.amax(dim=dim, keepdim=True)\n"
                    "    if torch.isneginf(top).any():\n"
                    "        raise ValueError(\n"
                    '            f"softmax: x has a slice along dim={dim} that is entirely -inf"\n'
                    "        )\n"
                    "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n"
                    "    return exp / exp.sum(dim=dim, keepdim=True)"
                ),
                (
                    "    _require_live_slices(x, dim)\n"
                    "    numerators = torch.exp(x)  # exp(-inf) = 0 exactly\n"
                    "    return numerators / numerators.sum(dim=dim, keepdim=True)\n\n\n"
                    "def _require_live_slices(x: torch.Tensor, dim: int) -> None:\n"
                    '    """Refuse a slice along ``dim`` with no finite entry."""\n'
                    "    if torch.isneginf(x).all(dim=dim).any():\n"
                    "        raise ValueError(\n"
                    '            f"softmax: x has a slice along dim={dim} that is entirely -inf"\n'
                    "        )"
                ),
            ),
        ),
        1,
        NO_MAX,
        "refactor",
    ),
    Case(
        "f_padding_positions_helper",
        R,
        MASKS,
        (
            (
                "def padding_mask(lengths, t: int) -> torch.Tensor:",
                (
                    "def _positions(t: int, device) -> torch.Tensor:\n"
                    '    """Row ``(1, t)`` of the positions ``0 .. t - 1``."""\n'
                    "    return torch.arange(t, device=device).unsqueeze(0)\n\n\n"
                    "def padding_mask(lengths, t: int) -> torch.Tensor:"
                ),
            ),
            (
                (
                    "    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)\n"
                    "    return positions >= lengths[:, None]  # (B, t)"
                ),
                (
                    "    limits = lengths.unsqueeze(1)  # (B, 1)\n"
                    "    return _positions(t, lengths.device) > limits  # (B, t)"
                ),
            ),
        ),
        2,
        PAD_OFF_BY_ONE,
        "refactor",
    ),
    Case(
        "f_heads_project_helper_cross_from_x",
        R,
        HEADS,
        (
            (
                (
                    "        source = x if context is None else context\n"
                    "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)\n"
                    "        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
                    "        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n"
                ),
                (
                    "        if context is None:\n"
                    "            context = x\n"
                    "        q, k, v = (\n"
                    "            self._project(proj, x) for proj in (self.q_proj, self.k_proj, self.v_proj)\n"
                    "        )\n"
                ),
            ),
            (
                "        return self.out_proj(merge_heads(out))  # (B, Tq, D)\n",
                (
                    "        return self.out_proj(merge_heads(out))  # (B, Tq, D)\n\n"
                    "    def _project(self, proj: nn.Linear, source: torch.Tensor) -> torch.Tensor:\n"
                    '        """``source (B, T, D)`` through ``proj``, split into heads."""\n'
                    "        return split_heads(proj(source), self.n_heads)\n"
                ),
            ),
        ),
        3,
        CROSS_FROM_X,
        "refactor",
    ),
    Case(
        "f_rope_inverse_frequency_renamed",
        R,
        ROPE,
        (
            (
                (
                    "    pair = torch.arange(\n"
                    "        d_head // 2, device=positions.device, dtype=dtype\n"
                    "    )  # (d_head/2,)\n"
                    "    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)\n"
                    "    return positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, d_head/2)"
                ),
                (
                    "    index = torch.arange(d_head // 2, device=positions.device, dtype=dtype)\n"
                    "    frequencies = 1.0 / base ** (index / d_head)  # (d_head/2,)\n"
                    "    return torch.outer(positions.to(dtype), frequencies)  # (T, d_head/2)"
                ),
            ),
        ),
        4,
        FREQ,
        "refactor",
    ),
    Case(
        "f_layernorm_var_mean",
        R,
        NORM,
        (
            (
                (
                    "        mean = x.mean(dim=-1, keepdim=True)\n"
                    "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
                    "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"
                ),
                (
                    "        var, mean = torch.var_mean(x, dim=-1, keepdim=True)\n"
                    "        centred = x - mean\n"
                    "        return self.weight * centred / torch.sqrt(var + self.eps) + self.bias"
                ),
            ),
        ),
        5,
        UNBIASED,
        "refactor",
    ),
    Case(
        "f_block_sublayer_methods_post_order",
        R,
        BLOCK,
        (
            (
                (
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        return h + self.ffn(self.ln2(h))"
                ),
                (
                    "        h = self._attend(x, mask, cache)\n"
                    "        return self._feed(h)\n\n"
                    "    def _attend(self, x, mask, cache):\n"
                    '        """The attention sub-layer with its residual."""\n'
                    "        return self.ln1(x + self.attn(x, mask=mask, cache=cache))\n\n"
                    "    def _feed(self, h):\n"
                    '        """The feed-forward sub-layer with its residual."""\n'
                    "        return self.ln2(h + self.ffn(h))"
                ),
            ),
        ),
        5,
        POST_ORDER,
        "refactor",
    ),
    Case(
        "f_numel_math_prod",
        R,
        GQA,
        (
            ("import torch\n", "import math\n\nimport torch\n"),
            (
                "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
                "    return math.prod((batch, n_layers, seq_len, n_kv_heads, d_head))",
            ),
        ),
        6,
        NO_FACTOR_2,
        "refactor",
    ),
    Case(
        "f_gqa_rotate_loop_values_too",
        R,
        GQA,
        (
            (
                (
                    "        q = apply_rope(q, positions, self.rope_base)\n"
                    "        k = apply_rope(k, positions, self.rope_base)\n"
                ),
                "        q, k, v = (apply_rope(t, positions, self.rope_base) for t in (q, k, v))\n",
            ),
            ("        t = x.shape[1]\n", "        n_new = x.shape[1]\n"),
            (
                "        positions = torch.arange(start, start + t, device=x.device)\n",
                "        positions = torch.arange(start, start + n_new, device=x.device)\n",
            ),
            (
                "        mask = causal_mask(t, k.shape[2], device=x.device)",
                "        mask = causal_mask(n_new, k.shape[2], device=x.device)",
            ),
        ),
        6,
        ROPE_ON_V,
        "refactor",
    ),
    Case(
        "f_cache_check_loop_no_cross",
        A,
        GQA,
        (
            (
                (
                    '        self._check(k_new, "k_new")\n'
                    '        self._check(v_new, "v_new")\n'
                    "        if k_new.shape[2] != v_new.shape[2]:\n"
                    "            raise ValueError(\n"
                    '                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} hold different t"\n'
                    "            )\n"
                ),
                (
                    '        for name, new in (("k_new", k_new), ("v_new", v_new)):\n'
                    "            self._check(new, name)\n"
                ),
            ),
        ),
        6,
        KV_NOT_CROSS,
        "refactor",
    ),
    Case(
        "f_train_totals_hoisted",
        R,
        LM,
        (
            (
                (
                    "    history = []\n"
                    "    for epoch in range(1, epochs + 1):\n"
                    "        model.train()\n"
                    "        total, count = 0.0, 0\n"
                ),
                (
                    "    history = []\n"
                    "    total, count = 0.0, 0  # token-weighted running loss\n"
                    "    for epoch in range(1, epochs + 1):\n"
                    "        model.train()\n"
                ),
            ),
        ),
        7,
        NOT_RESET,
        "refactor",
        select="test_part7_loss_training",
    ),
    Case(
        "f_charlm_table_sizes",
        R,
        LM,
        (
            (
                (
                    "        self.tok_emb = nn.Embedding(vocab_size, d_model)\n"
                    "        self.pos_emb = nn.Embedding(max_len, d_model)\n"
                ),
                (
                    "        table = 128  # positions the model can embed\n"
                    "        self.tok_emb = nn.Embedding(vocab_size, d_model)\n"
                    "        self.pos_emb = nn.Embedding(table, d_model)\n"
                ),
            ),
        ),
        7,
        HARD_128,
        "refactor",
        select="test_part7_model_generation",
    ),
    Case(
        "f_train_one_step_per_epoch",
        R,
        LM,
        (
            (
                (
                    "        total, count = 0.0, 0\n"
                    "        for inputs, targets in train_batches:\n"
                ),
                (
                    "        seen_loss, seen_tokens = 0.0, 0\n"
                    "        optimizer.zero_grad()\n"
                    "        for inputs, targets in train_batches:\n"
                ),
            ),
            (
                (
                    "            optimizer.zero_grad()\n"
                    "            loss.backward()\n"
                    "            optimizer.step()\n"
                    "            total += loss.item() * real\n"
                    "            count += real\n"
                    "        if count == 0:\n"
                ),
                (
                    "            loss.backward()\n"
                    "            seen_loss += loss.item() * real\n"
                    "            seen_tokens += real\n"
                    "        optimizer.step()\n"
                    "        if seen_tokens == 0:\n"
                ),
            ),
            (
                '                "train_loss": total / count,\n',
                '                "train_loss": seen_loss / seen_tokens,\n',
            ),
        ),
        7,
        ONE_STEP,
        "refactor",
        select="test_part7_loss_training",
    ),
    Case(
        "f_evaluate_batch_helper_no_eval",
        R,
        LM,
        (
            (
                "def evaluate(model: CharLM, batches) -> float:",
                (
                    "def _summed_loss(model: CharLM, inputs, targets) -> float:\n"
                    '    """The summed loss of one batch."""\n'
                    '    return lm_loss(model(inputs), targets, reduction="sum").item()\n\n\n'
                    "def evaluate(model: CharLM, batches) -> float:"
                ),
            ),
            (
                (
                    "    was_training = model.training\n"
                    "    model.eval()\n"
                    "    total, count = 0.0, 0\n"
                ),
                ("    was_training = model.training\n    total, count = 0.0, 0\n"),
            ),
            (
                '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n',
                "                    total += _summed_loss(model, inputs, targets)\n",
            ),
        ),
        7,
        NO_EVAL,
        "refactor",
        select="test_part7_loss_training",
    ),
    Case(
        "f_charlm_size_constants",
        A,
        LM,
        (
            (
                "PAD_ID = 0\nIGNORE_INDEX = -100\n",
                "PAD_ID = 0\nIGNORE_INDEX = -100\nD_MODEL, N_HEADS, D_FF = 64, 2, 4 * 64\n",
            ),
            (
                "    def __init__(self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128):",
                (
                    "    def __init__(self, vocab_size, d_model=D_MODEL, n_heads=N_HEADS, n_layers=2, d_ff=D_FF,\n"
                    "                 max_len=128):"
                ),
            ),
        ),
        7,
        INIT_DEFAULT,
        "refactor",
        select="test_part7_model_generation",
    ),
    Case(
        "f_train_learning_rate_constant",
        R,
        LM,
        (
            ("PAD_ID = 0\n", "PAD_ID = 0\nLEARNING_RATE = 3e-4\n"),
            (
                "def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = 1e-3):",
                (
                    "def train(\n"
                    "    model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = LEARNING_RATE\n"
                    "):"
                ),
            ),
        ),
        7,
        LR,
        "refactor",
        select="test_part7_loss_training",
    ),
)


UNKNOWN = (
    Case(
        "u_no_dk_check",
        R,
        ATT,
        (
            (
                (
                    "    if q.shape[-1] != k.shape[-1]:\n"
                    '        raise ValueError(f"q has d_k={q.shape[-1]} but k has d_k={k.shape[-1]}")\n'
                ),
                "",
            ),
        ),
        1,
        None,
        "unknown",
    ),
    Case(
        "u_attention_mask_not_expanded",
        R,
        MASKS,
        (
            (
                (
                    "    mask = keys_padded.expand(batch, 1, t, t)  # (B, 1, t, t)\n"
                    "    if causal:\n"
                    "        mask = mask | causal_mask(t, device=keys_padded.device)\n"
                ),
                (
                    "    mask = keys_padded  # broadcasts over the queries\n"
                    "    if causal:\n"
                    "        mask = mask | causal_mask(t, device=keys_padded.device)\n"
                ),
            ),
        ),
        2,
        None,
        "unknown",
    ),
    Case(
        "u_heads_no_out_proj",
        R,
        HEADS,
        (
            (
                "        return self.out_proj(merge_heads(out))  # (B, Tq, D)",
                "        return merge_heads(out)  # (B, Tq, D)",
            ),
        ),
        3,
        None,
        "unknown",
    ),
    Case(
        "u_rope_odd_not_refused",
        R,
        ROPE,
        (
            (
                (
                    "    if d_head % 2 != 0:\n"
                    '        raise ValueError(f"d_head={d_head} must be even (RoPE rotates pairs)")\n'
                ),
                "",
            ),
        ),
        4,
        None,
        "unknown",
    ),
    Case(
        "u_ffn_gelu",
        R,
        BLOCK,
        (
            (
                "        return self.fc2(torch.relu(self.fc1(x)))",
                "        return self.fc2(nn.functional.gelu(self.fc1(x)))",
            ),
        ),
        5,
        None,
        "unknown",
    ),
    Case(
        "u_postnorm_ln1_twice",
        A,
        BLOCK,
        (
            (
                "        return self.ln2(settled + self.ffn(settled))",
                "        return self.ln1(settled + self.ffn(settled))",
            ),
        ),
        5,
        None,
        "unknown",
    ),
    Case(
        "u_numel_without_layers",
        R,
        GQA,
        (
            (
                "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
                "    return 2 * batch * seq_len * n_kv_heads * d_head",
            ),
        ),
        6,
        None,
        "unknown",
    ),
    Case(
        "u_reset_clears_buffers_only",
        A,
        GQA,
        (
            (
                (
                    '        """Forget everything (the storage is reused)."""\n'
                    "        self.length = 0\n"
                ),
                (
                    '        """Forget everything (the storage is reused)."""\n'
                    "        self.k.zero_()\n"
                    "        self.v.zero_()\n"
                ),
            ),
        ),
        6,
        None,
        "unknown",
    ),
    Case(
        "u_encode_drops_unknown",
        R,
        LM,
        (
            (
                (
                    "        unknown = [c for c in s if c not in self.stoi]\n"
                    "        if unknown:\n"
                    '            raise ValueError(f"character {unknown[0]!r} is not in the vocabulary")\n'
                    "        return [self.stoi[c] for c in s]"
                ),
                "        return [self.stoi[c] for c in s if c in self.stoi]",
            ),
        ),
        7,
        None,
        "unknown",
        select="test_part7_data",
    ),
)


MULTI = (
    Case(
        "mu_no_scale_and_diagonal",
        R,
        ATT,
        (
            (
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                "    scores = q @ k.transpose(-2, -1)",
            ),
        ),
        1,
        NO_SCALE,
        "multi",
        also=(NO_SCALE, DIAGONAL),
        extra=(
            (
                MASKS,
                "    return key_pos > query_pos  # (t_q, t_k)",
                "    return key_pos >= query_pos  # (t_q, t_k)",
            ),
        ),
        also_parts=(2,),
    ),
    Case(
        "mu_inverted_and_pad_off_by_one",
        R,
        ATT,
        (
            (
                '            scores = scores.masked_fill(mask, float("-inf"))',
                '            scores = scores.masked_fill(~mask, float("-inf"))',
            ),
        ),
        1,
        INVERTED,
        "multi",
        also=(INVERTED, PAD_OFF_BY_ONE),
        extra=(
            (
                MASKS,
                "    return positions >= lengths[:, None]  # (B, t)",
                "    return positions > lengths[:, None]  # (B, t)",
            ),
        ),
        also_parts=(2,),
    ),
    Case(
        "mu_split_no_t_and_rotate_half",
        A,
        HEADS,
        (
            (
                (
                    "    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)\n"
                    "    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)"
                ),
                "    return x.contiguous().view(batch, n_heads, steps, per_head)  # (B, h, T, d_h)",
            ),
        ),
        3,
        SPLIT_NO_T,
        "multi",
        also=(SPLIT_NO_T, ROTATE_HALF),
        extra=(
            (
                ROPE,
                "    pairs = x.to(real).reshape(*x.shape[:-1], width // 2, 2).contiguous()",
                (
                    "    pairs = x.to(real).reshape(*x.shape[:-1], 2, width // 2).transpose(-1, -2)"
                    ".contiguous()"
                ),
            ),
            (
                ROPE,
                "    return torch.view_as_real(turned).flatten(-2).to(x.dtype)",
                "    return torch.view_as_real(turned).transpose(-1, -2).flatten(-2).to(x.dtype)",
            ),
        ),
        also_parts=(4,),
    ),
    Case(
        "mu_freq_and_tiled",
        R,
        ROPE,
        (
            (
                "    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)",
                "    inv_freq = base ** (-pair / d_head)  # (d_head/2,)",
            ),
        ),
        4,
        FREQ,
        "multi",
        also=(FREQ, TILED),
        extra=(
            (
                GQA,
                (
                    "    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)\n"
                    "    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)"
                ),
                "    return x.repeat(1, n_rep, 1, 1)  # (B, h_kv * n_rep, T, d)",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_eps_outside_and_no_factor_2",
        R,
        NORM,
        (
            (
                "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias",
                "        return (x - mean) / (torch.sqrt(var) + self.eps) * self.weight + self.bias",
            ),
        ),
        5,
        EPS_OUTSIDE,
        "multi",
        also=(EPS_OUTSIDE, NO_FACTOR_2),
        extra=(
            (
                GQA,
                "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
                "    return batch * n_layers * seq_len * n_kv_heads * d_head",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_merge_no_t_and_scale_dk",
        R,
        HEADS,
        (
            (
                "    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
                "    return x.reshape(batch, t, n_heads * d_head)  # (B, T, D)",
            ),
        ),
        3,
        MERGE_NO_T,
        "multi",
        also=(MERGE_NO_T, SCALE_DK),
        extra=(
            (
                ATT,
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                "    scores = q @ k.transpose(-2, -1) / q.shape[-1]",
            ),
        ),
        also_parts=(1,),
    ),
    Case(
        "mu_no_offset_and_rope_offset",
        A,
        MASKS,
        (
            (
                "    return everything.triu(diagonal=shift + 1)",
                "    return everything.triu(diagonal=1)",
            ),
        ),
        2,
        NO_OFFSET,
        "multi",
        also=(NO_OFFSET, NO_ROPE_OFFSET),
        extra=(
            (
                GQA,
                "        where = torch.arange(start, start + steps, device=x.device)",
                "        where = torch.arange(steps, device=x.device)",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_query_axis_and_unbiased",
        A,
        ATT,
        (
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
                "    weights = softmax(scores, dim=-2)  # (..., Tq, Tk)",
            ),
        ),
        1,
        QUERY_AXIS,
        "multi",
        also=(QUERY_AXIS, UNBIASED),
        extra=(
            (
                NORM,
                "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)",
                "        spread = torch.var(x, dim=-1, keepdim=True)",
            ),
        ),
        also_parts=(5,),
    ),
    Case(
        "mu_rms_centred_and_refuses_full",
        R,
        NORM,
        (
            (
                (
                    "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
                    "        return x / rms * self.weight"
                ),
                (
                    "        x = x - x.mean(dim=-1, keepdim=True)\n"
                    "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
                    "        return x / rms * self.weight"
                ),
            ),
        ),
        5,
        RMS_CENTRED,
        "multi",
        also=(RMS_CENTRED, REFUSES_FULL),
        extra=(
            (
                GQA,
                "        if self.length + t > self.max_len:",
                "        if self.length + t >= self.max_len:",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_view_and_no_max",
        R,
        LM,
        (
            (
                "        logits.reshape(-1, logits.shape[-1]),\n        targets.reshape(-1),\n",
                "        logits.view(-1, logits.shape[-1]),\n        targets.view(-1),\n",
            ),
        ),
        7,
        VIEW,
        "multi",
        also=(VIEW, NO_MAX),
        extra=(
            (
                ATT,
                "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly",
                "    exp = torch.exp(x)",
            ),
        ),
        also_parts=(1,),
        select="test_part7_loss_training",
    ),
    Case(
        "mu_sin_sign_and_bytes",
        R,
        ROPE,
        (
            (
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1",
                "        (a * cos + b * sin, b * cos - a * sin), dim=-1",
            ),
        ),
        4,
        SIN_SIGN,
        "multi",
        also=(SIN_SIGN, BYTES),
        extra=(
            (
                GQA,
                "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
                "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head * 4",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_after_zeroed_and_post_order",
        A,
        ATT,
        (
            (
                (
                    "    if mask is not None:\n"
                    "        scores = _as_additive(mask, scores)\n"
                    "        blocked = (scores == _NEG_INF).all(dim=-1)\n"
                ),
                (
                    "    weights = softmax(scores, dim=-1)\n"
                    "    if mask is not None:\n"
                    "        weights = torch.exp(_as_additive(mask, torch.log(weights)))\n"
                    "        blocked = (weights == 0).all(dim=-1)\n"
                ),
            ),
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n",
                "",
            ),
        ),
        1,
        AFTER_ZEROED,
        "multi",
        also=(AFTER_ZEROED, POST_ORDER),
        extra=(
            (
                BLOCK,
                (
                    "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        return mixed + self.ffn(self.ln2(mixed))"
                ),
                (
                    "        mixed = self.ln1(x + self.attn(x, mask=mask, cache=cache))\n"
                    "        return self.ln2(mixed + self.ffn(mixed))"
                ),
            ),
        ),
        also_parts=(5,),
    ),
    Case(
        "mu_heads_none_causal_and_partial_write",
        R,
        HEADS,
        (
            (
                (
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n"
                ),
                (
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n"
                    "            if mask is None:\n"
                    "                t_q, t_k = q.shape[2], k.shape[2]\n"
                    "                q_at = torch.arange(t_k - t_q, t_k, device=q.device)[:, None]\n"
                    "                mask = torch.arange(t_k, device=q.device)[None, :] > q_at\n"
                ),
            ),
        ),
        3,
        HEADS_NONE_CAUSAL,
        "multi",
        also=(HEADS_NONE_CAUSAL, PARTIAL_WRITE),
        extra=(
            (
                GQA,
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
                    "        room = self.max_len - self.length\n"
                    "        self.k[:, :, self.length : self.length + t] = k_new[:, :, :room]\n"
                    "        self.v[:, :, self.length : self.length + t] = v_new[:, :, :room]\n"
                    "        if self.length + t > self.max_len:\n"
                    "            raise ValueError(\n"
                    '                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"\n'
                    "            )\n"
                ),
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_cache_h_q_and_cache_no_mask",
        A,
        GQA,
        (
            (
                (
                    "        if cache is not None:\n"
                    "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d)\n"
                ),
                (
                    "        if cache is not None:\n"
                    "            k, v = cache.append(\n"
                    "                k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)\n"
                    "            )\n"
                    "            k, v = k[:, ::rep], v[:, ::rep]\n"
                ),
            ),
        ),
        6,
        CACHE_H_Q,
        "multi",
        also=(CACHE_H_Q, CACHE_NO_MASK),
        extra=(
            (
                BLOCK,
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                (
                    "        mixed = x + self.attn(\n"
                    "            self.ln1(x), mask=None if cache is not None else mask, cache=cache\n"
                    "        )"
                ),
            ),
        ),
        also_parts=(5,),
    ),
    Case(
        "mu_positions_ignored_and_length_tensor",
        A,
        ROPE,
        (
            (
                "    theta = rope_angles(positions, width, base, dtype=real)",
                "    theta = rope_angles(torch.arange(steps, device=x.device), width, base, dtype=real)",
            ),
        ),
        4,
        POSITIONS_IGNORED,
        "multi",
        also=(POSITIONS_IGNORED, LENGTH_TENSOR),
        extra=(
            (
                GQA,
                "        self.length = end\n",
                "        self.length = torch.as_tensor(end)\n",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "mu_scale_dv_mask_on_cpu_rope_float32",
        R,
        ATT,
        (
            (
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])",
            ),
        ),
        1,
        SCALE_DV,
        "multi",
        also=(SCALE_DV, MASK_ON_CPU, ROPE_FLOAT32),
        extra=(
            (
                MASKS,
                "    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)",
                "    positions = torch.arange(t)[None, :]  # (1, t)",
            ),
            (
                ROPE,
                "    dtype = torch.get_default_dtype() if dtype is None else dtype\n",
                "    dtype = torch.float32 if dtype is None else dtype\n",
            ),
        ),
        also_parts=(2, 4),
    ),
    Case(
        "mu_true_division_and_weight_tensor",
        R,
        HEADS,
        (
            (
                "        self.d_head = d_model // n_heads",
                "        self.d_head = d_model / n_heads",
            ),
        ),
        3,
        TRUE_DIVISION,
        "multi",
        also=(TRUE_DIVISION, NOT_PARAMETER),
        extra=(
            (
                NORM,
                "        self.eps = eps\n        self.weight = nn.Parameter(torch.ones(d))\n        ### END",
                "        self.eps = eps\n        self.weight = torch.ones(d)\n        ### END",
            ),
        ),
        also_parts=(5,),
    ),
    Case(
        "mu_vocab_case_and_norm_grad",
        R,
        LM,
        (
            (
                "        chars = sorted(set(text))\n",
                "        chars = sorted(set(text.lower()))\n",
            ),
        ),
        7,
        VOCAB_CASE,
        "multi",
        also=(VOCAB_CASE, NORM_GRAD),
        extra=(
            (
                NORM,
                "        mean = x.mean(dim=-1, keepdim=True)\n",
                "        mean = x.mean(dim=-1, keepdim=True).detach()\n",
            ),
        ),
        also_parts=(5,),
        select="test_part7_data",
    ),
    Case(
        "mu_rope_on_v_and_cross_from_x",
        R,
        GQA,
        (
            (
                "        k = apply_rope(k, positions, self.rope_base)\n",
                (
                    "        k = apply_rope(k, positions, self.rope_base)\n"
                    "        v = apply_rope(v, positions, self.rope_base)\n"
                ),
            ),
        ),
        6,
        ROPE_ON_V,
        "multi",
        also=(ROPE_ON_V, CROSS_FROM_X),
        extra=(
            (
                HEADS,
                "        source = x if context is None else context\n",
                "        source = x\n",
            ),
        ),
        also_parts=(3,),
    ),
    Case(
        "mu_pad_class_0_and_diagonal",
        A,
        LM,
        (
            (
                "    targets = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long, device=device)",
                "    targets = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)",
            ),
        ),
        7,
        PAD_CLASS_0,
        "multi",
        also=(PAD_CLASS_0, DIAGONAL),
        extra=(
            (
                MASKS,
                "    return everything.triu(diagonal=shift + 1)",
                "    return everything.triu(diagonal=shift)",
            ),
        ),
        also_parts=(2,),
        select="test_part7_data",
    ),
    Case(
        "mu_no_advance_and_raw_moments",
        R,
        GQA,
        (
            (
                (
                    "        self.length += t\n"
                    "        return self.k[:, :, : self.length], self.v[:, :, : self.length]"
                ),
                "        return self.k[:, :, : self.length + t], self.v[:, :, : self.length + t]",
            ),
        ),
        6,
        NO_ADVANCE,
        "multi",
        also=(NO_ADVANCE, RAW_MOMENTS),
        extra=(
            (
                NORM,
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
                "        var = (x**2).mean(dim=-1, keepdim=True) - mean**2",
            ),
        ),
        also_parts=(5,),
    ),
)


CORRECT = (
    Case(
        "c_attention_where_einsum",
        R,
        ATT,
        (
            (
                (
                    "    top = x.amax(dim=dim, keepdim=True)\n"
                    "    if torch.isneginf(top).any():\n"
                    "        raise ValueError(\n"
                    '            f"softmax: x has a slice along dim={dim} that is entirely -inf"\n'
                    "        )\n"
                    "    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly\n"
                    "    return exp / exp.sum(dim=dim, keepdim=True)"
                ),
                (
                    "    live = ~torch.isneginf(x)\n"
                    "    if not live.any(dim=dim).all():\n"
                    "        raise ValueError(\n"
                    '            f"softmax: x has a slice along dim={dim} that is entirely -inf"\n'
                    "        )\n"
                    "    top = torch.max(x, dim=dim, keepdim=True).values\n"
                    '    shifted = torch.where(live, x - top, torch.full_like(x, float("-inf")))\n'
                    "    exp = shifted.exp()\n"
                    "    return exp / torch.sum(exp, dim=dim, keepdim=True)"
                ),
            ),
            (
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)",
                (
                    "    scale = 1.0 / math.sqrt(q.shape[-1])\n"
                    '    scores = torch.einsum("...qd,...kd->...qk", q, k) * scale  # (..., Tq, Tk)'
                ),
            ),
            (
                '            scores = scores.masked_fill(mask, float("-inf"))',
                '            scores = torch.where(mask, float("-inf"), scores)',
            ),
            (
                "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)",
                (
                    '    out = torch.einsum("...qk,...kd->...qd", weights, v)\n'
                    "    return out, weights  # (..., Tq, d_v), (..., Tq, Tk)"
                ),
            ),
        ),
        1,
        None,
        "correct",
    ),
    Case(
        "c_masks_tril_and_expand",
        R,
        MASKS,
        (
            (
                (
                    "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)\n"
                    "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)\n"
                    "    return key_pos > query_pos  # (t_q, t_k)"
                ),
                (
                    "    seen = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)\n"
                    "    return ~seen  # (t_q, t_k)"
                ),
            ),
            (
                (
                    "    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)\n"
                    "    return positions >= lengths[:, None]  # (B, t)"
                ),
                (
                    "    positions = torch.arange(t, device=lengths.device).expand(len(lengths), t)\n"
                    "    return positions >= lengths.unsqueeze(-1)  # (B, t)"
                ),
            ),
        ),
        2,
        None,
        "correct",
    ),
    Case(
        "c_heads_unflatten_flatten",
        R,
        HEADS,
        (
            (
                (
                    "    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)\n"
                    "    return x.transpose(1, 2)  # (B, h, T, d_h)"
                ),
                "    return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)  # (B, h, T, d_h)",
            ),
            (
                "    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
                "    return x.permute(0, 2, 1, 3).flatten(start_dim=2)  # (B, T, D)",
            ),
        ),
        3,
        None,
        "correct",
    ),
    Case(
        "c_rope_rotation_matrices",
        R,
        ROPE,
        (
            (
                (
                    "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                    "    rotated = torch.stack(\n"
                    "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                    "    )  # (..., T, d/2, 2)\n"
                    "    return rotated.flatten(-2)  # (..., T, d_head)"
                ),
                (
                    "    rot = torch.stack(\n"
                    "        (torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2\n"
                    "    )  # (T, d/2, 2, 2): rows (cos, -sin), (sin, cos)\n"
                    "    pairs = x.unflatten(-1, (-1, 2))  # (..., T, d/2, 2)\n"
                    '    rotated = torch.einsum("tiab,...tib->...tia", rot, pairs)\n'
                    "    return rotated.flatten(-2)  # (..., T, d_head)"
                ),
            ),
        ),
        4,
        None,
        "correct",
    ),
    Case(
        "c_rope_pair_loop",
        R,
        ROPE,
        (
            (
                (
                    "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                    "    rotated = torch.stack(\n"
                    "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                    "    )  # (..., T, d/2, 2)\n"
                    "    return rotated.flatten(-2)  # (..., T, d_head)"
                ),
                (
                    "    columns = []\n"
                    "    for i in range(x.shape[-1] // 2):\n"
                    "        a, b = x[..., 2 * i], x[..., 2 * i + 1]  # (..., T) each\n"
                    "        columns.append(a * cos[:, i] - b * sin[:, i])\n"
                    "        columns.append(a * sin[:, i] + b * cos[:, i])\n"
                    "    return torch.stack(columns, dim=-1)  # (..., T, d_head)"
                ),
            ),
        ),
        4,
        None,
        "correct",
    ),
    Case(
        "c_norm_var_mean_rsqrt",
        R,
        NORM,
        (
            (
                (
                    "        mean = x.mean(dim=-1, keepdim=True)\n"
                    "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
                    "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"
                ),
                (
                    "        var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)\n"
                    "        return torch.addcmul(self.bias, (x - mean) * torch.rsqrt(var + self.eps), self.weight)"
                ),
            ),
            (
                (
                    "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n"
                    "        return x / rms * self.weight"
                ),
                (
                    "        inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
                    "        return self.weight * (x * inv_rms)"
                ),
            ),
        ),
        5,
        None,
        "correct",
    ),
    Case(
        "c_gqa_repeat_interleave_narrow",
        R,
        GQA,
        (
            (
                (
                    "    batch, n_kv, t, d = x.shape\n"
                    "    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)\n"
                    "    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)"
                ),
                "    return x.repeat_interleave(n_rep, dim=1)  # (B, h_kv * n_rep, T, d)",
            ),
            (
                (
                    "        self.k[:, :, self.length : self.length + t] = k_new\n"
                    "        self.v[:, :, self.length : self.length + t] = v_new\n"
                    "        self.length += t\n"
                    "        return self.k[:, :, : self.length], self.v[:, :, : self.length]"
                ),
                (
                    "        self.k.narrow(2, self.length, t).copy_(k_new)\n"
                    "        self.v.narrow(2, self.length, t).copy_(v_new)\n"
                    "        self.length = self.length + t\n"
                    "        return self.k.narrow(2, 0, self.length), self.v.narrow(2, 0, self.length)"
                ),
            ),
        ),
        6,
        None,
        "correct",
    ),
    Case(
        "c_lm_loss_gather",
        R,
        LM,
        (
            (
                (
                    "    return F.cross_entropy(\n"
                    "        logits.reshape(-1, logits.shape[-1]),\n"
                    "        targets.reshape(-1),\n"
                    "        ignore_index=IGNORE_INDEX,\n"
                    "        reduction=reduction,\n"
                    "    )"
                ),
                (
                    "    real = targets != IGNORE_INDEX  # (B, T)\n"
                    "    log_probs = torch.log_softmax(logits, dim=-1)  # (B, T, V)\n"
                    "    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)\n"
                    "    total = -(picked * real).sum()\n"
                    '    return total if reduction == "sum" else total / real.sum()'
                ),
            ),
        ),
        7,
        None,
        "correct",
    ),
    Case(
        "c_block_named_sublayers",
        A,
        BLOCK,
        (
            (
                "        return self.fc2(torch.clamp(hidden, min=0))  # (..., d_model)",
                "        return self.fc2(nn.functional.relu(hidden))  # (..., d_model)",
            ),
            (
                (
                    "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        return mixed + self.ffn(self.ln2(mixed))"
                ),
                (
                    "        attended = self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        mixed = x + attended\n"
                    "        fed = self.ffn(self.ln2(mixed))\n"
                    "        return mixed + fed"
                ),
            ),
        ),
        5,
        None,
        "correct",
    ),
)


THIRD = PARTIAL + REWRITTEN + MOVED + REFACTOR + UNKNOWN + MULTI + CORRECT
