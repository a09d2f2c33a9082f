"""Part 7, loss and training: ``lm_loss``, ``evaluate`` and ``train`` (losses from
``F.cross_entropy(ignore_index=-100)`` in float64)."""

import contextlib

import pytest
import torch

from autograder.facts.protocol import SECOND_DEVICE, StudentError
from tests.graded.answers import (
    batch_oracle,
    ce,
    ce_pad_counted,
    corpus_mean,
    encode,
    eval_suspects,
    oracle_training,
    train_suspects,
)
from tests.graded.compare import LIKELY, SECOND_PRECISION, assert_close
from tests.graded.expect import raises_value_error
from tests.graded.inputs import checked, data_left_on_the_cpu, on_second_device
from tests.graded.mistakes import (
    LAST_BATCH_STEPS,
    PAD_AS_CLASS,
    PAD_COUNTED,
    STEP_PER_EPOCH,
    ZERO_GRAD_PER_EPOCH,
)
from tests.graded.part7_setup import (
    EVALUATE,
    IGNORE,
    LM_LOSS,
    PAD,
    TRAIN,
    H,
    V,
    as_float,
    attempt,
    batch_losses,
    corpus_chars,
    corpus_names,
    new_lm,
    three_batches,
)
from tests.graded.strategies import randint, randn

pytestmark = pytest.mark.part(7)


# Loss ---------------------------------------------------------------------------------
def loss_case(dtype, device):
    """logits (2, 5, 7) of size ~3 and targets with 5 and 2 real entries."""
    logits = randn(2, 5, 7, seed=71, dtype=dtype, device=device, scale=3.0)
    targets = torch.tensor(
        [[1, 6, 0, 3, 2], [4, 5, IGNORE, IGNORE, IGNORE]], device=device
    )
    return logits, targets


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
                likely[PAD_COUNTED] = ce_pad_counted(logits, targets).to(dtype)
            assert_close(
                got,
                ce(logits, targets, reduction).to(dtype),
                f"lm_loss(reduction={reduction!r}) in {dtype}",
                likely=likely,
            )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_lm_loss_no_real_target_slices_and_wide_logits(hw):
    """Targets that are all IGNORE_INDEX have no loss: ValueError. Slices (not contiguous)
    are accepted and left unchanged; float32 logits hundreds apart keep their digits."""
    logits, targets = loss_case(torch.float64, hw.device)
    hw.call(LM_LOSS, logits, targets)
    # SPEC.md: a slice such as logits[:, :-1] is accepted, and inputs stay unchanged.
    for reduction in ("mean", "sum"):
        what = f"lm_loss(logits, targets, reduction={reduction!r})"
        got = checked(what, hw.checked_call, LM_LOSS, logits, targets, reduction)
        assert_close(got, ce(logits, targets, reduction), what + " on slices")
    # Logits hundreds apart in float32: log_softmax, logsumexp, F.cross_entropy and a
    # max-subtracted sum stay under a hundredth of the tolerance; the log of a softmax takes
    # the log of an underflowed 0 (inf), and exp without first subtracting the max overflows.
    wide = loss_case(torch.float32, hw.device)[0].clone()
    wide[..., 3] += 200.0
    for reduction in ("mean", "sum"):
        assert_close(
            hw.call(LM_LOSS, wide, targets, reduction),
            ce(wide, targets, reduction).float(),
            f"lm_loss(reduction={reduction!r}) on float32 logits hundreds apart",
            likely={
                "the log of a softmax (or exp without first subtracting the max): it under- "
                "or overflows for logits far apart; use log_softmax or F.cross_entropy": (
                    torch.tensor(float("inf"))
                )
            },
        )
    for reduction in ("mean", "sum"):  # a sum over nothing is no loss either
        raises_value_error(
            f"lm_loss with every target IGNORE_INDEX, reduction={reduction!r}",
            ("target",),
            hw.call,
            LM_LOSS,
            logits,
            torch.full_like(targets, IGNORE),
            reduction,
            hint="the check for no real target made only under reduction='mean'",
        )


# evaluate -----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_evaluate_token_weighted_mean(hw):
    """evaluate is total loss / total real tokens, not a mean of batch means; any iterable
    of batches will do, one that can be gone through only once too."""
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
    what = "evaluate(model, iter(batches))"
    once = hw.new("builtins.iter", batches)  # an iterator: used up after one pass
    more = (
        "evaluate needs more of its batches than one pass (a second loop, len() or "
        "indexing); SPEC.md allows any iterable, a generator too"
    )
    got = as_float(attempt(what, more, hw.call, EVALUATE, m, once), what)
    # The same batches as a list gave the right value: another one here comes from how the
    # iterable is used.
    assert_close(got, corpus_mean(losses), what, likely={more: got})
    # SPEC.md part 7: the batches are "moved to the model's device"
    on_second_device("CharLM.to", m.on_second_device, "to", SECOND_DEVICE)
    what = "evaluate(model on a second device, batches on the CPU)"
    got = data_left_on_the_cpu(
        what, hw.on_second_device, EVALUATE, m, batches, data="the batches"
    )
    assert_close(
        as_float(got, what), corpus_mean(losses), what, precision=SECOND_PRECISION
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_evaluate_restores_mode_and_skips_empty_batches(hw):
    """The model runs in eval mode without grad, and the previous train/eval mode comes back
    (also after raising); a batch without real targets adds nothing; no real target at all is
    a ValueError."""
    m, _ = new_lm(hw, seed=710)
    b1, b2, _ = three_batches()
    empty = (b2[0], torch.full_like(b2[1], IGNORE))
    losses = batch_losses(hw, m, [b1, b2])
    m.call("train")
    got, passes = attempt(
        "evaluate with a batch that has no real target",
        "a batch without real targets must be skipped (it adds nothing)",
        hw.forwards_during,
        m,
        EVALUATE,
        m,
        [b1, empty, b2],
    )
    assert not any(p["training"] for p in passes), (
        f"evaluate ran the model in train mode.\n{LIKELY} model.eval() is not called "
        "before the loop"
    )
    assert not any(p["grad"] for p in passes), (
        "evaluate ran the model with gradients enabled (SPEC.md: without grad).\n"
        f"{LIKELY} the loop is not inside torch.no_grad()"
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
    too_long = randint(1, V, 1, 17, seed=711, device=hw.device)  # max_len is 16
    with contextlib.suppress(StudentError):  # the model refuses it (its own test's)
        hw.call(EVALUATE, m, [(too_long, too_long)])
    assert m.attr("training") is True, (
        "evaluate did not restore train mode after the model raised on a batch longer "
        f"than max_len\n{LIKELY} the mode is restored after the loop, not in a finally: "
        "block"
    )


# Training -----------------------------------------------------------------------------
@pytest.mark.public
@pytest.mark.points(1)
def test_train_overfits_one_batch(hw):
    """A tiny model learns one batch of two names in 15 epochs; one dict per epoch."""
    vocab = len(corpus_chars()) + 1
    hw.seed(0)
    sizes = {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "max_len": 16}
    m = hw.build("charlm.CharLM", vocab, to={"device": hw.device}, **sizes)
    seqs = [encode(f"\n{n}\n") for n in corpus_names()[:2]]
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


@pytest.mark.hidden
@pytest.mark.points(1)
def test_train_records_its_steps_with_default_arguments(hw):
    """Two epochs of two batches (8 and 3 real targets) with the default lr (1e-3), against
    the same training in float64 with torch.optim.Adam: the weights follow one Adam step per
    batch, each epoch's train_loss is the token-weighted mean of the losses computed during
    its steps (each before its update), dev_loss evaluates the model after the epoch; then
    train with every default runs one epoch."""
    m, state = new_lm(hw, seed=755)
    b1, b2, b3 = three_batches()
    train_batches = [tuple(t.to(hw.device) for t in b) for b in (b1, b2)]
    history = hw.call(TRAIN, m, train_batches, [b3], epochs=2)
    assert isinstance(history, list) and len(history) == 2, (
        "train(..., epochs=2) should return a list of 2 dicts"
    )
    dev = [tuple(t.to(hw.device) for t in b3)]
    want, weights, tiny = oracle_training(state, train_batches, dev, 2, 1e-3, H)
    after = m.state_dict()
    names = sorted(state)
    keep = ~torch.cat([tiny[n].flatten() for n in names])

    def flat(weights_by_name):
        return torch.cat([weights_by_name[n].double().flatten() for n in names])[keep]

    def trained(lr, optimizer="Adam", schedule=None):
        return lambda: flat(
            oracle_training(state, train_batches, dev, 2, lr, H, optimizer, schedule)[1]
        )

    assert_close(
        flat(after),
        flat(weights),
        "the weights after 2 epochs of two batches (defaults: Adam, lr=1e-3)",
        likely={
            "SGD instead of Adam": trained(1e-3, "SGD"),
            "the default lr is not 1e-3 (this is 3e-4)": trained(3e-4),
            "the default lr is not 1e-3 (this is 1e-2)": trained(1e-2),
            "no update: zero_grad / backward / step missing": flat(state),
            **{
                schedule: trained(1e-3, schedule=schedule)
                for schedule in (ZERO_GRAD_PER_EPOCH, STEP_PER_EPOCH, LAST_BATCH_STEPS)
            },
        },
    )
    for n, (record, expected) in enumerate(zip(history, want), start=1):
        assert isinstance(record, dict) and record.get("epoch") == n, (
            f"train's history[{n - 1}] should be a dict with epoch={n}"
        )
        train_likely = {AFTER_STEPS: expected["train_after"]}
        dev_likely = {}
        if n == 2:
            both = (want[0]["train_loss"] + expected["train_loss"]) / 2
            train_likely[NOT_RESET] = both
            dev_likely[DEV_BEFORE] = want[0]["dev_loss"]
        assert_close(
            as_float(record.get("train_loss"), f"history[{n - 1}]['train_loss']"),
            expected["train_loss"],
            f"train_loss of epoch {n} (the token-weighted mean of the losses computed "
            "during its two steps)",
            likely=train_likely,
        )
        assert_close(
            as_float(record.get("dev_loss"), f"history[{n - 1}]['dev_loss']"),
            expected["dev_loss"],
            f"dev_loss of epoch {n}: evaluate(model, dev_batches) after the epoch",
            likely=dev_likely,
        )
    one_batch = train_batches[:1]
    during = corpus_mean(batch_losses(hw, m, one_batch))
    again = hw.call(TRAIN, m, one_batch, [b3])
    assert isinstance(again, list) and len(again) == 1, (
        "train(model, train_batches, dev_batches) should run epochs=1 by default"
    )
    assert_close(
        as_float(again[0].get("train_loss"), "train's train_loss"),
        during,
        "train_loss of a second train call (one epoch by default)",
    )
