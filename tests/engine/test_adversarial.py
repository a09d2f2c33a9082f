"""Adversarial submissions, graded in one batch beside honest ones, through ``autograder grade``.

Beside the scenario folders the batch holds a zip with a corrupt member and two submissions
whose names collide; while it runs, a listener waits on the host's loopback, a root-owned
canary file and a root-only file inside the sandbox's view are watched, and afterwards nothing
of the workers may be left (no process, no file in the host's ``/tmp`` or ``/dev/shm``).

Each folder under ``scenarios/`` is one submission: the reference with a malicious edit (each
``<module>.append`` is added to the end of that module, so its definitions replace the
reference's) and ``expected.json``, whose ``outcome`` says what it must score on the parts graded
here: ``full``; ``full but part K`` (K loses points) or ``full but part K = 0``; ``nothing``
(every part 0); ``same as X``,
``at most X`` or ``near X`` (within 2 points), part by part, where X is another scenario (``wrong_softmax`` is the same wrong
answer without any cheat). None may get a point it did not earn, and the honest submissions in
the same batch keep every point.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import shutil
import socket
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from autograder.commands import cli
from autograder.facts.points import PACKAGE, PARTS
from autograder.sandbox import bubblewrap, confine

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())
#: The parts graded here: the edits target attention.py (part 1) and rope.py (part 4); part 2
#: shows the rest of a submission is still graded. A subset keeps this test fast.
KEYWORD = "part1 or part2 or part4"
GRADED_PARTS = (1, 2, 4)
INJECTED = REPO / "tests" / "graded" / "test_zz_injected.py"
AS_ROOT = os.geteuid() == 0
NEEDS_ROOT = {"search_disk", "rewrite_tests", "background_process", "read_outside_view"}
#: What the attacks aim at (their own files name the same paths).
CANARY = Path("/var/tmp/autograder-canary-root")
SECRET_IN_VIEW = Path(sys.prefix) / "autograder-canary-0600"
PORTS = range(47300, 47310)
#: Abstract unix socket names (one free one is taken: test runs may overlap on a machine).
ABSTRACT_SOCKETS = [f"\0autograder-engine-test-{n}" for n in range(10)]


def leftover_processes() -> list[int]:
    """Live processes of sandbox worker uids that no live sandbox template is looking after.

    (A process whose parent is a template or a worker, both of which run ``template_main``'s
    command line, belongs to a sandbox still at work, maybe another test run's.)
    """
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            fields = (
                Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
            )
            parent = Path(f"/proc/{fields[1]}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if (
            uid >= confine.UID_BASE
            and fields[0] != "Z"
            and b"template_main" not in parent
        ):
            found.append(int(entry.name))
    return found


class Listener:
    """Accepts connections on the host's loopback and an abstract unix socket; counts them."""

    def __init__(self):
        self.reached: list[bytes] = []
        self.sockets = [self._tcp(), self._abstract()]
        for sock in self.sockets:
            sock.listen()
            sock.settimeout(0.2)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _tcp(self) -> socket.socket:
        for port in PORTS:
            sock = socket.socket()
            with contextlib.suppress(OSError):
                sock.bind(("127.0.0.1", port))
                return sock
            sock.close()
        raise RuntimeError(f"no free port in {PORTS}")

    def _abstract(self) -> socket.socket:
        for name in ABSTRACT_SOCKETS:
            sock = socket.socket(socket.AF_UNIX)
            with contextlib.suppress(OSError):
                sock.bind(name)
                return sock
            sock.close()
        raise RuntimeError("no free abstract socket name")

    def _serve(self, sock):
        while sock.fileno() >= 0:
            with contextlib.suppress(OSError):
                conn, _ = sock.accept()
                self.reached.append(conn.recv(100))
                conn.close()

    def close(self):
        for sock in self.sockets:
            sock.close()


def worker_files() -> list[str]:
    """Files in the host's shared writable folders that a sandbox worker's uid owns."""
    found = []
    for folder in ("/tmp", "/dev/shm", "/var/tmp"):
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid >= confine.UID_BASE:
                        found.append(entry.path)
    return found


def corrupt_zip(path: Path) -> None:
    """The reference as a zip whose rope.py member has a broken deflate stream."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for module in sorted((REPO / "solutions" / PACKAGE).glob("*.py")):
            archive.write(module, f"{PACKAGE}/{module.name}")
    data = bytearray(buffer.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = archive.getinfo(f"{PACKAGE}/rope.py")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for i in range(start + 20, start + 60):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


#: Held while a batch runs: its attacks aim at fixed paths (the canary, the secret, the planted
#: test), so two runs on one machine (``-n 2`` without ``--dist loadfile`` runs this module's
#: fixture in both workers) take turns instead of removing each other's targets.
BATCH_LOCK = Path("/var/tmp/autograder-adversarial.lock")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every scenario, a second honest copy, a corrupt zip and two colliding names in one
    batch with two jobs, with the attacks' targets in place, one batch at a time."""
    # Read-only and open to all: a lock file another user created still takes a lock.
    fd = os.open(BATCH_LOCK, os.O_RDONLY | os.O_CREAT, 0o644)
    with open(fd) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _grade_batch(tmp_path_factory)


def _grade_batch(tmp_path_factory):
    assert bubblewrap.bwrap_path(), (
        "no bubblewrap boundary here (bwrap missing, or namespaces forbidden): these "
        "attacks would reach the host; install it (apt-get install -y bubblewrap)"
    )
    batch = tmp_path_factory.mktemp("batch")
    for name in [*NAMES, "honest_again", "twin"]:
        target = batch / name / PACKAGE
        shutil.copytree(REPO / "solutions" / PACKAGE, target)
        for edit in (SCENARIOS / name).glob("*.append"):
            module = target / f"{edit.stem}.py"
            module.write_text(module.read_text() + "\n\n" + edit.read_text())
    wrong = (
        batch / "twin.zip"
    )  # the same name as the folder "twin", and a wrong softmax
    with zipfile.ZipFile(wrong, "w") as archive:
        for module in (batch / "wrong_softmax" / PACKAGE).glob("*.py"):
            archive.write(module, f"{PACKAGE}/{module.name}")
    corrupt_zip(batch / "corrupt_zip.zip")
    CANARY.write_text("root's own\n")
    os.chmod(CANARY, 0o600)
    canary_before = CANARY.stat()
    SECRET_IN_VIEW.write_text("root only\n")
    os.chmod(SECRET_IN_VIEW, 0o600)
    listener = Listener()
    files_before = set(
        worker_files()
    )  # other test runs' workers may be at work meanwhile
    out = tmp_path_factory.mktemp("grades")
    args = ["grade", str(batch), "--out", str(out), "--jobs", "2", "--timeout", "3"]
    try:
        status = cli.main([*args, "-k", KEYWORD])
    finally:
        listener.close()
        SECRET_IN_VIEW.unlink(missing_ok=True)
        INJECTED.unlink(missing_ok=True)  # never leave a planted test behind
    deadline = time.monotonic() + 10
    while AS_ROOT and leftover_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    canary_after = CANARY.stat()
    canary_intact = CANARY.read_text() == "root's own\n" and (
        canary_after.st_uid,
        canary_after.st_mode,
    ) == (canary_before.st_uid, canary_before.st_mode)
    CANARY.unlink()
    left = sorted(set(worker_files()) - files_before)
    return status, out, listener.reached, canary_intact, left


def results(out: Path, name: str) -> dict:
    return json.loads((out / name / "results.json").read_text())


def part_scores(out: Path, name: str) -> dict[int, int]:
    parts = dict.fromkeys(GRADED_PARTS, 0)
    for test in results(out, name)["tests"]:
        parts[int(test["number"].split(".")[0])] += test["score"]
    return parts


@pytest.mark.parametrize("name", NAMES)
def test_scenario_earns_exactly_what_it_earned(graded, name):
    if name in NEEDS_ROOT and not AS_ROOT:
        pytest.skip("this protection needs the grader to run as root")
    status, out, *_ = graded
    assert status == 0
    expected = json.loads((SCENARIOS / name / "expected.json").read_text())
    got = part_scores(out, name)
    outcome = expected["outcome"].split()
    if outcome[0] == "full":
        full = {k: PARTS[k].points for k in GRADED_PARTS}
        if len(outcome) == 4:  # full but part K
            assert got.pop(int(outcome[3])) < full.pop(int(outcome[3])), expected["why"]
        elif len(outcome) == 6:  # full but part K = 0
            assert got.pop(int(outcome[3])) == 0 and full.pop(int(outcome[3])), (
                expected["why"]
            )
        assert got == full, expected["why"]
    elif outcome[0] == "nothing":
        assert not any(got.values()), expected["why"]
    else:
        baseline = part_scores(out, outcome[-1])
        if outcome[0] == "same":
            assert got == baseline, expected["why"]
        elif outcome[0] == "near":
            assert all(abs(got[k] - baseline[k]) <= 2 for k in GRADED_PARTS), (
                expected["why"] + f": {got} against {baseline}"
            )
        else:
            assert all(got[k] <= baseline[k] for k in GRADED_PARTS), expected["why"]
    outputs = "\n".join(t["output"] for t in results(out, name)["tests"])
    for text in expected["messages"]:
        assert text in outputs


def test_results_are_byte_identical_apart_from_time(graded):
    _, out, *_ = graded
    first, second = results(out, "honest"), results(out, "honest_again")
    first.pop("execution_time"), second.pop("execution_time")
    assert first == second
    assert all(
        "/tmp" not in t["output"] and "0x" not in t["output"] for t in first["tests"]
    )


def test_gradebook_lists_the_whole_batch(graded):
    _, out, *_ = graded
    lines = (out / "gradebook.csv").read_text().splitlines()
    columns = ",".join(f"part{k}" for k in PARTS)
    assert lines[0] == f"name,score,max_score,{columns},problems"
    names = [line.split(",")[0] for line in lines[1:]]
    assert (
        len(names) == len(set(names)) == len(NAMES) + 4
    )  # honest_again, twins, corrupt zip
    assert "corrupt_zip" in names and "twin" in names


def test_colliding_names_get_their_own_grades(graded):
    _, out, *_ = graded
    twins = sorted(p.name for p in out.iterdir() if p.name.startswith("twin"))
    assert len(twins) == 2
    scores = sorted(part_scores(out, name)[1] for name in twins)
    assert (
        scores[0] < scores[1] == PARTS[1].points
    )  # the wrong softmax and the honest one


def test_a_corrupt_zip_member_is_that_submissions_problem(graded):
    _, out, *_ = graded
    feedback = (out / "corrupt_zip" / "feedback.md").read_text()
    assert "rope.py" in feedback
    parts = part_scores(out, "corrupt_zip")
    assert (
        parts[4] == 0 and parts[1] == PARTS[1].points
    )  # only what needs rope.py fails


def test_nothing_reached_the_host(graded):
    _, _, reached, canary_intact, _ = graded
    assert reached == []
    assert canary_intact, "root changed a file through a path a student planted"


@pytest.mark.skipif(not AS_ROOT, reason="needs the grader to run as root")
def test_nothing_survives_the_batch(graded):
    assert leftover_processes() == []
    assert (
        graded[-1] == []
    )  # no file of a worker in the host's /tmp, /dev/shm, /var/tmp
    assert not INJECTED.exists()
