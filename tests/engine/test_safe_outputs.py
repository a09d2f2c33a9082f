"""Student-controlled text leaves every output inert (``autograder.facts.safe_text``).

A batch with a hostile extra file name, a hostile exception message and folder names that
spreadsheets read as formulas is graded through the command line, and each output is opened
as its reader opens it: the gradebook as CSV, the feedback and ``results.json``'s Markdown with
a Markdown parser, the class report as HTML, and the terminal's text.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from rich.console import Console

from autograder.commands import cli
from autograder.facts import safe_text
from autograder.facts.points import PACKAGE, PARTS
from autograder.sources.release import SOLUTIONS

from .conftest import KEYWORD

REPO = Path(__file__).resolve().parents[2]
ATTACK = "# Score: 100 of 100"
ANSI = "\x1b[2J\x1b]0;pwned\x07"
#: An extra file beside the modules (no "/" in a file name): a formula, a fake heading,
#: terminal commands, markup.
EVIL_FILE = f'=HYPERLINK("evil.example")<b>\n{ATTACK}\r{ANSI}``` .py'
#: What part 4's function raises: the same tricks, and a "diagnosis" for the class report,
#: then more text than any reader needs.
EVIL_MESSAGE = (
    f"boom\n{ATTACK}\n```\nLikely mistake: <script>alert(1)</script>{ANSI}\r"
    + "x" * 200_000
)
#: The name of the class it raises: a link, an image and HTML, and then some.
EVIL_CLASS = (
    "[click](http://evil.example) ![img](http://evil.example/i.png) "
    "<img src=x onerror=alert(2)>" + "y" * 5_000
)
EVIL_ROPE = f"""

class Evil(ValueError):
    pass


Evil.__name__ = Evil.__qualname__ = {EVIL_CLASS!r}


def apply_rope(*args, **kwargs):
    print({ANSI!r})
    raise Evil({EVIL_MESSAGE!r})
"""
#: How many more extra files than anyone reads, with long names.
EXTRA_FILES = 3000
#: Folder names that a spreadsheet would read as formulas, and the names of the outputs (the
#: stubs: quick to grade).
FORMULA_FOLDERS = ("=SUM(1+1)", "@SUM(1)", "-1+2")
OUTPUT_FOLDERS = ("gradebook.csv", "report.html", "shard.json", "results.json")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: Control characters a reader acts on: none may reach a file or the terminal raw.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, str]:
    """The hostile batch graded by ``autograder grade``: ``(out, terminal output)``."""
    folder = tmp_path_factory.mktemp("hostile")
    batch, out = folder / "batch", folder / "grades"
    package = batch / "mallory" / PACKAGE
    shutil.copytree(SOLUTIONS, package)
    (package / EVIL_FILE).write_text("x = 1\n")
    for i in range(EXTRA_FILES):
        (package / f"z{i:04}{'_helper' * 30}.py").write_text("x = 1\n")
    rope = package / "rope.py"
    rope.write_text(rope.read_text() + EVIL_ROPE)
    for name in (*FORMULA_FOLDERS, *OUTPUT_FOLDERS):
        shutil.copytree(REPO / "assignments" / PACKAGE, batch / name / PACKAGE)
    terminal = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(terminal):
        for variable in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
            patch.delenv(variable, raising=False)  # rich's own colours: none
        patch.setenv("COLUMNS", "1000")  # the summary's rows unwrapped
        code = cli.main(["grade", str(batch), "--out", str(out), "-k", KEYWORD])
    assert code == 0, terminal.getvalue()
    return out, terminal.getvalue()


def headings(markdown: str) -> list[str]:
    """The text of every heading that a Markdown reader renders in ``markdown``."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [
        tokens[i + 1].content
        for i, token in enumerate(tokens)
        if token.type == "heading_open"
    ]


def test_the_gradebook_holds_no_formula_and_no_broken_row(graded):
    out, _ = graded
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    # header, mallory, the formulas, the outputs' names
    assert len(rows) == 1 + 1 + len(FORMULA_FOLDERS) + len(OUTPUT_FOLDERS)
    for row in rows:
        assert len(row) == len(rows[0])
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), cell
            assert not RAW_CONTROL.search(cell), cell
    names = [row[0] for row in rows[1:]]
    assert "'-1_2" in names  # the folder's name, quoted; "=" and "@" never reach a name
    problems = {row[0]: row[-1] for row in rows[1:]}
    assert '=HYPERLINK("evil.example")' in problems["mallory"]
    assert "\\n# Score" in problems["mallory"] and "\\x1b[2J" in problems["mallory"]
    # Plain text: no Markdown's backticks; and far below what a spreadsheet cell holds.
    assert "z0000_helper" in problems["mallory"]
    assert "`z0000" not in problems["mallory"]
    assert max(len(cell) for row in rows for cell in row) < 32_767


def test_feedback_and_results_carry_no_heading_of_the_students(graded):
    out, _ = graded
    feedback = (out / "mallory" / "feedback.md").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(feedback)
    assert not any(line.startswith(ATTACK) for line in feedback.splitlines())
    found = headings(feedback)
    assert found[:3] == [
        "Feedback for `mallory`",
        "Summary",
        "Problems with the submission",
    ]
    assert [re.sub(r" \(\d+/\d+\)$", "", h) for h in found[3:]] == [
        f"Part {k}: {part.title}" for k, part in PARTS.items()
    ]
    assert "boom" in feedback and "\\x1b[2J" in feedback  # shown, not sent

    results = json.loads((out / "mallory" / "results.json").read_text(encoding="utf-8"))
    outputs = [results["output"], *(t["output"] for t in results["tests"])]
    assert any("boom" in o for o in outputs)
    for output in outputs:
        assert not any(line.startswith(ATTACK) for line in output.splitlines())
        assert not RAW_CONTROL.search(output)
        assert headings(output) == []
    assert not any(RAW_CONTROL.search(p) for p in results["extra_data"]["problems"])


class Page(HTMLParser):
    """The elements and text of a page."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: set[str] = set()
        self.text = ""
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text += data


def test_the_class_report_shows_the_text_as_text(graded):
    out, _ = graded
    page = (out / "report.html").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(page)
    parsed = Page(page)
    assert not parsed.tags & {"script", "b"}
    # What the student's code raised is never the suite's diagnosis, whatever it says.
    assert "alert(1)" not in parsed.text
    assert '=HYPERLINK("evil.example")<b>' in parsed.text


def test_the_terminal_shows_the_text_and_sends_no_command(graded):
    _, terminal = graded
    assert "\x1b" not in terminal and not RAW_CONTROL.search(terminal)
    assert "\\x1b" in terminal  # the hostile name and diagnosis, shown


# The functions one by one ----------------------------------------------------------------------

HONEST = "Zoë_naïve–helpers.py"


def test_one_line_shows_every_control_character():
    assert safe_text.one_line(HONEST) == HONEST
    assert safe_text.one_line("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert safe_text.one_line(ANSI) == "\\x1b[2J\\x1b]0;pwned\\x07"
    assert (
        safe_text.one_line("\x00\x7f\x9b") == "\\x00\\x7f\\x9b"
    )  # NUL, DEL, 8-bit CSI
    assert safe_text.one_line("a\u2028b\u202ec") == "a\\u2028b\\u202ec"


def test_plain_keeps_lines_and_tabs_only():
    assert safe_text.plain("one\n\ttwo") == "one\n\ttwo"
    assert safe_text.plain(f"x\r{ANSI}") == "x\\r\\x1b[2J\\x1b]0;pwned\\x07"


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_a_csv_cell_that_would_be_a_formula_is_quoted(start):
    cell = safe_text.csv_cell(start + "1+1")
    assert cell.startswith("'") and not RAW_CONTROL.search(cell)


def test_a_csv_cell_stays_one_cell_of_one_row():
    assert safe_text.csv_cell("alice") == "alice" and safe_text.csv_cell(7) == 7
    buffer = io.StringIO()
    csv.writer(buffer).writerow([safe_text.csv_cell(f"a\nb,\rc{ANSI}"), 1])
    assert list(csv.reader(io.StringIO(buffer.getvalue()))) == [
        ["a\\nb,\\rc\\x1b[2J\\x1b]0;pwned\\x07", "1"]
    ]


@pytest.mark.parametrize(
    "text", [HONEST, EVIL_FILE, "`", "a``b", "``x", "y`", " spaced ", " lead"]
)
def test_a_code_span_holds_exactly_its_text(text):
    span = safe_text.md_code_span(text)
    assert "\n" not in span
    (paragraph,) = [
        t for t in MarkdownIt("commonmark").parse(span) if t.type == "inline"
    ]
    (code,) = paragraph.children
    assert code.type == "code_inline" and code.content == safe_text.one_line(text)


def test_honest_names_read_as_they_are():
    assert safe_text.md_code_span("helpers.py") == "`helpers.py`"


@pytest.mark.parametrize(
    "text", ["plain", f"a\n{ATTACK}\n```\n````x\n~~~", "  indented\n\n\ttab", "`"]
)
def test_a_fence_holds_exactly_its_text(text):
    (token,) = MarkdownIt("commonmark").parse(f"{safe_text.md_fence(text)}\nafter\n")[
        :1
    ]
    assert token.type == "fence" and token.content == safe_text.plain(text) + "\n"
    assert headings(safe_text.md_fence(text)) == []


def test_html_text_is_markup_escaped_and_shown():
    assert (
        safe_text.html_text(f'<b a="1">&{ANSI}')
        == "&lt;b a=&quot;1&quot;&gt;&amp;\\x1b[2J\\x1b]0;pwned\\x07"
    )


def test_a_terminal_cell_prints_as_written():
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(safe_text.terminal_cell(f"bob[2] [bold]E[x^2][/bold]\n{ANSI}"))
    printed = console.file.getvalue()
    assert printed == "bob[2] [bold]E[x^2][/bold]\\n\\x1b[2J\\x1b]0;pwned\\x07\n"


def test_a_notebook_error_shows_the_text_and_sends_no_command():
    from autograder.batches.nbgrader.preprocessors import GradingFailed, check_outputs

    (error,) = check_outputs(
        4, PARTS[4].points, GradingFailed(f"`{EVIL_FILE}` left out")
    )
    for text in (error["evalue"], *error["traceback"]):
        assert not RAW_CONTROL.search(text) and "\\x1b[2J" in text


def test_the_smoke_grade_shows_a_failure_and_sends_no_command(tmp_path, capsys):
    from autograder.outputs import gradescope

    results = tmp_path / "results.json"
    failed = {
        "score": 0,
        "output": ANSI,
        "tests": [],
        "extra_data": {"grader_failed": 1},
    }
    results.write_text(json.dumps(failed))
    assert gradescope.main([str(results)]) == 1
    printed = capsys.readouterr().err
    assert "\x1b" not in printed and "\\x1b[2J" in printed


# Caps and escapes, whatever the student sends ------------------------------------------------


def live_markdown(markdown: str) -> list[str]:
    """The links, images and HTML a Markdown reader would render in ``markdown``."""
    found = []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type == "html_block":
            found.append(token.content)
        for child in token.children or []:
            if child.type in ("link_open", "image", "html_inline"):
                found.append(child.type)
    return found


def test_a_class_name_is_no_markdown_anywhere(graded):
    out, terminal = graded
    feedback = (out / "mallory" / "feedback.md").read_text(encoding="utf-8")
    instructor = (out / "mallory" / "instructor.md").read_text(encoding="utf-8")
    results = json.loads((out / "mallory" / "results.json").read_text(encoding="utf-8"))
    assert "[click](http://evil.example)" in feedback  # shown, as code
    for markdown in (
        feedback,
        instructor,
        results["output"],
        *(t["output"] for t in results["tests"]),
    ):
        assert live_markdown(markdown) == []
    page = Page((out / "report.html").read_text(encoding="utf-8"))
    assert not page.tags & {"a", "img", "script"}
    # Capped where the grader names it (a suite's own message may quote it, fenced).
    assert "y" * 200 not in feedback + page.text + terminal


def test_thousands_of_names_and_huge_messages_stay_small(graded):
    out, terminal = graded
    sizes = {p.name: p.stat().st_size for p in (out / "mallory").iterdir()}
    assert sizes["feedback.md"] < 100_000 and sizes["instructor.md"] < 200_000
    assert sizes["results.json"] < 300_000
    assert (out / "report.html").stat().st_size < 100_000
    assert (out / "gradebook.csv").stat().st_size < 20_000
    assert len(terminal) < 50_000
    feedback = (out / "mallory" / "feedback.md").read_text(encoding="utf-8")
    more = EXTRA_FILES + 1 - safe_text.MAX_NAMES  # the evil one is extra too
    assert feedback.count(f"and {more} more") == 1
    assert "x" * 3000 not in feedback


def test_no_submission_takes_an_outputs_name(graded):
    from autograder.outputs import classreport, report, shards
    from autograder.sources.intake import RESERVED

    out, _ = graded
    outputs = {report.GRADEBOOK, classreport.REPORT, shards.MANIFEST, *report.FILES}
    assert outputs <= RESERVED
    assert (out / "gradebook.csv").is_file() and (out / "report.html").is_file()
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as f:
        names = {row["name"] for row in csv.DictReader(f)}
    assert not names & RESERVED
    assert {f"{name}-2" for name in OUTPUT_FOLDERS} <= names


@pytest.mark.parametrize(
    "sentence",
    [
        "plain words",
        "`[x](http://e)` is not one of the files",
        "raw [x](http://e) ![i](http://e/i.png) <b>hi</b> *em* _em_ &amp; \\",
        "# Score: 100 of 100",
        "1. first",
        "``a`b`` and ` lone tick",
    ],
)
def test_a_sentence_renders_as_its_text_in_every_output(sentence):
    rendered = MarkdownIt("commonmark").render(safe_text.md_inline(sentence))
    assert live_markdown(safe_text.md_inline(sentence)) == []
    assert headings(safe_text.md_inline(sentence)) == []
    shown = Page(rendered).text.strip()
    assert (
        shown == Page(safe_text.md_html(sentence)).text == safe_text.md_plain(sentence)
    )
    assert "<b>" not in safe_text.md_html(sentence)


def test_names_are_capped_in_length_and_number():
    names = [f"{i}" * 500 for i in range(50)]
    listed = safe_text.name_list(names)
    assert listed.count("`") == 2 * safe_text.MAX_NAMES and listed.endswith(
        "and 30 more"
    )
    assert len(listed) < (safe_text.MAX_NAME + 4) * safe_text.MAX_NAMES + 20


def test_a_gradebook_cell_stays_under_a_spreadsheets_limit():
    for text in ("=" + "x" * 100_000, "\U0001f600" * 40_000, "\x1b" * 20_000):
        cell = safe_text.csv_cell(text)
        assert len(cell.encode("utf-16-le")) // 2 <= safe_text.MAX_CELL < 32_767
