"""The graded suite's collection rules (``autograder/grading/plugin.py``), run on small suites of our own.

Each suite is a copy of the plugin beside a ``graded/`` folder of made-up tests, run by pytest's
own ``pytester``: points that do not add up to ``PARTS``, a test with two visibilities, a test
without a part or of a part ``PARTS`` lacks must each stop the run before any test runs, saying
why. And a pytest plugin that happens to be installed takes no part in a grade.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from autograder.facts.points import PACKAGE, PARTS

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]


def graded_test(name: str, *marks: str) -> str:
    decorators = "".join(f"@pytest.mark.{mark}\n" for mark in marks)
    return f"{decorators}def {name}():\n    pass\n"


def run_suite(pytester, tests: list[str], *args: str):
    """Collect ``tests`` as the whole graded suite under a copy of the plugin."""
    suite = pytester.mkdir("suite")
    shutil.copy(REPO / "tests" / "conftest.py", suite / "conftest.py")
    (suite / "graded").mkdir()
    source = "import pytest\n\n\n" + "\n\n".join(tests)
    (suite / "graded" / "test_made_up.py").write_text(source)
    return pytester.runpytest(str(suite), "--collect-only", "-q", *args)


def whole_suite(points_off_by: int = 0) -> list[str]:
    """One hidden test per part, each worth the part's points (the last ``points_off_by`` off)."""
    last = max(PARTS)
    return [
        graded_test(
            f"test_part{k}",
            f"points({part.points + (points_off_by if k == last else 0)})",
            f"part({k})",
            "hidden",
        )
        for k, part in PARTS.items()
    ]


def test_a_suite_whose_points_add_up_is_collected(pytester):
    result = run_suite(pytester, whole_suite())
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"*{len(PARTS)} tests collected*"])


def test_points_that_do_not_add_up_to_the_parts_stop_the_run(pytester):
    result = run_suite(pytester, whole_suite(points_off_by=1))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    last = max(PARTS)
    result.stderr.fnmatch_lines(
        [f"*test points per part {{{last}: {PARTS[last].points + 1}}} differ*"]
    )


def test_a_selection_need_not_add_up(pytester):
    result = run_suite(pytester, whole_suite(points_off_by=1), "-k", "part1")
    assert result.ret == pytest.ExitCode.OK


NEED_MARKS = "graded tests need points, part and one visibility"
UNKNOWN = max(PARTS) + 1


@pytest.mark.parametrize(
    ("marks", "why"),
    [
        (("points(1)", "part(1)", "public", "hidden"), NEED_MARKS),
        (("points(1)", "public"), NEED_MARKS),
        (("points(1)", f"part({UNKNOWN})", "public"), f"part {UNKNOWN} is not in"),
    ],
    ids=["two visibilities", "no part", "unknown part"],
)
def test_a_test_without_its_marks_stops_the_run(pytester, marks, why):
    result = run_suite(pytester, [*whole_suite(), graded_test("test_odd", *marks)])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*test_odd: {why}*"])


def test_a_pytest_plugin_installed_on_the_machine_changes_no_grade(
    tmp_path, monkeypatch
):
    """Only the suite's own plugins take part in a grade: a pytest plugin that happens to be
    installed (here one that reports every test passed) is not loaded by ``run_suite``."""
    from autograder.sources.runner import run_suite as run_graded_suite

    (tmp_path / "everything_passes.py").write_text(
        "import pytest\n\n\n"
        "@pytest.hookimpl(wrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    report = yield\n"
        "    report.outcome = 'passed'\n"
        "    return report\n"
    )
    info = tmp_path / "everything_passes-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: everything-passes\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[pytest11]\neverything = everything_passes\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # The stubs run in this process: the package modules of earlier in-process runs (the graded
    # tests' own submission) come back afterwards.
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == PACKAGE}
    try:
        tests, _ = run_graded_suite(REPO / "assignments", ["-k", "part2"], [])
    finally:
        for name in [k for k in sys.modules if k.split(".")[0] == PACKAGE]:
            del sys.modules[name]
        sys.modules.update(saved)
    assert tests and not any(t.passed for t in tests)
