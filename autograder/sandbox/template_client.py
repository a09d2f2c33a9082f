"""The sandbox's template, seen from the grading process: start it, ask it for workers, hear
when they end.

Why a module of its own, without torch: a grading process starts the template first, so the
template imports torch in its process while the grading process imports torch in its own.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import select
import socket
import subprocess
import tempfile
import time

from autograder.sandbox import bubblewrap
from autograder.sources.runner import SandboxUnavailable

_templates = itertools.count()
#: How much of the template's last output a failure to start quotes.
LAST_WORDS = 1500
#: Seconds a template may take to answer a spawn request, its own start (torch's import)
#: included: a generous multiple of the slowest start seen on a loaded machine (about 20 s).
SPAWN_TIMEOUT = 300.0
#: The CPUs this process may use, as it started (before any thread was paired with one).
_CPUS = os.sched_getaffinity(0)


class TemplateClient:
    """Starts the template process (in the boundary) and talks to it over a SEQPACKET socket."""

    def __init__(self, gpu: bool):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = "import sys; sys.path.insert(0, {engine!r}); " + (
            "from autograder.sandbox.template import template_main; "
            f"template_main({theirs.fileno()})"
        )
        argv, engine = bubblewrap.command(code, gpu)
        argv[-1] = argv[-1].format(engine=engine)
        # Its output, quoted when it cannot start (torch's import failing in the boundary, say).
        self.output = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the template
        self.groups = bubblewrap.ControlGroups(
            f"autograder-{os.getpid()}-{next(_templates)}"
        )
        try:
            self.process = subprocess.Popen(
                argv,
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=self.output,
                stderr=self.output,
                cwd="/",
                preexec_fn=self._prepare,  # noqa: PLW1509 - no threads of its own here
            )
        except (OSError, subprocess.SubprocessError):
            for resource in (ours, theirs, self.output):
                resource.close()
            self.groups.remove()
            raise
        atexit.register(self.close)
        theirs.close()
        self.sock = ours
        self.dead = False
        self.gpu = gpu
        self._ended: dict[int, int] = {}  # pid -> wait status
        # pid -> (CPU seconds, peak resident bytes) of an ended worker
        self._usage: dict[int, tuple[float, int]] = {}
        #: Whether its workers serve only with the system-call filter on (``confine``).
        self.filtered = False
        #: Whether it has spawned a worker: until then a spawn waits for its start (torch's
        #: import), a cost of the grading process's, not of the submission it grades first.
        self.served = False

    def _prepare(self) -> None:
        """In the template's process before it starts: its control groups, and every CPU the
        grading process may use (the thread starting it may be paired with a CPU)."""
        self.groups.enter()
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, _CPUS)

    def close(self) -> None:
        """End the template (and with it every worker) and remove its control groups."""
        self.dead = True
        self.sock.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.groups.remove()
        self.output.close()

    def last_words(self) -> str:
        """The end of what the template printed (its traceback, when it died at start)."""
        self.output.seek(0, os.SEEK_END)
        self.output.seek(max(0, self.output.tell() - LAST_WORDS))
        return self.output.read().decode(errors="replace").strip() or "nothing"

    def spawn(self, socks: list[socket.socket], config: dict) -> int:
        """Fork a worker that serves ``socks[0]`` and dumps stacks into ``socks[1]``."""
        message = json.dumps({"spawn": config}).encode()
        socket.send_fds(self.sock, [message], [s.fileno() for s in socks])
        deadline = time.monotonic() + SPAWN_TIMEOUT
        while True:
            left = max(0.0, deadline - time.monotonic())
            if not self.dead and not select.select([self.sock], [], [], left)[0]:
                self.process.kill()  # hung (a stuck import, say): no worker will come
                raise RuntimeError(
                    f"the sandbox's template did not answer in {SPAWN_TIMEOUT:g} s"
                )
            reply = self._read()
            if "refused" in reply:
                raise RuntimeError(
                    f"the sandbox's template refused: {reply['refused']}"
                )
            if "spawned" in reply:
                # An earlier worker's end with the same pid (reused) came before: not this one's.
                self._ended.pop(reply["spawned"], None)
                self._usage.pop(reply["spawned"], None)
                self.filtered = reply.get("filtered") is True
                self.served = True
                return reply["spawned"]

    def kill(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            self.sock.send(json.dumps({"kill": pid}).encode())

    def poll(self) -> None:
        """Take in any waiting notices without blocking."""
        while select.select([self.sock], [], [], 0)[0]:
            self._read()

    def status_of(self, pid: int) -> int | None:
        return self._ended.get(pid)

    def usage_of(self, pid: int) -> tuple[float, int] | None:
        """An ended worker's CPU seconds and peak resident bytes, as the template reaped it."""
        return self._usage.get(pid)

    def wait(self, pid: int, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while pid not in self._ended and (left := end - time.monotonic()) > 0:
            if select.select([self.sock], [], [], left)[0]:
                self._read()
        return self._ended.get(pid)

    def forget(self, pid: int) -> None:
        self._ended.pop(pid, None)
        self._usage.pop(pid, None)

    def _read(self) -> dict:
        data = b"" if self.dead else self.sock.recv(65536)
        if not data:
            self.dead = True
            raise RuntimeError("the sandbox's template process ended unexpectedly")
        message = json.loads(data)
        if "ended" in message:
            pid, status, *usage = message["ended"]
            self._ended[pid] = status
            if len(usage) == 2:
                self._usage[pid] = (float(usage[0]), int(usage[1]))
        return message


_TEMPLATE: TemplateClient | None = None
#: Whether this process grades on a GPU (``start``): a template started again sees it too.
_GPU = False
#: Templates this process has started (``starts``).
_STARTS = 0


def starts() -> int:
    """How many templates this process has started: a grading during which it grew met a
    template started again (a grader-side event, ``IsolatedSubmission.grader_events``)."""
    return _STARTS


def current(gpu: bool = False) -> TemplateClient:
    """This process's template, started (again) when there is none, it died, or ``gpu`` asks
    for a GPU it cannot reach."""
    global _TEMPLATE, _STARTS
    gpu = gpu or _GPU
    if (
        _TEMPLATE is None
        or _TEMPLATE.dead
        or _TEMPLATE.process.poll() is not None
        or (gpu and not _TEMPLATE.gpu)
    ):
        if _TEMPLATE is not None:
            _TEMPLATE.close()
        _TEMPLATE = TemplateClient(gpu)
        _STARTS += 1
    return _TEMPLATE


def spawn(socks: list[socket.socket], config: dict) -> int:
    """A worker from the template; a template that died is replaced once, so whatever ended
    it never costs the submissions graded after. ``SandboxUnavailable`` when the replacement
    fails too (the next request tries afresh: what failed may have passed)."""
    gpu = config["device"].startswith("cuda")
    try:
        return current(gpu).spawn(socks, config)
    except (RuntimeError, OSError, subprocess.SubprocessError):
        if _TEMPLATE is not None:
            _TEMPLATE.close()
    try:
        fresh = current(gpu)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxUnavailable(f"the sandbox cannot start here: {exc}") from None
    try:
        return fresh.spawn(socks, config)
    except (RuntimeError, OSError) as exc:
        why = f"the sandbox cannot start a worker here ({exc}); its last output:\n"
        why += fresh.last_words()
        fresh.close()
        raise SandboxUnavailable(why) from None


def start(gpu: bool) -> None:
    """Start the template now (it imports torch in the background while the caller works);
    ``gpu``: the tests run on a GPU."""
    global _GPU
    _GPU = _GPU or gpu
    current()


def served() -> bool:
    """Whether the current template has spawned a worker (so it has started)."""
    return _TEMPLATE is not None and _TEMPLATE.served


def running() -> TemplateClient | None:
    """The template this process started, if any (without starting one)."""
    return _TEMPLATE
