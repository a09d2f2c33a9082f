"""Routes around the forbidden-call rule, graded in one batch through ``autograder grade``.

Each folder under ``evasion/`` is one submission: the reference with an edit (each
``<module>.append`` is added to the end of that module, so its definitions replace the
reference's) and ``expected.json``: the parts that must score zero (``zero``), and ``messages``,
patterns that the failed tests' feedback must contain (the call and its file:line). Every other
part graded here keeps its points, except the tests whose code ran the refused call (part 5's
blocks run attention.py's softmax): a forbidden call fails where it is made, so such a test
fails with the refusal (``runs_it``: parts whose failure shows otherwise, the refusal being in
a thread), and with nothing else. A correct solution that only looks dynamic
(``__import__("warnings")``) keeps every point.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from autograder.commands import cli
from autograder.facts.points import PACKAGE

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).resolve().parent / "evasion"
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())
#: Graded in a batch of their own, marked slow: a data loader per softmax call takes minutes
#: (each call's workers are shut down after the refusal). ``test_tripwire`` shows the same
#: route (a library's worker process keeps the watch) in seconds.
SLOW = {"library_workers_in_a_data_loader"}
#: The parts the edits touch (attention.py, masks.py, rope.py, norm.py); a subset keeps this fast.
KEYWORD = "part1 or part2 or part4 or part5"
GRADED_PARTS = (1, 2, 4, 5)
#: How a refusal at run time reads in a failed test's feedback (``autograder.sandbox.tripwire``): a
#: forbidden call, or a computed name that looked past a library namespace's functions.
REFUSED = re.compile(
    "ForbiddenCall|is forbidden here|is not looked up on a library namespace"
)


def _grade(tmp_path_factory, names) -> Path:
    """The grades of the scenarios ``names``, graded as one batch."""
    batch = tmp_path_factory.mktemp("batch")
    for name in names:
        target = batch / name / PACKAGE
        shutil.copytree(REPO / "solutions" / PACKAGE, target)
        for edit in (SCENARIOS / name).glob("*.append"):
            module = target / f"{edit.stem}.py"
            module.write_text(module.read_text() + "\n\n" + edit.read_text())
    out = tmp_path_factory.mktemp("grades")
    status = cli.main(["grade", str(batch), "--out", str(out), "-k", KEYWORD])
    assert status == 0
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return _grade(tmp_path_factory, [n for n in NAMES if n not in SLOW])


@pytest.fixture(scope="module")
def graded_slowly(tmp_path_factory):
    return _grade(tmp_path_factory, sorted(SLOW))


def part_scores(results: dict) -> dict[int, tuple[int, int]]:
    """part -> (score, most it could score in the tests run)."""
    parts = {k: (0, 0) for k in GRADED_PARTS}
    for test in results["tests"]:
        k = int(test["number"].split(".")[0])
        parts[k] = (parts[k][0] + test["score"], parts[k][1] + test["max_score"])
    return parts


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NAMES],
)
def test_exactly_the_right_part_is_gated(request, name):
    graded = request.getfixturevalue("graded_slowly" if name in SLOW else "graded")
    expected = json.loads((SCENARIOS / name / "expected.json").read_text())
    results = json.loads((graded / name / "results.json").read_text())
    scores = part_scores(results)
    assert all(most for _, most in scores.values()), scores  # every part was graded
    assert all(scores[k][0] == 0 for k in expected["zero"]), (scores, expected["why"])
    lost_elsewhere = [
        test
        for test in results["tests"]
        if int(test["number"].split(".")[0]) not in expected["zero"]
        and test["score"] < test["max_score"]
    ]
    # A refusal in a thread of the student's fails the test otherwise (its result is missing):
    # ``runs_it`` names the parts whose code runs the refused call so.
    runs_it = expected.get("runs_it", [])
    unexplained = [
        t["name"]
        for t in lost_elsewhere
        if not REFUSED.search(t["output"]) and int(t["number"][0]) not in runs_it
    ]
    assert unexplained == [], expected["why"]
    gated = [
        t["output"] for t in results["tests"] if int(t["number"][0]) in expected["zero"]
    ]
    for pattern in expected["messages"]:
        assert any(re.search(pattern, output) for output in gated), pattern
