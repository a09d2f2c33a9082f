"""How a sandbox worker confines itself before it runs student code (Linux).

This is the inner layer: it separates the workers of one grading process from each other and
from the template, inside the outer boundary (``autograder.sandbox.bubblewrap``). Each step closes one way
out: its own session (the template can kill the whole group), output to ``/dev/null`` (prints
cannot block or reach the protocol socket), no inherited environment, a fresh unprivileged uid
per worker with an empty capability bounding set and ``no_new_privs`` (as root), resource
limits, a system-call filter (``install_seccomp_filter``) and a Landlock domain of its own
(``enter_landlock_domain``). Without bubblewrap, as root, a private mount namespace also covers
the reference, the tests and the batch.
``worker_protections`` says which of these a run has.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import resource
import signal
import sys
import tempfile
from pathlib import Path

from autograder.sandbox import worker_exit

#: Workers' uids start here; the grading side picks one per worker, unique on the host.
UID_BASE = 200_000
UID_SPAN = 1 << 28

_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP = 1, 24
_PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 36, 38
_CLONE_NEWNS, _CLONE_NEWIPC = 0x00020000, 0x08000000
_CAPABILITY_V3 = 0x20080522
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_MOVE, _MS_REC, _MS_PRIVATE = (
    32,
    0x1000,
    0x2000,
    0x4000,
    1 << 18,
)

#: What the system-call filter refuses, per machine (Linux's numbers, by name so that a test can
#: name them): every use of these calls, and clone or unshare asking for a new user namespace.
#: The ptrace family matters where workers share the grader's uid (not root): none may reach
#: into the template or another worker (``/proc/<pid>/mem``, which a filter cannot see, is
#: ``enter_landlock_domain``'s). execve starts another program, where the watch of forbidden
#: calls does not run (a worker, forked from the template, never needs it). clone3 passes its
#: flags in memory, where a filter cannot read them; it fails as if the kernel lacked it, and
#: the C library then uses clone. A worker keeps the priority, scheduling and CPUs it was given
#: (``SCHEDULING_CALLS``): a lower priority, a CPU given away (``sched_yield``, a no-op refused)
#: or a crowded CPU would lengthen its waits for a CPU, which its time limit credits as the
#: host's (``autograder.sandbox.host_wait``). POSIX timers and message-queue notices may signal
#: it later, and setrlimit could lower its CPU limit to the kernel's SIGKILL: an end by a signal
#: other than its own must come from outside it (``SIGNAL_CALLS``).
REFUSED_CALLS = {
    "x86_64": {
        "setns": 308,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "userfaultfd": 323,
        "bpf": 321,
        "perf_event_open": 298,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "ptrace": 101,
        "execve": 59,
        "execveat": 322,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "pidfd_getfd": 438,
        "kcmp": 312,
        "modify_ldt": 154,
        "setpriority": 141,
        "sched_setparam": 142,
        "sched_setscheduler": 144,
        "sched_setaffinity": 203,
        "sched_setattr": 314,
        "sched_yield": 24,
        "timer_create": 222,
        "mq_notify": 244,
        "setrlimit": 160,
    },
    "aarch64": {
        "setns": 268,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "userfaultfd": 282,
        "bpf": 280,
        "perf_event_open": 241,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "ptrace": 117,
        "execve": 221,
        "execveat": 281,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "pidfd_getfd": 438,
        "kcmp": 272,
        "setpriority": 140,
        "sched_setparam": 118,
        "sched_setscheduler": 119,
        "sched_setaffinity": 122,
        "sched_setattr": 274,
        "sched_yield": 124,
        "timer_create": 107,
        "mq_notify": 184,
        "setrlimit": 164,
    },
}
#: The calls of ``REFUSED_CALLS`` that set a process's priority, scheduling or CPUs, or give
#: its CPU away.
SCHEDULING_CALLS = (
    "setpriority",
    "sched_setparam",
    "sched_setscheduler",
    "sched_setaffinity",
    "sched_setattr",
    "sched_yield",
)
#: Calls the filter lets a worker make on itself only, per machine: (number, the arguments that
#: name the target, each with the value that means "this process"). Another process of the same
#: uid (the template, where workers share the grader's uid) would otherwise take on a worker's
#: limits, and every worker forked after it with them. prlimit64 may only read limits
#: (``_argument_rules``): a CPU limit lowered to its hard limit ends a worker by the kernel's
#: SIGKILL, which would read as a kill from outside.
_IOPRIO_WHO_PROCESS = 1
_SELF = ((0, 0),)  # the pid is argument 0; 0 is the caller
SELF_ONLY_CALLS = {
    "x86_64": {
        "prlimit64": (302, _SELF),
        "ioprio_set": (251, ((0, _IOPRIO_WHO_PROCESS), (1, 0))),
    },
    "aarch64": {
        "prlimit64": (261, _SELF),
        "ioprio_set": (30, ((0, _IOPRIO_WHO_PROCESS), (1, 0))),
    },
}
#: Calls that send a signal, per machine: (number, the argument that holds the signal). A
#: worker may send only the signals of ``worker_exit.OWN_SIGNALS`` (and 0, which sends none),
#: to itself or any other process: an end by another signal then came from outside it, which is
#: what lets the grader retry such an end however often it recurs (``autograder.sandbox.client``).
SIGNAL_CALLS = {
    "x86_64": {
        "kill": (62, 1),
        "tkill": (200, 1),
        "tgkill": (234, 2),
        "rt_sigqueueinfo": (129, 1),
        "rt_tgsigqueueinfo": (297, 2),
        "pidfd_send_signal": (424, 1),
    },
    "aarch64": {
        "kill": (129, 1),
        "tkill": (130, 1),
        "tgkill": (131, 2),
        "rt_sigqueueinfo": (138, 1),
        "rt_tgsigqueueinfo": (240, 2),
        "pidfd_send_signal": (424, 1),
    },
}
#: The other ways a worker could have the kernel send it a signal later, per machine: (number,
#: argument, the values refused). A timer other than the real-time one (whose SIGALRM is among
#: its own signals), and an owner for a file's SIGIO (fcntl's F_SETOWN, F_SETSIG, F_SETOWN_EX;
#: ioctl's FIOSETOWN, SIOCSPGRP). POSIX timers, message-queue notices and setrlimit are refused
#: outright (``REFUSED_CALLS``); a child's exit signal is clone's (``_filter_program``).
LATER_SIGNAL_CALLS = {
    "x86_64": {
        "setitimer": (38, 0, (1, 2)),  # ITIMER_VIRTUAL, ITIMER_PROF
        "fcntl": (72, 1, (8, 10, 15)),
        "ioctl": (16, 1, (0x8901, 0x8902)),
    },
    "aarch64": {
        "setitimer": (103, 0, (1, 2)),
        "fcntl": (25, 1, (8, 10, 15)),
        "ioctl": (29, 1, (0x8901, 0x8902)),
    },
}
#: Per machine: its audit architecture, and the numbers of seccomp, clone, unshare and clone3.
_FILTER_ABI = {
    "x86_64": (0xC000003E, 317, 56, 272, 435),
    "aarch64": (0xC00000B7, 277, 220, 97, 435),
}
_CLONE_NEWUSER = 0x10000000
_CSIGNAL = 0xFF  # clone's flags: the signal the parent gets when the child ends
_X32_BIT = 0x40000000  # x86_64's x32 calls: the same kernel code under other numbers


def _argument_rules(
    machine: str,
) -> dict[int, list[tuple[int, int | None, tuple, bool]]]:
    """Per call number, its checks: (word of seccomp_data, mask or ``None``, values, whether
    the word must be one of them (else none of them)). Arguments are read by their low word
    (C ints and flags); a pointer by both."""
    low, high = (lambda i: 16 + 8 * i), (lambda i: 20 + 8 * i)
    signals = (0, *sorted(worker_exit.OWN_SIGNALS))
    rules: dict[int, list] = {}
    for number, conditions in SELF_ONLY_CALLS[machine].values():
        rules[number] = [(low(i), None, (value,), True) for i, value in conditions]
    prlimit64 = SELF_ONLY_CALLS[machine]["prlimit64"][0]
    rules[prlimit64] += [(low(2), None, (0,), True), (high(2), None, (0,), True)]
    for number, argument in SIGNAL_CALLS[machine].values():
        rules[number] = [(low(argument), None, signals, True)]
    for number, argument, refused in LATER_SIGNAL_CALLS[machine].values():
        rules[number] = [(low(argument), None, refused, False)]
    _, _, clone, unshare, _ = _FILTER_ABI[machine]
    new_user = (low(0), _CLONE_NEWUSER, (0,), True)
    rules[clone] = [new_user, (low(0), _CSIGNAL, (0, signal.SIGCHLD), True)]
    rules[unshare] = [new_user]
    return rules


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _filter_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic-BPF program (code, jump if true, jump if false, constant) of the filter."""
    load = 0x20  # BPF_LD | BPF_W | BPF_ABS: a word of seccomp_data
    mask_with = 0x54  # BPF_ALU | BPF_AND | BPF_K
    jeq, jge = 0x15, 0x35  # BPF_JMP | BPF_K with JEQ, JGE
    ret = 0x06  # BPF_RET | BPF_K
    allow = 0x7FFF0000  # SECCOMP_RET_ALLOW
    # SECCOMP_RET_ERRNO with EPERM, and with ENOSYS (a call this kernel seems to lack)
    refuse, absent = (0x00050000 | e for e in (errno.EPERM, errno.ENOSYS))
    arch, _, _, _, clone3 = _FILTER_ABI[machine]
    # Another ABI (32-bit calls on a 64-bit kernel) gets nothing at all.
    program = [(load, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, refuse)]  # .arch
    program.append((load, 0, 0, 0))  # .nr
    if machine == "x86_64":
        program += [(jge, 0, 1, _X32_BIT), (ret, 0, 0, refuse)]
    for number in REFUSED_CALLS[machine].values():
        program += [(jeq, 0, 1, number), (ret, 0, 0, refuse)]
    program += [(jeq, 0, 1, clone3), (ret, 0, 0, absent)]
    # A call with rules: each check passes on to the next, or refuses; all passed, it is let
    # through. Another call skips the block (the number is loaded again after it).
    for number, checks in _argument_rules(machine).items():
        block = []
        for word, mask, values, allowed in checks:
            block.append((load, 0, 0, word))
            if mask is not None:
                block.append((mask_with, 0, 0, mask))
            last = len(values) - 1
            for i, value in enumerate(values):
                if allowed:  # a match jumps past the other values and the refusal
                    block.append((jeq, last - i + 1, 0, value))
                else:  # a match jumps to the refusal; the last miss jumps past it
                    block.append((jeq, last - i, 1 if i == last else 0, value))
            block.append((ret, 0, 0, refuse))
        block.append((ret, 0, 0, allow))
        program += [(jeq, 0, len(block), number), *block]
    return program + [(ret, 0, 0, allow)]


def install_seccomp_filter() -> bool:
    """Install the worker's system-call filter (seccomp) on all its threads, for good; ``False``
    where this machine or kernel has none. It refuses what a user namespace (capabilities over
    mounts and networking) and a few rarely needed kernel interfaces offer an exploit of the
    kernel, and the ways into another process of the same uid or its limits, priority and
    CPUs; student code needs none of it."""
    machine = platform.machine()
    if machine not in _FILTER_ABI:
        return False
    program = _filter_program(machine)
    instructions = (_SockFilter * len(program))(*program)
    fprog = _SockFprog(len(program), instructions)
    # A filter needs no_new_privs, which a worker keeps anyway (as root it is already set).
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    seccomp = _FILTER_ABI[machine][1]
    set_mode_filter, thread_sync = 1, 1
    return (
        _LIBC.syscall(seccomp, set_mode_filter, thread_sync, ctypes.byref(fprog)) == 0
    )


#: Landlock's calls (one number on every machine) and what ``enter_landlock_domain`` asks of it.
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION, _LANDLOCK_RULE_PATH_BENEATH = 1, 1
_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, _LANDLOCK_SCOPE_SIGNAL = 1, 2
_LANDLOCK_SCOPES_SINCE = 6  # the ABI version that brought scopes
#: Writing a file, and making, removing, linking or renaming anything (Landlock's access bits:
#: WRITE_FILE and REMOVE_DIR to MAKE_SYM in its first version, REFER in its second, TRUNCATE in
#: its third); device nodes apart, as no worker may make them anywhere.
_LANDLOCK_WRITE_FILE, _LANDLOCK_TRUNCATE = 1 << 1, 1 << 14
_LANDLOCK_DEVICE_NODES = 1 << 6 | 1 << 11  # MAKE_CHAR, MAKE_BLOCK
_LANDLOCK_WRITES = {
    1: 1 << 1 | sum(1 << bit for bit in range(4, 13)),
    2: 1 << 13,
    3: _LANDLOCK_TRUNCATE,
}
#: Where a worker may write: its scratch (``tempfile.gettempdir()`` is added: the folder of a
#: worker without a private ``/tmp``), and files such as ``/dev/null`` and a GPU's devices.
SCRATCH_BENEATH = ("/tmp", "/dev/shm")
DEVICES_BENEATH = "/dev"


class _LandlockRulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _LandlockPathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def enter_landlock_domain() -> bool:
    """Give this process a Landlock domain of its own, for good; ``False`` where the kernel has
    no Landlock. Its threads and children then

    - cannot trace or open the memory of any process outside it (``/proc/<pid>/mem`` included,
      which no system-call filter sees), and, where the kernel has scopes (Linux 6.12), cannot
      signal them or reach their abstract Unix sockets;
    - write, make and remove files only in its scratch (``/tmp``, ``/dev/shm``) and write only
      to devices besides: not to ``/proc`` (another process's settings, or the namespace's
      ``pid_max``), nor to anything else its uid owns.

    Workers that share the grader's uid (not root) need it most: without it one could rewrite
    the template that forks the next students' workers, or the grader's own files."""
    version = _landlock_version()
    if version < 1:
        return False
    writes = sum(bits for since, bits in _LANDLOCK_WRITES.items() if version >= since)
    attr = _LandlockRulesetAttr(writes | _LANDLOCK_DEVICE_NODES, 0, 0)
    size = ctypes.sizeof(ctypes.c_uint64)  # what the first version knows of the struct
    if version >= _LANDLOCK_SCOPES_SINCE:
        attr.scoped = _LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | _LANDLOCK_SCOPE_SIGNAL
        size = ctypes.sizeof(attr)
    ruleset = _LIBC.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return False
    device_writes = writes & (_LANDLOCK_WRITE_FILE | _LANDLOCK_TRUNCATE)
    rules = [(path, writes) for path in (*SCRATCH_BENEATH, tempfile.gettempdir())]
    rules.append((DEVICES_BENEATH, device_writes))
    try:
        for path, allowed in rules:
            if not _allow_beneath(ruleset, path, allowed):
                return False
        # Like a filter, a domain needs no_new_privs (a worker keeps it anyway).
        return (
            _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            and _LIBC.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
        )
    finally:
        os.close(ruleset)


def _allow_beneath(ruleset: int, path: str, allowed: int) -> bool:
    """Add a rule: ``allowed`` beneath ``path`` (a path missing here needs none)."""
    try:
        folder = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return True
    try:
        rule = _LandlockPathBeneathAttr(allowed, folder)
        added = _LIBC.syscall(
            _LANDLOCK_ADD_RULE,
            ruleset,
            _LANDLOCK_RULE_PATH_BENEATH,
            ctypes.byref(rule),
            0,
        )
        return added == 0
    finally:
        os.close(folder)


def landlock_scopes() -> bool:
    """Whether this kernel's Landlock also keeps signals and abstract sockets in the domain."""
    return _landlock_version() >= _LANDLOCK_SCOPES_SINCE


def _landlock_version() -> int:
    """The kernel's Landlock ABI version; below 1 where it has none."""
    return _LIBC.syscall(
        _LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION
    )


#: The layers a worker puts on itself last, each a call that returns whether it took hold.
KERNEL_LAYERS = (install_seccomp_filter, enter_landlock_domain)


def available_kernel_layers() -> tuple[bool, ...]:
    """Which of ``KERNEL_LAYERS`` take hold here."""
    return _take_hold_in_child(KERNEL_LAYERS)


def _take_hold_in_child(attempts) -> tuple[bool, ...]:
    """Which of ``attempts`` (calls returning whether they worked) work, tried in order in one
    child process of this one, which they may change for good (a namespace, a filter) without
    touching this process."""
    pid = os.fork()
    if pid == 0:
        took = 0
        try:
            took = sum(1 << i for i, attempt in enumerate(attempts) if attempt())
        finally:
            os._exit(took)
    took = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return tuple(took >= 0 and bool(took & 1 << i) for i in range(len(attempts)))


def worker_protections(bubblewrap: bool) -> list[str]:
    """The inner layer's protections in this run, in plain words."""
    if os.name != "posix":
        return ["student code cannot be isolated on this system"]
    limits = "limits on memory, processes, CPU time, file size and open files"
    filtered, kept = available_kernel_layers()
    if filtered:
        calls = (
            "a system-call filter: no user namespaces, setns, ptrace, io_uring, userfaultfd, "
            "bpf, perf events or kernel keyrings, and no signal but those of its own ends"
        )
    else:
        calls = "NO system-call filter (seccomp unavailable here)"
    if not kept:
        domain = "NO Landlock domain (the kernel lacks Landlock)"
        if os.geteuid() != 0:
            domain += ": a worker can open the memory of processes of your user"
    elif landlock_scopes():
        domain = (
            "a Landlock domain per worker: writes only to its scratch and devices, no access "
            "to the memory of, signals to or abstract sockets of processes outside it"
        )
    else:
        domain = (
            "a Landlock domain per worker: writes only to its scratch and devices, no access "
            "to the memory of processes outside it"
        )
    if os.geteuid() != 0:
        if _take_hold_in_child([_private_namespaces_without_root])[0]:
            scratch = (
                "a user namespace per worker: private /tmp, /dev/shm and IPC, and (without "
                "bubblewrap) the reference, tests and batch covered"
            )
        else:
            scratch = "NO user namespaces: workers share /tmp, /dev/shm and IPC"
        return [
            limits,
            calls,
            domain,
            scratch,
            "not running as root: every worker runs as your own user (no uid of its own)",
        ]
    notes = [
        limits,
        calls,
        domain,
        "a fresh unprivileged uid per worker, no capabilities, no_new_privs",
    ]
    if not bubblewrap:
        if can_unshare_mounts():
            notes.append(
                "the reference, tests and batch covered by a private mount namespace"
            )
        else:
            notes.append(
                "no mount namespaces: the reference, the tests and the batch are closed to "
                "other users (chmod o-rwx)"
            )
    return notes


def private_scratch(tmp_bytes: int, shm_bytes: int, keep: list[str]) -> bool:
    """Own mount and IPC namespaces, with fresh size-capped ``/tmp`` and ``/dev/shm``.

    What a worker leaves there (files, SysV or POSIX shared memory) goes when its last process
    ends, and no other worker ever sees it. Folders in ``keep`` that lay inside them (Python or
    the engine installed under ``/tmp``) are bound back read-only from the covered originals.
    False where namespaces are not allowed.
    """
    if _LIBC.unshare(_CLONE_NEWNS | _CLONE_NEWIPC) != 0:
        return False
    if _LIBC.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    for folder, size in (("/tmp", tmp_bytes), ("/dev/shm", shm_bytes)):
        inside = [k for k in keep if k.startswith(folder + os.sep)]
        covered = os.open(folder, os.O_PATH)  # still reaches the originals once covered
        try:
            options = f"size={size},mode=1777".encode()
            if not _mount(b"tmpfs", folder, b"tmpfs", _MS_NOSUID | _MS_NODEV, options):
                return False
            for path in inside:
                os.makedirs(path, mode=0o755, exist_ok=True)
                original = f"/proc/self/fd/{covered}/{path[len(folder) + 1 :]}"
                flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
                if not (
                    _mount(original.encode(), path, None, _MS_BIND | _MS_REC)
                    and _mount(b"none", path, None, flags)
                ):
                    return False
        finally:
            os.close(covered)
    return True


def set_subreaper() -> None:
    """Orphans of our descendants become our children (so we can find and kill them)."""
    _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def can_unshare_mounts() -> bool:
    return _take_hold_in_child([lambda: _LIBC.unshare(_CLONE_NEWNS) == 0])[0]


def detach() -> None:
    """Own session, parent-death signal, standard streams to ``/dev/null``."""
    os.setsid()
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the worker
    sys.stdin = open(os.devnull)  # noqa: SIM115


def clean_environment(root: Path) -> None:
    """No inherited variables: they would tell student code where the grader lives."""
    keep = {k: v for k, v in os.environ.items() if k.startswith(("CUDA_", "NVIDIA_"))}
    os.environ.clear()
    os.environ.update(keep, PATH="/usr/bin:/bin", HOME=str(root), LANG="C.UTF-8")


def hide(paths: list[str], root: Path) -> None:
    """Cover secret paths with empty mounts, or (without mount rights) close them to others.

    In the private mount namespace, a folder Python itself needs that sits under a folder
    closed to others (a pyenv under ``/root``) is moved onto an open, empty tmpfs that covers
    the closed folder, so the unprivileged worker can import the standard library and nothing
    else from there.
    """
    mounted = _LIBC.unshare(_CLONE_NEWNS) == 0 and (
        _LIBC.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) == 0
    )
    if mounted:
        _expose_python(root)
    # The cover: empty, read-only, closed to everyone, nothing on it runs.
    cover = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for path in paths:
        ok = mounted and _mount(b"tmpfs", path, b"tmpfs", cover, b"size=4k,mode=000")
        if not ok and os.path.isdir(path):
            os.chmod(path, os.stat(path).st_mode & 0o770)


def _expose_python(root: Path) -> None:
    places = (sys.base_prefix, sys.prefix, *sys.path)
    needed = sorted({os.path.realpath(p) for p in places if p and os.path.isdir(p)})
    needed = [p for p in needed if not any(p.startswith(q + os.sep) for q in needed)]
    closed: dict[str, list[str]] = {}
    for path in needed:
        parts = Path(path).parts
        for i in range(2, len(parts) + 1):
            ancestor = os.path.join(*parts[:i])
            if not os.stat(ancestor).st_mode & 0o001:
                closed.setdefault(ancestor, []).append(path)
                break
    for number, (ancestor, paths) in enumerate(closed.items()):
        if any(ancestor.startswith(other + os.sep) for other in closed):
            continue
        asides = []
        for path in paths:
            aside = root / f".python{number}-{len(asides)}"
            aside.mkdir()
            _mount(path.encode(), str(aside), None, _MS_BIND | _MS_REC)
            asides.append((aside, path))
        _mount(
            b"tmpfs", ancestor, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=4k,mode=755"
        )
        for aside, path in asides:
            os.makedirs(path, mode=0o755)
            _mount(str(aside).encode(), path, None, _MS_MOVE)
            aside.rmdir()


def _mount(
    source: bytes, target: str, kind: bytes | None, flags: int, data=None
) -> bool:
    return _LIBC.mount(source, target.encode(), kind, flags, data) == 0


def become_unprivileged(uid: int) -> None:
    """Become ``uid`` for good: no supplementary groups, no capabilities, none to gain."""
    _empty_bounding_set()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # empties the permitted and effective sets
    _clear_capabilities()
    if os.getuid() != uid:
        raise OSError("could not drop privileges")


def own_user_namespace() -> bool:
    """Without root: a user namespace of this process's own that maps only its uid and gid, so
    that it may take private mount and IPC namespaces (``private_scratch``) and cover secret
    paths (``hide``) as a worker of root does. ``False`` where user namespaces are not allowed;
    the capabilities it grants there must go (``drop_capabilities``) before student code runs."""
    uid, gid = os.getuid(), os.getgid()
    if _LIBC.unshare(_CLONE_NEWUSER) != 0:
        return False
    # Half made, the namespace would leave this process as nobody: it must not go on then.
    maps = (
        ("setgroups", "deny"),
        ("uid_map", f"{uid} {uid} 1"),
        ("gid_map", f"{gid} {gid} 1"),
    )
    for name, text in maps:
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return True


def _private_namespaces_without_root() -> bool:
    return own_user_namespace() and _LIBC.unshare(_CLONE_NEWNS | _CLONE_NEWIPC) == 0


def drop_capabilities() -> None:
    """Keep this uid, give up every capability (a user namespace's own) for good."""
    _empty_bounding_set()
    _clear_capabilities()


def _empty_bounding_set() -> None:
    for cap in range(
        64
    ):  # needs CAP_SETPCAP; beyond the last capability it fails, harmless
        _LIBC.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)


def _clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets; no_new_privs."""
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_V3, 0)
    if _LIBC.capset(header, (ctypes.c_uint32 * 6)()) != 0:
        raise OSError("could not clear the capabilities")
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("could not set no_new_privs")


#: Seconds of CPU time between the soft limit (SIGXCPU) and the hard one (SIGKILL).
CPU_GRACE = 5


def set_limits(limits, cuda: bool) -> None:
    """Address space, processes, CPU seconds, file size and open files (see ``Limits``)."""

    def cap(kind: int, value: int, grace: int = 0) -> None:
        _, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard - grace)
        resource.setrlimit(kind, (value, value + grace))

    if not cuda:  # CUDA reserves huge address ranges up front
        cap(resource.RLIMIT_AS, _address_space() + limits.memory)
    processes = limits.processes
    if (
        os.geteuid() != 0
    ):  # the limit counts all our user's tasks, not just the worker's
        processes += _tasks_of_uid(os.getuid())
    cap(resource.RLIMIT_NPROC, processes)
    # A soft limit below the hard one: reaching it is SIGXCPU, the worker's own doing. At equal
    # limits the kernel sends SIGKILL, which reads as a kill from outside.
    cap(resource.RLIMIT_CPU, cpu_seconds_allowed(limits), grace=CPU_GRACE)
    cap(resource.RLIMIT_FSIZE, limits.file_size)
    cap(resource.RLIMIT_NOFILE, limits.open_files)
    cap(resource.RLIMIT_CORE, 0)


def cpu_seconds_allowed(limits) -> int:
    """A worker's soft CPU limit (its hard one is ``CPU_GRACE`` seconds later). The grading
    process computes the same: the template and its workers inherit its limits."""
    value = int(limits.submission_timeout) + 30
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    return value if hard == resource.RLIM_INFINITY else min(value, hard - CPU_GRACE)


def _address_space() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _tasks_of_uid(uid: int) -> int:
    """Processes and threads of ``uid`` now (RLIMIT_NPROC counts them all)."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count
