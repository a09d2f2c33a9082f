"""SPEC.md's rules for inputs: never modified in place, and accepted contiguous or not.

``hw.checked_call`` (and ``handle.checked_call``) hands every tensor argument to the student
code as a copy with gaps in memory, as a slice ``logits[:, :-1]`` has, and reports which
arguments the call changed. ``checked`` turns both into failures that name the mistake.
"""

from __future__ import annotations

from autograder.protocol import StudentError
from tests.graded.compare import LIKELY

VIEW = (
    "`.view(...)` on a tensor that is not contiguous: use `.reshape(...)` (or "
    "`.contiguous()` first)"
)
IN_PLACE = (
    "an in-place operation on an argument (`x -= ...`, `x[...] = ...`, `x.add_(...)`): "
    "work on a new tensor (`x = x - ...`)"
)


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
