"""Grade submissions: stage each one, run the graded suite against it in the sandbox, collect
the outcome of every test.

Why pytest in-process and repeated: the suite is ordinary pytest (fixtures, markers,
hypothesis), and the expensive parts, importing torch and the test modules and starting the
sandbox's template, are paid once per grading process instead of once per submission. ``--jobs``
runs several such processes side by side.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import intake
from autograder.runner import REPO, SuiteError, TestResult, run_suite

__all__ = [
    "Graded",
    "GradingError",
    "Settings",
    "TestResult",
    "grade_many",
    "grade_one",
]


class GradingError(RuntimeError):
    """The grader itself failed (not the submission): nothing is written for it."""


@dataclass
class Graded:
    name: str
    tests: list[TestResult]
    problems: list[str] = field(default_factory=list)  # broken or missing files
    execution_time: float = 0.0


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    call_timeout: float | None = None  # seconds; None: the sandbox's default
    hidden_paths: tuple[str, ...] = ()  # inputs and outputs the worker must not see
    keyword: str = ""  # pytest -k: a subset of the suite (the engine's tests use it)


def grade_one(name: str, source: Path, settings: Settings) -> Graded:
    """Stage and grade one submission in this process."""
    with tempfile.TemporaryDirectory(prefix="autograder-stage-") as tmp:
        staged = intake.stage(name, source, Path(tmp) / "submission")
        start = time.monotonic()
        tests = run_isolated(staged.root, settings, scrub=[tmp, str(REPO)])
        return Graded(name, tests, staged.problems, time.monotonic() - start)


def run_isolated(root: Path, settings: Settings, scrub: list[str]) -> list[TestResult]:
    """Run the graded suite against ``root`` (which holds ``transformer_hw/``) in the sandbox."""
    from autograder import sandbox

    limits = sandbox.Limits(hidden=list(settings.hidden_paths))
    if settings.call_timeout is not None:
        limits.call_timeout = settings.call_timeout
        limits.submission_timeout = max(480.0, 8 * settings.call_timeout)
    args = ["--isolate", "--device", settings.device]
    if settings.keyword:
        args += ["-k", settings.keyword]
    try:  # forbidden calls are gated inside the suite (tests/conftest.py)
        tests, _ = run_suite(root, args, scrub, [sandbox.LimitsPlugin(limits)])
    except SuiteError as exc:
        raise GradingError(str(exc)) from None
    return tests


# A pool of grading processes -------------------------------------------------------------------

_SETTINGS: Settings | None = None


def _init_process(settings: Settings) -> None:
    """Ready a grading process: one torch thread (the jobs share the cores), the template."""
    global _SETTINGS
    import torch

    from autograder import sandbox

    _SETTINGS = settings
    torch.set_num_threads(1)
    sandbox.start_template()


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
