"""Grade submissions: stage each one, run the graded suite against it in the sandbox, collect
the outcome of every test.

Why pytest in-process and repeated: the suite is ordinary pytest (fixtures, markers,
hypothesis), and the expensive parts, importing torch and the test modules, collecting the
suite and starting the sandbox's template, are paid once per grading process instead of once
per submission. ``--jobs`` runs several such processes side by side.

Whatever goes wrong while grading one submission is that submission's problem: it comes back as
a ``Graded`` with ``failed`` set and the reason among its problems, and the batch goes on. A
grading that costs this process too much (``_CostGuard``: its replies, the comparisons and the
diagnosis of its failures run here, beside every later submission's) is stopped instead, the
tests not run failing with the reason: a final grade.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from autograder.facts import stages
from autograder.facts.points import PACKAGE
from autograder.sources import intake
from autograder.sources.runner import REPO, SuiteError, SuiteSession, TestResult

#: What grading one submission may cost this process, in CPU time: this many times what grading
#: the reference costs it (``REFERENCE_CPU_PER_TEST`` for each test run), and never less than
#: ``COST_FLOOR`` seconds (a few tests, a slow machine). A wrong submission costs more than the
#: reference, as its failures are diagnosed by replay: a wrong softmax 1.3 times the reference,
#: a part 7 whose every generate failed about 8 times (before a process's end was left out of
#: the replays); the multiple leaves room for a submission wrong everywhere.
COST_MULTIPLE = 30
COST_FLOOR = 60.0
#: Seconds of this process's CPU that grading the reference costs per test, on average: the
#: full suite (93 tests) took 3.9 to 4.1 s, measured on the 2-core development machine.
REFERENCE_CPU_PER_TEST = 0.045
#: Memory grading one submission may add to this process's peak (``/proc/self/status``'s
#: ``VmHWM``, reset as it begins): its replies are capped at 64 MiB each, so 1 GB is far beyond
#: what honest code needs.
MAX_MEMORY_GROWTH = 1 << 30

__all__ = [
    "Graded",
    "Settings",
    "TestResult",
    "grade_many",
    "grade_one",
    "submission_digest",
    "suite_digest",
]


@dataclass
class Graded:
    name: str
    tests: list[TestResult]
    problems: list[str] = field(default_factory=list)  # broken or missing files
    execution_time: float = 0.0
    #: The grader itself failed on it (graded again on every run): its gradebook row is empty.
    failed: bool = False
    detail: str = (
        ""  # why, in full, for the course staff's console (never for the student)
    )
    #: Faults on the grader's side it met and got past (a worker lost and retried, a template
    #: started again): also among its problems; such a grade is graded again on the next run.
    grader_events: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    call_timeout: float | None = None  # seconds; None: the sandbox's default
    hidden_paths: tuple[str, ...] = ()  # inputs and outputs the worker must not see
    keyword: str = ""  # pytest -k: a subset of the suite (the engine's tests use it)
    hidden_visibility: str = "after_due_date"  # Gradescope visibility of hidden tests
    #: False: the student code runs in the grading process, unconfined. Only for trusted code
    #: (the bug zoo's mutants of the reference, in the engine's own tests): never for uploads.
    isolate: bool = True


def grade_one(name: str, source: Path | intake.Staged, settings: Settings) -> Graded:
    """Grade one submission in this process, staging it first unless it comes staged; never
    raises for its sake."""
    start = time.monotonic()
    PROCESS.grading = name
    _report_progress(name, None)
    with contextlib.ExitStack() as stack:
        if stages.FOLDER:
            from autograder.sandbox.client import sandbox_cpu

            stack.enter_context(stages.submission(name, sandbox_cpu))
        if isinstance(source, intake.Staged):
            staged, tmp = source, str(source.root)
        else:
            staged = None
            tmp = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="autograder-stage-")
            )
        try:
            if staged is None:
                with stages.timed("staging"):
                    staged = intake.stage(name, source, Path(tmp) / "submission")
            _COST.begin()
            tests = run_isolated(staged.root, settings, scrub=[tmp, str(REPO)])
            events = _grader_events(settings)
        except KeyboardInterrupt:
            raise
        except SuiteError as exc:
            return failure(name, str(exc).replace(tmp, "<submission>"))
        except Exception as exc:  # noqa: BLE001 - one submission's failure stays its own
            return failure(
                name, f"{type(exc).__name__}: {exc}".replace(tmp, "<submission>")
            )
        stopped = [_COST.stopped] if settings.isolate and _COST.stopped else []
        return Graded(
            name,
            tests,
            staged.problems + events + stopped,
            time.monotonic() - start,
            grader_events=events,
        )


def failure(name: str, reason: str) -> Graded:
    """A submission the grader could not grade, with the reason in the words of its problem."""
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    return Graded(
        name,
        [],
        [
            f"the autograder failed on this submission ({first}); please tell the course staff"
        ],
        failed=True,
        detail=reason,
    )


def run_isolated(root: Path, settings: Settings, scrub: list[str]) -> list[TestResult]:
    """Run the graded suite against ``root`` (which holds ``transformer_hw/``) in the sandbox;
    forbidden calls are gated inside the suite (autograder/grading/plugin.py)."""
    sessions = PROCESS.sessions
    if settings not in sessions:
        sessions[settings] = _new_session(settings)
    return sessions[settings].run(root, scrub)


def _grader_events(settings: Settings) -> list[str]:
    """The grader-side events of the submission just graded (none without a session)."""
    session = PROCESS.sessions.get(settings)
    return list(session.events) if session is not None else []


def _new_session(settings: Settings) -> SuiteSession:
    """The suite collected for ``settings``."""
    if settings.isolate:
        from autograder import sandbox

        # It boots while this process imports torch and collects.
        sandbox.start_template(gpu=settings.device.startswith("cuda"))
    # In-process runs (trusted mutants) compute here too: only the sandbox's are guarded.
    plugins = [_PartProgress(), _COST] if settings.isolate else [_PartProgress()]
    return SuiteSession(_suite_args(settings), plugins)


def _suite_args(settings: Settings) -> list[str]:
    """``settings`` as the suite's options: the one route by which they reach its ``hw``
    fixture (``autograder.grading.plugin``)."""
    args = ["--isolate"] if settings.isolate else []
    args += ["--device", settings.device]
    if settings.keyword:
        args += ["-k", settings.keyword]
    if settings.isolate:
        args += [f"--hide={path}" for path in settings.hidden_paths]
        if settings.call_timeout is not None:
            args += ["--call-timeout", str(settings.call_timeout)]
    return args


# What this process holds between submissions ---------------------------------------------------


@dataclass
class ProcessState:
    """Everything a grading process keeps from one submission to the next, in one place."""

    #: The graded suite, collected once per settings (``runner.SuiteSession``).
    sessions: dict[Settings, SuiteSession] = field(default_factory=dict)
    #: What a pool's process grades with (``_init_process``).
    settings: Settings | None = None
    #: Where progress goes (``grade_many``'s ``progress``), if anywhere.
    progress: Callable[[str, int | None], None] | None = None
    grading: str = ""  # the submission under way
    interrupted: bool = False  # Ctrl-C reached this pool process: grade nothing more

    def close_sessions(self, wait: bool = True) -> None:
        """End the graded suites (their threads); ``wait``: for the submission under way."""
        while self.sessions:
            self.sessions.popitem()[1].close(wait)

    def reset(self) -> None:
        """Back to a fresh process's state, the suites ended."""
        self.close_sessions()
        self.__init__()


PROCESS = ProcessState()


def _report_progress(name: str, part: int | None) -> None:
    if PROCESS.progress is not None:
        PROCESS.progress(name, part)


class _PartProgress:
    """Reports the part of each test as it starts, once per part and submission."""

    def __init__(self):
        self._reported: tuple[str, int] | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        marker = item.get_closest_marker("part")
        if marker is not None and (PROCESS.grading, marker.args[0]) != self._reported:
            self._reported = (PROCESS.grading, marker.args[0])
            _report_progress(*self._reported)


class _CostGuard:
    """Stops grading a submission whose grading costs this process more than
    ``COST_MULTIPLE`` times the reference's CPU time, or more than ``MAX_MEMORY_GROWTH`` of
    memory: checked as each test starts, so one test's overrun is the most it gets. That test
    and every later one fail with the reason, which is also one of the submission's problems:
    the grade is final and the batch goes on. The grader's own cost grows only with what the
    student's code sends and does, and the multiple keeps honest code far from the limit, so
    the run-to-run wobble of CPU time never decides a grade."""

    def __init__(self):
        self._cpu = 0.0  # this process's CPU time as the submission began
        self._peak = 0  # and its peak memory, reset then
        #: Why the submission's grading was stopped (None: it was not).
        self.stopped: str | None = None

    def begin(self) -> None:
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")  # the peak, from now
        self._cpu, self._peak = time.process_time(), _peak_memory()
        self.stopped = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        if self.stopped is None:
            self.stopped = self._overrun(len(item.session.items))
        if self.stopped is not None:
            pytest.fail(f"not graded: {self.stopped}", pytrace=False)

    def _overrun(self, tests: int) -> str | None:
        allowed = max(COST_FLOOR, COST_MULTIPLE * REFERENCE_CPU_PER_TEST * tests)
        spent = time.process_time() - self._cpu
        grown = _peak_memory() - self._peak
        if spent > allowed:
            return (
                f"grading your code cost the grading process {spent:.0f} s of CPU time, more "
                f"than the {allowed:.0f} s allowed ({COST_MULTIPLE} times the reference's), "
                "so the tests from here on were not run"
            )
        if grown > MAX_MEMORY_GROWTH:
            return (
                f"grading your code took the grading process {grown / 1e9:.1f} GB of memory "
                f"beyond what it held, more than the {MAX_MEMORY_GROWTH / 1e9:.1f} GB allowed, "
                "so the tests from here on were not run"
            )
        return None


def _peak_memory() -> int:
    """This process's peak resident memory in bytes (0 where ``/proc`` does not say)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


_COST = _CostGuard()


# What a grade depends on ------------------------------------------------------------------------


def suite_digest(settings: Settings, repo: Path = REPO) -> str:
    """The suite a grade came from: the tests, the engine (points table included), the torch
    version and the options that change results; any change regrades every submission.
    (torch's version is read from its metadata: importing torch here would cost the batch's
    process seconds it does not otherwise spend.)"""
    digest = hashlib.sha256()
    files = [repo / "tests" / "conftest.py", *(repo / "tests" / "graded").rglob("*.py")]
    files += [p for p in (repo / "autograder").rglob("*.py") if "zoo" not in p.parts]
    for path in sorted(files):
        digest.update(f"{path.relative_to(repo).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    options = (_torch_version(), settings.keyword, settings.hidden_visibility)
    digest.update(repr(options).encode())
    return digest.hexdigest()


def _torch_version() -> str:
    try:
        return version("torch")
    except PackageNotFoundError:  # a torch without package metadata (built from source)
        import torch

        return torch.__version__


def submission_digest(staged: intake.Staged) -> str:
    """What is graded of a staged submission: its module files and the problems found (their
    compiled code follows from the files)."""
    digest = hashlib.sha256()
    for path in sorted((staged.root / PACKAGE).glob("*.py")):
        digest.update(f"{path.name}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    digest.update("\n".join(staged.problems).encode())
    return digest.hexdigest()


# A pool of grading processes -------------------------------------------------------------------


def _init_pool_process(settings: Settings, updates) -> None:
    """Ready a grading process of a pool that reports its progress into ``updates`` (a
    ``multiprocessing.Queue``: ``put`` never blocks grading, and the process does not wait on
    its reports at exit, also where another process died holding the queue's lock)."""
    updates.cancel_join_thread()
    PROCESS.progress = lambda name, part: updates.put((name, part))
    _init_process(settings)


def _init_process(settings: Settings) -> None:
    """Ready a grading process: the template first (it imports torch in a process of its own
    while this one goes on), then one torch thread here (the jobs share the cores)."""
    from autograder import sandbox

    with stages.timed("the template's start"):
        if settings.isolate:
            sandbox.start_template(gpu=settings.device.startswith("cuda"))
    import torch

    PROCESS.settings = settings
    torch.set_num_threads(1)
    stages.flush("")


def _grade_in_pool(name: str, source: str | intake.Staged) -> Graded:
    # After Ctrl-C the pool still hands out the submissions it had queued: none is graded.
    if PROCESS.interrupted:
        raise KeyboardInterrupt
    try:
        staged = isinstance(source, intake.Staged)
        return grade_one(name, source if staged else Path(source), PROCESS.settings)
    except KeyboardInterrupt:
        PROCESS.interrupted = True
        PROCESS.close_sessions(wait=False)
        raise


def grade_many(
    submissions: list[tuple[str, Path]],
    settings: Settings,
    jobs: int,
    progress: Callable[[str, int | None], None] | None = None,
):
    """Yield ``(name, Graded)`` as each submission finishes, one per submission, always.
    ``progress(name, part)`` is called, from another thread, as a submission starts (``part``
    None) and as it reaches each part."""
    if not submissions:  # all kept or refused: no sandbox (exit would await its start)
        return
    if jobs <= 1:
        _init_process(settings)
        PROCESS.progress = progress
        try:
            for name, source in submissions:
                yield name, grade_one(name, source, settings)
        except BaseException:
            # Ctrl-C: not after the submission under way
            PROCESS.close_sessions(wait=False)
            raise
        finally:
            PROCESS.progress = None
        PROCESS.close_sessions()
        return
    unfinished = yield from _in_pool(submissions, settings, jobs, progress)
    # A grading process died: grade the rest one process each, so only the culprit loses.
    for item in unfinished:
        for name, _ in (yield from _in_pool([item], settings, 1, progress)):
            yield name, failure(name, "its grading process died")


def _relay(updates, progress, stop: threading.Event) -> None:
    """Pass the pool's progress reports on to ``progress`` until ``stop``."""
    while not stop.is_set():
        try:
            progress(*updates.get(timeout=0.2))
        except queue.Empty:
            continue


def _in_pool(submissions, settings: Settings, jobs: int, progress=None):
    """Grade in a pool of processes; the submissions left when the pool broke."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # On the CPU, grading processes fork from a server that imported torch once: spawned, each
    # would import it again (seconds of CPU per process). The server is a fresh process of its
    # own, so no thread of this one (the progress bar's) is forked. CUDA is never started in a
    # process forked from another: spawned there.
    if settings.device == "cpu":
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(
            ["torch", "torch._dynamo", "autograder.sources.runner"]
        )
    else:
        context = multiprocessing.get_context("spawn")
    left = dict(submissions)
    updates, stop = context.Queue(), threading.Event()
    relay = threading.Thread(
        target=_relay, args=(updates, progress or (lambda *_: None), stop), daemon=True
    )
    relay.start()
    with (
        _stopping(stop),
        ProcessPoolExecutor(
            jobs, context, _init_pool_process, (settings, updates)
        ) as pool,
    ):
        futures = {
            pool.submit(
                _grade_in_pool, n, s if isinstance(s, intake.Staged) else str(s)
            ): n
            for n, s in submissions
        }
        try:
            for future in as_completed(futures):
                name = futures[future]
                try:
                    graded = future.result()
                except BrokenProcessPool:
                    break
                except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be sent back
                    graded = failure(name, f"{type(exc).__name__}: {exc}")
                del left[name]
                yield name, graded
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return list(left.items())


@contextlib.contextmanager
def _stopping(stop: threading.Event):
    """Set ``stop`` on the way out, however the block ends."""
    try:
        yield
    finally:
        stop.set()
