"""The fifth held-out set: wrong (and a few correct) submissions written blind.

Written without sight of the grader's mistake catalogue, its diagnosis code or its graded tests:
only SPEC.md, the reference solution, Alice's solution and the descriptions as the grader words
them. Each case is a base package with exact text edits (see ``mistakes.Case``).

It is a measure only: never tune the grader on it (nor read its cases while changing diagnosis).
Check that every case behaves as declared, printing pass and fail only:

    .venv/bin/python -m tests.engine.heldout.check_heldout --set fifth --blind [NAME ...]
"""

from tests.engine.heldout.mistakes import Case

D = {
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

REF, ALICE = "reference", "alice"


def _case(name, base, file, edits, part, n, kind, also=(), extra=(), also_parts=()):
    """A case whose expected description is ``D[n]`` (``n`` None: unknown or correct);
    ``also`` lists the description numbers of a multi case, the first one ``n``."""
    return Case(
        name=name,
        base=base,
        file=file,
        edits=tuple(edits),
        part=part,
        expected=None if n is None else D[n],
        kind=kind,
        also=tuple(D[i] for i in also),
        extra=tuple(extra),
        also_parts=tuple(also_parts),
    )


CASES = []

# ---------------------------------------------------------------- part 1: attention.py

REF_SCORES = (
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Tq, Tk)"
)
REF_MASK_BLOCK = """\
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
    if torch.isneginf(scores).all(dim=-1).any():
        raise ValueError("mask prohibits every key for at least one query row")
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
"""
REF_SOFTMAX_TAIL = """\
    exp = torch.exp(x - top)  # -inf - top = -inf, and exp(-inf) = 0 exactly
    return exp / exp.sum(dim=dim, keepdim=True)
"""
ALICE_SCORES = """\
    d_k = q.shape[-1]
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)
"""
ALICE_APPLY_MASK = """\
    if mask is not None:
        scores = _as_additive(mask, scores)
        blocked = (scores == _NEG_INF).all(dim=-1)
        if bool(blocked.any()):
            raise ValueError(
                f"mask (shape {tuple(mask.shape)}) prohibits every key for "
                f"{int(blocked.sum())} query row(s); each query needs a permitted key"
            )
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
"""

CASES += [
    _case(
        "p1_renormalize_after_softmax",
        REF,
        "attention.py",
        [
            (
                REF_MASK_BLOCK,
                """\
        if mask.dtype == torch.bool:
            allowed = ~mask
        else:
            scores = scores + mask
            allowed = ~torch.isneginf(scores)
        if not allowed.any(dim=-1).all():
            raise ValueError("mask prohibits every key for at least one query row")
        weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
        weights = weights * allowed  # drop the prohibited keys
        weights = weights / weights.sum(dim=-1, keepdim=True)
    else:
        weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
""",
            )
        ],
        1,
        1,
        "rewritten",
    ),
    _case(
        "p1_bool_mask_zeroes_weights",
        ALICE,
        "attention.py",
        [
            (
                ALICE_APPLY_MASK,
                """\
    banned = None
    if mask is not None:
        if mask.dtype == torch.bool:
            _as_additive(mask, scores)  # checks that the mask broadcasts
            banned = mask.to(scores.device)
            blocked = torch.broadcast_to(banned, scores.shape).all(dim=-1)
        else:
            scores = _as_additive(mask, scores)
            blocked = (scores == _NEG_INF).all(dim=-1)
        if bool(blocked.any()):
            raise ValueError(
                f"mask (shape {tuple(mask.shape)}) prohibits every key for "
                f"{int(blocked.sum())} query row(s); each query needs a permitted key"
            )
    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)
    if banned is not None:
        weights = torch.where(banned, torch.zeros_like(weights), weights)
""",
            )
        ],
        1,
        2,
        "partial",
    ),
    _case(
        "p1_prescaled_query_by_dk",
        ALICE,
        "attention.py",
        [
            (
                ALICE_SCORES,
                """\
    inv_scale = 1.0 / q.shape[-1]
    scaled_q = q * inv_scale
    scores = torch.einsum("...id,...jd->...ij", scaled_q, k)  # (..., Tq, Tk)
""",
            )
        ],
        1,
        4,
        "refactor",
    ),
    _case(
        "p1_weights_helper_wrong_axis",
        REF,
        "attention.py",
        [
            (
                "def scaled_dot_product_attention(",
                """\
def _attention_weights(scores):
    # normalize each query's scores into a distribution
    return softmax(scores, dim=-2)


def scaled_dot_product_attention(""",
            ),
            (
                "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
                "    weights = _attention_weights(scores)  # (..., Tq, Tk)",
            ),
        ],
        1,
        6,
        "moved",
    ),
    _case(
        "p1_no_shift_for_float64",
        ALICE,
        "attention.py",
        [
            (
                "    peak = torch.max(x, dim=dim, keepdim=True).values  # finite: every slice has a finite entry",
                """\
    if x.dtype == torch.float64:
        peak = torch.zeros_like(x)  # float64 has the range, no shift needed
    else:
        peak = torch.max(x, dim=dim, keepdim=True).values""",
            )
        ],
        1,
        7,
        "partial",
    ),
    _case(
        "p1_additive_helper_inverted",
        REF,
        "attention.py",
        [
            (
                "def scaled_dot_product_attention(",
                """\
def _additive(mask, scores):
    # the mask as a float tensor to add to the scores (0 or -inf)
    if mask.dtype == torch.bool:
        return torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
    return mask


def scaled_dot_product_attention(""",
            ),
            (
                """\
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, float("-inf"))
        else:
            scores = scores + mask
""",
                """\
        scores = scores + _additive(mask, scores)
""",
            ),
        ],
        1,
        8,
        "moved",
    ),
    _case(
        "p1_clamped_max_gives_nan",
        REF,
        "attention.py",
        [
            (
                """\
    top = x.amax(dim=dim, keepdim=True)
    if torch.isneginf(top).any():
        raise ValueError(
            f"softmax: x has a slice along dim={dim} that is entirely -inf"
        )
""",
                """\
    top = x.amax(dim=dim, keepdim=True).clamp(min=torch.finfo(x.dtype).min)
""",
            ),
            (
                """\
    if torch.isneginf(scores).all(dim=-1).any():
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
        "p1_divides_q_in_place",
        REF,
        "attention.py",
        [
            (
                REF_SCORES,
                """\
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)  # (..., Tq, Tk)""",
            )
        ],
        1,
        10,
        "rewritten",
    ),
    _case(
        "p1_softmax_under_no_grad",
        REF,
        "attention.py",
        [
            (
                REF_SOFTMAX_TAIL,
                """\
    with torch.no_grad():  # the max shift is a constant
        exp = torch.exp(x - top)
        return exp / exp.sum(dim=dim, keepdim=True)
""",
            )
        ],
        1,
        11,
        "rewritten",
    ),
    _case(
        "p1_softmax_zeros_on_cpu",
        ALICE,
        "attention.py",
        [
            (
                "    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))",
                "    expo = torch.where(banned, torch.zeros(x.shape, dtype=x.dtype), torch.exp(x - peak))",
            )
        ],
        1,
        12,
        "rewritten",
    ),
]

# ---------------------------------------------------------------- part 2: masks.py

REF_CAUSAL_BODY = """\
    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)
    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)
    return key_pos > query_pos  # (t_q, t_k)
"""
ALICE_CAUSAL_BODY = """\
    shift = t_k - t_q
    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    return everything.triu(diagonal=shift + 1)
"""

CASES += [
    _case(
        "p2_tril_one_short",
        REF,
        "masks.py",
        [
            (
                REF_CAUSAL_BODY,
                """\
    allowed = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q - 1)
    return ~allowed  # (t_q, t_k)
""",
            )
        ],
        2,
        13,
        "rewritten",
    ),
    _case(
        "p2_attention_mask_own_padding",
        REF,
        "masks.py",
        [
            (
                "    keys_padded = padding_mask(lengths, t)[:, None, None, :]  # (B, 1, 1, t)",
                """\
    lengths = torch.as_tensor(lengths, dtype=torch.long)
    padding_mask(lengths, t)  # validates the lengths
    positions = torch.arange(t, device=lengths.device)
    keys_padded = (positions[None, :] > lengths[:, None])[:, None, None, :]  # (B, 1, 1, t)""",
            )
        ],
        2,
        15,
        "moved",
    ),
    _case(
        "p2_key_positions_on_cpu",
        REF,
        "masks.py",
        [
            (
                "    key_pos = torch.arange(t_k, device=device)[None, :]  # (1, t_k)",
                "    key_pos = torch.arange(t_k)[None, :]  # (1, t_k)",
            )
        ],
        2,
        16,
        "partial",
    ),
]

# ---------------------------------------------------------------- part 3: heads.py

REF_QKV = """\
        source = x if context is None else context
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, h, Tk, d_h)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, h, Tk, d_h)
"""
ALICE_ATTEND = (
    "        mixed, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)"
)

CASES += [
    _case(
        "p3_float_head_width",
        REF,
        "heads.py",
        [
            (
                """\
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
""",
                """\
        self.d_model, self.n_heads = d_model, n_heads
        self.d_head = d_model / n_heads  # width of one head
""",
            ),
            (
                REF_QKV,
                """\
        source = x if context is None else context
        b, tq, tk = x.shape[0], x.shape[1], source.shape[1]
        q = self.q_proj(x).reshape(b, tq, self.n_heads, self.d_head).transpose(1, 2)
        k = self.k_proj(source).reshape(b, tk, self.n_heads, self.d_head).transpose(1, 2)
        v = self.v_proj(source).reshape(b, tk, self.n_heads, self.d_head).transpose(1, 2)
""",
            ),
        ],
        3,
        17,
        "refactor",
    ),
    _case(
        "p3_merge_reshape_only",
        REF,
        "heads.py",
        [
            (
                """\
    batch, n_heads, t, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)
""",
                """\
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)  # (B, T, D)
""",
            )
        ],
        3,
        19,
        "refactor",
    ),
    _case(
        "p3_inline_attention_model_width",
        ALICE,
        "heads.py",
        [
            (
                "from .attention import scaled_dot_product_attention",
                "import math\n\nfrom .attention import softmax",
            ),
            (
                ALICE_ATTEND,
                """\
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_model)
        if mask is not None:
            mask = mask.to(scores.device)
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(mask, float("-inf"))
            else:
                scores = scores + mask
        mixed = torch.einsum("bhqk,bhkd->bhqd", softmax(scores, dim=-1), v)""",
            ),
        ],
        3,
        20,
        "rewritten",
    ),
    _case(
        "p3_projections_of_x",
        REF,
        "heads.py",
        [
            (
                REF_QKV,
                """\
        q, k, v = (
            split_heads(proj(x), self.n_heads)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )  # (B, h, T, d_h) each
""",
            )
        ],
        3,
        21,
        "refactor",
    ),
    _case(
        "p3_cache_defaults_to_causal",
        REF,
        "heads.py",
        [
            (
                "from transformer_hw.attention import scaled_dot_product_attention",
                (
                    "from transformer_hw.attention import scaled_dot_product_attention\n"
                    "from transformer_hw.masks import causal_mask"
                ),
            ),
            (
                "            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)",
                """\
            k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)
            if mask is None:  # decoding: keep the new tokens causal
                mask = causal_mask(q.shape[2], k.shape[2], device=q.device)""",
            ),
        ],
        3,
        22,
        "rewritten",
    ),
    _case(
        "p3_merge_transposes_in_place",
        REF,
        "heads.py",
        [
            (
                "    return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
                "    return x.transpose_(1, 2).reshape(batch, t, n_heads * d_head)  # (B, T, D)",
            )
        ],
        3,
        10,
        "rewritten",
    ),
]

# ---------------------------------------------------------------- part 4: rope.py

REF_ROTATE = """\
    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each
    rotated = torch.stack(
        (a * cos - b * sin, a * sin + b * cos), dim=-1
    )  # (..., T, d/2, 2)
    return rotated.flatten(-2)  # (..., T, d_head)
"""

CASES += [
    _case(
        "p4_chunk_halves",
        REF,
        "rope.py",
        [
            (
                REF_ROTATE,
                """\
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]  # (..., T, d_head/2) each
    return torch.cat(
        (first * cos - second * sin, first * sin + second * cos), dim=-1
    )  # (..., T, d_head)
""",
            )
        ],
        4,
        24,
        "rewritten",
    ),
    _case(
        "p4_inverse_frequency_per_index",
        REF,
        "rope.py",
        [
            (
                """\
    dtype = torch.get_default_dtype() if dtype is None else dtype
    positions = torch.as_tensor(positions)
    pair = torch.arange(
        d_head // 2, device=positions.device, dtype=dtype
    )  # (d_head/2,)
    inv_freq = base ** (-2.0 * pair / d_head)  # (d_head/2,)
    return positions.to(dtype)[:, None] * inv_freq[None, :]  # (T, d_head/2)
""",
                """\
    if dtype is None:
        dtype = torch.get_default_dtype()
    positions = torch.as_tensor(positions)
    index = torch.arange(d_head // 2, device=positions.device, dtype=dtype)  # i
    freqs = torch.pow(base, -index / d_head)  # (d_head/2,)
    return torch.outer(positions.to(dtype), freqs)  # (T, d_head/2)
""",
            )
        ],
        4,
        26,
        "refactor",
    ),
    _case(
        "p4_float32_default_argument",
        REF,
        "rope.py",
        [
            (
                "    positions: torch.Tensor, d_head: int, base: float = 10000.0, dtype=None",
                "    positions: torch.Tensor, d_head: int, base: float = 10000.0, dtype=torch.float32",
            )
        ],
        4,
        27,
        "moved",
    ),
    _case(
        "p4_angles_of_arange",
        REF,
        "rope.py",
        [
            (
                "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)",
                """\
    steps = torch.arange(t, device=x.device)
    angles = rope_angles(steps, x.shape[-1], base, dtype=x.dtype)  # (T, d_head/2)""",
            )
        ],
        4,
        28,
        "rewritten",
    ),
    _case(
        "p4_rotates_x_in_place",
        REF,
        "rope.py",
        [
            (
                REF_ROTATE,
                """\
    a, b = x[..., 0::2].clone(), x[..., 1::2].clone()  # (..., T, d_head/2) each
    x[..., 0::2] = a * cos - b * sin
    x[..., 1::2] = a * sin + b * cos
    return x
""",
            )
        ],
        4,
        10,
        "rewritten",
    ),
]

# ---------------------------------------------------------------- part 5: norm.py, block.py

REF_PRE_FORWARD = """\
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return h + self.ffn(self.ln2(h))
"""
ALICE_PRE_FORWARD = """\
        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)
        return mixed + self.ffn(self.ln2(mixed))
"""
REF_LN_VAR = "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased"
REF_RMS = "        rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)"

CASES += [
    _case(
        "p5_second_residual_normalized",
        REF,
        "block.py",
        [
            (
                "        return h + self.ffn(self.ln2(h))",
                "        h = self.ln2(h)\n        return h + self.ffn(h)",
            )
        ],
        5,
        29,
        "partial",
    ),
    _case(
        "p5_prenorm_written_postnorm",
        REF,
        "block.py",
        [
            (
                REF_PRE_FORWARD,
                """\
        h = self.ln1(x + self.attn(x, mask=mask, cache=cache))
        return self.ln2(h + self.ffn(h))
""",
            )
        ],
        5,
        30,
        "rewritten",
    ),
    _case(
        "p5_residual_helper_norms_after",
        ALICE,
        "block.py",
        [
            (
                "        self.ffn = FeedForward(d_model, d_ff)\n",
                """\
        self.ffn = FeedForward(d_model, d_ff)

    def _residual(self, x, norm, sublayer):
        # one residual sub-layer around sublayer, with its norm
        return norm(x + sublayer(x))
""",
            ),
            (
                ALICE_PRE_FORWARD,
                """\
        mixed = self._residual(
            x, self.ln1, lambda t: self.attn(t, mask=mask, cache=cache)
        )
        return self._residual(mixed, self.ln2, self.ffn)
""",
            ),
        ],
        5,
        30,
        "moved",
    ),
    _case(
        "p5_uncached_default_causal",
        REF,
        "block.py",
        [
            (
                "from transformer_hw.heads import MultiHeadAttention",
                (
                    "from transformer_hw.heads import MultiHeadAttention\n"
                    "from transformer_hw.masks import causal_mask"
                ),
            ),
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                """\
        if mask is None and cache is None:
            mask = causal_mask(x.shape[1], device=x.device)
        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)""",
            ),
        ],
        5,
        31,
        "partial",
    ),
    _case(
        "p5_cached_call_without_mask",
        ALICE,
        "block.py",
        [
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                """\
        if cache is None:
            mixed = x + self.attn(self.ln1(x), mask=mask)
        else:
            mixed = x + self.attn(self.ln1(x), cache=cache)""",
            )
        ],
        5,
        32,
        "partial",
    ),
    _case(
        "p5_eps_after_sqrt",
        ALICE,
        "norm.py",
        [
            (
                "        return (x - centre) * torch.rsqrt(spread + self.eps)",
                "        return (x - centre) / (spread.sqrt() + self.eps)",
            )
        ],
        5,
        34,
        "partial",
    ),
    _case(
        "p5_rms_eps_outside",
        REF,
        "norm.py",
        [
            (
                REF_RMS,
                "        rms = (x * x).mean(dim=-1, keepdim=True).sqrt() + self.eps",
            )
        ],
        5,
        34,
        "partial",
    ),
    _case(
        "p5_variance_from_moments",
        REF,
        "norm.py",
        [
            (
                """\
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""",
                """\
        mu = x.mean(-1, keepdim=True)
        second = (x * x).mean(-1, keepdim=True)
        inv_std = 1.0 / torch.sqrt(second - mu * mu + self.eps)
        return (x - mu) * inv_std * self.weight + self.bias
""",
            )
        ],
        5,
        35,
        "refactor",
    ),
    _case(
        "p5_base_class_centres",
        ALICE,
        "norm.py",
        [
            (
                "        return self.normalize(x) * self.weight",
                "        return self.normalize(x - x.mean(dim=-1, keepdim=True)) * self.weight",
            )
        ],
        5,
        36,
        "moved",
    ),
    _case(
        "p5_shared_weight_plain_tensor",
        ALICE,
        "norm.py",
        [
            (
                "        self.weight = nn.Parameter(torch.ones(d))",
                "        self.weight = torch.ones(d)",
            )
        ],
        5,
        38,
        "moved",
    ),
    _case(
        "p5_centres_x_in_place",
        REF,
        "norm.py",
        [
            (
                """\
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""",
                """\
        x -= x.mean(dim=-1, keepdim=True)
        var = (x**2).mean(dim=-1, keepdim=True)  # biased
        return x / torch.sqrt(var + self.eps) * self.weight + self.bias
""",
            )
        ],
        5,
        10,
        "partial",
    ),
]

# ---------------------------------------------------------------- part 6: gqa.py

REF_CHECKS = """\
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
"""
REF_ROPE_QK = """\
        q = apply_rope(q, positions, self.rope_base)
        k = apply_rope(k, positions, self.rope_base)
"""
ALICE_APPEND = """\
        fresh = k_new.shape[2]
        end = self.length + fresh
        if end > self.max_len:
            raise ValueError(
                f"KV cache overflow: length={self.length} + t={fresh} exceeds max_len={self.max_len}"
            )
        self.k[:, :, self.length:end].copy_(k_new)
        self.v[:, :, self.length:end].copy_(v_new)
        self.length = end
"""

CASES += [
    _case(
        "p6_value_never_validated",
        ALICE,
        "gqa.py",
        [('        self._check(v_new, "v_new")\n', "")],
        6,
        39,
        "partial",
    ),
    _case(
        "p6_forward_tiles_heads",
        REF,
        "gqa.py",
        [
            (
                "            q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask",
                "            q, k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1), mask",
            )
        ],
        6,
        40,
        "moved",
    ),
    _case(
        "p6_numel_in_bytes",
        ALICE,
        "gqa.py",
        [
            (
                """\
    total = 2
    for name, value in dims.items():
        total *= _positive(value, name, allow_zero=True)
    return int(total)
""",
                """\
    for name, value in dims.items():
        _positive(value, name, allow_zero=True)
    bytes_per_entry = 4  # float32
    return 2 * math.prod(dims.values()) * bytes_per_entry
""",
            )
        ],
        6,
        42,
        "refactor",
    ),
    _case(
        "p6_repeat_before_caching",
        REF,
        "gqa.py",
        [
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
            )
        ],
        6,
        43,
        "rewritten",
    ),
    _case(
        "p6_overflow_writes_what_fits",
        ALICE,
        "gqa.py",
        [
            (
                ALICE_APPEND,
                """\
        fresh = k_new.shape[2]
        end = min(self.length + fresh, self.max_len)
        room = end - self.length
        self.k[:, :, self.length:end].copy_(k_new[:, :, :room])
        self.v[:, :, self.length:end].copy_(v_new[:, :, :room])
        if room < fresh:
            raise ValueError(
                f"KV cache overflow: length={self.length} + t={fresh} exceeds max_len={self.max_len}"
            )
        self.length = end
""",
            )
        ],
        6,
        44,
        "rewritten",
    ),
    _case(
        "p6_validate_helper_no_pair_check",
        REF,
        "gqa.py",
        [
            (
                "    def append(self, k_new: torch.Tensor, v_new: torch.Tensor):",
                """\
    def _validate(self, name, new):
        batch, n_kv, _, d_head = self.k.shape
        if new.dim() != 4 or new.shape[:2] != (batch, n_kv) or new.shape[3] != d_head:
            raise ValueError(
                f"{name} has shape {tuple(new.shape)}, expected ({batch}, {n_kv}, t, {d_head})"
            )
        if new.dtype != self.k.dtype or new.device != self.k.device:
            raise ValueError(
                f"{name} is {new.dtype} on {new.device}, the cache {self.k.dtype} on "
                f"{self.k.device}"
            )

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor):""",
            ),
            (
                REF_CHECKS,
                '        self._validate("k_new", k_new)\n        self._validate("v_new", v_new)\n',
            ),
        ],
        6,
        45,
        "refactor",
    ),
    _case(
        "p6_rope_on_all_three",
        ALICE,
        "gqa.py",
        [
            (
                """\
        q = apply_rope(q, where, self.rope_base)
        k = apply_rope(k, where, self.rope_base)
""",
                "        q, k, v = (apply_rope(t, where, self.rope_base) for t in (q, k, v))\n",
            )
        ],
        6,
        46,
        "rewritten",
    ),
    _case(
        "p6_caller_advances_length",
        REF,
        "gqa.py",
        [
            (
                """\
        self.length += t
        return self.k[:, :, : self.length], self.v[:, :, : self.length]
""",
                """\
        return self.k[:, :, : self.length + t], self.v[:, :, : self.length + t]
""",
            ),
            (
                "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)",
                (
                    "            k, v = cache.append(k, v)  # (B, h_kv, start + T, d_h)\n"
                    "            cache.length += t"
                ),
            ),
        ],
        6,
        47,
        "moved",
    ),
    _case(
        "p6_keys_at_default_positions",
        REF,
        "gqa.py",
        [
            (
                "        k = apply_rope(k, positions, self.rope_base)",
                "        k = apply_rope(k, base=self.rope_base)",
            )
        ],
        6,
        48,
        "partial",
    ),
    _case(
        "p6_queries_default_base",
        REF,
        "gqa.py",
        [
            (
                "        q = apply_rope(q, positions, self.rope_base)",
                "        q = apply_rope(q, positions)",
            )
        ],
        6,
        49,
        "partial",
    ),
    _case(
        "p6_init_fixes_base",
        ALICE,
        "gqa.py",
        [
            (
                "        self.rope_base = rope_base",
                "        self.rope_base = 10000.0  # the RoFormer base",
            )
        ],
        6,
        49,
        "moved",
    ),
    _case(
        "p6_value_buffer_default_dtype",
        ALICE,
        "gqa.py",
        [
            (
                "        self.v = torch.empty(shape, device=device, dtype=dtype)",
                "        self.v = torch.empty(shape, device=device)",
            )
        ],
        6,
        51,
        "partial",
    ),
    _case(
        "p6_room_left_must_exceed",
        REF,
        "gqa.py",
        [
            (
                "        if self.length + t > self.max_len:",
                "        if self.max_len - self.length <= t:",
            )
        ],
        6,
        52,
        "rewritten",
    ),
    _case(
        "p6_causal_mask_default_device",
        REF,
        "gqa.py",
        [
            (
                "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)",
                "        mask = causal_mask(t, k.shape[2])  # (T, start + T)",
            )
        ],
        6,
        12,
        "partial",
    ),
]

# ---------------------------------------------------------------- part 7: charlm.py

REF_EVAL_LOOP = """\
    total, count = 0.0, 0
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
    if count == 0:
"""
REF_TRAIN_STEP = """\
            loss = lm_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * real
            count += real
"""
ALICE_EVAL_LOOP = """\
        with torch.no_grad():
            for inputs, targets in batches:
                targets = targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real == 0:
                    continue
                logits = model(inputs.to(device))
                total += float(lm_loss(logits, targets, reduction="sum"))
                tokens += real
"""
ALICE_MAKE_CACHES = """\
        device, dtype = self._probe()
        return [
            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,
                    device=device, dtype=dtype)
            for _ in self.blocks
        ]
"""

CASES += [
    _case(
        "p7_sum_skips_empty_check",
        REF,
        "charlm.py",
        [
            (
                """\
    if not (targets != IGNORE_INDEX).any():
        raise ValueError("targets has no real target (all are IGNORE_INDEX)")
""",
                """\
    if reduction == "mean" and not (targets != IGNORE_INDEX).any():
        raise ValueError("targets has no real target (all are IGNORE_INDEX)")  # 0 / 0
""",
            )
        ],
        7,
        53,
        "partial",
    ),
    _case(
        "p7_log_of_probabilities",
        ALICE,
        "charlm.py",
        [
            (
                "    log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)",
                "    log_probs = torch.log(torch.softmax(logits.reshape(-1, vocab), dim=-1))  # (N, V)",
            )
        ],
        7,
        54,
        "rewritten",
    ),
    _case(
        "p7_counts_targets_first",
        REF,
        "charlm.py",
        [
            (
                REF_EVAL_LOOP,
                """\
    count = sum(int((targets != IGNORE_INDEX).sum()) for _, targets in batches)
    total = 0.0
    try:
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                if (targets != IGNORE_INDEX).any():
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
    finally:
        model.train(was_training)
    if count == 0:
""",
            )
        ],
        7,
        55,
        "rewritten",
    ),
    _case(
        "p7_evaluate_stays_in_mode",
        REF,
        "charlm.py",
        [
            (
                """\
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
""",
                """\
    was_training = model.training
    total = 0.0
    count = 0
""",
            )
        ],
        7,
        56,
        "refactor",
    ),
    _case(
        "p7_forward_outside_no_grad",
        ALICE,
        "charlm.py",
        [
            (
                ALICE_EVAL_LOOP,
                """\
        for inputs, targets in batches:
            targets = targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if real == 0:
                continue
            logits = model(inputs.to(device))
            with torch.no_grad():
                total += float(lm_loss(logits, targets, reduction="sum"))
            tokens += real
""",
            )
        ],
        7,
        57,
        "partial",
    ),
    _case(
        "p7_cache_off_by_default",
        REF,
        "charlm.py",
        [("    use_cache: bool = True,", "    use_cache: bool = False,")],
        7,
        58,
        "moved",
    ),
    _case(
        "p7_prompt_warmed_one_by_one",
        REF,
        "charlm.py",
        [
            (
                """\
            caches = model.make_caches() if use_cache else None
            feed = ids
""",
                """\
            caches = model.make_caches() if use_cache else None
            feed = ids
            if use_cache:
                for token in ids[:-1]:  # fill the caches one position at a time
                    model(token.view(1, 1), caches)
                feed = ids[-1:]
""",
            )
        ],
        7,
        59,
        "rewritten",
    ),
    _case(
        "p7_decode_skips_both_specials",
        ALICE,
        "charlm.py",
        [
            (
                """\
        pieces = []
        for code in ids:
            code = int(code)
            if code == PAD_ID:
                continue
            if code not in self.itos:
                raise ValueError(
                    f"decode: unknown id {code} in ids (valid ids are 0..{self.vocab_size - 1})"
                )
            pieces.append(self.itos[code])
        return "".join(pieces)
""",
                """\
        codes = [int(code) for code in ids]
        codes = [code for code in codes if code not in (PAD_ID, IGNORE_INDEX)]
        missing = [code for code in codes if code not in self.itos]
        if missing:
            raise ValueError(
                f"decode: unknown id {missing[0]} in ids (valid ids are 0..{self.vocab_size - 1})"
            )
        return "".join(self.itos[code] for code in codes)
""",
            )
        ],
        7,
        60,
        "refactor",
    ),
    _case(
        "p7_enumerate_from_zero",
        ALICE,
        "charlm.py",
        [
            (
                """\
        self.stoi = {ch: n for n, ch in enumerate(self.chars, start=1)}
        self.itos = {n: ch for ch, n in self.stoi.items()}
""",
                """\
        self.itos = dict(enumerate(self.chars))
        self.stoi = {ch: n for n, ch in self.itos.items()}
""",
            )
        ],
        7,
        61,
        "refactor",
    ),
    _case(
        "p7_rows_aligned_right",
        ALICE,
        "charlm.py",
        [
            (
                """\
        inputs[row, :span] = s[:-1]
        targets[row, :span] = s[1:]
""",
                """\
        inputs[row, width - span :] = s[:-1]
        targets[row, width - span :] = s[1:]
""",
            )
        ],
        7,
        62,
        "rewritten",
    ),
    _case(
        "p7_targets_copy_inputs",
        REF,
        "charlm.py",
        [
            (
                """\
    for row, s in enumerate(sequences):
        inputs[row, : len(s) - 1] = s[:-1]
        targets[row, : len(s) - 1] = s[1:]
""",
                """\
    for row, s in enumerate(sequences):
        body = s[:-1]  # the positions the model reads
        inputs[row, : len(body)] = body
        targets[row, : len(body)] = body
""",
            )
        ],
        7,
        63,
        "refactor",
    ),
    _case(
        "p7_targets_padded_with_pad_id",
        REF,
        "charlm.py",
        [
            (
                """\
    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)
    targets = torch.full(
        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device
    )
""",
                """\
    shape = (len(sequences), t)
    inputs = torch.full(shape, pad_id, dtype=torch.long, device=device)
    targets = torch.full_like(inputs, pad_id)
""",
            )
        ],
        7,
        64,
        "refactor",
    ),
    _case(
        "p7_train_loss_per_batch",
        REF,
        "charlm.py",
        [
            (
                """\
            total += loss.item() * real
            count += real
""",
                """\
            total += loss.item()
            count += 1
""",
            )
        ],
        7,
        65,
        "partial",
    ),
    _case(
        "p7_restores_only_on_error",
        REF,
        "charlm.py",
        [
            (
                """\
    finally:
        model.train(was_training)
    if count == 0:
""",
                """\
    except Exception:
        model.train(was_training)
        raise
    if count == 0:
""",
            )
        ],
        7,
        66,
        "partial",
    ),
    _case(
        "p7_modes_saved_after_eval",
        ALICE,
        "charlm.py",
        [
            (
                """\
    saved = _remember_modes(model)
    device = _model_device(model)
    total, tokens = 0.0, 0
    try:
        model.eval()
""",
                """\
    model.eval()
    saved = _remember_modes(model)
    device = _model_device(model)
    total, tokens = 0.0, 0
    try:
""",
            )
        ],
        7,
        66,
        "moved",
    ),
    _case(
        "p7_mode_restored_after_loop",
        REF,
        "charlm.py",
        [
            (
                REF_EVAL_LOOP,
                """\
    total, count = 0.0, 0
    with torch.no_grad():
        for inputs, targets in batches:
            inputs, targets = inputs.to(device), targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if real:
                total += lm_loss(model(inputs), targets, reduction="sum").item()
                count += real
    model.train(was_training)
    if count == 0:
""",
            )
        ],
        7,
        67,
        "rewritten",
    ),
    _case(
        "p7_caches_sized_128",
        ALICE,
        "charlm.py",
        [
            (
                "            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,",
                "            KVCache(batch, self.n_heads, 128, self.d_model // self.n_heads,",
            )
        ],
        7,
        68,
        "partial",
    ),
    _case(
        "p7_cached_step_feeds_all",
        ALICE,
        "charlm.py",
        [
            (
                "                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]",
                "                        last = model(torch.tensor([ids], device=device), caches)[0, -1]",
            )
        ],
        7,
        69,
        "rewritten",
    ),
    _case(
        "p7_pad_excluded_when_greedy",
        ALICE,
        "charlm.py",
        [
            (
                """\
    logits[PAD_ID] = float("-inf")
    if greedy:
        return int(torch.argmax(logits))
""",
                """\
    if greedy:
        logits[PAD_ID] = float("-inf")
        return int(torch.argmax(logits))
""",
            )
        ],
        7,
        71,
        "partial",
    ),
    _case(
        "p7_loss_views",
        REF,
        "charlm.py",
        [
            (
                "        logits.reshape(-1, logits.shape[-1]),",
                "        logits.view(-1, logits.shape[-1]),",
            )
        ],
        7,
        72,
        "partial",
    ),
    _case(
        "p7_lowercased_vocabulary",
        ALICE,
        "charlm.py",
        [
            (
                "        self.chars = sorted(set(text))",
                "        self.chars = sorted(set(text.lower()))",
            )
        ],
        7,
        73,
        "rewritten",
    ),
    _case(
        "p7_one_cache_listed",
        ALICE,
        "charlm.py",
        [
            (
                ALICE_MAKE_CACHES,
                """\
        device, dtype = self._probe()
        d_head = self.d_model // self.n_heads
        cache = KVCache(batch, self.n_heads, self.max_len, d_head, device=device, dtype=dtype)
        return [cache] * len(self.blocks)
""",
            )
        ],
        7,
        74,
        "refactor",
    ),
    _case(
        "p7_train_loss_reevaluated",
        REF,
        "charlm.py",
        [
            (
                '                "train_loss": total / count,',
                '                "train_loss": evaluate(model, train_batches),',
            )
        ],
        7,
        75,
        "rewritten",
    ),
    _case(
        "p7_totals_before_epochs",
        REF,
        "charlm.py",
        [
            (
                """\
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        total, count = 0.0, 0
""",
                """\
    history = []
    total, count = 0.0, 0
    for epoch in range(1, epochs + 1):
        model.train()
""",
            )
        ],
        7,
        76,
        "moved",
    ),
    _case(
        "p7_zero_grad_at_epoch_start",
        ALICE,
        "charlm.py",
        [
            (
                "    optimizer.zero_grad()\n    loss = lm_loss(model(inputs), targets)",
                "    loss = lm_loss(model(inputs), targets)",
            ),
            (
                "        model.train()\n        steps = [",
                "        model.train()\n        optimizer.zero_grad()\n        steps = [",
            ),
        ],
        7,
        77,
        "moved",
    ),
    _case(
        "p7_accumulate_then_step",
        REF,
        "charlm.py",
        [
            (
                REF_TRAIN_STEP,
                """\
            loss = lm_loss(model(inputs), targets)
            loss.backward()  # the epoch's gradients add up
            total += loss.item() * real
            count += real
        optimizer.step()
        optimizer.zero_grad()
""",
            )
        ],
        7,
        78,
        "rewritten",
    ),
    _case(
        "p7_step_outside_helper",
        ALICE,
        "charlm.py",
        [
            (
                "    loss.backward()\n    optimizer.step()\n",
                "    loss.backward()\n",
            ),
            (
                "        running = sum(loss * real for loss, real in steps)",
                "        optimizer.step()\n        running = sum(loss * real for loss, real in steps)",
            ),
        ],
        7,
        79,
        "moved",
    ),
    _case(
        "p7_lr_fallback",
        REF,
        "charlm.py",
        [
            (
                "def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = 1e-3):",
                "def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr=None):",
            ),
            (
                "    optimizer = torch.optim.Adam(model.parameters(), lr=lr)",
                "    optimizer = torch.optim.Adam(model.parameters(), lr=lr or 3e-3)",
            ),
        ],
        7,
        80,
        "moved",
    ),
    _case(
        "p7_float_prompt_cast",
        ALICE,
        "charlm.py",
        [
            (
                "            or prompt.is_floating_point() or prompt.is_complex() or prompt.dtype == torch.bool):",
                "            or prompt.is_complex() or prompt.dtype == torch.bool):",
            )
        ],
        7,
        81,
        "partial",
    ),
    _case(
        "p7_temperature_checked_always",
        REF,
        "charlm.py",
        [
            (
                "    if not greedy and temperature <= 0:",
                "    if not temperature > 0:",
            )
        ],
        7,
        82,
        "rewritten",
    ),
    _case(
        "p7_do_while_generation",
        REF,
        "charlm.py",
        [
            ("            for _ in range(max_new_tokens):", "            while True:"),
            (
                "                feed = new if use_cache else ids\n",
                """\
                feed = new if use_cache else ids
                if len(ids) - len(prompt) >= max_new_tokens:
                    break
""",
            ),
        ],
        7,
        83,
        "rewritten",
    ),
    _case(
        "p7_needs_a_new_token",
        ALICE,
        "charlm.py",
        [
            (
                """\
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
""",
                """\
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive int, got {max_new_tokens!r}")
""",
            )
        ],
        7,
        84,
        "rewritten",
    ),
    _case(
        "p7_sample_from_top_five",
        REF,
        "charlm.py",
        [
            (
                """\
                    probs = torch.softmax(logits / temperature, dim=-1)
                    new = torch.multinomial(probs, 1, generator=generator)
""",
                """\
                    top, where = torch.topk(logits / temperature, k=min(5, logits.numel()))
                    probs = torch.softmax(top, dim=-1)
                    new = where[torch.multinomial(probs, 1, generator=generator)]
""",
            )
        ],
        7,
        85,
        "rewritten",
    ),
    _case(
        "p7_wider_feed_forward_default",
        ALICE,
        "charlm.py",
        [
            (
                "    def __init__(self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128):",
                "    def __init__(self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=256, max_len=128):",
            )
        ],
        7,
        87,
        "rewritten",
    ),
    _case(
        "p7_evaluate_batches_stay",
        REF,
        "charlm.py",
        [
            (
                "                inputs, targets = inputs.to(device), targets.to(device)\n",
                "",
            )
        ],
        7,
        88,
        "rewritten",
    ),
    _case(
        "p7_prompt_only_cast",
        REF,
        "charlm.py",
        [
            (
                "    ids = prompt.to(device=device, dtype=torch.long)",
                "    ids = prompt.long()",
            )
        ],
        7,
        89,
        "rewritten",
    ),
    _case(
        "p7_targets_made_on_cpu",
        ALICE,
        "charlm.py",
        [
            (
                "    targets = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long, device=device)",
                "    targets = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long)",
            )
        ],
        7,
        12,
        "partial",
    ),
]

# ---------------------------------------------------------------- unknown: no description fits

CASES += [
    _case(
        "u1_attention_returns_swapped",
        REF,
        "attention.py",
        [
            (
                "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)",
                "    return weights, weights @ v  # (..., Tq, Tk), (..., Tq, d_v)",
            )
        ],
        1,
        None,
        "unknown",
    ),
    _case(
        "u2_unexpanded_padding_mask",
        ALICE,
        "masks.py",
        [("    return full.contiguous()", "    return keys_off.view(batch, 1, 1, t)")],
        2,
        None,
        "unknown",
    ),
    _case(
        "u3_no_output_projection",
        REF,
        "heads.py",
        [
            (
                "        return self.out_proj(merge_heads(out))  # (B, Tq, D)",
                "        return merge_heads(out)  # (B, Tq, D)",
            )
        ],
        3,
        None,
        "unknown",
    ),
    _case(
        "u4_positions_shape_unchecked",
        ALICE,
        "rope.py",
        [
            (
                """\
    if tuple(positions.shape) != (steps,):
        raise ValueError(
            f"positions must have shape (T,) = ({steps},), got {tuple(positions.shape)}"
        )
""",
                "",
            )
        ],
        4,
        None,
        "unknown",
    ),
    _case(
        "u5_gelu_feed_forward",
        ALICE,
        "block.py",
        [
            (
                "        return self.fc2(torch.clamp(hidden, min=0))  # (..., d_model)",
                "        return self.fc2(torch.nn.functional.gelu(hidden))  # (..., d_model)",
            )
        ],
        5,
        None,
        "unknown",
    ),
    _case(
        "u6_uncached_pass_not_causal",
        REF,
        "gqa.py",
        [
            (
                "        mask = causal_mask(t, k.shape[2], device=x.device)  # (T, start + T)",
                "        mask = None if cache is None else causal_mask(t, k.shape[2], device=x.device)",
            )
        ],
        6,
        None,
        "unknown",
    ),
    _case(
        "u7_unknown_characters_padded",
        REF,
        "charlm.py",
        [
            (
                """\
        unknown = [c for c in s if c not in self.stoi]
        if unknown:
            raise ValueError(f"character {unknown[0]!r} is not in the vocabulary")
        return [self.stoi[c] for c in s]
""",
                """\
        return [self.stoi.get(c, PAD_ID) for c in s]
""",
            )
        ],
        7,
        None,
        "unknown",
    ),
]

# ---------------------------------------------------------------- correct, in other styles

CASES += [
    _case(
        "c1_attention_einsum_where",
        REF,
        "attention.py",
        [
            (
                REF_SCORES,
                '    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])',
            ),
            (
                '            scores = scores.masked_fill(mask, float("-inf"))',
                '            scores = torch.where(mask, torch.full_like(scores, float("-inf")), scores)',
            ),
            (
                "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)",
                '    return torch.einsum("...qk,...kd->...qd", weights, v), weights',
            ),
        ],
        1,
        None,
        "correct",
    ),
    _case(
        "c2_rope_complex_numbers",
        REF,
        "rope.py",
        [
            (
                """\
    cos, sin = angles.cos(), angles.sin()
"""
                + REF_ROTATE,
                """\
    turn = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}, (T, d_head/2)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2)  # (..., T, d_head)
""",
            )
        ],
        4,
        None,
        "correct",
    ),
    _case(
        "c3_masks_tril_and_where",
        REF,
        "masks.py",
        [
            (
                REF_CAUSAL_BODY,
                """\
    ones = torch.ones(t_q, t_k, dtype=torch.bool, device=device)
    return ~ones.tril(diagonal=t_k - t_q)  # (t_q, t_k)
""",
            ),
            (
                "    return positions >= lengths[:, None]  # (B, t)",
                (
                    "    real = positions < lengths[:, None]\n"
                    "    return torch.where(real, torch.zeros_like(real), torch.ones_like(real))"
                ),
            ),
        ],
        2,
        None,
        "correct",
    ),
    _case(
        "c4_norms_rsqrt_block_steps",
        REF,
        "norm.py",
        [
            (
                """\
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
""",
                """\
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) * torch.rsqrt(var + self.eps) * self.weight + self.bias
""",
            ),
            (
                REF_RMS + "\n        return x / rms * self.weight",
                """\
        inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * (x * inv)""",
            ),
        ],
        5,
        None,
        "correct",
        extra=[
            (
                "block.py",
                REF_PRE_FORWARD,
                """\
        h = x
        h = h + self.attn(self.ln1(h), mask=mask, cache=cache)
        h = h + self.ffn(self.ln2(h))
        return h
""",
            )
        ],
    ),
    _case(
        "c5_gqa_device_generic",
        REF,
        "gqa.py",
        [
            (
                "        positions = torch.arange(start, start + t, device=x.device)",
                "        positions = torch.arange(start, start + t).to(x.device)",
            ),
            (
                """\
    batch, n_kv, t, d = x.shape
    x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)  # (B, h_kv, n_rep, T, d)
    return x.reshape(batch, n_kv * n_rep, t, d)  # (B, h_kv * n_rep, T, d)
""",
                """\
    return torch.repeat_interleave(x, n_rep, dim=1)  # (B, h_kv * n_rep, T, d)
""",
            ),
            (
                "    return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
                (
                    "    sizes = (2, batch, n_layers, seq_len, n_kv_heads, d_head)\n"
                    "    return int(torch.tensor(sizes).prod())"
                ),
            ),
        ],
        6,
        None,
        "correct",
    ),
    _case(
        "c6_generate_inference_mode",
        ALICE,
        "charlm.py",
        [
            (
                "        with torch.no_grad():\n            if max_new_tokens > 0:",
                "        with torch.inference_mode():\n            if max_new_tokens > 0:",
            )
        ],
        7,
        None,
        "correct",
    ),
    _case(
        "c7_charlm_device_branches",
        REF,
        "charlm.py",
        [
            (
                "        positions = torch.arange(start, start + t, device=idx.device)",
                "        positions = torch.arange(start, start + t).to(idx.device)",
            ),
            (
                "    device = next(model.parameters()).device\n    was_training = model.training\n    model.eval()",
                "    device = model.head.weight.device\n    was_training = model.training\n    model.eval()",
            ),
            (
                "    ids = prompt.to(device=device, dtype=torch.long)",
                (
                    "    ids = prompt if prompt.device == device else prompt.to(device)\n"
                    "    ids = ids.long()"
                ),
            ),
        ],
        7,
        None,
        "correct",
    ),
]

# ---------------------------------------------------------------- multi: mistakes in several parts

CASES += [
    _case(
        "m1_causal_from_zero_cool_sampling",
        REF,
        "masks.py",
        [
            (
                "    query_pos = torch.arange(t_q, device=device)[:, None] + (t_k - t_q)  # (t_q, 1)",
                "    query_pos = torch.arange(t_q, device=device)[:, None]  # (t_q, 1)",
            )
        ],
        2,
        14,
        "multi",
        also=(14, 86),
        extra=[
            (
                "charlm.py",
                "    temperature: float = 1.0,",
                "    temperature: float = 0.7,",
            )
        ],
        also_parts=(7,),
    ),
    _case(
        "m2_true_division_positions_from_zero",
        ALICE,
        "heads.py",
        [("    per_head = width // n_heads", "    per_head = width / n_heads")],
        3,
        17,
        "multi",
        also=(17, 48),
        extra=[
            (
                "gqa.py",
                "        where = torch.arange(start, start + steps, device=x.device)  # absolute positions (T,)",
                "        where = torch.arange(steps, device=x.device)  # positions (T,)",
            )
        ],
        also_parts=(6,),
    ),
    _case(
        "m3_complex_halves_loss_views",
        ALICE,
        "rope.py",
        [
            (
                """\
    pairs = x.to(real).reshape(*x.shape[:-1], width // 2, 2).contiguous()  # (..., T, d/2, 2)
    turned = torch.view_as_complex(pairs) * spin  # (a + ib) e^{i theta}
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)  # (..., T, d)
""",
                """\
    xr, half = x.to(real), width // 2
    turned = torch.complex(xr[..., :half], xr[..., half:]) * spin  # (a + ib) e^{i theta}
    return torch.cat((turned.real, turned.imag), dim=-1).to(x.dtype)  # (..., T, d)
""",
            )
        ],
        4,
        24,
        "multi",
        also=(24, 72),
        extra=[
            (
                "charlm.py",
                "    log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)",
                "    log_probs = F.log_softmax(logits.view(-1, vocab), dim=-1)  # (N, V)",
            ),
            (
                "charlm.py",
                "    total = F.nll_loss(log_probs, targets.reshape(-1),",
                "    total = F.nll_loss(log_probs, targets.view(-1),",
            ),
        ],
        also_parts=(7,),
    ),
    _case(
        "m4_normed_residual_no_cache",
        ALICE,
        "block.py",
        [
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                (
                    "        normed = self.ln1(x)\n"
                    "        mixed = normed + self.attn(normed, mask=mask, cache=cache)"
                ),
            )
        ],
        5,
        29,
        "multi",
        also=(29, 58),
        extra=[
            (
                "charlm.py",
                "                caches = model.make_caches(1) if use_cache else None",
                "                caches = None",
            ),
            (
                "charlm.py",
                """\
                    if use_cache:
                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]
                    else:
                        last = model(torch.tensor([ids], device=device))[0, -1]
""",
                """\
                    last = model(torch.tensor([ids], device=device))[0, -1]
""",
            ),
        ],
        also_parts=(7,),
    ),
    _case(
        "m5_value_width_scale_unbiased_var",
        ALICE,
        "attention.py",
        [("    d_k = q.shape[-1]\n", "    d_k = v.shape[-1]\n")],
        1,
        5,
        "multi",
        also=(5, 33),
        extra=[
            (
                "norm.py",
                "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)",
                "        spread = torch.var(x, dim=-1, keepdim=True)",
            )
        ],
        also_parts=(5,),
    ),
    _case(
        "m6_conjugate_spin_single_count",
        ALICE,
        "rope.py",
        [
            (
                "    turned = torch.view_as_complex(pairs) * spin  # (a + ib) e^{i theta}",
                "    turned = torch.view_as_complex(pairs) * spin.conj()  # (a + ib) e^{-i theta}",
            )
        ],
        4,
        25,
        "multi",
        also=(25, 41),
        extra=[("gqa.py", "    total = 2\n", "    total = 1\n")],
        also_parts=(6,),
    ),
    _case(
        "m7_detached_spread_positions_restart",
        ALICE,
        "norm.py",
        [
            (
                "        spread = torch.var(x, dim=-1, unbiased=False, keepdim=True)",
                "        spread = torch.var(x.detach(), dim=-1, unbiased=False, keepdim=True)",
            )
        ],
        5,
        37,
        "multi",
        also=(37, 70),
        extra=[
            (
                "charlm.py",
                "        spots = torch.arange(start, start + steps, device=device)",
                "        spots = torch.arange(steps, device=device)",
            )
        ],
        also_parts=(7,),
    ),
    _case(
        "m8_length_stuck_lr_1e2",
        ALICE,
        "gqa.py",
        [
            (
                "        self.length = end\n        return self.k[:, :, :end], self.v[:, :, :end]",
                "        return self.k[:, :, :end], self.v[:, :, :end]",
            )
        ],
        6,
        47,
        "multi",
        also=(47, 80),
        extra=[
            (
                "charlm.py",
                "def train(model, train_batches, dev_batches, epochs=1, lr=1e-3):",
                "def train(model, train_batches, dev_batches, epochs=1, lr=1e-2):",
            )
        ],
        also_parts=(7,),
    ),
    _case(
        "m9_bool_float_mask_partial_write",
        REF,
        "heads.py",
        [
            (
                "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)",
                (
                    "        if mask is not None:\n"
                    "            mask = mask.bool()  # True where blocked\n"
                    "        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)"
                ),
            )
        ],
        3,
        23,
        "multi",
        also=(23, 44),
        extra=[
            (
                "gqa.py",
                """\
        t = k_new.shape[2]
        if self.length + t > self.max_len:
            raise ValueError(
                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"
            )
        self.k[:, :, self.length : self.length + t] = k_new
        self.v[:, :, self.length : self.length + t] = v_new
""",
                """\
        t = k_new.shape[2]
        room = self.max_len - self.length
        self.k[:, :, self.length : self.length + t] = k_new[:, :, :room]
        self.v[:, :, self.length : self.length + t] = v_new[:, :, :room]
        if t > room:
            raise ValueError(
                f"appending t={t} positions to length={self.length} exceeds max_len={self.max_len}"
            )
""",
            )
        ],
        also_parts=(6,),
    ),
    _case(
        "m10_unscaled_float32_top_k",
        ALICE,
        "attention.py",
        [
            (
                '    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)',
                '    scores = torch.einsum("...id,...jd->...ij", q, k)  # (..., Tq, Tk)',
            )
        ],
        1,
        3,
        "multi",
        also=(3, 27, 85),
        extra=[
            (
                "rope.py",
                "        dtype = torch.get_default_dtype()",
                "        dtype = torch.float32",
            ),
            (
                "charlm.py",
                "    # Gumbel-max: argmax(logits / T + G) with G ~ Gumbel(0, 1) samples softmax(logits / T).",
                (
                    "    floor = torch.topk(logits, min(3, logits.numel())).values[-1]  # keep the top 3\n"
                    '    logits = torch.where(logits < floor, torch.full_like(logits, float("-inf")), logits)\n'
                    "    # Gumbel-max: argmax(logits / T + G) with G ~ Gumbel(0, 1) samples softmax(logits / T)."
                ),
            ),
        ],
        also_parts=(4, 7),
    ),
    _case(
        "m11_causal_on_cpu_targets_padded",
        ALICE,
        "masks.py",
        [
            (
                "    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)",
                "    everything = torch.ones(t_q, t_k, dtype=torch.bool)",
            )
        ],
        2,
        16,
        "multi",
        also=(16, 64),
        extra=[
            (
                "charlm.py",
                "    targets = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long, device=device)",
                "    targets = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)",
            )
        ],
        also_parts=(7,),
    ),
    _case(
        "m12_view_heads_rms_eps",
        ALICE,
        "heads.py",
        [
            (
                """\
    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)
    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)
""",
                """\
    return x.contiguous().view(batch, n_heads, steps, per_head)  # (B, h, T, d_h)
""",
            )
        ],
        3,
        18,
        "multi",
        also=(18, 34),
        extra=[
            (
                "norm.py",
                "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
                "        return x / ((x * x).mean(dim=-1, keepdim=True).sqrt() + self.eps)",
            )
        ],
        also_parts=(5,),
    ),
    _case(
        "m13_tensor_length_decode_ignore",
        REF,
        "gqa.py",
        [
            (
                "        self.length += t\n",
                "        self.length = self.length + torch.tensor(t)\n",
            )
        ],
        6,
        50,
        "multi",
        also=(50, 60),
        extra=[
            (
                "charlm.py",
                "        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]",
                (
                    "        skip = (PAD_ID, IGNORE_INDEX)\n"
                    "        unknown = [i for i in ids if i not in skip and i not in self.itos]"
                ),
            ),
            (
                "charlm.py",
                '        return "".join(self.itos[i] for i in ids if i != PAD_ID)',
                '        return "".join(self.itos[i] for i in ids if i not in skip)',
            ),
        ],
        also_parts=(7,),
    ),
    _case(
        "m14_cache_drops_mask_shared_cache",
        REF,
        "block.py",
        [
            (
                "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                (
                    "        attn_mask = None if cache is not None else mask  # the cache is causal\n"
                    "        h = x + self.attn(self.ln1(x), mask=attn_mask, cache=cache)"
                ),
            )
        ],
        5,
        32,
        "multi",
        also=(32, 74),
        extra=[
            (
                "charlm.py",
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
            batch,
            attn.n_heads,
            self.max_len,
            attn.d_head,
            device=weight.device,
            dtype=weight.dtype,
        )
        return [cache] * self.n_layers
""",
            )
        ],
        also_parts=(7,),
    ),
]

FIFTH = tuple(CASES)
