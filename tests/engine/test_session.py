"""``runner.SuiteSession``: the suite collected once per grading process, then run against one
submission after another, must grade each exactly as a run of its own does."""

from __future__ import annotations

import gc
import importlib.metadata
import os
import sys
from pathlib import Path

import pytest

from autograder.grading import grade
from autograder.sandbox import template_client
from autograder.sources.release import SOLUTIONS
from autograder.sources.runner import SuiteError, SuiteSession, run_suite
from autograder.sources.zoo.mutants import CATALOGUE, apply

REPO = Path(__file__).resolve().parents[2]
#: Sandboxed, on the parts the mutant below breaks (and one it does not).
ARGS = ["--isolate", "-k", "part1 or part2"]


def live(kind: type) -> int:
    gc.collect()
    return sum(type(o) is kind for o in gc.get_objects())


def outcomes(tests) -> list[tuple[str, bool, str]]:
    return [(t.nodeid, t.passed, t.message) for t in tests]


def test_one_session_grades_each_submission_as_a_run_of_its_own(tmp_path):
    mutant = next(m for m in CATALOGUE if m.name == "mask-after-softmax")
    # The reference twice: nothing of the stubs or the mutant graded between reaches it.
    roots = [
        REPO / "solutions",
        REPO / "assignments",
        apply(mutant, SOLUTIONS, tmp_path / "mutant"),
        REPO / "solutions",
    ]
    session = SuiteSession(ARGS, [])
    together, reports_held = [], []
    try:
        for root in roots:
            together.append(outcomes(session.run(root, [])))
            reports_held.append(live(pytest.TestReport))
    finally:
        session.close()
    # Nothing of a graded submission stays behind: a batch of hundreds must not pile up.
    assert reports_held[-1] <= reports_held[0], reports_held
    apart = [outcomes(run_suite(root, ARGS, [], [])[0]) for root in roots]
    assert together == apart
    reference, stubs, wrong, _ = together
    assert reference and all(passed for _, passed, _ in reference)
    assert not any(passed for _, passed, _ in stubs)
    diagnosed = [m for _, passed, m in wrong if not passed and "mask" in m]
    assert diagnosed, "the mutant loses points with its diagnosis"


def test_a_suite_that_cannot_run_fails_every_submission_with_the_reason():
    session = SuiteSession(["--no-such-option"])
    try:
        for _ in range(2):
            with pytest.raises(SuiteError, match="did not run"):
                session.run(REPO / "solutions", [])
    finally:
        session.close()


def test_a_sandbox_that_cannot_start_is_the_graders_failure_not_a_zero(monkeypatch):
    """A template that dies as it starts (torch failing to import in the boundary, say) makes
    every test fail: reported as such, that would be a silent zero for every student. It is
    the grader's failure instead (``Graded.failed``: red on the console, graded again on the
    next run), with the template's last words. Its later requests fail at once; the next
    submission tries afresh."""
    dies = "import sys; sys.exit('Traceback: KeyError: no user for uid 0')"
    started = []

    def command(code, gpu=False):
        started.append(code)
        return [sys.executable, "-c", dies], ""

    monkeypatch.setattr(template_client.bubblewrap, "command", command)
    monkeypatch.setattr(template_client, "_TEMPLATE", None)
    monkeypatch.setattr(template_client, "_GPU", False)
    monkeypatch.setattr(grade, "PROCESS", grade.ProcessState())
    settings = grade.Settings(keyword="part4")  # several tests, each with requests
    try:
        starts = []
        for name in ("first", "second"):
            graded = grade.grade_one(name, REPO / "solutions", settings)
            assert graded.failed and not graded.tests, graded
            assert "cannot start a worker" in graded.detail
            assert "KeyError: no user for uid 0" in graded.detail
            starts.append(len(started))
        # Afresh (a template and its replacement), not once per test (part 4 has nine).
        assert starts[1] - starts[0] == 2, starts
    finally:
        grade.PROCESS.reset()
        if template_client.running() is not None:
            template_client.running().close()


def test_a_batch_with_nothing_to_grade_starts_no_grading_process(monkeypatch):
    """Uploads that were all kept or refused need no sandbox (whose exit would wait for it to
    finish importing torch: seconds per empty Gradescope upload)."""

    def started(*args):
        raise AssertionError("a grading process was set up with nothing to grade")

    monkeypatch.setattr(grade, "_init_process", started)
    monkeypatch.setattr(grade, "_in_pool", started)
    for jobs in (1, 2):
        assert list(grade.grade_many([], grade.Settings(), jobs)) == []


class PluginsSeen:
    """Records the names of the plugins a session's pytest registered."""

    names: tuple[str, ...] = ()

    def pytest_configure(self, config):
        self.names = tuple(name for name, _ in config.pluginmanager.list_name_plugin())


def test_a_session_leaves_out_installed_plugins_and_not_the_environment(monkeypatch):
    """The machine's pytest plugins stay out of the graded suite, by a switch pytest reads as
    it starts; a session's pytest runs on as long as its process grades, and the switch must
    not stay set meanwhile, or every process started then (a test's own pytest, a notebook
    kernel) inherits it."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    installed = {e.name for e in importlib.metadata.entry_points(group="pytest11")}
    seen = PluginsSeen()
    session = SuiteSession(["-k", "test_softmax_matches_formula"], [seen])
    try:
        assert session.run(REPO / "solutions", [])
        assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in os.environ  # still running
    finally:
        session.close()
    assert installed and seen.names
    assert not installed & set(seen.names)


LIMITS_TEST = """
def test_limits(hw):
    assert hw.limits.call_timeout == 2.5
    assert hw.limits.submission_timeout == 480.0  # the default, above 8 x 2.5
    assert hw.limits.hidden == ["/nowhere"]
"""


def test_grading_settings_reach_the_sandbox_as_the_suites_options(tmp_path):
    """``grade.Settings`` becomes the suite's options (one route), and the ``hw`` fixture
    builds the sandbox's limits from them."""
    args = grade._suite_args(
        grade.Settings(call_timeout=2.5, hidden_paths=("/nowhere",), keyword="part1")
    )
    assert args == [
        "--isolate",
        "--device",
        "cpu",
        "-k",
        "part1",
        "--hide=/nowhere",
        "--call-timeout",
        "2.5",
    ]
    test = tmp_path / "test_limits.py"
    test.write_text(LIMITS_TEST)
    ran = [
        str(test),
        "-q",
        "-p",
        "autograder.grading.plugin",
        "--submission",
        str(SOLUTIONS.parent),
    ]
    assert pytest.main([*ran, *args[:3], *args[5:]], plugins=[]) == 0
