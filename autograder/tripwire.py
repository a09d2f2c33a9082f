"""Forbidden calls caught at run time, inside the sandboxed worker.

The watch is a ``TorchFunctionMode``: torch hands it every call of its Python API, whatever
route reached it (an alias, a computed ``getattr``, ``operator.methodcaller``, a method read off
``torch._C.TensorBase``, ``torch.ops.aten._softmax``, a library class or distribution calling
one inside), so no route needs a name the static scan knows. A call whose function belongs to a
forbidden family (``autograder.forbidden.FAMILY_WORDS``) is charged by walking outward from it
to the nearest student frame whose file forbids that family: library frames and student files
that allow it pass through, so ``Categorical(logits=x)`` in attention.py costs part 1, and a
masks.py helper called from heads.py costs part 3. Calls made inside a watched call (``F.softmax``
calling ``Tensor.softmax``) run below the mode and are that call's business.

A mode lives in its thread's state, so the watch follows threads: every thread started after
``install`` enters it first. What the reader keeps out (``torch.overrides``, ``torch._C``,
``torch.DisableTorchFunction``, a subclass's ``__torch_function__``, TorchScript from text,
frames) is what could pop it or run below it.

Each record leaves the worker as it is made (``watch``'s ``report``: a message on the worker's
socket) and again with every reply; a record emptied from the worker's memory later was
already sent. The grader also probes the watch (``probe``): forbidden calls made as if from
student files, in the worker's thread and in a new one, which must come back as violations.
"""

from __future__ import annotations

import _thread
import ast
import importlib
import os
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode

from autograder.forbidden import FAMILY_WORDS, RULES
from autograder.points import MODULES, PACKAGE

#: What the probe calls, one per line from the probe's first line: (file, code). The last runs
#: in a thread of its own, which the watch must follow.
PROBE_CALLS = (
    ("attention.py", "torch.softmax(t, 0)"),
    ("attention.py", "t.log_softmax(0)"),
    ("norm.py", "torch.nn.functional.layer_norm(t, (1,))"),
    ("norm.py", "torch.nn.LayerNorm(1)(t)"),
    (
        "gqa.py",
        "threading.Thread(target=lambda: torch.special.logsumexp(t, 0)).start()",
    ),
)

#: (file, line, call) of each forbidden call seen, in order of first occurrence; the worker
#: sends it back with every reply.
found: list[tuple[str, int, str]] = []

_FAMILIES = tuple(FAMILY_WORDS)
#: How the feedback names a function by its ``__module__``: where a student would find it
#: (a tensor method has none).
_LABELS = {
    None: "torch.Tensor",
    "torch._C._special": "torch.special",
    "torch._ops.aten": "torch.ops.aten",
}


def _families_of(func) -> tuple[int, ...]:
    """Which forbidden families (indices into ``_FAMILIES``) ``func`` belongs to."""
    name = str(getattr(func, "__name__", "")).split(".")[0]
    lower = name.lower()
    if "backward" in lower:  # the gradient of a forward already judged
        return ()
    return tuple(
        i
        for i, family in enumerate(_FAMILIES)
        if name in family or any(word in lower for word in FAMILY_WORDS[family])
    )


def _label(func) -> str:
    name = str(getattr(func, "__name__", "?")).split(".")[0]
    module = getattr(func, "__module__", None)
    return f"{_LABELS.get(module, module)}.{name}"


def _make_watch(record_to: list):
    """The watch: its state lives in these closures and the mode, nowhere else."""
    files: dict[str, frozenset[int]] = {}  # absolute student path -> families forbidden
    seen: set[tuple[str, int, str]] = set()
    families: dict[object, tuple[int, ...]] = {}  # memo per function
    reporter: list = [None]
    getframe, basename = sys._getframe, os.path.basename

    def charge(func, found_in: tuple[int, ...]) -> None:
        frame = getframe(2)
        while frame is not None:
            code = frame.f_code
            forbids = files.get(code.co_filename)
            if forbids is not None and not forbids.isdisjoint(found_in):
                key = (basename(code.co_filename), frame.f_lineno or 0, _label(func))
                if key not in seen:
                    seen.add(key)
                    record_to.append(key)
                    if reporter[0] is not None:
                        reporter[0](key)
                return
            frame = frame.f_back

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            try:
                found_in = families[func]
            except KeyError:
                found_in = families[func] = _families_of(func)
            except TypeError:  # not hashable
                found_in = _families_of(func)
            if found_in and files:
                charge(func, found_in)
            return func(*args, **(kwargs or {}))

    def watched(function):
        def run(*args, **kwargs):
            if not files:
                return function(*args, **kwargs)
            with Watch():
                return function(*args, **kwargs)

        return run

    def follow_threads() -> None:
        """Every thread started from now on runs under the watch while it watches."""
        for module in (_thread, threading):
            for name in ("start_new_thread", "start_new", "_start_new_thread"):
                original = getattr(module, name, None)
                if original is not None:
                    setattr(module, name, _starting(original, watched))

    def watch(package_dir: str, report=None) -> None:
        if files:
            raise RuntimeError("the watch is set once per process")
        for filename, names in RULES.items():
            files[os.path.join(package_dir, filename)] = frozenset(
                i for i, family in enumerate(_FAMILIES) if family <= names
            )
        reporter[0] = report
        Watch().__enter__()  # for the rest of this thread's life

    return follow_threads, watch


def _starting(original, watched):
    def start(function, *args, **kwargs):
        return original(watched(function), *args, **kwargs)

    return start


_follow_threads, _watch = _make_watch(found)


def install() -> None:
    """Make threads follow the watch (in the worker template, before any student import)."""
    _follow_threads()


def watch(package_dir: str, report=None) -> None:
    """Start charging calls to the student files under ``package_dir``, in this thread and
    every thread started from now on; ``report(record)`` sends each new record at once."""
    _watch(package_dir, report)


def probe(package_dir: str, line: int) -> None:
    """Make ``PROBE_CALLS`` as if from line ``line`` on of the watched student files.

    The student modules are imported first, so whatever they do on import has happened. Each
    call must come back among the violations; the grader checks that they do.
    """
    for module in MODULES:
        try:
            importlib.import_module(f"{PACKAGE}.{module}")
        except BaseException:  # noqa: BLE001, S110 - a broken module is graded elsewhere
            pass
    t = torch.zeros(1)
    for offset, (filename, code) in enumerate(PROBE_CALLS):
        tree = ast.parse(code)
        ast.increment_lineno(tree, line + offset - 1)
        compiled = compile(tree, os.path.join(package_dir, filename), "exec")
        namespace = {"torch": torch, "t": t, "threading": threading}
        exec(compiled, namespace)  # noqa: S102 - PROBE_CALLS
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(timeout=10)


def probe_lines(line: int) -> range:
    """The lines the probe's calls are made from."""
    return range(line, line + len(PROBE_CALLS))


def probe_failures(line: int, seen) -> list[str]:
    """The probe's calls missing from ``seen`` (violations as ``(file, line, call)``)."""
    got = {(f, n) for f, n, _ in seen}
    return [
        f"{code} from {file} went unrecorded"
        for offset, (file, code) in enumerate(PROBE_CALLS)
        if (file, line + offset) not in got
    ]
