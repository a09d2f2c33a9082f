"""The next student's kernel, started while the current student's notebook runs.

A kernel is ready for this notebook a second or two after nbgrader asks for it: the process
starts, then the setup cell imports torch and matplotlib. nbgrader asks when it reaches the
student, after the kernel before has ended, so each student waits for it in turn.
``ExecuteStudentCells`` instead starts the next student's kernel as the current student's cells
begin, with torch and matplotlib imported as it starts (``PRELOAD``, which leaves no name
behind), and hands it to the next student: a kernel of that student's own, moved into their
folder before their first cell runs. The first student's kernel starts the same way as the
grades begin (``GradeModules``), so it is ready when their grade is in.

Each of those kernels is a fork of a process that imported torch once for them all
(``Forks``): torch's import is most of a kernel's start (2.5 of about 4 CPU-seconds, a grade's
worth), paid per student otherwise, on the cores the grades need.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import tempfile

from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner
from jupyter_core.utils import run_sync

#: Run as the kernel starts: the imports of the notebook's setup cell, names deleted again.
PRELOAD = ("import torch, matplotlib.pyplot", "del torch, matplotlib")


class Spare:
    """At most one kernel started ahead, and what it was started with."""

    def __init__(self):
        self._km: AsyncKernelManager | None = None
        self._how: tuple = ()
        atexit.register(self.discard)

    def start(self, kernel_name: str, arguments: list[str], env: dict, config) -> None:
        """Start a kernel for the next notebook (``arguments``: the kernel's own)."""
        self.discard()
        km = _ForkedKernelManager(kernel_name=kernel_name, config=config)
        preload = [f"--IPKernelApp.exec_lines={line}" for line in PRELOAD]
        run_sync(km.start_kernel)(
            extra_arguments=[*arguments, *preload],
            env=env,
            cwd=tempfile.gettempdir(),  # the student's folder does not exist yet
        )
        self._km, self._how = km, (kernel_name, tuple(arguments), tuple(env.items()))

    @property
    def started(self) -> bool:
        """Whether a kernel is started ahead and not taken yet."""
        return self._km is not None

    def take(
        self,
        kernel_name: str,
        arguments: list[str],
        env: dict,
        cwd: str,
        timeout: float,
    ) -> AsyncKernelManager | None:
        """The kernel started ahead, now in ``cwd``, if it was started the same way and
        answers; else None (and it is shut down)."""
        km, how = self._km, self._how
        self._km = None
        if km is None:
            return None
        if how != (kernel_name, tuple(arguments), tuple(env.items())):
            _shut_down(km)
            return None
        client = km.blocking_client()
        try:
            client.start_channels()
            client.wait_for_ready(timeout=timeout)
            reply = client.execute_interactive(
                f"import os as _os\n_os.chdir({cwd!r})\ndel _os",
                silent=True,
                store_history=False,
                timeout=timeout,
            )
            ready = reply["content"]["status"] == "ok"
        except (RuntimeError, TimeoutError):  # it died, or hangs: a fresh one instead
            ready = False
        finally:
            client.stop_channels()
        if not ready:
            _shut_down(km)
            return None
        return km

    def discard(self) -> None:
        """Shut the kernel started ahead down, if any (none is to come)."""
        if self._km is not None:
            _shut_down(self._km)
            self._km = None


def _shut_down(km: AsyncKernelManager) -> None:
    run_sync(km.shutdown_kernel)(now=True)


class _ForkedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel is forked by ``FORKS`` where it is an IPython kernel of a
    Python there is one for (else launched as usual)."""

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        provisioner = self.provisioner
        forked = None
        if isinstance(provisioner, LocalProvisioner):
            env = kw.get("env") or dict(os.environ)
            forked = FORKS.fork(kernel_cmd, env, kw.get("cwd"))
        if forked is None:
            await super()._async_launch_kernel(kernel_cmd, **kw)
            return
        provisioner.process = forked
        provisioner.pid = provisioner.pgid = forked.pid  # its own session, as launched
        provisioner.cwd = kw.get("cwd")
        self._reconcile_connection_info(provisioner.connection_info)


#: The zygote's program: the costly import once, then a kernel forked per request (a line of
#: JSON: the kernel's arguments, environment and folder), each in a session of its own, which
#: ends as the zygote does (``JPY_PARENT_PID``); the zygote ends when its socket closes.
_ZYGOTE = r"""
import json, os, runpy, signal, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
import torch
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
for line in sock.makefile("rb"):
    ask = json.loads(line)
    pid = os.fork()
    if pid == 0:
        sock.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        os.environ.clear()
        os.environ.update(ask["env"], JPY_PARENT_PID=str(os.getppid()))
        if ask["cwd"]:
            os.chdir(ask["cwd"])
        sys.argv = ask["argv"]
        try:
            runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        finally:
            os._exit(0)
    sock.sendall(json.dumps({"pid": pid}).encode() + b"\n")
"""

#: Seconds to wait for the zygote's answer (its own start included: torch's import).
ZYGOTE_TIMEOUT = 120


class Forks:
    """The zygote that forks this process's kernels, one per Python and environment."""

    def __init__(self):
        self._zygote: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._how: tuple = ()
        atexit.register(self.close)

    def fork(self, argv: list[str], env: dict, cwd) -> _Forked | None:
        """A kernel forked for ``argv`` (``python -m ipykernel_launcher ...``), or None where
        it is another kind of kernel or the zygote fails (the caller launches it as usual)."""
        if argv[1:3] != ["-m", "ipykernel_launcher"] or not hasattr(os, "pidfd_open"):
            return None
        how = (argv[0], tuple(sorted(env.items())))
        try:
            # Without a zygote ``_how`` is empty, so it differs.
            if how != self._how or self._zygote.poll() is not None:
                self._start(argv[0], env, how)
            ask = {"argv": argv, "env": env, "cwd": str(cwd) if cwd else None}
            self._sock.sendall(json.dumps(ask).encode() + b"\n")
            if not select.select([self._sock], [], [], ZYGOTE_TIMEOUT)[0]:
                raise OSError("the kernels' zygote did not answer")
            return _Forked(json.loads(self._sock.recv(4096))["pid"])
        except (OSError, ValueError, KeyError):
            self.close()
            return None

    def _start(self, python: str, env: dict, how: tuple) -> None:
        self.close()
        ours, theirs = socket.socketpair()
        try:
            self._zygote = subprocess.Popen(
                [python, "-c", _ZYGOTE, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._sock, self._how = ours, how

    def close(self) -> None:
        """End the zygote (its kernels end with it, unless shut down before)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._zygote is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zygote.wait(timeout=5)
            self._zygote = None
        self._how = ()


class _Forked:
    """A forked kernel, as a kernel provisioner sees a process it launched (``poll``,
    ``wait``, signals), through a pidfd: it is the zygote's child, not this process's."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid = pid
        self._fd = os.pidfd_open(pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._fd], [], [], 0)[0]:
            self.returncode = 0  # ended; its status is the zygote's to know
            os.close(self._fd)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            select.select([self._fd], [], [], timeout)
        return self.poll()

    def __del__(self):
        if self.returncode is None:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def send_signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


#: This process's kernel started ahead, and the zygote its kernels are forked from.
SPARE = Spare()
FORKS = Forks()
