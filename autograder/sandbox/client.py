"""Student code in a separate, resource-limited process: ``IsolatedSubmission``, the client.

Why a process: student code can exit, hang, fork, flood output or patch torch; none of that may
reach the process that compares results and decides a grade. The grading side sends requests
(``autograder.facts.protocol``) as plain data over a socket (``autograder.sandbox.wire``) and gets plain data
back, within bounds: every reply has an absolute deadline and a size cap, and a submission's
replies together have a byte budget.

The student side is ``autograder.sandbox.template``: one template process per grading process, inside
the bubblewrap boundary of ``autograder.sandbox.bubblewrap``, forks one worker per submission. The
submission's files travel to the worker over its socket; the grading side never stages a copy
a worker could write to. A request that runs past its wall time, or a worker that dies, becomes
a ``StudentError`` for that request; the next request gets a fresh worker (objects of the old one
are gone). Whose doing a worker's end was is ``autograder.sandbox.retries``'s to decide: an end
that is not plainly the submission's runs the request once more in a fresh worker brought to the
lost one's state by replaying the requests it served; ending the same request again makes it the
submission's, not ending it the host's (``grader_events`` records each such fault). Hangs are
counted per function (``autograder.sandbox.hangs``); a request that ended the worker is not run
again, and once the submission's total time is spent every request fails fast, so one hang never
blocks a batch. Time limits count only the host's delays (``host_wait``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from autograder.facts import stages
from autograder.facts.points import MODULES, PACKAGE
from autograder.facts.protocol import (
    ErrorInfo,
    Handle,
    HandleRef,
    StudentError,
    Submission,
)
from autograder.facts.rules import MAX_RECORDS, Violation
from autograder.sandbox import (
    bubblewrap,
    confine,
    hangs,
    host_wait,
    retries,
    template_client,
    wire,
    worker_exit,
)
from autograder.sources import intake
from autograder.sources.runner import SandboxUnavailable

REPO = Path(__file__).resolve().parents[2]
#: Folders of the repository student code must never read; only needed where there is no
#: bubblewrap boundary (its view never has them). The bug zoo quotes the reference.
SECRET_DIRS = ("solutions", "tests", ".git", "examples", "autograder/batches/zoo")
_GEN_SHIFT = 40  # grading-side handle id: worker generation << _GEN_SHIFT | worker's id
#: How long each end of a request polls for the other's message before it sleeps, where each
#: has a CPU of its own (``_CpuPlan``): longer than most of the suite's gaps between requests.
POLL_SECONDS = 0.01
#: Most distinct functions kept disarmed (their names travel in every spawn request).
MAX_DISARMED = 32
#: Bytes of requests kept to bring a fresh worker to a lost one's state (``_Journal``).
MAX_JOURNAL_BYTES = 64 << 20
#: A request's time limit is moved on by the time the host's other work kept its worker
#: waiting for a CPU (``host_wait``), up to this many times the limit in all.
MAX_STRETCH = 10
_uids = itertools.count()


#: How a request's error says the worker's reply was malformed (forged, not an exit).
BROKE_PROTOCOL = "broke the protocol"


@dataclass
class Limits:
    """Per-submission limits: generous multiples of what the reference needs."""

    #: Seconds of wall time per request (the reference's slowest takes well under a second).
    call_timeout: float = 60.0
    #: All requests together; under Gradescope's 10 minutes.
    submission_timeout: float = 480.0
    memory: int = 2 << 30  # bytes of address space beyond what torch itself maps
    processes: int = 64  # processes and threads of the worker's uid
    file_size: int = 64 << 20  # bytes per file the student writes
    open_files: int = 256
    threads: int = 1  # torch intra-op threads
    #: Bytes of all replies of one submission together (the suite needs a few MB).
    reply_bytes: int = 1 << 30
    tmp_bytes: int = 256 << 20  # a worker's private /tmp
    shm_bytes: int = 64 << 20  # a worker's private /dev/shm
    #: More paths to hide (inputs, outputs); used only without the bubblewrap boundary.
    hidden: list[str] = field(default_factory=list)


def limits_for(call_timeout: float | None, hidden: list[str]) -> Limits:
    """The limits of a run with ``call_timeout`` seconds per request (``None``: the default),
    and all requests together at least eight times that."""
    limits = Limits(hidden=list(hidden))
    if call_timeout is not None:
        limits.call_timeout = call_timeout
        limits.submission_timeout = max(limits.submission_timeout, 8 * call_timeout)
    return limits


class IsolatedSubmission(Submission):
    """``Submission`` whose student code runs in a sandboxed worker process."""

    def __init__(self, root, device="cpu", limits: Limits | None = None):
        super().__init__(root, device)
        self.limits = limits or Limits()
        self._files = _read_package(self.root / PACKAGE)
        self._sock: socket.socket | None = None
        self._stacks: socket.socket | None = None
        self._pid = 0
        self._worker_root = ""
        self._generation = 0
        self._seq = 0
        self._deadline = time.monotonic() + self.limits.submission_timeout
        self._reply_bytes = 0
        self._refused: dict[str, tuple[str, str]] = {}  # label -> (error type, message)
        self._hangs: Counter[tuple[str, str]] = Counter()  # (file, function) -> hangs
        # A line inside each function that hung, to find it by when it is disarmed.
        self._hung_at: dict[tuple[str, str], int] = {}
        self._violations: dict[tuple[str, int, str], None] = {}  # an ordered set
        self._closed = False
        self._stacks_written = False  # by the last request (``_dumped_by``)
        self._serving = ""  # the label of the request under way
        self._sent = 0.0  # when it was sent to its worker
        self._cpu_plan = _CpuPlan()
        # Why no worker could be started for it: every later request fails the same way at once.
        self._unavailable = ""
        self._oom_kills: int | None = None  # the sandbox's, as its worker started
        self._journal = _Journal()
        self._rebuild = False  # the next worker is brought to the lost one's state
        self._retries = retries.Retries(self.limits.submission_timeout)
        # Each request retried, and its grader event, which goes if its end recurs.
        self._retried_events: dict[int, str] = {}
        self._host_wait = host_wait.HostWait()
        # The wait in progress: (when it began, seconds allowed, ``host_wait`` counters then)
        self._timed = (0.0, 0.0, host_wait.HostWait.NOTHING)
        #: What happened on the grader's side while grading it (a worker lost and retried
        #: where the retry did not end the same way, a template started again).
        self.grader_events: list[str] = []
        self._template_starts = template_client.starts()

    # Runtime forbidden calls -----------------------------------------------------------------
    def runtime_violations(self) -> list[Violation]:
        """Forbidden calls the worker refused, as made from student files."""
        return [
            Violation(f, line, f"{call} (called at run time)")
            for f, line, call in self._violations
        ]

    def _record(self, records) -> None:
        """Keep the records (each worker sends its new ones), at most ``MAX_RECORDS``."""
        for record in map(tuple, records):
            if len(self._violations) < MAX_RECORDS:
                self._violations.setdefault(record)

    # The protocol ------------------------------------------------------------------------------
    def _send(self, op, target, name, args, kwargs):
        label = _label(op, target.ref if target is not None else None, name)
        if self._closed:
            raise _error("RuntimeError", "the submission was already closed")
        if label in self._refused:
            raise _error(*self._refused[label])
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise _error(
                "TimeoutError",
                f"the submission used up its {self.limits.submission_timeout:g} s of run time",
            )
        request = {
            "seq": self._seq + 1,
            "op": op,
            "target": target,
            "name": name,
            "args": args,
            "kwargs": kwargs,
        }
        try:
            encoded = wire.encode(request, handle=self._worker_ref)
        except wire.WireError as exc:  # the test's own arguments
            raise TypeError(
                f"the arguments of {label} are not plain data: {exc}"
            ) from None
        self._seq += 1
        self._serving = label
        timeout = min(self.limits.call_timeout, remaining)
        stage = "the second device" if op == "elsewhere" else "the requests"
        while True:
            try:
                with stages.timed(stage, also=sandbox_cpu):
                    reply = self._exchange(encoded, timeout)
                break
            except TimeoutError:
                stacks = (
                    "" if timeout < self.limits.call_timeout else self._read_stacks()
                )
                self._stop()
                if timeout < self.limits.call_timeout:
                    message = (
                        f"the submission used up its {self.limits.submission_timeout:g} s "
                        f"of run time during {label}"
                    )
                else:
                    message = f"{label} took longer than {self.limits.call_timeout:g} s"
                    for file, function, line in hangs.outermost_student_frame(stacks):
                        self._hangs[file, function] += 1
                        self._hung_at.setdefault((file, function), line)
                raise _error("TimeoutError", message) from None
            except _WorkerEnded as ended:
                self._stop()
                # A fresh worker's start and replay charged their own time (``_start``).
                lost = time.monotonic() - self._sent if ended.at == _LIVE else 0.0
                if self._retry_after(ended, label, lost):
                    continue
                raise self._own_end(ended, label) from None
            except (wire.WireError, EOFError, OSError) as exc:
                self._stop()
                raise _error(
                    "ProcessExit",
                    f"the submission's process {BROKE_PROTOCOL} during {label} ({exc})",
                ) from None
        if "error" in reply:
            raise StudentError(self._scrub(reply["error"]))
        return reply["ok"]

    def _exchange(self, encoded, timeout: float):
        """One request and its reply, from a fresh worker where there is none; the request
        joins the journal of what its worker served."""
        if self._sock is None:
            with stages.timed("a worker's start", also=sandbox_cpu):
                self._start(time.monotonic() + timeout)
        # Timed from here: a template still importing torch, or a worker brought back after a
        # fault outside the submission, costs the student nothing.
        sent = self._sent = time.monotonic()
        deadline = self._time_from(sent, timeout)
        if self._stacks_written:
            self._drop_stacks()
        self._send_by(encoded, deadline)
        try:
            reply = self._receive(deadline, seq=self._seq)
        finally:
            self._deadline += self._credit()  # the host's delay is not the submission's
        took = time.monotonic() - sent
        self._stacks_written = self._dumped_by(took)
        self._journal.add(self._seq, self._serving, encoded, took)
        return reply

    def _time_from(self, began: float, allowed: float) -> float:
        """Start timing a wait for the worker of ``allowed`` seconds: its deadline."""
        self._timed = (began, allowed, self._host_wait.counters(self._pid))
        return began + allowed

    def _credit(self) -> float:
        """Seconds the host's other work has kept the worker waiting for a CPU since the
        current wait began (``host_wait.HostWait.credit``), up to what ``MAX_STRETCH`` grants it."""
        _, allowed, then = self._timed
        waited = host_wait.HostWait.credit(then, self._host_wait.counters(self._pid))
        return min(waited, (MAX_STRETCH - 1) * allowed)

    def _retry_after(self, ended: _WorkerEnded, label: str, lost: float) -> bool:
        """Whether the request whose worker ``ended`` (after ``lost`` seconds) runs again in a
        fresh worker brought to the lost one's state (``retries.Verdict.RETRY``: noted among
        ``grader_events``, its time not the submission's). ``SandboxUnavailable`` when the
        retries are spent, or the journal is too long to replay: the grader's failure."""
        at = self._seq if ended.at == _LIVE else ended.at
        verdict = self._retries.judge(
            at, ended.own, self._journal.seconds, outside=ended.outside
        )
        if verdict is retries.Verdict.OWN:
            return False
        self._retries.charge(lost)
        self._deadline += (
            lost  # not the submission's, unless it ends the same way again
        )
        where = "as it started" if at is None else f"during {self._label_of(at, label)}"
        if verdict is retries.Verdict.GRADER_FAILURE or self._journal.overflowed:
            why = (
                self._retries.exhausted()
                if verdict is retries.Verdict.GRADER_FAILURE
                else "the requests to replay were too many"
            )
            self._unavailable = (
                f"the sandbox lost the submission's process to ends not of its doing "
                f"({why}; the last: it {ended} {where})"
            )
            raise SandboxUnavailable(self._unavailable)
        if ended.outside:  # never the submission's, however often it comes
            event = (
                f"the submission's process {ended} {where}, a signal it cannot send itself; "
                "the request was run again in a fresh process, and this cost no points"
            )
        else:
            event = (
                f"the submission's process {ended} {where}; the request was run again in a "
                "fresh process, which did not end that way, and this cost no points"
            )
        self.grader_events.append(event)
        if at is not None and not ended.outside:
            self._retried_events[at] = event
        self._rebuild = True
        return True

    def _own_end(self, ended: _WorkerEnded, label: str) -> StudentError:
        """The error of a request whose worker ended by the submission's doing: plainly its
        own, or again at the same request after a retry. The request is not run again."""
        at = self._seq if ended.at == _LIVE else ended.at
        again = ""
        # It ended that way again: no event of the grader's, and the retry's time was its own.
        if at in self._retried_events:
            self.grader_events.remove(self._retried_events.pop(at))
            self._deadline -= self._retries.cost_of(at)
            again = " again, after a retry in a fresh process"
        if at != self._seq:  # a request replayed to bring the fresh worker to its state
            return _error(
                "ProcessExit",
                f"the submission's process {ended} during {self._label_of(at, label)}"
                f"{again}, while it was being brought back to its state for {label}",
            )
        self._refused[label] = (
            "ProcessExit",
            f"{label} ended the submission's process earlier ({ended}{again}), "
            + "so it was not run again",
        )
        return _error(
            "ProcessExit", f"the submission's process {ended} during {label}{again}"
        )

    def _label_of(self, seq: int, label: str) -> str:
        """The label of request ``seq``: ``label`` for the request under way, else the
        journal's."""
        return self._journal.labels.get(seq, label)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._stop()
            self._cpu_plan.end()

    def __del__(self):
        if hasattr(self, "_closed"):
            self.close()

    # The worker --------------------------------------------------------------------------------
    def _send_by(self, encoded, deadline: float) -> None:
        """Send a message (``wire.encode``d) to the worker; a worker that stops reading cannot
        hold us past ``deadline`` (``TimeoutError``). A worker that is gone is found by
        ``_receive``."""
        try:
            wire.send_encoded(self._sock, encoded, deadline)
        except TimeoutError:
            raise
        except OSError:
            pass

    def _start(self, deadline: float) -> None:
        """A fresh worker holding the submission's files, ready by ``deadline``."""
        if self._unavailable:
            raise SandboxUnavailable(self._unavailable)
        started = time.monotonic()
        ours, theirs = socket.socketpair()
        stacks_ours, stacks_theirs = socket.socketpair()
        cpu, poll = self._cpu_plan.choose()
        config = {
            "device": str(self.device),
            "limits": asdict(self.limits),
            "hidden": []
            if bubblewrap.bwrap_path()
            else _hidden_paths(self.limits.hidden),
            "uid": _next_uid(),
            "cpu": cpu,
            "poll": poll,
            "disarmed": [
                [*key, self._hung_at[key]]
                for key, count in sorted(self._hangs.items())
                if count >= hangs.DISARM_AFTER
            ][:MAX_DISARMED],
        }
        waits = (
            contextlib.nullcontext()
            if template_client.served()
            else stages.timed("the template's start", also=sandbox_cpu)
        )
        try:
            with waits:
                self._pid = template_client.spawn([theirs, stacks_theirs], config)
            self._oom_kills = template_client.running().groups.oom_kills()
        except BaseException as exc:
            if isinstance(exc, SandboxUnavailable):
                self._unavailable = str(exc)
            for sock in (ours, theirs, stacks_ours, stacks_theirs):
                sock.close()
            raise
        if template_client.starts() != self._template_starts:
            self._template_starts = template_client.starts()
            self.grader_events.append(
                "the sandbox's template process was started again while grading it"
            )
        deadline += (
            time.monotonic() - started
        )  # waiting for the template is not the worker's
        theirs.close()
        stacks_theirs.close()
        ours.setblocking(False)  # every wait on the worker has a deadline (wire)
        stacks_ours.setblocking(False)
        self._sock, self._stacks = ours, stacks_ours
        if not self._rebuild:  # a fresh start: the lost worker's objects are gone
            self._generation += 1
            self._journal.clear()
        deadline = self._time_from(time.monotonic(), deadline - time.monotonic())
        self._send_by(wire.encode(self._files), deadline)
        try:
            hello = self._receive(deadline, hello=True)
        except _WorkerEnded as ended:  # no student code runs before the hello
            self._stop()
            if not ended.own:  # killed as it started: the host's, retried
                ended.at = None
                raise
            self._unavailable = f"the sandbox's worker {ended} before it could serve"
            raise SandboxUnavailable(self._unavailable) from None
        if type(hello) is not dict or type(hello.get("root")) is not str:
            raise wire.WireError("the worker did not say where it works")
        self._worker_root = hello["root"]
        if self._rebuild:
            try:
                self._replay()
            finally:  # its time is not the submission's
                took = time.monotonic() - started
                self._retries.charge(took)
                self._deadline += took
            self._rebuild = False

    def _replay(self) -> None:
        """Bring a fresh worker to the lost one's state: every request the lost one served,
        sent again in order. A worker forked from the template starts as every other does (its
        torch generator included), so with one torch thread it ends up holding the same
        objects under the same ids, and the tests' handles name them still. The replies were
        already used: these are dropped, and their bytes do not count against the
        submission (nor their time: ``_start``). A worker that ends during the replay ends at
        the replayed request (``_WorkerEnded.at``); one that cannot be brought back otherwise
        (a replayed request runs out of time) has ended by its own doing."""
        spent = self._reply_bytes
        seq = 0
        try:
            for seq, encoded in self._journal.entries:
                deadline = self._time_from(time.monotonic(), self.limits.call_timeout)
                self._send_by(encoded, deadline)
                self._receive(deadline, seq=seq)
        except _WorkerEnded as ended:
            ended.at = seq
            raise
        except (TimeoutError, wire.WireError, EOFError, OSError) as exc:
            raise _WorkerEnded(
                f"could not be brought back to its state ({type(exc).__name__})",
                own=True,
                at=seq,
            ) from None
        finally:
            self._reply_bytes = spent

    def _stop(self) -> None:
        """Kill the worker (the template removes what it left)."""
        for sock in (self._sock, self._stacks):
            if sock is not None:
                sock.close()
        self._sock = self._stacks = None
        self._rebuild = False  # unless a retry asks for it (``_retry_after``)
        if self._pid:
            if (running := template_client.running()) is not None:
                running.kill(self._pid)
                running.forget(self._pid)
            self._pid = 0
            self._host_wait.forget()

    def _dumped_by(self, seconds: float) -> bool:
        """Whether a request that took ``seconds`` may have had the worker write its stacks:
        only one that came close to its limit, timed by the worker from later than here."""
        return seconds >= 0.5 * hangs.DUMP_AT * self.limits.call_timeout

    def _drop_stacks(self) -> None:
        """Drop a stack dump left by an earlier request that came close to its limit."""
        with contextlib.suppress(OSError):
            while self._stacks.recv(hangs.MAX_DUMP):
                pass

    def _read_stacks(self) -> str:
        """The hung worker's stack dump: at most ``hangs.MAX_DUMP`` bytes, waiting at most a
        grace period for it to start (the worker writes it shortly before its limit, timed from
        when it received the request) and stopping when it pauses."""
        chunks, size = [], 0
        wait = max(2.0, 0.25 * self.limits.call_timeout)
        end = time.monotonic() + wait + 1.0  # a trickle cannot stretch it
        while (
            size < hangs.MAX_DUMP
            and (wait := min(wait, end - time.monotonic())) > 0
            and select.select([self._stacks], [], [], wait)[0]
        ):
            try:
                chunk = self._stacks.recv(hangs.MAX_DUMP - size)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            wait = 0.2
        return b"".join(chunks).decode("utf-8", "replace")

    def _receive(self, deadline: float, hello: bool = False, seq: int = 0):
        """The reply to request ``seq`` (or the new worker's hello), complete by
        ``deadline``; ``_WorkerEnded`` when the worker ended first (its socket closed or
        reset), ``TimeoutError`` when the deadline passed."""
        client = template_client.running()  # the one that spawned the worker
        while True:
            if client is None or client.dead:
                raise _WorkerEnded("was lost with the sandbox's template process")
            status = client.status_of(self._pid)
            if status is not None:
                raise self._end_of(client, status, serving=not hello)
            left = deadline - time.monotonic()
            if left <= 0:
                began, allowed, _ = self._timed
                left = began + allowed + self._credit() - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                deadline = time.monotonic() + left
            if poll := self._cpu_plan.choose()[1]:
                wire.poll_readable(self._sock, min(poll, left))
            readable, _, _ = select.select([self._sock, client.sock], [], [], left)
            if client.sock in readable:
                with contextlib.suppress(RuntimeError):  # its end: client.dead, above
                    client.poll()
            if self._sock in readable:
                budget = self.limits.reply_bytes - self._reply_bytes
                try:
                    reply, size = wire.recv_sized(
                        self._sock,
                        self.device,
                        limit=min(wire.MAX_MESSAGE, max(budget, 0)),
                        deadline=deadline,
                        handle=self._handle,
                    )
                except (EOFError, ConnectionError):
                    # A reset: it ended with a request still unread.
                    raise self._how_it_ended(client, not hello) from None
                if hello:
                    return reply
                self._reply_bytes += size
                if not _valid_reply(reply, seq):
                    raise wire.WireError("reply out of sequence")
                self._record(reply["v"])
                return reply

    def _how_it_ended(
        self, client: template_client.TemplateClient, serving: bool
    ) -> _WorkerEnded:
        """Why the worker's socket closed, as the template tells it."""
        try:
            return self._end_of(client, client.wait(self._pid, 5.0), serving)
        except RuntimeError:
            return _WorkerEnded("was lost with the sandbox's template process")

    def _end_of(
        self, client: template_client.TemplateClient, status: int | None, serving: bool
    ) -> _WorkerEnded:
        ended = _ended(status, serving)
        ended.outside = self._from_outside(client, status)
        return ended

    def _from_outside(
        self, client: template_client.TemplateClient, status: int | None
    ) -> bool:
        """Whether the worker's end by wait ``status`` came from outside it, on what the grader
        sees itself: a signal not among its own, which the system-call filter kept it from
        sending itself (``confine.SIGNAL_CALLS``), and none the kernel sends for one of its own
        limits: CPU time past ``confine.cpu_seconds_allowed``, the sandbox's memory group out of
        memory, or (with no address-space limit, on a GPU) its memory past ``Limits.memory``.
        Its own children, and every other worker, are under the same filter."""
        if not (
            client.filtered
            and status is not None
            and os.WIFSIGNALED(status)
            and os.WTERMSIG(status) not in worker_exit.OWN_SIGNALS
        ):
            return False
        usage = client.usage_of(self._pid)
        if usage is None:
            return False
        cpu, peak = usage
        return (
            cpu < confine.cpu_seconds_allowed(self.limits)
            and client.groups.oom_kills() == self._oom_kills
            and (self.device.type != "cuda" or peak < self.limits.memory)
        )

    # Handles and messages ----------------------------------------------------------------------
    def _worker_ref(self, handle: Handle) -> HandleRef:
        """What a handle is called in the worker; a handle of an earlier worker is refused.
        (Applied by ``wire.encode`` as it goes: no pass of its own over a request.)"""
        ref = handle.ref
        if ref.id >> _GEN_SHIFT != self._generation or self._sock is None:
            raise _error(
                "ProcessExit",
                f"this {ref.type_name} was lost when the submission's process stopped",
            )
        return HandleRef(ref.id & ((1 << _GEN_SHIFT) - 1), ref.type_name)

    def _handle(self, ref: HandleRef) -> Handle:
        """A handle to the worker's object ``ref``, marked with this worker's generation
        (applied by ``wire.recv`` as it decodes a reply)."""
        return Handle(
            self, HandleRef(self._generation << _GEN_SHIFT | ref.id, ref.type_name)
        )

    def _scrub(self, info: ErrorInfo) -> ErrorInfo:
        """Error text without the worker's folder."""

        def clean(text: str) -> str:
            return text.replace(self._worker_root + os.sep, "")

        return ErrorInfo(
            info.type_name, clean(info.message), clean(info.traceback), info.bases
        )


#: ``_WorkerEnded.at`` of a worker that ended serving the request under way.
_LIVE = -1


class _WorkerEnded(Exception):
    """The worker is gone; ``own``: plainly by its own doing (an exit with a status of its
    choosing, a crash, one of its limits); ``outside``: by a signal it cannot have sent itself
    (``IsolatedSubmission._from_outside``); else undecided (a lost connection, a lost
    template, a signal where no filter stops it sending it: ``retries`` decides). ``at``: the
    request it was serving (``_LIVE``: the one under way; a replayed one's number; ``None``: it
    had not said hello)."""

    def __init__(
        self, how: str, own: bool = False, at: int | None = _LIVE, outside=False
    ):
        super().__init__(how)
        self.own = own
        self.at = at
        self.outside = outside


def _ended(status: int | None, serving: bool) -> _WorkerEnded:
    """A worker that ended with wait status ``status`` (``None``: the template could not
    tell). The statuses the worker's own code exits with on a lost connection
    (``worker_exit.HUNG_UP``) and the signals that may come from outside are undecided: student
    code can exit with that status, or send itself that signal, as well."""
    own = status is not None and (
        (os.WIFEXITED(status) and os.WEXITSTATUS(status) != worker_exit.HUNG_UP)
        or (os.WIFSIGNALED(status) and os.WTERMSIG(status) in worker_exit.OWN_SIGNALS)
    )
    return _WorkerEnded(_describe_status(status, serving), own)


class _Journal:
    """The requests the current worker served, in order, as sent (their tensors copied: a
    test may change its own afterwards), to bring a fresh worker to its state, with their
    labels and the seconds they took (what a replay will cost, ``retries``). Given up past
    ``MAX_JOURNAL_BYTES``."""

    def __init__(self):
        self.clear()

    def add(self, seq: int, label: str, encoded: tuple[bytes, list], took: float):
        self.seconds += took
        if self.overflowed:
            return
        header, buffers = encoded
        copied = [memoryview(b).cast("B").tobytes() for b in buffers]
        self.size += len(header) + sum(map(len, copied))
        if self.size > MAX_JOURNAL_BYTES:
            self.entries, self.labels, self.overflowed = [], {}, True
            return
        self.entries.append((seq, (header, copied)))
        self.labels[seq] = label

    def clear(self) -> None:
        self.entries: list[tuple[int, tuple[bytes, list[bytes]]]] = []
        self.labels: dict[int, str] = {}
        self.size, self.seconds, self.overflowed = 0, 0.0, False


class _CpuPlan:
    """Where a submission's worker runs, and whether the two ends of a request poll for each
    other; chosen afresh per submission (``end`` gives the thread all its CPUs back).

    Why: the thread that sends requests and the worker that answers them take turns, never
    working at once, and waking a process on a CPU that went idle costs far more (a virtual CPU
    halts) than switching on a busy one. So on a host with a CPU to spare right now, each keeps
    a CPU of its own and polls for the other's message for up to ``POLL_SECONDS`` before it
    sleeps: neither CPU goes idle between a request and its reply, and neither evicts the
    other's caches (a submission graded alone takes about a tenth less time, for about twice
    the CPU). Otherwise (grading processes side by side, a busy host) the two share the CPU the
    scheduler last gave the thread and sleep when they wait, so they cost one CPU between them.
    """

    def __init__(self):
        self._thread = 0  # the pinned thread's id
        self._allowed: set[int] = set()
        self._plan: tuple[int | None, float] | None = None

    def choose(self) -> tuple[int | None, float]:
        """``(CPU for the worker, seconds to poll)``, pinning the calling thread to the CPU it
        runs on; ``(None, 0.0)`` on one CPU only, or where affinity cannot be set."""
        if self._plan is None:
            self._plan = (None, 0.0)
            with contextlib.suppress(OSError, ValueError, IndexError):
                allowed, cpu = os.sched_getaffinity(0), _current_cpu()
                if len(allowed) > 1 and cpu in allowed:
                    os.sched_setaffinity(0, {cpu})
                    self._thread, self._allowed = threading.get_native_id(), allowed
                    if _idle_cpus(len(allowed)) >= 1:
                        others = sorted(allowed - {cpu})
                        self._plan = (others[cpu % len(others)], POLL_SECONDS)
                    else:
                        self._plan = (cpu, 0.0)
        return self._plan

    def end(self) -> None:
        """Give the pinned thread back all the CPUs it had."""
        if self._thread:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self._thread, self._allowed)
            self._thread = 0
        self._plan = None


def _idle_cpus(allowed: int) -> int:
    """CPUs this process could use that nothing runs on now, beyond the calling thread: the
    allowed ones (or fewer, under a control group's CPU quota) less the host's runnable threads
    (``/proc/loadavg``; the most of three looks 1 ms apart, as a thread that just slept would
    not be counted)."""
    usable = min([allowed, *_cpu_quotas()])
    running = 0
    for look in range(3):
        if look:
            time.sleep(0.001)
        with open("/proc/loadavg", "rb") as f:
            running = max(running, int(f.read().split()[3].split(b"/")[0]))
    return int(usable) - running


def _cpu_quotas() -> list[float]:
    """The CPUs that control groups' quotas allow this process (cgroup v2's ``cpu.max``, v1's
    ``cpu.cfs_quota_us``), in its own group and at the mount's root (a container's own group
    where the container has no cgroup namespace); none without a quota."""
    folders = [Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/cpu")]
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, group = line.split(":", 2)
            if controllers == "":
                folders.append(Path("/sys/fs/cgroup", group.lstrip("/")))
            elif "cpu" in controllers.split(","):
                folders.append(Path("/sys/fs/cgroup/cpu", group.lstrip("/")))
    quotas = []
    for folder in folders:
        with contextlib.suppress(OSError, ValueError, ZeroDivisionError):
            if (folder / "cpu.max").exists():
                quota, period = (folder / "cpu.max").read_text().split()
            else:
                quota = (folder / "cpu.cfs_quota_us").read_text().strip()
                period = (folder / "cpu.cfs_period_us").read_text().strip()
            if quota not in ("max", "-1"):
                quotas.append(int(quota) / int(period))
    return quotas


def sandbox_cpu() -> float:
    """CPU seconds of this grading process's sandbox so far (its template and workers), 0 where
    its control groups do not count them: for ``stages``."""
    template = template_client.running()
    seconds = template.groups.cpu_seconds() if template is not None else None
    return seconds or 0.0


def _current_cpu() -> int:
    """The CPU the calling thread runs on (``/proc``: Python has no ``sched_getcpu``)."""
    with open("/proc/thread-self/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[36])


def _error(type_name: str, message: str) -> StudentError:
    bases = {"TimeoutError": ("TimeoutError", "OSError", "Exception", "BaseException")}
    info = ErrorInfo(
        type_name, message, "", bases.get(type_name, ("Exception", "BaseException"))
    )
    return StudentError(info)


def _label(op: str, target: HandleRef | None, name: str | None) -> str:
    if target is None:
        return (
            name
            if op in ("call", "new", "build", "checked", "gradients", "default_dtype")
            else op
        )
    if op == "forwards":  # the target is watched; the call is the package's function
        return name
    if op in ("method", "checked", "gradients") and name == "__call__":
        return f"{target.type_name}.forward"
    return f"{target.type_name}.{name}" if name else f"{target.type_name}.{op}"


def _valid_reply(reply, seq: int) -> bool:
    """The shape every reply has; anything else (a forged record among them) ends the worker."""
    return (
        type(reply) is dict
        and reply.get("seq") == seq
        and type(reply.get("v")) is list
        and len(reply["v"]) <= MAX_RECORDS
        and all(_valid_record(v) for v in reply["v"])
        and (("ok" in reply) != ("error" in reply))
        and ("error" not in reply or type(reply["error"]) is ErrorInfo)
    )


def _valid_record(record) -> bool:
    """A forbidden-call record ``[file, line, call]`` naming one of the package's own files."""
    return (
        type(record) is list
        and len(record) == 3
        and [type(x) for x in record] == [str, int, str]
        and record[0].removesuffix(".py") in MODULES
        and record[0].endswith(".py")
        and len(record[2]) <= 200
    )


def _describe_status(status: int | None, serving: bool) -> str:
    """How a worker ended; ``serving``: after its hello, when student code may have chosen
    the status (``os._exit(70)`` is then no confinement failure)."""
    if status is None:
        return "ended"
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if code == worker_exit.UNCONFINED and not serving:
            return "could not be confined (a grader problem, not the submission's)"
        if code == worker_exit.BROKEN:
            return "could not read the next request (its state was broken)"
        if code == worker_exit.HUNG_UP:
            return f"exited with status {code} (its status on a lost connection)"
        return f"exited with status {code}"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = (
            signal.Signals(sig).name
            if sig in signal.Signals._value2member_map_
            else sig
        )
        why = {
            "SIGKILL": " (from outside it: memory ran out on the host, or it was stopped)",
            "SIGXCPU": " (CPU time limit)",
            "SIGSEGV": " (a crash)",
            "SIGXFSZ": " (file size limit)",
        }
        return f"was killed by signal {name}{why.get(name, '')}"
    return f"ended with wait status {status}"


def _read_package(package: Path) -> dict[str, dict]:
    """The package's expected module files and the code staging compiled for them, each as
    bytes in a uint8 tensor (tensor bytes do not count against the message's header limit):
    nothing else is sent to the worker. Code is sent only as staging writes it (at most
    ``intake.MAX_BYTECODE``, checked against its file's bytes): a pyc that came with the
    submission is never run in place of its source."""
    files, compiled = {}, {}
    for name in ("__init__", *MODULES):
        path = package / f"{name}.py"
        if path.is_file() and not path.is_symlink():
            source = path.read_bytes()
            files[path.name] = _bytes_tensor(source)
            pyc = intake.bytecode_file(path)
            if (
                pyc is not None
                and pyc.is_file()
                and not pyc.is_symlink()
                and pyc.stat().st_size <= intake.MAX_BYTECODE
                and (data := pyc.read_bytes()).startswith(
                    intake.bytecode_header(source)
                )
            ):
                compiled[path.name] = _bytes_tensor(data)
    return {"files": files, "bytecode": compiled}


def _bytes_tensor(data: bytes) -> torch.Tensor:
    if not data:  # torch.frombuffer refuses an empty buffer
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _next_uid() -> int:
    """A uid no other worker on this host uses now: this process's pid and a counter."""
    slot = (os.getpid() * 64 + next(_uids) % 64) % confine.UID_SPAN
    return confine.UID_BASE + slot


def _hidden_paths(extra: list[str]) -> list[str]:
    """Secret folders, but never one the worker itself needs (Python, the engine)."""
    paths = [REPO / d for d in SECRET_DIRS] + [Path(p).resolve() for p in extra]
    needed = [Path(p).resolve() for p in (sys.prefix, sys.base_prefix, __file__)]
    return [
        str(p)
        for p in paths
        if p.is_dir() and not any(n == p or p in n.parents for n in needed)
    ]
