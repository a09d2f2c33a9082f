"""Time-outs that cost a fixed charge: hangs are counted per function, not in seconds.

A request that runs past its time kills the worker. Just before that, the worker writes its
Python stacks (``faulthandler``) into a socket the grading side reads, boundedly (a dump left
from an earlier request that only came close to its limit is dropped first); the grading side
takes which student function the request entered (the outermost student frame: the same on
every run, so grades stay deterministic). Each hung request fails on its own, and the
requests that do not hang still pass: a softmax that loops only on a fully masked row loses the
tests that reach that row. Once a function has hung ``DISARM_AFTER`` times, every later worker
replaces its code with one that raises ``TimeoutError`` at once, so callers of a function that
hangs on every input (``heads``, ``gqa``, the LM) fail fast instead of each waiting out the
limit again.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from pathlib import Path

from autograder.facts.points import MODULES, PACKAGE

#: Hangs of one function after which later requests no longer run it.
DISARM_AFTER = 3
#: The fraction of its limit at which a request still running has its stacks written.
DUMP_AT = 0.8
#: The most bytes of stack dump the grading side reads (a dump is a few KB).
MAX_DUMP = 64 << 10
_FUNCTION = re.compile(r"[A-Za-z_]\w{0,99}|<module>")


def outermost_student_frame(text: str) -> list[list]:
    """``[[file, function, line]]`` of the student frame that a hung request entered first.

    ``text`` is the worker's Python stacks (``faulthandler``, most recent call first), written
    just before its time ran out. The outermost student frame is the function the request ran
    (or the module it imported), the same on every run, so counting it is deterministic.

    The dump is written from inside the student's process, so only what could be a real frame
    of the package counts: one of its module files, a line number, an identifier.
    """
    pattern = rf'File "[^"\n]*/{PACKAGE}/(\w{{1,64}})\.py", line (\d{{1,6}}) in (\S{{1,100}})\n'
    frames = [
        (f"{module}.py", function, int(line))
        for module, line, function in re.findall(pattern, text)
        if module in MODULES and _FUNCTION.fullmatch(function)
    ]
    if not frames:
        return []
    file, function, line = frames[-1]
    return [[file, function, line]]


def disarm(hung: list[list], package_dir: Path, seconds: float) -> None:
    """Make what ran past its time in an earlier worker fail at once: later requests that
    reach it (``heads`` calling a hung ``softmax``) then cost no further time-outs."""
    for file, function, line in hung:
        name = f"{PACKAGE}.{file.removesuffix('.py')}"
        message = (
            f"{function} in {file} ran longer than {seconds:g} s before; not run again"
        )
        if function == "<module>":
            sys.modules[name] = _BrokenModule(
                name, f"{file} did not finish importing in time"
            )
            continue
        module = _import_quietly(name)
        if module is None:
            continue
        stub = _raiser_code(message)
        for owner in [
            module,
            *(v for v in vars(module).values() if isinstance(v, type)),
        ]:
            for value in list(vars(owner).values()):
                code = getattr(value, "__code__", None)
                if (
                    code
                    and code.co_name == function
                    and _spans(code, str(package_dir / file), line)
                ):
                    with contextlib.suppress(ValueError):  # a closure keeps its code
                        value.__code__ = stub


def _spans(code, filename: str, line: int) -> bool:
    lines = [n for _, _, n in code.co_lines() if n is not None]
    return (
        code.co_filename == filename
        and bool(lines)
        and min(lines) <= line <= max(lines)
    )


def _stub(*args, **kwargs):
    raise TimeoutError("MESSAGE")


def _raiser_code(message: str):
    """``_stub``'s code raising ``message``: swapped into a function, it keeps no closure."""
    code = _stub.__code__
    return code.replace(
        co_consts=tuple(message if c == "MESSAGE" else c for c in code.co_consts)
    )


def _import_quietly(name: str):
    try:
        return importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - the requests that import it will say why
        return None


class _BrokenModule(type(sys)):
    def __init__(self, name: str, problem: str):
        super().__init__(name)
        self.problem = problem

    def __getattr__(self, attr):
        raise ImportError(self.problem)
