"""SPEC.md's rules for inputs: never modified in place, accepted contiguous or not, and on
any device.

``hw.checked_call`` (and ``handle.checked_call``) hands every tensor argument to the student
code as a copy with gaps in memory, as a slice ``logits[:, :-1]`` has, and reports which
arguments the call changed. ``checked`` turns both into failures that name the mistake.

``hw.on_second_device`` (and ``handle.on_second_device``) runs a call with its tensors on a
second device, which a machine without a GPU has too (``autograder.sandbox.second_device``), and says
where each tensor of the result is. ``on_second_device`` turns a tensor left on the CPU, or
one mixed with the second device's, into a failure that names the mistake.
"""

from __future__ import annotations

from collections.abc import Callable

from autograder.facts.protocol import StudentError
from tests.graded.compare import LIKELY

VIEW = (
    "`.view(...)` on a tensor that is not contiguous: use `.reshape(...)` (or "
    "`.contiguous()` first)"
)
IN_PLACE = (
    "an in-place operation on an argument (`x -= ...`, `x[...] = ...`, `x.add_(...)`): "
    "work on a new tensor (`x = x - ...`)"
)


MADE_ON_CPU = (
    "a tensor made on the CPU: torch.arange/zeros/ones/full/tensor(...) without device= "
    "stays there; pass the input's device (device=x.device), or use x.new_zeros(...), "
    "torch.zeros_like(x) or .to(x.device)"
)
NOT_MOVED = (
    "a tensor on the CPU meets the model's: {data} not moved to the model's device "
    "(.to(next(model.parameters()).device))"
)
SECOND = "meta"  # what the second device is called in the feedback


def on_second_device(
    what: str, run, *args, mistake: str | Callable[[], str] = MADE_ON_CPU, **kwargs
):
    """``run(*args, **kwargs)`` (an ``on_second_device`` request): its result (values on the
    CPU), once the call ran there and every tensor of it came back on the second device.
    ``mistake``: the likely mistake when it did not (a function giving it, where telling
    mistakes apart takes another request)."""
    named = mistake if callable(mistake) else lambda: mistake
    try:
        value, devices = run(*args, **kwargs)
    except StudentError as err:
        if err.is_a(NotImplementedError) or err.is_a(ImportError):
            raise AssertionError(f"{what} raised {err}") from None
        hint = f"\n{LIKELY} {named()}" if "device" in err.message else ""
        raise AssertionError(
            f"{what} with its tensors on a second device ({SECOND}, as a GPU would be) "
            f"raised {err}; SPEC.md: every function works on any device{hint}"
        ) from None
    elsewhere = [
        f"{label} is on {device}" for label, device in devices if device != SECOND
    ]
    if elsewhere:
        raise AssertionError(
            f"{what} with its tensors on a second device ({SECOND}): {', '.join(elsewhere)}; "
            f"SPEC.md: results are on the input's device\n{LIKELY} {named()}"
        )
    return value


def data_left_on_the_cpu(what: str, run, *args, data: str, **kwargs):
    """``on_second_device`` for a model moved there earlier and given ``data`` (its words:
    "the prompt") on the CPU, which SPEC.md part 7 has the function move to the model's
    device. Where that fails, the same call with the data moved too tells the two mistakes
    apart: it runs where only the data was not moved, and fails as well where a tensor was
    made without ``device=``."""

    def mistake() -> str:
        try:
            _, devices = run(*args, move=True, **kwargs)
        except StudentError:
            return MADE_ON_CPU
        if any(device != SECOND for _, device in devices):
            return MADE_ON_CPU
        return NOT_MOVED.format(data=data)

    return on_second_device(what, run, *args, move=False, mistake=mistake, **kwargs)


def checked(what: str, run, *args, raises: str = "", **kwargs):
    """``run(*args, **kwargs)`` (a ``checked_call``) with non-contiguous tensors: its result,
    once no argument came back changed. ``raises``: the likely mistake when it raises for
    another reason than the layout."""
    try:
        value, changed = run(*args, **kwargs)
    except StudentError as err:
        if err.is_a(NotImplementedError) or err.is_a(ImportError):
            raise AssertionError(f"{what} raised {err}") from None
        message = err.message.lower()
        if "view size is not compatible" in message:
            hint = f"\n{LIKELY} {VIEW}"
        elif "contiguous" in message or "stride" in message:
            hint = f"\n{LIKELY} SPEC.md: any tensor of the stated shape is accepted"
        else:  # nothing says the layout is to blame
            hint = f"\n{LIKELY} {raises}" if raises else ""
        raise AssertionError(
            f"{what} with non-contiguous tensor arguments (a slice such as "
            f"logits[:, :-1]) raised {err}{hint}"
        ) from None
    if changed:
        raise AssertionError(
            f"{what} modified its argument(s) {', '.join(changed)} in place; SPEC.md: "
            f"inputs are never modified in place\n{LIKELY} {IN_PLACE}"
        )
    return value


#: What torch says where code changes in place a tensor it must differentiate through: the
#: leaves of a ``gradients`` request are the arguments (and parameters) the grader made.
LEAF_IN_PLACE = (
    "leaf variable that requires grad is being used in an in-place operation"
)


def gradients_of(what: str, run, *args, **kwargs):
    """``run(*args, **kwargs)`` (a ``gradients`` request): where it raises because the code
    changed an argument in place, a failure naming that mistake."""
    try:
        return run(*args, **kwargs)
    except StudentError as err:
        if LEAF_IN_PLACE not in err.message.lower():
            raise
        raise AssertionError(
            f"{what}: backpropagating raised {err}; SPEC.md: inputs are never modified in "
            f"place\n{LIKELY} {IN_PLACE}"
        ) from None
