"""A held-out set of student solutions, written without sight of the grader's mistake catalogue.

Each case is the reference solution (``solutions/transformer_hw``) or Alice's correct solution in
another style (``examples/submissions/alice_alternative_style/transformer_hw``) with a few exact
text edits. A wrong case names the part whose own code it breaks and the description a good
diagnosis should give (``None`` when the mistake is not one the grader can name); a correct case
(kind ``"correct"``) must keep full marks. ``check_heldout.py`` applies every case and runs the
graded tests of its parts.

Kinds: ``rewritten`` (a known mistake written unusually), ``partial`` (only in one branch),
``moved`` (in a helper, the caller or another class), ``refactor`` (beside a harmless refactor),
``unknown`` (not a named mistake), ``multi`` (bugs in several parts: ``expected`` names the first,
``also`` all of them), ``correct``.
"""

from dataclasses import dataclass

KINDS = ("rewritten", "partial", "moved", "refactor", "unknown", "multi", "correct")
BASES = {
    "reference": "solutions",
    "alice": "examples/submissions/alice_alternative_style",
}


@dataclass(frozen=True)
class Case:
    """One submission: ``base`` with ``edits`` (old, new) applied to ``file`` and ``extra``
    (file, old, new) edits to other modules; every old text occurs exactly once. ``also_parts``:
    the other parts a ``multi`` case breaks. ``select``: a pytest ``-k`` expression naming the
    part 7 tests the checker runs for it (part 7's tests are slow; all of them when empty)."""

    name: str
    base: str
    file: str
    edits: tuple[tuple[str, str], ...]
    part: int
    expected: str | None
    kind: str
    also: tuple[str, ...] = ()
    extra: tuple[tuple[str, str, str], ...] = ()
    also_parts: tuple[int, ...] = ()
    select: str = ""


# The descriptions, as the grader words them.
NO_SCALE = "scores not scaled by 1/sqrt(d_k)"
SCALE_DK = "scores scaled by 1/d_k instead of 1/sqrt(d_k)"
SCALE_DV = "scores scaled by 1/sqrt(d_v) instead of 1/sqrt(d_k)"
QUERY_AXIS = "softmax over the queries axis (dim=-2) instead of the keys (dim=-1)"
NO_MAX = "no max subtraction in the softmax: exp overflows on large scores"
INVERTED = "bool mask inverted (True treated as permitted; True means prohibited)"
NAN_ROW = "a fully masked row gives NaN instead of raising ValueError"
AFTER_ZEROED = (
    "mask applied after the softmax: the weights of prohibited keys are zeroed but the rows "
    "no longer sum to 1; mask the scores before the softmax"
)
AFTER_RENORM = (
    "the mask applied after the softmax, then renormalized: the prohibited keys' weights "
    "enter the softmax's sum first, so the permitted ones come out wrong"
)
IN_PLACE = (
    "an in-place operation on an argument (`x -= ...`, `x[...] = ...`, `x.add_(...)`): work on "
    "a new tensor"
)
CUT_GRAPH = (
    "a .detach() or a tensor built anew cuts the computation off from the inputs, so no "
    "gradient flows back"
)
MADE_ON_CPU = (
    "a tensor made on the CPU: torch.arange/zeros/ones/full/tensor(...) without device= stays "
    "there; pass the input's device"
)
DIAGONAL = "causal mask also hides the diagonal (a query must see its own key)"
NO_OFFSET = (
    "causal mask ignores the t_k > t_q offset (queries are the LAST t_q positions)"
)
PAD_OFF_BY_ONE = "padding mask off by one (the first padded position is lengths[b])"
MASK_ON_CPU = (
    "a mask made on the CPU: torch.arange(...) without device= (causal_mask's device, or the "
    "lengths' device)"
)
TRUE_DIVISION = "d_head = d_model / n_heads gives a float; use d_model // n_heads"
SPLIT_NO_T = "split_heads reshapes straight to (B, h, T, d_h) without the transpose"
MERGE_NO_T = "merge_heads reshapes (B, h, T, d_h) to (B, T, D) without the transpose"
SCALE_D_MODEL = "scores scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head)"
CROSS_FROM_X = "cross-attention takes keys and values from x instead of context"
HEADS_NONE_CAUSAL = (
    "mask=None with a cache treated as a causal mask; None means no masking"
)
FLOAT_AS_BOOL = (
    "a float mask turned into a bool one (nonzero = prohibited); a float mask is added to the "
    "scores"
)
ROTATE_HALF = (
    "half-split (rotate_half) pairing of i with i + d/2 instead of the interleaved pairs "
    "(x[2i], x[2i+1])"
)
SIN_SIGN = "rotation in the wrong direction (the sign of sin is flipped)"
FREQ = "frequencies base ** (-i / d_head) instead of base ** (-2 i / d_head)"
ROPE_FLOAT32 = "dtype=None taken as a fixed float32; it means torch.get_default_dtype()"
POSITIONS_IGNORED = "positions ignored (arange(T) used instead)"
RESIDUAL = "the residual adds the normalized tensor (h = ln1(x) + attn(ln1(x))); add the incoming x"
POST_ORDER = (
    "the norms come after the additions (post-norm order) in the pre-norm block"
)
BLOCK_NONE_CAUSAL = "mask=None treated as a causal mask; None means no masking"
CACHE_NO_MASK = "the mask is not passed on to attn when a cache is given"
UNBIASED = "LayerNorm with the unbiased variance (divide by d - 1); it must divide by d"
EPS_OUTSIDE = "eps added outside the square root: use sqrt(var + eps)"
RAW_MOMENTS = (
    "the variance taken as E[x^2] - E[x]^2, which loses the digits of rows far from zero; take "
    "the mean of (x - mean)^2"
)
RMS_CENTRED = "RMSNorm subtracts the mean; it must not (that is LayerNorm)"
NORM_GRAD = (
    "the values are right but the gradient is not: an intermediate (a statistic) is "
    ".detach()ed or computed outside autograd"
)
NOT_PARAMETER = "a parameter kept as a buffer or a plain tensor never trains; make it an nn.Parameter"
ONLY_K_CHECKED = (
    "only k_new is checked; v_new needs the same dtype, device and shape checks"
)
TILED = "key/value heads tiled (repeat) instead of each repeated for its group (repeat_interleave)"
NO_FACTOR_2 = "the factor 2 is missing (keys AND values are cached)"
BYTES = "counts bytes (4 per float32 element), not elements"
CACHE_H_Q = (
    "the cache receives n_heads (repeated) key/value heads; append the n_kv_heads heads before "
    "repeating them"
)
PARTIAL_WRITE = (
    "the overflowing append wrote the positions that fit; an append that overflows must write "
    "nothing"
)
KV_NOT_CROSS = "k_new and v_new are each checked, but not against each other"
ROPE_ON_V = "RoPE rotates the values too; it rotates queries and keys only"
NO_ADVANCE = "append does not advance length"
NO_ROPE_OFFSET = (
    "RoPE positions not offset by the cache length: with a cache, q and k sit at cache.length + "
    "arange(T)"
)
BASE_IGNORED = "rope_base ignored: RoPE used the default base 10000"
LENGTH_TENSOR = "length kept as a tensor: keep an int (add k_new.shape[2] to it)"
CACHE_DEFAULT_DTYPE = "the cache's dtype follows torch.get_default_dtype() instead of the dtype it is given"
REFUSES_FULL = (
    "append refuses to fill the cache up to max_len exactly (it overflows only when length + t "
    "> max_len)"
)
EMPTY_ONLY_MEAN = "the check for no real target made only under reduction='mean'"
LOG_SOFTMAX = "the log of a softmax: the softmax underflows to 0 on logits far apart, and its log is -inf"
TWO_PASSES = "evaluate needs more of its batches than one pass (a second loop, len() or indexing)"
NO_EVAL = "model.eval() is not called before the loop"
BUILDS_GRAPH = "evaluate builds a graph: run its loop under torch.no_grad()"
CACHE_IGNORED = (
    "use_cache is ignored (or defaults to False): with it, make the caches and feed only the "
    "newest token"
)
PROMPT_BY_TOKEN = (
    "the prompt fed to the model token by token instead of in one forward pass"
)
DECODE_IGNORE = "decode skips IGNORE_INDEX as well as PAD_ID; only PAD_ID is skipped"
ID_ZERO = "a character got id 0, which is PAD_ID: ids must start at 1"
LEFT_PAD = "left padding: pad at the END of each row (right padding)"
PAD_CLASS_0 = "padding scored as a target of class 0 instead of being ignored"
BATCH_MEANS = "mean of batch means (the notebook's epoch average) instead of total loss / total tokens"
STAYS_EVAL = "evaluate leaves the model in eval mode (restore the previous mode)"
NO_FINALLY = "the mode is restored after the loop, not in a finally: block"
HARD_128 = "a size hard-coded to 128 (mask, position table, cache) instead of max_len"
REFEEDS = "cached generation re-feeds the whole sequence, not only the newest token"
PAD_NOT_EXCLUDED = (
    "PAD_ID's logit is not excluded before sampling or argmax (set it to -inf)"
)
VIEW = "`.view(...)` on a tensor that is not contiguous: use `.reshape(...)` instead"
VOCAB_CASE = "the vocabulary is not the text's own characters (changed case?)"
SHARED_CACHE = "one KVCache shared by every block ([KVCache(...)] * n_layers); each block needs its own"
LOSS_AFTER = (
    "train_loss measured after the epoch's updates instead of averaged over the epoch's batches "
    "as they train"
)
NOT_RESET = "the running training loss is not reset at each epoch"
ZERO_GRAD_ONCE = (
    "zero_grad called once per epoch, not before each batch's backward (the gradients of the "
    "epoch's batches add up)"
)
STEP_AFTER = (
    "optimizer.step() after the batch loop: only the last batch's gradients are applied"
)
LR = "the default lr is not 1e-3"
PROMPT_CAST = "a prompt that is not a 1-D tensor of an integer dtype raises ValueError; never cast it"
TEMPERATURE_GREEDY = (
    "temperature <= 0 is only an error when sampling (greedy ignores it)"
)
ZERO_STILL_ONE = "max_new_tokens=0 still generated a token: the prompt alone comes back"
ZERO_REFUSED = (
    "max_new_tokens=0 is refused: the prompt followed by 0 new ids is the prompt"
)
TRUNCATED = "the distribution is truncated (top-k or top-p) before sampling; sample from all of it"
TEMPERATURE_DEFAULT = "the default temperature is not 1.0"
INIT_DEFAULT = "a default of CharLM.__init__ differs from SPEC.md's"
EVAL_NOT_MOVED = "evaluate's batches not moved to the model's device"
PROMPT_NOT_MOVED = "generate's prompt not moved to the model's device"


REWRITTEN = (
    Case(
        "einsum_scores_unscaled",
        "reference",
        "attention.py",
        (
            (
                "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                'scores = torch.einsum("...qd,...kd->...qk", q, k)',
            ),
        ),
        1,
        NO_SCALE,
        "rewritten",
    ),
    Case(
        "alice_scale_by_inverse_power",
        "alice",
        "attention.py",
        (("/ math.sqrt(d_k)  # (..., Tq, Tk)", "* d_k ** -1.0  # (..., Tq, Tk)"),),
        1,
        SCALE_DK,
        "rewritten",
    ),
    Case(
        "scale_from_value_width",
        "reference",
        "attention.py",
        (("/ math.sqrt(q.shape[-1])  # (..., Tq, Tk)", "/ math.sqrt(v.size(-1))"),),
        1,
        SCALE_DV,
        "rewritten",
    ),
    Case(
        "softmax_axis_counted_from_front",
        "reference",
        "attention.py",
        (
            (
                "weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
                "weights = softmax(scores, dim=scores.dim() - 2)",
            ),
        ),
        1,
        QUERY_AXIS,
        "rewritten",
    ),
    Case(
        "alice_cpu_fill_tensor",
        "alice",
        "attention.py",
        (
            (
                "return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
                (
                    "return torch.where(mask, torch.full(scores.shape, _NEG_INF, "
                    "dtype=scores.dtype), scores)"
                ),
            ),
        ),
        1,
        MADE_ON_CPU,
        "rewritten",
    ),
    Case(
        "alice_weights_rebuilt_from_list",
        "alice",
        "attention.py",
        (
            (
                "weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
                (
                    "weights = softmax(torch.tensor(scores.tolist(), dtype=scores.dtype, "
                    "device=scores.device), dim=-1)"
                ),
            ),
        ),
        1,
        CUT_GRAPH,
        "rewritten",
    ),
    Case(
        "causal_not_strictly_before",
        "reference",
        "masks.py",
        (
            (
                "return key_pos > query_pos  # (t_q, t_k)",
                "return ~(key_pos < query_pos)",
            ),
        ),
        2,
        DIAGONAL,
        "rewritten",
    ),
    Case(
        "alice_padding_limit_shifted",
        "alice",
        "masks.py",
        (
            (
                "limit = lengths.to(torch.long).unsqueeze(1).expand(batch, t)",
                "limit = (lengths.to(torch.long) + 1).unsqueeze(1).expand(batch, t)",
            ),
        ),
        2,
        PAD_OFF_BY_ONE,
        "rewritten",
    ),
    Case(
        "split_heads_single_reshape",
        "reference",
        "heads.py",
        (
            (
                (
                    "x = x.reshape(batch, t, n_heads, d_model // n_heads)  # (B, T, h, d_h)\n"
                    "    return x.transpose(1, 2)  # (B, h, T, d_h)"
                ),
                "return x.reshape(batch, n_heads, t, d_model // n_heads)",
            ),
        ),
        3,
        SPLIT_NO_T,
        "rewritten",
    ),
    Case(
        "alice_d_head_float_division",
        "alice",
        "heads.py",
        (
            (
                "self.d_head = d_model // n_heads",
                "self.d_head = float(d_model) / n_heads",
            ),
        ),
        3,
        TRUE_DIVISION,
        "rewritten",
    ),
    Case(
        "negated_angles",
        "reference",
        "rope.py",
        (
            (
                "angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
                "angles = -rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
            ),
        ),
        4,
        SIN_SIGN,
        "rewritten",
    ),
    Case(
        "alice_pairs_counted_one_by_one",
        "alice",
        "rope.py",
        (
            (
                "pair = torch.arange(0, d_head, 2, device=positions.device, dtype=work)  # 2i",
                "pair = torch.arange(0, d_head // 2, device=positions.device, dtype=work)",
            ),
        ),
        4,
        FREQ,
        "rewritten",
    ),
    Case(
        "alice_arange_without_device",
        "alice",
        "rope.py",
        (
            (
                "pair = torch.arange(0, d_head, 2, device=positions.device, dtype=work)  # 2i",
                "pair = torch.arange(0, d_head, 2, dtype=work)  # 2i",
            ),
        ),
        4,
        MADE_ON_CPU,
        "rewritten",
    ),
    Case(
        "tensor_var_default",
        "reference",
        "norm.py",
        (
            (
                "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased",
                "var = x.var(dim=-1, keepdim=True)",
            ),
        ),
        5,
        UNBIASED,
        "rewritten",
    ),
    Case(
        "alice_eps_after_sqrt",
        "alice",
        "norm.py",
        (
            (
                "return (x - centre) * torch.rsqrt(spread + self.eps)",
                "return (x - centre) / (spread.sqrt() + self.eps)",
            ),
        ),
        5,
        EPS_OUTSIDE,
        "rewritten",
    ),
    Case(
        "alice_bias_registered_as_buffer",
        "alice",
        "norm.py",
        (
            (
                "self.bias = nn.Parameter(torch.zeros(d))",
                'self.register_buffer("bias", torch.zeros(d))',
            ),
        ),
        5,
        NOT_PARAMETER,
        "rewritten",
    ),
    Case(
        "rms_statistic_under_no_grad",
        "reference",
        "norm.py",
        (
            (
                "rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
                (
                    "with torch.no_grad():\n"
                    "            rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)"
                ),
            ),
        ),
        5,
        NORM_GRAD,
        "rewritten",
    ),
    Case(
        "alice_block_rebinds_x_to_its_norm",
        "alice",
        "block.py",
        (
            (
                "mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                "x = self.ln1(x)\n        mixed = x + self.attn(x, mask=mask, cache=cache)",
            ),
        ),
        5,
        RESIDUAL,
        "rewritten",
    ),
    Case(
        "kv_heads_broadcast_then_flattened_in_wrong_order",
        "reference",
        "gqa.py",
        (
            (
                "x = x[:, :, None].expand(batch, n_kv, n_rep, t, d)",
                "x = x[:, None].expand(batch, n_rep, n_kv, t, d)",
            ),
        ),
        6,
        TILED,
        "rewritten",
    ),
    Case(
        "alice_numel_starts_from_bytes",
        "alice",
        "gqa.py",
        (("    total = 2\n", "    total = 2 * 4\n"),),
        6,
        BYTES,
        "rewritten",
    ),
    Case(
        "room_left_compared_inclusively",
        "reference",
        "gqa.py",
        (
            (
                "if self.length + t > self.max_len:",
                "if self.max_len - self.length <= t:",
            ),
        ),
        6,
        REFUSES_FULL,
        "rewritten",
    ),
    Case(
        "shapes_compared_by_rank_only",
        "reference",
        "gqa.py",
        (("if k_new.shape != v_new.shape:", "if k_new.dim() != v_new.dim():"),),
        6,
        KV_NOT_CROSS,
        "rewritten",
    ),
    Case(
        "loss_as_nll_of_softmax",
        "reference",
        "charlm.py",
        (
            (
                "return F.cross_entropy(\n        logits.reshape(-1, logits.shape[-1]),",
                (
                    "return F.nll_loss(\n"
                    "        torch.log(torch.softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)),"
                ),
            ),
        ),
        7,
        LOG_SOFTMAX,
        "rewritten",
        select="test_lm_loss",
    ),
    Case(
        "alice_ids_from_list_index",
        "alice",
        "charlm.py",
        (
            (
                "self.stoi = {ch: n for n, ch in enumerate(self.chars, start=1)}",
                "self.stoi = {ch: self.chars.index(ch) for ch in self.chars}",
            ),
        ),
        7,
        ID_ZERO,
        "rewritten",
        select="test_char_tokenizer",
    ),
    Case(
        "evaluate_restores_mode_instead_of_eval",
        "reference",
        "charlm.py",
        (
            (
                "    model.eval()\n    total, count = 0.0, 0",
                "    model.train(was_training)\n    total, count = 0.0, 0",
            ),
        ),
        7,
        NO_EVAL,
        "rewritten",
        select="test_evaluate",
    ),
    Case(
        "evaluate_under_enable_grad",
        "reference",
        "charlm.py",
        (
            (
                "with torch.no_grad():\n            for inputs, targets in batches:",
                "with torch.enable_grad():\n            for inputs, targets in batches:",
            ),
        ),
        7,
        BUILDS_GRAPH,
        "rewritten",
        select="test_evaluate",
    ),
    Case(
        "mode_restored_after_reraise",
        "reference",
        "charlm.py",
        (
            (
                "    finally:\n        model.train(was_training)\n    if count == 0:",
                (
                    "    except Exception:\n        raise\n    model.train(was_training)\n"
                    "    if count == 0:"
                ),
            ),
        ),
        7,
        NO_FINALLY,
        "rewritten",
        select="test_evaluate",
    ),
    Case(
        "step_once_after_the_batches",
        "reference",
        "charlm.py",
        (
            ("            optimizer.step()\n", ""),
            (
                '        if count == 0:\n            raise ValueError("train_batches',
                (
                    "        optimizer.step()\n        if count == 0:\n"
                    '            raise ValueError("train_batches'
                ),
            ),
        ),
        7,
        STEP_AFTER,
        "rewritten",
        select="test_train",
    ),
    Case(
        "alice_train_loss_from_evaluate",
        "alice",
        "charlm.py",
        (
            (
                '"train_loss": running / tokens,',
                '"train_loss": evaluate(model, train_batches),',
            ),
        ),
        7,
        LOSS_AFTER,
        "rewritten",
        select="test_train",
    ),
    Case(
        "running_totals_before_the_epochs",
        "reference",
        "charlm.py",
        (
            (
                (
                    "    for epoch in range(1, epochs + 1):\n        model.train()\n"
                    "        total, count = 0.0, 0\n"
                ),
                (
                    "    total, count = 0.0, 0\n    for epoch in range(1, epochs + 1):\n"
                    "        model.train()\n"
                ),
            ),
        ),
        7,
        NOT_RESET,
        "rewritten",
        select="test_train",
    ),
    Case(
        "cache_built_but_never_used",
        "reference",
        "charlm.py",
        (
            (
                "caches = model.make_caches() if use_cache else None",
                "caches = None",
            ),
            ("feed = new if use_cache else ids", "feed = ids"),
        ),
        7,
        CACHE_IGNORED,
        "rewritten",
        select="test_generate",
    ),
    Case(
        "cached_feed_grows",
        "reference",
        "charlm.py",
        (
            (
                "feed = new if use_cache else ids",
                "feed = torch.cat((feed, new)) if use_cache else ids",
            ),
        ),
        7,
        REFEEDS,
        "rewritten",
        select="test_generate",
    ),
    Case(
        "at_least_one_step",
        "reference",
        "charlm.py",
        (
            (
                "for _ in range(max_new_tokens):",
                "for _ in range(max(max_new_tokens, 1)):",
            ),
        ),
        7,
        ZERO_STILL_ONE,
        "rewritten",
        select="test_generate",
    ),
    Case(
        "alice_zero_new_tokens_refused",
        "alice",
        "charlm.py",
        (
            (
                "or max_new_tokens < 0:",
                "or not max_new_tokens > 0:",
            ),
        ),
        7,
        ZERO_REFUSED,
        "rewritten",
        select="test_generate",
    ),
    Case(
        "alice_temperature_checked_always",
        "alice",
        "charlm.py",
        (("if not greedy and not temperature > 0:", "if not temperature > 0:"),),
        7,
        TEMPERATURE_GREEDY,
        "rewritten",
        select="test_generate",
    ),
    Case(
        "alice_flatten_by_view",
        "alice",
        "charlm.py",
        (
            (
                "log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)",
                "log_probs = F.log_softmax(logits.view(-1, vocab), dim=-1)",
            ),
        ),
        7,
        VIEW,
        "rewritten",
        select="test_lm_loss",
    ),
    Case(
        "decode_filters_ignore_index",
        "reference",
        "charlm.py",
        (
            (
                "ids = [int(i) for i in ids]",
                "ids = [int(i) for i in ids if int(i) != IGNORE_INDEX]",
            ),
        ),
        7,
        DECODE_IGNORE,
        "rewritten",
        select="test_char_tokenizer",
    ),
)

PARTIAL = (
    Case(
        "alice_inverted_only_for_2d_masks",
        "alice",
        "attention.py",
        (
            (
                "return torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
                (
                    "return torch.where(mask if mask.dim() > 2 else ~mask, "
                    "torch.full_like(scores, _NEG_INF), scores)"
                ),
            ),
        ),
        1,
        INVERTED,
        "partial",
    ),
    Case(
        "max_subtracted_only_in_float64",
        "reference",
        "attention.py",
        (
            (
                "exp = torch.exp(x - top)",
                "exp = torch.exp(x - top if x.dtype == torch.float64 else x)",
            ),
        ),
        1,
        NO_MAX,
        "partial",
    ),
    Case(
        "dead_rows_checked_only_unbatched",
        "reference",
        "attention.py",
        (
            (
                "if torch.isneginf(top).any():",
                "if x.dim() <= 2 and torch.isneginf(top).any():",
            ),
            (
                "if torch.isneginf(scores).all(dim=-1).any():",
                "if scores.dim() <= 2 and torch.isneginf(scores).all(dim=-1).any():",
            ),
        ),
        1,
        NAN_ROW,
        "partial",
    ),
    Case(
        "offset_only_for_one_extra_key",
        "reference",
        "masks.py",
        (
            (
                "[:, None] + (t_k - t_q)  # (t_q, 1)",
                "[:, None] + (t_k - t_q if t_k - t_q == 1 else 0)",
            ),
        ),
        2,
        NO_OFFSET,
        "partial",
    ),
    Case(
        "heads_causal_default_with_cache",
        "reference",
        "heads.py",
        (
            (
                "from transformer_hw.attention import scaled_dot_product_attention",
                (
                    "from transformer_hw.attention import scaled_dot_product_attention\n"
                    "from transformer_hw.masks import causal_mask"
                ),
            ),
            (
                "k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)",
                (
                    "k, v = cache.append(k, v)  # (B, h, cached + Tk, d_h)\n"
                    "            if mask is None:\n"
                    "                mask = causal_mask(q.shape[2], k.shape[2], device=q.device)"
                ),
            ),
        ),
        3,
        HEADS_NONE_CAUSAL,
        "partial",
    ),
    Case(
        "float32_masks_binarized",
        "reference",
        "heads.py",
        (
            (
                "out, _ = scaled_dot_product_attention(q, k, v, mask)",
                (
                    "if mask is not None and mask.dtype == torch.float32:\n"
                    "            mask = mask != 0\n"
                    "        out, _ = scaled_dot_product_attention(q, k, v, mask)"
                ),
            ),
        ),
        3,
        FLOAT_AS_BOOL,
        "partial",
    ),
    Case(
        "values_only_from_x",
        "reference",
        "heads.py",
        (
            (
                "v = split_heads(self.v_proj(source), self.n_heads)",
                "v = split_heads(self.v_proj(x), self.n_heads)",
            ),
        ),
        3,
        CROSS_FROM_X,
        "partial",
    ),
    Case(
        "float32_angles_for_integer_positions",
        "reference",
        "rope.py",
        (
            (
                "dtype = torch.get_default_dtype() if dtype is None else dtype",
                (
                    "if dtype is None:\n"
                    "        integral = not torch.as_tensor(positions).is_floating_point()\n"
                    "        dtype = torch.float32 if integral else torch.get_default_dtype()"
                ),
            ),
        ),
        4,
        ROPE_FLOAT32,
        "partial",
    ),
    Case(
        "positions_ignored_in_float64",
        "reference",
        "rope.py",
        (
            (
                "angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
                (
                    "if x.dtype == torch.float64:\n"
                    "        positions = torch.arange(t, device=x.device)\n"
                    "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)"
                ),
            ),
        ),
        4,
        POSITIONS_IGNORED,
        "partial",
    ),
    Case(
        "mask_dropped_once_cache_has_content",
        "reference",
        "block.py",
        (
            (
                "h = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                (
                    "keep = cache is None or cache.length == 0\n"
                    "        h = x + self.attn(self.ln1(x), mask=mask if keep else None, cache=cache)"
                ),
            ),
        ),
        5,
        CACHE_NO_MASK,
        "partial",
    ),
    Case(
        "pre_norm_causal_default_without_cache",
        "reference",
        "block.py",
        (
            (
                "from transformer_hw.heads import MultiHeadAttention",
                (
                    "from transformer_hw.heads import MultiHeadAttention\n"
                    "from transformer_hw.masks import causal_mask"
                ),
            ),
            (
                "h = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
                (
                    "if mask is None and cache is None:\n"
                    "            mask = causal_mask(x.shape[1], device=x.device)\n"
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)"
                ),
            ),
        ),
        5,
        BLOCK_NONE_CAUSAL,
        "partial",
    ),
    Case(
        "only_keys_dtype_checked",
        "reference",
        "gqa.py",
        (
            (
                "if new.dtype != self.k.dtype or new.device != self.k.device:",
                (
                    'if name == "k_new" and (\n'
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
        "rope_offset_skipped_for_single_tokens",
        "reference",
        "gqa.py",
        (
            (
                "start = 0 if cache is None else cache.length",
                "start = 0 if cache is None or t == 1 else cache.length",
            ),
        ),
        6,
        NO_ROPE_OFFSET,
        "partial",
    ),
    Case(
        "values_rotated_when_cached",
        "reference",
        "gqa.py",
        (
            (
                "k = apply_rope(k, positions, self.rope_base)",
                (
                    "k = apply_rope(k, positions, self.rope_base)\n"
                    "        if cache is not None:\n"
                    "            v = apply_rope(v, positions, self.rope_base)"
                ),
            ),
        ),
        6,
        ROPE_ON_V,
        "partial",
    ),
    Case(
        "length_becomes_tensor_for_chunks",
        "reference",
        "gqa.py",
        (("self.length += t", "self.length += torch.tensor(t) if t > 1 else t"),),
        6,
        LENGTH_TENSOR,
        "partial",
    ),
    Case(
        "float32_cache_follows_default",
        "reference",
        "gqa.py",
        (
            (
                "batch, n_kv_heads, max_len, d_head, device=device, dtype=dtype",
                (
                    "batch,\n            n_kv_heads,\n            max_len,\n            d_head,\n"
                    "            device=device,\n"
                    "            dtype=torch.get_default_dtype() if dtype == torch.float32 else dtype,"
                ),
            ),
        ),
        6,
        CACHE_DEFAULT_DTYPE,
        "partial",
    ),
    Case(
        "pad_excluded_only_when_sampling",
        "reference",
        "charlm.py",
        (
            (
                'logits[PAD_ID] = float("-inf")',
                'if not greedy:\n                    logits[PAD_ID] = float("-inf")',
            ),
        ),
        7,
        PAD_NOT_EXCLUDED,
        "partial",
        select="test_generate",
    ),
    Case(
        "empty_targets_checked_for_mean",
        "reference",
        "charlm.py",
        (
            (
                "if not (targets != IGNORE_INDEX).any():",
                'if reduction == "mean" and not (targets != IGNORE_INDEX).any():',
            ),
        ),
        7,
        EMPTY_ONLY_MEAN,
        "partial",
        select="test_lm_loss",
    ),
    Case(
        "integral_float_prompt_accepted",
        "reference",
        "charlm.py",
        (
            (
                "or prompt.dtype.is_floating_point\n",
                (
                    "or (\n"
                    "            prompt.dtype.is_floating_point\n"
                    "            and bool((prompt != prompt.round()).any())\n"
                    "        )\n"
                ),
            ),
        ),
        7,
        PROMPT_CAST,
        "partial",
        select="test_generate",
    ),
    Case(
        "alice_prompt_token_by_token_with_cache",
        "alice",
        "charlm.py",
        (
            (
                "last = model(torch.tensor([ids], device=device), caches)[0, -1]",
                (
                    "if caches is None:\n"
                    "                    last = model(torch.tensor([ids], device=device))[0, -1]\n"
                    "                else:\n"
                    "                    for token in ids:\n"
                    "                        last = model(\n"
                    "                            torch.tensor([[token]], device=device), caches\n"
                    "                        )[0, -1]"
                ),
            ),
        ),
        7,
        PROMPT_BY_TOKEN,
        "partial",
        select="test_generate",
    ),
)

MOVED = (
    Case(
        "query_scaled_in_place_by_helper",
        "reference",
        "attention.py",
        (
            (
                "def scaled_dot_product_attention(",
                (
                    "def _scaled(q):\n    q.mul_(q.shape[-1] ** -0.5)\n    return q\n\n\n"
                    "def scaled_dot_product_attention("
                ),
            ),
            (
                "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                "scores = _scaled(q) @ k.transpose(-2, -1)",
            ),
        ),
        1,
        IN_PLACE,
        "moved",
    ),
    Case(
        "attention_mask_calls_causal_without_device",
        "reference",
        "masks.py",
        (
            (
                "mask = mask | causal_mask(t, device=keys_padded.device)",
                "mask = mask | causal_mask(t)",
            ),
        ),
        2,
        MASK_ON_CPU,
        "moved",
    ),
    Case(
        "alice_normalize_helper_in_place",
        "alice",
        "norm.py",
        (
            (
                "return (x - centre) * torch.rsqrt(spread + self.eps)",
                "return x.sub_(centre).mul_(torch.rsqrt(spread + self.eps))",
            ),
        ),
        5,
        IN_PLACE,
        "moved",
    ),
    Case(
        "alice_grouped_queries_tiled",
        "alice",
        "gqa.py",
        (
            (
                "grouped_q = q.reshape(batch, groups, rep, steps, dh)",
                "grouped_q = q.reshape(batch, rep, groups, steps, dh).transpose(1, 2)",
            ),
            (
                "mixed = mixed.reshape(batch, self.n_heads, steps, dh)",
                "mixed = mixed.transpose(1, 2).reshape(batch, self.n_heads, steps, dh)",
            ),
        ),
        6,
        TILED,
        "moved",
    ),
    Case(
        "kv_repeated_before_the_cache",
        "reference",
        "gqa.py",
        (
            (
                "k = apply_rope(k, positions, self.rope_base)",
                (
                    "n_rep = self.n_heads // self.n_kv_heads\n"
                    "        k = repeat_kv(apply_rope(k, positions, self.rope_base), n_rep)\n"
                    "        v = repeat_kv(v, n_rep)"
                ),
            ),
            (
                "n_rep = self.n_heads // self.n_kv_heads\n        mask",
                "n_rep = 1\n        mask",
            ),
        ),
        6,
        CACHE_H_Q,
        "moved",
    ),
    Case(
        "gqa_mask_without_device",
        "reference",
        "gqa.py",
        (
            (
                "mask = causal_mask(t, k.shape[2], device=x.device)",
                "mask = causal_mask(t, k.shape[2])",
            ),
        ),
        6,
        MADE_ON_CPU,
        "moved",
    ),
    Case(
        "generate_reuses_the_first_cache",
        "reference",
        "charlm.py",
        (
            (
                "caches = model.make_caches() if use_cache else None",
                "caches = model.make_caches()[:1] * model.n_layers if use_cache else None",
            ),
        ),
        7,
        SHARED_CACHE,
        "moved",
        select="test_generate",
    ),
    Case(
        "alice_restore_helper_sets_eval",
        "alice",
        "charlm.py",
        (("        m.training = flag\n", "        m.training = False\n"),),
        7,
        STAYS_EVAL,
        "moved",
        select="test_evaluate",
    ),
    Case(
        "caches_sized_128",
        "reference",
        "charlm.py",
        (("                self.max_len,\n", "                128,\n"),),
        7,
        HARD_128,
        "moved",
        select="test_charlm or test_generate",
    ),
    Case(
        "alice_pick_keeps_top_five",
        "alice",
        "charlm.py",
        (
            (
                "    return int(torch.argmax(logits / temperature + gumbel))",
                (
                    "    kept = logits.topk(min(5, logits.numel())).values[-1]\n"
                    '    logits = torch.where(logits >= kept, logits, float("-inf"))\n'
                    "    return int(torch.argmax(logits / temperature + gumbel))"
                ),
            ),
        ),
        7,
        TRUNCATED,
        "moved",
        select="test_generate",
    ),
    Case(
        "loss_clamps_ignored_targets",
        "reference",
        "charlm.py",
        (
            (
                "        targets.reshape(-1),\n",
                "        targets.reshape(-1).clamp(min=0),\n",
            ),
        ),
        7,
        PAD_CLASS_0,
        "moved",
        select="test_lm_loss",
    ),
    Case(
        "forward_positions_on_cpu",
        "reference",
        "charlm.py",
        (
            (
                "positions = torch.arange(start, start + t, device=idx.device)",
                "positions = torch.arange(start, start + t)",
            ),
        ),
        7,
        MADE_ON_CPU,
        "moved",
        select="test_charlm",
    ),
)

REFACTOR = (
    Case(
        "bool_mask_zeroed_after_softmax",
        "reference",
        "attention.py",
        (
            (
                (
                    "        if mask.dtype == torch.bool:\n"
                    '            scores = scores.masked_fill(mask, float("-inf"))\n'
                    "        else:\n"
                    "            scores = scores + mask"
                ),
                "        if mask.dtype != torch.bool:\n            scores = scores + mask",
            ),
            (
                (
                    "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                    "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)"
                ),
                (
                    "    weights = softmax(scores, dim=-1)\n"
                    "    if mask is not None and mask.dtype == torch.bool:\n"
                    "        weights = weights.masked_fill(mask, 0.0)\n"
                    "    out = torch.matmul(weights, v)\n"
                    "    return out, weights"
                ),
            ),
        ),
        1,
        AFTER_ZEROED,
        "refactor",
    ),
    Case(
        "bool_mask_renormalized_after_softmax",
        "reference",
        "attention.py",
        (
            (
                (
                    "        if mask.dtype == torch.bool:\n"
                    '            scores = scores.masked_fill(mask, float("-inf"))\n'
                    "        else:\n"
                    "            scores = scores + mask"
                ),
                "        scores = scores if mask.dtype == torch.bool else scores + mask",
            ),
            (
                (
                    "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
                    "    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)"
                ),
                (
                    "    weights = softmax(scores, dim=-1)\n"
                    "    if mask is not None and mask.dtype == torch.bool:\n"
                    "        kept = weights * (~mask).to(weights.dtype)\n"
                    "        weights = kept / kept.sum(dim=-1, keepdim=True)\n"
                    "    return torch.matmul(weights, v), weights"
                ),
            ),
        ),
        1,
        AFTER_RENORM,
        "refactor",
    ),
    Case(
        "alice_causal_by_comparison_without_shift",
        "alice",
        "masks.py",
        (
            (
                (
                    "    shift = t_k - t_q\n"
                    "    everything = torch.ones(t_q, t_k, dtype=torch.bool, device=device)\n"
                    "    return everything.triu(diagonal=shift + 1)"
                ),
                (
                    "    rows = torch.arange(t_q, device=device)[:, None]\n"
                    "    cols = torch.arange(t_k, device=device)[None, :]\n"
                    "    return cols > rows"
                ),
            ),
        ),
        2,
        NO_OFFSET,
        "refactor",
    ),
    Case(
        "heads_inline_attention_model_width_scale",
        "reference",
        "heads.py",
        (
            (
                "from transformer_hw.attention import scaled_dot_product_attention",
                "import math\n\nfrom transformer_hw.attention import softmax",
            ),
            (
                "out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, Tq, d_h)",
                (
                    "scores = q @ k.transpose(-2, -1) / math.sqrt(self.n_heads * self.d_head)\n"
                    "        if mask is not None and mask.dtype == torch.bool:\n"
                    '            scores = scores.masked_fill(mask, float("-inf"))\n'
                    "        elif mask is not None:\n"
                    "            scores = scores + mask\n"
                    "        out = softmax(scores, dim=-1) @ v"
                ),
            ),
        ),
        3,
        SCALE_D_MODEL,
        "refactor",
    ),
    Case(
        "rope_by_concatenated_halves",
        "reference",
        "rope.py",
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
                    "    a, b = x.chunk(2, dim=-1)\n"
                    "    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)"
                ),
            ),
        ),
        4,
        ROTATE_HALF,
        "refactor",
    ),
    Case(
        "layer_norm_by_moments_and_addcmul",
        "reference",
        "norm.py",
        (
            (
                (
                    "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
                    "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"
                ),
                (
                    "var = (x * x).mean(dim=-1, keepdim=True) - mean * mean\n"
                    "        centred = x - mean\n"
                    "        return torch.addcmul(\n"
                    "            self.bias, centred / torch.sqrt(var + self.eps), self.weight\n"
                    "        )"
                ),
            ),
        ),
        5,
        RAW_MOMENTS,
        "refactor",
    ),
    Case(
        "append_by_copy_without_advancing",
        "reference",
        "gqa.py",
        (
            (
                (
                    "        self.k[:, :, self.length : self.length + t] = k_new\n"
                    "        self.v[:, :, self.length : self.length + t] = v_new\n"
                    "        self.length += t\n"
                    "        return self.k[:, :, : self.length], self.v[:, :, : self.length]"
                ),
                (
                    "        end = self.length + t\n"
                    "        self.k[:, :, self.length : end].copy_(k_new)\n"
                    "        self.v[:, :, self.length : end].copy_(v_new)\n"
                    "        return self.k[:, :, :end], self.v[:, :, :end]"
                ),
            ),
        ),
        6,
        NO_ADVANCE,
        "refactor",
    ),
    Case(
        "append_writes_what_fits_first",
        "reference",
        "gqa.py",
        (
            (
                "        t = k_new.shape[2]\n        if self.length + t > self.max_len:",
                (
                    "        t = k_new.shape[2]\n"
                    "        room = self.max_len - self.length\n"
                    "        self.k[:, :, self.length : self.length + min(t, room)] = k_new[:, :, :room]\n"
                    "        self.v[:, :, self.length : self.length + min(t, room)] = v_new[:, :, :room]\n"
                    "        if self.length + t > self.max_len:"
                ),
            ),
        ),
        6,
        PARTIAL_WRITE,
        "refactor",
    ),
    Case(
        "train_zero_grad_hoisted",
        "reference",
        "charlm.py",
        (
            (
                "        model.train()\n        total, count = 0.0, 0",
                "        model.train()\n        optimizer.zero_grad()\n        total, count = 0.0, 0",
            ),
            ("            optimizer.zero_grad()\n", ""),
            (
                "            total += loss.item() * real\n            count += real",
                "            total, count = total + loss.item() * real, count + real",
            ),
        ),
        7,
        ZERO_GRAD_ONCE,
        "refactor",
        select="test_train",
    ),
    Case(
        "evaluate_averages_batch_means",
        "reference",
        "charlm.py",
        (
            (
                (
                    "                if real:\n"
                    '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
                    "                    count += real"
                ),
                (
                    "                if real:\n"
                    "                    batch_mean = lm_loss(model(inputs), targets)\n"
                    "                    total, count = total + batch_mean.item(), count + 1"
                ),
            ),
        ),
        7,
        BATCH_MEANS,
        "refactor",
        select="test_evaluate",
    ),
    Case(
        "alice_evaluate_checks_len_first",
        "alice",
        "charlm.py",
        (
            (
                "    total, tokens = 0.0, 0\n    try:",
                (
                    "    total, tokens = 0.0, 0\n"
                    "    if len(batches) == 0:\n"
                    '        raise ValueError("no batches to evaluate")\n'
                    "    try:"
                ),
            ),
        ),
        7,
        TWO_PASSES,
        "refactor",
        select="test_evaluate",
    ),
    Case(
        "evaluate_moves_only_targets",
        "reference",
        "charlm.py",
        (
            (
                (
                    "for inputs, targets in batches:\n"
                    "                inputs, targets = inputs.to(device), targets.to(device)"
                ),
                "for inputs, targets in batches:\n                targets = targets.to(device)",
            ),
        ),
        7,
        EVAL_NOT_MOVED,
        "refactor",
        select="test_evaluate",
    ),
    Case(
        "generate_prompt_widened_in_place",
        "reference",
        "charlm.py",
        (("ids = prompt.to(device=device, dtype=torch.long)", "ids = prompt.long()"),),
        7,
        PROMPT_NOT_MOVED,
        "refactor",
        select="test_generate",
    ),
)

UNKNOWN = (
    Case(
        "softmax_global_max",
        "reference",
        "attention.py",
        (("top = x.amax(dim=dim, keepdim=True)", "top = x.amax()"),),
        1,
        None,
        "unknown",
    ),
    Case(
        "padding_mask_left_padded",
        "reference",
        "masks.py",
        (
            (
                "return positions >= lengths[:, None]  # (B, t)",
                "return positions < (t - lengths[:, None])",
            ),
        ),
        2,
        None,
        "unknown",
    ),
    Case(
        "heads_without_out_proj",
        "reference",
        "heads.py",
        (
            (
                "return self.out_proj(merge_heads(out))  # (B, Tq, D)",
                "return merge_heads(out)",
            ),
        ),
        3,
        None,
        "unknown",
    ),
    Case(
        "rope_positions_from_one",
        "reference",
        "rope.py",
        (
            (
                "angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
                "angles = rope_angles(positions + 1, x.shape[-1], base, dtype=x.dtype)",
            ),
        ),
        4,
        None,
        "unknown",
    ),
    Case(
        "feed_forward_gelu",
        "reference",
        "block.py",
        (
            (
                "return self.fc2(torch.relu(self.fc1(x)))",
                "return self.fc2(nn.functional.gelu(self.fc1(x)))",
            ),
        ),
        5,
        None,
        "unknown",
    ),
    Case(
        "gqa_causal_only_with_cache",
        "reference",
        "gqa.py",
        (
            (
                "mask = causal_mask(t, k.shape[2], device=x.device)",
                "mask = None if cache is None else causal_mask(t, k.shape[2], device=x.device)",
            ),
        ),
        6,
        None,
        "unknown",
    ),
    Case(
        "charlm_without_final_norm",
        "reference",
        "charlm.py",
        (("return self.head(self.ln_f(x))  # (B, T, V)", "return self.head(x)"),),
        7,
        None,
        "unknown",
        select="test_charlm",
    ),
)

MULTI = (
    Case(
        "softmax_unshifted_and_diagonal_hidden",
        "reference",
        "attention.py",
        (("exp = torch.exp(x - top)", "exp = torch.exp(x)"),),
        1,
        NO_MAX,
        "multi",
        also=(NO_MAX, DIAGONAL),
        extra=(
            ("masks.py", "return key_pos > query_pos", "return key_pos >= query_pos"),
        ),
        also_parts=(2,),
    ),
    Case(
        "merge_untransposed_and_post_norm_order",
        "reference",
        "heads.py",
        (
            (
                "return x.transpose(1, 2).reshape(batch, t, n_heads * d_head)",
                "return x.reshape(batch, t, n_heads * d_head)",
            ),
        ),
        3,
        MERGE_NO_T,
        "multi",
        also=(MERGE_NO_T, POST_ORDER),
        extra=(
            (
                "block.py",
                (
                    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                    "        return h + self.ffn(self.ln2(h))"
                ),
                (
                    "        h = self.ln1(x + self.attn(x, mask=mask, cache=cache))\n"
                    "        return self.ln2(h + self.ffn(h))"
                ),
            ),
        ),
        also_parts=(5,),
    ),
    Case(
        "frequency_halved_and_base_ignored",
        "reference",
        "rope.py",
        (
            (
                "inv_freq = base ** (-2.0 * pair / d_head)",
                "inv_freq = base ** (-pair / d_head)",
            ),
        ),
        4,
        FREQ,
        "multi",
        also=(FREQ, BASE_IGNORED),
        extra=(
            (
                "gqa.py",
                "q = apply_rope(q, positions, self.rope_base)",
                "q = apply_rope(q, positions)",
            ),
            (
                "gqa.py",
                "k = apply_rope(k, positions, self.rope_base)",
                "k = apply_rope(k, positions)",
            ),
        ),
        also_parts=(6,),
    ),
    Case(
        "alice_rms_centred_and_lr",
        "alice",
        "norm.py",
        (
            (
                "return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
                (
                    "x = x - x.mean(dim=-1, keepdim=True)\n"
                    "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)"
                ),
            ),
        ),
        5,
        RMS_CENTRED,
        "multi",
        also=(RMS_CENTRED, LR),
        extra=(("charlm.py", "epochs=1, lr=1e-3):", "epochs=1, lr=3e-4):"),),
        also_parts=(7,),
        select="test_train",
    ),
    Case(
        "numel_single_and_left_padding",
        "reference",
        "gqa.py",
        (
            (
                "return 2 * batch * n_layers * seq_len * n_kv_heads * d_head",
                "return batch * n_layers * seq_len * n_kv_heads * d_head",
            ),
        ),
        6,
        NO_FACTOR_2,
        "multi",
        also=(NO_FACTOR_2, LEFT_PAD),
        extra=(
            (
                "charlm.py",
                (
                    "        inputs[row, : len(s) - 1] = s[:-1]\n"
                    "        targets[row, : len(s) - 1] = s[1:]"
                ),
                (
                    "        inputs[row, t - (len(s) - 1) :] = s[:-1]\n"
                    "        targets[row, t - (len(s) - 1) :] = s[1:]"
                ),
            ),
        ),
        also_parts=(7,),
        select="test_lm_batch",
    ),
    Case(
        "alice_padding_off_by_one_float_mask_bool_and_lowercased_vocab",
        "alice",
        "masks.py",
        (("return where >= limit", "return where > limit"),),
        2,
        PAD_OFF_BY_ONE,
        "multi",
        also=(PAD_OFF_BY_ONE, FLOAT_AS_BOOL, VOCAB_CASE),
        extra=(
            (
                "heads.py",
                "mixed, _ = scaled_dot_product_attention(q, k, v, mask)",
                (
                    "if mask is not None and mask.is_floating_point():\n"
                    "            mask = mask != 0\n"
                    "        mixed, _ = scaled_dot_product_attention(q, k, v, mask)"
                ),
            ),
            (
                "charlm.py",
                "self.chars = sorted(set(text))",
                "self.chars = sorted(set(text.lower()))",
            ),
        ),
        also_parts=(3, 7),
        select="test_char_tokenizer",
    ),
    Case(
        "alice_default_temperature_and_init_default",
        "alice",
        "charlm.py",
        (
            ("temperature=1.0, greedy=False", "temperature=0.8, greedy=False"),
            ("d_ff=64, max_len=128):", "d_ff=256, max_len=128):"),
        ),
        7,
        TEMPERATURE_DEFAULT,
        "multi",
        also=(TEMPERATURE_DEFAULT, INIT_DEFAULT),
        select="test_generate or test_charlm",
    ),
)

CORRECT = (
    Case(
        "einsum_attention",
        "reference",
        "attention.py",
        (
            (
                "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
                'scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])',
            ),
            (
                "return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)",
                'return torch.einsum("...qk,...kd->...qd", weights, v), weights',
            ),
        ),
        1,
        None,
        "correct",
    ),
    Case(
        "complex_rope",
        "reference",
        "rope.py",
        (
            (
                (
                    "    cos, sin = angles.cos(), angles.sin()\n"
                    "    a, b = x[..., 0::2], x[..., 1::2]  # (..., T, d_head/2) each\n"
                    "    rotated = torch.stack(\n"
                    "        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
                    "    )  # (..., T, d/2, 2)\n"
                    "    return rotated.flatten(-2)  # (..., T, d_head)"
                ),
                (
                    "    spin = torch.polar(torch.ones_like(angles), angles)  # e^{i angle}\n"
                    "    pairs = x.reshape(*x.shape[:-1], -1, 2).contiguous()  # (..., T, d/2, 2)\n"
                    "    turned = torch.view_as_complex(pairs) * spin\n"
                    "    return torch.view_as_real(turned).flatten(-2)"
                ),
            ),
        ),
        4,
        None,
        "correct",
    ),
    Case(
        "where_masking",
        "reference",
        "attention.py",
        (
            (
                'scores = scores.masked_fill(mask, float("-inf"))',
                'scores = torch.where(mask, torch.full_like(scores, float("-inf")), scores)',
            ),
        ),
        1,
        None,
        "correct",
    ),
    Case(
        "rope_float64_on_cpu_and_cuda_only",
        "reference",
        "rope.py",
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
                    '    wide = positions.device.type in ("cpu", "cuda")\n'
                    "    work = torch.float64 if wide else torch.float32\n"
                    "    pair = torch.arange(d_head // 2, device=positions.device, dtype=work)\n"
                    "    inv_freq = base ** (-2.0 * pair / d_head)\n"
                    "    return (positions.to(work)[:, None] * inv_freq[None, :]).to(dtype)"
                ),
            ),
        ),
        4,
        None,
        "correct",
    ),
    Case(
        "charlm_inference_mode",
        "reference",
        "charlm.py",
        (
            (
                "with torch.no_grad():\n            for inputs, targets in batches:",
                "with torch.inference_mode():\n            for inputs, targets in batches:",
            ),
            (
                "with torch.no_grad():\n            caches = model.make_caches()",
                "with torch.inference_mode():\n            caches = model.make_caches()",
            ),
        ),
        7,
        None,
        "correct",
    ),
    Case(
        "charlm_private_device_helper",
        "reference",
        "charlm.py",
        (
            (
                "    def make_caches(self, batch: int = 1) -> list[KVCache]:",
                (
                    "    def _device(self) -> torch.device:\n"
                    '        """Where the parameters live."""\n'
                    "        return self.tok_emb.weight.device\n\n"
                    "    def make_caches(self, batch: int = 1) -> list[KVCache]:"
                ),
            ),
            (
                "    device = next(model.parameters()).device\n    was_training = model.training",
                "    device = model._device()\n    was_training = model.training",
            ),
            (
                "    device = next(model.parameters()).device\n    ids = prompt.to(",
                "    device = model._device()\n    ids = prompt.to(",
            ),
        ),
        7,
        None,
        "correct",
    ),
)

HELDOUT = REWRITTEN + PARTIAL + MOVED + REFACTOR + UNKNOWN + MULTI + CORRECT
