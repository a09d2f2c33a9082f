"""Property tests draw the same examples in every run: why hypothesis is pinned exactly.

Hypothesis mixes numbers and strings that it finds in every imported *local* module (outside
site-packages and the standard library, and not a test file) into the examples it draws. An
in-process run imports the student's package, an isolated run imports the sandbox instead, and
every submission holds other constants, so the same derandomized test would draw other inputs
from run to run and from student to student. No public setting turns the mixing off (checked in
hypothesis 6.170's source), so ``autograder/grading/plugin.py`` empties the private hook that collects
them, and ``pyproject.toml`` pins the release whose hook that is.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from hypothesis.errors import FlakyFailure

from autograder.facts.protocol import ErrorInfo, StudentError
from autograder.sources.runner import explain

from .conftest import Run

REPO = Path(__file__).resolve().parents[2]
#: A fast property test whose draws a local constant has been seen to change.
PROPERTY_TEST = (
    "tests/graded/test_part1_attention.py::"
    "test_scaled_dot_product_attention_permutation_equivariance"
)

DRAWS = textwrap.dedent(
    """
    import importlib, sys
    from hypothesis import given, settings, strategies as st

    def draws():
        seen = []

        @settings(derandomize=True, database=None, max_examples=300)
        @given(st.integers(0, 2**31 - 1))
        def record(n):
            seen.append(n)

        record()
        return seen

    before = draws()
    importlib.import_module("local_constants")
    print(before != draws())
    """
)


def draws_change_with_a_local_module(folder: Path, preamble: str = "") -> bool:
    """Whether importing a local module full of constants changes what a test draws."""
    (folder / "local_constants.py").write_text(
        "SEEDS = [" + ", ".join(str(1_000_003 * i) for i in range(1, 40)) + "]\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", preamble + DRAWS],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": f"{folder}:{REPO}"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return run.stdout.split() == ["True"]


def test_a_local_module_steers_hypothesis_unless_the_suite_stops_it(tmp_path):
    assert draws_change_with_a_local_module(tmp_path), (
        "hypothesis no longer mixes in local constants: autograder/grading/plugin.py need not stop it"
    )
    assert not draws_change_with_a_local_module(
        tmp_path, "import autograder.grading.plugin\n"
    )


def test_pyproject_pins_the_hypothesis_installed():
    """One exact pin per Python version range, and this Python got its own."""
    from packaging.markers import Marker

    text = (REPO / "pyproject.toml").read_text()
    pins = re.findall(r'"hypothesis==([^;"]+); (python_version [^"]+)"', text)
    assert pins, "pyproject.toml must pin hypothesis exactly"
    mine = [version for version, marker in pins if Marker(marker).evaluate()]
    assert mine == [importlib.metadata.version("hypothesis")]


def start_drawing(log: Path, *args: str) -> Run:
    """The property test in a pytest process of its own, printing what it draws."""
    command = [sys.executable, "-m", "pytest", PROPERTY_TEST, "-q", "-s"]
    command += ["--hypothesis-verbosity=verbose", "-p", "no:cacheprovider", *args]
    return Run(command, REPO, log)


def drawn_examples(run: Run) -> list[str]:
    return re.findall(r"^\s+(?:seed|t_q|t_k)=.*$", run.output(), re.MULTILINE)


def test_in_process_and_isolated_runs_draw_identical_examples(tmp_path):
    in_process = start_drawing(tmp_path / "in-process.log")
    isolated = start_drawing(tmp_path / "isolated.log", "--isolate")
    try:
        drawn = drawn_examples(in_process)
        assert len(drawn) >= 3 * 4
        assert drawn_examples(isolated) == drawn
    finally:
        isolated.process.kill()  # nothing left running when the first run failed


def test_an_example_that_failed_once_is_explained_by_its_failure():
    """Hypothesis reports an example that failed, then passed when it ran it again, as a
    ``FlakyFailure`` around the first failure: the feedback gives that failure."""
    info = ErrorInfo("ProcessExit", "the worker was killed", "", ("Exception",))
    flaky = FlakyFailure(
        "test_x(seed=1) produces unreliable results", [StudentError(info)]
    )
    text = explain(flaky, hidden=True)
    assert text.startswith("Your code raised ProcessExit: the worker was killed")
    assert "failed once, then passed" in text and "FlakyFailure" in text
