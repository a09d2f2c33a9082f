"""Student code in a separate, resource-limited process: ``IsolatedSubmission``.

Why a process: student code can exit, hang, fork, flood output or patch torch; none of that may
reach the process that compares results and decides a grade. The grading side sends requests
(``autograder.protocol``) as plain data over a socket (``autograder.wire``) and gets plain data
back.

Why a template ("zygote"): importing torch costs seconds, a fork costs milliseconds. One zygote
per grading process imports torch and the executor, runs no torch op (a forked OpenMP/MKL thread
pool can hang) and never touches CUDA; it forks one worker per submission and reports when a
worker ends. Each worker, before running any student code, sets its torch thread count
(and initializes CUDA when it grades on a GPU) and confines itself (``autograder.confine``:
own session, output to ``/dev/null``, secrets hidden, a fresh unprivileged uid as root,
resource limits); the template has wrapped the forbidden torch functions
(``autograder.tripwire``).

When a worker ends, its process group, every process of its uid and every orphan it left (the
template is a child subreaper, so even a daemon that started its own session comes back to it)
are killed. A request that runs past its wall time, or a worker that dies, becomes a
``StudentError`` for that request; the next request gets a fresh worker (objects of the old one
are gone). A function that timed out (``autograder.hangs``) or ended the worker fails fast
afterwards, and once the submission's total time is spent every request fails fast, so one hang
never blocks a batch.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from autograder import confine, hangs, wire
from autograder.forbidden import Violation
from autograder.protocol import (
    MODULES,
    PACKAGE,
    ErrorInfo,
    HandleRef,
    StudentError,
    Submission,
    map_plain,
)

REPO = Path(__file__).resolve().parent.parent
#: Folders of the repository student code must never read (as root); the bug zoo quotes the
#: reference.
SECRET_DIRS = ("solutions", "tests", ".git", "examples", "autograder/zoo")
_UNCONFINED, _BROKEN = 70, 71  # a worker's own exit statuses
_GEN_SHIFT = 40  # grading-side handle id: worker generation << _GEN_SHIFT | worker's id


@dataclass
class Limits:
    """Per-submission limits: generous multiples of what the reference needs."""

    call_timeout: float = 60.0  # seconds of wall time per request
    submission_timeout: float = (
        480.0  # all requests together; under Gradescope's 10 min
    )
    memory: int = 2 << 30  # bytes of address space beyond what torch itself maps
    processes: int = 64  # processes and threads of the worker's uid
    file_size: int = 64 << 20  # bytes per file the student writes
    open_files: int = 256
    threads: int = 1  # torch intra-op threads
    hidden: list[str] = field(
        default_factory=list
    )  # more paths to hide (inputs, outputs)


#: Defaults for every ``IsolatedSubmission``; ``autograder grade`` adjusts them.
LIMITS = Limits()


class IsolatedSubmission(Submission):
    """``Submission`` whose student code runs in a sandboxed worker process."""

    def __init__(self, root, device="cpu", limits: Limits | None = None):
        super().__init__(root, device)
        self.limits = limits or LIMITS
        self._staging = Path(tempfile.mkdtemp(prefix="autograder-"))
        _stage_copy(self.root / PACKAGE, self._staging / PACKAGE)
        self._sock: socket.socket | None = None
        self._pid = 0
        self._generation = 0
        self._seq = 0
        self._deadline = time.monotonic() + self.limits.submission_timeout
        self._refused: dict[str, tuple[str, str]] = {}  # label -> (error type, message)
        self._hung: list[list] = []  # [file, function, line] that ran out of time
        self._violations: list[tuple[str, int, str]] = []
        self._closed = False

    # Runtime forbidden calls -----------------------------------------------------------------
    def runtime_violations(self) -> list[Violation]:
        """Forbidden calls the worker saw being made from student files."""
        return [Violation(f, line, f"{call} (called at run time)") for f, line, call in
                self._violations]  # fmt: skip

    # The protocol ------------------------------------------------------------------------------
    def _send(self, op, target, name, args, kwargs):
        label = _label(op, target, name)
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
            "target": self._inward(target),
            "name": name,
            "args": self._inward(args),
            "kwargs": self._inward(kwargs),
        }
        self._seq += 1
        if self._sock is None:
            self._start()
        timeout = min(self.limits.call_timeout, remaining)
        try:
            wire.send(self._sock, request)
        except wire.WireError as exc:  # the test's own arguments
            raise TypeError(
                f"the arguments of {label} are not plain data: {exc}"
            ) from None
        except OSError:
            pass  # the worker is gone; _receive says how
        try:
            reply = self._receive(timeout)
        except TimeoutError:
            self._stop()
            if timeout < self.limits.call_timeout:
                message = (
                    f"the submission used up its {self.limits.submission_timeout:g} s of run "
                    f"time during {label}"
                )
            else:
                message = f"{label} took longer than {self.limits.call_timeout:g} s"
                self._hung += hangs.outermost_student_frame(
                    self._staging / hangs.HANG_FILE
                )
                self._refused[label] = (
                    "TimeoutError",
                    f"{label} timed out earlier, so it was not run again",
                )
            raise _error("TimeoutError", message) from None
        except _WorkerEnded as ended:
            self._stop()
            self._refused[label] = (
                "ProcessExit",
                f"{label} ended the submission's process earlier ({ended}), so it was not run again",
            )
            raise _error(
                "ProcessExit", f"the submission's process {ended} during {label}"
            ) from None
        except (wire.WireError, EOFError, OSError) as exc:
            self._stop()
            raise _error(
                "ProcessExit",
                f"the submission's process broke the protocol during {label} ({exc})",
            ) from None
        if reply["v"] != self._violations:
            self._violations = [tuple(v) for v in reply["v"]]
        if "error" in reply:
            raise StudentError(self._scrub(reply["error"]))
        return self._outward(reply["ok"])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._stop()
            shutil.rmtree(self._staging, ignore_errors=True)

    def __del__(self):
        if hasattr(self, "_closed"):
            self.close()

    # The worker --------------------------------------------------------------------------------
    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        config = {
            "root": str(self._staging),
            "device": str(self.device),
            "limits": asdict(self.limits),
            "hidden": _hidden_paths(self.limits.hidden, self._staging),
            "hung": self._hung,
        }
        self._pid = _zygote().spawn(theirs, config)
        theirs.close()
        self._sock = ours
        self._generation += 1

    def _stop(self) -> None:
        """Kill the worker (its leftovers go when the template reaps it)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pid, signal.SIGKILL)
            if _ZYGOTE is not None:
                _ZYGOTE.forget(self._pid)
            self._pid = 0

    def _receive(self, timeout: float):
        """The reply to the last request; ``_WorkerEnded`` when the worker ended first."""
        zygote = _zygote()
        end = time.monotonic() + timeout
        while True:
            status = zygote.status_of(self._pid)
            if status is not None:
                raise _WorkerEnded(_describe_status(status))
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError
            readable, _, _ = select.select([self._sock, zygote.sock], [], [], left)
            if zygote.sock in readable:
                zygote.poll()
            if self._sock in readable:
                self._sock.settimeout(max(end - time.monotonic(), 0.01))
                try:
                    reply = wire.recv(self._sock, self.device)
                except EOFError:
                    raise _WorkerEnded(
                        _describe_status(zygote.wait(self._pid, 5.0))
                    ) from None
                finally:
                    if self._sock is not None:
                        self._sock.settimeout(None)
                if not _valid_reply(reply, self._seq):
                    raise wire.WireError("reply out of sequence")
                return reply

    # Handles and messages ----------------------------------------------------------------------
    def _inward(self, value):
        """Grading-side handle ids to the worker's, refusing handles of an earlier worker."""
        return map_plain(value, self._inward_one)

    def _inward_one(self, value):
        if isinstance(value, HandleRef):
            if value.id >> _GEN_SHIFT != self._generation or self._sock is None:
                raise _error(
                    "ProcessExit",
                    f"this {value.type_name} was lost when the submission's process stopped",
                )
            return HandleRef(value.id & ((1 << _GEN_SHIFT) - 1), value.type_name)
        return value

    def _outward(self, value):
        """The worker's handle ids to grading-side ones, marked with this worker's generation."""
        return map_plain(
            value,
            lambda v: (
                HandleRef(self._generation << _GEN_SHIFT | v.id, v.type_name)
                if isinstance(v, HandleRef)
                else v
            ),
        )

    def _scrub(self, info: ErrorInfo) -> ErrorInfo:
        """Error text without the temporary staging path."""

        def clean(text: str) -> str:
            return text.replace(str(self._staging) + os.sep, "")

        return ErrorInfo(
            info.type_name, clean(info.message), clean(info.traceback), info.bases
        )


class _WorkerEnded(Exception):
    pass


def _error(type_name: str, message: str) -> StudentError:
    bases = {"TimeoutError": ("TimeoutError", "OSError", "Exception", "BaseException")}
    info = ErrorInfo(
        type_name, message, "", bases.get(type_name, ("Exception", "BaseException"))
    )
    return StudentError(info)


def _label(op: str, target: HandleRef | None, name: str | None) -> str:
    if target is None:
        return name if op in ("call", "new") else op
    if op == "method" and name == "__call__":
        return f"{target.type_name}.forward"
    return f"{target.type_name}.{name}" if name else f"{target.type_name}.{op}"


def _valid_reply(reply, seq: int) -> bool:
    return (
        type(reply) is dict
        and reply.get("seq") == seq
        and type(reply.get("v")) is list
        and all(
            type(v) is list and len(v) == 3 and [type(x) for x in v] == [str, int, str]
            for v in reply["v"]
        )
        and (("ok" in reply) != ("error" in reply))
        and ("error" not in reply or type(reply["error"]) is ErrorInfo)
    )


def _describe_status(status: int | None) -> str:
    if status is None:
        return "ended"
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        return {
            _UNCONFINED: "could not be confined (a grader problem, not the submission's)",
            _BROKEN: "could not read the next request (its state was broken)",
        }.get(code, f"exited with status {code}")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = (
            signal.Signals(sig).name
            if sig in signal.Signals._value2member_map_
            else sig
        )
        why = {
            "SIGKILL": " (out of memory, or a limit was reached)",
            "SIGXCPU": " (CPU time limit)",
            "SIGSEGV": " (a crash)",
            "SIGXFSZ": " (file size limit)",
        }
        return f"was killed by signal {name}{why.get(name, '')}"
    return f"ended with wait status {status}"


def _stage_copy(source: Path, target: Path) -> None:
    """A private copy of the package's expected module files (nothing else is needed)."""
    target.mkdir(parents=True)
    for name in ("__init__", *MODULES):
        path = source / f"{name}.py"
        if path.is_file():
            shutil.copyfile(path, target / path.name)


def _hidden_paths(extra: list[str], staging: Path) -> list[str]:
    """Secret folders, but never one the worker itself needs (its copy, Python, the engine)."""
    paths = [REPO / d for d in SECRET_DIRS] + [Path(p).resolve() for p in extra]
    needed = (
        staging,
        *(Path(p).resolve() for p in (sys.prefix, sys.base_prefix, __file__)),
    )
    return [
        str(p)
        for p in paths
        if p.is_dir() and not any(n == p or p in n.parents for n in needed)
    ]


# The zygote, grading side ------------------------------------------------------------------------


class _ZygoteClient:
    """Starts the template process and talks to it over a SEQPACKET socket."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = (
            f"import sys; sys.path.insert(0, {str(REPO)!r}); "
            f"from autograder.sandbox import zygote_main; zygote_main({theirs.fileno()})"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", code],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            cwd="/",
        )
        theirs.close()
        self.sock = ours
        self._ended: dict[int, int] = {}  # pid -> wait status

    def spawn(self, sock: socket.socket, config: dict) -> int:
        socket.send_fds(
            self.sock, [json.dumps({"spawn": config}).encode()], [sock.fileno()]
        )
        while True:
            message = self._read()
            if "spawned" in message:
                return message["spawned"]

    def poll(self) -> None:
        """Take in any waiting notices without blocking."""
        while select.select([self.sock], [], [], 0)[0]:
            self._read()

    def status_of(self, pid: int) -> int | None:
        return self._ended.get(pid)

    def wait(self, pid: int, timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while pid not in self._ended and (left := end - time.monotonic()) > 0:
            if select.select([self.sock], [], [], left)[0]:
                self._read()
        return self._ended.get(pid)

    def forget(self, pid: int) -> None:
        self._ended.pop(pid, None)

    def _read(self) -> dict:
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("the sandbox's template process ended unexpectedly")
        message = json.loads(data)
        if "ended" in message:
            pid, status = message["ended"]
            self._ended[pid] = status
        return message


_ZYGOTE: _ZygoteClient | None = None


def _zygote() -> _ZygoteClient:
    global _ZYGOTE
    if _ZYGOTE is None or _ZYGOTE.process.poll() is not None:
        _ZYGOTE = _ZygoteClient()
    return _ZYGOTE


def start_zygote() -> None:
    """Start the template now (it imports torch in the background while the caller works)."""
    _zygote()


# The zygote, template side -------------------------------------------------------------------------


def zygote_main(fd: int) -> None:
    """Serve spawn requests until the grading process goes away."""
    import torch.fx.experimental.symbolic_shapes  # noqa: F401 - torch.broadcast_shapes needs it

    import autograder.executor  # noqa: F401 - imported here once, inherited by every worker
    from autograder import tripwire

    tripwire.install()
    confine.set_subreaper()  # orphans of workers come here to be reaped and killed
    ctl = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    workers: dict[int, int | None] = {}  # pid -> its uid when it runs as one
    while True:
        readable, _, _ = select.select([ctl, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(ctl, workers)
        if ctl in readable:
            try:
                data, fds, _, _ = socket.recv_fds(ctl, 1 << 20, 1)
            except OSError:
                data, fds = b"", []
            if not data:
                for pid in workers:
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
                for pid, uid in workers.items():
                    _sweep(uid)
                _kill_orphans({})
                os._exit(0)
            config = json.loads(data)["spawn"]
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for extra in (ctl.fileno(), wake_r, wake_w):
                    os.close(extra)
                try:
                    _worker_main(socket.socket(fileno=fds[0]), config)
                finally:
                    os._exit(0)
            for extra in fds:
                os.close(extra)
            workers[pid] = confine.UID_BASE + pid if os.geteuid() == 0 else None
            ctl.send(json.dumps({"spawned": pid}).encode())


def _reap(ctl: socket.socket, workers: dict[int, int | None]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in workers:
            uid = workers.pop(pid)
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            _sweep(uid)
            _kill_orphans(workers)
            with contextlib.suppress(OSError):
                ctl.send(json.dumps({"ended": [pid, status]}).encode())


def _kill_orphans(workers: dict[int, int | None]) -> None:
    """Kill what workers left behind: as a subreaper the template inherits their orphans, even
    those that started a new session (the one cleanup that works without root)."""
    for _ in range(
        10
    ):  # an orphan's own children become ours when it dies: a few rounds
        me, orphans = str(os.getpid()), []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and int(entry.name) not in workers:
                with contextlib.suppress(OSError):
                    stat = Path(f"/proc/{entry.name}/stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[1] == me:
                        orphans.append(int(entry.name))
        if not orphans:
            return
        for pid in orphans:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _sweep(uid: int | None) -> None:
    """Kill every process of a worker's uid, even those that left its process group."""
    if uid is None:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


# The worker ------------------------------------------------------------------------------------------


def _worker_main(sock: socket.socket, config: dict) -> None:
    """Confine this freshly forked process, then serve requests until the socket closes."""
    try:
        limits = Limits(**config["limits"])
        device = torch.device(config["device"])
        root = Path(config["root"])
        confine.detach()
        confine.clean_environment(root)
        torch.set_num_threads(limits.threads)
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(1)
        if device.type == "cuda":
            torch.cuda.init()
        if os.geteuid() == 0:
            confine.hide(config["hidden"], root)
            confine.become_unprivileged(root)
        confine.set_limits(limits, cuda=device.type == "cuda")
        os.chdir(root)
        from autograder import tripwire
        from autograder.executor import Executor

        tripwire.watch(str(root / PACKAGE))
        executor = Executor(root)
        stacks = open(root / hangs.HANG_FILE, "w")  # noqa: SIM115 - lives as long as the worker
        seconds = max(limits.call_timeout - 0.5, 0.8 * limits.call_timeout)
    except BaseException:  # noqa: BLE001 - never run student code half-confined
        os._exit(_UNCONFINED)
    hangs.disarm(config["hung"], root / PACKAGE, limits.call_timeout)
    _serve(sock, executor, device, tripwire.found, stacks, seconds)


def _serve(sock, executor, device, found: list, stacks, seconds: float) -> None:
    while True:
        try:
            request = wire.recv(sock, device)
            seq = request["seq"]
            # No thread left to start (a fork bomb used them up): then no stacks, no harm.
            with contextlib.suppress(RuntimeError):
                faulthandler.dump_traceback_later(seconds, file=stacks)
            outcome = executor.run(
                request["op"], request["target"], request["name"], request["args"],
                request["kwargs"],
            )  # fmt: skip
            faulthandler.cancel_dump_traceback_later()
        except EOFError:
            os._exit(0)
        except BaseException:  # noqa: BLE001 - a broken request ends the worker
            os._exit(_BROKEN)
        reply = {"seq": seq, "v": [list(v) for v in found]}
        if outcome[0] == "ok":
            reply["ok"] = outcome[1]
        else:
            reply["error"] = outcome[1]
        try:
            wire.send(sock, reply)
        except wire.WireError as exc:
            reply.pop("ok", None)
            reply["error"] = ErrorInfo(
                "TypeError", f"the result cannot be sent back for grading: {exc}", "",
                ("TypeError", "Exception", "BaseException"),
            )  # fmt: skip
            wire.send(sock, reply)
