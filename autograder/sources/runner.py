"""Run the graded suite programmatically and read each test's outcome.

``autograder check`` (a student's in-process run of the public tests) runs it once through
``run_suite``; ``autograder.grading.grade`` (sandboxed runs) through a ``SuiteSession``, which collects it
once per grading process. This module ships in the student handout, so it needs nothing beyond
pytest and the protocol.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import queue
import re
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from autograder.facts import safe_text, stages
from autograder.facts.points import from_other_parts

REPO = Path(__file__).resolve().parents[2]
GRADED_DIR = REPO / "tests" / "graded"
MAX_MESSAGE = 2000  # characters of feedback per test
#: What the grader's stand-in for a submitted file it cannot use raises on import
#: (``intake.stage``): that file's problem, never a line of the student's to quote.
UNUSABLE_FILE = "UnusableFile"


class SuiteError(RuntimeError):
    """The suite itself did not run (not a failure of the code under test)."""


class SandboxUnavailable(SuiteError):
    """No worker can be started here (``template_client.spawn``): raised inside a test, it
    makes the whole run the grader's failure, never a failed test."""


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
    # The suite's "Likely mistake" for this failure, if it named one.
    diagnosis: str = ""
    # What the student's code raised in this failure (TimeoutError, ProcessExit, ...), if it did.
    error: str = ""
    # Where ``diagnosis`` names this part's mistake on top of earlier parts' (another part
    # failed): (part, the phrases its mistake is named by) of each.
    on_top: tuple = ()
    # Where the diagnosis found several mistakes that answer as the student's code did:
    # (description, the phrases it is named by) of each; the part's other failures decide.
    among: tuple = ()
    # The known mistakes whose every mutant could act here and answered otherwise than the
    # student's code: (description, the phrases it is named by) of each.
    refuted: tuple = ()


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
        # Why a test could not run the code under test (a ``SuiteError`` inside it).
        self.grader_failure = ""

    def pytest_keyboard_interrupt(self, excinfo):
        """Ctrl-C, not pytest's own stop after collection errors (a subclass)."""
        self.interrupted = excinfo.type is KeyboardInterrupt

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session):
        with stages.timed("the suite's collection"):
            return (yield)

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
        if call.excinfo is not None and call.excinfo.errisinstance(SuiteError):
            self.grader_failure = str(call.excinfo.value)
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
        exc = None if passed or call.excinfo is None else call.excinfo.value
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
            diagnosis=self.clean(diagnosis(exc)) if exc is not None else "",
            error=student_error(exc) if exc is not None else "",
            on_top=getattr(exc, "on_top", ()),
            among=getattr(exc, "among", ()),
            refuted=getattr(exc, "refuted", ()),
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
    from autograder.facts.protocol import StudentError

    if isinstance(exc, StudentError) and exc.type_name == UNUSABLE_FILE:
        return f"{exc.message} (so this test could not run)"
    if isinstance(exc, StudentError):
        # The class's name is the student's to choose, and may be long.
        text = f"Your code raised {safe_text.capped(exc.type_name)}: {exc.message}"
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
    inner = getattr(exc, "exceptions", None)  # an exception group (no builtin on 3.10)
    if isinstance(inner, (list, tuple)) and len(inner) == 1:
        # Hypothesis wraps a failure that did not repeat when it ran the example again
        # (FlakyFailure): the failure is what the student must read.
        return (
            f"{explain(inner[0], hidden)}\n(this example failed once, then passed when run "
            f"again: {type(exc).__name__})"
        )
    return f"the test could not use your result: {type(exc).__name__}: {exc}"


#: How the graded suite introduces a diagnosis (tests/graded/compare.py).
LIKELY = "Likely mistake:"
#: What a failure the replay found no one known mistake for says (``autograder.grading.diagnosis``).
NO_MATCH = "No known mistake matches what your code did here."


def diagnosis(exc: BaseException) -> str:
    """The suite's diagnosis of a failure: the text after its last ``Likely mistake:`` line
    (indented too: pytest indents the lines of an ``assert``'s message after the first).
    Only the suite's own words count: the message of what the student's code raised, which
    the suite may quote, is left out first (a student may raise "Likely mistake: ...")."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, (list, tuple)) and len(inner) == 1:
        return diagnosis(inner[0])
    text = exc.msg if isinstance(exc, pytest.fail.Exception) else str(exc)
    raised = _raised(exc)
    theirs: set[str] = set()  # its lines, however a message quoting it trimmed them
    if raised is not None:
        text = text.replace(str(raised), "").replace(raised.message, "")
        theirs = {line.strip() for line in raised.message.splitlines()}
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.lstrip().startswith(LIKELY) and line.strip() not in theirs
    ]
    return lines[-1][len(LIKELY) :].strip().rstrip(".") if lines else ""


def student_error(exc: BaseException) -> str:
    """The kind of what the student's code raised behind a failure (``TimeoutError`` when a
    call ran out of time), found also where the suite wrapped it in a message of its own; none
    where the grader's stand-in for an unusable file raised (``UNUSABLE_FILE``)."""
    raised = _raised(exc)
    return "" if raised is None or unusable_file(exc) else raised.type_name


def unusable_file(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the grader's stand-in for a file it could not use: no code
    of the student's ran, so there is no line to quote and no mistake to diagnose."""
    raised = _raised(exc)
    return raised is not None and raised.type_name == UNUSABLE_FILE


def _raised(exc: BaseException):
    """The ``StudentError`` behind ``exc``: itself, its cause or context, or an exception
    group's member; None when the student's code raised nothing."""
    from autograder.facts.protocol import StudentError

    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, StudentError):
            return current
        inner = getattr(current, "exceptions", None)
        todo += [*inner] if isinstance(inner, (list, tuple)) else []
        todo += [current.__cause__, current.__context__]
    return None


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


def _argv(root: Path, args: list[str]) -> list[str]:
    argv = [str(GRADED_DIR), "-q", "-p", "no:cacheprovider"]
    # --tb=no and no gc-heavy unraisable-exception hook: pytest's own failure reports (source
    # excerpts) are never shown, and they cost more than the tests.
    argv += ["--tb=no", "-p", "no:unraisableexception"]
    # No logging plugin: nothing reads captured log records, and its handlers around every
    # test phase cost a tenth of the grading side's time.
    argv += ["-p", "no:logging"]
    # Of the pytest plugins installed on this machine, only hypothesis's: a grade must not
    # depend on what else happens to be installed (a plugin's hooks run for every test).
    argv += ["-p", "_hypothesis_pytestplugin"]
    return [*argv, "--rootdir", str(REPO), "--submission", str(root), *args]


class _TerminalInto:
    """pytest's terminal reporter writes into ``output``: it is kept (assertion messages need
    it) while ``sys.stdout`` stays the caller's. The reporter takes the ``sys.stdout`` of when
    it is made (``pytest_configure``)."""

    def __init__(self, output):
        self.output = output
        self.saved = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self):
        self.saved, sys.stdout = sys.stdout, self.output

    def pytest_sessionstart(self):
        sys.stdout = self.saved


_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


class _InstalledPluginsOff:
    """A pytest plugin that keeps the machine's installed plugins out of one ``pytest.main``,
    used as a context around it (which puts the environment back whatever happens).

    pytest reads ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` only while it starts, so the variable is set
    for that and put back at ``pytest_configure``. Left set for the run (a session's run lasts as
    long as its process grades), it would reach every process started meanwhile: a notebook
    kernel, a test's own ``pytest`` without its plugins.
    """

    def __enter__(self):
        self._saved = os.environ.get(_AUTOLOAD)
        os.environ[_AUTOLOAD] = "1"
        self._restored = False
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self) -> None:
        self.restore()

    def restore(self) -> None:
        if not self._restored:
            self._restored = True
            if self._saved is None:
                os.environ.pop(_AUTOLOAD, None)
            else:
                os.environ[_AUTOLOAD] = self._saved


def _suite_error(code, collector: Collector, output: str) -> SuiteError:
    detail = "\n".join(collector.errors) or output[-3000:]
    return SuiteError(
        f"the graded suite did not run (pytest exit {int(code)}):\n{detail}"
    )


def _sorted(results: dict[str, TestResult]) -> list[TestResult]:
    """The results by part, with no likely mistake named in a failing test that runs the code
    of another part whose failures its own part does not explain: the failure may come from
    there (``from_other_parts``), unless it names its part's own mistake on top of those
    parts' (``on_top``), each of whose failing tests names that one mistake; nor one another
    failure of the part refutes (``_unrefuted``). (The diagnosis
    leaves them out as it goes, ``autograder.grading.diagnosis.amended``, but every public
    test runs before every hidden one, and whether a part explains another's failures is
    known only once all have run.)"""
    elsewhere = from_other_parts(results.values())
    kept = [
        _unnamed(t) if t.nodeid in elsewhere and not t.on_top else t
        for t in results.values()
    ]
    kept = _among_decided(kept, set(elsewhere))
    kept = [
        _unnamed(t)
        if t.nodeid in elsewhere and not _on_top_holds(t, elsewhere, kept)
        else t
        for t in kept
    ]
    decided = _unrefuted(kept, set(elsewhere))
    return sorted(decided, key=lambda t: (t.part, t.nodeid))


def _unrefuted(results: list[TestResult], elsewhere: set[str]) -> list[TestResult]:
    """``results`` without a name that another failure of the same part refutes: there, every
    mutant of that mistake could act and answered otherwise than the student's code, so the
    code does not make it, whatever one test's answers share with it (a cache that returns
    only the new keys answers the attention's requests as one whose length never advances).
    Not by a failure that may come from another part (``elsewhere``)."""
    refuted: dict[int, list[str]] = {}
    for t in results:
        if not t.passed and t.nodeid not in elsewhere:
            for _, phrases in t.refuted:
                refuted.setdefault(t.part, []).extend(p.lower() for p in phrases)
    return [
        _unnamed(t)
        if t.diagnosis
        and any(p in t.diagnosis.lower() for p in refuted.get(t.part, []))
        else t
        for t in results
    ]


def _among_decided(results: list[TestResult], elsewhere: set[str]) -> list[TestResult]:
    """``results`` where a failure whose diagnosis found several mistakes (``among``) names the
    one of them that the part's other failures name, where exactly one of them does: each
    answers this test as the student's code did, and the part's other tests show which. Not
    a failure that may come from another part (``elsewhere``)."""
    decided = []
    for t in results:
        if t.among and NO_MATCH in t.message and t.nodeid not in elsewhere:
            named = [
                o.diagnosis.lower()
                for o in results
                if o.part == t.part and o.nodeid != t.nodeid and o.diagnosis
            ]
            shown = [
                d
                for d, phrases in t.among
                if any(p.lower() in n for p in phrases for n in named)
            ]
            if len(shown) == 1:
                message = t.message.replace(NO_MATCH, f"{LIKELY} {shown[0]}")
                t = replace(t, message=message, diagnosis=shown[0])
        decided.append(t)
    return decided


def _on_top_holds(result: TestResult, elsewhere: dict[str, set[int]], results) -> bool:
    """Whether ``result`` names its mistake on top of each part its failure may come from
    (``elsewhere``), where every failing test of that part names it (a phrase of it), but one
    where the student's code stopped at an error that names no mistake: its code after the
    error, where the mistake acts, never ran there (a check of its own beside the mistake), so
    it shows no other. A part it is not named on top of holds where each of its failures
    names nothing and may come only from those it is named on top of (part 3's attention
    failing with part 1's): the replay on top of their mistakes answered as the student's
    code did, that part's code as the reference's."""
    on_top = dict(result.on_top)
    if not on_top:
        return False
    for t in results:
        if t.part not in elsewhere[result.nodeid] or t.passed or t.skipped:
            continue
        named = t.diagnosis.lower()
        if t.part not in on_top:
            came_from = elsewhere.get(t.nodeid)
            if named or not came_from or not came_from <= set(on_top):
                return False
        elif not named and t.error:
            continue
        elif not named or not any(p.lower() in named for p in on_top[t.part]):
            return False
    return True


def _unnamed(result: TestResult) -> TestResult:
    """``result`` without its "Likely mistake" lines."""
    if result.passed or LIKELY not in result.message:
        return result
    lines = [
        line
        for line in result.message.splitlines()
        if not line.lstrip().startswith(LIKELY)
    ]
    return replace(result, message="\n".join(lines), diagnosis="")


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
    argv = [*_argv(root, args), "--capture=sys"]
    output = io.StringIO()
    with (
        contextlib.redirect_stdout(output),
        contextlib.redirect_stderr(output),
        _InstalledPluginsOff() as plugins_off,
    ):
        code = pytest.main(argv, plugins=[collector, plugins_off, *(plugins or [])])
    if collector.interrupted:
        raise KeyboardInterrupt
    if collector.grader_failure:
        raise SuiteError(collector.grader_failure)
    if (
        code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        or collector.errors
    ):
        raise _suite_error(code, collector, output.getvalue())
    return _sorted(collector.results), collector.hw


@dataclass
class _Job:
    root: Path
    scrub: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    results: list[TestResult] = field(default_factory=list)
    error: str = ""
    events: list[str] = field(default_factory=list)  # the sandbox's ``grader_events``


class SuiteSession:
    """The graded suite configured and collected once, then run against one submission after
    another: what ``autograder grade`` does in each grading process.

    Why: setting pytest up and collecting the suite cost a tenth of a second, paid per
    submission by ``run_suite``. Here one ``pytest.main`` runs in a thread of its own; its test
    loop takes submissions from a queue and runs every collected test against each, tearing the
    session's fixtures down after the last (the ``hw`` of one submission never serves the next).
    Only student code in the sandbox prints, so nothing is captured; pytest's own report goes
    into a buffer.
    """

    def __init__(self, args: list[str], plugins: list | None = None):
        self._args = args
        self._plugins = plugins or []
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ended = ""
        #: What happened on the grader's side during the last ``run`` (a worker retried, a
        #: template started again): a grade that met any is not kept.
        self.events: list[str] = []

    def run(self, root: Path, scrub: list[str]) -> list[TestResult]:
        """The results of the suite against ``root`` (which holds ``transformer_hw/``)."""
        if self._ended:
            raise SuiteError(self._ended)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._main, name="graded-suite", daemon=True
            )
            self._thread.start()
        job = _Job(Path(root), scrub)
        self._jobs.put(job)
        while not job.done.wait(1.0):
            if not self._thread.is_alive() and not job.done.is_set():
                raise SuiteError(self._ended or "the graded suite stopped")
        self.events = job.events
        if job.error:
            raise SuiteError(job.error)
        return job.results

    def close(self, wait: bool = True) -> None:
        """End the session once the submission under way is done; without ``wait`` (after an
        interrupt) return at once: the thread is a daemon, it ends with the process."""
        if self._thread is not None and self._thread.is_alive():
            self._jobs.put(None)
            if wait:
                self._thread.join()

    def _main(self) -> None:
        collector = Collector([])
        loop = _SubmissionLoop(self._jobs, collector)
        argv = [*_argv(Path(REPO), self._args), "--capture=no"]
        output = io.StringIO()
        try:
            with _InstalledPluginsOff() as plugins_off:
                plugins = [collector, loop, _TerminalInto(output), plugins_off]
                code = pytest.main(argv, plugins=[*plugins, *self._plugins])
            detail = loop.usage_error or output.getvalue()
            self._ended = str(_suite_error(code, collector, detail))
        finally:
            loop.fail_waiting(self._ended or "the graded suite stopped")


class _SubmissionLoop:
    """The test loop of a ``SuiteSession``: every collected test, once per submission."""

    def __init__(self, jobs: queue.SimpleQueue, collector: Collector):
        self.jobs = jobs
        self.collector = collector
        # Why the suite refused to run (pytest prints it to stderr).
        self.usage_error = ""

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self):
        try:
            return (yield)
        except pytest.UsageError as exc:
            self.usage_error = str(exc)
            raise

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        if self.collector.errors:
            return None  # pytest's own loop reports them; the session ends
        # Torch, pytest and the collected suite live as long as the session: they are kept out
        # of the garbage collector's full passes, which would otherwise walk all of them every
        # few submissions (a fifth of a second each). Garbage first, or it would stay for good.
        gc.collect()
        gc.freeze()
        while (job := self.jobs.get()) is not None:
            try:
                job.results = self._run(session, job)
                job.events = list(getattr(self.collector.hw, "grader_events", []))
            except SuiteError as exc:
                job.error = str(exc)
            except Exception as exc:  # noqa: BLE001 - the submission's problem, not the loop's
                job.error = f"the graded suite failed: {type(exc).__name__}: {exc}"
            finally:
                job.done.set()
        return True

    def _run(self, session, job: _Job) -> list[TestResult]:
        session.config.option.submission = str(job.root)
        self.collector.scrub = job.scrub
        self.collector.results = {}
        self.collector.hw = None
        self.collector.grader_failure = ""
        items = session.items
        for item, nextitem in zip(items, [*items[1:], None], strict=True):
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        # pytest's terminal reporter keeps every report for a closing summary that a session
        # grading one submission after another never prints: a batch of hundreds would pile
        # them up (memory, and the garbage collector's time).
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.stats.clear()
        if self.collector.grader_failure:
            raise SuiteError(self.collector.grader_failure)
        return _sorted(self.collector.results)

    def fail_waiting(self, reason: str) -> None:
        """Fail the submissions still waiting when the session ended."""
        while True:
            try:
                job = self.jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.error = reason
                job.done.set()
