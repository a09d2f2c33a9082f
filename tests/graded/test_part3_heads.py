"""Part 3: split_heads, merge_heads and MultiHeadAttention.

The oracle is ``torch.nn.MultiheadAttention`` in float64 (``batch_first=True``) with the same
weights: ``in_proj_weight``/``in_proj_bias`` are the stacked q/k/v projections, masks go to it as
``(B*h, Tq, Tk)``. The ``likely`` oracles beside it are the formula with one known mistake
(wrong scale, reshape without transpose, keys and values from ``x``), so a failure can name it.
Masks are built here, not with the student's part 2, so part 3 stands on its own.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from autograder.facts.protocol import SECOND_DEVICE, expect_student_error
from tests.graded.answers import (
    future,
    heads_no_transpose,
    heads_of,
    mha_suspects,
    torch_mha,
    width_no_transpose,
    width_of,
)
from tests.graded.compare import LIKELY, SECOND_PRECISION, assert_close, assert_exact
from tests.graded.expect import assert_names
from tests.graded.inputs import checked, on_second_device
from tests.graded.mistakes import MERGE_NO_T, SPLIT_NO_T, TRUE_DIVISION
from tests.graded.modules import build
from tests.graded.strategies import examples, randn, random_state, seeds, sizes

pytestmark = pytest.mark.part(3)

SPLIT = "heads.split_heads"
MERGE = "heads.merge_heads"
MHA = "heads.MultiHeadAttention"
PROJ = ("q_proj", "k_proj", "v_proj", "out_proj")


# Oracles -----------------------------------------------------------------------------------
def mha_weights(d_model: int, seed: int, bias: bool = True) -> dict:
    """Seeded float64 parameters under the names SPEC fixes."""
    shapes = {f"{p}.weight": (d_model, d_model) for p in PROJ}
    if bias:
        shapes |= {f"{p}.bias": (d_model,) for p in PROJ}
    return random_state(shapes, seed, torch.float64, "cpu")


def student_mha(hw, sd: dict, n_heads: int, dtype=torch.float64, bias: bool = True):
    """A student MultiHeadAttention on the device in ``dtype`` holding ``sd``."""
    d_model = sd["q_proj.weight"].shape[0]
    state = {k: v.to(hw.device, dtype) for k, v in sd.items()}
    to = {"device": hw.device, "dtype": dtype}
    return build(hw, MHA, d_model, n_heads, bias=bias, to=to, state=state)


def check_mha(
    hw,
    sd,
    n_heads,
    x,
    context=None,
    mask=None,
    dtype=torch.float64,
    what="MultiHeadAttention output",
    bias=True,
    positional=False,
    strided=False,
):
    """The student's MultiHeadAttention against nn.MultiheadAttention, with diagnoses;
    ``positional``: context and mask passed by position, as SPEC's signature orders them;
    ``strided``: every tensor handed over non-contiguous, and none may come back changed."""
    m = student_mha(hw, sd, n_heads, dtype, bias=bias)
    dev = hw.device

    def put(t):
        if t is None:
            return None
        return t.to(dev, dtype) if t.is_floating_point() else t.to(dev)

    def run(*args, **kwargs):
        if strided:
            return checked(what, m.checked_call, "__call__", *args, **kwargs)
        return m(*args, **kwargs)

    if positional:  # forward(x, context=None, mask=None, cache=None)
        got = run(put(x), put(context), put(mask))
    else:
        got = run(put(x), context=put(context), mask=put(mask))
    want = torch_mha(x, sd, n_heads, context, mask)
    assert_close(
        got,
        want.to(dev, dtype),
        what,
        likely=mha_suspects(x, sd, n_heads, context, mask),
    )
    return m


# split_heads / merge_heads -----------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_split_heads_layout(hw):
    """(B, T, D) -> (B, h, T, d_h): reshape to (B, T, h, d_h), then transpose."""
    x = randn(2, 3, 8, seed=101)  # (B=2, T=3, D=8), h=2, d_h=4
    assert_exact(
        hw.call(SPLIT, x.to(hw.device), 2),
        heads_of(x, 2).to(hw.device),
        "split_heads(x, 2) of a (2, 3, 8) tensor",
        likely={SPLIT_NO_T: heads_no_transpose(x, 2)},
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_merge_heads_layout(hw):
    """(B, h, T, d_h) -> (B, T, h*d_h): transpose back, then flatten the heads."""
    y = randn(2, 2, 3, 4, seed=102, dtype=torch.float32)  # (B=2, h=2, T=3, d_h=4)
    assert_exact(
        hw.call(MERGE, y.to(hw.device)),
        width_of(y).to(hw.device),
        "merge_heads of a (2, 2, 3, 4) tensor",
        likely={MERGE_NO_T: width_no_transpose(y)},
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(8)
@given(seed=seeds, b=sizes(1, 3), t=sizes(1, 4), h=sizes(1, 3), d=sizes(1, 3))
def test_split_heads_merge_heads_roundtrip(hw, seed, b, t, h, d):
    """merge_heads(split_heads(x)) == x exactly, each given a non-contiguous tensor (a
    slice) and leaving it unchanged."""
    x = randn(b, t, h * d, seed=seed).to(hw.device)
    split = checked(f"split_heads(x, {h})", hw.checked_call, SPLIT, x, h)
    assert_exact(
        checked("merge_heads(y)", hw.checked_call, MERGE, split),
        x,
        f"merge_heads(split_heads(x, {h})) of {tuple(x.shape)}",
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_split_heads_and_MultiHeadAttention_errors(hw):
    """D not divisible by n_heads (split_heads), d_model not divisible by n_heads (module)."""
    hw.call(SPLIT, randn(2, 3, 8, seed=103).to(hw.device), 2)  # valid
    with expect_student_error(ValueError) as box:
        hw.call(SPLIT, randn(2, 3, 10, seed=104).to(hw.device), 4)
    assert_names(box, "n_heads", "x", "D")
    hw.new(MHA, 8, 2)  # valid
    with expect_student_error(ValueError) as box:
        hw.new(MHA, 10, 4)
    assert_names(box, "d_model", "n_heads")


# MultiHeadAttention ------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_MultiHeadAttention_attributes(hw):
    """n_heads, d_head and the four (D, D) projections with biases, by SPEC's names."""
    m = hw.new(MHA, 12, 3)
    assert m.attr("n_heads") == 3, f"n_heads is {m.attr('n_heads')!r}, expected 3"
    d_head = m.attr("d_head")
    assert type(d_head) is int and d_head == 4, (
        f"d_head is {d_head!r}, expected the int 4 (12 // 3)"
        + (f"\n{LIKELY} {TRUE_DIVISION}" if isinstance(d_head, float) else "")
    )
    sd = m.state_dict()
    for p in PROJ:
        for name, shape in ((f"{p}.weight", (12, 12)), (f"{p}.bias", (12,))):
            assert name in sd, f"MultiHeadAttention has no parameter {name}"
            assert tuple(sd[name].shape) == shape, (
                f"{name} has shape {tuple(sd[name].shape)}, expected {shape}"
            )


@pytest.mark.points(1)
@pytest.mark.public
def test_MultiHeadAttention_matches_torch(hw):
    """Self-attention equals nn.MultiheadAttention's: B=2, T=5, D=8, h=2 (d_h=4 != sqrt(D));
    also moved to a second device with x and the mask there (SPEC.md: every module works on
    any device and returns tensors on the input's device)."""
    sd = mha_weights(8, seed=110)
    x = randn(2, 5, 8, seed=111)  # (B, T, D)
    check_mha(hw, sd, 2, x, what="MultiHeadAttention output (float64)")
    check_mha(hw, sd, 2, x, mask=future(5, 5), what="output with a causal (T, T) mask")
    check_mha(hw, sd, 2, x, dtype=torch.float32, what="output (float32)")
    m = student_mha(hw, sd, 2)
    on_second_device("MultiHeadAttention.to", m.on_second_device, "to", SECOND_DEVICE)
    what = "MultiHeadAttention with x and a causal mask on a second device"
    got = on_second_device(what, m.on_second_device, "__call__", x, mask=future(5, 5))
    assert_close(
        got, torch_mha(x, sd, 2, mask=future(5, 5)), what, precision=SECOND_PRECISION
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_MultiHeadAttention_cross_attention(hw):
    """Queries from x (Tq=3), keys and values from context (Tk=5)."""
    sd = mha_weights(8, seed=120)
    x = randn(2, 3, 8, seed=121)  # (B, Tq, D)
    context = randn(2, 5, 8, seed=122)  # (B, Tk, D)
    check_mha(hw, sd, 2, x, context=context, what="cross-attention output")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_MultiHeadAttention_masked(hw):
    """A (B, 1, T, T) bool padding+causal mask (float32), an (h, T, T) per-head mask, and a
    (B, 1, 1, Tk) float mask in cross-attention (float64): key padding (-inf) in one row, a
    finite bias per key (as ALiBi adds) in the other, all non-contiguous, none changed."""
    sd = mha_weights(8, seed=130)
    x = randn(2, 4, 8, seed=131)  # (B, T, D)
    pad = torch.tensor([[False] * 4, [False, False, True, True]])  # (B, T) lengths 4, 2
    mask = pad[:, None, None, :] | future(4, 4)  # (B, 1, T, T)
    check_mha(
        hw, sd, 2, x, mask=mask, dtype=torch.float32, what="masked self-attention"
    )
    # (h, T, T) broadcasts as (1, h, T, T): one mask per head, shared by the batch
    per_head = torch.stack([future(4, 4), torch.zeros(4, 4, dtype=torch.bool)])
    per_head[1, 1:, 0] = True  # head 1: every query but the first ignores key 0
    check_mha(
        hw, sd, 2, x, mask=per_head, what="self-attention, a per-head (h, T, T) mask"
    )
    context = randn(2, 5, 8, seed=132)  # (B, Tk, D)
    key_pad = torch.zeros(2, 1, 1, 5, dtype=torch.float64)
    key_pad[0, ..., 3:] = -math.inf
    # A finite bias per key: added to the scores, not read as a mask.
    key_pad[1, ..., :] = torch.tensor([0.0, -0.5, -1.0, -1.5, -2.0])
    check_mha(
        hw,
        sd,
        2,
        x,
        context=context,
        mask=key_pad,
        what="masked cross-attention, m(x, context, mask) by position",
        positional=True,
        strided=True,
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_MultiHeadAttention_no_bias(hw):
    """bias=False: projections without bias (no bias in the state dict), still exact."""
    m = hw.new(MHA, 8, 2, bias=False)
    assert m.attr("n_heads") == 2 and m.attr("d_head") == 4, "n_heads/d_head wrong"
    for p in PROJ:
        assert m.attr(p).attr("bias") is None, (
            f"{p}.bias should be None with bias=False"
        )
    sd = m.state_dict()
    biases = [name for name in sd if name.split(".")[0] in PROJ and "bias" in name]
    assert not biases, f"bias=False, but the state dict holds {biases}"
    sd = mha_weights(8, seed=140, bias=False)
    x, context = randn(2, 3, 8, seed=141), randn(2, 4, 8, seed=142)
    check_mha(hw, sd, 2, x, bias=False, dtype=torch.float32, what="bias=False output")
    check_mha(
        hw, sd, 2, x, context=context, bias=False, what="bias=False cross-attention"
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(5)
@given(seed=seeds, t=sizes(2, 5))
def test_MultiHeadAttention_permutation_equivariance(hw, seed, t):
    """Without positions or mask, permuting the sequence permutes the output."""
    sd = mha_weights(6, seed=seed % 1000)
    m = student_mha(hw, sd, 3)
    x = randn(2, t, 6, seed=seed)  # (B, T, D)
    perm = torch.randperm(t, generator=torch.Generator().manual_seed(seed))
    out = m(x.to(hw.device))
    assert_close(
        m(x[:, perm].to(hw.device)),
        out[:, perm.to(hw.device)],
        "output for the permuted sequence",
    )
    # Equivariance alone admits wrong outputs (zeros, uniform attention): the oracle.
    assert_close(
        out,
        torch_mha(x, sd, 3).to(hw.device),
        "MultiHeadAttention output",
        likely=mha_suspects(x, sd, 3),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(5)
@given(seed=seeds, t=sizes(2, 5), data=st.data())
def test_MultiHeadAttention_no_causal_leakage(hw, seed, t, data):
    """With a causal mask, changing token j and later leaves the outputs before j unchanged."""
    j = data.draw(sizes(1, t - 1), label="first changed position")
    sd = mha_weights(6, seed=seed % 1000)
    m = student_mha(hw, sd, 2)
    x = randn(2, t, 6, seed=seed)  # (B, T, D)
    changed = x.clone()
    changed[:, j:] = randn(2, t - j, 6, seed=seed + 1)
    mask = future(t, t).to(hw.device)
    out = m(x.to(hw.device), mask=mask)
    out_changed = m(changed.to(hw.device), mask=mask)
    assert_close(
        out_changed[:, :j],
        out[:, :j],
        f"outputs before position {j} after changing positions {j}..{t - 1}",
    )
    # Unchanged prefixes alone admit wrong outputs (zeros): the oracle.
    causal_cpu = future(t, t)
    assert_close(
        out,
        torch_mha(x, sd, 2, mask=causal_cpu).to(hw.device),
        "MultiHeadAttention output with a causal mask",
        likely=mha_suspects(x, sd, 2, mask=causal_cpu),
    )


def new_cache(hw, batch: int, n_heads: int, max_len: int, d_head: int):
    return hw.new(
        "gqa.KVCache",
        batch,
        n_heads,
        max_len,
        d_head,
        device=hw.device,
        dtype=torch.float64,
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@pytest.mark.uses(6)  # the KV cache
def test_MultiHeadAttention_cache_token_by_token(hw):
    """Tokens fed one at a time through a KVCache (mask=None) equal the full causal pass."""
    sd = mha_weights(8, seed=150)
    m = student_mha(hw, sd, 2)
    x = randn(2, 5, 8, seed=151)  # (B, T, D)
    cache = new_cache(hw, 2, 2, 8, 4)
    steps = [m(x[:, i : i + 1].to(hw.device), cache=cache) for i in range(5)]
    got = torch.cat(steps, dim=1)  # (B, T, D)
    v_only = F.linear(
        F.linear(x, sd["v_proj.weight"], sd["v_proj.bias"]),
        sd["out_proj.weight"],
        sd["out_proj.bias"],
    )
    assert_close(
        got,
        torch_mha(x, sd, 2, mask=future(5, 5)).to(hw.device),
        "token-by-token cached outputs",
        likely={"the cache is not used: each token attends only to itself": v_only},
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@pytest.mark.uses(6)  # the KV cache
def test_MultiHeadAttention_cache_chunk(hw):
    """A chunk of 3 tokens after 2 cached ones, with causal_mask(3, 5), continues the pass."""
    sd = mha_weights(8, seed=160)
    m = student_mha(hw, sd, 2)
    x = randn(2, 5, 8, seed=161)  # (B, T, D)
    cache = new_cache(hw, 2, 2, 6, 4)
    dev = hw.device
    first = m(x[:, :2].to(dev), mask=future(2, 2).to(dev), cache=cache)
    chunk = m(x[:, 2:].to(dev), mask=future(3, 5).to(dev), cache=cache)
    want = torch_mha(x, sd, 2, mask=future(5, 5)).to(dev)
    assert_close(
        first, want[:, :2], "outputs of the first 2 tokens (through the cache)"
    )
    assert_close(chunk, want[:, 2:], "outputs of a 3-token chunk after 2 cached tokens")


@pytest.mark.points(1)
@pytest.mark.hidden
@pytest.mark.uses(6)  # the KV cache
def test_MultiHeadAttention_cache_without_mask(hw):
    """mask=None with a cache means no masking: a chunk of 3 tokens after 2 cached ones sees
    all 5 keys (it is causal only for a single new token). The chunk is a slice of a tensor
    (not contiguous) and stays unchanged."""
    sd = mha_weights(8, seed=170)
    m = student_mha(hw, sd, 2)
    x = randn(2, 5, 8, seed=171)  # (B, T, D)
    cache = new_cache(hw, 2, 2, 6, 4)
    dev = hw.device
    m(x[:, :2].to(dev), mask=future(2, 2).to(dev), cache=cache)
    what = "MultiHeadAttention with a cache and mask=None"
    chunk = checked(what, m.checked_call, "__call__", x[:, 2:].to(dev), cache=cache)
    assert_close(
        chunk,
        torch_mha(x, sd, 2)[:, 2:].to(dev),
        "outputs of a 3-token chunk after 2 cached tokens with mask=None",
        likely={
            "mask=None with a cache treated as a causal mask; None means no masking "
            "(the caller passes causal_mask(t, t0 + t) for a chunk)": (
                torch_mha(x, sd, 2, mask=future(5, 5))[:, 2:]
            )
        },
    )
