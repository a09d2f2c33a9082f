"""How diagnosis fares on the held-out set (``mistakes.py``), which was written from the
mistakes' descriptions alone, never from the zoo's code: the rates the engine is judged by.

Run from the repository root (in-process: the cases are the reference's or alice's code with
a few edits, trusted code):

    .venv/bin/python -m tests.engine.heldout.measure [--jobs N] [--set {heldout,fresh,third,fourth,fifth,sixth,seventh}] [NAME ...]

``--set fresh`` measures the second set (``fresh.py``), written later from the descriptions alone;
``--set third`` the third (``third.py``), written later still by another hand, ``--set fourth``
the fourth (``fourth.py``), ``--set fifth`` the fifth (``fifth.py``), ``--set sixth`` the
sixth (``sixth.py``) and ``--set seventh`` the seventh (``seventh.py``), each by yet another.

Each case is graded on the tests of the parts that can run its edited files (part 7 narrowed
to the case's ``select``, as ``check_heldout`` runs it), with diagnosis on, and its feedback's
"Likely mistake" lines counted:

* a catch: a failing test of the case's own part (its ``part``, and a ``multi`` case's
  ``also_parts`` with the description of each: ``also``);
* right: a catch whose likely mistakes include the expected description (or the diagnosis
  phrase of a zoo mutant it describes, the words the suite's own messages name it by);
* wrong in its own part: a catch that names another mistake (any name, for ``unknown``);
* from an earlier part: a catch in a ``multi`` case's later part whose test fails without that
  part's own edits too (graded so, apart): the failure comes from the earlier part, where the
  rule is to name nothing (or the part's own mistake, where it shows as well). The rate of right
  names is given with and without them;
* wrong in later parts: a failing test of another part that names any mistake (such a
  failure comes from the case's part: the rule is to name nothing there);
* named on a correct case: any name in any test, its every test diagnosed as if it had failed
  (as ``autograder zoo`` does for the correct styles); and a correct case's failed tests.

The rate of right names counts the catches of mistakes with a name (``unknown`` ones have
none: their catches count for wrong names only).

Fix diagnosis by classes of mistakes, never for an entry of this set: it is kept apart from
what the engine is tuned on.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from autograder.batches.zoo import LIKELY, parts_reaching
from autograder.batches.zoo.rates import _DiagnoseEveryTest
from autograder.facts.points import part_of_file
from autograder.grading import grade
from autograder.sources import runner
from autograder.sources.zoo.mutants import CATALOGUE
from tests.engine.heldout.check_heldout import PART_FILES, SETS, build
from tests.engine.heldout.mistakes import KINDS, Case


@dataclass
class Tally:
    """The counts of one kind of case (or of all)."""

    cases: int = 0
    catches: int = 0
    unnamed: int = 0  # catches of a mistake with no name (``unknown``)
    right: int = 0
    wrong_own: int = 0
    # catches in a multi case's later part that fail without that part's own edits too: they
    # come from an earlier part, where the rule is to name nothing (or the part's own mistake)
    from_earlier: int = 0
    from_earlier_named_other: int = 0
    from_earlier_right: int = 0  # of ``right``, those among ``from_earlier``
    later_failures: int = 0
    wrong_later: int = 0
    correct_tests: int = 0
    named_correct: int = 0
    correct_failed: int = 0

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def line(self, label: str) -> str:
        if label == "correct":
            return (
                f"{label:>10}: {self.cases} cases, {self.named_correct} mistakes named "
                f"over {self.correct_tests} tests diagnosed as if failed; "
                f"{self.correct_failed} tests failed"
            )
        named = self.catches - self.unnamed
        rate = f" ({100 * self.right / named:.0f} %)" if named else ""
        line = (
            f"{label:>10}: {self.cases} cases, catches {self.catches}, right "
            f"{self.right}/{named}{rate}, wrong in own part "
            f"{self.wrong_own}/{self.catches}, wrong in later parts "
            f"{self.wrong_later}/{self.later_failures} failing tests"
        )
        if self.from_earlier:
            own = named - self.from_earlier
            right = self.right - self.from_earlier_right
            line += (
                f"; of the catches, {self.from_earlier} come from an earlier part "
                f"({self.from_earlier_named_other} named another mistake): without them "
                f"right {right}/{own}"
                + (f" ({100 * right / own:.0f} %)" if own else "")
            )
        return line


def parts_to_run(case: Case, folder: Path) -> frozenset[int]:
    """The parts whose tests can run the case's edited files."""
    files = {case.file, *(file for file, _, _ in case.extra)}
    package = folder / "transformer_hw"
    return frozenset().union(*(parts_reaching(package, f) for f in files))


def keyword(case: Case, parts: frozenset[int]) -> str:
    """A ``-k`` for those parts' test files, part 7 narrowed to the case's ``select``."""
    chosen = []
    for part in sorted(parts):
        if part == 7 and case.select:
            chosen.append(f"({case.select})")
        else:
            chosen += [f"{name.removesuffix('.py')}" for name in PART_FILES[part]]
    return " or ".join(chosen)


def expected_of(case: Case) -> dict[int, str | None]:
    """The description each of the case's own parts should name."""
    expected = {case.part: case.expected}
    for part, description in zip(case.also_parts, case.also[1:]):
        expected[part] = description
    return expected


def phrases(description: str | None) -> tuple[str, ...]:
    """The words that name a description: itself, and the diagnosis phrase of each zoo
    mutant it describes (the suite's own messages name a mistake by that phrase, in words of
    their own around it, as ``autograder zoo`` judges a catch)."""
    if description is None:
        return ()
    found = {m.diagnosis for m in CATALOGUE if m.description == description}
    return (description, *sorted(found))


def without_part(case: Case, part: int) -> Case:
    """The case with its edits of ``part``'s files left out, the others kept."""
    edits = () if part_of_file(case.file) == part else case.edits
    extra = tuple(e for e in case.extra if part_of_file(e[0]) != part)
    return replace(case, edits=edits, extra=extra)


def tally(case: Case, tests, from_earlier: frozenset[str] = frozenset()) -> Tally:
    """``from_earlier``: the catches (test names) that fail without their part's own edits."""
    found = Tally(cases=1)
    own = expected_of(case)
    for t in tests:
        if t.passed or t.skipped:
            continue
        names = [
            line.split(LIKELY, 1)[1].strip()
            for line in t.message.splitlines()
            if LIKELY in line
        ]
        if t.part in own:
            found.catches += 1
            found.unnamed += own[t.part] is None
            want = phrases(own[t.part])
            earlier = t.name in from_earlier
            found.from_earlier += earlier
            if any(w.lower() in n.lower() for w in want for n in names):
                found.right += 1
                found.from_earlier_right += earlier
            elif names:
                found.wrong_own += 1
                found.from_earlier_named_other += earlier
                print(f"    wrong in part {t.part}: {t.name}: {names}")
        else:
            found.later_failures += 1
            if names:
                found.wrong_later += 1
                print(f"    named in part {t.part}: {t.name}: {names}")
    return found


def measure(
    cases: list[Case], jobs: int, failures: dict[str, list] | None = None
) -> dict[str, Tally]:
    """The tallies per kind; ``failures`` gets each case's failing tests, ``(part, test,
    message)``."""
    failures = {} if failures is None else failures
    by_kind: dict[str, Tally] = defaultdict(Tally)
    with tempfile.TemporaryDirectory(prefix="heldout-measure-") as tmp:
        settings = grade.Settings(hidden_paths=(tmp,), isolate=False)
        groups: dict[str, list[tuple[str, Path]]] = defaultdict(list)
        folders = {}
        for case in cases:
            folder = build(case, Path(tmp) / case.name)
            folders[case.name] = folder
            if case.kind != "correct":
                groups[keyword(case, parts_to_run(case, folder))].append(
                    (case.name, folder)
                )
        by_name = {case.name: case for case in cases}
        earlier = _from_earlier(
            [c for c in cases if c.kind == "multi"], Path(tmp), settings, jobs
        )
        for k, members in groups.items():
            for name, graded in grade.grade_many(
                members, replace(settings, keyword=k), jobs
            ):
                case = by_name[name]
                if graded.failed:
                    raise RuntimeError(f"{name}: {graded.detail}")
                found = tally(case, graded.tests, earlier.get(name, frozenset()))
                failures[name] = [
                    (t.part, t.name, t.message)
                    for t in graded.tests
                    if not (t.passed or t.skipped)
                ]
                print(
                    f"{name} ({case.kind}, part {case.part}): catches {found.catches}, "
                    f"right {found.right}, wrong {found.wrong_own}, later "
                    f"{found.wrong_later}/{found.later_failures}",
                    flush=True,
                )
                by_kind[case.kind].add(found)
        for case in cases:
            if case.kind == "correct":
                every = _DiagnoseEveryTest()
                results, _ = runner.run_suite(folders[case.name], [], [], [every])
                failed = [t.name for t in results if not (t.passed or t.skipped)]
                print(
                    f"{case.name} (correct): failed {failed}, named {every.named}",
                    flush=True,
                )
                by_kind["correct"].add(
                    Tally(
                        cases=1,
                        correct_tests=len(results),
                        named_correct=len(every.named),
                        correct_failed=len(failed),
                    )
                )
    return by_kind


def _from_earlier(
    cases: list[Case], tmp: Path, settings, jobs: int
) -> dict[str, frozenset[str]]:
    """Per multi case, the tests of each own part but its first that fail without that part's
    own edits too (graded on the case with them left out)."""
    variants, parts = [], {}
    for case in cases:
        for part in sorted(expected_of(case))[1:]:
            name = f"{case.name}--without-part{part}"
            folder = build(without_part(case, part), tmp / name)
            variants.append((keyword(case, frozenset({part})), name, folder))
            parts[name] = (case.name, part)
    found: dict[str, set[str]] = defaultdict(set)
    for k in {k for k, _, _ in variants}:
        members = [(name, folder) for kk, name, folder in variants if kk == k]
        for name, graded in grade.grade_many(
            members, replace(settings, keyword=k), jobs
        ):
            case_name, part = parts[name]
            found[case_name] |= {
                t.name
                for t in graded.tests
                if t.part == part and not (t.passed or t.skipped)
            }
    return {name: frozenset(tests) for name, tests in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="cases to measure (default: all)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--set", choices=sorted(SETS), default="heldout")
    parser.add_argument("--out", type=Path, help="write each case's failing tests here")
    args = parser.parse_args()
    cases = [c for c in SETS[args.set] if not args.names or c.name in args.names]
    failures: dict[str, list] = {}
    by_kind = measure(cases, args.jobs, failures)
    if args.out:
        args.out.write_text(json.dumps(failures, indent=1), encoding="utf-8")
    total = Tally()
    print()
    for kind in KINDS:
        if kind in by_kind:
            print(by_kind[kind].line(kind))
            if kind != "correct":
                total.add(by_kind[kind])
    print(total.line("all wrong"))


if __name__ == "__main__":
    main()
