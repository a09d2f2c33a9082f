"""How long the host kept a sandboxed worker waiting for a CPU: the delays a time limit
forgives, and never one the submission caused itself (``HostWait``).

Why a module of its own: what a request's time limit credits is a rule of the grading
(docs/DESIGN.md, "What the grader believes"), to be read and checked apart from the client
that applies it (``autograder.sandbox.client``).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from autograder.sandbox import template_client


class HostWait:
    """How long the host's other work kept a worker waiting for a CPU: time a busy host took
    from it, which no time limit may charge to the student, and never a wait the submission
    caused itself.

    The kernel's per-task scheduler statistics (``/proc/<pid>/schedstat``: time on a CPU, time
    ready to run but waiting for one) give the worker's wait, whoever caused it. Student code
    can cause it: processes or threads that spin beside the request take the worker's CPU.
    Every such wait is time one of the sandbox's other tasks spent on a CPU, and the sandbox's
    control group counts all of its tasks' CPU time (``bubblewrap.ControlGroups.cpu_seconds``,
    read from outside the sandbox), so the wait less the CPU time of the sandbox's tasks other
    than the worker's own is at most what tasks outside the sandbox took: never a wait of the
    submission's making. The grading thread's
    own CPU time is taken off as well: the worker can make it work (with messages to read) on
    the CPU they may share. A worker cannot lower its own priority, give its CPU away
    (``sched_yield``) or move to other CPUs either (``confine``'s system-call filter), so
    what waits it gets are the host's. Without the control group's count nothing is credited:
    a time limit is then plain wall time."""

    #: Counters before a worker was found: (waited, ran, the sandbox's CPU time, the grading
    #: thread's CPU time), in seconds.
    NOTHING = (0.0, 0.0, None, 0.0)

    def __init__(self):
        self._stats: int | None = None  # the worker's statistics, kept open
        self._looked = False

    def forget(self) -> None:
        """The worker is gone: the next one is looked up afresh."""
        if self._stats is not None:
            os.close(self._stats)
        self._stats, self._looked = None, False

    def counters(self, pid: int) -> tuple[float, float, float | None, float]:
        """Worker ``pid``'s (its pid in the template's namespace) wait for a CPU and time on
        one so far, the CPU time of the sandbox's tasks (``None``: not counted here) and that
        of the calling thread, the grading thread."""
        template = template_client.running()
        if not self._looked and pid:
            self._looked = True
            host = host_pid(pid, template.process.pid) if template else None
            with contextlib.suppress(OSError):
                self._stats = (
                    os.open(f"/proc/{host}/schedstat", os.O_RDONLY) if host else None
                )
        if self._stats is None or template is None:
            return self.NOTHING
        try:
            ran, waited = os.pread(self._stats, 128, 0).split()[:2]
        except (OSError, ValueError):
            return self.NOTHING
        sandbox = template.groups.cpu_seconds()
        return int(waited) / 1e9, int(ran) / 1e9, sandbox, time.thread_time()

    @staticmethod
    def credit(then: tuple, now: tuple) -> float:
        """Seconds to credit for the worker's wait between two readings of ``counters``: the
        wait less the CPU time of the sandbox's other tasks and of the grading thread, so never
        more than the host's other tasks made it wait; 0 where either reading lacks the
        sandbox's count."""
        if then[2] is None or now[2] is None:
            return 0.0
        waited, ran, sandbox, grader = (b - a for a, b in zip(then, now, strict=True))
        return max(0.0, waited - max(0.0, sandbox - ran) - grader)


def host_pid(pid: int, ancestor: int) -> int | None:
    """The host's pid of the process that is ``pid`` in the innermost PID namespace below
    process ``ancestor`` (bubblewrap gives the template a namespace of its own), or none."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:"):
                if int(line.split()[-1]) == pid and _descends(
                    int(entry.name), ancestor
                ):
                    return int(entry.name)
                break
    return None


def _descends(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` is ``ancestor`` or below it."""
    try:
        while pid > 1:
            if pid == ancestor:
                return True
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return False
