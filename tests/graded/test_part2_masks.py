"""Part 2: boolean attention masks (True means prohibited).

Masks are exact: every expected mask is built here from positions, and the ``likely`` masks
beside it reproduce known mistakes (diagonal hidden too, the ``t_k > t_q`` offset ignored,
padding off by one), so a failure can name one.
"""

import pytest
import torch
from hypothesis import given

from autograder.facts.protocol import SECOND_DEVICE, expect_student_error
from tests.graded.answers import (
    attention_mask_oracle,
    attention_mask_suspects,
    causal_suspects,
    future,
    padded,
    padding_suspects,
)
from tests.graded.compare import assert_exact
from tests.graded.expect import assert_names
from tests.graded.inputs import checked, on_second_device
from tests.graded.strategies import examples, sizes

pytestmark = pytest.mark.part(2)

CAUSAL = "masks.causal_mask"
PADDING = "masks.padding_mask"
ATTENTION = "masks.attention_mask"
MASK_ON_CPU = (
    "a mask made on the CPU: torch.arange(...) without device= (causal_mask's device, "
    "or the lengths' device for padding_mask and attention_mask)"
)


# causal_mask -------------------------------------------------------------------------------
def assert_causal(hw, *args, **device):
    """``causal_mask(*args, **device)`` is exactly the future: True where key j > t_k - t_q + i
    (t_k defaults to t_q), with the known mistakes named."""
    t_q = args[0]
    t_k = args[1] if len(args) > 1 and args[1] is not None else t_q
    shown = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in device.items())])
    assert_exact(
        hw.call(CAUSAL, *args, **device),
        future(t_q, t_k, **device),
        f"causal_mask({shown})",
        likely=causal_suspects(t_q, t_k, **device),
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_causal_mask_square(hw):
    """``causal_mask(t)``: True strictly above the diagonal (the future), bool (t, t)."""
    for t in (1, 4):
        assert_causal(hw, t)


@pytest.mark.points(1)
@pytest.mark.public
def test_causal_mask_offset(hw):
    """With t_k > t_q the queries are the last t_q positions, as in cached decoding."""
    for t_q, t_k in ((3, 7), (1, 5)):
        assert_causal(hw, t_q, t_k)


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(8)
@given(t_q=sizes(1, 6), extra=sizes(0, 4))
def test_causal_mask_any_sizes(hw, t_q, extra):
    """Every t_q <= t_k: key j is prohibited exactly when j > t_k - t_q + i."""
    assert_causal(hw, t_q, t_q + extra)


@pytest.mark.points(1)
@pytest.mark.public
def test_causal_mask_device_and_dtype(hw):
    """``device=`` is honoured and the mask is bool (square and offset), on the device under
    test and on a second one (SPEC.md: every function works on any device; part 2:
    ``causal_mask(..., device=None)``)."""
    for t_q, t_k in ((3, None), (2, 5)):
        assert_causal(hw, t_q, t_k, device=hw.device)
        what = f"causal_mask({t_q}, {t_k}, device={SECOND_DEVICE})"
        assert_exact(
            on_second_device(
                what,
                hw.on_second_device,
                CAUSAL,
                t_q,
                t_k,
                device=SECOND_DEVICE,
                mistake=MASK_ON_CPU,
            ),
            future(t_q, t_k or t_q),
            what,
        )


@pytest.mark.points(1)
@pytest.mark.public
def test_causal_mask_errors(hw):
    """t_k < t_q, or a size below 1: ValueError naming t_q / t_k."""
    hw.call(CAUSAL, 3, 5)  # valid: must not raise
    for args in ((4, 3), (0,), (0, 2), (2, 0)):
        with expect_student_error(ValueError) as box:
            hw.call(CAUSAL, *args)
        assert_names(box, "t_q", "t_k")


# padding_mask ------------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_padding_mask_from_tensor(hw):
    """A LongTensor of lengths: True at positions >= lengths[b], on the lengths' device
    (SPEC.md part 2: "output on lengths' device"; on a second device too)."""
    lengths, t = [3, 1, 5], 5
    got = hw.call(PADDING, torch.tensor(lengths, device=hw.device), t)
    assert_exact(
        got,
        padded(lengths, t, device=hw.device),
        f"padding_mask({lengths}, {t})",
        likely=padding_suspects(lengths, t, device=hw.device),
    )
    what = f"padding_mask({lengths}, {t}) with lengths on a second device"
    got = on_second_device(
        what,
        hw.on_second_device,
        PADDING,
        torch.tensor(lengths),
        t,
        mistake=MASK_ON_CPU,
    )
    assert_exact(got, padded(lengths, t), what)


@pytest.mark.points(1)
@pytest.mark.hidden
def test_padding_mask_from_list(hw):
    """A plain list of lengths is accepted too, and so is a LongTensor that is not
    contiguous (left unchanged), also by attention_mask."""
    lengths, t = [2, 4], 4
    assert_exact(
        hw.call(PADDING, lengths, t),
        padded(lengths, t),
        f"padding_mask({lengths}, {t})",
        likely=padding_suspects(lengths, t),
    )
    strided = torch.tensor(lengths, device=hw.device)  # handed over every other element
    what = f"padding_mask(lengths={lengths}, {t})"
    assert_exact(
        checked(what, hw.checked_call, PADDING, strided, t),
        padded(lengths, t, device=hw.device),
        what + " (lengths not contiguous)",
        likely=padding_suspects(lengths, t, device=hw.device),
    )
    what = f"attention_mask(lengths={lengths}, {t})"
    assert_exact(
        checked(what, hw.checked_call, ATTENTION, strided, t),
        padded(lengths, t, device=hw.device)[:, None, None, :]
        | future(t, t, device=hw.device),
        what + " (lengths not contiguous)",
        likely=attention_mask_suspects(lengths, t, True, hw.device),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_padding_mask_errors(hw):
    """A length below 1 or above t: ValueError naming lengths (or t)."""
    hw.call(PADDING, torch.tensor([1, 3]), 3)  # valid: must not raise
    for as_list in (False, True):  # a list is accepted, and checked, as a tensor is
        with expect_student_error(ValueError) as box:
            hw.call(PADDING, [0, 2] if as_list else torch.tensor([0, 2]), 3)
        assert_names(box, "length")  # "lengths", or "length 0 is below 1"
        with expect_student_error(ValueError) as box:
            hw.call(PADDING, [2, 4] if as_list else torch.tensor([2, 4]), 3)
        assert_names(box, "length", "t")


# attention_mask ----------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_attention_mask_causal(hw):
    """(B, 1, t, t): key padding OR the causal mask, also with the lengths on a second
    device (SPEC.md: every function works on any device)."""
    lengths, t = [4, 2], 4
    got = hw.call(ATTENTION, torch.tensor(lengths, device=hw.device), t)
    assert_exact(
        got,
        attention_mask_oracle(lengths, t, device=hw.device),
        f"attention_mask({lengths}, {t})",
        likely=attention_mask_suspects(lengths, t, True, hw.device),
    )
    what = f"attention_mask({lengths}, {t}) with lengths on a second device"
    got = on_second_device(
        what,
        hw.on_second_device,
        ATTENTION,
        torch.tensor(lengths),
        t,
        mistake=MASK_ON_CPU,
    )
    assert_exact(got, attention_mask_oracle(lengths, t), what)


@pytest.mark.points(1)
@pytest.mark.hidden
def test_attention_mask_not_causal(hw):
    """causal=False: key padding alone, still (B, 1, t, t)."""
    lengths, t = [1, 3, 3], 3
    got = hw.call(ATTENTION, torch.tensor(lengths, device=hw.device), t, causal=False)
    want = padded(lengths, t, device=hw.device)[:, None, None, :].expand(3, 1, t, t)
    assert_exact(
        got,
        want,
        f"attention_mask({lengths}, {t}, causal=False)",
        likely=attention_mask_suspects(lengths, t, False, hw.device),
    )
