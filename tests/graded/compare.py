"""Tolerances and tensor comparison for the graded suite: the one place they live.

Why these numbers. Expected values are computed in float64 by an independent oracle (torch's
own layer or a direct formula) and compared with the student's result in the student's dtype.
Correct code in any style (einsum, complex RoPE, ``torch.where``) differs from the oracle only by
rounding, which for the small shapes of this suite (width <= 64, values O(1)) stays below about
1e-14 in float64 and 1e-6 in float32. (Two checks leave O(1) on purpose, each with its
margins measured in its comment: LayerNorm on rows far from zero, lm_loss on logits hundreds
apart.) The tolerances leave a margin of roughly 100x over that and stay far below the effect
of any real bug (1e-4 and up; subtle ones such as ``eps`` outside the square root are tested in
float64, where they show at 1e-6):

* float64: ``rtol = atol = 1e-10``;
* float32: ``rtol = atol = 1e-5`` (about 100 units in the last place).

"Exactly" in SPEC.md means ``torch.equal``: ``assert_exact``.

On the second device (``tests/graded/inputs.py``) values are compared at float32's tolerance
whatever their dtype (``precision=SECOND_PRECISION``): a device may lack float64 (Apple's MPS
does), and correct code may compute there at float32's precision (RoPE's angles, say). The
tests on the CPU hold float64 to its own tolerance; those on the second device judge where
results are, and values only as far as any device must get them right.

A failing comparison reports the size and place of the largest error, never the expected
values (hidden tests must not leak them). ``likely`` maps a known mistake to what that mistake
would produce; when the student's result matches one, the message names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from tests.graded.answers import AnswerMissing, record_suspects

LIKELY = "Likely mistake:"


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


TOLERANCES = {
    torch.float64: Tolerance(rtol=1e-10, atol=1e-10),
    torch.float32: Tolerance(rtol=1e-5, atol=1e-5),
}

Suspects = Mapping[str, "torch.Tensor | Callable[[], torch.Tensor]"]


#: The precision a device may use for any floating-point dtype (see above).
SECOND_PRECISION = torch.float32


def tolerance(dtype: torch.dtype, precision: torch.dtype | None = None) -> Tolerance:
    """``dtype``'s tolerance, or ``precision``'s where that is looser."""
    own = TOLERANCES[dtype]
    if precision is None or TOLERANCES[precision].atol <= own.atol:
        return own
    return TOLERANCES[precision]


def check_tensor(actual, expected: torch.Tensor, what: str) -> None:
    """A plain tensor of the expected shape, dtype and device (the preconditions of a comparison)."""
    if type(actual) is not torch.Tensor:
        raise AssertionError(
            f"{what} should be a torch.Tensor, got {type(actual).__name__}"
        )
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        )
    if actual.dtype != expected.dtype:
        raise AssertionError(
            f"{what} has dtype {actual.dtype}, expected {expected.dtype}"
        )
    if actual.device.type != expected.device.type:
        raise AssertionError(
            f"{what} is on {actual.device}, expected {expected.device}"
        )


def is_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    precision: torch.dtype | None = None,
) -> bool:
    """Within the tolerance of ``expected``'s dtype (or ``precision``'s, where looser); NaN
    matches nothing, infinities must agree."""
    if not expected.is_floating_point():
        return actual.shape == expected.shape and torch.equal(actual, expected)
    tol = tolerance(expected.dtype, precision)
    a, e = actual.double(), expected.double()
    if a.shape != e.shape or torch.isnan(a).any():
        return False
    return bool(torch.isclose(a, e, rtol=tol.rtol, atol=tol.atol).all())


def assert_close(
    actual,
    expected: torch.Tensor,
    what: str,
    likely: Suspects = (),
    precision: torch.dtype | None = None,
) -> None:
    """``actual`` equals ``expected`` within the dtype's tolerance (or that of ``precision``,
    where looser: ``SECOND_PRECISION``), or a helpful failure."""
    record_suspects(likely)
    check_tensor(actual, expected, what)
    if is_close(actual, expected, precision):
        return
    if torch.isnan(actual).any():
        problem = f"{what} contains NaN"
    elif torch.isinf(actual).any() and not torch.isinf(expected).any():
        problem = f"{what} contains inf"
    else:
        err = (actual.double() - expected.double()).abs()
        err = torch.nan_to_num(err, nan=float("inf"))
        where = tuple(int(i) for i in torch.unravel_index(err.argmax(), err.shape))
        tol = (
            tolerance(expected.dtype, precision)
            if expected.is_floating_point()
            else Tolerance(0, 0)
        )
        problem = (
            f"{what}: wrong, largest error {err.max().item():.3g} at index {where} "
            f"(tolerance rtol={tol.rtol:g}, atol={tol.atol:g} for {expected.dtype}"
            f"{'' if precision is None else ' on a second device'})"
        )
    raise AssertionError(problem + diagnosis(actual, likely))


def assert_gradients(got: dict, expected: dict, what: str, of: str = "input") -> None:
    """Each expected gradient by its label (``Submission.gradients``' ``inputs`` or
    ``parameters``) is there and close. The forward pass already matched, so a missing or
    different gradient means the computation was cut or bent on the way back."""
    for label, value in expected.items():
        if label not in got:
            raise AssertionError(
                f"{what}: {label!r} is not a parameter, so it gets no gradient and never "
                f"trains\n{LIKELY} {label} kept as a buffer or a plain tensor; make it an "
                "nn.Parameter"
            )
        if got[label] is None:
            raise AssertionError(
                f"{what}: no gradient reaches the {of} {label}\n{LIKELY} a .detach(), "
                "torch.no_grad() or a tensor built anew (torch.tensor(...)) cuts the "
                "computation off from it"
            )
        try:
            assert_close(
                got[label],
                value.to(got[label].device),
                f"{what}: the gradient with respect to the {of} {label}",
            )
        except AssertionError as wrong:
            # A fact, not a guess at its cause: a detached statistic and eps outside the
            # square root both do this, and replaying the test tells them apart
            # (autograder/grading/diagnosis.py).
            raise AssertionError(
                f"{wrong}\nThe values are right but the gradient is not."
            ) from None


def assert_exact(
    actual, expected: torch.Tensor, what: str, likely: Suspects = ()
) -> None:
    """Bitwise equality (``torch.equal``), as SPEC.md's "exactly"."""
    record_suspects(likely)
    check_tensor(actual, expected, what)
    if torch.equal(actual, expected):
        return
    differ = (actual != expected) & ~(torch.isnan(actual) & torch.isnan(expected))
    count = int(differ.sum())
    where = tuple(
        int(i) for i in torch.unravel_index(differ.double().argmax(), differ.shape)
    )
    raise AssertionError(
        f"{what}: not exactly right, {count} of {actual.numel()} entries differ "
        f"(first at index {where})" + diagnosis(actual, likely)
    )


def diagnosis(actual: torch.Tensor, likely: Suspects) -> str:
    """`` Likely mistake: ...`` when ``actual`` matches what exactly one known mistake
    produces: where two give the same values on these inputs (no scaling and 1/sqrt(d_v) with
    d_v = 1), naming one would be a guess. (A suspect the handout holds no value for names
    nothing: the failure stands on its own.)"""
    matching = []
    for mistake, suspect in dict(likely).items():
        try:
            value = suspect() if callable(suspect) else suspect
        except AnswerMissing:
            continue
        if value is not None and is_close(
            actual, value.to(actual.device, actual.dtype)
        ):
            matching.append(mistake)
    return f"\n{LIKELY} {matching[0]}" if len(matching) == 1 else ""
