"""The sandbox's template process and its workers: the side of the sandbox that runs student code.

Why a template: importing torch costs seconds, a fork costs milliseconds. One template per
grading process (started by ``autograder.sandbox`` inside the bubblewrap boundary of
``autograder.sandbox.bubblewrap``) imports torch and the executor, runs no torch op (a forked OpenMP/MKL
thread pool can hang) and never touches CUDA; it forks one worker per submission (and a fresh one
after a worker died) and reports when a worker ends.

Each worker, still privileged (as root, or without root in a user namespace of its own), first
takes mount and IPC namespaces of its own with fresh, size-capped ``/tmp`` and ``/dev/shm``
(nothing a student leaves there, files or shared memory, outlives the worker or reaches the
next one), makes its folder there and writes the submission's files into it (they arrive over
its socket), then confines itself (``autograder.sandbox.confine``: its own session, output to
``/dev/null``, a clean environment, a fresh uid chosen by the grading side (as root) and no
capabilities, resource limits, a system-call filter, a Landlock domain) before any student code
runs. Root never opens, changes or removes a path a worker could have written; a worker's
processes are killed by a process running as its uid, and whatever escaped its group by the
template.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import sys
import tempfile
from pathlib import Path

import torch

from autograder.facts.points import PACKAGE
from autograder.facts.protocol import ErrorInfo
from autograder.sandbox import confine, hangs, wire
from autograder.sandbox.worker_exit import BROKEN, HUNG_UP, UNCONFINED
from autograder.sources import intake

#: Writable folders a worker without namespaces of its own shares with the others.
SCRATCH = ("/tmp", "/dev/shm")
#: A worker's folder when it has a private ``/tmp`` (the same path every time: feedback that
#: quotes it stays identical from run to run).
PRIVATE_ROOT = Path("/tmp/submission")
#: The largest files message the grading side sends: eight files of at most ``intake.MAX_FILE``
#: and their code, of at most ``intake.MAX_BYTECODE`` each, take up to 12 MiB.
MAX_FILES_MESSAGE = 16 << 20
#: The largest control message from the grading side (a spawn request is a few hundred bytes).
MAX_CONTROL = 1 << 16
_MODULE_FILE = re.compile(r"\w{1,64}\.py")


def template_main(fd: int) -> None:
    """Serve spawn and kill requests until the grading process goes away."""
    # Imported here once, inherited by every worker: what torch.broadcast_shapes needs; the
    # executor; the workers' Limits (in the client); and torch._dynamo, which a torch.optim
    # optimizer's first step imports: close to a second of CPU per worker otherwise, and no
    # thread starts with it.
    import torch._dynamo
    import torch.fx.experimental.symbolic_shapes  # noqa: F401

    import autograder.sandbox.client
    import autograder.sandbox.executor
    import autograder.sandbox.second_device  # noqa: F401
    from autograder.sandbox import tripwire

    sys.dont_write_bytecode = True  # never write next to the submission's files
    tripwire.install()
    confine.set_subreaper()  # orphans of workers come here to be reaped and killed
    ctl = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    workers: dict[int, int | None] = {}  # pid -> its uid (None: the template's own)
    # Workers ended on request, and all their uid's processes with them.
    killed: set[int] = set()
    needed = _needed_folders()  # once: every worker keeps them in its private /tmp
    # Where a kernel layer (the system-call filter, the Landlock domain) can be had, a worker
    # that fails to put it on never runs student code.
    layers = confine.available_kernel_layers()
    # The garbage collector of a forked worker would otherwise visit, and so copy, every object
    # the template holds (torch's): a fifth of a second per worker.
    gc.freeze()
    while True:
        readable, _, _ = select.select([ctl, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(ctl, workers, killed)
        if ctl not in readable:
            continue
        try:
            data, fds, flags, _ = socket.recv_fds(ctl, MAX_CONTROL, 2)
        except OSError:
            data, fds, flags = b"", [], 0
        if not data:
            for pid, uid in workers.items():
                _end(pid, uid)
                _remove_shared_folder(pid)
            _kill_strays({})
            os._exit(0)
        try:
            message = json.loads(data)
            if flags & socket.MSG_TRUNC or (
                "spawn" in message
                and (len(fds) != 2 or type(message["spawn"]) is not dict)
            ):
                raise ValueError("malformed control message")
        except ValueError as exc:
            for extra in fds:
                os.close(extra)
            ctl.send(json.dumps({"refused": str(exc)}).encode())
            continue
        if "kill" in message:
            if message["kill"] in workers:
                _end(message["kill"], workers[message["kill"]])
                killed.add(message["kill"])
            continue
        config = message["spawn"]
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for extra in (ctl.fileno(), wake_r, wake_w):
                os.close(extra)
            try:
                _worker_main(
                    socket.socket(fileno=fds[0]), fds[1], config, needed, layers
                )
            finally:
                os._exit(0)
        for extra in fds:
            os.close(extra)
        workers[pid] = config.get("uid") if os.geteuid() == 0 else None
        # Whether the worker sends itself only its own signals (it serves only with the filter on
        # where the filter can be had).
        ctl.send(json.dumps({"spawned": pid, "filtered": layers[0]}).encode())


def _reap(ctl: socket.socket, workers: dict[int, int | None], killed: set[int]) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in workers:
            uid = workers.pop(pid)
            if pid not in killed:  # it ended by itself: what it started may still run
                _end(pid, uid)
            killed.discard(pid)
            _kill_strays(workers)
            # Only a worker without a private /tmp (its folder is in the shared one) can have
            # left something there.
            if shared_folder(pid).is_dir():
                _clear_scratch(uid)
                _remove_shared_folder(pid)
            with contextlib.suppress(OSError):
                # What the grading side needs to tell a kill from outside from the kernel's
                # for one of the worker's own limits (``client.IsolatedSubmission``).
                cpu, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024
                ctl.send(json.dumps({"ended": [pid, status, cpu, peak]}).encode())


def shared_folder(pid: int) -> Path:
    """A worker's folder where it has no private ``/tmp`` (no root, or no namespaces): the
    template removes it."""
    return Path(tempfile.gettempdir()) / f"autograder-worker-{pid}"


def _remove_shared_folder(pid: int) -> None:
    """Remove a worker's folder in the shared ``/tmp``: the template's own (a worker with a uid
    of its own could not write in it), never through a link."""
    folder = shared_folder(pid)
    with contextlib.suppress(OSError):
        if (
            stat.S_ISDIR(folder.lstat().st_mode)
            and folder.lstat().st_uid == os.geteuid()
        ):
            shutil.rmtree(folder, ignore_errors=True)


def _end(pid: int, uid: int | None) -> None:
    """Kill a worker and everything it started: as its uid when it has one (so processes that
    left its group die too, and the template needs no right to signal other users)."""
    if uid is not None:
        _as_user(uid, lambda: os.kill(-1, signal.SIGKILL))
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def _kill_strays(workers: dict) -> None:
    """Kill what ended workers left behind: every process below the template (as a subreaper it
    inherits their orphans, even those that started a new session) but not below a live
    worker, however deep their chain of parents. Each is stopped first and all are killed at the
    end, so none can fork faster than they die."""
    stopped: set[int] = set()
    while strays := _strays(workers) - stopped:
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= strays
    for pid in stopped:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in stopped:  # the template's own children among them; _reap takes the rest
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _strays(workers: dict) -> set[int]:
    """The processes below this one, not counting the live workers and what is below them."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat_line = Path(f"/proc/{entry.name}/stat").read_text()
                parent = int(stat_line.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, below = set(), [os.getpid()]
    while below:
        for pid in children.get(below.pop(), ()):
            if pid not in workers and pid not in found:
                found.add(pid)
                below.append(pid)
    return found


def _clear_scratch(uid: int | None) -> None:
    """Remove what the worker left in the shared writable folders, as the worker's own uid."""
    if uid is None:
        return

    def clear():
        for folder in SCRATCH:
            with contextlib.suppress(OSError), os.scandir(folder) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_uid != uid:
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            shutil.rmtree(entry.path, ignore_errors=True)
                        else:
                            os.unlink(entry.path)

    _as_user(uid, clear)


def _as_user(uid: int, action) -> None:
    """Run ``action`` in a child process that has become ``uid`` for good."""
    pid = os.fork()
    if pid == 0:
        try:
            confine.become_unprivileged(uid)
            action()
        finally:
            os._exit(0)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


# The worker ------------------------------------------------------------------------------------


def _worker_main(
    sock: socket.socket,
    stacks_fd: int,
    config: dict,
    needed: list[str],
    layers: tuple[bool, ...],
) -> None:
    """Take namespaces and the submission's files, confine this process, then serve requests."""
    from autograder.sandbox.client import Limits

    try:
        limits = Limits(**config["limits"])
        device = torch.device(config["device"])
        # Without root, a user namespace of its own gives the worker the same private scratch
        # and covers (where user namespaces are allowed).
        as_root = os.geteuid() == 0
        namespaced = as_root or confine.own_user_namespace()
        private = namespaced and confine.private_scratch(
            limits.tmp_bytes, limits.shm_bytes, needed
        )
        # Its own CPU, or that of the thread it answers (sandbox._CpuPlan).
        if config.get("cpu") is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, {config["cpu"]})
        root = PRIVATE_ROOT if private else shared_folder(os.getpid())
        _write_files(sock, root)
        confine.detach()
        confine.clean_environment(root)
        torch.set_num_threads(limits.threads)
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(1)
        if device.type == "cuda":
            torch.cuda.init()
        if namespaced and config["hidden"]:
            confine.hide(config["hidden"], root)
        if as_root:
            confine.become_unprivileged(config["uid"])
        elif namespaced:
            confine.drop_capabilities()
        confine.set_limits(limits, cuda=device.type == "cuda")
        for layer, available in zip(confine.KERNEL_LAYERS, layers, strict=True):
            if not layer() and available:
                raise OSError(f"could not put on {layer.__name__}")
        os.chdir(root)
        from autograder.sandbox import tripwire
        from autograder.sandbox.executor import Executor

        tripwire.watch(str(root / PACKAGE))
        executor = Executor(root, arguments_are_copies=True, serving=tripwire.serving)
        # A request still running at hangs.DUMP_AT of its limit gets a SIGALRM, on which
        # faulthandler (in C, needing no GIL) writes the stacks the grading side reads
        # (autograder.hangs). A timer costs a system call per request; faulthandler's own
        # timer a thread.
        faulthandler.register(signal.SIGALRM, os.fdopen(stacks_fd, "w"), chain=False)
        seconds = hangs.DUMP_AT * limits.call_timeout
        # Confined, before any student code (``disarm`` imports it): a worker that ends before
        # saying so is the grader's failure, never the submission's.
        wire.send(sock, {"root": str(root)})
    except BaseException:  # noqa: BLE001 - never run student code half-confined
        os._exit(UNCONFINED)
    hangs.disarm(config["disarmed"], root / PACKAGE, limits.call_timeout)
    _serve(sock, executor, device, tripwire.found, seconds, config["poll"])


def _needed_folders() -> list[str]:
    """What the worker imports from: Python, its packages and the engine."""
    import site

    import autograder

    found = {sys.prefix, sys.base_prefix, *site.getsitepackages()}
    found.add(os.path.dirname(os.path.dirname(autograder.__file__)))
    return sorted({os.path.realpath(p) for p in found} | found)


def _write_files(sock: socket.socket, root: Path) -> None:
    """The first message: the package's files, ``{"files": {file name: bytes}, "bytecode":
    {file name: compiled code}}`` as uint8 tensors (``autograder.sandbox.client._read_package``),
    written by root into a fresh folder (read-only for the student). The code is what staging
    compiled: the student's imports use it instead of compiling again, only while it matches
    its file."""
    message = wire.recv(sock, torch.device("cpu"), limit=MAX_FILES_MESSAGE)
    files, compiled = message["files"], message["bytecode"]
    root.mkdir(mode=0o755)
    package = root / PACKAGE
    package.mkdir(mode=0o755)
    for name, data in files.items():
        if not _MODULE_FILE.fullmatch(name) or not _is_bytes(data):
            raise ValueError(f"not a module file: {name!r}")
        _write_read_only(package / name, data.numpy().tobytes())
    if compiled:
        (package / "__pycache__").mkdir(mode=0o755)
    for name, code in compiled.items():
        if name not in files or not _is_bytes(code):
            raise ValueError(f"not the code of a module file: {name!r}")
        _write_read_only(intake.bytecode_file(package / name), code.numpy().tobytes())


def _is_bytes(value) -> bool:
    return (
        type(value) is torch.Tensor and value.dtype == torch.uint8 and value.dim() == 1
    )


def _write_read_only(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(path, flags, 0o644), "wb") as f:
        f.write(data)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def _serve(sock, executor, device, found: list, seconds: float, poll: float) -> None:
    sent = 0  # the records already sent: each reply carries the new ones
    while True:
        try:
            if poll:
                wire.poll_readable(sock, poll)
            request = wire.recv(sock, device)
            seq = request["seq"]
            signal.setitimer(signal.ITIMER_REAL, seconds)
            outcome = executor.run(
                request["op"],
                request["target"],
                request["name"],
                request["args"],
                request["kwargs"],
            )
            signal.setitimer(signal.ITIMER_REAL, 0)
        except EOFError:
            os._exit(HUNG_UP)
        except BaseException:  # noqa: BLE001 - a broken request ends the worker
            os._exit(BROKEN)
        reply = {"seq": seq, "v": [list(v) for v in found[sent:]]}
        sent = len(found)
        if outcome[0] == "ok":
            reply["ok"] = outcome[1]
        else:
            reply["error"] = outcome[1]
        try:
            wire.send(sock, reply)
        except wire.WireError as exc:
            reply.pop("ok", None)
            reply["error"] = ErrorInfo(
                "TypeError",
                f"the result cannot be sent back for grading: {exc}",
                "",
                ("TypeError", "Exception", "BaseException"),
            )
            wire.send(sock, reply)
