"""Run the graded suite programmatically and read each test's outcome.

``autograder check`` (a student's in-process run of the public tests) and ``autograder.grade``
(sandboxed runs) both run the suite through ``run_suite``. This module ships in the student
handout, so it needs nothing beyond pytest and the protocol.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

REPO = Path(__file__).resolve().parent.parent
GRADED_DIR = REPO / "tests" / "graded"
MAX_MESSAGE = 2000  # characters of feedback per test


class SuiteError(RuntimeError):
    """The suite itself did not run (not a failure of the code under test)."""


@dataclass(frozen=True)
class TestResult:
    nodeid: str
    name: str  # the test function and parameters, e.g. "test_rope[float32]"
    part: int
    points: int
    hidden: bool
    passed: bool
    message: str  # why it failed, for the student; empty when it passed
    # Did not run here (in a handout: needs the grader's answer key).
    skipped: bool = False
    # Other parts the test needs beyond its own part's (its uses marker).
    uses: tuple[int, ...] = ()


class Collector:
    """A pytest plugin that records each graded test's marks and outcome."""

    def __init__(self, scrub: list[str], part: int | None = None):
        self.scrub = scrub
        self.part = part
        self.collected: dict[str, tuple[int, int, bool]] = {}  # (part, points, hidden)
        self.results: dict[str, TestResult] = {}
        self.errors: list[str] = []
        self.hw = None
        self.interrupted = False

    def pytest_keyboard_interrupt(self, excinfo):
        """Ctrl-C, not pytest's own stop after collection errors (a subclass)."""
        self.interrupted = excinfo.type is KeyboardInterrupt

    def pytest_itemcollected(self, item):
        points, part = (
            item.get_closest_marker("points"),
            item.get_closest_marker("part"),
        )
        if points is not None and part is not None:
            hidden = item.get_closest_marker("hidden") is not None
            self.collected[item.nodeid] = (part.args[0], points.args[0], hidden)

    def pytest_collection_modifyitems(self, config, items):
        """``part``: only that part's tests run."""
        if self.part is None:
            return
        keep = [i for i in items if self.collected.get(i.nodeid, (0,))[0] == self.part]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        value = yield
        if fixturedef.argname == "hw":
            self.hw = value
        return value

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        points, part = (
            item.get_closest_marker("points"),
            item.get_closest_marker("part"),
        )
        if points is None or part is None:
            return report
        earlier = self.results.get(item.nodeid)
        if earlier is not None and not earlier.passed:
            return report  # the first failure is the one to explain
        hidden = item.get_closest_marker("hidden") is not None
        passed = not report.failed and not report.skipped
        message = "" if passed else self._message(call, report, hidden)
        name = item.nodeid.rpartition("::")[2]
        uses = item.get_closest_marker("uses")
        self.results[item.nodeid] = TestResult(
            item.nodeid,
            name,
            part.args[0],
            points.args[0],
            hidden,
            passed,
            message,
            skipped=report.skipped,
            uses=tuple(uses.args) if uses else (),
        )
        return report

    def pytest_collectreport(self, report):
        if report.failed:
            self.errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")

    def _message(self, call, report, hidden: bool) -> str:
        if report.skipped:
            return "skipped: " + str(report.longrepr[-1] if report.longrepr else "")
        if call.excinfo is None:
            return self.clean(report.longreprtext)
        return self.clean(explain(call.excinfo.value, hidden))

    def clean(self, text: str) -> str:
        """Feedback without temporary paths or memory addresses, and not too long."""
        for path in self.scrub:
            text = text.replace(path + "/", "").replace(path, "")
        text = re.sub(r"0x[0-9a-fA-F]{6,}", "0x…", text)
        return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def explain(exc: BaseException, hidden: bool) -> str:
    """The concise reason a test failed: what the student must read, never a pytest dump."""
    from autograder.protocol import StudentError

    if isinstance(exc, StudentError):
        text = f"Your code raised {exc.type_name}: {exc.message}"
        frame = None if hidden else student_frame(exc.info.traceback)
        if frame:
            text += f"\n  at {frame}"
        if exc.info.traceback and not hidden:
            text += "\n\n" + exc.info.traceback.rstrip()
        return text
    if isinstance(exc, pytest.fail.Exception):
        return exc.msg
    if isinstance(exc, AssertionError):
        message, _, explanation = str(exc).partition("\nassert ")
        if message.startswith("assert "):
            message, explanation = "", message
        if message:
            return message
        return (
            "assertion failed" if hidden else f"assertion failed: assert {explanation}"
        )
    return f"the test could not use your result: {type(exc).__name__}: {exc}"


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n(?: {4}(.*)\n)?')


def student_frame(traceback_text: str) -> str | None:
    """The innermost frame in the student's package, as ``file:line in function: source``."""
    frames = [
        m
        for m in _FRAME.finditer(traceback_text + "\n")
        if "transformer_hw/" in m[1].replace("\\", "/")
    ]
    if not frames:
        return None
    path, line, function, source = frames[-1].groups()
    where = "transformer_hw/" + path.replace("\\", "/").rpartition("transformer_hw/")[2]
    return f"{where}:{line} in {function}" + (f": {source.strip()}" if source else "")


def run_suite(
    root: Path,
    args: list[str],
    scrub: list[str],
    plugins: list | None = None,
    collector: Collector | None = None,
) -> tuple[list[TestResult], object]:
    """Run the graded suite against ``root``; the results sorted by part, and the ``hw`` used.

    ``plugins`` are more pytest plugins for this run (the sandbox's limits, say);
    ``collector``: one made by the caller, to read more of the run (``Collector.collected``).
    """
    collector = collector or Collector(scrub)
    argv = [str(GRADED_DIR), "-q", "-p", "no:cacheprovider", "--capture=sys"]
    # --tb=no and no gc-heavy unraisable-exception hook: pytest's own failure reports (source
    # excerpts) are never shown, and they cost more than the tests.
    argv += ["--tb=no", "-p", "no:unraisableexception"]
    # No logging plugin: nothing reads captured log records, and its handlers around every
    # test phase cost a tenth of the grading side's time.
    argv += ["-p", "no:logging"]
    # Of the pytest plugins installed on this machine, only hypothesis's: a grade must not
    # depend on what else happens to be installed (a plugin's hooks run for every test).
    argv += ["-p", "_hypothesis_pytestplugin"]
    argv += ["--rootdir", str(REPO), "--submission", str(root), *args]
    output = io.StringIO()
    with (
        contextlib.redirect_stdout(output),
        contextlib.redirect_stderr(output),
        mock.patch.dict(os.environ, {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}),
    ):
        code = pytest.main(argv, plugins=[collector, *(plugins or [])])
    if collector.interrupted:
        raise KeyboardInterrupt
    if (
        code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        or collector.errors
    ):
        detail = "\n".join(collector.errors) or output.getvalue()[-3000:]
        raise SuiteError(
            f"the graded suite did not run (pytest exit {int(code)}):\n{detail}"
        )
    tests = sorted(collector.results.values(), key=lambda t: (t.part, t.nodeid))
    return tests, collector.hw
