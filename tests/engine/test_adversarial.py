"""Adversarial submissions, graded in one batch beside honest ones, through ``autograder grade``.

Each folder under ``scenarios/`` is one submission: the reference with a malicious edit (each
``<module>.append`` is added to the end of that module, so its definitions replace the
reference's) and ``expected.json``, whose ``outcome`` says what it must score on the parts graded
here: ``full``; ``full but part K`` (K loses points) or ``full but part K = 0``; ``same as X`` or
``at most X``, part by part, where X is another scenario (``wrong_softmax`` is the same wrong
answer without any cheat). None may get a point it did not earn, and the honest submissions in
the same batch keep every point.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from autograder import cli, confine
from autograder.points import PARTS
from autograder.protocol import PACKAGE

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).resolve().parent / "scenarios"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())
#: The parts graded here: the edits target attention.py (part 1) and rope.py (part 4); part 2
#: shows the rest of a submission is still graded. A subset keeps this test fast.
KEYWORD = "part1 or part2 or part4"
GRADED_PARTS = (1, 2, 4)
INJECTED = REPO / "tests" / "graded" / "test_zz_injected.py"
AS_ROOT = os.geteuid() == 0
NEEDS_ROOT = {"search_disk", "rewrite_tests", "background_process"}


def leftover_processes() -> list[int]:
    """Live processes of sandbox worker uids that no live sandbox template is looking after.

    (A process whose parent is a template or a worker, both of which run ``zygote_main``'s
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
            and b"zygote_main" not in parent
        ):
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every scenario, plus a second honest copy, in one batch with two jobs."""
    batch = tmp_path_factory.mktemp("batch")
    for name in [*NAMES, "honest_again"]:
        target = batch / name / PACKAGE
        shutil.copytree(REPO / "solutions" / PACKAGE, target)
        for edit in (SCENARIOS / name).glob("*.append"):
            module = target / f"{edit.stem}.py"
            module.write_text(module.read_text() + "\n\n" + edit.read_text())
    out = tmp_path_factory.mktemp("grades")
    args = ["grade", str(batch), "--out", str(out), "--jobs", "2", "--timeout", "3"]
    status = cli.main([*args, "-k", KEYWORD])
    INJECTED.unlink(
        missing_ok=True
    )  # never leave a planted test behind, whatever happened
    deadline = time.monotonic() + 10
    while AS_ROOT and leftover_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    return status, out


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
    status, out = graded
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
    else:
        baseline = part_scores(out, outcome[-1])
        if outcome[0] == "same":
            assert got == baseline, expected["why"]
        else:
            assert all(got[k] <= baseline[k] for k in GRADED_PARTS), expected["why"]
    outputs = "\n".join(t["output"] for t in results(out, name)["tests"])
    for text in expected["messages"]:
        assert text in outputs


def test_results_are_byte_identical_apart_from_time(graded):
    _, out = graded
    first, second = results(out, "honest"), results(out, "honest_again")
    first.pop("execution_time"), second.pop("execution_time")
    assert first == second
    assert all(
        "/tmp" not in t["output"] and "0x" not in t["output"] for t in first["tests"]
    )


def test_gradebook_lists_the_whole_batch(graded):
    _, out = graded
    lines = (out / "gradebook.csv").read_text().splitlines()
    assert lines[0] == "name,score,max_score,part1,part2,part3,part4,part5,part6,part7"
    assert [line.split(",")[0] for line in lines[1:]] == sorted(
        [*NAMES, "honest_again"]
    )


@pytest.mark.skipif(not AS_ROOT, reason="needs the grader to run as root")
def test_nothing_survives_the_batch(graded):
    assert leftover_processes() == []
    assert not INJECTED.exists()
