"""Shared set-up of part 7's tests: the corpus, the small model, seeded batches.

The corpus is ``data/names.txt`` (made-up names, one per line, written for this course).
``evaluate`` and ``train`` are checked against losses computed from the student's own forward
output (``batch_losses``), so a forward bug costs the forward tests, not these.
"""

import functools
from pathlib import Path

import torch

from autograder.facts.protocol import StudentError
from tests.graded.answers import losses_of
from tests.graded.compare import LIKELY
from tests.graded.modules import build
from tests.graded.strategies import random_state


@functools.cache
def corpus() -> str:
    """``data/names.txt``, read when a test needs it (a shipped module computes nothing at
    import)."""
    return (Path(__file__).resolve().parents[2] / "data" / "names.txt").read_text()


def corpus_chars() -> list[str]:
    """The corpus's characters, sorted: "\n" and a-z."""
    return sorted(set(corpus()))


def corpus_names() -> list[str]:
    return corpus().split()


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
NO_CAUSAL = "no causal mask: positions see the future"
NO_POS = "position embeddings not added"
NO_LN_F = "ln_f not applied before the head"
POS_RESTART = (
    "positions restart at 0 in each chunk instead of continuing from the cache"
)
CHUNK_UNMASKED = "no causal mask inside a chunk fed through the caches"
MASK_NO_OFFSET = "a new token sees only the first position: the causal mask ignores the cache's offset"
REFEED = "cached generation re-feeds the whole sequence, not only the newest token"
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
    shapes = lm_shapes(vocab, sizes["d_model"], n_layers, sizes["d_ff"], max_len)
    state = lm_state(shapes, seed, dtype, hw.device)
    to = {"device": hw.device, "dtype": dtype}
    m = build(
        hw,
        "charlm.CharLM",
        vocab,
        n_layers=n_layers,
        max_len=max_len,
        to=to,
        state=state,
        **sizes,
    )
    return m, state


def lm_state(shapes, seed, dtype=torch.float64, device="cpu"):
    """Seeded weights of these shapes, norm gains near 1 (as after training)."""
    state = random_state(shapes, seed=seed, dtype=dtype, device=device)
    for name in state:
        if name.endswith(("ln1.weight", "ln2.weight", "ln_f.weight")):
            state[name] = state[name] + 1
    return state


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
    """Per batch, the losses (``oracles.losses_of``) of the student's own forward output."""
    return losses_of(
        [(m(inputs.to(hw.device)).double(), targets) for inputs, targets in batches]
    )
