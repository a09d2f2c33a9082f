"""The outer boundary around all student code of a grading process: boundary.

The sandbox's template process (``autograder.sandbox.template``) and every worker it forks live inside
one ``bwrap`` (the sandbox behind Flatpak), so what separates the grading host from student code
is a proven tool, not our own namespace code:

- its own network, PID, IPC and UTS namespaces: no network at all (only a private loopback), no
  other process of the host to see or signal;
- an allow-list view of the filesystem: the system's ``/usr``, Python's installation and the
  engine read-only, the bug zoo covered, private size-capped ``/tmp`` and ``/dev/shm``; nothing
  else of the host (no checkout, no batch, no grades). Submissions' files arrive over the channel;
- a minimal ``/dev``, with the host's GPU device nodes only when the grading runs on a GPU;
- it dies with the grading process, and (as root) keeps only the capabilities the template needs
  to give each worker a fresh uid and private scratch folders (``TEMPLATE_CAPS``); every worker
  drops them all before student code runs; ``no_new_privs`` is always set.

Where bubblewrap cannot run (not installed, no root and no user namespaces, a container whose
seccomp profile forbids namespaces) the template runs on the host and the per-worker layer of
``autograder.sandbox.confine`` is all there is; ``protections()`` says which case applies.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1]
#: The bug zoo's folders, which quote the reference: its catalogue and its runs.
ZOO = ("sources/zoo", "batches/zoo")
#: Where the engine appears inside the boundary (the checkout's path tells student code nothing).
ENGINE_MOUNT = "/opt/autograder-engine"
#: Size caps of the private writable folders (tmpfs: their bytes are memory).
TMP_BYTES = 256 << 20
SHM_BYTES = 64 << 20
#: The template's capabilities (as root): a uid per worker, a cleared bounding set, and a mount
#: and IPC namespace per worker (``confine.private_scratch``). Workers drop them all.
TEMPLATE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_SYS_ADMIN")


@functools.cache
def bwrap_path() -> str | None:
    """``bwrap`` when it is installed and can build a boundary here, else ``None``."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        probe = subprocess.run(
            [path, *arguments(), "--", sys.executable, "-I", "-c", "pass"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if probe.returncode == 0 else None


def command(code: str, gpu: bool = False) -> tuple[list[str], str]:
    """The command line that runs ``python -c code`` in the boundary (or, without bubblewrap,
    on the host), and the folder the engine is imported from there; ``gpu``: its workers grade
    on a GPU."""
    python = [os.path.abspath(sys.executable), "-I", "-c", code]
    bwrap = bwrap_path()
    if bwrap is None:
        return python, str(ENGINE.parent)
    return [bwrap, *arguments(gpu), "--", *python], ENGINE_MOUNT


#: The device nodes through which CUDA reaches an NVIDIA GPU, and ROCm (which torch also calls
#: ``cuda``) an AMD one: its compute node, and the render nodes it needs beside it.
NVIDIA_NODES, ROCM_NODE, ROCM_RENDER = "/dev/nvidia*", "/dev/kfd", "/dev/dri"


def gpu_device_nodes() -> list[str]:
    """The host's GPU device nodes (files and folders of them), none where it has no GPU;
    the render nodes only for ROCm (CUDA needs none of them)."""
    nodes = glob.glob(NVIDIA_NODES)
    if os.path.exists(ROCM_NODE):
        nodes += [ROCM_NODE, *glob.glob(ROCM_RENDER)]
    return sorted(nodes)


def arguments(gpu: bool = False) -> list[str]:
    """bubblewrap's options: namespaces, capabilities and the allow-listed view; ``gpu``: the
    host's GPU device nodes too (bubblewrap's own ``/dev`` has only null, zero, full, random,
    urandom, tty and a private pts)."""
    args = ["--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid"]
    args += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    # The view has no /etc/passwd: a user name where torch asks for one (its cache folders).
    args += ["--setenv", "LOGNAME", "autograder"]
    for node in gpu_device_nodes() if gpu else ():
        args += ["--dev-bind", node, node]
    # A private /tmp and /dev/shm of capped size, writable by all (sticky, as usual).
    for size, folder in ((TMP_BYTES, "/tmp"), (SHM_BYTES, "/dev/shm")):
        args += ["--perms", "1777", "--size", str(size), "--tmpfs", folder]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
        for cap in TEMPLATE_CAPS:
            args += ["--cap-add", cap]
    binds: list[tuple[str, str]] = []
    for path in _system_paths():
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            binds.append((path, path))
    binds += [(path, path) for path in _python_paths()]
    binds.append((str(ENGINE), f"{ENGINE_MOUNT}/autograder"))
    # bubblewrap makes missing parent folders private (0700): make them enterable first.
    parents = {str(p) for _, dest in binds for p in Path(dest).parents if str(p) != "/"}
    for parent in sorted(parents):
        args += ["--perms", "0755", "--dir", parent]
    for source, dest in binds:
        args += ["--ro-bind", source, dest]
    for zoo in ZOO:  # the zoo quotes the reference (no zoo in a Gradescope zip)
        if (ENGINE / zoo).is_dir():
            args += ["--tmpfs", f"{ENGINE_MOUNT}/autograder/{zoo}"]
    args += ["--chdir", "/"]
    return args


def _system_paths() -> list[str]:
    """Shared libraries and the loader's cache: what the interpreter and torch link against."""
    names = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/ld.so.cache")
    return [p for p in names if os.path.lexists(p)]


def _python_paths() -> list[str]:
    """Python's installation, its virtual environment and their site-packages, outermost only.

    Never a folder that holds the engine's checkout (an editable install puts the checkout on
    the import path; the reference and the tests live there).
    """
    import site

    candidates = {
        os.path.realpath(p)
        for p in (sys.base_prefix, sys.prefix, *site.getsitepackages())
        if p and os.path.isdir(p)
    }
    candidates |= {sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    checkout = str(ENGINE.parent)
    return sorted(
        p
        for p in candidates
        if not any(p.startswith(q + os.sep) for q in candidates if q != p)
        and p != "/"
        and not (checkout + os.sep).startswith(p + os.sep)
        and not p.startswith("/usr/")
    )


def protections() -> list[str]:
    """What stands between student code and the grading host in this run, in plain words."""
    from autograder.sandbox import confine

    if bwrap_path() is not None:
        where = [
            (
                "bubblewrap boundary: no network, own PID/IPC namespaces, read-only "
                "allow-list view (Python, the engine), private size-capped /tmp and /dev/shm"
            )
        ]
    else:
        where = [
            (
                "NO bubblewrap boundary (bwrap missing or namespaces forbidden here): student "
                "code shares the host's network and filesystem view"
            )
        ]
    if cgroups_in_force():
        where.append(
            f"cgroup limits on the whole sandbox: {CGROUP_PIDS} tasks, "
            f"{CGROUP_MEMORY >> 30} GiB of memory"
        )
    else:
        where.append("no writable cgroup hierarchy: no cap on the sandbox as a whole")
    return where + confine.worker_protections(bubblewrap=bwrap_path() is not None)


# cgroups: a cap on the whole sandbox of one grading process, where a hierarchy is writable ----

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Tasks (processes and threads) of one grading process's whole sandbox together.
CGROUP_PIDS = 512
#: Memory of one grading process's whole sandbox together (its private tmpfs pages included).
CGROUP_MEMORY = 6 << 30


class ControlGroups:
    """cgroup v1 ``pids``, ``memory`` and ``cpuacct`` groups around the sandbox of one grading
    process; ``cpuacct`` limits nothing and counts its tasks' CPU time (``cpu_seconds``), which
    tells the host's delays from the submission's own (``autograder.sandbox.host_wait``).

    Best effort: where the hierarchies are missing or read-only (no root, cgroup v2 without
    delegated controllers) nothing is limited here, and the per-worker resource limits of
    ``autograder.sandbox.confine`` are what bounds a submission.
    """

    def __init__(self, name: str):
        self.folders: list[Path] = []
        remove_stale_groups()
        self._usage: int | None = None  # cpuacct.usage, kept open: read twice a request
        for controller, setting, value in (
            ("pids", "pids.max", CGROUP_PIDS),
            ("memory", "memory.limit_in_bytes", CGROUP_MEMORY),
            ("cpuacct", "cpuacct.usage", 0),  # counts from nothing
        ):
            folder = CGROUP_ROOT / controller / name
            try:
                folder.mkdir()
                (folder / setting).write_text(str(value))
            except OSError:
                with contextlib.suppress(OSError):
                    folder.rmdir()
                continue
            self.folders.append(folder)
            if controller == "cpuacct":
                with contextlib.suppress(OSError):
                    self._usage = os.open(folder / setting, os.O_RDONLY)

    def cpu_seconds(self) -> float | None:
        """The CPU time of every task that has run in the groups (``None``: not counted)."""
        if self._usage is None:
            return None
        try:
            return int(os.pread(self._usage, 64, 0)) / 1e9
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int | None:
        """Tasks the kernel has killed for the memory group's limit (``None``: no group, or a
        kernel that does not count them): a kill of the sandbox's own doing."""
        for folder in self.folders:
            if folder.parent.name == "memory":
                with contextlib.suppress(OSError, ValueError):
                    for line in (
                        (folder / "memory.oom_control").read_text().splitlines()
                    ):
                        if line.startswith("oom_kill "):
                            return int(line.split()[1])
        return None

    def enter(self) -> None:
        """Move the calling process into the groups (run in the child before it starts)."""
        for folder in self.folders:
            with contextlib.suppress(OSError):
                (folder / "cgroup.procs").write_text("0")

    def remove(self) -> None:
        """Remove the groups once every process in them has ended (the kernel lets the last
        ones go a moment after the sandbox's own process has been reaped)."""
        end = time.monotonic() + 10
        for folder in self.folders:
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > end:
                        break
                    time.sleep(0.05)
        if self._usage is not None:
            os.close(self._usage)
        self.folders, self._usage = [], None


def remove_stale_groups() -> None:
    """Remove the empty groups of grading processes that ended without removing them (killed,
    or ended by ``os._exit`` as a pool's processes are): a grading machine would otherwise
    gather them by the thousand. A group is ``autograder-<pid>-<n>``; one whose process lives
    on (or whose pid a new process took) is left, and one not empty cannot be removed."""
    for controller in ("pids", "memory", "cpuacct"):
        for folder in (CGROUP_ROOT / controller).glob("autograder-*-*"):
            pid = folder.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    folder.rmdir()


def cgroups_in_force() -> bool:
    """Whether ``ControlGroups`` can limit anything on this machine."""
    probe = ControlGroups(f"autograder-probe-{os.getpid()}")
    found = bool(probe.folders)
    probe.remove()
    return found
