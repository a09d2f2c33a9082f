"""Part 1: a numerically stable softmax and scaled dot-product attention.

Expected values come from float64 oracles in this process: ``torch.softmax`` and
``F.scaled_dot_product_attention`` (True = "take part" there, so it gets ``~mask``) or the
formula. The ``likely`` oracles beside them reproduce known mistakes, so a failure can name one.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.facts.protocol import expect_student_error
from tests.graded.answers import (
    additive,
    attend,
    gradients,
    sdpa_oracle,
    sdpa_suspects,
    softmax,
)
from tests.graded.compare import (
    LIKELY,
    SECOND_PRECISION,
    assert_close,
    assert_exact,
    assert_gradients,
    check_tensor,
    diagnosis,
    is_close,
)
from tests.graded.expect import assert_names
from tests.graded.inputs import checked, gradients_of, on_second_device
from tests.graded.mistakes import AFTER
from tests.graded.strategies import examples, randint, randn, seeds, sizes

pytestmark = pytest.mark.part(1)

SOFTMAX = "attention.softmax"
SDPA = "attention.scaled_dot_product_attention"
INF = float("inf")

# Known mistakes, as the failure message names them.
NO_MAX = "no max subtraction in the softmax: exp overflows at logits near 1000"
ROW_NAN = "a fully masked row gives NaN instead of raising ValueError"
MASKED_LATE = (
    "the mask applied after the softmax, then renormalized: the prohibited keys' weights "
    "enter the sum first, and one far above the rest leaves 0/0 (mask the scores before)"
)


# Oracles -----------------------------------------------------------------------------------
def unnormalized(weights, want: torch.Tensor):
    """``weights`` when they are the right weights times a per-row factor below 1: the
    normalizer still counted the prohibited keys (masked after the softmax, in any form)."""
    if type(weights) is not torch.Tensor or weights.shape != want.shape:
        return None
    rows = weights.double().sum(-1, keepdim=True)
    scaled = want.double().to(weights.device) * rows
    if (
        bool((rows < 1 - 1e-6).any())
        and bool((rows <= 1 + 1e-6).all())
        and is_close(weights, scaled.to(weights.dtype))
    ):
        return scaled
    return None


def weight_suspects(suspects: dict, weights, want: torch.Tensor) -> dict:
    """The weights of each known mistake; mask-after-softmax recognized in any form."""
    likely = {name: w for name, (_, w) in suspects.items()}
    if AFTER in likely:
        likely[AFTER] = lambda: unnormalized(weights, want)
    return likely


def check_attention(hw, q, k, v, mask=None, dtype=torch.float64, what=""):
    """Student attention on the device in ``dtype`` against the float64 oracle."""
    dev = hw.device

    def put(t):
        if t is None:
            return None
        return t.to(dev, dtype) if t.is_floating_point() else t.to(dev)

    out, weights = hw.call(SDPA, put(q), put(k), put(v), mask=put(mask))
    want_out, want_weights = sdpa_oracle(q, k, v, mask)
    suspects = sdpa_suspects(q, k, v, mask)
    assert_close(
        weights,
        want_weights.to(dev, dtype),
        f"attention weights{what}",
        likely=weight_suspects(suspects, weights, want_weights),
    )
    assert_close(
        out,
        want_out.to(dev, dtype),
        f"attention output{what}",
        likely={name: o for name, (o, _) in suspects.items()},
    )
    return out, weights


def fail_if_nan(value, what: str, mistake: str) -> None:
    """Inside an error test: a NaN result instead of the ValueError, diagnosed."""
    tensors = value if isinstance(value, (tuple, list)) else (value,)
    if any(isinstance(t, torch.Tensor) and torch.isnan(t).any() for t in tensors):
        raise AssertionError(
            f"expected ValueError, but {what} returned NaN\n{LIKELY} {mistake}"
        )


def assert_finite(actual, what: str, mistake: str) -> None:
    """No NaN or inf, or a failure naming the mistake (NaN never matches a ``likely``)."""
    if isinstance(actual, torch.Tensor) and not torch.isfinite(actual).all():
        raise AssertionError(f"{what} contains NaN or inf\n{LIKELY} {mistake}")


# softmax -----------------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_softmax_matches_formula(hw):
    """The default axis is the last one; float32 and float64."""
    for dtype in (torch.float32, torch.float64):
        x = randn(3, 5, seed=11, scale=3.0, dtype=dtype)  # (3, 5)
        got = hw.call(SOFTMAX, x.to(hw.device))
        want = softmax(x, -1).to(hw.device, dtype)
        assert_close(
            got,
            want,
            f"softmax of a {dtype} (3, 5) tensor",
            likely={"softmax over dim 0 instead of dim=-1": softmax(x, 0)},
        )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_softmax_other_dims(hw):
    """``dim`` is honoured, including negative dims other than -1; on 3-D input too the
    default is the last axis."""
    x = randn(2, 3, 4, seed=12, scale=2.0)  # (2, 3, 4)
    for dim in (0, 1, -2):
        got = hw.call(SOFTMAX, x.to(hw.device), dim=dim)
        e = torch.exp(x - x.amax(-1, keepdim=True))
        assert_close(
            got,
            softmax(x, dim).to(hw.device),
            f"softmax(x, dim={dim}) of a (2, 3, 4) tensor",
            likely={
                "softmax ignores dim (always normalizes over the last axis)": softmax(
                    x, -1
                ),
                "max subtracted along the last axis instead of dim": e
                / e.sum(dim, keepdim=True),
            },
        )
    assert_close(  # on 3-D input the default axis is no longer also axis 1
        hw.call(SOFTMAX, x.to(hw.device)),
        softmax(x, -1).to(hw.device),
        "softmax(x) (default dim) of a (2, 3, 4) tensor",
        likely={
            f"softmax's default dim is {d}, not -1 (the last axis)": softmax(x, d)
            for d in (0, 1)
        },
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_softmax_stable_large_logits(hw):
    """Logits near +1000 overflow exp and near -1000 underflow it without the max subtraction."""
    for dtype in (torch.float32, torch.float64):
        x = torch.cat(
            [
                1000 + randn(2, 6, seed=13, scale=2.0),
                -1000 + randn(1, 6, seed=14, scale=2.0),
            ]
        ).to(dtype)  # (3, 6)
        got = hw.call(SOFTMAX, x.to(hw.device))
        what = f"softmax of {dtype} logits near +-1000"
        assert_finite(got, what, NO_MAX)
        assert_close(got, softmax(x, -1).to(hw.device, dtype), what)


@pytest.mark.points(1)
@pytest.mark.public
def test_softmax_neg_inf_gets_exact_zero(hw):
    """``-inf`` entries get weight exactly 0 and every row still sums to 1."""
    x = randn(3, 5, seed=15, dtype=torch.float32)
    neg = torch.tensor(
        [
            [True, False, False, True, False],
            [False, False, False, False, False],
            [True, True, True, True, False],
        ]
    )
    x = x.masked_fill(neg, -INF)  # (3, 5)
    got = hw.call(SOFTMAX, x.to(hw.device))
    check_tensor(got, softmax(x, -1).float().to(hw.device), "softmax with -inf entries")
    assert_exact(
        torch.where(neg.to(hw.device), got, torch.zeros_like(got)),
        torch.zeros(3, 5, device=hw.device),
        "softmax weights of the -inf entries",
    )
    assert_close(
        got.double().sum(-1).float(),
        torch.ones(3, device=hw.device),
        "row sums of the softmax",
    )
    assert_close(got, softmax(x, -1).float().to(hw.device), "softmax")


@pytest.mark.points(1)
@pytest.mark.public
def test_softmax_all_neg_inf_raises(hw):
    """A slice that is all ``-inf`` along ``dim`` has nothing to normalize: ValueError."""
    x = randn(2, 3, seed=16)
    x[:, 0] = -INF  # column 0 is all -inf; every row still has finite entries
    hw.call(SOFTMAX, x.to(hw.device), dim=-1)  # valid: must not raise
    with expect_student_error(ValueError) as box:
        fail_if_nan(
            hw.call(SOFTMAX, x.to(hw.device), dim=0),
            "softmax",
            "an all -inf slice gives NaN instead of raising ValueError",
        )
    assert_names(box, "x", "dim")


# scaled_dot_product_attention: SPEC's worked examples ------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_scaled_dot_product_attention_example_412_7(hw):
    """Scaled logits (0, log 2, log 4) and values (2, 7, 99) give 412/7.

    d_k = 4 with q = (2, 0, 0, 0), so q k^T / sqrt(d_k) is k's first column: a missing or wrong
    scale shows.
    """
    q = torch.tensor([[2.0, 0.0, 0.0, 0.0]], dtype=torch.float64)  # (Tq=1, d_k=4)
    k = torch.zeros(3, 4, dtype=torch.float64)  # (Tk=3, d_k=4)
    k[:, 0] = torch.tensor([0.0, math.log(2), math.log(4)], dtype=torch.float64)
    v = torch.tensor([[2.0], [7.0], [99.0]], dtype=torch.float64)  # (Tk=3, d_v=1)
    out, weights = hw.call(SDPA, q.to(hw.device), k.to(hw.device), v.to(hw.device))
    suspects = sdpa_suspects(q, k, v)
    want_w = torch.tensor([[1 / 7, 2 / 7, 4 / 7]], dtype=torch.float64)
    assert_close(
        weights,
        want_w.to(hw.device),
        "weights of the 412/7 example",
        likely={name: w for name, (_, w) in suspects.items()},
    )
    assert_close(
        out,
        torch.tensor([[412 / 7]], dtype=torch.float64, device=hw.device),
        "output of the 412/7 example",
        likely={name: o for name, (o, _) in suspects.items()},
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_scaled_dot_product_attention_example_16_3(hw):
    """The same example with the third key prohibited gives 16/3 (the normalizer drops it)."""
    q = torch.tensor([[1.0]], dtype=torch.float64)  # (Tq=1, d_k=1)
    k = torch.tensor([[0.0], [math.log(2)], [math.log(4)]], dtype=torch.float64)
    v = torch.tensor([[2.0], [7.0], [99.0]], dtype=torch.float64)  # (Tk=3, d_v=1)
    mask = torch.tensor([[False, False, True]])  # (Tq=1, Tk=3), True = prohibited
    out, weights = hw.call(
        SDPA, q.to(hw.device), k.to(hw.device), v.to(hw.device), mask=mask.to(hw.device)
    )
    suspects = sdpa_suspects(q, k, v, mask)  # e.g. mask after the softmax: 16/7
    want_w = torch.tensor([[1 / 3, 2 / 3, 0.0]], dtype=torch.float64)
    assert_close(
        weights,
        want_w.to(hw.device),
        "weights of the 16/3 example",
        likely=weight_suspects(suspects, weights, want_w),
    )
    assert_close(
        out,
        torch.tensor([[16 / 3]], dtype=torch.float64, device=hw.device),
        "output of the 16/3 example",
        likely={name: o for name, (o, _) in suspects.items()},
    )


def assert_near(actual, expected: torch.Tensor, what: str, atol: float, likely=()):
    """Within ``atol`` of values SPEC prints to 5 places."""
    check_tensor(actual, expected, what)
    if not torch.isclose(actual.double(), expected.double(), rtol=0, atol=atol).all():
        err = (actual.double() - expected.double()).abs().max().item()
        raise AssertionError(
            f"{what} differs from the worked example by {err:.3g} (atol {atol:g})"
            + diagnosis(actual, likely)
        )


@pytest.mark.points(1)
@pytest.mark.public
def test_scaled_dot_product_attention_example_q0(hw):
    """SPEC's third worked example (d_k = 4), to 5 places."""
    q = torch.tensor([[1.0, 0.0, 0.5, 0.0]], dtype=torch.float64)  # (1, 4)
    k = torch.tensor(
        [[0.5, 0.2, 0.3, 0.1], [0.8, 0.1, 0.4, 0.2], [0.1, 0.6, 0.2, 0.3]],
        dtype=torch.float64,
    )  # (3, 4)
    v = torch.tensor(
        [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.2, 0.1, 0.4, 0.3]],
        dtype=torch.float64,
    )  # (3, 4)
    out, weights = hw.call(SDPA, q.to(hw.device), k.to(hw.device), v.to(hw.device))
    suspects = sdpa_suspects(q, k, v)
    assert_near(
        weights,
        torch.tensor(
            [[0.33447, 0.39844, 0.26708]], dtype=torch.float64, device=hw.device
        ),
        "weights of the Q_0 example",
        1e-5,
        likely={name: w for name, (_, w) in suspects.items()},
    )
    assert_near(
        out,
        torch.tensor(
            [[0.28609, 0.33267, 0.48609, 0.53267]],
            dtype=torch.float64,
            device=hw.device,
        ),
        "output of the Q_0 example",
        1e-5,
        likely={name: o for name, (o, _) in suspects.items()},
    )


# scaled_dot_product_attention: against torch -----------------------------------------------
#: (Tq=3, Tk=5), True = prohibited; every row and column has a permitted and a prohibited key,
#: so the inverted-mask and wrong-axis suspects are finite too.
MASK_3x5 = [
    [False, True, False, True, True],
    [True, False, True, False, False],
    [False, False, True, True, False],
]


@pytest.mark.points(2)
@pytest.mark.public
def test_scaled_dot_product_attention_matches_torch(hw):
    """Batch 2, Tq=3 != Tk=5, d_k=4 != d_v=6, a (Tq, Tk) bool mask broadcast over the batch;
    also with every tensor on a second device, a bool and a float mask (SPEC.md: every
    function works on any device and returns tensors on the input's device)."""
    q = randn(2, 3, 4, seed=21)  # (B, Tq, d_k)
    k = randn(2, 5, 4, seed=22)  # (B, Tk, d_k)
    v = randn(2, 5, 6, seed=23)  # (B, Tk, d_v)
    mask = torch.tensor(MASK_3x5)  # (Tq, Tk)
    for dtype in (torch.float64, torch.float32):
        check_attention(hw, q, k, v, dtype=dtype, what=f" ({dtype}, no mask)")
        check_attention(hw, q, k, v, mask, dtype=dtype, what=f" ({dtype}, bool mask)")
    float_mask = torch.zeros(3, 5, dtype=torch.float64).masked_fill(mask, -INF)
    for kind, m in (("bool", mask), ("float", float_mask)):
        what = f"attention with a {kind} mask on a second device"
        out, weights = on_second_device(
            what, hw.on_second_device, SDPA, q, k, v, mask=m
        )
        want_out, want_weights = sdpa_oracle(q, k, v, mask)
        assert_close(
            weights, want_weights, f"weights of {what}", precision=SECOND_PRECISION
        )
        assert_close(out, want_out, f"output of {what}", precision=SECOND_PRECISION)


@pytest.mark.points(1)
@pytest.mark.hidden
def test_scaled_dot_product_attention_float_mask_and_gradients(hw):
    """Float masks are added to the scaled scores: 0/-inf, and arbitrary finite biases. The
    output is a differentiable function of q, k and v: its gradients are the formula's, with
    a float mask and with a bool one."""
    q = randn(2, 2, 3, 3, seed=31)  # (B, h, Tq, d_k)
    k = randn(2, 2, 4, 3, seed=32)  # (B, h, Tk, d_k)
    v = randn(2, 2, 4, 2, seed=33)  # (B, h, Tk, d_v)
    inf_mask = torch.zeros(2, 1, 3, 4, dtype=torch.float64)  # (B, 1, Tq, Tk)
    inf_mask[0, 0, :, 2:] = -INF
    inf_mask[1, 0, 1, 0] = -INF
    check_attention(hw, q, k, v, inf_mask, what=" with a 0/-inf float mask")
    bias = randn(3, 4, seed=34)  # (Tq, Tk): any float mask is added, not only 0/-inf
    _, weights = hw.call(
        SDPA, q.to(hw.device), k.to(hw.device), v.to(hw.device), mask=bias.to(hw.device)
    )
    scores = q @ k.transpose(-2, -1)
    assert_close(
        weights,
        torch.softmax(scores / math.sqrt(3) + bias, -1).to(hw.device),
        "attention weights with a finite float mask",
        likely={
            "float mask added before the 1/sqrt(d_k) scaling": torch.softmax(
                (scores + bias) / math.sqrt(3), -1
            ),
            "float mask ignored": torch.softmax(scores / math.sqrt(3), -1),
        },
    )
    upstream = randn(2, 2, 3, 2, seed=35)  # d(loss)/d(out), (B, h, Tq, d_v)
    dev = hw.device
    # The bool mask prohibits the 0/-inf mask's -inf positions.
    for kind, mask in (("float", bias), ("bool", inf_mask.isinf())):
        got = gradients_of(
            f"scaled_dot_product_attention with a {kind} mask",
            hw.gradients,
            SDPA,
            q.to(dev),
            k.to(dev),
            v.to(dev),
            mask=mask.to(dev),
            upstream=upstream.to(dev),
        )
        expected, _ = gradients(
            lambda q, k, v, mask=mask: attend(q, k, v, mask),
            {"args[0]": q, "args[1]": k, "args[2]": v},
            upstream,
        )
        assert_gradients(got["inputs"], expected, f"attention with a {kind} mask")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_scaled_dot_product_attention_broadcast_mask(hw):
    """A (B, 1, 1, Tk) key-padding mask broadcasts over heads and queries; float32."""
    q = randn(2, 2, 3, 4, seed=41)  # (B, h, Tq, d_k)
    k = randn(2, 2, 4, 4, seed=42)  # (B, h, Tk, d_k)
    v = randn(2, 2, 4, 5, seed=43)  # (B, h, Tk, d_v)
    mask = torch.tensor([[False] * 4, [False, False, True, True]])[:, None, None, :]
    check_attention(hw, q, k, v, mask, dtype=torch.float32, what=" (broadcast mask)")


@st.composite
def masked_problem(draw):
    """Random shapes and a mask (bool or 0/-inf float) with a permitted key in every row."""
    batch, t_q, t_k = draw(sizes(1, 3)), draw(sizes(1, 4)), draw(sizes(1, 5))
    d_k, d_v, seed = draw(sizes(1, 4)), draw(sizes(1, 4)), draw(seeds)
    prohibited = randint(0, 2, batch, t_q, t_k, seed=seed).bool()
    keep = randint(0, t_k, batch, t_q, seed=seed + 1)  # one permitted key per row
    prohibited[torch.arange(batch)[:, None], torch.arange(t_q)[None, :], keep] = False
    q = randn(batch, t_q, d_k, seed=seed + 2, scale=2.0)
    k = randn(batch, t_k, d_k, seed=seed + 3, scale=2.0)
    v = randn(batch, t_k, d_v, seed=seed + 4)
    as_float = draw(st.booleans())
    return q, k, v, prohibited, as_float


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(10)
@given(problem=masked_problem())
def test_scaled_dot_product_attention_weight_properties(hw, problem):
    """Every weight row sums to 1 and every prohibited weight is exactly 0."""
    q, k, v, prohibited, as_float = problem
    mask = additive(prohibited, q) if as_float else prohibited
    dev = hw.device
    out, weights = hw.call(SDPA, q.to(dev), k.to(dev), v.to(dev), mask=mask.to(dev))
    check_tensor(weights, prohibited.double().to(dev), "attention weights")
    want = attend(q, k, v, prohibited)[1]
    assert_close(
        weights.sum(-1),
        torch.ones(prohibited.shape[:-1], dtype=torch.float64, device=dev),
        "row sums of the attention weights",
        likely={
            AFTER: lambda: (
                None if unnormalized(weights, want) is None else weights.sum(-1)
            )
        },
    )
    assert_exact(
        torch.where(prohibited.to(dev), weights, torch.zeros_like(weights)),
        torch.zeros_like(prohibited, dtype=torch.float64).to(dev),
        "weights of the prohibited keys",
    )
    assert_close(out, (weights @ v.to(dev)), "attention output (weights @ v)")
    # The properties alone admit wrong weights (uniform over the permitted keys): the oracle.
    assert_close(
        weights,
        want.to(dev),
        "attention weights",
        likely=weight_suspects(sdpa_suspects(q, k, v, prohibited), weights, want),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(6)
@given(seed=seeds, t_q=sizes(2, 4), t_k=sizes(2, 5))
def test_scaled_dot_product_attention_permutation_equivariance(hw, seed, t_q, t_k):
    """Without positions, permuting keys with values changes nothing; permuting queries
    permutes the output rows."""
    q = randn(2, t_q, 3, seed=seed)  # (B, Tq, d_k)
    k = randn(2, t_k, 3, seed=seed + 1)  # (B, Tk, d_k)
    v = randn(2, t_k, 2, seed=seed + 2)  # (B, Tk, d_v)
    gen = torch.Generator().manual_seed(seed)
    pq, pk = torch.randperm(t_q, generator=gen), torch.randperm(t_k, generator=gen)
    dev = hw.device
    out, _ = hw.call(SDPA, q.to(dev), k.to(dev), v.to(dev))
    out_k, _ = hw.call(SDPA, q.to(dev), k[:, pk].to(dev), v[:, pk].to(dev))
    out_q, _ = hw.call(SDPA, q[:, pq].to(dev), k.to(dev), v.to(dev))
    assert_close(out_k, out, "output after permuting the keys and values together")
    assert_close(out_q, out[:, pq.to(dev)], "output after permuting the queries")
    # Equivariance alone admits wrong outputs (uniform weights, zeros): the oracle.
    assert_close(
        out,
        attend(q, k, v)[0].to(dev),
        "attention output",
        likely={name: o for name, (o, _) in sdpa_suspects(q, k, v).items()},
    )


def large_logits_case():
    """q, k, v and a mask whose scaled logits reach ~1000 (tests/engine checks that they do)."""
    q = randn(2, 3, 4, seed=51, scale=35.0)  # (B, Tq, d_k): logits of order 1000
    k = randn(2, 4, 4, seed=52, scale=35.0)
    v = randn(2, 4, 3, seed=53)
    mask = torch.tensor([[False, True, False, False]])  # (1, Tk)
    return q, k, v, mask


@pytest.mark.points(1)
@pytest.mark.hidden
def test_scaled_dot_product_attention_large_logits(hw):
    """Scaled logits of size ~1000 must not overflow (float64, with a mask)."""
    q, k, v, mask = large_logits_case()
    dev = hw.device
    out, weights = hw.call(SDPA, q.to(dev), k.to(dev), v.to(dev), mask=mask.to(dev))
    assert_finite(weights, "attention weights at logits near 1000", NO_MAX)
    want_out, want_weights = sdpa_oracle(q, k, v, mask)
    assert_close(weights, want_weights.to(dev), "attention weights at large logits")
    assert_close(out, want_out.to(dev), "attention output at large logits")
    # The prohibited key's logit 2000 above the permitted one: it must never enter the sum.
    f64 = {"dtype": torch.float64, "device": dev}
    q1 = torch.tensor([[1.0]], **f64)  # (Tq=1, d_k=1)
    k1 = torch.tensor([[0.0], [2000.0]], **f64)  # scaled logits 0 and 2000
    v1 = torch.tensor([[2.0], [7.0]], **f64)
    mask1 = torch.tensor([[False, True]], device=dev)
    out1, weights1 = hw.call(SDPA, q1, k1, v1, mask=mask1)
    what = "attention weights, the prohibited key's logit 2000 above the permitted one"
    assert_finite(weights1, what, MASKED_LATE)
    suspects = {name: w for name, (_, w) in sdpa_suspects(q1, k1, v1, mask1).items()}
    assert_close(weights1, torch.tensor([[1.0, 0.0]], **f64), what, likely=suspects)
    assert_close(out1, torch.tensor([[2.0]], **f64), "its output")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_scaled_dot_product_attention_shape_errors(hw):
    """d_k differing between q and k, or Tk between k and v: ValueError naming them."""
    dev = hw.device
    q, k, v = randn(3, 4, seed=61), randn(5, 4, seed=62), randn(5, 2, seed=63)
    hw.call(SDPA, q.to(dev), k.to(dev), v.to(dev))  # valid: must not raise
    with expect_student_error(ValueError) as box:
        hw.call(SDPA, q.to(dev), randn(5, 3, seed=64).to(dev), v.to(dev))
    assert_names(box, "q", "k", "d_k")
    with expect_student_error(ValueError) as box:
        hw.call(SDPA, q.to(dev), k.to(dev), randn(4, 2, seed=65).to(dev))
    assert_names(box, "k", "v", "Tk", "t_k")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_scaled_dot_product_attention_fully_masked_row_raises(hw):
    """A query row with no permitted key (bool or float mask) raises ValueError, never NaN."""
    dev = hw.device
    q, k, v = randn(2, 3, 4, seed=71), randn(2, 4, 4, seed=72), randn(2, 4, 3, seed=73)
    mask = torch.zeros(2, 3, 4, dtype=torch.bool)
    mask[1, 2, :3] = True
    hw.call(SDPA, q.to(dev), k.to(dev), v.to(dev), mask=mask.to(dev))  # valid
    mask[1, 2, 3] = True  # query 2 of batch 1 now has no permitted key
    for bad in (mask, additive(mask, q)):
        with expect_student_error(ValueError) as box:
            fail_if_nan(
                hw.call(SDPA, q.to(dev), k.to(dev), v.to(dev), mask=bad.to(dev)),
                "scaled_dot_product_attention",
                ROW_NAN,
            )
        assert_names(box, "mask")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_attention_takes_noncontiguous_inputs_and_leaves_them_unchanged(hw):
    """SPEC.md: inputs are never modified in place, and a tensor that is not contiguous (a
    slice) is accepted: softmax and attention (bool and float masks) on such tensors."""
    dev = hw.device
    x = randn(3, 5, seed=17, scale=3.0)  # (3, 5)
    for dim in (-1, 0):
        got = checked(
            f"softmax(x, dim={dim})", hw.checked_call, SOFTMAX, x.to(dev), dim=dim
        )
        assert_close(
            got, torch.softmax(x, dim).to(dev), f"softmax(x, dim={dim}) of a slice"
        )
    q, k, v = randn(2, 3, 4, seed=18), randn(2, 5, 4, seed=19), randn(2, 5, 6, seed=20)
    prohibited = torch.tensor(MASK_3x5)  # (Tq, Tk)
    for mask in (prohibited, additive(prohibited, q)):
        kind = "bool" if mask.dtype == torch.bool else "float"
        what = f"scaled_dot_product_attention with a {kind} mask"
        out, weights = checked(
            what,
            hw.checked_call,
            SDPA,
            q.to(dev),
            k.to(dev),
            v.to(dev),
            mask=mask.to(dev),
        )
        want_out, want_weights = sdpa_oracle(q, k, v, prohibited)
        assert_close(weights, want_weights.to(dev), f"weights of {what} (slices in)")
        assert_close(out, want_out.to(dev), f"output of {what} (slices in)")
