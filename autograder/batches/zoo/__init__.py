"""``autograder zoo``: grade every mutant of the catalogue and check the suite's teeth.

A mutant passes the check when it loses points in the part it breaks; every part that does not
build on that part keeps full marks (partial credit is precise); the broken part's feedback, in
the instructor's file (every test, hidden ones included) and in ``results.json``, carries the
mutant's diagnosis; and every other part that loses points says which part to fix first. The reference, graded in the same batch, keeps
full marks.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from rich.markup import escape

from autograder.facts.points import PACKAGE, PARTS, TOTAL_POINTS, builds_on
from autograder.grading import grade
from autograder.outputs import report
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, Mutant, apply

REFERENCE = "reference"
LIKELY = "Likely mistake:"  # how the graded suite introduces a diagnosis


@dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    lost: dict[int, int]  # part -> points lost
    # why the suite failed to catch it properly; empty when it did
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(mutant: Mutant, out: Path) -> Verdict:
    """Compare a graded mutant's outputs with what its catalogue entry promises."""
    results = json.loads(
        (out / mutant.name / report.RESULTS).read_text(encoding="utf-8")
    )
    feedback = (out / mutant.name / report.INSTRUCTOR).read_text(encoding="utf-8")
    row = report.gradebook_row(out, mutant.name)
    lost = {k: PARTS[k].points - row[f"part{k}"] for k in PARTS}
    may_lose = {mutant.part} | {k for k in PARTS if mutant.part in builds_on(k)}
    problems = []
    if lost[mutant.part] == 0:
        problems.append(f"keeps full marks in part {mutant.part}")
    problems += [
        f"loses {lost[k]} in part {k}, which does not use it"
        for k in PARTS
        if lost[k] and k not in may_lose
    ]
    diagnosis = re.compile(
        f"{LIKELY}[^\\n]*{re.escape(mutant.diagnosis)}", re.IGNORECASE
    )
    outputs = [
        t["output"]
        for t in results["tests"]
        if t["name"].startswith(f"Part {mutant.part}:")
    ]
    if not any(diagnosis.search(o) for o in outputs):
        problems.append(
            f"results.json of part {mutant.part} lacks the diagnosis {mutant.diagnosis!r}"
        )
    if not diagnosis.search(_section(feedback, mutant.part)):
        problems.append(
            f"{report.INSTRUCTOR} of part {mutant.part} lacks the diagnosis "
            f"{mutant.diagnosis!r}"
        )
    for k in sorted(may_lose - {mutant.part}):
        pointer = re.search(
            rf"builds on your part\(s\) [^\n]*\b{mutant.part}\b", _section(feedback, k)
        )
        if lost[k] and not pointer:
            problems.append(
                f"part {k} loses points without pointing to part {mutant.part}"
            )
    return Verdict(mutant, lost, tuple(problems))


def _section(feedback: str, part: int) -> str:
    """The text of one part's section of a grade's Markdown (``report.feedback_md``)."""
    match = re.search(
        rf"^## Part {part}:.*?(?=^## |\Z)", feedback, re.MULTILINE | re.DOTALL
    )
    return match.group(0) if match else ""


def run(
    out: Path,
    jobs: int = 1,
    device: str = "cpu",
    mutants=CATALOGUE,
    isolate=True,
    spread=None,
) -> tuple[list[Verdict], int]:
    """Grade the reference and every mutant into ``out``; the verdicts and the reference's
    score. ``isolate=False`` runs them in this process (``grade.Settings.isolate``): they are
    the reference with one edit each, trusted code.

    ``spread`` (default: every mutant) are graded in every part that can run their changed
    file, so their verdicts check that the parts building on theirs point back to it; the
    others only on the tests of their own part that run their edits (``reach``), where their
    verdicts check the catch and its diagnosis: the engine's tests grade the zoo so, in half
    the time its tests took (half the zoo's mutants reach part 7, whose tests cost most)."""
    spread = mutants if spread is None else spread
    alone = {m.name: m for m in mutants if m not in spread}
    with tempfile.TemporaryDirectory(prefix="autograder-zoo-") as tmp:
        batch = [
            (m.name, m.file, apply(m, SOLUTIONS, Path(tmp) / m.name)) for m in mutants
        ]
        grade_beside_reference(
            out, batch, settings_for(out, tmp, device, isolate), jobs, alone
        )
    rows = report.write_gradebook(
        out, report.read_rows(out, [REFERENCE, *(m.name for m in mutants)])
    )
    score = next(row["score"] for row in rows if row["name"] == REFERENCE)
    return [judge(m, out) for m in mutants], score


def settings_for(out: Path, tmp: str, device: str, isolate: bool) -> grade.Settings:
    return grade.Settings(
        device=device, hidden_paths=(str(out.resolve()), tmp), isolate=isolate
    )


def grade_beside_reference(
    out: Path,
    batch: list[tuple[str, str | None, Path]],
    settings: grade.Settings,
    jobs: int,
    alone: dict[str, Mutant] | None = None,
) -> None:
    """Grade the reference, then each ``(name, changed file, folder)`` of ``batch``, into
    ``out`` (a changed file of None: every file may differ). Each runs only the tests of the
    parts that can reach its changed file (``parts_reaching``), or, for the mutants ``alone``
    names, the tests of its part that run its edits (``reach.Reach``): every other test
    takes the reference's outcome (running it would give that)."""
    with tempfile.TemporaryDirectory(prefix="autograder-zoo-reference-") as tmp:
        staged = apply_none(Path(tmp) / REFERENCE)
        (reference,) = _graded([(REFERENCE, staged)], settings, jobs)
    report.write_submission(out, reference)
    tests_of = {k: {t.nodeid for t in reference.tests if t.part == k} for k in PARTS}
    # Deferred: reach needs diagnosis, which imports this package's mutants.
    from autograder.batches.zoo import reach

    found = reach.Reach(settings.device) if alone else None
    groups: dict[frozenset[str], list[tuple[str, Path]]] = {}
    for name, file, folder in batch:
        if found and name in alone:
            needed = found.tests_running(alone[name])
        else:
            parts = parts_reaching(folder / PACKAGE, file) if file else PARTS
            needed = frozenset().union(*(tests_of[k] for k in parts))
        groups.setdefault(needed, []).append((name, folder))
    for needed, members in groups.items():
        if not needed:  # its edits never run: every outcome is the reference's
            for name, _ in members:
                report.write_submission(out, replace(reference, name=name))
            continue
        only = replace(settings, keyword=selecting(needed, tests_of))
        for graded in _graded(members, only, jobs):
            report.write_submission(out, with_reference(graded, reference, needed))


def _graded(batch, settings: grade.Settings, jobs: int) -> list[grade.Graded]:
    found = []
    for name, graded in grade.grade_many(batch, settings, jobs):
        if graded.failed:
            raise RuntimeError(f"{name}: {graded.detail}")
        found.append(graded)
    return found


def parts_reaching(package: Path, file: str) -> frozenset[int]:
    """The parts some test of which can run the code of ``file`` in ``package``: a test calls
    the files of its part and of the parts it builds on by name (``tests/engine/
    test_builds_on.py`` checks that it reaches no other), and those run what they import."""
    imports = {p.name: _imports_of(p.read_bytes()) for p in package.glob("*.py")}
    reaching = set()
    for k in PARTS:
        todo = ["__init__.py", *(f for j in {k} | builds_on(k) for f in PARTS[j].files)]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += imports.get(name, ())
        if file in seen:
            reaching.add(k)
    return frozenset(reaching)


def package_imports(path: Path) -> frozenset[str]:
    """The files of the package that a module imports, absolutely or relatively (a name
    imported from the package may be a module of it: it counts where it is one)."""
    return _imports_of(path.read_bytes())


@functools.lru_cache(maxsize=256)
def _imports_of(source: bytes) -> frozenset[str]:
    """``package_imports`` of a module's text: a zoo's mutants share most of their files."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: inside the package
                base = f"{PACKAGE}.{base}".rstrip(".")
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            head, _, module = name.partition(".")
            if head == PACKAGE and module:
                found.add(module.split(".")[0] + ".py")
    return frozenset(found)


def selecting(needed: frozenset[str], tests_of: dict[int, set[str]]) -> str:
    """A ``-k`` expression that selects the tests ``needed`` (node ids), perhaps more: empty
    for the whole suite, the graded files' names (``test_part<k>_...``) for whole parts, else
    the tests' own names."""
    parts = {k for k, tests in tests_of.items() if tests & needed}
    if needed == frozenset().union(*(tests_of[k] for k in parts)):
        if parts == {k for k, tests in tests_of.items() if tests}:
            return ""
        return " or ".join(f"test_part{k}_" for k in sorted(parts))
    return " or ".join(sorted({node.split("::")[-1].split("[")[0] for node in needed}))


def with_reference(
    graded: grade.Graded, reference: grade.Graded, needed: frozenset[str]
) -> grade.Graded:
    """A mutant graded on the tests ``needed`` (and maybe more), with the reference's outcome
    of every other test. Fails when a needed test did not run, or one ran that the reference
    did not (a ``-k`` that selected wrong)."""
    ran = {t.nodeid for t in graded.tests}
    known = {t.nodeid for t in reference.tests}
    if not needed <= ran <= known:
        raise RuntimeError(
            f"{graded.name}: {len(needed - ran)} needed tests did not run, "
            f"{len(ran - known)} unknown ones did"
        )
    others = [t for t in reference.tests if t.nodeid not in ran]
    tests = sorted([*graded.tests, *others], key=lambda t: (t.part, t.nodeid))
    return replace(graded, tests=tests)


def apply_none(out: Path) -> Path:
    """The reference itself, staged like a mutant."""
    shutil.copytree(SOLUTIONS, out / SOLUTIONS.name)
    return out


def table(verdicts: list[Verdict], reference: int):
    """The zoo as a rich table: mutant x part x points lost x diagnosis."""
    from rich.table import Table

    t = Table(
        title=f"Bug zoo: {len(verdicts)} mutants; reference {reference}/{TOTAL_POINTS}"
    )
    for column in (
        "mutant",
        "part",
        "lost in part",
        "lost elsewhere",
        "diagnosis",
        "verdict",
    ):
        t.add_column(column)
    for v in verdicts:
        elsewhere = ", ".join(
            f"P{k}:-{n}" for k, n in v.lost.items() if n and k != v.mutant.part
        )
        verdict = "caught" if v.ok else "[red]" + escape("; ".join(v.problems)) + "[/]"
        t.add_row(
            escape(v.mutant.name),
            str(v.mutant.part),
            f"-{v.lost[v.mutant.part]}",
            elsewhere or "-",
            escape(v.mutant.diagnosis),
            verdict,
        )
    return t
