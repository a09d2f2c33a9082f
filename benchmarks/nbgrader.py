"""How fast ``nbgrader autograde`` grades a course, beside ``autograder grade`` on the same
submissions.

The course (``autograder nbgrader``, then ``nbgrader generate_assignment``) gets ``--students``
submissions, each a copy of the release with its modules replaced: half of them the reference,
one a broken upload (a module with a syntax error), the rest bug-zoo mutants spread over the
catalogue. Two commands, each in a fresh process as course staff run them, on the same
``submitted/`` folders:

- ``nbgrader autograde transformer_hw`` (``GradeModules.jobs`` grading processes);
- ``autograder grade submitted --jobs J`` (J: the same number).

Both must give every student the same points in every part (nbgrader's, from its gradebook);
the line says whether they did. Prints a table on stderr and one JSON line on stdout, with the
seconds per student of each command and the machine's load average.

    python benchmarks/nbgrader.py [--students 20] [--jobs J]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# This file's folder first on the path would make `import nbgrader` import this file.
sys.path[0] = str(REPO)

from autograder.batches.nbgrader.course import ASSIGNMENT, build_course
from autograder.facts.points import PACKAGE, PARTS
from autograder.sources.notebook import NAME, check_cell_part
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, apply


def submissions(n: int) -> dict[str, str]:
    """Student id -> what they submit: "reference", "broken" or a mutant's name."""
    n_correct, n_mutants = (n + 1) // 2, n - (n + 1) // 2 - 1
    kinds = ["reference"] * n_correct + ["broken"]
    kinds += [CATALOGUE[i * len(CATALOGUE) // n_mutants].name for i in range(n_mutants)]
    return {f"student{i:03d}": kind for i, kind in enumerate(kinds[:n])}


def submit(course: Path, student: str, kind: str) -> None:
    """``submitted/<student>/transformer_hw``: the release with the student's modules."""
    folder = course / "submitted" / student / ASSIGNMENT
    shutil.copytree(course / "release" / ASSIGNMENT, folder)
    if kind == "broken":
        shutil.copytree(SOLUTIONS, folder / PACKAGE, dirs_exist_ok=True)
        (folder / PACKAGE / "heads.py").write_text("def split_heads(x, n_heads)\n")
    elif kind == "reference":
        shutil.copytree(SOLUTIONS, folder / PACKAGE, dirs_exist_ok=True)
    else:
        apply(next(m for m in CATALOGUE if m.name == kind), SOLUTIONS, folder)


def run(command: list[str], cwd: Path) -> float:
    """Seconds ``command`` took; it must succeed."""
    # nbgrader runs alembic from PATH: the one of this environment.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    start = time.perf_counter()
    done = subprocess.run(
        command, check=False, cwd=cwd, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    return seconds


def nbgrader_parts(course: Path, students) -> dict[str, dict[int, float]]:
    """Each student's points per part, from the course's gradebook."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            nb = gradebook.find_submission_notebook(
                Path(NAME).stem, ASSIGNMENT, student
            )
            found[student] = {check_cell_part(g.name): g.auto_score for g in nb.grades}
    return found


def grade_parts(out: Path) -> dict[str, dict[int, float]]:
    """Each submission's points per part, from ``autograder grade``'s gradebook."""
    with open(out / "gradebook.csv", newline="") as f:
        return {
            row["name"]: {k: float(row[f"part{k}"]) for k in PARTS}
            for row in csv.DictReader(f)
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    if args.students < 4:
        parser.error("--students: at least 4 (correct ones, a broken one, a mutant)")
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="nbgrader-bench-") as tmp:
        course = build_course(Path(tmp) / "course")
        run([python, "-m", "nbgrader", "generate_assignment", ASSIGNMENT], course)
        kinds = submissions(args.students)
        for student, kind in kinds.items():
            submit(course, student, kind)
        load = os.getloadavg()[0]
        autograde = run(
            [python, "-m", "nbgrader", "autograde", ASSIGNMENT]
            + [f"--GradeModules.jobs={args.jobs}"],
            course,
        )
        out = Path(tmp) / "grades"
        grade = run(
            [python, "-m", "autograder", "grade", str(course / "submitted")]
            + ["--out", str(out), "--jobs", str(args.jobs)],
            REPO,
        )
        ours, theirs = nbgrader_parts(course, kinds), grade_parts(out)
    differ = sorted(s for s in kinds if ours[s] != theirs.get(s))
    n = args.students
    print(f"{'command':<22}{'s':>8}{'s/student':>11}", file=sys.stderr)
    for name, seconds in (
        ("nbgrader autograde", autograde),
        ("autograder grade", grade),
    ):
        print(f"{name:<22}{seconds:8.1f}{seconds / n:11.2f}", file=sys.stderr)
    for student in differ:
        print(
            f"{student} ({kinds[student]}): nbgrader {ours[student]}, "
            f"autograder grade {theirs.get(student)}",
            file=sys.stderr,
        )
    line = {
        "students": n,
        "jobs": args.jobs,
        "nbgrader_s_per_student": round(autograde / n, 2),
        "grade_s_per_student": round(grade / n, 2),
        "grades_equal": not differ,
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
