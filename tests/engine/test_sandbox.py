"""The sandboxed submission directly: plain data back, clear errors, limits that hold."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import importlib.util
import json
import marshal
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autograder.facts.points import PACKAGE
from autograder.facts.protocol import StudentError, expect_student_error
from autograder.sandbox import bubblewrap, confine, hangs, template, template_client
from autograder.sandbox import client as sandbox
from autograder.sandbox.client import IsolatedSubmission, Limits
from autograder.sources import intake
from autograder.sources.runner import SandboxUnavailable

REPO = Path(__file__).resolve().parents[2]


def submission(tmp_path: Path, **appended: str) -> Path:
    """The reference, with code appended to the named modules."""
    root = tmp_path / "sub"
    shutil.copytree(REPO / "solutions" / PACKAGE, root / PACKAGE)
    for module, code in appended.items():
        path = root / PACKAGE / f"{module}.py"
        path.write_text(path.read_text() + "\n\n" + code)
    return root


@pytest.fixture
def quick():
    """Limits small enough for hang tests."""
    return Limits(call_timeout=1.5, submission_timeout=30.0)


def test_results_are_plain_tensors_and_objects_stay_behind_handles(tmp_path):
    with IsolatedSubmission(submission(tmp_path)) as hw:
        x = torch.randn(2, 3, dtype=torch.float64)
        out = hw.call("attention.softmax", x)
        assert type(out) is torch.Tensor and out.dtype == torch.float64
        assert torch.allclose(out, torch.softmax(x, -1), rtol=1e-12, atol=1e-12)
        cache = hw.new("gqa.KVCache", 1, 2, 4, 2, dtype=torch.float64)
        assert cache.attr("length") == 0
        ones = torch.ones(1, 2, 3, 2, dtype=torch.float64)
        k_all, _ = cache.call("append", ones, ones)
        assert k_all.shape == (1, 2, 3, 2) and cache.attr("length") == 3
        with expect_student_error(ValueError):
            cache.call("append", ones.float(), ones.float())
        layer = hw.new("norm.LayerNorm", 4)
        assert set(layer.state_dict()) == {"weight", "bias"}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to plan")
@pytest.mark.parametrize("idle", [0, 1], ids=["busy-host", "a-cpu-to-spare"])
def test_the_worker_shares_the_threads_cpu_unless_one_is_idle(
    tmp_path, monkeypatch, idle
):
    """On a busy host the worker takes turns with the thread it answers on one CPU; with a CPU
    to spare, each has its own and they poll for each other (the answers as before)."""
    monkeypatch.setattr(sandbox, "_idle_cpus", lambda allowed: idle)
    code = "import os\n\n\ndef cpus():\n    return sorted(os.sched_getaffinity(0))\n"
    allowed = os.sched_getaffinity(0)
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        worker = hw.call("masks.cpus")
        ours = os.sched_getaffinity(0)
        assert len(worker) == 1 and len(ours) == 1
        assert (set(worker) == ours) != bool(idle)
        for n in range(1, 30):  # True above the diagonal: the future
            expected = torch.ones(n, n, dtype=torch.bool).triu(1)
            assert torch.equal(hw.call("masks.causal_mask", n), expected)
    # every CPU back once the submission is done
    assert os.sched_getaffinity(0) == allowed


def test_cpu_quotas_limit_the_cpus_counted_as_idle(monkeypatch):
    monkeypatch.setattr(sandbox, "_cpu_quotas", lambda: [0.5])
    assert sandbox._idle_cpus(64) < 1


def test_errors_carry_student_frames_without_temporary_paths(tmp_path):
    hw = IsolatedSubmission(submission(tmp_path))
    with hw, pytest.raises(StudentError) as caught:
        hw.call("attention.softmax", torch.full((2, 2), float("-inf")))
    info = caught.value.info
    assert caught.value.is_a(ValueError)
    assert 'File "transformer_hw/attention.py"' in info.traceback
    assert "/tmp" not in info.traceback and "autograder" not in info.traceback


def test_the_worker_runs_the_code_staging_compiled(tmp_path):
    """The worker imports the code staging compiled (``intake.bytecode_file``), not the source
    again, Windows line ends included; its frames still name the student's file. Shown by
    replacing the staged code (its header, which names the source, kept) with another."""
    code = "def f():\r\n    return 1\r\n\r\n\r\ndef g():\r\n    raise ValueError\r\n"
    staged = intake.stage("sub", submission(tmp_path, masks=code), tmp_path / "staged")
    pyc = intake.bytecode_file(staged.root / PACKAGE / "masks.py")
    source = (staged.root / PACKAGE / "masks.py").read_text()
    other = compile(source.replace("return 1", "return 2"), "masks.py", "exec")
    pyc.write_bytes(pyc.read_bytes()[:16] + marshal.dumps(other))
    with IsolatedSubmission(staged.root) as hw:
        assert hw.call("masks.f") == 2
        with pytest.raises(StudentError) as caught:
            hw.call("masks.g")
    assert 'File "transformer_hw/masks.py"' in caught.value.info.traceback


def test_code_that_came_with_the_submission_never_runs_in_place_of_its_source(tmp_path):
    """A pyc beside a module file of the submission (here an unchecked one, which Python
    would use without reading the file) is not sent: the worker runs the source."""
    root = submission(tmp_path, masks="def f():\n    return 1\n")
    pyc = intake.bytecode_file(root / PACKAGE / "masks.py")
    pyc.parent.mkdir(exist_ok=True)
    source = (root / PACKAGE / "masks.py").read_text().replace("return 1", "return 2")
    unchecked = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + bytes(8)
    pyc.write_bytes(unchecked + marshal.dumps(compile(source, "masks.py", "exec")))
    with IsolatedSubmission(root) as hw:
        assert hw.call("masks.f") == 1


def test_files_as_large_as_intake_takes_reach_the_worker(tmp_path):
    """Every module file just under ``intake.MAX_FILE``: megabytes in all, beyond the limit of
    a message's header (the files travel as bytes, not text)."""
    root = submission(tmp_path)
    for path in (root / PACKAGE).glob("*.py"):
        data = path.read_bytes()
        path.write_bytes(data + b"#" * (intake.MAX_FILE - len(data) - 2) + b"\n")
    staged = intake.stage("large", root, tmp_path / "staged")
    assert staged.problems == []
    with IsolatedSubmission(staged.root) as hw:
        assert hw.call("masks.causal_mask", 2).tolist() == [
            [False, True],
            [False, False],
        ]


def test_a_module_that_fails_on_import_shows_its_own_frames_only(tmp_path):
    """Not Python's import system, whose frames name the grading host's installation."""
    hw = IsolatedSubmission(submission(tmp_path, masks="undefined_name"))
    with hw, pytest.raises(StudentError) as caught:
        hw.call("masks.causal_mask", 2)
    info = caught.value.info
    assert caught.value.is_a(NameError)
    assert info.traceback.startswith('  File "transformer_hw/masks.py"'), info.traceback
    assert "importlib" not in info.traceback


def test_a_crash_is_reported_and_the_next_call_gets_a_fresh_worker(tmp_path):
    code = "import os\n\n\ndef crash():\n    os._exit(3)\n"
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        cache = hw.new("gqa.KVCache", 1, 1, 2, 2)
        with pytest.raises(
            StudentError, match="exited with status 3 during masks.crash"
        ):
            hw.call("masks.crash")
        with pytest.raises(
            StudentError, match="ended the submission's process earlier"
        ):
            hw.call("masks.crash")
        with pytest.raises(StudentError, match="KVCache was lost"):
            cache.attr("length")
        assert hw.call("masks.causal_mask", 2).shape == (2, 2)


def test_each_hang_fails_alone_until_the_function_is_disarmed(tmp_path, quick):
    code = "import time\n\n\ndef softmax(x, dim=-1):\n    while True:\n        time.sleep(1)\n"
    q = torch.randn(1, 2, 4)
    with IsolatedSubmission(submission(tmp_path, attention=code), limits=quick) as hw:
        for _ in range(hangs.DISARM_AFTER):
            with pytest.raises(
                StudentError, match="attention.softmax took longer than 1.5 s"
            ):
                hw.call("attention.softmax", q)
            assert hw.call("masks.causal_mask", 2).shape == (2, 2)
        with pytest.raises(
            StudentError, match="softmax in attention.py ran longer than 1.5 s"
        ):
            hw.call("attention.scaled_dot_product_attention", q, q, q)


def test_the_stacks_of_a_request_that_finished_are_not_taken_for_a_later_hang(
    tmp_path, quick, monkeypatch
):
    """A request still running at ``hangs.DUMP_AT`` of its limit has its stacks written, then
    finishes; a later hang whose stacks hold no student frame (a C call) is charged to no one,
    not to the function of those older stacks."""
    monkeypatch.setattr(hangs, "DISARM_AFTER", 1)
    code = (
        "import signal\nimport time\n\nnap = time.sleep\n\n\ndef slow():\n"
        "    while signal.getitimer(signal.ITIMER_REAL)[0] > 0:  # until the stacks are written\n"
        "        time.sleep(0.01)\n    return 1\n"
    )
    with IsolatedSubmission(submission(tmp_path, masks=code), limits=quick) as hw:
        assert hw.call("masks.slow") == 1
        with pytest.raises(StudentError, match="masks.nap took longer than 1.5 s"):
            hw.call("masks.nap", 60)
        assert hw.call("masks.slow") == 1  # not disarmed


def test_a_hang_on_one_input_costs_only_that_input(tmp_path, quick):
    code = (
        "_reference_softmax = softmax\n\n\n"
        "def softmax(x, dim=-1):\n"
        "    while bool(torch.isinf(x).all()):\n"
        "        pass\n"
        "    return _reference_softmax(x, dim)\n"
    )
    q = torch.randn(1, 2, 4)
    with IsolatedSubmission(submission(tmp_path, attention=code), limits=quick) as hw:
        with pytest.raises(StudentError, match="took longer than 1.5 s"):
            hw.call("attention.softmax", torch.full((2,), float("-inf")))
        out = hw.call("attention.scaled_dot_product_attention", q, q, q)
        assert out[0].shape == (1, 2, 4)


def test_the_total_time_of_a_submission_is_bounded(tmp_path, quick):
    code = "import time\n\n\ndef nap(s):\n    time.sleep(s)\n"
    limits = dataclasses.replace(quick, call_timeout=2.0, submission_timeout=1.0)
    with IsolatedSubmission(submission(tmp_path, masks=code), limits=limits) as hw:
        with pytest.raises(StudentError, match="used up its 1 s of run time"):
            hw.call("masks.nap", 5)
        with pytest.raises(StudentError, match="used up its 1 s"):
            hw.call("masks.causal_mask", 2)


def test_a_forbidden_call_made_at_run_time_fails_where_it_is_made_and_is_reported(
    tmp_path,
):
    code = (
        "def softmax(x, dim=-1):\n    return getattr(torch, 'soft' + 'max')(x, dim)\n"
    )
    with IsolatedSubmission(submission(tmp_path, attention=code)) as hw:
        assert hw.runtime_violations() == []
        with pytest.raises(StudentError, match=r"forbidden here \(attention.py:\d+"):
            hw.call("attention.softmax", torch.randn(2, 2))
        (found,) = hw.runtime_violations()
    assert found.file == "attention.py" and found.part == 1
    assert "aten::softmax (called at run time)" in found.describe()


def test_prints_do_not_disturb_the_protocol(tmp_path):
    code = "import os\n\n\ndef loud():\n    print('x' * 10**6)\n    os.write(1, b'\\0' * 10**6)\n    return 7\n"
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        assert hw.call("masks.loud") == 7


PROBE = """
def probe(secret, port):
    import os
    import socket

    found = {"uid": os.getuid(), "capabilities": "", "read": False, "network": False}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")):
                found["capabilities"] += line.split()[1]
    try:
        with open(secret) as f:
            found["read"] = bool(f.read())
    except OSError:
        pass
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        found["network"] = True
    except OSError:
        pass
    return found
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a uid of its own needs the grader as root"
)
def test_student_code_is_an_unprivileged_uid_without_capabilities_or_network(tmp_path):
    """A root-only file inside the sandbox's view (Python's own folder) stays unreadable."""
    secret = Path(sys.prefix) / f"autograder-canary-{os.getpid()}"
    secret.write_text("root only\n")
    os.chmod(secret, 0o600)
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        with IsolatedSubmission(submission(tmp_path, masks=PROBE)) as hw:
            found = hw.call("masks.probe", str(secret), listener.getsockname()[1])
    finally:
        secret.unlink()
        listener.close()
    assert found["uid"] >= confine.UID_BASE
    assert set(found["capabilities"]) == {"0"}
    assert found["read"] is False
    if bubblewrap.bwrap_path():
        assert found["network"] is False  # its own network namespace


SYSTEM_CALLS = """
import ctypes
import os
import sys
import threading


def try_calls(numbers):
    libc = ctypes.CDLL(None, use_errno=True)

    def error(result):
        return ctypes.get_errno() if result == -1 else 0

    # Arguments no call accepts (ptrace(0) would be PTRACE_TRACEME, were it let through).
    found = {name: error(libc.syscall(n, -1, -1, 0, 0)) for name, n in numbers.items()}
    found["unshare(CLONE_NEWUSER)"] = error(libc.unshare(0x10000000))
    found["clone3"] = error(libc.syscall(435, 0, 0))
    thread = threading.Thread(target=lambda: None)
    thread.start()  # the C library falls back from clone3 to clone
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    pid = os.fork()
    if pid == 0:  # another program would run outside the watch of forbidden calls
        try:
            os.execv(sys.executable, [sys.executable, "-c", "pass"])
        except OSError as exc:
            os._exit(exc.errno)
    found["another program"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return found
"""


@pytest.mark.skipif(
    platform.machine() not in confine.REFUSED_CALLS,
    reason="no system-call filter for this machine",
)
def test_student_code_cannot_reach_user_namespaces_or_rare_kernel_interfaces(tmp_path):
    """Each of them is a way into the kernel's less trodden code (a user namespace grants its
    creator capabilities over mounts and networking there), into another process of the same
    uid, or (execve) into another program, which no watch of forbidden calls sees; threads and
    processes still work."""
    numbers = confine.REFUSED_CALLS[platform.machine()]
    with IsolatedSubmission(submission(tmp_path, masks=SYSTEM_CALLS)) as hw:
        found = hw.call("masks.try_calls", numbers)
    refused = {name: errno.EPERM for name in [*numbers, "unshare(CLONE_NEWUSER)"]}
    assert found == {
        **refused,
        "clone3": errno.ENOSYS,
        "fork": 7,
        "another program": errno.EPERM,
    }


#: What the probes below share, in the student's file: a child that waits to be signalled, and
#: the errno a call meets (0: done; ``resource.setrlimit`` says EPERM with a ValueError).
PROBE_HELPERS = """
import ctypes
import errno
import os
import signal


def paused_child():
    child = os.fork()
    if child == 0:
        try:
            signal.pause()
        finally:
            os._exit(0)
    return child


def errno_of(call):
    try:
        result = call()
    except OSError as exc:
        return exc.errno
    except ValueError:
        return errno.EPERM
    return ctypes.get_errno() if result == -1 else 0
"""


SELF_ONLY = (
    PROBE_HELPERS
    + """
import resource


def try_on_child_and_self(numbers):
    \"\"\"Each call on a child of this process, then on this process: the errno (0: done).\"\"\"
    libc = ctypes.CDLL(None, use_errno=True)
    child = paused_child()
    attr = (ctypes.c_uint32 * 12)(48)  # struct sched_attr: size 48, SCHED_OTHER, nice 0
    io_best_effort = (2 << 13) | 4
    calls = {
        "prlimit64": lambda pid: resource.prlimit(pid, resource.RLIMIT_NOFILE),
        "setpriority": lambda pid: os.setpriority(os.PRIO_PROCESS, pid, 0),
        "sched_setparam": lambda pid: os.sched_setparam(pid, os.sched_param(0)),
        "sched_setscheduler": lambda pid: os.sched_setscheduler(
            pid, os.SCHED_OTHER, os.sched_param(0)
        ),
        "sched_setaffinity": lambda pid: os.sched_setaffinity(pid, os.sched_getaffinity(0)),
        "sched_setattr": lambda pid: libc.syscall(numbers["sched_setattr"], pid, attr, 0),
        "ioprio_set": lambda pid: libc.syscall(numbers["ioprio_set"], 1, pid, io_best_effort),
        "sched_yield": lambda pid: libc.syscall(numbers["sched_yield"]),
    }
    found = {
        name: [errno_of(lambda: call(child)), errno_of(lambda: call(0))]
        for name, call in calls.items()
    }
    found["setpriority(PRIO_USER)"] = errno_of(lambda: os.setpriority(os.PRIO_USER, 0, 0))
    found["ioprio_set(IOPRIO_WHO_USER)"] = errno_of(
        lambda: libc.syscall(numbers["ioprio_set"], 3, 0, io_best_effort)
    )
    os.kill(child, signal.SIGABRT)  # SIGKILL is not among the signals a worker may send
    os.waitpid(child, 0)
    return found
"""
)


@pytest.mark.skipif(
    platform.machine() not in confine.SELF_ONLY_CALLS,
    reason="no system-call filter for this machine",
)
def test_student_code_changes_the_limits_of_itself_only_and_no_priority_or_cpus(
    tmp_path,
):
    """Where workers share the grader's uid, one could otherwise give the template a CPU limit
    of a second, and every later worker with it. Its priority and CPUs it keeps: a lower
    priority or a crowded CPU would lengthen the waits its time limit credits to the host."""
    machine = platform.machine()
    numbers = {
        name: number for name, (number, _) in confine.SELF_ONLY_CALLS[machine].items()
    }
    numbers |= {
        name: confine.REFUSED_CALLS[machine][name] for name in confine.SCHEDULING_CALLS
    }
    with IsolatedSubmission(submission(tmp_path, masks=SELF_ONLY)) as hw:
        found = hw.call("masks.try_on_child_and_self", numbers)
    child_then_self = {
        name: [errno.EPERM, errno.EPERM if name in confine.SCHEDULING_CALLS else 0]
        for name in numbers
    }
    assert found == {
        **child_then_self,
        "setpriority(PRIO_USER)": errno.EPERM,
        "ioprio_set(IOPRIO_WHO_USER)": errno.EPERM,
    }


SIGNALS = (
    PROBE_HELPERS
    + """
import fcntl
import resource
import socket
import threading


def try_signals(clone):
    \"\"\"Each way to have a signal sent: the errno it met (0: done).\"\"\"
    libc = ctypes.CDLL(None, use_errno=True)
    child = paused_child()
    read_end, _ = os.pipe()
    sock = socket.socket()
    found = {
        "SIGKILL to itself": errno_of(lambda: os.kill(os.getpid(), signal.SIGKILL)),
        "SIGTERM to its group": errno_of(lambda: os.kill(0, signal.SIGTERM)),
        "SIGKILL to its child": errno_of(lambda: os.kill(child, signal.SIGKILL)),
        "SIGUSR1 to a thread": errno_of(
            lambda: signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        ),
        "SIGKILL by pidfd": errno_of(
            lambda: signal.pidfd_send_signal(os.pidfd_open(child), signal.SIGKILL)
        ),
        "signal 0": errno_of(lambda: os.kill(os.getpid(), 0)),
        "ITIMER_VIRTUAL": errno_of(lambda: signal.setitimer(signal.ITIMER_VIRTUAL, 100)),
        "ITIMER_PROF": errno_of(lambda: signal.setitimer(signal.ITIMER_PROF, 100)),
        "ITIMER_REAL": errno_of(lambda: signal.setitimer(signal.ITIMER_REAL, 0)),
        "F_SETOWN": errno_of(lambda: fcntl.fcntl(read_end, fcntl.F_SETOWN, os.getpid())),
        "F_SETSIG": errno_of(lambda: fcntl.fcntl(read_end, 10, signal.SIGKILL)),
        "FIOSETOWN": errno_of(
            lambda: fcntl.ioctl(sock, 0x8901, ctypes.c_int(os.getpid()))
        ),
        "a lower CPU limit": errno_of(
            lambda: resource.setrlimit(resource.RLIMIT_CPU, (1, 1))
        ),
        "a child that signals SIGKILL at its end": errno_of(
            lambda: libc.syscall(clone, signal.SIGKILL, 0, 0, 0, 0) or os._exit(0)
        ),
        "SIGABRT to its child": errno_of(lambda: os.kill(child, signal.SIGABRT)),
    }
    os.waitpid(child, 0)
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    found["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return found
"""
)


@pytest.mark.skipif(
    platform.machine() not in confine.SIGNAL_CALLS,
    reason="no system-call filter for this machine",
)
def test_student_code_can_send_no_signal_that_reads_as_a_kill_from_outside(tmp_path):
    """A worker may send only the signals of its own ends (a crash, its limits, its timer),
    and may not have the kernel send it another later: an end by any other signal is then the
    host's (``autograder.sandbox.retries``), however often it comes."""
    clone = confine._FILTER_ABI[platform.machine()][2]
    with IsolatedSubmission(submission(tmp_path, masks=SIGNALS)) as hw:
        found = hw.call("masks.try_signals", clone)
    allowed = {"signal 0", "ITIMER_REAL", "SIGABRT to its child"}
    assert found == {
        **{way: 0 if way in allowed else errno.EPERM for way in found},
        "fork": 7,
    }
    assert len(found) == 16


def test_the_template_kills_what_an_ended_worker_left_however_deep():
    """A worker leaves a chain of 40 processes, each the parent of the next in a session of
    its own; once the worker has ended, the template (their subreaper) kills all of them."""
    ready_r, ready_w = os.pipe()
    result_r, result_w = os.pipe()
    stand_in = os.fork()
    if stand_in == 0:  # the template's part
        found = "did not finish"
        try:
            confine.set_subreaper()
            worker = os.fork()
            if worker == 0:
                # A link left behind must not hold the test's pipes open.
                for end in (result_r, result_w, ready_r):
                    os.close(end)
                for depth in range(40):
                    if os.fork():  # each link stays, parent of the next
                        break
                    os.setsid()
                else:
                    os.write(ready_w, b"x")  # the 40th link
                    depth = 40
                if depth == 0:
                    os._exit(0)  # the worker ends
                signal.pause()
            os.waitpid(worker, 0)
            os.read(ready_r, 1)
            left = len(template._strays({}))
            template._kill_strays({})
            deadline = time.monotonic() + 60
            while template._strays({}) and time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(-1, os.WNOHANG)
                time.sleep(0.01)
            found = f"{left} left, {len(template._strays({}))} after"
        finally:
            os.write(result_w, found.encode())
            for _ in range(50):  # whatever a failure left, one generation a round
                for pid in template._strays({}):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                time.sleep(0.01)
            os._exit(0)
    os.close(result_w)
    with os.fdopen(result_r) as f:
        found = f.read()
    os.waitpid(stand_in, 0)
    assert found == "40 left, 0 after"


def test_a_new_worker_is_not_taken_for_an_earlier_one_with_the_same_pid():
    """The template reports an ended worker, then a new one that got its pid (reused): the new
    one has not ended."""
    ours, template_side = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client = template_client.TemplateClient.__new__(template_client.TemplateClient)
    client.sock, client.dead, client._ended, client._usage = ours, False, {}, {}
    with ours, template_side:
        template_side.send(json.dumps({"ended": [300, 9, 0.5, 1 << 20]}).encode())
        template_side.send(json.dumps({"spawned": 300}).encode())
        assert client.spawn([], {}) == 300
        assert client.status_of(300) is None and client.usage_of(300) is None


LANDLOCK = pytest.mark.skipif(
    not confine.available_kernel_layers()[1], reason="no Landlock in this kernel"
)


WRITES = """
import os


def try_writes():
    \"\"\"The errno of writing each file (0: written).\"\"\"
    found = {}
    targets = {
        "/proc/self/comm": "mask",  # its own: still a setting of the kernel's
        "/proc/sys/kernel/pid_max": "4194304",
        "/tmp/scratch": "x",
        "/dev/shm/scratch": "x",
        "/dev/null": "x",
    }
    for path, text in targets.items():
        try:
            with open(path, "w") as f:
                f.write(text)
            found[path] = 0
        except OSError as exc:
            found[path] = exc.errno
    os.mkfifo("/tmp/fifo")
    os.rename("/tmp/scratch", "/tmp/moved")
    return found
"""


@LANDLOCK
def test_student_code_writes_only_its_scratch_and_devices(tmp_path):
    """Not /proc: neither its own settings nor, where workers share the grader's uid, the
    namespace's pid_max or the template's (the next workers')."""
    with IsolatedSubmission(submission(tmp_path, masks=WRITES)) as hw:
        found = hw.call("masks.try_writes")
    assert found == {
        "/proc/self/comm": errno.EACCES,
        "/proc/sys/kernel/pid_max": errno.EACCES,
        "/tmp/scratch": 0,
        "/dev/shm/scratch": 0,
        "/dev/null": 0,
    }


OTHER_PROCESSES = """
import os
import signal


def reach_others():
    \"\"\"For each other process in sight: how opening its memory and signalling it end.\"\"\"
    child = os.fork()
    if child == 0:
        try:
            signal.pause()  # until killed below
        finally:
            os._exit(0)
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        pid = int(name)
        outcome = []
        try:
            with open(f"/proc/{pid}/mem", "rb", buffering=0):
                outcome.append("memory")
        except OSError as exc:
            outcome.append(exc.errno)
        try:
            os.kill(pid, 0)
            outcome.append("signal")
        except OSError as exc:
            outcome.append(exc.errno)
        if pid == child:
            found["own child"] = outcome
        else:
            found.setdefault("others", {})[name] = outcome
    os.kill(child, signal.SIGABRT)  # a worker may not send SIGKILL
    os.waitpid(child, 0)
    return found
"""


def test_student_code_cannot_open_or_signal_processes_outside_its_worker(tmp_path):
    """Whatever the uids: the template, bubblewrap's first process and the grader stay out of
    reach; the worker's own children can still be signalled (as root the worker changed uid, so
    nobody without privileges, itself included, may open their memory)."""
    with IsolatedSubmission(submission(tmp_path, masks=OTHER_PROCESSES)) as hw:
        found = hw.call("masks.reach_others")
    assert found["own child"][1] == "signal"
    refused = [errno.EACCES, errno.EPERM]  # memory, signal
    assert found["others"]  # the template at least
    assert all(outcome == refused for outcome in found["others"].values()), found


@LANDLOCK
def test_a_landlock_domain_keeps_even_root_from_other_processes():
    """The layer on its own: as root (who may trace and signal anyone), a process in its domain
    can open the memory of its own children only; signals too, where the kernel scopes them."""
    outside = os.fork()
    if outside == 0:
        time.sleep(60)
        os._exit(0)

    def reach():
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        found = {}
        for name, target in (("outside", outside), ("own child", child)):
            found[name] = [
                _errno_of(
                    lambda t=target: os.close(os.open(f"/proc/{t}/mem", os.O_RDONLY))
                ),
                _errno_of(lambda t=target: os.kill(t, 0)),
            ]
        os.kill(child, signal.SIGKILL)
        return found

    try:
        found = _in_a_domain(reach)
    finally:
        os.kill(outside, signal.SIGKILL)
        os.waitpid(outside, 0)
    signal_outside = errno.EPERM if confine.landlock_scopes() else 0
    assert found == {"outside": [errno.EACCES, signal_outside], "own child": [0, 0]}


@LANDLOCK
def test_a_landlock_domain_keeps_even_roots_writes_to_scratch_and_devices():
    """The layer on its own, as root: files beneath ``/tmp`` and devices can be written, not a
    folder elsewhere nor its own settings in ``/proc``."""
    elsewhere = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:

        def write(path: str):
            return _errno_of(lambda: Path(path).write_text("x"))

        found = _in_a_domain(
            lambda: [
                write(f"{tempfile.gettempdir()}/landlock-test-{os.getpid()}"),
                write("/dev/null"),
                write(str(elsewhere / "file")),
                write("/proc/self/comm"),
            ]
        )
    finally:
        shutil.rmtree(elsewhere)
    assert found == [0, 0, errno.EACCES, errno.EACCES]


def _errno_of(action) -> int:
    try:
        action()
    except OSError as exc:
        return exc.errno
    return 0


def _in_a_domain(probe):
    """What ``probe()`` returned (as JSON) in a forked process that took a domain of its own."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            took_hold = confine.enter_landlock_domain()
            os.write(writer, json.dumps([took_hold, probe()]).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as f:
        took_hold, found = json.loads(f.read() or "[false, null]")
    os.waitpid(pid, 0)
    assert took_hold, found
    return found


@pytest.mark.skipif(
    not bubblewrap.bwrap_path(), reason="bubblewrap cannot run on this machine"
)
def test_the_boundary_shows_only_python_and_the_engine(tmp_path):
    code = "import os\n\n\ndef listing(path):\n    return sorted(os.listdir(path))\n"
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        engine = hw.call("masks.listing", f"{bubblewrap.ENGINE_MOUNT}/autograder")
        assert "sandbox" in engine and "grading" in engine
        assert "grade.py" in hw.call(
            "masks.listing", f"{bubblewrap.ENGINE_MOUNT}/autograder/grading"
        )
        for zoo in bubblewrap.ZOO:  # both of the zoo's folders quote the reference
            assert (
                hw.call("masks.listing", f"{bubblewrap.ENGINE_MOUNT}/autograder/{zoo}")
                == []
            )
        # Private to the worker: its own folder, and the way to Python where that is in /tmp.
        python = [Path(p) for p in (sys.prefix, sys.base_prefix)]
        ways = {p.parts[2] for p in python if p.parts[:2] == ("/", "tmp")}
        assert set(hw.call("masks.listing", "/tmp")) == {"submission", *ways}
        with expect_student_error(FileNotFoundError):
            hw.call("masks.listing", str(REPO / "solutions"))


@pytest.mark.skipif(
    not bubblewrap.bwrap_path(), reason="bubblewrap cannot run on this machine"
)
def test_the_boundary_names_a_user_though_its_view_has_no_passwd():
    """Some torch releases build a cache folder's name from getpass.getuser() when
    torch._dynamo is imported (the template does): with no user database in the view and
    none named by the environment, that raised and the template died at every start."""
    argv, _ = bubblewrap.command("import getpass; print(getpass.getuser())")
    env = {k: v for k, v in os.environ.items() if k not in ("LOGNAME", "USER")}
    run = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout.strip()) == (0, "autograder"), run.stderr


def test_only_a_gpu_grading_sees_the_hosts_gpu_device_nodes(tmp_path, monkeypatch):
    """bubblewrap's own /dev has no GPU: a CUDA grading's boundary binds the host's device
    nodes over it (after it, or they would be hidden); a CPU grading's shows none. The render
    nodes only where ROCm's compute node is (CUDA needs none)."""
    for name in ("nvidiactl", "nvidia0", "nvidia-uvm", "dri"):
        (tmp_path / name).touch()
    monkeypatch.setattr(bubblewrap, "NVIDIA_NODES", f"{tmp_path}/nvidia*")
    monkeypatch.setattr(bubblewrap, "ROCM_NODE", f"{tmp_path}/kfd")
    monkeypatch.setattr(bubblewrap, "ROCM_RENDER", f"{tmp_path}/dri")

    def bound(args):
        return [args[i + 1] for i, a in enumerate(args) if a == "--dev-bind"]

    nvidia = sorted(str(tmp_path / n) for n in ("nvidiactl", "nvidia0", "nvidia-uvm"))
    assert bound(bubblewrap.arguments()) == []
    args = bubblewrap.arguments(gpu=True)
    assert bound(args) == nvidia
    assert args.index("--dev") < args.index("--dev-bind")
    (tmp_path / "kfd").touch()
    assert bound(bubblewrap.arguments(gpu=True)) == sorted(
        [*nvidia, str(tmp_path / "kfd"), str(tmp_path / "dri")]
    )


def test_a_gpu_grading_restarts_a_template_started_for_the_cpu(monkeypatch):
    """The template started before the device was known cannot reach the GPU: a CUDA worker
    gets a template that can, and a CPU worker after it keeps that one."""

    class Template:
        def __init__(self, gpu):
            self.gpu, self.dead, self.closed = gpu, False, False
            self.process = SimpleNamespace(poll=lambda: None)  # running

        def close(self):
            self.closed = True

        def spawn(self, socks, config):
            return self

    monkeypatch.setattr(template_client, "TemplateClient", Template)
    monkeypatch.setattr(template_client, "_TEMPLATE", None)
    monkeypatch.setattr(template_client, "_GPU", False)
    cpu = template_client.spawn([], {"device": "cpu"})
    gpu = template_client.spawn([], {"device": "cuda"})
    assert (cpu.gpu, cpu.closed, gpu.gpu) == (False, True, True)
    assert template_client.spawn([], {"device": "cpu"}) is gpu


def test_a_template_that_hangs_as_it_starts_is_the_sandbox_unavailable(monkeypatch):
    """A template stuck before it answers (an import hanging on a network mount, say) must not
    hold grading forever: it is killed, and so is its replacement."""
    monkeypatch.setattr(
        template_client.bubblewrap,
        "command",
        lambda code, gpu=False: (
            [sys.executable, "-c", "import time; time.sleep(600)"],
            "",
        ),
    )
    monkeypatch.setattr(template_client, "SPAWN_TIMEOUT", 0.5)
    monkeypatch.setattr(template_client, "_TEMPLATE", None)
    monkeypatch.setattr(template_client, "_GPU", False)
    pairs = [socket.socketpair() for _ in range(2)]
    try:
        started = time.monotonic()
        with pytest.raises(SandboxUnavailable, match="did not answer in 0.5 s"):
            template_client.spawn([a for a, _ in pairs], {"device": "cpu"})
        assert (
            time.monotonic() - started < 15
        )  # killed: not close()'s grace of 10 s each
        assert template_client.running().process.poll() is not None
    finally:
        template_client.running().close()
        for pair in pairs:
            for sock in pair:
                sock.close()


def test_a_worker_that_cannot_be_confined_is_the_graders_failure(tmp_path):
    """Nothing of the student's runs before the worker's hello: a worker that ends before it
    (here: torch refuses zero threads while it confines itself) is the grader's failure, for
    this request and the submission's later ones at once. After the hello the same status is
    the student's own exit, and is called that."""
    broken = Limits(threads=0)
    with IsolatedSubmission(submission(tmp_path / "a"), limits=broken) as hw:
        for _ in range(2):
            with pytest.raises(SandboxUnavailable, match="could not be confined"):
                hw.call("masks.causal_mask", 2)
    code = "import os\n\n\ndef leave():\n    os._exit(70)\n"
    with IsolatedSubmission(submission(tmp_path / "b", masks=code)) as hw:
        with pytest.raises(StudentError) as raised:
            hw.call("masks.leave")
        assert raised.value.type_name == "ProcessExit"
        assert "exited with status 70" in raised.value.message
        assert "confined" not in raised.value.message


def test_grading_works_as_an_unprivileged_user():
    """An instructor without root grades from a world-readable copy (the fallback's path)."""
    python = Path(sys.executable)
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user for the test")
    folders = [*python.parents, *python.resolve().parents]
    if not all(p.stat().st_mode & 0o001 for p in folders):
        pytest.skip(f"Python ({python.resolve()}) is not reachable by other users here")
    # Not pytest's tmp_path: its parents are private to root.
    with tempfile.TemporaryDirectory(prefix="unprivileged-") as name:
        _grade_as_nobody(Path(name))


NOBODY = 65534  # uid and gid of nobody, who owns nothing here


def _grade_as_nobody(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".git", ".venv"))
    os.chmod(tmp_path, 0o755)
    for folder, _, files in os.walk(copy):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    out = tmp_path / "out"  # nobody's own: the grader keeps its grades private (0700)
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    command = [sys.executable, "-m", "autograder", "grade", str(copy / "solutions")]
    command += ["--out", str(out), "-k", "part2"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(copy)}
    done = subprocess.run(
        command,
        env=env,
        cwd=copy,
        user=NOBODY,
        group=NOBODY,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "protections in force" in done.stdout
    assert (out / "gradebook.csv").read_text().count("\n") == 2


SCRATCH = """
import ctypes
import os


def leave_behind():
    with open("/tmp/left-behind", "w") as f:
        f.write("for the next student")
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.shmget(0x5EED, 1 << 20, 0o1666)  # IPC_CREAT | 0666: outlives a process


def find_leftovers():
    libc = ctypes.CDLL(None, use_errno=True)
    return [os.path.exists("/tmp/left-behind"), libc.shmget(0x5EED, 0, 0o666) != -1]
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="private namespaces need the grader as root"
)
def test_what_a_worker_leaves_in_tmp_or_shared_memory_is_gone_for_the_next(tmp_path):
    code = SCRATCH + "\n\ndef crash():\n    os._exit(1)\n"
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        assert hw.call("masks.leave_behind") >= 0
        assert hw.call("masks.find_leftovers") == [True, True]
        with pytest.raises(StudentError):
            hw.call("masks.crash")  # the next request gets a fresh worker
        assert hw.call("masks.find_leftovers") == [False, False]


def test_a_forged_stack_dump_counts_no_hang():
    real = (
        "Thread 0x1 (most recent call first):\n"
        '  File "/tmp/submission/transformer_hw/attention.py", line 12 in softmax\n'
        '  File "/opt/autograder-engine/autograder/sandbox/executor.py", line 70 in _dispatch\n'
    )
    assert hangs.outermost_student_frame(real) == [["attention.py", "softmax", 12]]
    forged = [
        '  File "/x/transformer_hw/attention.py", line 1 in ' + "A" * 65000 + "\n",
        '  File "/x/transformer_hw/notes.py", line 1 in softmax\n',
        '  File "/x/transformer_hw/attention.py", line 1 in soft max\n',
    ]
    for text in forged:
        assert hangs.outermost_student_frame(text) == []


def test_a_template_that_died_is_replaced_without_cost_to_the_next_submission(tmp_path):
    from autograder.sandbox import template_client

    with IsolatedSubmission(submission(tmp_path)) as hw:
        assert hw.call("masks.causal_mask", 2).shape == (2, 2)
    template = template_client.current()
    template.process.kill()  # whatever ended it, a submission or the machine
    template.process.wait()
    with IsolatedSubmission(submission(tmp_path / "next")) as hw:
        assert hw.call("masks.causal_mask", 2).shape == (2, 2)


def test_groups_left_by_an_ended_grading_process_are_removed():
    """A grading process killed, or ended by ``os._exit`` (a pool's), leaves its control
    groups: the next one to make its own removes those of processes that have ended."""
    if not bubblewrap.cgroups_in_force():
        pytest.skip("no control groups can be made here")
    ended = subprocess.Popen(["true"])
    ended.wait()
    stale = [
        bubblewrap.CGROUP_ROOT / controller / f"autograder-{ended.pid}-0"
        for controller in ("pids", "memory")
    ]
    for folder in stale:
        folder.mkdir()
    ours = bubblewrap.ControlGroups(f"autograder-{os.getpid()}-test")
    try:
        assert ours.folders and all(folder.is_dir() for folder in ours.folders)
        assert not [folder for folder in stale if folder.exists()]
    finally:
        ours.remove()
        for folder in stale:
            with contextlib.suppress(OSError):
                folder.rmdir()


OWN_METHODS = """
class _Lazy(torch.Tensor):
    def detach(self):  # what a reply would carry, were the worker to call it
        return torch.zeros(1)


class _Listed(list):
    def __iter__(self):
        return iter([torch.zeros(1)])


class _Keyed(dict):
    def items(self):
        return [("x", torch.zeros(1))]


def results_with_methods_of_their_own(x):
    return x.as_subclass(_Lazy), _Listed([x]), _Keyed(x=x)
"""


def test_a_result_leaves_the_worker_by_torchs_and_pythons_own_methods(tmp_path):
    """The worker never runs a returned object's own methods to send it back: they would run
    after the request, where a forbidden call made in them has no request to be charged to."""
    x = torch.arange(3.0)
    with IsolatedSubmission(submission(tmp_path, masks=OWN_METHODS)) as hw:
        lazy, listed, keyed = hw.call("masks.results_with_methods_of_their_own", x)
    assert type(lazy) is torch.Tensor and torch.equal(lazy, x)
    assert len(listed) == 1 and torch.equal(listed[0], x)
    assert torch.equal(keyed["x"], x)
