"""How well diagnosis names mistakes it was not built from, and that it names none where there
is none (``autograder zoo`` prints both).

The restyled mistakes (``autograder.zoo.restyled``) are graded like the zoo's mutants, each on
the parts that can reach its file; a right diagnosis is a "Likely mistake" line of its part
that carries its mistake's diagnosis phrase. The correct styles are graded on the whole suite,
and then every one of their tests is diagnosed as if it had failed: the stronger check, since
a correct solution's tests pass and a passing test is never diagnosed while grading.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import diagnosis, plugin, report, runner
from autograder.zoo import LIKELY, grade_beside_reference, settings_for
from autograder.zoo.restyled import CORRECT_STYLES, RESTYLED, Restyled, write_correct

#: The share of restyled mistakes whose own description must come back (issue 45); a correct
#: solution must get none named.
TARGET = 0.9


@dataclass(frozen=True)
class Named:
    """The likely mistakes a restyled mistake's part named, against the one it makes."""

    restyled: Restyled
    lines: tuple[str, ...]  # the "Likely mistake" lines of its part's failing tests

    def _own(self, line: str) -> bool:
        return self.restyled.mutant.diagnosis.lower() in line.lower()

    @property
    def right(self) -> bool:
        """Its own mistake is named."""
        return any(map(self._own, self.lines))

    @property
    def others(self) -> tuple[str, ...]:
        """The lines that name something else."""
        return tuple(line for line in self.lines if not self._own(line))


@dataclass(frozen=True)
class Rates:
    """How diagnosis fares on the held-apart mistakes and on correct solutions."""

    named: list[Named]
    #: correct style -> the likely mistakes named for it, in failing tests or when each of its
    #: tests is diagnosed as if it had failed
    correct: dict[str, list[str]]

    @property
    def right(self) -> int:
        return sum(n.right for n in self.named)

    @property
    def rate(self) -> float:
        """The share of restyled mistakes whose own description was named."""
        return self.right / len(self.named) if self.named else 1.0

    @property
    def false_names(self) -> int:
        return sum(map(len, self.correct.values()))

    def summary(self) -> str:
        total = len(self.named)
        wrong = sum(bool(n.others) for n in self.named)
        unnamed = sum(not n.lines for n in self.named)
        return (
            f"Diagnosis on {total} mistakes written differently (autograder/zoo/restyled.py): "
            f"the right description named for {self.right} ({100 * self.rate:.0f} %); "
            f"something else named beside or instead for {wrong}; nothing named for "
            f"{unnamed}.\nCorrect solutions ({', '.join(self.correct)}), every test "
            f"diagnosed as if it had failed: {self.false_names} mistake(s) named."
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
        named = [
            Named(r, tuple(likely_lines(out, r.name, r.mutant.part))) for r in restyled
        ]
        found = {name: likely_lines(out, name) for name, _ in correct}
        for name, folder in correct:
            found[name] += named_on_every_test(folder, device)
    return Rates(named, found)


def likely_lines(out: Path, name: str, part: int | None = None) -> list[str]:
    """The "Likely mistake" lines of a grade's failing tests (of ``part`` only, if given)."""
    results = json.loads((out / name / report.RESULTS).read_text(encoding="utf-8"))
    return [
        line.strip()
        for t in results["tests"]
        if t["status"] == "failed"
        and (part is None or t["name"].startswith(f"Part {part}:"))
        for line in t["output"].splitlines()
        if LIKELY in line
    ]


def named_on_every_test(folder: Path, device: str, args=()) -> list[str]:
    """The mistakes diagnosis would name for a correct solution if each of its graded tests
    failed: the suite (``args``: more pytest arguments, ``-k``) run in this process (trusted
    code only), each test's requests replayed as a failure's would be."""
    every = _DiagnoseEveryTest()
    runner.run_suite(folder, ["--device", device, *args], [], plugins=[every])
    return every.named


class _DiagnoseEveryTest:
    """A pytest plugin: ``autograder.diagnosis.diagnose`` after every graded test."""

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
