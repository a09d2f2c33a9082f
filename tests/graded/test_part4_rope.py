"""Part 4: rotary position embeddings (SPEC.md part 4), interleaved-pair convention.

Expected values come from a direct float64 formula in this file. Positions are unsorted and
non-contiguous (``[3, 17, 5, 0]``) so an implementation that ignores ``positions`` shows, and
``d_head >= 6`` so the half-split ("rotate_half") layout differs from the interleaved one.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given

from tests.graded.answers import (
    angles_oracle,
    relative_rope_scores,
    rope_oracle,
    rope_suspects,
)
from tests.graded.compare import LIKELY, SECOND_PRECISION, assert_close
from tests.graded.expect import raises_value_error
from tests.graded.inputs import checked, on_second_device
from tests.graded.strategies import (
    distinct_positions,
    examples,
    randint,
    randn,
    seeds,
    sizes,
)

pytestmark = pytest.mark.part(4)

POSITIONS = [3, 17, 5, 0]  # unsorted, with gaps
NO_ROTATION = "no rotation applied: apply_rope returns x unchanged"
FLOAT32_ANGLES = "angles (or cos/sin) computed in float32 for a float64 input"


# Helpers ------------------------------------------------------------------------------------
def longs(values, device):
    return torch.tensor(values, dtype=torch.long, device=device)


def assert_rope_float64(hw, x, positions, what):
    """``apply_rope`` of a float64 ``x`` equals the oracle; a result right only to float32
    precision (off by < 0.05) is diagnosed as float32 angles."""
    got = hw.call("rope.apply_rope", x, positions)
    expected = rope_oracle(x, positions)

    def float32_angles():
        error = (got.double() - expected.double()).abs().max()
        return got if bool(error < 0.05) else None

    assert_close(
        got,
        expected,
        what,
        likely={**rope_suspects(x, positions), FLOAT32_ANGLES: float32_angles},
    )


def assert_rotated(got, x, positions):
    """``got`` is ``apply_rope(x, positions)``: the oracle, where the identity is a suspect
    (the properties it is checked after hold for the identity too)."""
    assert_close(
        got,
        rope_oracle(x, positions),
        f"apply_rope(x {tuple(x.shape)}, positions={positions.tolist()})",
        likely={NO_ROTATION: x, **rope_suspects(x, positions)},
    )


# rope_angles ---------------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_rope_angles_formula(hw):
    """angle[t, i] = positions[t] * base ** (-2 i / d_head), default dtype, positions' device."""
    positions = longs(POSITIONS, hw.device)
    d = 8
    wrong_freq = {
        "frequencies base ** (-i / d_head) instead of base ** (-2 i / d_head)": (
            angles_oracle(positions, d, exponent=1.0)
        ),
        "positions ignored (arange(T) used instead)": angles_oracle(
            torch.arange(len(POSITIONS), device=hw.device), d
        ),
    }
    # dtype omitted: torch.get_default_dtype(), on positions' device.  (T, d/2)
    got = hw.call("rope.rope_angles", positions, d)
    expected = angles_oracle(positions, d).to(torch.get_default_dtype())
    assert_close(got, expected, "rope_angles(positions, 8)", likely=wrong_freq)

    got = hw.call("rope.rope_angles", positions, d, dtype=torch.float64)
    assert_close(
        got,
        angles_oracle(positions, d),
        "rope_angles(positions, 8, dtype=float64)",
        likely=wrong_freq,
    )
    # Under float32 as the default, dtype=None read as a fixed float32 would go unseen.
    got = hw.call_with_default_dtype(torch.float64, "rope.rope_angles", positions, d)
    what = "rope_angles(positions, 8) while torch's default float dtype is float64"
    if isinstance(got, torch.Tensor) and got.dtype == torch.float32:
        raise AssertionError(
            f"{what} has dtype torch.float32, expected torch.float64\n{LIKELY} dtype=None "
            "taken as a fixed float32; it means torch.get_default_dtype()"
        )
    assert_close(got, angles_oracle(positions, d), what, likely=wrong_freq)

    got = hw.call("rope.rope_angles", positions, 6, base=100.0, dtype=torch.float32)
    assert_close(
        got,
        angles_oracle(positions, 6, base=100.0).float(),
        "rope_angles(positions, 6, base=100.0, dtype=float32)",
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_rope_angles_odd_d_head_raises(hw):
    """An odd d_head cannot be split into pairs."""
    positions = longs(POSITIONS, hw.device)
    hw.call("rope.rope_angles", positions, 4)  # valid: must not raise
    raises_value_error(
        "rope_angles(positions, 7)",
        ["d_head"],
        hw.call,
        "rope.rope_angles",
        positions,
        7,
    )


# apply_rope ----------------------------------------------------------------------------------
@pytest.mark.points(2)
@pytest.mark.public
def test_apply_rope_formula(hw):
    """Interleaved pairs (x[2i], x[2i+1]) rotated by the angle of their position."""
    positions = longs(POSITIONS, hw.device)
    # float64 with batch and head dims: x (B=2, h=3, T=4, d=8)
    x = randn(2, 3, 4, 8, seed=40, device=hw.device)
    what = "apply_rope(x (2, 3, 4, 8), positions=[3, 17, 5, 0])"
    assert_rope_float64(hw, x, positions, what)

    # float32 with another base: x (2, 4, 6)
    x = randn(2, 4, 6, seed=41, dtype=torch.float32, device=hw.device)
    got = hw.call("rope.apply_rope", x, positions, base=500.0)
    assert_close(
        got,
        rope_oracle(x, positions, base=500.0).float(),
        "apply_rope(x float32 (2, 4, 6), positions=[3, 17, 5, 0], base=500.0)",
        likely=rope_suspects(x, positions, base=500.0),
    )

    # positions omitted: arange(T); x (T=5, d=6) without leading dims
    x = randn(5, 6, seed=42, device=hw.device)
    got = hw.call("rope.apply_rope", x)
    arange = torch.arange(5, device=hw.device)
    assert_close(
        got,
        rope_oracle(x, arange),
        "apply_rope(x (5, 6)) with the default positions",
        likely=rope_suspects(x, arange),
    )

    # on a second device, with positions given and omitted (SPEC.md: every function works
    # on any device; part 4: angles on positions' device)
    x, positions = randn(2, 4, 8, seed=43), longs(POSITIONS, "cpu")
    what = "apply_rope(x (2, 4, 8), positions) on a second device"
    got = on_second_device(what, hw.on_second_device, "rope.apply_rope", x, positions)
    assert_close(got, rope_oracle(x, positions), what, precision=SECOND_PRECISION)
    what = "apply_rope(x (2, 4, 8)) on a second device with the default positions"
    got = on_second_device(what, hw.on_second_device, "rope.apply_rope", x)
    assert_close(got, rope_oracle(x, torch.arange(4)), what, precision=SECOND_PRECISION)


@pytest.mark.points(1)
@pytest.mark.hidden
def test_apply_rope_float64_precision(hw):
    """float64 in: angles, cos and sin in float64 too; float32 angles are off by ~1e-4 here."""
    positions = longs([10_000, 12_345, 19_999], hw.device)
    x = randn(2, 3, 8, seed=43, device=hw.device)  # (B=2, T=3, d=8)
    what = "apply_rope(x float64, positions=[10000, 12345, 19999])"
    assert_rope_float64(hw, x, positions, what)


@pytest.mark.points(1)
@pytest.mark.public
@examples(6)
@given(seed=seeds, batch=sizes(1, 2), t=sizes(1, 4), pairs=sizes(1, 4))
def test_apply_rope_identity_at_position_zero(hw, seed, batch, t, pairs):
    """Every token at position 0 is left unchanged."""
    x = randn(batch, 2, t, 2 * pairs, seed=seed, device=hw.device)  # (B, h, T, d)
    zeros = torch.zeros(t, dtype=torch.long, device=hw.device)
    got = hw.call("rope.apply_rope", x, zeros)
    assert_close(got, x, f"apply_rope(x {tuple(x.shape)}, positions=zeros({t}))")
    # The identity passes the above: non-zero positions against the oracle too.
    positions = randint(1, 60, t, seed=seed, device=hw.device)
    assert_rotated(hw.call("rope.apply_rope", x, positions), x, positions)


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(6)
@given(seed=seeds, positions=distinct_positions(200), pairs=sizes(1, 4))
def test_apply_rope_preserves_norm(hw, seed, positions, pairs):
    """A rotation keeps the length of every vector."""
    x = randn(2, len(positions), 2 * pairs, seed=seed, device=hw.device)  # (B, T, d)
    got = hw.call("rope.apply_rope", x, longs(positions, hw.device))
    assert_close(
        torch.linalg.vector_norm(got, dim=-1),
        torch.linalg.vector_norm(x, dim=-1),
        f"the norms of apply_rope(x, positions={positions}) along the last axis",
    )
    # Any norm-preserving map (the identity) passes the above: the oracle.
    assert_rotated(got, x, longs(positions, hw.device))


@pytest.mark.points(1)
@pytest.mark.public
@examples(8)
@given(
    seed=seeds,
    positions=distinct_positions(60, min_size=2),
    shift=sizes(1, 40),
)
def test_apply_rope_relative_offset(hw, seed, positions, shift):
    """<apply_rope(q, m), apply_rope(k, n)> depends only on n - m (unsorted, gapped positions)."""
    t, d = len(positions), 6
    q = randn(2, t, d, seed=seed, device=hw.device)  # (B, T, d)
    k = randn(2, t, d, seed=seed + 1, device=hw.device)
    pos = longs(positions, hw.device)
    relative = pos[None, :] - pos[:, None]  # (T, T): n - m
    # <q_i, R(p_j - p_i) k_j>: only the offset enters  (B, T, T)
    expected = relative_rope_scores(q, k, relative)
    for where in (pos, pos + shift):
        rq = hw.call("rope.apply_rope", q, where)
        rk = hw.call("rope.apply_rope", k, where)
        assert_close(
            rq @ rk.transpose(-1, -2),
            expected,
            f"<apply_rope(q, m), apply_rope(k, n)> at positions {where.tolist()}",
        )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_apply_rope_errors(hw):
    """positions of a shape other than (T,) raise ValueError (SPEC fixes nothing for an odd
    d_head here: rope_angles' test covers that)."""
    x = randn(2, 3, 8, seed=44, device=hw.device)  # (B, T=3, d=8)
    hw.call("rope.apply_rope", x, longs([0, 4, 2], hw.device))  # valid: must not raise
    for bad in (
        longs([0, 1, 2, 3], hw.device),
        longs([[0, 1, 2]], hw.device),
        longs([[0], [4], [2]], hw.device),  # T of them, but (T, 1)
    ):
        raises_value_error(
            f"apply_rope(x (2, 3, 8), positions of shape {tuple(bad.shape)})",
            ["positions"],
            hw.call,
            "rope.apply_rope",
            x,
            bad,
        )
    one = randn(
        2, 1, 8, seed=46, device=hw.device
    )  # T = 1: a 0-d position is still not (T,)
    raises_value_error(
        "apply_rope(x (2, 1, 8), positions of shape ())",
        ["positions"],
        hw.call,
        "rope.apply_rope",
        one,
        torch.tensor(0, device=hw.device),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_rope_takes_noncontiguous_inputs_and_leaves_them_unchanged(hw):
    """SPEC.md: inputs are never modified in place, and tensors that are not contiguous (x a
    slice, positions every other element) are accepted."""
    positions = longs(POSITIONS, hw.device)
    got = checked(
        "rope_angles(positions, 8, dtype=float64)",
        hw.checked_call,
        "rope.rope_angles",
        positions,
        8,
        dtype=torch.float64,
    )
    assert_close(got, angles_oracle(positions, 8), "rope_angles of strided positions")
    for dtype in (torch.float64, torch.float32):
        x = randn(2, 3, 4, 8, seed=45, dtype=dtype, device=hw.device)  # (B, h, T, d)
        what = f"apply_rope(x {dtype} (2, 3, 4, 8), positions=[3, 17, 5, 0])"
        got = checked(what, hw.checked_call, "rope.apply_rope", x, positions)
        assert_close(
            got,
            rope_oracle(x, positions).to(dtype),
            what + " on a slice",
            likely=rope_suspects(x, positions),
        )
