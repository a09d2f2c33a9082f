"""Which graded tests can tell a mutant from the reference: those that run a function its edits
lie in.

A test that never calls the function an edit lies in runs, on the mutant, exactly the code it
runs on the reference, on the same inputs (the suite draws its examples and seeds alike every
run), so it ends as it does there: the reference's outcome stands for it, and the test need not
run. The zoo's engine tests grade most mutants on these tests alone (``zoo.run``'s ``spread``).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from autograder.facts.points import PACKAGE
from autograder.grading.diagnosis import edited_functions, ran_functions
from autograder.sources import runner
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import Mutant


class _Recorder:
    """A pytest plugin: per test, the package's functions that ran in its setup, call and
    teardown, as ``(file name, first line)``; apart, those that ran as a module of the package
    was imported (the first test to import it would otherwise hold them, and every later test
    uses what they made)."""

    def __init__(self, package: Path):
        self.package = package
        self.ran: dict[str, set[tuple[str, int]]] = {}
        self.at_import: set[tuple[str, int]] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        ran = self.ran.setdefault(item.nodeid, set())
        with ran_functions(self.package, ran, self.at_import):
            return (yield)


class Reach:
    """The functions each graded test runs on the reference (``device``), recorded once in
    this process: the reference is trusted code."""

    def __init__(self, device: str):
        with tempfile.TemporaryDirectory(prefix="autograder-reach-") as tmp:
            root = Path(tmp)
            shutil.copytree(SOLUTIONS, root / PACKAGE)
            recorder = _Recorder(root / PACKAGE)
            tests, _ = runner.run_suite(
                root, ["--device", device], [], plugins=[recorder]
            )
        if not tests or not all(t.passed for t in tests):
            raise RuntimeError("the reference did not pass every graded test")
        self.ran, self.at_import = recorder.ran, recorder.at_import
        self.part = {t.nodeid: t.part for t in tests}

    def tests_running(self, mutant: Mutant) -> frozenset[str]:
        """The tests of the mutant's part that run a function its edits lie in (every test
        of the part, for an edit outside every function or in one that runs at import)."""
        lines = edited_functions(mutant)
        if lines is not None and any((mutant.file, n) in self.at_import for n in lines):
            lines = None
        return frozenset(
            test
            for test, part in self.part.items()
            if part == mutant.part
            and (
                lines is None
                or any((mutant.file, line) in self.ran[test] for line in lines)
            )
        )
