"""Modules built with the weights a test loads by SPEC.md's names, and what the grader sees
where that fails: a weight the module keeps as a plain tensor (no ``nn.Parameter``, so it is
not among the parameters and never trains), or a size hard-coded to 128 where the test asked
for ``max_len``.

The grader looks for itself, in requests of its own (the module built again without the
weights, its parameters and attributes read back): the names the load refused only say where
to look. The weights themselves never meet the student's results here (a shipped test reaches
expected values only through the stored answers).
"""

from __future__ import annotations

from autograder.facts.protocol import Handle, StudentError
from tests.graded.compare import LIKELY
from tests.graded.mistakes import HARD_128

#: How the load refuses names the module lacks (``autograder.sandbox.executor.load_state``).
REFUSED = ("has no parameter named ", " (SPEC.md")


def build(hw, name: str, *args, to=None, state=None, **kwargs) -> Handle:
    """``hw.build(...)``: where loading ``state`` fails for a reason the grader can see, a
    failure that names the likely mistake; otherwise the student's error as it came."""
    try:
        return hw.build(name, *args, to=to, state=state, **kwargs)
    except StudentError as err:
        if state is None or err.is_a(NotImplementedError):
            raise
        try:
            bare = hw.build(name, *args, to=to, **kwargs)
        except StudentError:  # it fails without the weights too: not the load's doing
            raise err from None
        hint = plain_tensor_hint(bare, refused_names(err))
        if hint is None and kwargs.get("max_len", 128) != 128:
            hint = _hard_coded_128(bare)
        if hint is None:
            raise
        raise AssertionError(
            f"{name.rsplit('.', 1)[-1]}(...) loading its weights by SPEC.md's names raised "
            f"{err}\n{LIKELY} {hint}"
        ) from None


def load(module: Handle, state: dict) -> None:
    """``module.load_state(state)``: a weight the module keeps as a plain tensor is named."""
    try:
        module.load_state(state)
    except StudentError as err:
        if err.is_a(NotImplementedError):
            raise
        if (hint := plain_tensor_hint(module, refused_names(err))) is None:
            raise
        raise AssertionError(
            f"loading the weights by SPEC.md's names raised {err}\n{LIKELY} {hint}"
        ) from None


def refused_names(err: StudentError) -> list[str]:
    """The names a load refused as missing (none where ``err`` is another error)."""
    _, begins, rest = err.message.partition(REFUSED[0])
    listed, ends, _ = rest.partition(REFUSED[1])
    return listed.split(", ") if begins and ends else []


def plain_tensor_hint(module: Handle, names: list[str]) -> str | None:
    """The likely mistake where one of ``names``, which ``module`` lacks among its
    parameters, is a tensor the module holds all the same: a weight kept as a plain tensor,
    not a parameter."""
    have = module.state_dict() if names else {}
    for name in names:
        if name not in have and _a_tensor(module, name):
            return f"{name} kept as a buffer or a plain tensor; make it an nn.Parameter"
    return None


def _a_tensor(module: Handle, name: str) -> bool:
    """Whether the dotted ``name`` (``"ln1.weight"``) reads a tensor from ``module``."""
    holder = module
    try:
        for part in name.split("."):
            holder = holder.attr(part)
    except StudentError:
        return False
    return not isinstance(holder, Handle) and hasattr(holder, "shape")


def _hard_coded_128(module: Handle) -> str | None:
    """``HARD_128`` where a parameter of a module built for another ``max_len`` has a size of
    128 (the small models of the tests have no other size near it)."""
    sizes = [tuple(value.shape) for value in module.state_dict().values()]
    return HARD_128 if any(128 in shape for shape in sizes) else None
