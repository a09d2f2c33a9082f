"""Batches graded once per test session and shared by the engine's end-to-end tests, and the
way those tests start whole processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from autograder.batches import zoo
from autograder.batches.zoo import examples
from autograder.commands import cli
from autograder.facts.points import PACKAGE, TOTAL_POINTS
from autograder.sandbox.client import IsolatedSubmission
from autograder.sandbox.executor import InProcessSubmission
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, Mutant, apply

#: One torch thread in this process and in every process it starts: pytest-xdist's workers,
#: their commands and their graders share the machine's cores, and a torch thread that waits
#: for work spins on a core another process needs (a third of the suite's CPU time, measured on
#: two cores). Grading processes run one thread each anyway (``grade._init_process``).
os.environ["OMP_NUM_THREADS"] = "1"
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "submissions"
#: Part 4 (RoPE): quick, and the example batch and the mutant below make mistakes there.
KEYWORD = "part4"
MUTANT = next(m for m in CATALOGUE if m.name == "rope-wrong-direction")


@contextlib.contextmanager
def probed_submission(kind: str, tmp_path_factory, probes: str):
    """The reference with ``probes`` added to masks.py, ``"in-process"`` or ``"isolated"``."""
    root = tmp_path_factory.mktemp("probed") / "sub"
    shutil.copytree(SOLUTIONS, root / PACKAGE)
    masks = root / PACKAGE / "masks.py"
    masks.write_text(masks.read_text() + probes)
    with (InProcessSubmission if kind == "in-process" else IsolatedSubmission)(
        root
    ) as hw:
        yield hw


class Run:
    """A command started in a fresh process, its output kept in a file. Tests start their slow
    commands side by side and finish them afterwards: each mostly starts Python and torch."""

    def __init__(self, command: list[str], cwd: Path, log: Path, env=None):
        self.log = log
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def finish(self) -> tuple[int, str]:
        """The exit status and the output."""
        code = self.process.wait(timeout=900)
        return code, self.log.read_text(encoding="utf-8", errors="replace")

    def output(self) -> str:
        """The output of a command that must succeed."""
        code, out = self.finish()
        assert code == 0, out[-3000:]
        return out


#: The files that take longest, first: under pytest-xdist's ``--dist loadfile`` a long file that
#: starts last keeps one worker busy while the other has run out of files. (xdist keeps this
#: order with ``--no-loadscope-reorder``, as the README's test command runs it; by default it
#: sorts the files by their number of tests.)
LONGEST_FIRST = (
    "test_zoo.py",
    "test_zoo_second_half.py",
    "test_nbgrader.py",
    "test_release.py",
    "test_readme.py",
    "test_adversarial.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other files keep their order.
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def graded_batch(tmp_path_factory) -> tuple[Path, Path]:
    """The example batch (the kept examples and those written from the zoo) plus a zoo mutant,
    graded once on part 4 in this process (the pool of `--jobs` has tests of its own):
    ``(batch, out)``."""
    folder = tmp_path_factory.mktemp("graded-batch")
    batch, out = folder / "batch", folder / "grades"
    shutil.copytree(EXAMPLES, batch)
    examples.write(batch)
    apply(MUTANT, SOLUTIONS, batch / MUTANT.name)
    assert cli.main(["grade", str(batch), "--out", str(out), "-k", KEYWORD]) == 0
    return batch, out


def zoo_half(half: int) -> tuple[Mutant, ...]:
    """Every other mutant of the bug zoo, from the ``half``-th (0 or 1): the zoo is the
    costliest thing the engine's tests do, so two test files each grade half of it and
    pytest-xdist hands them to both workers."""
    return CATALOGUE[half::2]


#: The mutants graded in every part their file reaches, where the parts that build on theirs
#: must point back to it: the first of each part. The others are graded in their own part
#: alone (``zoo.run``), which checks the catch and its diagnosis at a third of the cost.
SPREAD = tuple({m.part: m for m in reversed(CATALOGUE)}.values())


def grade_zoo(tmp_path_factory, mutants) -> dict[str, zoo.Verdict]:
    """``mutants`` graded (the ``SPREAD`` ones in every part they reach, the others in their
    own part), with the reference, in this process one after another: the suite's other tests keep the second core busy, and a pool of grading
    processes would import torch again in each (seconds of CPU apiece). They run in-process:
    what is checked here is the suite's teeth, which the sandbox does not change (the other
    engine tests grade mutants through it, and ``autograder zoo`` always does)."""
    out = tmp_path_factory.mktemp("zoo")
    found, reference = zoo.run(out, mutants=mutants, isolate=False, spread=SPREAD)
    assert reference == TOTAL_POINTS, f"the reference got {reference}/{TOTAL_POINTS}"
    return {v.mutant.name: v for v in found}
