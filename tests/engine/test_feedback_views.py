"""What each reader of a grade sees: the student's ``feedback.md`` names nothing hidden before
the hidden tests are shown, the instructor's file holds everything, and the terminal's class
summary, ``report.html`` and the gradebook's ``problems`` column say the same things about the
same submissions. Also what a batch prints while it grades where the output is no terminal.

Graded by hand (``report.write_submission`` on made-up test results): no sandbox needed."""

from __future__ import annotations

import csv
import io
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from autograder.commands import cli
from autograder.facts.points import TOTAL_POINTS
from autograder.facts.progress import READYING, BatchProgress
from autograder.grading import grade
from autograder.outputs import classreport, report
from autograder.sources.runner import TestResult as Outcome

from .test_grade_cli import Tables

REPO = Path(__file__).resolve().parents[2]
SECRET = "test_secret_hidden_case"
HIDDEN_MESSAGE = "the hidden tensor was off\nLikely mistake: a hidden-only diagnosis"


def result(nodeid: str, part: int, points: int, **kwargs) -> Outcome:
    fields = {"hidden": False, "passed": True, "message": ""} | kwargs
    return Outcome(nodeid, nodeid.rpartition("::")[2], part, points, **fields)


def with_a_failing_hidden_test() -> grade.Graded:
    return grade.Graded(
        "sam",
        [
            result("t::test_visible_shape", 1, 4),
            result(
                "t::test_visible_values",
                1,
                3,
                passed=False,
                message="values differ\nLikely mistake: softmax over dim 0",
                diagnosis="softmax over dim 0",
            ),
            result(
                f"t::{SECRET}",
                1,
                11,
                hidden=True,
                passed=False,
                message=HIDDEN_MESSAGE,
                diagnosis="a hidden-only diagnosis",
            ),
            result(
                "t::test_hidden_mask",
                2,
                10,
                hidden=True,
                passed=False,
                message="masks timed out",
                error="TimeoutError",
            ),
        ],
    )


@pytest.mark.parametrize("visibility", ["after_due_date", "after_published"])
def test_feedback_names_nothing_hidden_and_the_instructor_file_holds_it(
    tmp_path, visibility
):
    graded = with_a_failing_hidden_test()
    report.write_submission(tmp_path, graded, visibility)
    feedback = (tmp_path / "sam" / report.FEEDBACK).read_text()
    instructor = (tmp_path / "sam" / report.INSTRUCTOR).read_text()
    for hidden in (SECRET, "test_hidden_mask", "hidden tensor", "hidden-only", "11 pt"):
        assert hidden not in feedback
        assert hidden in instructor
    assert "(hidden test)" not in feedback and "masks timed out" not in feedback
    when = report.VISIBILITY_WORDS[visibility]
    assert f"The hidden tests (21 points) are shown {when}." in feedback
    # Both open with the summary: points per part, the first failure, its likely mistake.
    for text in (feedback, instructor):
        summary = text.split("## Summary")[1].split("## ")[0]
        assert "first failure `test_visible_values`" in summary
        assert "likely mistake: `softmax over dim 0`" in summary
    assert "Part 1 (Scaled dot-product attention): 4/7 on the visible tests" in feedback
    assert "Part 1 (Scaled dot-product attention): 4/18;" in instructor
    assert "first failure `test_hidden_mask` (your code raised `TimeoutError`)" in (
        instructor
    )


def write_batch(out: Path) -> list[str]:
    """A batch of made-up grades: a hang with no other problem, one part whose two tests
    name its mistake in two wordings, a broken upload, and more distinct mistakes than the
    terminal lists."""
    hang = grade.Graded(
        "hung",
        [result("t::test_a", 1, 5, passed=False, message="x", error="TimeoutError")],
    )
    worded = grade.Graded(
        "two_wordings",
        [
            result("t::test_a", 4, 5, passed=False, diagnosis="rotation reversed"),
            result("t::test_b", 4, 5, passed=False, diagnosis="sin with a wrong sign"),
        ],
    )
    broken = grade.Graded("broken", [], ["rope.py has a syntax error at line 3"])
    many = [
        grade.Graded(
            f"m{i:02}",
            [result("t::test_a", 2, 5, passed=False, diagnosis=f"mistake {i:02}")],
        )
        for i in range(classreport.SHOWN + 2)
    ]
    for graded in (hang, worded, broken, *many):
        report.write_submission(out, graded)
    return sorted(g.name for g in (hang, worded, broken, *many))


def test_the_summary_the_report_and_the_gradebook_say_the_same(tmp_path):
    names = write_batch(tmp_path)
    rows = report.write_gradebook(tmp_path, report.read_rows(tmp_path, names))
    summary = classreport.summarize(tmp_path, names, rows)
    page = classreport.report_html(summary)
    terminal = Console(file=io.StringIO(), width=1000, color_system=None)
    terminal.print(classreport.summary_table(summary))
    printed = terminal.file.getvalue()
    with open(tmp_path / report.GRADEBOOK, newline="") as f:
        problems = {row["name"]: row["problems"] for row in csv.DictReader(f)}
    tables = Tables(page).tables

    # The hang is trouble everywhere: in the gradebook, the page and the terminal alike.
    assert problems["hung"] == "hit a limit: TimeoutError in part 1"
    troubles = dict(tables["troubles"][1:])
    assert troubles == {name: what for name, what in problems.items() if what}
    for name, what in troubles.items():
        assert f"{name}: {what}" in printed
    # One mistake per part and submission: the first its failures name, in one wording.
    mistakes = {d: who.split(", ") for d, _, who in tables["mistakes"][1:]}
    assert mistakes["rotation reversed"] == ["two_wordings"]
    assert "sin with a wrong sign" not in page + printed
    # The terminal lists the first mistakes and says how many more the page holds.
    listed = [d for d in mistakes if f"{d}: " in printed]
    assert listed == list(mistakes)[: classreport.SHOWN]
    more = len(mistakes) - classreport.SHOWN
    assert f"... and {more} more in {classreport.REPORT}" in printed


def test_without_a_terminal_each_submission_is_a_plain_line(
    tmp_path, monkeypatch, capsys
):
    batch, out = tmp_path / "batch", tmp_path / "grades"
    for name in ("ann", "ben"):
        shutil.copytree(
            REPO / "solutions" / "transformer_hw", batch / name / "transformer_hw"
        )
    passed = result("t::test_x", 2, 10)
    monkeypatch.setattr(grade, "run_isolated", lambda root, settings, scrub: [passed])
    monkeypatch.setattr(grade, "_init_process", lambda settings: None)
    assert cli.main(["grade", str(batch), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("[")] == [
        "[1/2] grading ann",
        f"[1/2] graded ann: 10/{TOTAL_POINTS}",
        "[2/2] grading ben",
        f"[2/2] graded ben: 10/{TOTAL_POINTS}",
    ]


def test_on_a_terminal_each_running_submission_shows_its_part():
    console = Console(
        file=io.StringIO(), force_terminal=True, width=200, color_system=None
    )
    with BatchProgress(console, 2) as progress:
        progress.grading("ann", None)
        progress.grading("ann", 3)
        progress.grading("ben", 1)
        progress.finished("ben", 18)
        progress.grading("ben", 2)  # a report that came late: dropped
    shown = console.file.getvalue()
    assert "ann: part 3: Heads and multi-head attention" in shown
    assert "1/2" in shown
    assert "ben: part 2" not in shown


class Layout(HTMLParser):
    """The order of a page's headings, tables and plots, the boxes each table sits in, and
    its meta tags."""

    def __init__(self, page: str):
        super().__init__()
        self.order: list[str] = []
        self.meta: dict[str, str] = {}
        self.boxed: dict[str, bool] = {}
        self._open: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and "name" in attrs:
            self.meta[attrs["name"]] = attrs["content"]
        if tag == "table":
            self.boxed[attrs["id"]] = "scroll" in self._open
            self.order.append(attrs["id"])
        if tag == "svg":
            self.order.append("svg")
        if tag == "div":
            self._open.append(attrs.get("class", ""))

    def handle_endtag(self, tag):
        if tag == "div" and self._open:
            self._open.pop()


def test_the_report_fits_a_phone_and_shows_who_needs_attention_first(tmp_path):
    names = write_batch(tmp_path)
    rows = report.write_gradebook(tmp_path, report.read_rows(tmp_path, names))
    page = classreport.report_html(classreport.summarize(tmp_path, names, rows))
    layout = Layout(page)
    assert layout.meta["viewport"] == "width=device-width, initial-scale=1"
    assert layout.boxed and all(layout.boxed.values())  # every table scrolls in its box
    assert "svg { display: block; max-width: 100%; height: auto; }" in page
    order = layout.order
    assert order.index("troubles") < order.index("gradebook") < order.index("svg")
    # The long lists are folded away: the page stays short for a few students.
    assert "<details>" in page


def test_a_problem_is_rendered_where_it_is_read(tmp_path):
    graded = grade.Graded("ann", [], ["`my helpers.py` is not one of <the> files"])
    report.write_submission(tmp_path, graded)
    rows = report.write_gradebook(tmp_path, report.read_rows(tmp_path, ["ann"]))
    page = classreport.report_html(classreport.summarize(tmp_path, ["ann"], rows))
    assert "<code>my helpers.py</code> is not one of &lt;the&gt; files" in page
    with open(tmp_path / report.GRADEBOOK, newline="") as f:
        [row] = csv.DictReader(f)
    assert row["problems"] == "my helpers.py is not one of <the> files"
    feedback = (tmp_path / "ann" / report.FEEDBACK).read_text()
    assert "- `my helpers.py` is not one of \\<the\\> files" in feedback


def test_the_terminal_lists_a_screenful_of_students_and_the_rest_in_the_files(
    tmp_path,
):
    names = write_batch(tmp_path)
    rows = report.write_gradebook(tmp_path, report.read_rows(tmp_path, names))
    summary = classreport.summarize(tmp_path, names, rows, graded_now=len(names))
    terminal = Console(file=io.StringIO(), width=200, color_system=None)
    terminal.print(classreport.student_table(summary))
    printed = terminal.file.getvalue()
    assert re.search(r"broken\s*│\s*0/100\s*│ rope.py has a syntax error", printed)
    assert re.search(r"hung\s*│\s*0/100\s*│ hit a limit: TimeoutError", printed)
    many = [f"s{i:03}" for i in range(classreport.SCREENFUL + 7)]
    crowd = classreport.ClassSummary([], [], [], [], [], batch=many)
    terminal = Console(file=io.StringIO(), width=200, color_system=None)
    terminal.print(classreport.student_table(crowd))
    printed = terminal.file.getvalue()
    assert f"s{classreport.SCREENFUL - 1:03}" in printed
    assert f"s{classreport.SCREENFUL:03}" not in printed
    assert "... and 7 more" in printed and report.GRADEBOOK in printed


def test_the_bar_names_the_student_and_part_under_way_and_counts_the_finished():
    console = Console(
        file=io.StringIO(), force_terminal=True, width=200, color_system=None
    )
    with BatchProgress(console, 3) as progress:
        progress.grading("ann", None)
        progress.grading("ann", 7)
        console.file.seek(0)
        console.file.truncate()
    shown = console.file.getvalue()  # the last frame, drawn as the bar stops
    assert "grading ann, part 7" in shown and READYING not in shown
    assert "0/3" in shown
