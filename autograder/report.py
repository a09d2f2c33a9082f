"""Grades out: Gradescope's ``results.json``, a ``feedback.md`` for a person, the gradebook.

Everything is written to a temporary file first and then renamed into place, so an interrupted
batch never leaves a half-written file, and a file that exists is a finished grade. Nothing
written depends on when or where grading ran (except ``execution_time``), so the same submission
always gives the same bytes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from rich.table import Table

from autograder.grade import Graded
from autograder.points import PARTS, TOTAL_POINTS, fix_first
from autograder.runner import TestResult

RESULTS, FEEDBACK, GRADEBOOK = "results.json", "feedback.md", "gradebook.csv"


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_graded(out: Path, name: str) -> bool:
    """A finished ``results.json`` is there (files appear only complete, see ``atomic_write``)."""
    try:
        return "tests" in json.loads((out / name / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def write_submission(out: Path, graded: Graded) -> None:
    """``results.json`` then ``feedback.md`` (results last would leave feedback orphaned)."""
    atomic_write(out / graded.name / FEEDBACK, feedback_md(graded))
    atomic_write(out / graded.name / RESULTS, results_json(graded))


def part_scores(tests: list[TestResult]) -> dict[int, int]:
    scores = dict.fromkeys(PARTS, 0)
    for t in tests:
        scores[t.part] += t.points if t.passed else 0
    return scores


def results_json(graded: Graded) -> str:
    numbers = _numbers(graded.tests)
    tests = [
        {
            "name": f"Part {t.part}: {t.name}",
            "number": numbers[t.nodeid],
            "score": t.points if t.passed else 0,
            "max_score": t.points,
            "status": "passed" if t.passed else "failed",
            "output": t.message,
            "visibility": "after_published" if t.hidden else "visible",
        }
        for t in graded.tests
    ]
    scores = part_scores(graded.tests)
    lines = [*graded.problems] + [
        f"Part {k} ({PARTS[k].title}): {scores[k]}/{PARTS[k].points}" for k in PARTS
    ]
    results = {
        "score": sum(scores.values()),
        "max_score": TOTAL_POINTS,
        "execution_time": round(graded.execution_time, 1),
        "output": "\n".join(lines),
        "tests": tests,
    }
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


def _numbers(tests: list[TestResult]) -> dict[str, str]:
    counts: dict[int, int] = {}
    numbers = {}
    for t in tests:
        counts[t.part] = counts.get(t.part, 0) + 1
        numbers[t.nodeid] = f"{t.part}.{counts[t.part]}"
    return numbers


def feedback_md(graded: Graded) -> str:
    scores = part_scores(graded.tests)
    lines = [
        f"# Feedback for {graded.name}",
        "",
        f"**Score: {sum(scores.values())}/{TOTAL_POINTS}**",
    ]
    if graded.problems:
        lines += ["", "## Problems with the submission", ""]
        lines += [f"- {p}" for p in graded.problems]
    first = fix_first(graded.tests)
    for k, part in PARTS.items():
        tests = [t for t in graded.tests if t.part == k]
        lines += ["", f"## Part {k}: {part.title} ({scores[k]}/{part.points})", ""]
        weak = first.get(k)
        if scores[k] < part.points and weak:
            listed = ", ".join(str(j) for j in weak)
            lines += [
                f"This part builds on your part(s) {listed}, which lost points: fix those first.",
                "",
            ]
        for t in tests:
            mark = "passed" if t.passed else "FAILED"
            hidden = " (hidden test)" if t.hidden else ""
            lines.append(
                f"- {mark}: `{t.name}`{hidden}, {t.points} pt{'s' * (t.points != 1)}"
            )
            if t.message:
                lines += ["", _indent(t.message), ""]
    return "\n".join(lines).rstrip() + "\n"


def _indent(text: str) -> str:
    return "\n".join("      " + line if line else "" for line in text.splitlines())


def gradebook_row(out: Path, name: str) -> dict[str, str | int] | None:
    """A gradebook row from a finished ``results.json`` (``None`` when there is none)."""
    try:
        results = json.loads((out / name / RESULTS).read_text(encoding="utf-8"))
        parts = dict.fromkeys(PARTS, 0)
        for t in results["tests"]:
            parts[int(str(t["number"]).split(".")[0])] += t["score"]
        row = {
            "name": name,
            "score": results["score"],
            "max_score": results["max_score"],
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return row | {f"part{k}": parts[k] for k in PARTS}


def write_gradebook(out: Path, names: list[str]) -> list[dict]:
    rows = [row for name in sorted(names) if (row := gradebook_row(out, name))]
    buffer = io.StringIO()
    fields = ["name", "score", "max_score", *(f"part{k}" for k in PARTS)]
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(out / GRADEBOOK, buffer.getvalue())
    return rows


def summary_table(names: list[str], rows: list[dict], notes: dict[str, str]) -> Table:
    """One line per submission of the batch, the ungraded ones too."""
    table = Table(title="Grades")
    table.add_column("submission")
    table.add_column("score", justify="right")
    for k in PARTS:
        table.add_column(f"P{k}", justify="right")
    table.add_column("notes")
    by_name = {row["name"]: row for row in rows}
    for name in sorted(names):
        row = by_name.get(name)
        if row is None:
            table.add_row(
                name, "-", *("-" for _ in PARTS), notes.get(name, "not graded")
            )
            continue
        cells = [str(row[f"part{k}"]) for k in PARTS]
        score = f"{row['score']}/{row['max_score']}"
        table.add_row(name, score, *cells, notes.get(name, ""))
    return table
