"""Forbidden calls caught at run time, inside the sandboxed worker.

The static scan (``autograder.forbidden``) reads the source; a name built at run time
(``getattr(torch, "soft" + "max")``) escapes it. Here every forbidden torch function is wrapped so
that a call made directly from a student file that forbids it is recorded with its file and line.
Only the immediate caller counts: library code calling its own softmax is not the student's.
"""

from __future__ import annotations

import functools
import os
import sys

import torch
import torch.nn.functional

from autograder.forbidden import RULES

#: Where forbidden functions live, with the name used in messages.
NAMESPACES = {
    "torch": torch,
    "torch.nn.functional": torch.nn.functional,
    "torch.special": torch.special,
    "torch.nn": torch.nn,
    "torch.Tensor": torch.Tensor,
    "torch._C._nn": torch._C._nn,
}

_FILES: dict[str, frozenset[str]] = {}  # absolute student path -> names forbidden in it
found: list[
    tuple[str, int, str]
] = []  # (file, line, call), in order of first occurrence
_seen: set[tuple[str, int, str]] = set()


def install() -> None:
    """Wrap every forbidden name once (in the worker template, before any student import)."""
    names = frozenset().union(*RULES.values())
    for label, space in NAMESPACES.items():
        for name in sorted(names):
            original = getattr(space, name, None)
            if original is None or getattr(original, "_tripwire", False):
                continue
            if isinstance(original, type):
                _wrap_class(original, f"{label}.{name}")
            elif callable(original):
                setattr(space, name, _wrap_function(original, f"{label}.{name}", name))


def watch(package_dir: str) -> None:
    """Start recording calls made from the student files under ``package_dir``."""
    _FILES.clear()
    for filename, names in RULES.items():
        _FILES[os.path.join(package_dir, filename)] = names


def _record(call: str, name: str) -> None:
    frame = sys._getframe(2)
    names = _FILES.get(frame.f_code.co_filename)
    if names and name in names:
        key = (os.path.basename(frame.f_code.co_filename), frame.f_lineno, call)
        if key not in _seen:
            _seen.add(key)
            found.append(key)


def _wrap_function(original, call: str, name: str):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if _FILES:
            _record(call, name)
        return original(*args, **kwargs)

    del wrapper.__wrapped__  # no way back to the unwatched original
    wrapper._tripwire = True
    return wrapper


def _wrap_class(cls: type, call: str) -> None:
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if _FILES:
            _record(call, cls.__name__)
        init(self, *args, **kwargs)

    del __init__.__wrapped__
    cls.__init__ = __init__
    cls._tripwire = True
