"""Run the graded suite programmatically and read each test's outcome: ``autograder check``.

A student runs the public tests against their own code in-process (tracebacks and ``pdb``
work) and sees the points they would get and what to fix. The grader (``autograder.grade``)
reuses the same collector for sandboxed runs. This module ships in the student handout, so it
needs nothing beyond pytest, rich and the protocol.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

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
    # Other parts the test needs beyond its own part's (its uses marker).
    uses: tuple[int, ...] = ()


class Collector:
    """A pytest plugin that records each graded test's marks and outcome."""

    def __init__(self, scrub: list[str]):
        self.scrub = scrub
        self.results: dict[str, TestResult] = {}
        self.errors: list[str] = []
        self.hw = None
        self.interrupted = False

    def pytest_keyboard_interrupt(self, excinfo):
        """Ctrl-C, not pytest's own stop after collection errors (a subclass)."""
        self.interrupted = excinfo.type is KeyboardInterrupt

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
            tuple(uses.args) if uses else (),
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


def run_suite(
    root: Path, args: list[str], scrub: list[str], plugins: list | None = None
) -> tuple[list[TestResult], object]:
    """Run the graded suite against ``root``; the results sorted by part, and the ``hw`` used.

    ``plugins`` are more pytest plugins for this run (the sandbox's limits, say).
    """
    collector = Collector(scrub)
    argv = [
        # --tb=no and no gc-heavy unraisable-exception hook: pytest's own failure reports
        # (source excerpts) are never shown, and they cost more than the tests.
        str(GRADED_DIR), "-q", "--tb=no", "-p", "no:cacheprovider",
        "-p", "no:unraisableexception", "--capture=sys",
        "--rootdir", str(REPO), "--submission", str(root), *args,
    ]  # fmt: skip
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
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


def check(path: Path, device: str = "cpu") -> int:
    """Print the public tests' score for the code in ``path`` and what to fix."""
    from rich.console import Console

    from autograder.points import PARTS

    console = Console()
    root = path.resolve()
    if not (root / "transformer_hw").is_dir():
        console.print(f"[red]{path} has no transformer_hw/ folder[/]")
        return 2
    args = ["-m", "public", "--device", device]
    try:
        tests, _ = run_suite(root, args, scrub=[str(root)])
    except SuiteError as exc:
        console.print(str(exc), style="red", markup=False)
        return 2
    for k, part in PARTS.items():
        mine = [t for t in tests if t.part == k]
        got, total = (
            sum(t.points for t in mine if t.passed),
            sum(t.points for t in mine),
        )
        style = "green" if got == total else "red"
        console.print(f"[{style}]Part {k} ({part.title}): {got}/{total}[/]")
        for t in mine:
            if not t.passed:
                console.print(f"  [bold]{t.name}[/]: {t.message.splitlines()[0]}")
    earned, total = (
        sum(t.points for t in tests if t.passed),
        sum(t.points for t in tests),
    )
    console.print(
        f"\n[bold]Public tests: {earned}/{total} points.[/] The hidden tests count too; run "
        "`pytest tests -k <test name>` to debug one."
    )
    return 0
