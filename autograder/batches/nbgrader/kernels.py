"""The next student's kernel, started while the current student's notebook runs.

A kernel is ready for this notebook a second or two after nbgrader asks for it: the process
starts, then the setup cell imports torch and matplotlib. nbgrader asks when it reaches the
student, after the kernel before has ended, so each student waits for it in turn.
``ExecuteStudentCells`` instead starts the next student's kernel as the current student's cells
begin, with torch and matplotlib imported as it starts (``PRELOAD``, which leaves no name
behind), and hands it to the next student: a kernel of that student's own, moved into their
folder before their first cell runs. The first student's kernel starts the same way as the
grades begin (``GradeModules``), so it is ready when their grade is in.
"""

from __future__ import annotations

import atexit
import tempfile

from jupyter_client.manager import AsyncKernelManager
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
        km = AsyncKernelManager(kernel_name=kernel_name, config=config)
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


#: This process's kernel started ahead.
SPARE = Spare()
