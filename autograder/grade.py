"""Grade submissions: stage each one, run the graded suite against it in the sandbox, collect
the outcome of every test.

Why pytest in-process and repeated: the suite is ordinary pytest (fixtures, markers,
hypothesis), and the expensive parts, importing torch and the test modules and starting the
sandbox's template, are paid once per grading process instead of once per submission. ``--jobs``
runs several such processes side by side.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autograder import intake

REPO = Path(__file__).resolve().parent.parent
GRADED_DIR = REPO / "tests" / "graded"
MAX_MESSAGE = 2000  # characters of feedback per test


class GradingError(RuntimeError):
    """The grader itself failed (not the submission): nothing is written for it."""


@dataclass(frozen=True)
class TestResult:
    nodeid: str
    name: (
        str  # the test function with its parameters, e.g. "test_softmax_rows[float32]"
    )
    part: int
    points: int
    hidden: bool
    passed: bool
    message: str  # why it failed, for the student; empty when it passed


@dataclass
class Graded:
    name: str
    tests: list[TestResult]
    problems: list[str] = field(
        default_factory=list
    )  # from intake: broken or missing files
    execution_time: float = 0.0


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    call_timeout: float | None = None  # seconds; None keeps the sandbox's default
    hidden_paths: tuple[str, ...] = ()  # inputs and outputs the worker must not see
    markexpr: str = ""  # "public" for `autograder check`
    keyword: str = (
        ""  # pytest -k: a subset of the suite (the engine's own tests use it)
    )
    isolate: bool = True


class Collector:
    """A pytest plugin that records each graded test's marks and outcome."""

    def __init__(self, scrub: list[str]):
        self.scrub = scrub
        self.results: dict[str, TestResult] = {}
        self.errors: list[str] = []
        self.hw = None

    def pytest_configure(self, config):
        """Skip hypothesis's shrinking: whether a test passes is the same, and known sooner."""
        from hypothesis import Phase, settings

        phases = [Phase.explicit, Phase.reuse, Phase.generate]
        settings.register_profile("grading-no-shrink", settings.default, phases=phases)
        settings.load_profile("grading-no-shrink")

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
        hidden = item.get_closest_marker("hidden") is not None
        earlier = self.results.get(item.nodeid)
        if earlier is not None and not earlier.passed:
            return report  # the first failure is the one to explain
        passed = not report.failed and not report.skipped
        message = "" if passed else self._message(call, report, hidden)
        self.results[item.nodeid] = TestResult(
            item.nodeid, item.nodeid.rpartition("::")[2], part.args[0], points.args[0],
            hidden, passed, message,
        )  # fmt: skip
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


def grade_one(name: str, source: Path, settings: Settings) -> Graded:
    """Stage and grade one submission in this process."""
    with tempfile.TemporaryDirectory(prefix="autograder-stage-") as tmp:
        staged = intake.stage(name, source, Path(tmp) / "submission")
        start = time.monotonic()
        tests = run_suite(staged.root, settings, scrub=[tmp, str(REPO)])
        return Graded(name, tests, staged.problems, time.monotonic() - start)


def run_suite(root: Path, settings: Settings, scrub: list[str]) -> list[TestResult]:
    """Run the graded suite against ``root`` (which holds ``transformer_hw/``)."""
    from autograder import sandbox

    if settings.call_timeout is not None:
        sandbox.LIMITS.call_timeout = settings.call_timeout
        sandbox.LIMITS.submission_timeout = max(900.0, 15 * settings.call_timeout)
    sandbox.LIMITS.hidden = list(settings.hidden_paths)
    collector = Collector(scrub)
    args = [
        str(GRADED_DIR), "-q", "-p", "no:cacheprovider", "--capture=sys",
        "--rootdir", str(REPO), "--submission", str(root), "--device", settings.device,
    ]  # fmt: skip
    if settings.isolate:
        args.append("--isolate")
    if settings.markexpr:
        args += ["-m", settings.markexpr]
    if settings.keyword:
        args += ["-k", settings.keyword]
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        code = pytest.main(args, plugins=[collector])
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    if (
        code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        or collector.errors
    ):
        detail = "\n".join(collector.errors) or output.getvalue()[-3000:]
        raise GradingError(
            f"the graded suite did not run (pytest exit {int(code)}):\n{detail}"
        )
    tests = sorted(collector.results.values(), key=lambda t: (t.part, t.nodeid))
    return _gate_runtime_violations(tests, collector)


def _gate_runtime_violations(
    tests: list[TestResult], collector: Collector
) -> list[TestResult]:
    """A forbidden call seen at run time costs its whole part, also the tests that ran before."""
    found: dict[int, list[str]] = {}
    for v in getattr(collector.hw, "runtime_violations", list)():
        found.setdefault(v.part, []).append(v.describe())
    out = []
    for t in tests:
        if t.part in found and t.passed:
            message = "forbidden call: " + "; ".join(found[t.part])
            t = TestResult(t.nodeid, t.name, t.part, t.points, t.hidden, False, message)
        out.append(t)
    return out


# A pool of grading processes -------------------------------------------------------------------

_SETTINGS: Settings | None = None


def _init_process(settings: Settings) -> None:
    """Ready a grading process: one torch thread (the jobs share the cores), the template."""
    global _SETTINGS
    import torch

    from autograder import sandbox

    _SETTINGS = settings
    torch.set_num_threads(1)
    sandbox.start_zygote()


def _grade_in_pool(name: str, source: str) -> Graded:
    return grade_one(name, Path(source), _SETTINGS)


def grade_many(submissions: list[tuple[str, Path]], settings: Settings, jobs: int):
    """Yield ``(name, Graded | GradingError)`` as each submission finishes."""
    if jobs <= 1:
        _init_process(settings)
        for name, source in submissions:
            try:
                yield name, grade_one(name, source, settings)
            except GradingError as exc:
                yield name, exc
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, context, _init_process, (settings,)) as pool:
        futures = {pool.submit(_grade_in_pool, n, str(s)): n for n, s in submissions}
        try:
            for future in as_completed(futures):
                try:
                    yield futures[future], future.result()
                except GradingError as exc:
                    yield futures[future], exc
        except BaseException:
            for future in futures:
                future.cancel()
            raise
