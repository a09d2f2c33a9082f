"""How well diagnosis names mistakes it was not built from, and that it names none where there
is none (``autograder zoo`` prints both).

The restyled mistakes (``autograder.batches.zoo.restyled``) are graded like the zoo's mutants, each on
the parts that can reach its file. Each failing test of its own part is a catch, and a catch
names the right mistake when a "Likely mistake" line of it carries that mistake's diagnosis
phrase: the feedback should explain every failure, not one of them. The correct styles are
graded on the whole suite, and then every one of their tests is diagnosed as if it had failed:
the stronger check, since a correct solution's tests pass and a passing test is never
diagnosed while grading.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.batches.zoo import LIKELY, grade_beside_reference, settings_for
from autograder.batches.zoo.restyled import (
    CORRECT_STYLES,
    RESTYLED,
    Restyled,
    write_correct,
)
from autograder.grading import diagnosis, plugin
from autograder.outputs import report
from autograder.sources import runner

#: The share of a restyled mistake's catches (failing tests of its own part) that must name
#: it (issue 45); a correct solution must get none named.
TARGET = 0.9


@dataclass(frozen=True)
class Named:
    """What each failing test of a restyled mistake's own part named, in the order of the
    feedback (the first is the one its summary shows)."""

    restyled: Restyled
    tests: tuple[tuple[str, ...], ...]  # per failing test, its "Likely mistake" lines

    def names_it(self, lines: tuple[str, ...]) -> bool:
        phrase = self.restyled.mutant.diagnosis.lower()
        return any(phrase in line.lower() for line in lines)

    @property
    def right(self) -> int:
        return sum(map(self.names_it, self.tests))

    @property
    def other(self) -> int:
        """Failing tests that name something, but not this mistake."""
        return sum(bool(t) and not self.names_it(t) for t in self.tests)


@dataclass(frozen=True)
class Rates:
    """How diagnosis fares on the held-apart mistakes and on correct solutions."""

    named: list[Named]
    #: correct style -> the likely mistakes named for it, in failing tests or when each of its
    #: tests is diagnosed as if it had failed
    correct: dict[str, list[str]]

    @property
    def catches(self) -> int:
        return sum(len(n.tests) for n in self.named)

    @property
    def rate(self) -> float:
        """The share of catches that name the right mistake."""
        return sum(n.right for n in self.named) / self.catches if self.catches else 1.0

    @property
    def false_names(self) -> int:
        return sum(map(len, self.correct.values()))

    def summary(self) -> str:
        right = sum(n.right for n in self.named)
        other = sum(n.other for n in self.named)
        first = sum(bool(n.tests) and n.names_it(n.tests[0]) for n in self.named)
        return (
            f"Diagnosis on {len(self.named)} mistakes written differently "
            f"(autograder/batches/zoo/restyled.py), {self.catches} failing tests of their own parts: "
            f"the right mistake named in {right} ({100 * self.rate:.0f} %), another in "
            f"{other}, none in {self.catches - right - other}; named at the first failure of "
            f"{first} of {len(self.named)}.\nCorrect solutions "
            f"({', '.join(self.correct) or 'none'}), every test diagnosed as if it had failed: "
            f"{self.false_names} mistake(s) named."
        )


def measure(
    out: Path,
    jobs: int = 1,
    device: str = "cpu",
    restyled=RESTYLED,
    correct_styles=CORRECT_STYLES,
    isolate=True,
) -> Rates:
    """Grade the restyled mistakes and the correct styles into ``out``; the rates."""
    with tempfile.TemporaryDirectory(prefix="autograder-restyled-") as tmp:
        batch = [(r.name, r.mutant.file, r.write(Path(tmp) / r.name)) for r in restyled]
        correct = write_correct(Path(tmp) / "correct", correct_styles)
        batch += [(name, None, folder) for name, folder in correct]
        grade_beside_reference(
            out, batch, settings_for(out, tmp, device, isolate), jobs
        )
        named = [Named(r, likely_lines(out, r.name, r.mutant.part)) for r in restyled]
        found = {
            name: [line for test in likely_lines(out, name) for line in test]
            for name, _ in correct
        }
        for name, folder in correct:
            found[name] += named_on_every_test(folder, device)
    return Rates(named, found)


def likely_lines(
    out: Path, name: str, part: int | None = None
) -> tuple[tuple[str, ...], ...]:
    """Per failing test of a grade (of ``part`` only, if given), its "Likely mistake" lines."""
    results = json.loads((out / name / report.RESULTS).read_text(encoding="utf-8"))
    return tuple(
        tuple(line.strip() for line in t["output"].splitlines() if LIKELY in line)
        for t in results["tests"]
        if t["status"] == "failed"
        and (part is None or t["name"].startswith(f"Part {part}:"))
    )


def named_on_every_test(folder: Path, device: str, args=()) -> list[str]:
    """The mistakes diagnosis would name for a correct solution if each of its graded tests
    failed: the suite (``args``: more pytest arguments, ``-k``) run in this process (trusted
    code only), each test's requests replayed as a failure's would be."""
    every = _DiagnoseEveryTest()
    runner.run_suite(folder, ["--device", device, *args], [], plugins=[every])
    return every.named


class _DiagnoseEveryTest:
    """A pytest plugin: ``autograder.grading.diagnosis.diagnose`` after every graded test."""

    def __init__(self):
        self.named: list[str] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        result = yield
        journal = item.config.stash.get(plugin.JOURNAL, None)
        part = item.get_closest_marker("part")
        if journal is not None and part is not None:
            hw = item.config.stash[plugin.GATE].hw
            found = diagnosis.diagnose(journal.entries, part.args[0], hw.device)
            if found:
                self.named.append(f"{item.nodeid}: {found}")
        return result
