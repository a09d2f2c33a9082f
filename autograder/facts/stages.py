"""Where a grading process's time goes: wall and CPU seconds per stage (staging, reading the
rules, a worker's start, the requests, the diagnosis's replays, writing the outputs), for
``benchmarks/grading.py --profile``.

Off unless the environment variable ``AUTOGRADER_PROFILE`` names a folder; off, ``timed`` is a
no-op shared context, so the grader pays nothing for it. On, each process adds what its stages
took to a tally of its own and ``flush`` appends it to ``<folder>/<pid>.jsonl``, one line per
submission (the name ``""``: a process's or a batch's own work), which the benchmark sums.

A stage inside another is the inner one's alone (the outer keeps its own time only), and the
CPU seconds are the calling thread's plus, where ``also`` gives them, another process's (the
sandbox's worker, which does a request's work).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path

#: The environment variable that switches the tally on: the folder the records go to.
ENV = "AUTOGRADER_PROFILE"
FOLDER = os.environ.get(ENV, "")

_OFF = contextlib.nullcontext()
_tally: dict[str, list[float]] = {}  # stage -> [wall, cpu, times entered]
_lock = threading.Lock()
_local = threading.local()  # the calling thread's open stages


class _Timed:
    """One stage's time, less that of the stages opened inside it in the same thread."""

    __slots__ = ("also", "cpu", "inner", "stage", "wall")

    def __init__(self, stage: str, also: Callable[[], float] | None):
        self.stage, self.also = stage, also

    def _cpu(self) -> float:
        return time.thread_time() + (self.also() if self.also is not None else 0.0)

    def __enter__(self):
        self.inner = [0.0, 0.0]
        self.wall, self.cpu = time.perf_counter(), self._cpu()
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        stack.append(self)

    def __exit__(self, *_):
        wall, cpu = time.perf_counter() - self.wall, self._cpu() - self.cpu
        stack = _local.stack
        stack.pop()
        if stack:
            stack[-1].inner[0] += wall
            stack[-1].inner[1] += cpu
        add(self.stage, wall - self.inner[0], cpu - self.inner[1])


def timed(stage: str, also: Callable[[], float] | None = None):
    """A context that adds its wall and CPU seconds to ``stage``'s tally, when profiling.
    ``also``: another process's CPU seconds so far, counted with this thread's."""
    return _Timed(stage, also) if FOLDER else _OFF


def add(stage: str, wall: float, cpu: float) -> None:
    """Add seconds measured elsewhere to ``stage``'s tally."""
    with _lock:
        entry = _tally.setdefault(stage, [0.0, 0.0, 0])
        entry[0] += wall
        entry[1] += cpu
        entry[2] += 1


#: The stage of what no other stage took while a submission was graded: pytest and the tests'
#: own work (fixtures, oracles, comparisons).
REST = "the rest"


@contextlib.contextmanager
def submission(name: str, also: Callable[[], float]):
    """Grading ``name`` in this process: its record is written at the end, with ``REST``,
    what this process (every thread, and its finished children) and ``also``'s took beyond
    the stages."""
    if not FOLDER:
        yield
        return
    wall, cpu = time.perf_counter(), _process_cpu() + also()
    try:
        yield
    finally:
        wall = time.perf_counter() - wall
        cpu = _process_cpu() + also() - cpu
        with _lock:
            wall -= sum(entry[0] for entry in _tally.values())
            cpu -= sum(entry[1] for entry in _tally.values())
        add(REST, wall, cpu)
        flush(name)


def children_cpu() -> float:
    """CPU seconds of this process's finished children (``subprocess.run``'s, for one): pass it
    as ``also`` around a stage that runs one."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu() -> float:
    """CPU seconds of every thread of this process, and of its finished children."""
    return time.process_time() + children_cpu()


def flush(name: str) -> None:
    """Write the tally so far as ``name``'s record (``""``: no submission's) and start afresh."""
    if not FOLDER:
        return
    with _lock:
        tally = {
            stage: [round(w, 6), round(c, 6), n] for stage, (w, c, n) in _tally.items()
        }
        _tally.clear()
    if tally:
        record = json.dumps({"name": name, "stages": tally})
        with open(Path(FOLDER) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
            out.write(record + "\n")


def read(folder: Path) -> list[dict]:
    """Every record written into ``folder``."""
    return [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]
