"""Forbidden calls caught at run time, inside the sandboxed worker.

The static scan (``autograder.forbidden``) reads the source; a name built at run time, a helper in
a file without a forbidden list (masks.py, rope.py) or a library class that calls a forbidden
function one frame down escapes it. Here every forbidden torch function is wrapped, and each
class's ``__init__``. A call is charged by walking outward from it to the nearest student frame
whose file forbids that name: library frames and student files that allow the name pass through,
so ``Categorical(logits=x)`` in attention.py (which calls ``logsumexp`` and ``softmax`` inside
torch) costs part 1, and a masks.py helper called from heads.py costs part 3. A call made while
another watched call runs (``F.softmax`` calling ``Tensor.softmax``) is that call's business.

Tampering, best effort: the wrappers' globals are an empty namespace and they keep no
``__wrapped__``, so neither leads back to the originals or to the watch; the watch's state lives
in closures only. Inside the student's process nothing is truly out of reach, so the grader also
sends a probe (``probe``): forbidden calls made as if from student files, which must come back as
violations, and a check that every wrapper is still in place; a worker whose watch was switched
off, rerouted or unwrapped fails it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import os
import sys

import torch
import torch.nn.functional

from autograder.forbidden import RULES
from autograder.points import MODULES, PACKAGE

#: Where forbidden functions live, with the name used in messages.
NAMESPACES = {
    "torch": torch,
    "torch.nn.functional": torch.nn.functional,
    "torch.special": torch.special,
    "torch.nn": torch.nn,
    "torch.Tensor": torch.Tensor,
    "torch._C._nn": torch._C._nn,
    "torch.sparse": torch.sparse,
    "torch.masked": torch.masked,
}

#: What the probe calls, per student file, all on one line: (file, call as recorded, code).
PROBE_CALLS = (
    ("attention.py", "torch.softmax", "torch.softmax(t, 0)"),
    ("attention.py", "torch.Tensor.log_softmax", "t.log_softmax(0)"),
    (
        "norm.py",
        "torch.nn.functional.layer_norm",
        "torch.nn.functional.layer_norm(t, (1,))",
    ),
    ("norm.py", "torch.nn.LayerNorm", "torch.nn.LayerNorm(1)"),
)

#: (file, line, call) of each forbidden call seen, in order of first occurrence; the worker
#: sends it back with every reply.
found: list[tuple[str, int, str]] = []

# The wrappers are made in a namespace of their own: their ``__globals__`` lead nowhere.
_FACTORY = """
def wrap_function(original, call, name, charge):
    def wrapper(*args, **kwargs):
        charge(call, name)
        return original(*args, **kwargs)
    return wrapper

def wrap_init(init, call, name, charge):
    def __init__(self, *args, **kwargs):
        charge(call, name)
        init(self, *args, **kwargs)
    return __init__
"""


def _make_watch(record_to: list):
    """The watch: its state lives in these closures, nowhere else."""
    # Only the builtins (C code the originals call may import through them): nothing of ours.
    namespace = {"__builtins__": builtins}
    exec(compile(_FACTORY, "<tripwire>", "exec"), namespace)  # noqa: S102 - our own text
    wrap_function, wrap_init = namespace["wrap_function"], namespace["wrap_init"]
    files: dict[
        str, frozenset[str]
    ] = {}  # absolute student path -> names forbidden there
    seen: set[tuple[str, int, str]] = set()
    getframe, basename = sys._getframe, os.path.basename

    def charge(call: str, name: str) -> None:
        """Walk out from the wrapper's caller to the student file that forbids ``name``."""
        if not files:
            return
        frame = getframe(2)
        while frame is not None:
            code = frame.f_code
            if code in wrapper_codes:
                return  # inside another watched call: that call is charged, not this one
            names = files.get(code.co_filename)
            if names is not None and name in names:
                key = (basename(code.co_filename), frame.f_lineno or 0, call)
                if key not in seen:
                    seen.add(key)
                    record_to.append(key)
                return
            frame = frame.f_back

    wrapper_codes = frozenset(
        f(None, "", "", charge).__code__ for f in (wrap_function, wrap_init)
    )

    installed: list[
        tuple[object, str, object, str]
    ] = []  # (owner, attribute, wrapper, call)

    def install() -> None:
        names = frozenset().union(*RULES.values())
        wrapped: set[int] = set()  # classes done and wrappers made: never wrap twice
        for label, space in NAMESPACES.items():
            for name in sorted(names):
                original = getattr(space, name, None)
                if original is None or id(original) in wrapped:
                    continue
                call = f"{label}.{name}"
                if isinstance(original, type):
                    init = original.__init__
                    wrapper = _disguise(wrap_init(init, call, name, charge), init)
                    original.__init__ = wrapper
                    installed.append((original, "__init__", wrapper, call))
                    wrapped.add(id(original))
                elif callable(original):
                    wrapper = _disguise(
                        wrap_function(original, call, name, charge), original
                    )
                    setattr(space, name, wrapper)
                    installed.append((space, name, wrapper, call))
                    wrapped.add(id(wrapper))

    def watch(package_dir: str) -> None:
        files.clear()
        for filename, names in RULES.items():
            files[os.path.join(package_dir, filename)] = names

    def replaced() -> list[str]:
        return [
            call for owner, attr, w, call in installed if getattr(owner, attr) is not w
        ]

    return install, watch, replaced


def _disguise(wrapper, original):
    """The original's name and docs, without ``__wrapped__``: no way back to it."""
    functools.update_wrapper(wrapper, original)
    del wrapper.__wrapped__
    return wrapper


_install, _watch, _replaced = _make_watch(found)


def install() -> None:
    """Wrap every forbidden name once (in the worker template, before any student import)."""
    _install()


def watch(package_dir: str) -> None:
    """Start charging calls to the student files under ``package_dir``."""
    _watch(package_dir)


def probe(package_dir: str, line: int) -> list[str]:
    """Make ``PROBE_CALLS`` as if from line ``line`` of the watched student files; return the
    forbidden names whose wrapper was replaced (an original put back, say).

    The student modules are imported first, so whatever they do on import has happened. Each
    call must come back among the violations; the grader checks that they do.
    """
    for module in MODULES:
        try:
            importlib.import_module(f"{PACKAGE}.{module}")
        except BaseException:  # noqa: BLE001, S110 - a broken module is graded elsewhere
            pass
    for filename, _, code in PROBE_CALLS:
        tree = ast.parse(code)
        ast.increment_lineno(tree, line - 1)
        compiled = compile(tree, os.path.join(package_dir, filename), "exec")
        exec(compiled, {"torch": torch, "t": torch.zeros(1)})  # noqa: S102 - PROBE_CALLS
    return _replaced()


def probe_failures(line: int, answer, seen) -> list[str]:
    """What the probe found wrong: its calls missing from ``seen`` (violations as ``(file,
    line, call)``) and the replaced names in its ``answer``."""
    got = {(f, n, c.split(" ")[0]) for f, n, c in seen}
    missing = [
        f"{call} from {file} went unrecorded"
        for file, call, _ in PROBE_CALLS
        if (file, line, call) not in got
    ]
    if not (isinstance(answer, list) and all(isinstance(a, str) for a in answer)):
        return [*missing, "the probe's answer was not a list of names"]
    return missing + [f"{call} was replaced" for call in answer]
