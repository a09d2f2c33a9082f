"""Part 7, data: the character tokenizer and the shifted, padded batches (SPEC.md part 7)."""

import pytest
import torch

from tests.graded.answers import (
    batch_oracle,
    encode,
)
from tests.graded.compare import assert_exact
from tests.graded.expect import raises_value_error
from tests.graded.inputs import checked, on_second_device
from tests.graded.part7_setup import (
    FIRST_SEEN,
    ID_ZERO,
    LEFT_PAD,
    LM_BATCH,
    PAD,
    PAD_ID_IGNORED,
    PAD_TARGETS,
    TOKENIZER,
    UNSHIFTED,
    attempt,
    corpus,
    corpus_chars,
)

pytestmark = pytest.mark.part(7)


# Tokenizer ----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_char_tokenizer_round_trip(hw):
    """Ids 1.. in sorted order, vocab_size counts PAD, decode(encode(s)) == s."""
    chars = corpus_chars()
    tok = hw.new(TOKENIZER, corpus())
    vocab_size = tok.attr("vocab_size")
    assert vocab_size == len(chars) + 1, (
        f"CharTokenizer.vocab_size is {vocab_size}, expected {len(chars) + 1} "
        f"({len(chars)} characters plus the pad id 0)"
    )
    ids = tok.call("encode", "".join(chars))
    assert isinstance(ids, list), (
        f"encode should return a list, got {type(ids).__name__}"
    )
    first_seen = list(dict.fromkeys(corpus()))
    assert_exact(
        torch.tensor(ids, dtype=torch.long),
        torch.arange(1, len(chars) + 1),
        "CharTokenizer.encode(sorted characters)",
        likely={
            ID_ZERO: torch.arange(len(chars)),
            FIRST_SEEN: torch.tensor([first_seen.index(c) + 1 for c in chars]),
        },
    )
    text = corpus()[:400]
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
    """An unknown character or id is a ValueError (naming the character); every character
    of the text, upper case too, is in the vocabulary."""
    tok = hw.new(TOKENIZER, "Hello world\n")
    for word in ("low\n", "Hello"):
        what = f"CharTokenizer('Hello world\\n').encode({word!r})"
        ids = attempt(
            what,
            "the vocabulary is not the text's own characters (changed case?)",
            tok.call,
            "encode",
            word,
        )
        back = tok.call("decode", ids)
        assert back == word, f"CharTokenizer.decode(encode({word!r})) gave {back!r}"
    raises_value_error(
        "CharTokenizer.encode('He#lo')", ("#",), tok.call, "encode", "He#lo"
    )
    # the vocabulary "\n", " ", H, d, e, l, o, r, w has ids 1..9, so 10 is unknown
    raises_value_error(
        "CharTokenizer.decode([1, 2, 10])",
        ("10", "id"),
        tok.call,
        "decode",
        [1, 2, 10],
    )
    # IGNORE_INDEX is no id either (only PAD_ID is skipped): a decoded target row shows it
    raises_value_error(
        "CharTokenizer.decode([1, -100])",
        ("-100", "id"),
        tok.call,
        "decode",
        [1, -100],
        hint="decode skips IGNORE_INDEX as well as PAD_ID; only PAD_ID is skipped",
    )


# Batches ------------------------------------------------------------------------------
SEQS = ([3, 1, 4, 1, 5], [2, 7], [6, 2, 8, 3, 9, 4])  # lengths 5, 2, 6 -> T = 5


def check_lm_batch(hw, pad_id, strided=False):
    """``strided``: the sequences handed over as slices, and none may come back changed."""
    seqs = [torch.tensor(s, device=hw.device) for s in SEQS]
    kwargs = {} if pad_id == PAD else {"pad_id": pad_id}
    if strided:
        what = f"lm_batch(sequences, pad_id={pad_id})"
        out = checked(what, hw.checked_call, LM_BATCH, seqs, **kwargs)
    else:
        out = hw.call(LM_BATCH, seqs, **kwargs)
    assert isinstance(out, tuple) and len(out) == 2, (
        "lm_batch should return a tuple (inputs, targets)"
    )
    left = batch_oracle(SEQS, pad_id, left=True)
    mistakes = (
        {LEFT_PAD: left[0], PAD_ID_IGNORED: batch_oracle(SEQS, PAD)[0]},
        {
            LEFT_PAD: left[1],
            UNSHIFTED: batch_oracle(SEQS, pad_id, shift=False)[1],
            PAD_TARGETS: batch_oracle(SEQS, pad_id, target_fill=pad_id)[1],
        },
    )
    expected = batch_oracle(SEQS, pad_id)
    for name, got, want, likely in zip(("inputs", "targets"), out, expected, mistakes):
        what = f"lm_batch(sequences, pad_id={pad_id}) {name}"
        assert_exact(got, want.to(hw.device), what, likely=likely)
    return seqs


@pytest.mark.public
@pytest.mark.points(1)
def test_lm_batch_shift_and_right_padding(hw):
    """inputs s[:-1], targets s[1:], right-padded with PAD_ID and IGNORE_INDEX; on the
    sequences' device, a second one too (SPEC.md: every function works on any device and
    returns tensors on the input's device)."""
    check_lm_batch(hw, PAD)
    what = "lm_batch(sequences) with the sequences on a second device"
    seqs = [torch.tensor(s) for s in SEQS]
    got = on_second_device(what, hw.on_second_device, LM_BATCH, seqs)
    for name, part, want in zip(("inputs", "targets"), got, batch_oracle(SEQS, PAD)):
        assert_exact(part, want, f"{what}: {name}")


@pytest.mark.hidden
@pytest.mark.points(1)
def test_lm_batch_pad_id_and_short_sequence(hw):
    """A non-default pad_id pads the inputs (targets still IGNORE_INDEX), the sequences
    slices left unchanged; a sequence of length 1 is refused."""
    seqs = check_lm_batch(hw, 5, strided=True)
    raises_value_error(
        "lm_batch with a sequence of length 1",
        ("sequence",),
        hw.call,
        LM_BATCH,
        [seqs[0], torch.tensor([4], device=hw.device)],
    )
