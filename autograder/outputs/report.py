"""Grades out: Gradescope's ``results.json``, ``feedback.md`` for the student, the instructor's
file, the gradebook.

Everything is written to a temporary file first and then renamed into place, so an interrupted
batch never leaves a half-written file, and a file that exists is a finished grade. Grades are
private: files are written 0600 in folders of 0700. Nothing written depends on when or where
grading ran (except ``execution_time``), so the same submission always gives the same bytes.

What a student sees before the hidden tests are shown (the top-level ``output`` and the visible
tests) is computed from the visible tests alone, so it cannot tell hidden outcomes apart. The
same holds for ``feedback.md``: it is safe to send before the due date, and names no hidden
test. ``instructor.md`` holds everything, hidden tests included.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path

from autograder.facts import findings, safe_text
from autograder.facts.points import PARTS, TOTAL_POINTS, fix_first
from autograder.grading.grade import Graded
from autograder.sources.runner import TestResult

RESULTS, FEEDBACK, GRADEBOOK = "results.json", "feedback.md", "gradebook.csv"
INSTRUCTOR = "instructor.md"
#: A submission's files, in the order they are written: ``results.json`` last marks it done.
FILES = (FEEDBACK, INSTRUCTOR, RESULTS)
VISIBILITY_WORDS = {
    "after_due_date": "after the due date",
    "after_published": "once grades are published",
}


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner can enter (created, or tightened, to 0700)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (0600) through a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def current_results(out: Path, name: str, digests: dict[str, str]) -> dict | None:
    """The finished ``results.json`` (files appear only complete, see ``atomic_write``), read,
    when it was made from the same submission files and suite and the grader did not fail on
    it; else ``None``: it is to be graded again. A grade that met a fault on the grader's side
    and got past it (``Graded.grader_events``: a retry that did not end the same way) is the
    grade a run without the fault gives, and is kept."""
    try:
        results = json.loads((out / name / RESULTS).read_text(encoding="utf-8"))
        extra = results["extra_data"]
        current = (
            bool(digests)
            and not extra.get("grader_failed")
            and all(extra.get(key) == value for key, value in digests.items())
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return results if current else None


def write_submission(
    out: Path,
    graded: Graded,
    hidden_visibility: str = "after_due_date",
    digests: dict[str, str] | None = None,
) -> str:
    """``feedback.md``, ``instructor.md``, then ``results.json`` (results last: it marks the
    grade finished); the text of ``results.json``."""
    private_dir(out)
    private_dir(out / graded.name)
    results = results_json(graded, hidden_visibility, digests or {})
    texts = {
        FEEDBACK: feedback_md(graded, hidden_visibility),
        INSTRUCTOR: instructor_md(graded),
        RESULTS: results,
    }
    for file in FILES:
        atomic_write(out / graded.name / file, texts[file])
    return results


#: The most problems of one submission listed, and the most characters of each: the rest are
#: counted. A submission makes at most a few (one per module file, one for its extra files);
#: only an upload built to flood the outputs reaches these.
MAX_PROBLEMS = 30
MAX_PROBLEM = 4000


def capped_problems(problems: list[str]) -> list[str]:
    """``problems`` as every output lists them: each on one line and cut to ``MAX_PROBLEM``
    characters, the first ``MAX_PROBLEMS`` of them and then how many more there are."""
    shown = [safe_text.capped(p, MAX_PROBLEM) for p in problems[:MAX_PROBLEMS]]
    more = len(problems) - MAX_PROBLEMS
    return shown + ([f"and {more} more problems"] if more > 0 else [])


def part_scores(tests: list[TestResult]) -> dict[int, int]:
    scores = dict.fromkeys(PARTS, 0)
    for t in tests:
        scores[t.part] += t.points if t.passed else 0
    return scores


def results_json(
    graded: Graded,
    hidden_visibility: str = "after_due_date",
    digests: dict[str, str] | None = None,
) -> str:
    """Gradescope's schema. ``output`` counts the visible tests only; ``score`` counts them
    all (it is the gradebook's score; Gradescope keeps it from students while a test is
    hidden). ``extra_data`` carries the findings of every test (``findings``): what the
    gradebook, the class summary and the class report say."""
    if hidden_visibility not in VISIBILITY_WORDS:
        raise ValueError(f"hidden tests cannot be {hidden_visibility!r}")
    problems = capped_problems(graded.problems)
    numbers = _numbers(graded.tests)
    tests = [
        {
            "name": f"Part {t.part}: {t.name}",
            "number": numbers[t.nodeid],
            "score": t.points if t.passed else 0,
            "max_score": t.points,
            "status": "passed" if t.passed else "failed",
            "output": safe_text.md_fence(t.message) if t.message else "",
            "visibility": hidden_visibility if t.hidden else "visible",
        }
        for t in graded.tests
    ]
    results = {
        "score": sum(part_scores(graded.tests).values()),
        "max_score": TOTAL_POINTS,
        "execution_time": round(graded.execution_time, 1),
        "output": visible_summary(graded, hidden_visibility),
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            **(digests or {}),
            "problems": problems,
            "findings": findings.find(graded.tests, problems).to_json(),
            "grader_failed": graded.failed,
            "grader_events": capped_problems(graded.grader_events),
        },
    }
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


def visible_summary(graded: Graded, hidden_visibility: str) -> str:
    """The top-level ``output`` (Markdown): the problems, each on its one line, then each
    part's points on its visible tests."""
    visible = [t for t in graded.tests if not t.hidden]
    scores = part_scores(visible)
    lines = [safe_text.md_inline(p) for p in capped_problems(graded.problems)]
    for k, part in PARTS.items():
        total = sum(t.points for t in visible if t.part == k)
        if total:
            lines.append(
                f"Part {k} ({part.title}): {scores[k]}/{total} on the visible tests"
            )
    hidden = sum(t.points for t in graded.tests if t.hidden)
    if hidden:
        lines.append(
            f"The hidden tests ({hidden} points) are shown "
            f"{VISIBILITY_WORDS[hidden_visibility]}."
        )
    return "\n".join(lines)


def _numbers(tests: list[TestResult]) -> dict[str, str]:
    counts: dict[int, int] = {}
    numbers = {}
    for t in tests:
        counts[t.part] = counts.get(t.part, 0) + 1
        numbers[t.nodeid] = f"{t.part}.{counts[t.part]}"
    return numbers


def feedback_md(graded: Graded, hidden_visibility: str | None = None) -> str:
    """The grade for a person, in Markdown. With ``hidden_visibility``, what the student may
    see now (``feedback.md``): the visible tests only, the hidden ones counted in points and
    never named, so that it can be sent before they are shown; without, everything (the
    instructor's file, nbgrader's feedback). The submission's name is in a code span, each
    problem on its one line, each failure's message in a fenced block, so no text of the
    student's can start a heading of its own."""
    return _grade_md(graded, hidden_visibility, [])


#: What the instructor's file says of itself, under its title.
INSTRUCTOR_NOTE = (
    f"For the course staff: every test, hidden ones included. {FEEDBACK} beside it is what "
    "the student may see now; send this file only once the hidden tests are shown."
)


def instructor_md(graded: Graded) -> str:
    """Everything about the grade, hidden tests included (``instructor.md``)."""
    return _grade_md(graded, None, ["", INSTRUCTOR_NOTE])


def _grade_md(graded: Graded, hidden_visibility: str | None, note: list[str]) -> str:
    student_view = hidden_visibility is not None
    shown = [t for t in graded.tests if not (student_view and t.hidden)]
    scores = part_scores(shown)
    lines = [f"# Feedback for {safe_text.md_code_span(graded.name)}", *note, ""]
    if student_view:
        lines.append(
            f"**Visible tests: {sum(scores.values())}/{sum(t.points for t in shown)}**"
        )
        hidden = sum(t.points for t in graded.tests if t.hidden)
        if hidden:
            when = VISIBILITY_WORDS[hidden_visibility]
            lines += ["", f"The hidden tests ({hidden} points) are shown {when}."]
    else:
        lines.append(f"**Score: {sum(scores.values())}/{TOTAL_POINTS}**")
    lines += ["", "## Summary", ""]
    problems = capped_problems(graded.problems)
    lines += _summary_lines(findings.find(shown, problems), student_view)
    if problems:
        lines += ["", "## Problems with the submission", ""]
        lines += [f"- {safe_text.md_inline(p)}" for p in problems]
    first = fix_first(shown)
    for k, part in PARTS.items():
        tests = [t for t in shown if t.part == k]
        points = sum(t.points for t in tests) if student_view else part.points
        lines += ["", f"## Part {k}: {part.title} ({scores[k]}/{points})", ""]
        weak = first.get(k)
        if scores[k] < points and weak:
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
                lines += ["", _in_list_item(safe_text.md_fence(t.message)), ""]
    return "\n".join(lines).rstrip() + "\n"


def _summary_lines(found: findings.Findings, student_view: bool) -> list[str]:
    """Points per part, and each failing part's first failure with its likely mistake."""
    of = " on the visible tests" if student_view else ""
    lines = []
    for p in found.parts:
        line = f"- Part {p.part} ({PARTS[p.part].title}): {p.score}/{p.max_score}{of}"
        if p.first_failure:
            line += f"; first failure {safe_text.md_code_span(p.first_failure)}"
            raised = safe_text.md_code_span(p.error) if p.error else ""
            line += f" (your code raised {raised})" if raised else ""
        if p.diagnosis:
            line += f"; likely mistake: {safe_text.md_code_span(p.diagnosis)}"
        lines.append(line)
    return lines or ["- No test ran."]


def _in_list_item(block: str) -> str:
    """``block`` indented into the list item above it: a line less indented would end the
    item, and end its fence with it."""
    return "\n".join("  " + line if line else "" for line in block.split("\n"))


def gradebook_row(out: Path, name: str) -> dict[str, str | int] | None:
    """A gradebook row from a finished ``results.json`` (``None`` when there is none)."""
    try:
        results = json.loads((out / name / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return row_of(name, results)


def row_of(name: str, results: dict) -> dict[str, str | int] | None:
    """The gradebook row of ``results`` (a ``results.json`` read), ``None`` when malformed.
    A submission the grader failed on has no scores in it (empty, not zeros: nothing was
    graded) and the reason among its problems."""
    try:
        parts = dict.fromkeys(PARTS, 0)
        for t in results["tests"]:
            parts[int(str(t["number"]).split(".")[0])] += t["score"]
        row = {
            "name": name,
            "score": results["score"],
            "max_score": results["max_score"],
        }
        troubles = read_findings(results).troubles()
        if results.get("extra_data", {}).get("grader_failed"):
            row["score"], parts = "", dict.fromkeys(PARTS, "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return (
        row | {f"part{k}": parts[k] for k in PARTS} | {"problems": "; ".join(troubles)}
    )


def graded_names(out: Path) -> list[str]:
    """The submissions ``out`` holds a finished grade of: every folder with a
    ``results.json``, the gradebook's rows whichever run graded them."""
    try:
        folders = sorted(p for p in out.iterdir() if p.is_dir())
    except OSError:
        return []
    return [p.name for p in folders if (p / RESULTS).is_file()]


def remove_grade(out: Path, name: str) -> bool:
    """Remove the grade folder ``out/name``, if it is one: a folder holding nothing but a
    submission's files (``FILES``, and temporary files of ``atomic_write``). Anything else,
    or nothing there, is left alone: ``False``."""
    folder = out / name
    if name in ("", ".", "..") or "/" in name or not (folder / RESULTS).is_file():
        return False
    entries = list(folder.iterdir())
    if not all(
        e.is_file() and (e.name in FILES or e.name.startswith(".")) for e in entries
    ):
        return False
    for entry in entries:
        entry.unlink()
    folder.rmdir()
    return True


def read_rows(out: Path, names: list[str]) -> list[dict]:
    """The gradebook rows of ``names`` that have a finished ``results.json`` in ``out``."""
    return [row for name in names if (row := gradebook_row(out, name))]


def read_findings(results: dict) -> findings.Findings:
    """The findings a ``results.json`` carries (``results_json``)."""
    return findings.Findings.from_json(results["extra_data"]["findings"])


#: The columns docs/AUTOGRADER.md fixes, then what went wrong with the submission, if anything.
GRADEBOOK_FIELDS = [
    "name",
    "score",
    "max_score",
    *(f"part{k}" for k in PARTS),
    "problems",
]


def write_gradebook(out: Path, rows: list[dict]) -> list[dict]:
    """``gradebook.csv`` from ``rows``, by name; the rows in that order."""
    rows = sorted(rows, key=lambda row: row["name"])
    private_dir(out)
    buffer = io.StringIO()
    fields = GRADEBOOK_FIELDS
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(
        {
            field: safe_text.csv_cell(
                safe_text.md_plain(value) if field == "problems" else value
            )
            for field, value in row.items()
        }
        for row in rows
    )
    atomic_write(out / GRADEBOOK, buffer.getvalue())
    return rows
