"""A batch as course platforms export it, and a gradebook that keeps every student.

An LMS exports a folder per student holding that student's ``submission.zip``; each is one
student, named by the folder. Grading one late submission into the same ``--out`` updates that
student's row and keeps everyone else's; a student leaves only on request (``--remove``,
``--prune``). The suite itself is replaced by a stand-in that reads the score from the
student's file (``SCORE``): what is checked here is intake, naming and the gradebook.
"""

from __future__ import annotations

import csv
import re
import zipfile
from pathlib import Path

import pytest

from autograder.commands import cli
from autograder.facts.points import PACKAGE
from autograder.grading import grade
from autograder.sources.release import SOLUTIONS
from autograder.sources.runner import TestResult as Outcome

from .test_grade_cli import Tables

SCORE = re.compile(rb"# score (\d+)")


@pytest.fixture(autouse=True)
def scored_by_marker(monkeypatch):
    """Each submission gets the points its masks.py's ``# score N`` line claims."""

    def run_isolated(root, settings, scrub):
        masks = (root / PACKAGE / "masks.py").read_bytes()
        points = int(SCORE.search(masks)[1]) if SCORE.search(masks) else 0
        return [Outcome("t::test_x", "test_x", 2, 10, False, points == 10, "")]

    monkeypatch.setattr(grade, "run_isolated", run_isolated)
    monkeypatch.setattr(grade, "_init_process", lambda settings: None)
    monkeypatch.setenv("COLUMNS", "1000")  # the terminal's lines unwrapped


def submission_zip(path: Path, score: int) -> Path:
    """The reference as a student zips it, claiming ``score`` (0 or 10)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for module in sorted(SOLUTIONS.glob("*.py")):
            data = module.read_bytes()
            if module.name == "masks.py":
                data += f"\n# score {score}\n".encode()
            archive.writestr(f"{PACKAGE}/{module.name}", data)
    return path


def gradebook(out: Path) -> dict[str, dict]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        return {row["name"]: row for row in csv.DictReader(f)}


def report_names(out: Path) -> list[str]:
    table = Tables((out / "report.html").read_text(encoding="utf-8")).tables
    return [row[0] for row in table["gradebook"][1:]]


def grade_into(out: Path, *args: str) -> int:
    return cli.main(["grade", *args, "--out", str(out)])


def test_an_lms_export_then_a_late_zip_keep_all_four_students(tmp_path, capsys):
    export = tmp_path / "class2"
    for name, score in (("ada", 10), ("bo", 0), ("cy", 10)):
        submission_zip(export / name / "submission.zip", score)
    out = tmp_path / "grades"
    assert grade_into(out, str(export)) == 0
    printed = capsys.readouterr().out
    assert {n: r["score"] for n, r in gradebook(out).items()} == {
        "ada": "10",
        "bo": "0",
        "cy": "10",
    }
    assert "the gradebook holds 3 students, 3 graded this run" in printed
    assert "class2" not in gradebook(out)

    late = submission_zip(tmp_path / "late" / "dee.zip", 10)
    assert grade_into(out, str(late)) == 0
    printed = capsys.readouterr().out
    rows = gradebook(out)
    assert {n: r["score"] for n, r in rows.items()} == {
        "ada": "10",
        "bo": "0",
        "cy": "10",
        "dee": "10",
    }
    assert report_names(out) == ["ada", "bo", "cy", "dee"]
    assert "the gradebook holds 4 students, 1 graded this run" in printed
    # The per-student table names this run's student and score.
    assert re.search(r"dee\s*│\s*10/100", printed), printed


def test_a_student_leaves_the_gradebook_only_on_request(tmp_path, capsys):
    export = tmp_path / "export"
    for name in ("ada", "bo", "cy"):
        submission_zip(export / name / "submission.zip", 10)
    out = tmp_path / "grades"
    assert grade_into(out, str(export)) == 0
    assert grade_into(out, "--remove", "bo") == 0
    assert sorted(gradebook(out)) == ["ada", "cy"] and not (out / "bo").exists()
    assert report_names(out) == ["ada", "cy"]
    (out / "notes").mkdir()
    (out / "notes" / "mine.txt").write_text("the instructor's own")
    assert grade_into(out, "--remove", "notes") == 0  # not a grade: left alone
    assert (out / "notes" / "mine.txt").is_file()
    assert "holds no grade of notes" in capsys.readouterr().out
    assert grade_into(out, str(export / "cy"), "--prune") == 0
    assert sorted(gradebook(out)) == ["cy"]


def test_what_cannot_be_read_is_that_students_problem_not_the_class(tmp_path):
    export = tmp_path / "export"
    submission_zip(export / "ada" / "submission.zip", 10)
    (export / "bo").mkdir(parents=True)
    (export / "bo" / "submission.zip").write_bytes(b"PK\x03\x04 not a zip at all")
    (export / "cy").mkdir()
    (export / "cy" / "essay.txt").write_text("I did not do it")
    out = tmp_path / "grades"
    assert grade_into(out, str(export)) == 0
    rows = gradebook(out)
    assert rows["ada"]["score"] == "10" and sorted(rows) == ["ada", "bo", "cy"]
    assert rows["bo"]["problems"].startswith("the zip cannot be read")
    assert rows["cy"]["problems"].startswith("nothing to grade")
    assert "`" not in "".join(r["problems"] for r in rows.values())


def test_a_zip_of_student_folders_is_graded_as_its_students(tmp_path):
    export = tmp_path / "export"
    for name, score in (("ada", 10), ("bo", 0)):
        submission_zip(export / name / "submission.zip", score)
    zipped = tmp_path / "class2.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for path in sorted(export.rglob("*.zip")):
            archive.write(path, f"class2/{path.relative_to(export)}")
    out = tmp_path / "grades"
    assert grade_into(out, str(zipped)) == 0
    assert {n: r["score"] for n, r in gradebook(out).items()} == {
        "ada": "10",
        "bo": "0",
    }
