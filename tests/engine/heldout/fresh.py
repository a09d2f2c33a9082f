"""A second held-out set of student solutions, written after the first (``mistakes.py``) by a
hand that saw only the mistakes' descriptions (the constants imported below), SPEC.md, the
reference solution and Alice's correct one: never the grader's mistake catalogue or its
diagnosis code, never what the grader names for these cases.

It is a measure only: run ``measure.py --set fresh`` to see how diagnosis fares on mistakes it
was not written against, and never tune diagnosis on it (a set tuned on stops measuring).
``check_heldout.py --set fresh --blind`` checks that each case fails (or passes) as declared.
The cases follow ``mistakes.Case``; kinds as in ``mistakes.py``.
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

ATT, MSK, HDS, ROP = "attention.py", "masks.py", "heads.py", "rope.py"
NRM, BLK, GQA, LM = "norm.py", "block.py", "gqa.py", "charlm.py"
REF, ALICE = "reference", "alice"

# The reference's lines that several cases edit.
REF_SCORES = (
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)\n"
)
REF_BOOL = '            scores = scores.masked_fill(mask, float("-inf"))\n'
REF_WEIGHTS = "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
REF_ROW_CHECK = """\
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
"""
REF_ROTATION = """\
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)
"""
REF_PRE = """\
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))
"""
REF_GQA_ROPE = """\
        q = apply_rope(q, positions, self.rope_base)
        k = apply_rope(k, positions, self.rope_base)
"""
ALICE_GQA_ROPE = """\
        q = apply_rope(q, where, self.rope_base)
        k = apply_rope(k, where, self.rope_base)
"""
REF_EVAL_LOOP = """\
    try:
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real
    finally:
        model.train(was_training)
"""
REF_CE = """\
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    )
"""
REF_PICK = """\
                logits[PAD_ID] = float("-inf")
                if greedy:
                    new = logits.argmax()[None]
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    new = torch.multinomial(probs, 1, generator=generator)
"""

REWRITTEN = (
    # Part 1: attention.py
    Case(
        "fresh_scale_dv_alice_width",
        ALICE,
        ATT,
        (("    d_k = q.shape[-1]\n", "    d_k = v.shape[-1]  # head width\n"),),
        1,
        SCALE_DV,
        "rewritten",
    ),
    Case(
        "fresh_inverted_where_args_swapped",
        ALICE,
        ATT,
        (
            (
                "torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
                "torch.where(mask, scores, torch.full_like(scores, _NEG_INF))",
            ),
        ),
        1,
        INVERTED,
        "rewritten",
    ),
    Case(
        "fresh_nan_row_no_checks",
        REF,
        ATT,
        (
            (
                """\
    if torch.isneginf(top).any():
        raise ValueError(
            f"softmax: x has a slice along dim={dim} that is entirely -inf"
        )
""",
                "",
            ),
            (REF_ROW_CHECK, ""),
        ),
        1,
        NAN_ROW,
        "rewritten",
    ),
    Case(
        "fresh_after_zeroed_exp_of_mask",
        REF,
        ATT,
        (
            (
                """\
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
"""
                + REF_ROW_CHECK
                + REF_WEIGHTS,
                """\
        keep = ~mask if mask.dtype == torch.bool else torch.exp(mask)
        if (keep == 0).all(dim=-1).any():
            raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        weights = weights * keep  # prohibited keys get weight 0
""",
            ),
        ),
        1,
        AFTER_ZEROED,
        "rewritten",
    ),
    Case(
        "fresh_after_renorm_alice",
        ALICE,
        ATT,
        (
            (
                (
                    '    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)'
                    "  # (..., Tq, Tk)\n"
                ),
                (
                    '    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)\n'
                    "    raw = scores\n"
                ),
            ),
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n",
                """\
    weights = softmax(raw, dim=-1)  # (..., Tq, Tk)
    if mask is not None:
        weights = torch.where(scores == _NEG_INF, torch.zeros_like(weights), weights)
        weights = weights / weights.sum(dim=-1, keepdim=True)
""",
            ),
        ),
        1,
        AFTER_RENORM,
        "rewritten",
    ),
    Case(
        "fresh_float_as_bool_alice",
        ALICE,
        ATT,
        (
            (
                "    mask = mask.to(scores.device)\n",
                (
                    "    mask = mask.to(scores.device)\n"
                    "    if mask.is_floating_point():\n"
                    "        mask = mask != 0  # nonzero entries block\n"
                ),
            ),
        ),
        1,
        FLOAT_AS_BOOL,
        "rewritten",
    ),
    # Part 2: masks.py
    Case(
        "fresh_diagonal_tril_complement",
        REF,
        MSK,
        (
            (
                """\
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    return key_pos > query_pos  # (t_q, t_k)
""",
                """\
    seen = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q - 1)
    return ~seen
""",
            ),
        ),
        2,
        DIAGONAL,
        "rewritten",
    ),
    Case(
        "fresh_mask_on_cpu_padding_arange",
        REF,
        MSK,
        (
            (
                "    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)\n",
                "    positions = torch.arange(t).unsqueeze(0)  # (1, t)\n",
            ),
        ),
        2,
        MASK_ON_CPU,
        "rewritten",
    ),
    # Part 3: heads.py
    Case(
        "fresh_true_division_alice",
        ALICE,
        HDS,
        (
            ("    per_head = width // n_heads\n", "    per_head = width / n_heads\n"),
            (
                "        self.d_head = d_model // n_heads\n",
                "        self.d_head = d_model / n_heads\n",
            ),
        ),
        3,
        TRUE_DIVISION,
        "rewritten",
    ),
    Case(
        "fresh_scale_d_model_inline_attention",
        ALICE,
        HDS,
        (
            (
                """\
import torch
from torch import nn

from .attention import scaled_dot_product_attention
""",
                """\
import math

import torch
from torch import nn

from .attention import softmax
""",
            ),
            (
                "        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
                """\
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # (B, h, Tq, Tk)
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        elif mask is not None:
            scores = scores + mask
        mixed = softmax(scores, dim=-1) @ v  # (B, h, Tq, d_h)
""",
            ),
        ),
        3,
        SCALE_D_MODEL,
        "rewritten",
    ),
    Case(
        "fresh_cross_from_x_alice",
        ALICE,
        HDS,
        (
            (
                """\
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)
""",
                """\
        k = split_heads(self.k_proj(x), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(x), self.n_heads)  # (B, h, Tk, d_h)
""",
            ),
        ),
        3,
        CROSS_FROM_X,
        "rewritten",
    ),
    Case(
        "fresh_heads_none_causal_triu",
        REF,
        HDS,
        (
            (
                "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n",
                """\
            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
            if mask is None:  # decoding: never look ahead
                t_q, t_k = q.shape[2], k.shape[2]
                mask = torch.ones(t_q, t_k, dtype=torch.bool, device=x.device).triu(
                    t_k - t_q + 1
                )
""",
            ),
        ),
        3,
        HEADS_NONE_CAUSAL,
        "rewritten",
    ),
    # Part 4: rope.py
    Case(
        "fresh_rotate_half_chunk",
        REF,
        ROP,
        (
            (
                REF_ROTATION,
                """\
    a, b = x.chunk(2, dim=-1)  # (..., T, d_head/2) each
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
""",
            ),
        ),
        4,
        ROTATE_HALF,
        "rewritten",
    ),
    Case(
        "fresh_sin_sign_conjugate",
        ALICE,
        ROP,
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
        "fresh_rope_float32_alice",
        ALICE,
        ROP,
        (
            (
                "        dtype = torch.get_default_dtype()\n",
                "        dtype = torch.float  # single precision is plenty\n",
            ),
        ),
        4,
        ROPE_FLOAT32,
        "rewritten",
    ),
    Case(
        "fresh_positions_ignored_alice",
        ALICE,
        ROP,
        (
            (
                "    positions = positions.to(x.device)\n",
                "    positions = torch.arange(steps, device=x.device)  # 0 .. T-1\n",
            ),
        ),
        4,
        POSITIONS_IGNORED,
        "rewritten",
    ),
    Case(
        "fresh_made_on_cpu_rope_pairs",
        REF,
        ROP,
        (
            (
                """\
    pair = torch.arange(
        d_head // 2, device=positions.device, dtype=dtype
    )  # (d_head/2,)
""",
                "    pair = torch.arange(d_head // 2, dtype=dtype)  # (d_head/2,)\n",
            ),
        ),
        4,
        MADE_ON_CPU,
        "rewritten",
    ),
    # Part 5: norm.py and block.py
    Case(
        "fresh_raw_moments_ref",
        REF,
        NRM,
        (
            (
                "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n",
                "        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean  # E[x^2] - E[x]^2\n",
            ),
        ),
        5,
        RAW_MOMENTS,
        "rewritten",
    ),
    Case(
        "fresh_norm_grad_rms_no_grad",
        REF,
        NRM,
        (
            (
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
                """\
        with torch.no_grad():  # a statistic, not a weight
            rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
""",
            ),
        ),
        5,
        NORM_GRAD,
        "rewritten",
    ),
    Case(
        "fresh_block_none_causal_alice",
        ALICE,
        BLK,
        (
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                """\
        if mask is None:  # a language model never looks ahead
            steps = x.shape[1]
            mask = torch.ones(steps, steps, dtype=torch.bool, device=x.device).triu(1)
        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)
""",
            ),
        ),
        5,
        BLOCK_NONE_CAUSAL,
        "rewritten",
    ),
    Case(
        "fresh_cache_no_mask_branches",
        REF,
        BLK,
        (
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                """\
        if cache is not None:
            h = x + self.attn(self.ln1(x), cache=cache)
        else:
            h = x + self.attn(self.ln1(x), mask=mask)
""",
            ),
        ),
        5,
        CACHE_NO_MASK,
        "rewritten",
    ),
    # Part 6: gqa.py
    Case(
        "fresh_no_factor_2_alice",
        ALICE,
        GQA,
        (("    total = 2\n", "    total = 1\n"),),
        6,
        NO_FACTOR_2,
        "rewritten",
    ),
    Case(
        "fresh_cache_h_q_repeat_first",
        REF,
        GQA,
        (
            (
                """\
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)
        n_rep = self.n_heads // self.n_kv_heads
        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)
        out, _ = scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask
        )
""",
                """\
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, h, T, d_h)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, start + T, d_h)
        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)
        out, _ = scaled_dot_product_attention(q, k, v, mask)
""",
            ),
        ),
        6,
        CACHE_H_Q,
        "rewritten",
    ),
    Case(
        "fresh_partial_write_clamped",
        ALICE,
        GQA,
        (
            (
                """\
        end = self.length + fresh
        if end > self.max_len:
            raise ValueError(
                f"KV cache overflow: length={self.length} + t={fresh} exceeds max_len={self.max_len}"
            )
        self.k[:, :, self.length:end].copy_(k_new)
        self.v[:, :, self.length:end].copy_(v_new)
""",
                """\
        end = min(self.length + fresh, self.max_len)
        room = end - self.length
        self.k[:, :, self.length:end].copy_(k_new[:, :, :room])
        self.v[:, :, self.length:end].copy_(v_new[:, :, :room])
        if room < fresh:
            raise ValueError(
                f"KV cache overflow: length={self.length} + t={fresh} exceeds max_len={self.max_len}"
            )
""",
            ),
        ),
        6,
        PARTIAL_WRITE,
        "rewritten",
    ),
    Case(
        "fresh_kv_not_cross_ref",
        REF,
        GQA,
        (
            (
                """\
        if k_new.shape != v_new.shape:
            raise ValueError(
                f"k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} differ"
            )
""",
                "",
            ),
        ),
        6,
        KV_NOT_CROSS,
        "rewritten",
    ),
    Case(
        "fresh_only_k_checked_alice",
        ALICE,
        GQA,
        (('        self._check(v_new, "v_new")\n', ""),),
        6,
        ONLY_K_CHECKED,
        "rewritten",
    ),
    Case(
        "fresh_rope_on_v_generator",
        ALICE,
        GQA,
        (
            (
                ALICE_GQA_ROPE,
                "        q, k, v = (apply_rope(t, where, self.rope_base) for t in (q, k, v))\n",
            ),
        ),
        6,
        ROPE_ON_V,
        "rewritten",
    ),
    Case(
        "fresh_length_tensor_counter",
        REF,
        GQA,
        (
            (
                "        self.v = torch.zeros_like(self.k)\n        self.length = 0\n",
                (
                    "        self.v = torch.zeros_like(self.k)\n"
                    "        self.length = torch.tensor(0)  # positions written\n"
                ),
            ),
        ),
        6,
        LENGTH_TENSOR,
        "rewritten",
    ),
    Case(
        "fresh_cache_default_dtype_alice",
        ALICE,
        GQA,
        (
            (
                """\
        self.k = torch.empty(shape, device=device, dtype=dtype)
        self.v = torch.empty(shape, device=device, dtype=dtype)
        self.dtype = dtype
""",
                """\
        self.k = torch.empty(shape, device=device)
        self.v = torch.empty(shape, device=device)
        self.dtype = self.k.dtype
""",
            ),
        ),
        6,
        CACHE_DEFAULT_DTYPE,
        "rewritten",
    ),
    Case(
        "fresh_refuses_full_ge",
        REF,
        GQA,
        (
            (
                "        if self.length + t > self.max_len:\n",
                "        if self.length + t >= self.max_len:\n",
            ),
        ),
        6,
        REFUSES_FULL,
        "rewritten",
    ),
    # Part 7: charlm.py
    Case(
        "fresh_empty_only_mean",
        REF,
        LM,
        (
            (
                "    if not (targets != IGNORE_INDEX).any():\n",
                '    if reduction == "mean" and not (targets != IGNORE_INDEX).any():\n',
            ),
        ),
        7,
        EMPTY_ONLY_MEAN,
        "rewritten",
        select="lm_loss",
    ),
    Case(
        "fresh_log_of_softmax_nll",
        REF,
        LM,
        (
            (
                REF_CE,
                """\
    probs = torch.softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)
    return F.nll_loss(
        torch.log(probs),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    )
""",
            ),
        ),
        7,
        LOG_SOFTMAX,
        "rewritten",
        select="lm_loss",
    ),
    Case(
        "fresh_two_passes_count_first",
        REF,
        LM,
        (
            (
                "    total, count = 0.0, 0\n    try:\n",
                (
                    "    count = sum(int((t != IGNORE_INDEX).sum()) for _, t in batches)\n"
                    "    total = 0.0\n"
                    "    try:\n"
                ),
            ),
            (
                """\
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real
""",
                """\
                if (targets != IGNORE_INDEX).any():
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
""",
            ),
        ),
        7,
        TWO_PASSES,
        "rewritten",
        select="evaluate",
    ),
    Case(
        "fresh_no_eval_alice",
        ALICE,
        LM,
        (
            (
                """\
        model.eval()
        with torch.no_grad():
            for inputs, targets in batches:
""",
                """\
        with torch.no_grad():
            for inputs, targets in batches:
""",
            ),
        ),
        7,
        NO_EVAL,
        "rewritten",
        select="evaluate",
    ),
    Case(
        "fresh_builds_graph_ref",
        REF,
        LM,
        (
            (
                REF_EVAL_LOOP,
                """\
    try:
        for inputs, targets in batches:
            inputs, targets = inputs.to(device), targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if real:
                total += lm_loss(model(inputs), targets, reduction="sum").item()
                count += real
    finally:
        model.train(was_training)
""",
            ),
        ),
        7,
        BUILDS_GRAPH,
        "rewritten",
        select="evaluate",
    ),
    Case(
        "fresh_no_finally_alice",
        ALICE,
        LM,
        (
            (
                """\
    try:
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
        _restore_modes(saved)
""",
                """\
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
    _restore_modes(saved)
""",
            ),
        ),
        7,
        NO_FINALLY,
        "rewritten",
        select="evaluate",
    ),
    Case(
        "fresh_batch_means_evaluate_list",
        REF,
        LM,
        (
            (
                """\
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real
""",
                """\
                if (targets != IGNORE_INDEX).any():
                    total += lm_loss(model(inputs), targets).item()
                    count += 1
""",
            ),
        ),
        7,
        BATCH_MEANS,
        "rewritten",
        select="evaluate",
    ),
    Case(
        "fresh_cache_ignored_ref",
        REF,
        LM,
        (
            (
                "            caches = model.make_caches() if use_cache else None\n",
                "            caches = None  # the model is small: recompute every step\n",
            ),
            (
                "                feed = new if use_cache else ids\n",
                "                feed = ids\n",
            ),
        ),
        7,
        CACHE_IGNORED,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_cache_default_false_alice",
        ALICE,
        LM,
        (("             use_cache=True):\n", "             use_cache=False):\n"),),
        7,
        CACHE_IGNORED,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_prompt_by_token_priming",
        REF,
        LM,
        (
            (
                "            feed = ids\n",
                """\
            feed = ids
            if use_cache:  # prime the caches one token at a time
                for token in ids[:-1]:
                    model(token.view(1, 1), caches)
                feed = ids[-1:]
""",
            ),
        ),
        7,
        PROMPT_BY_TOKEN,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_id_zero_enumerate",
        REF,
        LM,
        (
            (
                "        self.stoi = {c: i + 1 for i, c in enumerate(chars)}\n",
                "        self.stoi = {c: i for i, c in enumerate(chars)}\n",
            ),
        ),
        7,
        ID_ZERO,
        "rewritten",
        select="tokenizer",
    ),
    Case(
        "fresh_pad_class_0_clamp",
        REF,
        LM,
        (
            (
                "    return F.cross_entropy(\n",
                (
                    "    targets = targets.clamp(min=PAD_ID)  # -100 is no class\n"
                    "    return F.cross_entropy(\n"
                ),
            ),
        ),
        7,
        PAD_CLASS_0,
        "rewritten",
        select="lm_loss",
    ),
    Case(
        "fresh_refeeds_alice",
        ALICE,
        LM,
        (
            (
                "                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]\n",
                "                        last = model(torch.tensor([ids], device=device), caches)[0, -1]\n",
            ),
        ),
        7,
        REFEEDS,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_view_lm_loss",
        REF,
        LM,
        (
            (
                "        logits.reshape(-1, logits.shape[-1]),\n        targets.reshape(-1),\n",
                "        logits.view(-1, logits.shape[-1]),\n        targets.view(-1),\n",
            ),
        ),
        7,
        VIEW,
        "rewritten",
        select="lm_loss",
    ),
    Case(
        "fresh_vocab_case_lower",
        ALICE,
        LM,
        (
            (
                "        self.chars = sorted(set(text))\n",
                "        self.chars = sorted(set(text.lower()))\n",
            ),
        ),
        7,
        VOCAB_CASE,
        "rewritten",
        select="tokenizer",
    ),
    Case(
        "fresh_shared_cache_list_product",
        REF,
        LM,
        (
            (
                """\
        return [
            KVCache(
                batch,
                block.attn.n_heads,
                self.max_len,
                block.attn.d_head,
                device=weight.device,
                dtype=weight.dtype,
            )
            for block in self.blocks
        ]
""",
                """\
        attn = self.blocks[0].attn
        cache = KVCache(
            batch, attn.n_heads, self.max_len, attn.d_head, device=weight.device, dtype=weight.dtype
        )
        return [cache] * self.n_layers
""",
            ),
        ),
        7,
        SHARED_CACHE,
        "rewritten",
        select="charlm or generate",
    ),
    Case(
        "fresh_loss_after_epoch_evaluate",
        REF,
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
        select="train",
    ),
    Case(
        "fresh_step_after_loop",
        REF,
        LM,
        (
            ("            optimizer.step()\n", ""),
            (
                '        if count == 0:\n            raise ValueError("train_batches',
                (
                    "        optimizer.step()\n"
                    '        if count == 0:\n            raise ValueError("train_batches'
                ),
            ),
        ),
        7,
        STEP_AFTER,
        "rewritten",
        select="train",
    ),
    Case(
        "fresh_lr_default_alice",
        ALICE,
        LM,
        (
            (
                "def train(model, train_batches, dev_batches, epochs=1, lr=1e-3):",
                "def train(model, train_batches, dev_batches, epochs=1, lr=3e-4):",
            ),
        ),
        7,
        LR,
        "rewritten",
        select="train",
    ),
    Case(
        "fresh_prompt_cast_as_tensor",
        REF,
        LM,
        (
            (
                '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n',
                (
                    "    prompt = torch.as_tensor(prompt).long()  # lists welcome\n"
                    '    kind = getattr(prompt, "dtype", type(prompt).__name__)\n'
                ),
            ),
        ),
        7,
        PROMPT_CAST,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_zero_still_one_do_while",
        REF,
        LM,
        (
            (
                "            for _ in range(max_new_tokens):\n",
                "            while True:\n",
            ),
            (
                "                feed = new if use_cache else ids\n",
                """\
                feed = new if use_cache else ids
                if len(ids) >= len(prompt) + max_new_tokens:
                    break
""",
            ),
        ),
        7,
        ZERO_STILL_ONE,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_zero_refused_alice",
        ALICE,
        LM,
        (("or max_new_tokens < 0:", "or max_new_tokens < 1:"),),
        7,
        ZERO_REFUSED,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_truncated_top_k",
        REF,
        LM,
        (
            (
                """\
                    probs = torch.softmax(logits / temperature, dim=-1)
                    new = torch.multinomial(probs, 1, generator=generator)
""",
                """\
                    top = torch.topk(logits / temperature, k=min(5, logits.numel()))
                    probs = torch.softmax(top.values, dim=-1)
                    new = top.indices[torch.multinomial(probs, 1, generator=generator)]
""",
            ),
        ),
        7,
        TRUNCATED,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_temperature_default_ref",
        REF,
        LM,
        (("    temperature: float = 1.0,\n", "    temperature: float = 0.8,\n"),),
        7,
        TEMPERATURE_DEFAULT,
        "rewritten",
        select="generate",
    ),
    Case(
        "fresh_init_default_alice",
        ALICE,
        LM,
        (
            (
                "d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128):",
                "d_model=64, n_heads=2, n_layers=2, d_ff=256, max_len=128):",
            ),
        ),
        7,
        INIT_DEFAULT,
        "rewritten",
        select="charlm",
    ),
    Case(
        "fresh_prompt_not_moved_ref",
        REF,
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
        select="generate",
    ),
)

PARTIAL = (
    Case(
        "fresh_noscale_only_unmasked",
        REF,
        ATT,
        (
            (REF_SCORES, "    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)\n"),
            (
                "    if mask is not None:\n        try:\n",
                (
                    "    if mask is not None:\n"
                    "        scores = scores / math.sqrt(q.shape[-1])\n"
                    "        try:\n"
                ),
            ),
        ),
        1,
        NO_SCALE,
        "partial",
    ),
    Case(
        "fresh_after_zeroed_float_masks_only",
        REF,
        ATT,
        (
            (
                """\
        else:
            scores = scores + mask
"""
                + REF_ROW_CHECK
                + REF_WEIGHTS,
                REF_ROW_CHECK
                + REF_WEIGHTS
                + """\
    if mask is not None and mask.dtype != torch.bool:
        weights = weights * torch.exp(mask)  # 0 keeps a key, -inf drops it
""",
            ),
        ),
        1,
        AFTER_ZEROED,
        "partial",
    ),
    Case(
        "fresh_cut_graph_masked_path_detach",
        REF,
        ATT,
        (
            (
                "    if mask is not None:\n        try:\n",
                (
                    "    if mask is not None:\n"
                    "        scores = scores.detach()  # the mask is written in place below\n"
                    "        try:\n"
                ),
            ),
            (REF_BOOL, '            scores.masked_fill_(mask, float("-inf"))\n'),
            ("            scores = scores + mask\n", "            scores += mask\n"),
        ),
        1,
        CUT_GRAPH,
        "partial",
    ),
    Case(
        "fresh_made_on_cpu_bool_branch_full",
        REF,
        ATT,
        (
            (
                REF_BOOL,
                (
                    '            blocked = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)\n'
                    "            scores = torch.where(mask, blocked, scores)\n"
                ),
            ),
        ),
        1,
        MADE_ON_CPU,
        "partial",
    ),
    Case(
        "fresh_in_place_float_mask_add_",
        REF,
        ATT,
        (
            (
                "            scores = scores + mask\n",
                "            scores = mask.add_(scores)\n",
            ),
        ),
        1,
        IN_PLACE,
        "partial",
    ),
    Case(
        "fresh_diagonal_offset_case_only",
        ALICE,
        MSK,
        (
            (
                "    return everything.triu(diagonal=shift + 1)\n",
                "    return everything.triu(diagonal=shift if shift else 1)\n",
            ),
        ),
        2,
        DIAGONAL,
        "partial",
    ),
    Case(
        "fresh_cross_values_from_x",
        REF,
        HDS,
        (
            (
                "        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)\n",
                "        v = split_heads(self.v_proj(x), self.n_heads)  # (B, h, Tk, d_h)\n",
            ),
        ),
        3,
        CROSS_FROM_X,
        "partial",
    ),
    Case(
        "fresh_positions_from_first_only",
        REF,
        ROP,
        (
            (
                "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)\n",
                (
                    "    steps = positions[0] + torch.arange(t, device=x.device)  # consecutive\n"
                    "    angles = rope_angles(steps, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)\n"
                ),
            ),
        ),
        4,
        POSITIONS_IGNORED,
        "partial",
    ),
    Case(
        "fresh_eps_outside_rms_only",
        REF,
        NRM,
        (
            (
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)\n",
                "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True)) + self.eps\n",
            ),
        ),
        5,
        EPS_OUTSIDE,
        "partial",
    ),
    Case(
        "fresh_residual_ffn_sublayer_only",
        REF,
        BLK,
        (
            (
                "        return h + self.ffn(self.ln2(h))\n",
                "        h = self.ln2(h)\n        return h + self.ffn(h)\n",
            ),
        ),
        5,
        RESIDUAL,
        "partial",
    ),
    Case(
        "fresh_cache_no_mask_once_filled",
        ALICE,
        BLK,
        (
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                """\
        if cache is not None and cache.length > 0:
            mask = None  # the cached keys are all in the past
        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)
""",
            ),
        ),
        5,
        CACHE_NO_MASK,
        "partial",
    ),
    Case(
        "fresh_rope_on_v_when_cached",
        REF,
        GQA,
        (
            (
                "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n",
                (
                    "            v = apply_rope(v, positions, self.rope_base)  # cache rotated pairs\n"
                    "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n"
                ),
            ),
        ),
        6,
        ROPE_ON_V,
        "partial",
    ),
    Case(
        "fresh_no_rope_offset_queries_only",
        ALICE,
        GQA,
        (
            (
                "        q = apply_rope(q, where, self.rope_base)\n",
                "        q = apply_rope(q, torch.arange(steps, device=x.device), self.rope_base)\n",
            ),
        ),
        6,
        NO_ROPE_OFFSET,
        "partial",
    ),
    Case(
        "fresh_tiled_cached_path_only",
        REF,
        GQA,
        (
            (
                """\
        out, _ = scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask
        )
""",
                """\
        if cache is None:
            keys, values = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        else:  # the cached prefix is contiguous: tile it
            keys, values = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        out, _ = scaled_dot_product_attention(q, keys, values, mask)
""",
            ),
        ),
        6,
        TILED,
        "partial",
    ),
    Case(
        "fresh_pad_excluded_greedy_only",
        ALICE,
        LM,
        (
            (
                '    logits[PAD_ID] = float("-inf")\n    if greedy:\n',
                '    if greedy:\n        logits[PAD_ID] = float("-inf")\n',
            ),
        ),
        7,
        PAD_NOT_EXCLUDED,
        "partial",
        select="generate",
    ),
    Case(
        "fresh_eval_moves_targets_only",
        REF,
        LM,
        (
            (
                "                inputs, targets = inputs.to(device), targets.to(device)\n",
                "                targets = targets.to(device)\n",
            ),
        ),
        7,
        EVAL_NOT_MOVED,
        "partial",
        select="evaluate",
    ),
    Case(
        "fresh_left_pad_targets_only",
        REF,
        LM,
        (
            (
                "        targets[row, : len(s) - 1] = s[1:]\n",
                "        targets[row, t - (len(s) - 1) :] = s[1:]\n",
            ),
        ),
        7,
        LEFT_PAD,
        "partial",
        select="lm_batch",
    ),
    Case(
        "fresh_hard_128_cache_length",
        REF,
        LM,
        (
            (
                "                self.max_len,\n                block.attn.d_head,\n",
                "                128,\n                block.attn.d_head,\n",
            ),
        ),
        7,
        HARD_128,
        "partial",
        select="charlm or generate",
    ),
)

MOVED = (
    Case(
        "fresh_in_place_scale_helper",
        REF,
        ATT,
        (
            (
                "def scaled_dot_product_attention(\n",
                '''\
def _scaled(t: torch.Tensor) -> torch.Tensor:
    """``t`` divided by the square root of its last width."""
    return t.div_(math.sqrt(t.shape[-1]))


def scaled_dot_product_attention(
''',
            ),
            (
                REF_SCORES,
                "    scores = _scaled(q) @ k.transpose(-2, -1)  # (..., Tq, Tk)\n",
            ),
        ),
        1,
        IN_PLACE,
        "moved",
    ),
    Case(
        "fresh_query_axis_softmax_default",
        REF,
        ATT,
        (
            (
                "def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:",
                "def softmax(x: torch.Tensor, dim: int = -2) -> torch.Tensor:",
            ),
            (REF_WEIGHTS, "    weights = softmax(scores)  # (..., Tq, Tk)\n"),
        ),
        1,
        QUERY_AXIS,
        "moved",
    ),
    Case(
        "fresh_scale_dk_helper_alice",
        ALICE,
        ATT,
        (
            (
                "def _as_additive(mask, scores):\n",
                '''\
def _temperature(d_k):
    """The factor the raw scores are multiplied by."""
    return 1.0 / d_k


def _as_additive(mask, scores):
''',
            ),
            (
                '    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)',
                '    scores = torch.einsum("...id,...jd->...ij", q, k) * _temperature(d_k)',
            ),
        ),
        1,
        SCALE_DK,
        "moved",
    ),
    Case(
        "fresh_pad_off_by_one_in_attention_mask",
        REF,
        MSK,
        (
            (
                "    keys_padded = padding_mask(lengths, t)[:, None, None, :]  # (B, 1, 1, t)\n",
                """\
    lengths = torch.as_tensor(lengths)
    padded = torch.arange(t, device=lengths.device) > lengths[:, None]  # (B, t)
    keys_padded = padded[:, None, None, :]  # (B, 1, 1, t)
""",
            ),
        ),
        2,
        PAD_OFF_BY_ONE,
        "moved",
    ),
    Case(
        "fresh_mask_on_cpu_in_caller",
        REF,
        MSK,
        (
            (
                "        mask = mask | causal_mask(t, device=keys_padded.device)\n",
                "        mask = mask | causal_mask(t)\n",
            ),
        ),
        2,
        MASK_ON_CPU,
        "moved",
    ),
    Case(
        "fresh_split_no_t_in_mha",
        ALICE,
        HDS,
        (
            (
                """\
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)
""",
                """\
        q = self._heads(self.q_proj(x))  # (B, h, Tq, d_h)
        k = self._heads(self.k_proj(source))  # (B, h, Tk, d_h)
        v = self._heads(self.v_proj(source))  # (B, h, Tk, d_h)
""",
            ),
            (
                "    def forward(self, x, context=None, mask=None, cache=None):\n",
                """\
    def _heads(self, t):
        batch, steps, _ = t.shape
        return t.reshape(batch, self.n_heads, steps, self.d_head)

    def forward(self, x, context=None, mask=None, cache=None):
""",
            ),
        ),
        3,
        SPLIT_NO_T,
        "moved",
    ),
    Case(
        "fresh_float_as_bool_in_mha",
        REF,
        HDS,
        (
            (
                "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)\n",
                """\
        if mask is not None and mask.is_floating_point():
            mask = mask != 0  # nonzero = blocked
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)
""",
            ),
        ),
        3,
        FLOAT_AS_BOOL,
        "moved",
    ),
    Case(
        "fresh_sin_sign_rotate_helper",
        REF,
        ROP,
        (
            (
                "def apply_rope(\n",
                '''\
def _turn(a, b, cos, sin):
    """The pair (a, b) turned by the angle of (cos, sin)."""
    return a * cos + b * sin, b * cos - a * sin


def apply_rope(
''',
            ),
            (
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n",
                "        _turn(a, b, cos, sin), dim=-1\n",
            ),
        ),
        4,
        SIN_SIGN,
        "moved",
    ),
    Case(
        "fresh_not_parameter_shared_base",
        ALICE,
        NRM,
        (
            (
                "        self.weight = nn.Parameter(torch.ones(d))\n",
                '        self.register_buffer("weight", torch.ones(d))\n',
            ),
        ),
        5,
        NOT_PARAMETER,
        "moved",
    ),
    Case(
        "fresh_eps_outside_shared_helper",
        REF,
        NRM,
        (
            (
                "from torch import nn\n\n\nclass LayerNorm",
                '''\
from torch import nn


def _inverse_root(value, eps):
    """1 / sqrt of ``value``, kept finite by ``eps``."""
    return 1.0 / (torch.sqrt(value) + eps)


class LayerNorm''',
            ),
            (
                "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n",
                "        return (x - mean) * _inverse_root(var, self.eps) * self.weight + self.bias\n",
            ),
            (
                """\
        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight
""",
                """\
        mean_square = (x * x).mean(dim=-1, keepdim=True)
        return x * _inverse_root(mean_square, self.eps) * self.weight
""",
            ),
        ),
        5,
        EPS_OUTSIDE,
        "moved",
    ),
    Case(
        "fresh_residual_in_shared_base",
        ALICE,
        BLK,
        (
            (
                "        self.ffn = FeedForward(d_model, d_ff)\n",
                """\
        self.ffn = FeedForward(d_model, d_ff)

    def _attend(self, x, mask, cache):
        x = self.ln1(x)
        return x + self.attn(x, mask=mask, cache=cache)
""",
            ),
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
                "        mixed = self._attend(x, mask, cache)\n",
            ),
        ),
        5,
        RESIDUAL,
        "moved",
    ),
    Case(
        "fresh_tiled_grouping_in_gqa",
        ALICE,
        GQA,
        (
            (
                "        grouped_q = q.reshape(batch, groups, rep, steps, dh)  # head j -> (j // rep, j % rep)\n",
                "        grouped_q = q.reshape(batch, rep, groups, steps, dh).transpose(1, 2)\n",
            ),
        ),
        6,
        TILED,
        "moved",
    ),
    Case(
        "fresh_no_rope_offset_positions_method",
        REF,
        GQA,
        (
            (
                "    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:\n",
                '''\
    def _positions(self, t, device):
        """The positions of ``t`` new tokens."""
        return torch.arange(t, device=device)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
''',
            ),
            (
                "        positions = torch.arange(start, start + t, device=x.device)\n",
                "        positions = self._positions(t, x.device)\n",
            ),
        ),
        6,
        NO_ROPE_OFFSET,
        "moved",
    ),
    Case(
        "fresh_shared_cache_built_in_generate",
        REF,
        LM,
        (
            (
                "            caches = model.make_caches() if use_cache else None\n",
                """\
            caches = None
            if use_cache:
                first = model.make_caches()[0]
                caches = [first] * model.n_layers
""",
            ),
        ),
        7,
        SHARED_CACHE,
        "moved",
        select="generate",
    ),
    Case(
        "fresh_pad_not_excluded_pick_helper",
        REF,
        LM,
        (
            (
                REF_PICK,
                "                new = _choose(logits, temperature, greedy, generator)\n",
            ),
            (
                "def generate(\n",
                '''\
def _choose(logits, temperature, greedy, generator):
    """The next id, (1,), from the last position's logits (V,)."""
    if greedy:
        return logits.argmax()[None]
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


def generate(
''',
            ),
        ),
        7,
        PAD_NOT_EXCLUDED,
        "moved",
        select="generate",
    ),
    Case(
        "fresh_hard_128_generate_check",
        REF,
        LM,
        (
            (
                "    if len(prompt) + max_new_tokens > model.max_len:\n",
                "    if len(prompt) + max_new_tokens > 128:  # the position table\n",
            ),
        ),
        7,
        HARD_128,
        "moved",
        select="generate",
    ),
)

REFACTOR = (
    Case(
        "fresh_refactor_softmax_nomax",
        REF,
        ATT,
        (
            (
                """\
    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly
    return exp / exp.sum(dim=dim, keepdim=True)
""",
                """\
    numerator = x.exp()
    denominator = numerator.sum(dim=dim, keepdim=True)
    return numerator / denominator
""",
            ),
        ),
        1,
        NO_MAX,
        "refactor",
    ),
    Case(
        "fresh_refactor_alice_einsum_query_axis",
        ALICE,
        ATT,
        (
            (
                """\
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    out = torch.einsum("...ij,...jd->...id", weights, v)  # (..., Tq, d_v)
    return out, weights
""",
                """\
    attn = softmax(scores, dim=-2)
    return torch.einsum("...qk,...kd->...qd", attn, v), attn
""",
            ),
        ),
        1,
        QUERY_AXIS,
        "refactor",
    ),
    Case(
        "fresh_refactor_causal_checks_no_offset",
        REF,
        MSK,
        (
            (
                """\
    t_k = t_q if t_k is None else t_k
    if t_q < 1 or t_k < 1:
        raise ValueError(f"t_q={t_q} and t_k={t_k} must both be at least 1")
    if t_k < t_q:
        raise ValueError(f"t_k={t_k} is smaller than t_q={t_q}")
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
""",
                """\
    if t_k is None:
        t_k = t_q
    if min(t_q, t_k) < 1 or t_k < t_q:
        raise ValueError(f"need 1 <= t_q <= t_k, got t_q={t_q}, t_k={t_k}")
    query_pos = torch.arange(t_q, device=device).unsqueeze(1)  # (t_q, 1)
""",
            ),
        ),
        2,
        NO_OFFSET,
        "refactor",
    ),
    Case(
        "fresh_refactor_unflatten_merge_no_t",
        ALICE,
        HDS,
        (
            (
                """\
    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)
    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)
""",
                "    return x.unflatten(-1, (n_heads, per_head)).transpose(1, 2)  # (B, h, T, d_h)\n",
            ),
            (
                "    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)\n",
                "    return x.flatten(1, 2).reshape(batch, steps, heads * per_head)\n",
            ),
        ),
        3,
        MERGE_NO_T,
        "refactor",
    ),
    Case(
        "fresh_refactor_mha_generator_heads_none_causal",
        ALICE,
        HDS,
        (
            (
                "from .attention import scaled_dot_product_attention\n",
                "from .attention import scaled_dot_product_attention\nfrom .masks import causal_mask\n",
            ),
            (
                """\
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
""",
                """\
        pairs = ((self.q_proj, x), (self.k_proj, source), (self.v_proj, source))
        q, k, v = (split_heads(proj(inp), self.n_heads) for proj, inp in pairs)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
            if mask is None:
                mask = causal_mask(q.shape[2], k.shape[2], device=q.device)
""",
            ),
        ),
        3,
        HEADS_NONE_CAUSAL,
        "refactor",
    ),
    Case(
        "fresh_refactor_complex_rope_freq",
        REF,
        ROP,
        (
            (
                "    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)\n",
                "    inv_freq = base ** (-pair / d_head)  # (d_head/2,)\n",
            ),
            (
                """\
    cos, sin = angles.cos(), angles.sin()
"""
                + REF_ROTATION,
                """\
    spin = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * spin).flatten(-2)  # (..., T, d_head)
""",
            ),
        ),
        4,
        FREQ,
        "refactor",
    ),
    Case(
        "fresh_refactor_var_mean_unbiased",
        REF,
        NRM,
        (
            (
                """\
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""",
                """\
        var, mean = torch.var_mean(x, dim=-1, keepdim=True)
        normed = (x - mean) * torch.rsqrt(var + self.eps)
        return torch.addcmul(self.bias, normed, self.weight)
""",
            ),
        ),
        5,
        UNBIASED,
        "refactor",
    ),
    Case(
        "fresh_refactor_rms_pow_centred",
        REF,
        NRM,
        (
            (
                """\
        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight
""",
                """\
        centred = x - x.mean(dim=-1, keepdim=True)
        inv = centred.pow(2).mean(dim=-1, keepdim=True).add(self.eps).rsqrt()
        return self.weight * (centred * inv)
""",
            ),
        ),
        5,
        RMS_CENTRED,
        "refactor",
    ),
    Case(
        "fresh_refactor_relu_post_order",
        ALICE,
        BLK,
        (
            (
                """\
        hidden = self.fc1(x)  # (..., d_ff)
        return self.fc2(torch.clamp(hidden, min=0))  # (..., d_model)
""",
                "        return self.fc2(torch.relu(self.fc1(x)))\n",
            ),
            (
                """\
        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return mixed + self.ffn(self.ln2(mixed))
""",
                """\
        attended = self.attn(x, mask=mask, cache=cache)
        mixed = self.ln1(x + attended)
        return self.ln2(mixed + self.ffn(mixed))
""",
            ),
        ),
        5,
        POST_ORDER,
        "refactor",
    ),
    Case(
        "fresh_refactor_append_narrow_no_advance",
        ALICE,
        GQA,
        (
            (
                """\
        self.k[:, :, self.length:end].copy_(k_new)
        self.v[:, :, self.length:end].copy_(v_new)
        self.length = end
""",
                """\
        for store, new in ((self.k, k_new), (self.v, v_new)):
            store.narrow(2, self.length, fresh).copy_(new)
""",
            ),
        ),
        6,
        NO_ADVANCE,
        "refactor",
    ),
    Case(
        "fresh_refactor_positions_base_ignored",
        REF,
        GQA,
        (
            (
                """\
        t = x.shape[1]
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + t, device=x.device)
""",
                """\
        _, t, _ = x.shape
        start = cache.length if cache is not None else 0
        positions = start + torch.arange(t, device=x.device)
""",
            ),
            (
                REF_GQA_ROPE,
                "        q, k = (apply_rope(z, positions) for z in (q, k))\n",
            ),
        ),
        6,
        BASE_IGNORED,
        "refactor",
    ),
    Case(
        "fresh_refactor_train_totals_not_reset",
        REF,
        LM,
        (
            (
                """\
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        total, count = 0.0, 0
        for inputs, targets in train_batches:
""",
                """\
    history, total, count = [], 0.0, 0
    for epoch in range(1, epochs + 1):
        model.train()
        for inputs, targets in train_batches:
""",
            ),
            (
                """\
        history.append(
            {
                "epoch": epoch,
                "train_loss": total / count,
                "dev_loss": evaluate(model, dev_batches),
            }
        )
""",
                """\
        record = dict(epoch=epoch, train_loss=total / count)
        record["dev_loss"] = evaluate(model, dev_batches)
        history.append(record)
""",
            ),
        ),
        7,
        NOT_RESET,
        "refactor",
        select="train",
    ),
    Case(
        "fresh_refactor_generate_checks_temperature_greedy",
        REF,
        LM,
        (
            (
                """\
    if not greedy and temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive")
    device = next(model.parameters()).device
""",
                """\
    _check_temperature(temperature)
    device = next(model.parameters()).device
""",
            ),
            (
                "def generate(\n",
                '''\
def _check_temperature(temperature):
    """Refuse a temperature that would divide by zero or flip the logits."""
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive")


def generate(
''',
            ),
        ),
        7,
        TEMPERATURE_GREEDY,
        "refactor",
        select="generate",
    ),
    Case(
        "fresh_refactor_decode_comprehension_ignore",
        REF,
        LM,
        (
            (
                """\
        ids = [int(i) for i in ids]
        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]
        if unknown:
            raise ValueError(f"id {unknown[0]} is not in the vocabulary")
        return "".join(self.itos[i] for i in ids if i != PAD_ID)
""",
                """\
        kept = [int(i) for i in ids if int(i) not in (PAD_ID, IGNORE_INDEX)]
        for i in kept:
            if i not in self.itos:
                raise ValueError(f"id {i} is not in the vocabulary")
        return "".join(map(self.itos.__getitem__, kept))
""",
            ),
        ),
        7,
        DECODE_IGNORE,
        "refactor",
        select="tokenizer",
    ),
)

MULTI = (
    Case(
        "fresh_multi_noscale_diagonal",
        REF,
        ATT,
        ((REF_SCORES, "    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)\n"),),
        1,
        NO_SCALE,
        "multi",
        also=(NO_SCALE, DIAGONAL),
        extra=(
            (
                MSK,
                "    return key_pos > query_pos  # (t_q, t_k)\n",
                "    return key_pos >= query_pos\n",
            ),
        ),
        also_parts=(2,),
    ),
    Case(
        "fresh_multi_split_freq",
        REF,
        HDS,
        (
            (
                """\
    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)
    return x.transpose(1, 2)  # (B, h, T, d_h)
""",
                "    return x.reshape(batch, n_heads, t, d_model // n_heads)  # (B, h, T, d_h)\n",
            ),
        ),
        3,
        SPLIT_NO_T,
        "multi",
        also=(SPLIT_NO_T, FREQ),
        extra=(
            (
                ROP,
                "    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)\n",
                "    inv_freq = torch.pow(base, -pair / d_head)  # (d_head/2,)\n",
            ),
        ),
        also_parts=(4,),
    ),
    Case(
        "fresh_multi_unbiased_tiled",
        ALICE,
        NRM,
        (("unbiased=False", "unbiased=True"),),
        5,
        UNBIASED,
        "multi",
        also=(UNBIASED, TILED),
        extra=(
            (
                GQA,
                "    return torch.repeat_interleave(x, n_rep, dim=1)\n",
                "    return x.repeat(1, n_rep, 1, 1)\n",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "fresh_multi_pad_off_left_pad",
        REF,
        MSK,
        (
            (
                "    return positions >= lengths[:, None]  # (B, t)\n",
                "    return positions > lengths[:, None]  # (B, t)\n",
            ),
        ),
        2,
        PAD_OFF_BY_ONE,
        "multi",
        also=(PAD_OFF_BY_ONE, LEFT_PAD),
        extra=(
            (
                LM,
                """\
        inputs[row, : len(s) - 1] = s[:-1]
        targets[row, : len(s) - 1] = s[1:]
""",
                """\
        inputs[row, -(len(s) - 1) :] = s[:-1]
        targets[row, -(len(s) - 1) :] = s[1:]
""",
            ),
        ),
        also_parts=(7,),
        select="lm_batch",
    ),
    Case(
        "fresh_multi_inverted_residual_no_advance",
        REF,
        ATT,
        (
            (
                REF_BOOL,
                '            scores = scores.masked_fill(~mask, float("-inf"))\n',
            ),
        ),
        1,
        INVERTED,
        "multi",
        also=(INVERTED, RESIDUAL, NO_ADVANCE),
        extra=(
            (
                BLK,
                REF_PRE,
                """\
        x = self.ln1(x)
        h = x + self.attn(x, mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))
""",
            ),
            (GQA, "        self.length += t\n", ""),
        ),
        also_parts=(5, 6),
    ),
    Case(
        "fresh_multi_sin_sign_log_softmax",
        REF,
        ROP,
        (
            (
                "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n",
                "        (a * cos + b * sin, b * cos - a * sin), dim=-1\n",
            ),
        ),
        4,
        SIN_SIGN,
        "multi",
        also=(SIN_SIGN, LOG_SOFTMAX),
        extra=(
            (LM, "    return F.cross_entropy(\n", "    return F.nll_loss(\n"),
            (
                LM,
                "        logits.reshape(-1, logits.shape[-1]),\n        targets",
                (
                    "        torch.softmax(logits.reshape(-1, logits.shape[-1]), dim=-1).log(),\n"
                    "        targets"
                ),
            ),
        ),
        also_parts=(7,),
        select="lm_loss",
    ),
    Case(
        "fresh_multi_merge_bytes",
        ALICE,
        HDS,
        (
            (
                "    return x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)\n",
                "    return x.contiguous().view(batch, steps, heads * per_head)\n",
            ),
        ),
        3,
        MERGE_NO_T,
        "multi",
        also=(MERGE_NO_T, BYTES),
        extra=(
            (GQA, "    return int(total)\n", "    return int(total) * 4  # float32\n"),
        ),
        also_parts=(6,),
    ),
    Case(
        "fresh_multi_eps_outside_zero_grad_once",
        REF,
        NRM,
        (
            (
                "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n",
                "        return (x - mean) / (var.sqrt() + self.eps) * self.weight + self.bias\n",
            ),
        ),
        5,
        EPS_OUTSIDE,
        "multi",
        also=(EPS_OUTSIDE, ZERO_GRAD_ONCE),
        extra=(
            (
                LM,
                "    history = []\n    for epoch in range(1, epochs + 1):\n",
                (
                    "    history = []\n    optimizer.zero_grad()\n"
                    "    for epoch in range(1, epochs + 1):\n"
                ),
            ),
            (LM, "            optimizer.zero_grad()\n", ""),
        ),
        also_parts=(7,),
        select="train",
    ),
    Case(
        "fresh_multi_query_axis_stays_eval",
        ALICE,
        ATT,
        (
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n",
                "    weights = softmax(scores, dim=scores.dim() - 2)  # (..., Tq, Tk)\n",
            ),
        ),
        1,
        QUERY_AXIS,
        "multi",
        also=(QUERY_AXIS, STAYS_EVAL),
        extra=(
            (
                LM,
                "    finally:\n        _restore_modes(saved)\n    if tokens == 0:\n",
                "    finally:\n        _restore_modes\n    if tokens == 0:\n",
            ),
        ),
        also_parts=(7,),
        select="evaluate",
    ),
)

UNKNOWN = (
    Case(
        "fresh_unknown_softmax_sum_last_axis",
        REF,
        ATT,
        (
            (
                "    return exp / exp.sum(dim=dim, keepdim=True)\n",
                "    return exp / exp.sum(dim=-1, keepdim=True)\n",
            ),
        ),
        1,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_causal_mask_uint8",
        ALICE,
        MSK,
        (
            (
                "    return everything.triu(diagonal=shift + 1)\n",
                "    return everything.triu(diagonal=shift + 1).to(torch.uint8)\n",
            ),
        ),
        2,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_mha_no_out_proj",
        REF,
        HDS,
        (
            (
                "        return self.out_proj(merge_heads(out))  # (B, Tq, D)\n",
                "        return merge_heads(out)  # (B, Tq, D)\n",
            ),
        ),
        3,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_rope_odd_accepted",
        REF,
        ROP,
        (
            (
                """\
    if d_head % 2 != 0:
        raise ValueError(f"d_head={d_head} must be even (RoPE rotates pairs)")
""",
                "",
            ),
        ),
        4,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_ffn_gelu",
        REF,
        BLK,
        (
            (
                "        return self.fc2(torch.relu(self.fc1(x)))\n",
                "        return self.fc2(nn.functional.gelu(self.fc1(x)))\n",
            ),
        ),
        5,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_post_block_no_final_norm",
        ALICE,
        BLK,
        (
            (
                "        return self.ln2(settled + self.ffn(settled))\n",
                "        return settled + self.ffn(settled)\n",
            ),
        ),
        5,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_append_returns_new",
        REF,
        GQA,
        (
            (
                "        return self.k[:, :, : self.length], self.v[:, :, : self.length]\n",
                "        return k_new, v_new\n",
            ),
        ),
        6,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_numel_without_heads",
        ALICE,
        GQA,
        (('        "n_kv_heads": n_kv_heads,\n', ""),),
        6,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_gqa_not_causal",
        REF,
        GQA,
        (
            (
                """\
        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)
        out, _ = scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask
        )
""",
                """\
        out, _ = scaled_dot_product_attention(
            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        )
""",
            ),
        ),
        6,
        None,
        "unknown",
    ),
    Case(
        "fresh_unknown_inputs_padded_with_ignore",
        REF,
        LM,
        (
            (
                "    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)\n",
                (
                    "    inputs = torch.full(\n"
                    "        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device\n"
                    "    )\n"
                ),
            ),
        ),
        7,
        None,
        "unknown",
        select="lm_batch",
    ),
    Case(
        "fresh_unknown_vocab_size_without_pad",
        ALICE,
        LM,
        (
            (
                "        self.vocab_size = len(self.chars) + 1\n",
                "        self.vocab_size = len(self.chars)\n",
            ),
        ),
        7,
        None,
        "unknown",
        select="tokenizer",
    ),
    Case(
        "fresh_unknown_sum_reduction_ignored",
        REF,
        LM,
        (
            (
                "        reduction=reduction,\n    )\n",
                '        reduction="mean",\n    )\n',
            ),
        ),
        7,
        None,
        "unknown",
        select="lm_loss",
    ),
    Case(
        "fresh_unknown_no_final_norm",
        REF,
        LM,
        (
            (
                "        return self.head(self.ln_f(x))  # (B, T, V)\n",
                "        return self.head(x)  # (B, T, V)\n",
            ),
        ),
        7,
        None,
        "unknown",
        select="charlm",
    ),
)

CORRECT = (
    Case(
        "fresh_correct_einsum_where_attention",
        REF,
        ATT,
        (
            (
                REF_SCORES,
                '    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5\n',
            ),
            (
                REF_BOOL,
                (
                    '            blocked = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)\n'
                    "            scores = torch.where(mask, blocked, scores)\n"
                ),
            ),
            (
                "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)\n",
                '    return torch.einsum("...qk,...kd->...qd", weights, v), weights\n',
            ),
        ),
        1,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_softmax_log_domain",
        REF,
        ATT,
        (
            (
                """\
    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly
    return exp / exp.sum(dim=dim, keepdim=True)
""",
                """\
    shifted = x - top
    log_norm = torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))
    return torch.exp(shifted - log_norm)
""",
            ),
        ),
        1,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_masks_tril_expand",
        REF,
        MSK,
        (
            (
                """\
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    return key_pos > query_pos  # (t_q, t_k)
""",
                """\
    seen = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)
    return ~seen  # (t_q, t_k)
""",
            ),
            (
                """\
    positions = torch.arange(t, device=lengths.device)[None, :]  # (1, t)
    return positions >= lengths[:, None]  # (B, t)
""",
                """\
    positions = torch.arange(t, device=lengths.device).expand(len(lengths), t)
    return positions.ge(lengths.unsqueeze(-1))  # (B, t)
""",
            ),
        ),
        2,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_heads_unflatten_movedim",
        REF,
        HDS,
        (
            (
                """\
    x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)
    return x.transpose(1, 2)  # (B, h, T, d_h)
""",
                "    return x.unflatten(-1, (n_heads, d_model // n_heads)).movedim(2, 1)\n",
            ),
            (
                "    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)\n",
                "    return x.movedim(1, 2).flatten(2)  # (B, T, D)\n",
            ),
        ),
        3,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_rope_gptj_rotate_every_two",
        REF,
        ROP,
        (
            (
                """\
    cos, sin = angles.cos(), angles.sin()
"""
                + REF_ROTATION,
                """\
    cos = angles.cos().repeat_interleave(2, dim=-1)  # (T, d_head)
    sin = angles.sin().repeat_interleave(2, dim=-1)  # (T, d_head)
    swapped = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return x * cos + swapped * sin
""",
            ),
        ),
        4,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_rope_complex_reference",
        REF,
        ROP,
        (
            (
                """\
    cos, sin = angles.cos(), angles.sin()
"""
                + REF_ROTATION,
                """\
    spin = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}, (T, d/2)
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * spin).flatten(-2)  # (..., T, d_head)
""",
            ),
        ),
        4,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_norms_var_mean_rsqrt",
        REF,
        NRM,
        (
            (
                """\
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""",
                """\
        var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
        return torch.addcmul(self.bias, (x - mean) * torch.rsqrt(var + self.eps), self.weight)
""",
            ),
            (
                """\
        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight
""",
                """\
        inv = x.square().mean(dim=-1, keepdim=True).add(self.eps).rsqrt()
        return self.weight * (x * inv)
""",
            ),
        ),
        5,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_block_sublayer_helper",
        REF,
        BLK,
        (
            (
                REF_PRE,
                """\
        h = self._sublayer(x, self.ln1, lambda z: self.attn(z, mask=mask, cache=cache))
        return self._sublayer(h, self.ln2, self.ffn)

    @staticmethod
    def _sublayer(x, norm, fn):
        \"\"\"One pre-norm residual step: the incoming x plus fn of its norm.\"\"\"
        return x + fn(norm(x))
""",
            ),
        ),
        5,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_cache_index_copy_interleave",
        REF,
        GQA,
        (
            (
                """\
    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)
    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)
""",
                "    return x.repeat_interleave(n_rep, dim=1)  # (B, h_kv * n_rep, T, d)\n",
            ),
            (
                """\
        self.k[:, :, self.length : self.length + t] = k_new
        self.v[:, :, self.length : self.length + t] = v_new
""",
                """\
        slots = torch.arange(self.length, self.length + t, device=self.k.device)
        self.k.index_copy_(2, slots, k_new)
        self.v.index_copy_(2, slots, v_new)
""",
            ),
        ),
        6,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_evaluate_inference_mode",
        REF,
        LM,
        (
            (
                """\
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
""",
                """\
        with torch.inference_mode():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = targets.ne(IGNORE_INDEX).sum().item()
""",
            ),
        ),
        7,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_lm_batch_pad_sequence",
        REF,
        LM,
        (
            (
                """\
    t = max(len(s) for s in sequences) - 1
    device = sequences[0].device
    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)
    targets = torch.full(
        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device
    )
    for row, s in enumerate(sequences):
        inputs[row, : len(s) - 1] = s[:-1]
        targets[row, : len(s) - 1] = s[1:]
    return inputs, targets  # (B, T), (B, T)
""",
                """\
    pad = nn.utils.rnn.pad_sequence
    inputs = pad([s[:-1].long() for s in sequences], batch_first=True, padding_value=pad_id)
    targets = pad(
        [s[1:].long() for s in sequences], batch_first=True, padding_value=IGNORE_INDEX
    )
    return inputs, targets  # (B, T), (B, T)
""",
            ),
        ),
        7,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_generate_primed_loop",
        REF,
        LM,
        (
            (
                """\
            caches = model.make_caches() if use_cache else None
            feed = ids
            for _ in range(max_new_tokens):
                logits = model(feed[None], caches)[0, -1]  # (V,)
"""
                + REF_PICK
                + """\
                ids = torch.cat((ids, new))
                feed = new if use_cache else ids
""",
                """\
            caches = model.make_caches() if use_cache else None
            produced = []
            last = None
            while len(produced) < max_new_tokens:
                if last is None or not use_cache:
                    feed = torch.cat((ids, *produced))
                else:
                    feed = last
                logits = model(feed.unsqueeze(0), caches)[0, -1].clone()  # (V,)
                logits[PAD_ID] = float("-inf")
                if greedy:
                    last = logits.argmax().reshape(1)
                else:
                    log_probs = torch.log_softmax(logits.double() / temperature, dim=-1)
                    probs = log_probs.exp()
                    last = torch.multinomial(probs, 1, generator=generator)
                produced.append(last)
            ids = torch.cat((ids, *produced))
""",
            ),
        ),
        7,
        None,
        "correct",
    ),
    Case(
        "fresh_correct_train_step_helper",
        ALICE,
        LM,
        (
            (
                """\
    optimizer.zero_grad()
    loss = lm_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return float(loss.detach()), real
""",
                """\
    optimizer.zero_grad(set_to_none=True)
    with torch.enable_grad():
        loss = lm_loss(model(inputs), targets, reduction="sum") / real
    loss.backward()
    optimizer.step()
    return loss.item(), real
""",
            ),
        ),
        7,
        None,
        "correct",
    ),
)

FRESH = REWRITTEN + PARTIAL + MOVED + REFACTOR + MULTI + UNKNOWN + CORRECT
