"""Part 7: the character-level language model: tokenizer, batches, loss, evaluation,
training, the model itself and (cached) generation.

Expected values come from this process: the tokenizer and batches from the formulas
of SPEC.md, losses from ``F.cross_entropy(ignore_index=-100)`` in float64, the model
from a float64 re-implementation built of torch functions (``F.embedding``,
``F.layer_norm``, ``F.scaled_dot_product_attention``, ``F.linear``) with the same
weights loaded into both. ``evaluate`` and ``train`` are checked against losses computed
here from the student's own forward output, so a forward bug costs the forward tests,
not these. The ``likely`` oracles beside them reproduce known mistakes, so a failure
can name one.

The corpus is ``data/names.txt`` (made-up names, one per line, written for this course).
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from autograder.protocol import StudentError
from tests.graded.compare import LIKELY, assert_close, assert_exact
from tests.graded.expect import raises_value_error
from tests.graded.inputs import checked
from tests.graded.strategies import randint, randn, random_state

pytestmark = pytest.mark.part(7)

CORPUS = (Path(__file__).resolve().parents[2] / "data" / "names.txt").read_text()
CHARS = sorted(set(CORPUS))  # "\n" and a-z
NAMES = CORPUS.split()

PAD, IGNORE = 0, -100
EPS = 1e-5  # LayerNorm's default eps
# The small model of most tests: V != D != d_ff, two heads, two layers.
V, D, H, LAYERS, FF = 11, 8, 2, 2, 12

TOKENIZER = "charlm.CharTokenizer"
LM_BATCH = "charlm.lm_batch"
LM_LOSS = "charlm.lm_loss"
EVALUATE = "charlm.evaluate"
TRAIN = "charlm.train"
GENERATE = "charlm.generate"

# Known mistakes, as the failure message names them.
ID_ZERO = "a character got id 0, which is PAD_ID: ids must start at 1"
FIRST_SEEN = "vocabulary in order of first appearance instead of sorted"
LEFT_PAD = "left padding: pad at the END of each row (right padding)"
UNSHIFTED = "targets not shifted: targets are s[1:], inputs s[:-1]"
PAD_TARGETS = "padded targets filled with pad_id instead of IGNORE_INDEX (-100)"
PAD_ID_IGNORED = "pad_id ignored: inputs padded with 0 instead of pad_id"
PAD_COUNTED = (
    "padding counted: the mean divides by every position, not the real targets"
)
PAD_AS_CLASS = "padding scored as a target of class 0 instead of being ignored"
BATCH_MEANS = (
    "mean of batch means (the notebook's epoch average) instead of "
    "total loss / total tokens"
)
NO_CAUSAL = "no causal mask: positions see the future"
NO_POS = "position embeddings not added"
NO_LN_F = "ln_f not applied before the head"
POS_RESTART = (
    "positions restart at 0 in each chunk instead of continuing from the cache"
)
CHUNK_UNMASKED = "no causal mask inside a chunk fed through the caches"
REFEED = "cached generation re-feeds the whole sequence, not only the newest token"
HARD_128 = "a size hard-coded to 128 (mask, position table, cache) instead of max_len"
NO_CHECK = "max_len not checked (or checked against a hard-coded 128)"
AT_MAX_LEN = (
    "len(prompt) + max_new_tokens == max_len refused (only > max_len is an error)"
)


# Helpers ------------------------------------------------------------------------------
def attempt(what: str, hint: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, where raising is a known mistake (``hint``)."""
    try:
        return fn(*args, **kwargs)
    except StudentError as err:
        named = "" if err.is_a(NotImplementedError) else f"\n{LIKELY} {hint}"
        raise AssertionError(f"{what} raised {err}{named}") from None


def as_float(value, what: str) -> torch.Tensor:
    """A Python float (SPEC.md's ``-> float``) as a 0-d float64 tensor."""
    assert not isinstance(value, torch.Tensor), (
        f"{what} should be a Python float (use .item()), got a Tensor"
    )
    assert isinstance(value, (float, int)) and not isinstance(value, bool), (
        f"{what} should be a float, got {type(value).__name__}"
    )
    return torch.tensor(float(value), dtype=torch.float64)


def lm_shapes(vocab, d_model, n_layers, d_ff, max_len) -> dict[str, tuple[int, ...]]:
    """The parameter names and shapes SPEC.md fixes for ``CharLM``."""
    shapes = {
        "tok_emb.weight": (vocab, d_model),
        "pos_emb.weight": (max_len, d_model),
        "ln_f.weight": (d_model,),
        "ln_f.bias": (d_model,),
        "head.weight": (vocab, d_model),
        "head.bias": (vocab,),
    }
    for i in range(n_layers):
        p = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            shapes[p + ln + ".weight"] = shapes[p + ln + ".bias"] = (d_model,)
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[p + f"attn.{proj}.weight"] = (d_model, d_model)
            shapes[p + f"attn.{proj}.bias"] = (d_model,)
        shapes[p + "ffn.fc1.weight"] = (d_ff, d_model)
        shapes[p + "ffn.fc1.bias"] = (d_ff,)
        shapes[p + "ffn.fc2.weight"] = (d_model, d_ff)
        shapes[p + "ffn.fc2.bias"] = (d_model,)
    return shapes


def new_lm(
    hw, seed, dtype=torch.float64, *, vocab=V, n_layers=LAYERS, max_len=16, **kw
):
    """A student ``CharLM`` on the device in ``dtype``, seeded weights loaded by name.

    ``kw`` may override the small model's ``d_model``, ``n_heads`` and ``d_ff``.
    """
    sizes = {"d_model": D, "n_heads": H, "d_ff": FF} | kw
    m = hw.new("charlm.CharLM", vocab, n_layers=n_layers, max_len=max_len, **sizes)
    m.call("to", device=hw.device, dtype=dtype)
    shapes = lm_shapes(vocab, sizes["d_model"], n_layers, sizes["d_ff"], max_len)
    state = lm_state(shapes, seed, dtype, hw.device)
    m.load_state(state)
    return m, state


def lm_state(shapes, seed, dtype=torch.float64, device="cpu"):
    """Seeded weights of these shapes, norm gains near 1 (as after training)."""
    state = random_state(shapes, seed=seed, dtype=dtype, device=device)
    for name in state:
        if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
            state[name] = state[name] + 1
    return state


def oracle_logits(state, idx, n_heads, positions=None, allowed=None, final_norm=True):
    """float64 logits ``(B, T, V)`` of SPEC.md's CharLM: causal, pre-norm blocks.

    ``positions (T,)`` picks the position embeddings (default ``arange(T)``);
    ``allowed (T, T)`` is the attention pattern, True = take part (default causal).
    """
    s = {k: v.double() for k, v in state.items()}
    b, t = idx.shape
    d = s["tok_emb.weight"].shape[1]
    dev = idx.device
    positions = torch.arange(t) if positions is None else positions
    if allowed is None:
        allowed = torch.ones(t, t, dtype=torch.bool).tril()
    allowed = allowed.to(dev)
    x = F.embedding(idx, s["tok_emb.weight"])  # (B, T, D)
    x = x + F.embedding(positions.to(dev), s["pos_emb.weight"])
    n_layers = len({k.split(".")[1] for k in s if k.startswith("blocks.")})
    for i in range(n_layers):
        p = f"blocks.{i}."

        def lin(h, name, p=p):
            return F.linear(h, s[p + name + ".weight"], s[p + name + ".bias"])

        h = F.layer_norm(x, (d,), s[p + "ln1.weight"], s[p + "ln1.bias"], eps=EPS)
        q, k, v = (
            lin(h, f"attn.{n}_proj").view(b, t, n_heads, -1).transpose(1, 2)
            for n in "qkv"
        )  # (B, h, T, d_h)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, h, T, d_h)
        x = x + lin(a.transpose(1, 2).reshape(b, t, d), "attn.out_proj")
        h = F.layer_norm(x, (d,), s[p + "ln2.weight"], s[p + "ln2.bias"], eps=EPS)
        x = x + lin(F.relu(lin(h, "ffn.fc1")), "ffn.fc2")
    if final_norm:
        x = F.layer_norm(x, (d,), s["ln_f.weight"], s["ln_f.bias"], eps=EPS)
    return F.linear(x, s["head.weight"], s["head.bias"])  # (B, T, V)


def oracle_greedy(state, prompt, n_new, n_heads, feed="correct"):
    """Greedy ids (prompt first) of the oracle; ``feed`` reproduces a cache bug:
    ``"restart"`` feeds each new token at position 0, ``"refeed"`` appends the whole
    sequence to the caches at every step."""
    ids, fed, p = prompt.tolist(), [], len(prompt)
    for _ in range(n_new):
        if feed == "correct":
            tokens, pos = ids, list(range(len(ids)))
        elif feed == "restart":
            tokens, pos = ids, list(range(p)) + [0] * (len(ids) - p)
        else:
            fed = fed + ids
            tokens, pos = fed, list(range(len(fed)))
        idx = torch.tensor([tokens], device=prompt.device)
        logits = oracle_logits(state, idx, n_heads, positions=torch.tensor(pos))[0, -1]
        logits[PAD] = -math.inf
        ids.append(int(logits.argmax()))
    return torch.tensor(ids, device=prompt.device)


def encode(text: str) -> list[int]:
    """The oracle tokenizer of the corpus: sorted characters get ids 1, 2, ..."""
    return [CHARS.index(c) + 1 for c in text]


def pair(rows: list[list[int]], t: int):
    """A CPU ``(inputs, targets)`` batch: rows of target ids, right-padded to ``t``."""
    targets = torch.full((len(rows), t), IGNORE, dtype=torch.long)
    for r, row in enumerate(rows):
        targets[r, : len(row)] = torch.tensor(row)
    inputs = torch.where(targets == IGNORE, PAD, (targets * 7 + 3) % V)  # any ids
    inputs[:, 0] = 1 + torch.arange(len(rows)) % (V - 1)
    return inputs, targets


def three_batches():
    """Batches with 8, 3 and 5 real targets: a mean of batch means is not the truth."""
    b1 = pair([[1, 2, 3, 4, 5, 6], [7, 8]], 6)
    b2 = pair([[9, 10, 1]], 3)
    b3 = pair([[2, 4, 6], [3, 5]], 4)
    return b1, b2, b3


def batch_losses(hw, m, batches) -> list[dict[str, float]]:
    """Per batch, from the student's forward and F.cross_entropy: the summed loss
    ``sum``, the real targets ``n``, all positions ``t``, and ``sum0``, the sum with
    padding scored as class 0."""
    out = []
    for inputs, targets in batches:
        logits = m(inputs.to(hw.device)).double()  # (B, T, V)
        flat = logits.reshape(-1, logits.shape[-1])
        targets = targets.to(hw.device).reshape(-1)
        total = F.cross_entropy(flat, targets, ignore_index=IGNORE, reduction="sum")
        as_class = F.cross_entropy(flat, targets.clamp(min=0), reduction="sum")
        n = int((targets != IGNORE).sum())
        out.append(
            {"sum": total.item(), "n": n, "t": targets.numel(), "sum0": as_class.item()}
        )
    return out


def scalar(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def corpus_mean(losses, key="sum") -> torch.Tensor:
    """Total loss / total real targets: what evaluate and train's train_loss report."""
    return scalar(sum(b[key] for b in losses) / sum(b["n"] for b in losses))


def mean_of_means(losses) -> torch.Tensor:
    return scalar(sum(b["sum"] / b["n"] for b in losses) / len(losses))


def eval_suspects(losses) -> dict[str, torch.Tensor]:
    """What evaluate returns under known mistakes (its own, or lm_loss's through it)."""
    return {
        BATCH_MEANS: mean_of_means(losses),
        PAD_COUNTED: scalar(
            sum(b["sum"] for b in losses) / sum(b["t"] for b in losses)
        ),
        f"lm_loss: {PAD_AS_CLASS} (fix lm_loss first)": corpus_mean(losses, "sum0"),
    }


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


# Tokenizer ----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_char_tokenizer_round_trip(hw):
    """Ids 1.. in sorted order, vocab_size counts PAD, decode(encode(s)) == s."""
    tok = hw.new(TOKENIZER, CORPUS)
    vocab_size = tok.attr("vocab_size")
    assert vocab_size == len(CHARS) + 1, (
        f"CharTokenizer.vocab_size is {vocab_size}, expected {len(CHARS) + 1} "
        f"({len(CHARS)} characters plus the pad id 0)"
    )
    ids = tok.call("encode", "".join(CHARS))
    assert isinstance(ids, list), (
        f"encode should return a list, got {type(ids).__name__}"
    )
    first_seen = list(dict.fromkeys(CORPUS))
    assert_exact(
        torch.tensor(ids, dtype=torch.long),
        torch.arange(1, len(CHARS) + 1),
        "CharTokenizer.encode(sorted characters)",
        likely={
            ID_ZERO: torch.arange(len(CHARS)),
            FIRST_SEEN: torch.tensor([first_seen.index(c) + 1 for c in CHARS]),
        },
    )
    text = CORPUS[:400]
    ids = tok.call("encode", text)
    assert_exact(
        torch.tensor(ids, dtype=torch.long),
        torch.tensor(encode(text)),
        "CharTokenizer.encode(text)",
    )
    back = tok.call("decode", ids)
    assert back == text, "CharTokenizer.decode(encode(text)) does not give text back"
    padded = tok.call("decode", [PAD, *ids[:20], PAD, PAD])
    assert padded == text[:20], (
        "CharTokenizer.decode should skip PAD_ID (0): decode([0] + encode(s) + [0, 0]) "
        f"gave {padded!r} for s = {text[:20]!r}"
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_char_tokenizer_errors(hw):
    """An unknown character or id is a ValueError (naming the character)."""
    tok = hw.new(TOKENIZER, "hello world\n")
    back = tok.call("decode", tok.call("encode", "low\n"))
    assert back == "low\n", f"CharTokenizer.decode(encode('low\\n')) gave {back!r}"
    raises_value_error(
        "CharTokenizer.encode('he#lo')", ("#",), tok.call, "encode", "he#lo"
    )
    # the vocabulary "\n", " ", d, e, h, l, o, r, w has ids 1..9, so 10 is unknown
    raises_value_error(
        "CharTokenizer.decode([1, 2, 10])",
        ("10", "id"),
        tok.call,
        "decode",
        [1, 2, 10],
    )


# Batches ------------------------------------------------------------------------------
SEQS = ([3, 1, 4, 1, 5], [2, 7], [6, 2, 8, 3, 9, 4])  # lengths 5, 2, 6 -> T = 5


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


def check_lm_batch(hw, pad_id):
    seqs = [torch.tensor(s, device=hw.device) for s in SEQS]
    kwargs = {} if pad_id == PAD else {"pad_id": pad_id}
    out = hw.call(LM_BATCH, seqs, **kwargs)
    assert isinstance(out, tuple) and len(out) == 2, (
        "lm_batch should return a tuple (inputs, targets)"
    )
    inputs, targets = out
    dev = hw.device
    what = f"lm_batch(sequences, pad_id={pad_id})"
    assert_exact(
        inputs,
        batch_oracle(SEQS, pad_id)[0].to(dev),
        what + " inputs",
        likely={
            LEFT_PAD: batch_oracle(SEQS, pad_id, left=True)[0].to(dev),
            PAD_ID_IGNORED: batch_oracle(SEQS, PAD)[0].to(dev),
        },
    )
    assert_exact(
        targets,
        batch_oracle(SEQS, pad_id)[1].to(dev),
        what + " targets",
        likely={
            LEFT_PAD: batch_oracle(SEQS, pad_id, left=True)[1].to(dev),
            UNSHIFTED: batch_oracle(SEQS, pad_id, shift=False)[1].to(dev),
            PAD_TARGETS: batch_oracle(SEQS, pad_id, target_fill=pad_id)[1].to(dev),
        },
    )
    return seqs


@pytest.mark.public
@pytest.mark.points(1)
def test_lm_batch_shift_and_right_padding(hw):
    """inputs s[:-1], targets s[1:], right-padded with PAD_ID and IGNORE_INDEX."""
    check_lm_batch(hw, PAD)


@pytest.mark.hidden
@pytest.mark.points(1)
def test_lm_batch_pad_id_and_short_sequence(hw):
    """A non-default pad_id pads the inputs (targets still IGNORE_INDEX); a sequence
    of length 1 is refused."""
    seqs = check_lm_batch(hw, 5)
    raises_value_error(
        "lm_batch with a sequence of length 1",
        ("sequence",),
        hw.call,
        LM_BATCH,
        [seqs[0], torch.tensor([4], device=hw.device)],
    )


# Loss ---------------------------------------------------------------------------------
def loss_case(dtype, device):
    """logits (2, 5, 7) of size ~3 and targets with 5 and 2 real entries."""
    logits = randn(2, 5, 7, seed=71, dtype=dtype, device=device, scale=3.0)
    targets = torch.tensor(
        [[1, 6, 0, 3, 2], [4, 5, IGNORE, IGNORE, IGNORE]], device=device
    )
    return logits, targets


def ce(logits, targets, reduction):
    """F.cross_entropy in float64 over (B, T, V) logits, skipping IGNORE_INDEX."""
    return F.cross_entropy(
        logits.double().reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE,
        reduction=reduction,
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_lm_loss_matches_cross_entropy(hw):
    """'mean' and 'sum' equal F.cross_entropy(ignore_index=-100): padding ignored."""
    for dtype in (torch.float64, torch.float32):
        logits, targets = loss_case(dtype, hw.device)
        as_class = targets.clamp(min=0)  # padding turned into class 0
        for reduction in ("mean", "sum"):
            kwargs = {} if reduction == "mean" else {"reduction": "sum"}
            got = hw.call(LM_LOSS, logits, targets, **kwargs)
            likely = {PAD_AS_CLASS: ce(logits, as_class, reduction).to(dtype)}
            if reduction == "mean":
                counted = ce(logits, targets, "sum") / targets.numel()
                likely[PAD_COUNTED] = counted.to(dtype)
            assert_close(
                got,
                ce(logits, targets, reduction).to(dtype),
                f"lm_loss(reduction={reduction!r}) in {dtype}",
                likely=likely,
            )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_lm_loss_no_real_target(hw):
    """Targets that are all IGNORE_INDEX have no loss: ValueError. Slices (not contiguous)
    are accepted and left unchanged."""
    logits, targets = loss_case(torch.float64, hw.device)
    hw.call(LM_LOSS, logits, targets)
    # SPEC.md: a slice such as logits[:, :-1] is accepted, and inputs stay unchanged.
    for reduction in ("mean", "sum"):
        what = f"lm_loss(logits, targets, reduction={reduction!r})"
        got = checked(what, hw.checked_call, LM_LOSS, logits, targets, reduction)
        assert_close(got, ce(logits, targets, reduction), what + " on slices")
    raises_value_error(
        "lm_loss with every target IGNORE_INDEX",
        ("target",),
        hw.call,
        LM_LOSS,
        logits,
        torch.full_like(targets, IGNORE),
    )


# evaluate -----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_evaluate_token_weighted_mean(hw):
    """evaluate is total loss / total real tokens, not a mean of batch means."""
    m, _ = new_lm(hw, seed=700)
    batches = list(three_batches())  # on the CPU: evaluate moves them to the model
    losses = batch_losses(hw, m, batches)
    got = as_float(hw.call(EVALUATE, m, batches), "evaluate(model, batches)")
    assert_close(
        got,
        corpus_mean(losses),
        "evaluate(model, batches)",
        likely=eval_suspects(losses),
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_evaluate_restores_mode_and_skips_empty_batches(hw):
    """The previous train/eval mode comes back (also after raising); a batch without
    real targets adds nothing; no real target at all is a ValueError."""
    m, _ = new_lm(hw, seed=710)
    b1, b2, _ = three_batches()
    empty = (b2[0], torch.full_like(b2[1], IGNORE))
    losses = batch_losses(hw, m, [b1, b2])
    m.call("train")
    got = attempt(
        "evaluate with a batch that has no real target",
        "a batch without real targets must be skipped (it adds nothing)",
        hw.call,
        EVALUATE,
        m,
        [b1, empty, b2],
    )
    assert m.attr("training") is True, (
        "evaluate left a model that was in train mode in eval mode.\n"
        f"{LIKELY} evaluate leaves the model in eval mode (restore the previous mode)"
    )
    assert_close(
        as_float(got, "evaluate(model, batches)"),
        corpus_mean(losses),
        "evaluate with a batch that has no real target",
        likely=eval_suspects(losses),
    )
    m.call("eval")
    hw.call(EVALUATE, m, [b1])
    assert m.attr("training") is False, (
        "evaluate put a model in eval mode in train mode"
    )
    m.call("train")
    raises_value_error(
        "evaluate with no real target in any batch",
        ("batch", "target"),
        hw.call,
        EVALUATE,
        m,
        [empty],
    )
    assert m.attr("training") is True, (
        "evaluate did not restore train mode after raising"
    )


# The model ----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_charlm_structure(hw):
    """Attributes max_len and n_layers, the parameter names and shapes of SPEC.md, and
    the defaults."""
    m = hw.new(
        "charlm.CharLM", V, d_model=D, n_heads=H, n_layers=LAYERS, d_ff=FF, max_len=24
    )
    assert m.attr("max_len") == 24, "CharLM.max_len should be the max_len passed in"
    assert m.attr("n_layers") == LAYERS, (
        "CharLM.n_layers should be the n_layers passed in"
    )
    state = m.state_dict()
    for name, shape in lm_shapes(V, D, LAYERS, FF, 24).items():
        assert name in state, (
            f"CharLM has no parameter {name} (SPEC.md fixes the names)"
        )
        got = tuple(state[name].shape)
        hint = f"\n{LIKELY} {HARD_128}" if 128 in got else ""
        assert got == shape, f"CharLM's {name} has shape {got}, expected {shape}{hint}"
    assert "blocks.2.ln1.weight" not in state, "CharLM has more blocks than n_layers"
    default = hw.new("charlm.CharLM", V)
    assert default.attr("max_len") == 128 and default.attr("n_layers") == 2, (
        "CharLM's defaults should be max_len=128, n_layers=2"
    )
    shapes = {k: tuple(v.shape) for k, v in default.state_dict().items()}
    assert shapes.get("tok_emb.weight") == (V, 64), "CharLM's default d_model is 64"
    assert shapes.get("blocks.1.ffn.fc1.weight") == (64, 64), (
        "CharLM's default d_ff is 64"
    )


def check_forward(hw, dtype):
    m, state = new_lm(hw, seed=720, dtype=dtype, max_len=10)
    idx = randint(0, V, 2, 7, seed=721, device=hw.device)  # (B, T), PAD among the ids
    t = idx.shape[1]
    assert_close(
        m(idx),
        oracle_logits(state, idx, H).to(dtype),
        f"CharLM forward in {dtype}",
        likely={
            NO_CAUSAL: lambda: oracle_logits(
                state, idx, H, allowed=torch.ones(t, t) > 0
            ),
            NO_POS: lambda: oracle_logits(
                state, idx, H, positions=torch.zeros(t).long()
            ),
            NO_LN_F: lambda: oracle_logits(state, idx, H, final_norm=False),
        },
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_charlm_forward_matches_oracle(hw):
    """Logits of a causal pre-norm model with loaded weights equal a float64 oracle."""
    check_forward(hw, torch.float64)
    check_forward(hw, torch.float32)


@pytest.mark.hidden
@pytest.mark.points(1)
def test_charlm_initial_loss_near_log_vocab(hw):
    """A freshly initialized model is nearly uniform: loss within 0.5 of log V. Its
    defaults n_heads=2 and make_caches(batch=1) hold.

    Why 0.5: with PyTorch's default init the head sees ln_f's unit-variance output
    through weights of variance 1/(3 d_model), so each logit has variance about 1/3,
    and the expected cross-entropy of such logits is about log V + 1/6. Small inits
    (normal 0.02) give about log V. The reference lands 0.005-0.24 above log V over 30
    seeds.
    """
    vocab = len(CHARS) + 1
    hw.seed(0)
    m = hw.new("charlm.CharLM", vocab)
    m.call("to", device=hw.device)
    inputs, targets = batch_oracle([encode(f"\n{n}\n") for n in NAMES[:8]], PAD)
    loss = ce(m(inputs.to(hw.device)), targets.to(hw.device), "mean").item()
    assert abs(loss - math.log(vocab)) < 0.5, (
        f"a fresh CharLM({vocab}) has loss {loss:.3f} on 8 names; expected within "
        f"0.5 of log V = {math.log(vocab):.3f} (near-uniform predictions)"
    )
    # The defaults the state dict cannot show: n_heads=2, make_caches(batch=1).
    heads = m.attr("blocks").call("__getitem__", 1).attr("attn").attr("n_heads")
    assert heads == 2, (
        f"CharLM's blocks have {heads} heads by default, expected 2\n{LIKELY} a default "
        "of CharLM.__init__ differs from SPEC.md's (d_model=64, n_heads=2, n_layers=2, "
        "d_ff=64, max_len=128)"
    )
    k = m.call("make_caches")[0].attr("k")
    assert tuple(k.shape) == (1, 2, 128, 32), (
        f"make_caches() of a default CharLM gave a cache k of shape {tuple(k.shape)}, "
        "expected (batch=1, n_heads=2, max_len=128, d_head=32)"
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_charlm_cached_forward_matches_full(hw):
    """Chunks fed through make_caches() give one full forward's logits; positions past
    max_len in all are refused."""
    m, state = new_lm(hw, seed=730, max_len=8)
    idx = randint(1, V, 2, 6, seed=731, device=hw.device)  # (B, T)
    spans = ((0, 3), (3, 4), (4, 6))
    caches = m.call("make_caches", batch=2)
    chunks = [m(idx[:, a:b], caches=caches) for a, b in spans]
    unmasked = torch.ones(6, 6, dtype=torch.bool).tril()
    for a, b in spans:
        unmasked[a:b, a:b] = True  # a chunk that sees all of itself
    restarted = torch.tensor([0, 1, 2, 0, 0, 1])
    assert_close(
        torch.cat(chunks, dim=1),
        oracle_logits(state, idx, H),
        "CharLM forward in chunks of 3, 1, 2 through the caches",
        likely={
            POS_RESTART: lambda: oracle_logits(state, idx, H, positions=restarted),
            CHUNK_UNMASKED: lambda: oracle_logits(state, idx, H, allowed=unmasked),
        },
    )
    length = caches[0].attr("length")
    assert length == 6, f"after 6 positions the caches hold length {length}, expected 6"
    raises_value_error(
        "CharLM(max_len=8) forward of 3 positions after 6 cached",
        ("max_len", "idx", "cache", "position", "8", "9"),
        m,
        idx[:, :3],
        caches=caches,
        hint="positions cached + new not checked against max_len",
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_charlm_max_len_honoured(hw):
    """max_len=40 runs 40 positions and refuses 41; max_len=200 runs 150 positions;
    make_caches sizes its caches by max_len."""
    m, state = new_lm(hw, seed=740, max_len=40, n_layers=1)
    idx = randint(1, V, 1, 41, seed=741, device=hw.device)
    causal_only = torch.ones(40, 40) > 0
    assert_close(
        m(idx[:, :40]),
        oracle_logits(state, idx[:, :40], H),
        "CharLM(max_len=40) forward on 40 positions",
        likely={
            NO_CAUSAL: lambda: oracle_logits(state, idx[:, :40], H, allowed=causal_only)
        },
    )
    raises_value_error(
        "CharLM(max_len=40) forward on 41 positions",
        ("max_len", "idx", "position", "40", "41"),
        m,
        idx,
        hint=NO_CHECK,
    )

    m, state = new_lm(hw, seed=742, max_len=200, n_layers=1)
    idx = randint(1, V, 1, 150, seed=743, device=hw.device)
    what = "CharLM(max_len=200) forward on 150 positions"
    assert_close(attempt(what, HARD_128, m, idx), oracle_logits(state, idx, H), what)

    caches = m.call("make_caches", batch=2)
    assert isinstance(caches, list) and len(caches) == 1, (
        "make_caches should return a list with one KVCache per block"
    )
    k = caches[0].attr("k")
    hint = f"\n{LIKELY} {HARD_128}" if 128 in k.shape else ""
    assert tuple(k.shape) == (2, H, 200, D // H), (
        "make_caches(batch=2) of CharLM(max_len=200) gave a cache whose k has shape "
        f"{tuple(k.shape)}, expected (batch, heads, max_len, d_head) = "
        f"(2, {H}, 200, {D // H}){hint}"
    )
    assert k.dtype == torch.float64 and k.device.type == hw.device.type, (
        f"make_caches should follow the model's dtype and device, got {k.dtype} on "
        f"{k.device}"
    )
    assert caches[0].attr("length") == 0, "make_caches should return empty caches"


# Training -----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_train_overfits_one_batch(hw):
    """A tiny model learns one batch of two names in 15 epochs; one dict per epoch."""
    vocab = len(CHARS) + 1
    hw.seed(0)
    m = hw.new(
        "charlm.CharLM", vocab, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16
    )
    m.call("to", device=hw.device)
    seqs = [encode(f"\n{n}\n") for n in NAMES[:2]]
    batch = tuple(t.to(hw.device) for t in batch_oracle(seqs, PAD))
    initial = corpus_mean(batch_losses(hw, m, [batch])).item()
    epochs = 15
    history = hw.call(TRAIN, m, [batch], [batch], epochs=epochs, lr=3e-2)
    assert isinstance(history, list) and len(history) == epochs, (
        f"train(..., epochs={epochs}) should return a list of {epochs} dicts"
    )
    for n, record in enumerate(history, start=1):
        assert isinstance(record, dict) and record.get("epoch") == n, (
            f"train's history[{n - 1}] should be a dict with epoch={n} (counted from 1)"
        )
        for key in ("train_loss", "dev_loss"):
            as_float(record.get(key), f"train's history[{n - 1}][{key!r}]")
    first, last = history[0], history[-1]
    assert last["train_loss"] < 0.8 and last["dev_loss"] < 0.8, (
        f"train did not fit one batch: train_loss {first['train_loss']:.3f} -> "
        f"{last['train_loss']:.3f}, dev_loss {last['dev_loss']:.3f} after {epochs} "
        "epochs of Adam(lr=3e-2) (a correct loop gets below 0.2)"
    )
    # The reported losses are the student's word: the trained model's loss, measured here.
    real = corpus_mean(batch_losses(hw, m, [batch])).item()
    stuck = abs(real - initial) < 1e-6 * max(1.0, abs(initial))
    assert real < 0.8, (
        f"train reports train_loss {last['train_loss']:.3f} and dev_loss "
        f"{last['dev_loss']:.3f}, but the trained model's loss on the batch is "
        f"{real:.3f} (before training: {initial:.3f})"
        + (
            f"\n{LIKELY} train reports losses but does not update the model "
            "(optimizer.step / zero_grad / backward missing)"
            if stuck
            else ""
        )
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_train_history_losses(hw):
    """train_loss is the epoch's token-weighted mean and dev_loss is evaluate, checked
    with lr=0 (Adam then leaves the weights as they are)."""
    m, _ = new_lm(hw, seed=750)
    b1, b2, b3 = three_batches()
    losses, dev = batch_losses(hw, m, [b1, b2]), batch_losses(hw, m, [b3])
    on_device = [tuple(t.to(hw.device) for t in b) for b in (b1, b2)]
    history = hw.call(TRAIN, m, on_device, [b3], epochs=1, lr=0.0)
    assert isinstance(history, list) and len(history) == 1, (
        "train(..., epochs=1) should return a list of one dict"
    )
    record = history[0]
    assert isinstance(record, dict) and record.get("epoch") == 1, (
        "train's history[0] should be a dict with epoch=1"
    )
    assert_close(
        as_float(record.get("train_loss"), "train's train_loss"),
        corpus_mean(losses),
        "train's train_loss (batches of 8 and 3 real targets, lr=0)",
        likely=train_suspects(losses),
    )
    assert_close(
        as_float(record.get("dev_loss"), "train's dev_loss"),
        corpus_mean(dev),
        "train's dev_loss",
        likely=eval_suspects(dev),
    )
    again = as_float(hw.call(EVALUATE, m, [b3]), "evaluate(model, dev_batches)")
    assert_close(again, corpus_mean(dev), "evaluate(model, dev_batches) after train")


AFTER_STEPS = (
    "train_loss measured after the epoch's updates (evaluate on the training batches) "
    "instead of the losses computed during the steps"
)
NOT_RESET = (
    "train_loss accumulated over all epochs so far (the running totals are not reset at "
    "each epoch)"
)
DEV_BEFORE = "dev_loss evaluated before the epoch's updates"


def oracle_training(state, train_batches, dev_batches, epochs, lr, optimizer="Adam"):
    """SPEC.md's train in float64 on the oracle model, with torch.optim's optimizer.

    Returns the history, the final weights, and for each parameter whether its gradient was
    ever tiny (|g| <= 1e-6, where Adam's g / (|g| + 1e-8) amplifies rounding).
    """
    params = {k: v.detach().double().clone().requires_grad_() for k, v in state.items()}
    opt = getattr(torch.optim, optimizer)(params.values(), lr=lr)
    tiny = {k: torch.zeros_like(v, dtype=torch.bool) for k, v in params.items()}

    def mean_loss(batches):
        total = sum(
            ce(oracle_logits(params, i, H), t, "sum").item() for i, t in batches
        )
        return total / sum(int((t != IGNORE).sum()) for _, t in batches)

    history = []
    for epoch in range(1, epochs + 1):
        total, count = 0.0, 0
        for inputs, targets in train_batches:
            loss = ce(oracle_logits(params, inputs, H), targets, "mean")
            opt.zero_grad()
            loss.backward()
            for k, v in params.items():
                tiny[k] |= v.grad.abs() <= 1e-6
            opt.step()
            real = int((targets != IGNORE).sum())
            total, count = total + loss.item() * real, count + real
        with torch.no_grad():
            after = {
                "train_after": mean_loss(train_batches),
                "dev_loss": mean_loss(dev_batches),
            }
        history.append({"epoch": epoch, "train_loss": total / count, **after})
    return history, {k: v.detach() for k, v in params.items()}, tiny


@pytest.mark.hidden
@pytest.mark.points(1)
def test_train_records_its_steps_with_default_arguments(hw):
    """Two epochs of one batch with the default lr (1e-3), against the same training in
    float64 with torch.optim.Adam: each epoch's train_loss is the loss computed during its
    step (before the update), dev_loss evaluates the model after the epoch, the weights
    follow Adam; then train with every default runs one epoch."""
    m, state = new_lm(hw, seed=755)
    b1, _, b3 = three_batches()
    train_batches = [tuple(t.to(hw.device) for t in b1)]
    history = hw.call(TRAIN, m, train_batches, [b3], epochs=2)
    assert isinstance(history, list) and len(history) == 2, (
        "train(..., epochs=2) should return a list of 2 dicts"
    )
    dev = [tuple(t.to(hw.device) for t in b3)]
    want, weights, tiny = oracle_training(state, train_batches, dev, 2, 1e-3)
    after = m.state_dict()
    names = sorted(state)
    keep = ~torch.cat([tiny[n].flatten() for n in names])

    def flat(weights_by_name):
        return torch.cat([weights_by_name[n].double().flatten() for n in names])[keep]

    def trained(lr, optimizer="Adam"):
        return lambda: flat(
            oracle_training(state, train_batches, dev, 2, lr, optimizer)[1]
        )

    assert_close(
        flat(after),
        flat(weights),
        "the weights after 2 epochs of one batch (defaults: Adam, lr=1e-3)",
        likely={
            "SGD instead of Adam": trained(1e-3, "SGD"),
            "the default lr is not 1e-3 (this is 3e-4)": trained(3e-4),
            "the default lr is not 1e-3 (this is 1e-2)": trained(1e-2),
            "no update: zero_grad / backward / step missing": flat(state),
        },
    )
    for n, (record, expected) in enumerate(zip(history, want), start=1):
        assert isinstance(record, dict) and record.get("epoch") == n, (
            f"train's history[{n - 1}] should be a dict with epoch={n}"
        )
        train_likely = {AFTER_STEPS: scalar(expected["train_after"])}
        dev_likely = {}
        if n == 2:
            both = (want[0]["train_loss"] + expected["train_loss"]) / 2
            train_likely[NOT_RESET] = scalar(both)
            dev_likely[DEV_BEFORE] = scalar(want[0]["dev_loss"])
        assert_close(
            as_float(record.get("train_loss"), f"history[{n - 1}]['train_loss']"),
            scalar(expected["train_loss"]),
            f"train_loss of epoch {n} (one batch: the loss computed during its step)",
            likely=train_likely,
        )
        assert_close(
            as_float(record.get("dev_loss"), f"history[{n - 1}]['dev_loss']"),
            scalar(expected["dev_loss"]),
            f"dev_loss of epoch {n}: evaluate(model, dev_batches) after the epoch",
            likely=dev_likely,
        )
    during = corpus_mean(batch_losses(hw, m, [b1]))
    again = hw.call(TRAIN, m, train_batches, [b3])
    assert isinstance(again, list) and len(again) == 1, (
        "train(model, train_batches, dev_batches) should run epochs=1 by default"
    )
    assert_close(
        as_float(again[0].get("train_loss"), "train's train_loss"),
        during,
        "train_loss of a second train call (one epoch by default)",
    )


# Generation ---------------------------------------------------------------------------
def model_greedy(hw, m, prompt, n_new) -> torch.Tensor:
    """Greedy ids (prompt first) by the student's own full forward (no cache): each new
    id is the argmax of the last position's logits without PAD_ID. A forward bug then
    costs the forward tests, not the generate tests that use this."""
    ids = prompt.tolist()
    for _ in range(n_new):
        idx = torch.tensor([ids], device=hw.device)
        logits = m(idx)[0, -1].detach().double().clone()  # (V,)
        logits[PAD] = -math.inf
        ids.append(int(logits.argmax()))
    return torch.tensor(ids, device=hw.device)


def check_greedy(hw, m, state, out, prompt, n_new, what):
    """``out`` is what greedy decoding with the student's forward gives; cache bugs named."""
    on_device = prompt.to(hw.device)
    likely = {
        POS_RESTART: lambda: oracle_greedy(state, on_device, n_new, H, feed="restart")
    }
    refed = sum(range(len(prompt), len(prompt) + n_new))  # positions a re-feed uses
    if refed <= state["pos_emb.weight"].shape[0]:
        likely[REFEED] = lambda: oracle_greedy(
            state, on_device, n_new, H, feed="refeed"
        )
    assert_exact(
        out,
        model_greedy(hw, m, on_device, n_new),
        f"{what}: the new ids should be the argmax of the model's logits (PAD_ID excluded)",
        likely=likely,
    )


def check_ids(out, prompt, n_new, hw, what):
    """A 1-D LongTensor on the model's device: the prompt, n_new ids, never PAD_ID."""
    assert type(out) is torch.Tensor, f"{what} should return a Tensor, got {type(out)}"
    assert out.dim() == 1 and out.dtype == torch.long, (
        f"{what} should return a 1-D LongTensor, got {out.dtype} of shape "
        f"{tuple(out.shape)}"
    )
    assert out.device.type == hw.device.type, (
        f"{what} is on {out.device}, not the model's device"
    )
    assert len(out) == len(prompt) + n_new, (
        f"{what} has {len(out)} ids, expected len(prompt) + max_new_tokens = "
        f"{len(prompt) + n_new}"
    )
    assert_exact(out[: len(prompt)], prompt.to(out.device), f"{what}[:len(prompt)]")
    assert not (out == PAD).any(), (
        f"{what} produced PAD_ID (0).\n{LIKELY} PAD_ID's logit is not excluded before "
        "sampling or argmax (set it to -inf)"
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_generate_greedy_cache_matches_no_cache(hw):
    """Greedy ids are the oracle's argmax ids, identical with and without the cache."""
    m, state = new_lm(hw, seed=760, max_len=32)
    prompt = torch.tensor([3, 1, 4], device=hw.device)
    expected = oracle_greedy(state, prompt, 5, H)
    plain = hw.call(GENERATE, m, prompt, 5, greedy=True, use_cache=False)
    check_ids(plain, prompt, 5, hw, "generate(greedy=True, use_cache=False)")
    assert_exact(plain, expected, "generate(greedy=True, use_cache=False)")
    cached = hw.call(GENERATE, m, prompt, 5, greedy=True)
    check_ids(cached, prompt, 5, hw, "generate(greedy=True, use_cache=True)")
    assert_exact(
        cached,
        expected,
        "generate(greedy=True, use_cache=True)",
        likely={
            REFEED: lambda: oracle_greedy(state, prompt, 5, H, feed="refeed"),
            POS_RESTART: lambda: oracle_greedy(state, prompt, 5, H, feed="restart"),
        },
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_generate_output_contract(hw):
    """The prompt then new ids, 1-D Long on the model's device, never PAD_ID even when
    its logit is the largest; the same generator seed gives the same ids."""
    m, state = new_lm(hw, seed=770)
    bias = state["head.bias"].clone()
    bias[PAD] = 30.0  # PAD's logit is by far the largest
    m.load_state({"head.bias": bias})
    prompt = torch.tensor([5, 2])  # on the CPU: generate moves it to the model's device

    def sample():
        gen = hw.new("torch.Generator", device=hw.device)
        gen.call("manual_seed", 1234)
        return hw.call(GENERATE, m, prompt, 6, temperature=0.8, generator=gen)

    first = sample()
    check_ids(first, prompt, 6, hw, "generate (sampling)")
    assert_exact(sample(), first, "generate with the same generator seed")
    greedy = hw.call(GENERATE, m, prompt, 6, greedy=True)
    check_ids(greedy, prompt, 6, hw, "generate(greedy=True)")
    # The contract alone admits any ids (a constant): the argmax of the model's logits.
    state = state | {"head.bias": bias}
    check_greedy(hw, m, state, greedy, prompt, 6, "generate(greedy=True)")


# One sampling step. In this model head.weight is zero, so the logits are exactly
# head.bias at every step and one generate call gives N_DRAWS independent draws from
# softmax(head.bias / TAU) without PAD. The false-failure budget of a correct sampler:
# likelihood-ratio tests (ALPHA_LR each, 4 of them) plus two-sided Chernoff bounds per
# id (BETA_ID each side, 12 of them): 4e-7 + 4.8e-7 < 1e-6.
TAU, N_DRAWS = 4.0, 96
TARGET_P = torch.tensor([0.03, 0.12, 0.5, 0.03, 0.2, 0.12], dtype=torch.float64)  # 1..6
ALPHA_LR, BETA_ID = 1e-7, 4e-8


def kl_bernoulli(a: float, p: float) -> float:
    return sum(x * math.log(x / y) for x, y in ((a, p), (1 - a, 1 - p)) if x > 0)


def chernoff_interval(p: float, n: int, beta: float) -> tuple[float, float]:
    """(lo, hi): a Binomial(n, p) frequency reaches either with probability <= beta.

    P(freq >= a) <= exp(-n KL(a || p)) for a > p, and the same below p, so each bound
    solves n KL(bound || p) = log(1 / beta) (bisection, keeping the conservative side).
    """
    need = math.log(1 / beta) / n

    def solve(inside: float, outside: float) -> float:  # KL grows towards outside
        for _ in range(60):
            mid = (inside + outside) / 2
            if kl_bernoulli(mid, p) < need:
                inside = mid
            else:
                outside = mid
        return outside

    hi = solve(p, 1.0) if kl_bernoulli(1.0, p) >= need else math.inf
    lo = solve(p, 0.0) if kl_bernoulli(0.0, p) >= need else -math.inf
    return lo, hi


@pytest.mark.hidden
@pytest.mark.points(1)
def test_generate_sampling_distribution(hw):
    """The ids of one sampling step follow softmax(logits / temperature) without PAD; the
    default temperature is 1.0.

    A correct sampler of any kind (multinomial, Gumbel-max, inverse CDF) passes with
    probability > 1 - 1e-6: for a fixed wrong distribution q the likelihood ratio
    prod q(x)/p(x) has mean 1 under the right p, so it exceeds 1/ALPHA_LR with
    probability <= ALPHA_LR (Markov); and each id's frequency leaves its Chernoff
    interval with probability <= 2 BETA_ID. Each listed mistake is >= 0.5 nats per draw
    away from p, so 96 draws expose it.
    """
    vocab = len(TARGET_P) + 1
    m, state = new_lm(
        hw, seed=780, vocab=vocab, d_model=4, n_heads=1, n_layers=1, d_ff=4,
        max_len=N_DRAWS + 2,
    )  # fmt: skip
    logits = TAU * TARGET_P.log()  # softmax(logits / TAU) = TARGET_P
    bias = torch.cat([torch.tensor([40.0], dtype=torch.float64), logits])  # huge PAD
    m.load_state(
        {
            "head.weight": torch.zeros_like(state["head.weight"]),
            "head.bias": bias.to(hw.device),
        }
    )
    gen = hw.new("torch.Generator", device=hw.device)
    gen.call("manual_seed", 2029)
    prompt = torch.tensor([3], device=hw.device)
    what = f"generate(temperature={TAU})"
    out = hw.call(GENERATE, m, prompt, N_DRAWS, temperature=TAU, generator=gen)
    check_ids(out, prompt, N_DRAWS, hw, what)
    assert int(out.max()) < vocab, f"{what} produced ids outside the vocabulary"
    counts = torch.bincount(out[1:].cpu(), minlength=vocab)[1:].double()  # ids 1..6

    alternatives = {
        "temperature ignored (softmax(logits), not softmax(logits / temperature))": (
            torch.softmax(logits, -1)
        ),
        "logits multiplied by the temperature instead of divided": (
            torch.softmax(logits * TAU, -1)
        ),
        "uniform sampling over the ids": torch.full_like(TARGET_P, 1 / len(TARGET_P)),
        "argmax instead of sampling": F.one_hot(
            TARGET_P.argmax(), len(TARGET_P)
        ).double(),
    }
    llr = {
        mistake: float(
            (counts * (q / TARGET_P).log()).nan_to_num(neginf=-math.inf).sum()
        )
        for mistake, q in alternatives.items()
    }
    freq = (counts / N_DRAWS).tolist()
    seen = ", ".join(f"id {i + 1}: {f:.2f}" for i, f in enumerate(freq))
    best = max(llr.values())
    if best >= math.log(1 / ALPHA_LR):
        fits = " or ".join(k for k, v in llr.items() if v >= best - 1.0)
        raise AssertionError(
            f"{what}: the frequencies of {N_DRAWS} sampled ids ({seen}) do not follow "
            f"softmax(logits / temperature).\n{LIKELY} {fits}"
        )
    for i, (f, p) in enumerate(zip(freq, TARGET_P.tolist())):
        lo, hi = chernoff_interval(p, N_DRAWS, BETA_ID)
        assert lo < f < hi, (
            f"{what}: id {i + 1} was drawn with frequency {f:.3f} in {N_DRAWS} draws, "
            f"but softmax(logits / temperature) gives it {p:.3f} (a correct sampler "
            f"stays within ({max(lo, 0):.3f}, {min(hi, 1):.3f}))"
        )
    # The default temperature is 1.0: the same draws as temperature=1.0 given explicitly
    # (logits log p, so a temperature of 0.8 or 0.7 moves the probabilities).
    tau_one = torch.cat([torch.tensor([40.0], dtype=torch.float64), TARGET_P.log()])
    m.load_state({"head.bias": tau_one.to(hw.device)})

    def draws(**temperature):
        gen = hw.new("torch.Generator", device=hw.device)
        gen.call("manual_seed", 2030)
        return hw.call(GENERATE, m, prompt, N_DRAWS, generator=gen, **temperature)

    assert_exact(
        draws(),
        draws(temperature=1.0),
        "generate without temperature (the same generator seed as with temperature=1.0)",
        likely={"the default temperature is not 1.0": lambda: draws(temperature=0.8)},
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_generate_errors(hw):
    """A prompt that is not a 1-D integer tensor of at least one id (2-D, 0-D, float,
    bool, a list, empty), temperature <= 0 when sampling, or more than max_len ids in all,
    is refused, the last before any work (no random numbers drawn). An int32 prompt and
    greedy decoding with temperature 0 are fine."""
    m, state = new_lm(hw, seed=790, max_len=8)
    prompt = torch.tensor([4, 2], device=hw.device)
    gen = hw.new("torch.Generator", device=hw.device)
    gen.call("manual_seed", 5)
    out = hw.call(GENERATE, m, prompt, 5, generator=gen)  # one below max_len
    check_ids(
        out, prompt, 5, hw, "generate with len(prompt) + max_new_tokens < max_len"
    )
    # Valid calls are checked by their output, not only by not raising: greedy ids.
    what = "generate(greedy=True) with len(prompt) + max_new_tokens == max_len"
    out = attempt(what, AT_MAX_LEN, hw.call, GENERATE, m, prompt, 6, greedy=True)
    check_ids(out, prompt, 6, hw, what)
    check_greedy(hw, m, state, out, prompt, 6, what)
    what = "generate with len(prompt) + max_new_tokens == max_len"
    out = attempt(what, AT_MAX_LEN, hw.call, GENERATE, m, prompt, 6, generator=gen)
    check_ids(out, prompt, 6, hw, what)
    for what, bad in (
        ("a 2-D prompt", prompt[None]),
        ("a 0-D prompt", prompt[0]),
        ("a float prompt", prompt.double()),
        ("a bool prompt", prompt > 0),
        ("a list prompt", [4, 2]),
    ):
        raises_value_error(
            f"generate with {what}",
            ("prompt",),
            hw.call,
            GENERATE,
            m,
            bad,
            2,
            hint="SPEC.md: a prompt that is not a 1-D tensor of an integer dtype raises "
            "ValueError; never cast it",
        )
    for temperature in (0.0, -1.0):
        raises_value_error(
            f"generate(temperature={temperature}) when sampling",
            ("temperature",),
            hw.call,
            GENERATE,
            m,
            prompt,
            2,
            temperature=temperature,
            generator=gen,
        )
    what = "generate(greedy=True, temperature=0.0, use_cache=True), an int32 prompt"
    hint = "temperature <= 0 is only an error when sampling (greedy ignores it)"
    out = attempt(
        what,
        hint,
        hw.call,
        GENERATE,
        m,
        prompt.int(),
        3,
        temperature=0.0,
        greedy=True,
        use_cache=True,
    )
    check_ids(out, prompt, 3, hw, what)
    check_greedy(hw, m, state, out, prompt, 3, what)
    what = "generate(greedy=True) with a prompt that is a slice (every other id)"
    out = checked(what, hw.checked_call, GENERATE, m, prompt, 3, greedy=True)
    check_ids(out, prompt, 3, hw, what)
    check_greedy(hw, m, state, out, prompt, 3, what)
    raises_value_error(
        "generate with an empty prompt",
        ("prompt",),
        hw.call,
        GENERATE,
        m,
        prompt[:0],
        2,
    )
    before = gen.call("get_state")
    raises_value_error(
        "generate with len(prompt) + max_new_tokens > max_len",
        ("max_len", "max_new_tokens", "prompt"),
        hw.call,
        GENERATE,
        m,
        prompt,
        7,
        generator=gen,
    )
    assert torch.equal(gen.call("get_state"), before), (
        "generate drew random numbers before refusing len(prompt) + max_new_tokens > "
        "max_len: check the length before generating anything"
    )
