"""Modules built with the weights a test loads by SPEC.md's names, and what the grader sees
where that fails: a weight the module keeps as a plain tensor (no ``nn.Parameter``, so it is
not among the parameters and never trains), or a size hard-coded to 128 where the test asked
for ``max_len``. The grader looks for itself, in requests of its own (the module built again
without the weights, its parameters and attributes read back), never in the error's words.
"""

from __future__ import annotations

from autograder.facts.protocol import Handle, StudentError
from tests.graded.compare import LIKELY
from tests.graded.mistakes import HARD_128


def build(hw, name: str, *args, to=None, state=None, **kwargs) -> Handle:
    """``hw.build(...)``: where loading ``state`` fails for a reason the grader can see, a
    failure that names the likely mistake; otherwise the student's error as it came."""
    try:
        return hw.build(name, *args, to=to, state=state, **kwargs)
    except StudentError as err:
        if not state or err.is_a(NotImplementedError):
            raise
        hint = _load_hint(hw, name, args, to, kwargs, state)
        if hint is None:
            raise
        raise AssertionError(
            f"{name.rsplit('.', 1)[-1]}(...) loading its weights by SPEC.md's names raised "
            f"{err}\n{LIKELY} {hint}"
        ) from None


def load(module: Handle, state: dict) -> None:
    """``module.load_state(state)``, as ``build`` loads it: a weight the module keeps as a
    plain tensor is named."""
    try:
        module.load_state(state)
    except StudentError as err:
        if err.is_a(NotImplementedError):
            raise
        have = module.state_dict()
        hints = [plain_tensor_hint(module, key) for key in state if key not in have]
        hint = next((h for h in hints if h), None)
        if hint is None:
            raise
        raise AssertionError(
            f"loading the weights by SPEC.md's names raised {err}\n{LIKELY} {hint}"
        ) from None


def plain_tensor_hint(module: Handle, name: str) -> str | None:
    """The likely mistake where ``name`` (``"ln1.weight"``), missing from ``module``'s state,
    is a tensor the module holds all the same: kept as a plain tensor, not a parameter."""
    holder = module
    try:
        for part in name.split("."):
            holder = holder.attr(part)
    except StudentError:
        return None
    if isinstance(holder, Handle) or not hasattr(holder, "shape"):
        return None
    return f"{name} kept as a buffer or a plain tensor; make it an nn.Parameter"


def _load_hint(hw, name, args, to, kwargs, state) -> str | None:
    try:
        bare = hw.build(name, *args, to=to, **kwargs)
        have = bare.state_dict()
    except StudentError:  # it fails without the weights too: not the load's doing
        return None
    for key, value in state.items():
        if key not in have:
            if hint := plain_tensor_hint(bare, key):
                return hint
            continue
        got, want = tuple(have[key].shape), tuple(value.shape)
        max_len = kwargs.get("max_len")
        if (
            max_len != 128
            and len(got) == len(want)
            and any(g == 128 and w == max_len for g, w in zip(got, want))
        ):
            return HARD_128
    return None
