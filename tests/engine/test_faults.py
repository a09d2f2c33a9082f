"""Whose fault a worker's end is (``autograder.sandbox.retries``). Faults on the grader's side
never cost the student: each case grades the reference on a few part-7 tests (CharLM objects
held across requests) with a fault injected that a retry does not meet again, and ends with the
same grade as a clean run, marked with the fault and kept. A worker that ends the same way at
the same request after a retry has ended by its own doing, whatever it made its end look like
(the status of a lost connection, a signal it sent itself, its own socket shut): that request
fails and the grade is final. Time limits count only the host's delays, never a wait the
submission's own processes cause.

No case depends on timing: wherever a kill lands in a request, the request is run again.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autograder.commands import cli
from autograder.facts.points import PACKAGE, PARTS
from autograder.facts.protocol import StudentError
from autograder.grading import grade
from autograder.outputs import report
from autograder.sandbox import client as sandbox
from autograder.sandbox import confine, host_wait, retries, template_client
from autograder.sources.release import SOLUTIONS

#: A few part-7 tests whose requests build a CharLM, load weights into it and run it: a
#: fault in their middle leaves the grading side holding handles to the lost worker's objects.
KEYWORD = (
    "test_charlm_structure or test_charlm_forward_matches_oracle "
    "or test_charlm_cached_forward_matches_full"
)
SETTINGS = grade.Settings(keyword=KEYWORD)
#: The request the faults strike: past the first test's, while its objects are held.
STRUCK = 6


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("faults") / "reference"
    shutil.copytree(SOLUTIONS, folder / PACKAGE)
    return folder


@pytest.fixture(scope="module")
def clean(reference) -> grade.Graded:
    graded = grade.grade_one("reference", reference, SETTINGS)
    assert not graded.failed and not graded.grader_events, graded.problems
    assert graded.tests and all(t.passed for t in graded.tests)
    return graded


def outcomes(graded: grade.Graded) -> dict[str, bool]:
    return {t.nodeid: t.passed for t in graded.tests}


def host_pid(pid: int) -> int:
    """A worker's pid as this process sees it (the template may have a PID namespace)."""
    found = host_wait.host_pid(pid, template_client.running().process.pid)
    if found is None:
        raise LookupError(f"no worker {pid} below the template")
    return found


def strike(monkeypatch, method: str, fault) -> list[int]:
    """Run ``fault(submission)`` once, as request ``STRUCK`` reaches ``method`` of the
    sandbox's client; the list it returns fills with that request's number."""
    original = getattr(sandbox.IsolatedSubmission, method)
    struck: list[int] = []

    def patched(self, *args, **kwargs):
        if self._seq == STRUCK and not struck and kwargs.get("seq", STRUCK) == STRUCK:
            struck.append(self._seq)
            fault(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sandbox.IsolatedSubmission, method, patched)
    return struck


def graded_with(reference, settings=SETTINGS) -> grade.Graded:
    graded = grade.grade_one("reference", reference, settings)
    assert not graded.failed, graded.problems
    return graded


def test_a_worker_killed_from_outside_mid_request_is_retried(
    reference, clean, monkeypatch, tmp_path
):
    def kill(submission):  # after the request was sent, before its reply is read
        os.kill(host_pid(submission._pid), signal.SIGKILL)

    struck = strike(monkeypatch, "_receive", kill)
    graded = graded_with(reference)
    assert struck and outcomes(graded) == outcomes(clean)
    assert len(graded.grader_events) == 1
    assert "SIGKILL" in graded.grader_events[0]
    assert "cost no points" in graded.grader_events[0]
    assert graded.grader_events[0] in graded.problems
    # Marked in results.json, and kept: it is the grade a run without the fault gives.
    digests = {"submission": "s", "suite": "t"}
    report.write_submission(tmp_path, graded, digests=digests)
    assert report.current_results(tmp_path, "reference", digests) is not None
    row = report.gradebook_row(tmp_path, "reference")
    assert "SIGKILL" in row["problems"]


def kill_on_plan(monkeypatch, plan: list[str]) -> list[str]:
    """SIGKILL the worker at each step ``plan`` names, in order, before it can answer:
    ``"struck"``, as request ``STRUCK`` is about to be sent to it; ``"starting"``, as a fresh
    worker is forked (it says hello only once it has the files, sent after); ``"replay"``, as
    a fresh worker is about to be brought back to the lost one's state. The list returned
    fills with the kills made."""
    made: list[str] = []

    def kill_if(step: str, submission) -> None:
        if len(made) < len(plan) and plan[len(made)] == step:
            made.append(step)
            os.kill(host_pid(submission._pid), signal.SIGKILL)

    client = sandbox.IsolatedSubmission
    exchange, send_by, replay = client._exchange, client._send_by, client._replay
    spawn = template_client.spawn
    struck: list = []  # request STRUCK as encoded

    def exchanging(self, encoded, timeout):
        if self._seq == STRUCK:
            struck[:] = [encoded]
        return exchange(self, encoded, timeout)

    def sending(self, encoded, deadline):
        if struck and encoded is struck[0]:
            kill_if("struck", self)
        return send_by(self, encoded, deadline)

    def spawning(socks, config):
        pid = spawn(socks, config)
        kill_if("starting", SimpleNamespace(_pid=pid))
        return pid

    def replaying(self):
        kill_if("replay", self)
        return replay(self)

    monkeypatch.setattr(client, "_exchange", exchanging)
    monkeypatch.setattr(client, "_send_by", sending)
    monkeypatch.setattr(client, "_replay", replaying)
    monkeypatch.setattr(template_client, "spawn", spawning)
    return made


def test_kills_of_a_request_its_fresh_worker_and_its_replay_cost_nothing(
    reference, clean, monkeypatch
):
    """A kill as a fresh worker starts (no student code has run in it) is the host's; a kill
    during the replay strikes another request than the first, and neither ends the same way
    again: each is retried and costs nothing."""
    plan = ["struck", "starting", "replay"]
    made = kill_on_plan(monkeypatch, plan)
    graded = graded_with(reference)
    assert made == plan and outcomes(graded) == outcomes(clean)
    assert len(graded.grader_events) == len(plan)


@pytest.mark.skipif(
    not confine.available_kernel_layers()[0], reason="no system-call filter here"
)
def test_kills_from_outside_that_recur_at_the_same_request_cost_nothing(
    reference, clean, monkeypatch
):
    """A worker cannot send itself a SIGKILL (the system-call filter), nor earn one from the
    kernel for a limit of its own here: a worker killed twice, three times at one request was
    killed from outside each time, and each kill is retried."""
    plan = ["struck", "struck", "struck"]
    made = kill_on_plan(monkeypatch, plan)
    graded = graded_with(reference)
    assert made == plan and outcomes(graded) == outcomes(clean)
    assert len(graded.grader_events) == len(plan)
    assert all("cannot send itself" in event for event in graded.grader_events)


@pytest.mark.parametrize(
    "case, outside",
    [
        ("a SIGKILL", True),
        ("a SIGTERM", True),
        ("a SIGKILL past its CPU limit", False),
        ("a SIGKILL as the sandbox's memory group ran out", False),
        ("a SIGKILL past its memory on a GPU", False),
        ("a SIGKILL on a GPU", True),
        ("a SIGSEGV", False),
        ("a SIGKILL without the filter", False),
        ("the status of a lost connection", False),
    ],
)
def test_a_kill_is_from_outside_only_where_the_worker_could_not_cause_it(case, outside):
    """What the template reaped decides: a signal the filter kept the worker from sending
    (SIGSEGV it may send), and none the kernel sends for a limit of the worker's own."""
    limits = sandbox.Limits()
    allowed = confine.cpu_seconds_allowed(limits)
    cpu = allowed + 1.0 if "CPU" in case else 3.0
    peak = limits.memory + 1 if "past its memory" in case else 1 << 20
    kills = iter([1, 2] if "memory group" in case else [1, 1])
    submission = sandbox.IsolatedSubmission.__new__(sandbox.IsolatedSubmission)
    submission.limits, submission._pid = limits, 42
    submission.device = torch.device("cuda" if "GPU" in case else "cpu")
    submission._oom_kills = next(kills)
    client = SimpleNamespace(
        filtered="without the filter" not in case,
        usage_of=lambda pid: (cpu, peak) if pid == 42 else None,
        groups=SimpleNamespace(oom_kills=lambda: next(kills)),
    )
    status = {"SIGTERM": signal.SIGTERM, "SIGSEGV": signal.SIGSEGV}.get(
        case.split()[1], signal.SIGKILL
    )
    if "lost connection" in case:
        status = 72 << 8
    assert submission._from_outside(client, status) is outside


def test_where_a_kill_may_be_its_own_one_that_recurs_at_the_same_request_is(
    reference, clean, monkeypatch, tmp_path
):
    """Without the filter's word (``_from_outside``: a worker able to send itself a SIGKILL), a
    worker killed twice at one request looks like a worker that ends itself there: that request
    fails, nothing else, and the grade is final."""
    monkeypatch.setattr(
        sandbox.IsolatedSubmission, "_from_outside", lambda *args: False
    )
    made = kill_on_plan(monkeypatch, ["struck", "struck"])
    graded = graded_with(reference)
    assert made == ["struck", "struck"] and graded.grader_events == []
    lost = {t for t, passed in outcomes(graded).items() if not passed}
    assert len(lost) == 1  # the clean run passed every test
    (failed,) = [t for t in graded.tests if not t.passed]
    assert "SIGKILL" in failed.message and "again, after a retry" in failed.message
    digests = {"submission": "s", "suite": "t"}
    report.write_submission(tmp_path, graded, digests=digests)
    assert report.current_results(tmp_path, "reference", digests) is not None


def test_ends_that_do_not_recur_past_the_retries_are_the_graders_failure(
    reference, monkeypatch, tmp_path
):
    """A worker killed once at each of many requests, never again at the same one, where the
    grader cannot tell a kill from outside (``_from_outside``): every end is the host's, so once
    the retries are spent the grading is the grader's failure, with an empty gradebook row (not
    zeros) that says why."""
    monkeypatch.setattr(
        sandbox.IsolatedSubmission, "_from_outside", lambda *args: False
    )
    send_by = sandbox.IsolatedSubmission._send_by
    struck: set[int] = set()

    def sending(self, encoded, deadline):
        if self._seq >= STRUCK and self._seq not in struck and self._sock is not None:
            # As it is sent, or as the fresh worker that is to serve it gets the files.
            struck.add(self._seq)
            os.kill(host_pid(self._pid), signal.SIGKILL)
        return send_by(self, encoded, deadline)

    monkeypatch.setattr(sandbox.IsolatedSubmission, "_send_by", sending)
    graded = grade.grade_one("reference", reference, SETTINGS)
    assert graded.failed and "not of its doing" in graded.detail
    assert len(struck) <= retries.MAX_RETRIES + 1  # or their time ran out first
    report.write_submission(tmp_path, graded, digests={"submission": "s", "suite": "t"})
    row = report.gradebook_row(tmp_path, "reference")
    assert row["score"] == "" and all(row[f"part{k}"] == "" for k in PARTS)
    assert "not of its doing" in row["problems"]


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_retries_of_kills_from_outside_recur_freely_within_the_time_limit():
    """Ends from outside at one request are retried each time, leave the budget of undecided
    ends whole, and stop only when their retries would pass the submission's time limit."""
    clock = _Clock()
    record = retries.Retries(outside_limit=100.0, clock=clock)
    clock.now = 30.0
    for _ in range(3 * retries.MAX_RETRIES):  # far more than undecided ends may take
        assert record.judge(7, False, 1.0, outside=True) is retries.Verdict.RETRY
        clock.now += 2.0
        record.charge(2.0)
    assert record.spent_outside == 72.0 and record.spent == 0.0
    # An undecided end still has its budget: the 30 s the grading took, and the slack.
    assert record.judge(8, False, 40.0) is retries.Verdict.RETRY
    clock.now += 40.0
    record.charge(40.0)
    assert record.judge(8, False, 1.0) is retries.Verdict.OWN  # it recurred
    assert record.judge(9, False, 29.0, outside=True) is retries.Verdict.GRADER_FAILURE
    assert "time limit" in record.exhausted()


def test_a_kill_with_the_request_unread_is_retried(reference, clean, monkeypatch):
    """The worker stopped, then killed with the request in its socket: a connection reset."""

    def kill(submission):
        pid = host_pid(submission._pid)
        os.kill(pid, signal.SIGSTOP)
        os.kill(pid, signal.SIGKILL)

    struck = strike(monkeypatch, "_send_by", kill)
    graded = graded_with(reference)
    assert struck and outcomes(graded) == outcomes(clean)
    assert len(graded.grader_events) == 1


def test_a_template_killed_between_requests_is_started_again(
    reference, clean, monkeypatch
):
    def kill(submission):
        template = template_client.running().process
        template.kill()
        template.wait()

    struck = strike(monkeypatch, "_exchange", kill)
    graded = graded_with(reference)
    assert struck and outcomes(graded) == outcomes(clean)
    assert any("template" in event for event in graded.grader_events)


def test_a_closed_worker_socket_is_retried(reference, clean, monkeypatch):
    struck = strike(
        monkeypatch, "_exchange", lambda s: s._sock.shutdown(socket.SHUT_WR)
    )
    graded = graded_with(reference)
    assert struck and outcomes(graded) == outcomes(clean)
    assert ["lost connection" in e for e in graded.grader_events] == [True]


def test_a_reply_late_but_inside_its_deadline_counts(reference, clean, monkeypatch):
    """The worker is held still for half its time limit: no fault, and nothing retried."""
    settings = grade.Settings(keyword=KEYWORD, call_timeout=8.0)

    def hold(submission):
        pid = host_pid(submission._pid)
        os.kill(pid, signal.SIGSTOP)
        threading.Timer(4.0, os.kill, (pid, signal.SIGCONT)).start()

    struck = strike(monkeypatch, "_send_by", hold)
    graded = graded_with(reference, settings)
    assert struck and outcomes(graded) == outcomes(clean)
    assert graded.grader_events == []


def test_a_batch_beside_busy_loops_and_a_memory_hungry_neighbour(
    reference, clean, tmp_path
):
    batch = tmp_path / "batch"
    for n in range(2):
        shutil.copytree(reference, batch / f"copy{n}")
    hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n"
    hog += "    blocks = blocks[-24:]\n"  # about 1.5 GB, touched over and over
    neighbours = [
        subprocess.Popen([sys.executable, "-c", code])
        for code in ("while True: pass", "while True: pass", hog)
    ]
    try:
        out = tmp_path / "out"
        # One grading process, this one (torch imported, a template up): a pool's processes
        # would each import torch again. benchmarks/soak.py grades with --jobs = the CPUs.
        args = ["grade", str(batch), "--out", str(out), "-k", KEYWORD]
        assert cli.main(args) == 0
    finally:
        for neighbour in neighbours:
            neighbour.kill()
            neighbour.wait()
    for n in range(2):
        row = report.gradebook_row(out, f"copy{n}")
        assert row["problems"] == ""
        assert int(row["part7"]) == report.part_scores(clean.tests)[7] > 0


#: Student code that computes for ``seconds`` of its own CPU time, then answers.
COMPUTES = """
import time


def compute(seconds):
    began = time.process_time()
    while time.process_time() - began < seconds:
        pass
    return seconds
"""


def crowded_cpus(per_cpu: int) -> list[subprocess.Popen]:
    """``per_cpu`` busy loops on each CPU this process may use, each pinned there."""
    loops = []
    for cpu in sorted(os.sched_getaffinity(0)):
        for _ in range(per_cpu):
            loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            os.sched_setaffinity(loop.pid, {cpu})
            loops.append(loop)
    return loops


def test_a_request_slowed_by_a_crowded_host_is_not_a_time_out(tmp_path):
    """A request that needs half its time limit of CPU, on CPUs crowded fourfold: its worker
    waits for a CPU longer than the limit, and that wait is the host's, not the student's. A
    request that spins forever still ends at its limit, moved on only as far as it waited."""
    root = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, root / PACKAGE)
    (root / PACKAGE / "masks.py").write_text(
        (root / PACKAGE / "masks.py").read_text() + COMPUTES
    )
    limits = sandbox.Limits(call_timeout=1.0, submission_timeout=60.0)
    with sandbox.IsolatedSubmission(root, limits=limits) as hw:
        assert hw.call("masks.compute", 0.05) == 0.05  # the worker is up
        loops = crowded_cpus(per_cpu=4)
        try:
            assert hw.call("masks.compute", 0.5) == 0.5
            with pytest.raises(Exception, match="took longer than 1 s"):
                hw.call("masks.compute", 1e9)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()


#: Student code that ends its own worker at a request, in each of the ways that look from
#: outside like a fault of the host's (and one plainly its own, for contrast). The reader of
#: student files refuses most of these routes; the sandbox must hold where it would not.
ENDS_ITSELF = """
import os
import resource
import signal
import socket
import time


def answer(x):
    return x


def end_by(how):
    if how == "its own exit":
        os._exit(0)
    if how == "the status of a lost connection":
        os._exit(72)
    if how == "SIGKILL sent to itself":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "SIGTERM sent to itself":
        os.kill(os.getpid(), signal.SIGTERM)
    if how == "a CPU limit it lowered":  # soft = hard: the kernel's SIGKILL, not SIGXCPU
        used = int(time.process_time()) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (used, used))
        while True:
            pass
    if how == "its own sockets shut":
        for name in os.listdir("/proc/self/fd"):
            try:
                sock = socket.socket(fileno=int(name))
            except OSError:
                continue
            sock.shutdown(socket.SHUT_RDWR)
            sock.detach()
        time.sleep(3600)
    raise ValueError(how)
"""
ENDS = ["the status of a lost connection", "its own sockets shut"]
#: Ends the system-call filter keeps a worker from: each would read as a kill from outside.
REFUSED_ENDS = [
    "SIGKILL sent to itself",
    "SIGTERM sent to itself",
    "a CPU limit it lowered",
]


@pytest.mark.parametrize("how", ["its own exit", *ENDS])
def test_a_worker_that_ends_itself_loses_that_request_only(tmp_path, how):
    """Whatever its end looks like, a worker that ends at the same request after a retry has
    ended by its own doing: the request fails (it is not run again), no grader event is left,
    and the next request is served. An end plainly its own is not retried at all."""
    root = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, root / PACKAGE)
    masks = root / PACKAGE / "masks.py"
    masks.write_text(masks.read_text() + ENDS_ITSELF)
    limits = sandbox.Limits(call_timeout=30.0, submission_timeout=300.0)
    with sandbox.IsolatedSubmission(root, limits=limits) as hw:
        assert hw.call("masks.answer", 1) == 1
        with pytest.raises(StudentError) as ended:
            hw.call("masks.end_by", how)
        assert ended.value.type_name == "ProcessExit"
        retried = "again, after a retry" in ended.value.message
        assert retried == (how in ENDS), ended.value.message
        assert hw.grader_events == []
        with pytest.raises(StudentError, match="so it was not run again"):
            hw.call("masks.end_by", how)
        assert hw.call("masks.answer", 2) == 2


@pytest.mark.skipif(
    not confine.available_kernel_layers()[0], reason="no system-call filter here"
)
@pytest.mark.parametrize("how", REFUSED_ENDS)
def test_a_worker_cannot_end_itself_as_if_killed_from_outside(tmp_path, how):
    """The call that would end it is refused (EPERM): the request fails with that error in
    the student's code, the worker lives on, and no grader event is left."""
    root = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, root / PACKAGE)
    masks = root / PACKAGE / "masks.py"
    masks.write_text(masks.read_text() + ENDS_ITSELF)
    with sandbox.IsolatedSubmission(root) as hw:
        assert hw.call("masks.answer", 1) == 1
        pid = hw._pid
        with pytest.raises(StudentError) as refused:
            hw.call("masks.end_by", how)
        assert refused.value.type_name in ("PermissionError", "ValueError")
        assert hw.call("masks.answer", 2) == 2
        assert hw._pid == pid and hw.grader_events == []


#: Student code that spins in processes of its own beside a request that spins too.
SPINS_BESIDE = """
import os


def spin_beside(processes):
    for _ in range(processes):
        if os.fork() == 0:
            while True:
                pass
    while True:
        pass
"""


def test_processes_spinning_beside_a_request_earn_it_no_time(tmp_path):
    """Eight processes of the submission's own share its worker's CPU, so the worker waits
    for a CPU most of the time. That wait is the submission's doing, never the host's: the
    request still ends near its limit of 1 s (crediting the wait would stretch it to the
    cap, 10 s; 5 s leaves room for a busy host's own share of the wait)."""
    root = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, root / PACKAGE)
    masks = root / PACKAGE / "masks.py"
    masks.write_text(masks.read_text() + SPINS_BESIDE + COMPUTES)
    limits = sandbox.Limits(call_timeout=1.0, submission_timeout=60.0)
    with sandbox.IsolatedSubmission(root, limits=limits) as hw:
        assert hw.call("masks.compute", 0.05) == 0.05  # the worker is up
        began = time.monotonic()
        with pytest.raises(StudentError, match="took longer than 1 s"):
            hw.call("masks.spin_beside", 8)
        took = time.monotonic() - began
    assert took < 5 * limits.call_timeout, took


@pytest.mark.parametrize("limit", ["CPU time", "memory"])
def test_a_grading_too_costly_for_the_grading_process_is_that_submissions_problem(
    reference, clean, monkeypatch, tmp_path, limit
):
    """Past its share of the grading process's CPU time or memory, a submission's grading
    stops: the tests from there on fail with the reason, which is among its problems, and the
    grade is final (never the grader's failure, never graded again); the next submission is
    graded as ever. The limits are lowered to nothing here to reach them at the first test."""
    if limit == "CPU time":
        monkeypatch.setattr(grade, "COST_FLOOR", 0.0)
        monkeypatch.setattr(grade, "REFERENCE_CPU_PER_TEST", 0.0)
    else:
        monkeypatch.setattr(grade, "MAX_MEMORY_GROWTH", -1)
    costly = grade.grade_one("reference", reference, SETTINGS)
    assert not costly.failed and costly.tests and not costly.grader_events
    assert all(not t.passed and "not graded: " in t.message for t in costly.tests)
    assert [
        p for p in costly.problems if limit.split()[0] in p and "grading process" in p
    ]
    report.write_submission(tmp_path, costly, digests={"submission": "s", "suite": "t"})
    row = report.gradebook_row(tmp_path, "reference")
    assert float(row["score"]) == 0 and "grading process" in row["problems"]
    monkeypatch.undo()
    assert outcomes(graded_with(reference)) == outcomes(clean)
