"""The class report: what a whole batch got wrong, as ``DIR/report.html`` and as a short table.

Made from the findings each ``results.json`` carries (``autograder.facts.findings``) and from the
gradebook's rows, and never from feedback's wording: the terminal's table, the page and the
gradebook's ``problems`` column say the same things about the same submissions. The terminal
shows the first rows of each list and says how many more the page holds. The page is one file
with its plots as inline SVG: it opens anywhere, offline, on a phone as on a desktop, and can be
mailed to the course staff as it is.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

from autograder.facts import findings, safe_text
from autograder.facts.points import PARTS, TOTAL_POINTS
from autograder.outputs import report

REPORT = "report.html"
SHOWN = 10  # rows of each list in the terminal, the rest in the page


@dataclass(frozen=True)
class ClassSummary:
    rows: list[dict]  # the gradebook's rows: every student the output folder holds
    not_graded: list[str]  # names in the batch without a grade
    # likely mistake, who made it (in any part); most common first
    mistakes: list[tuple[str, list[str]]]
    failed_tests: list[
        tuple[str, int]
    ]  # test, how many submissions failed it; most first
    # submission, what went wrong beyond its score (its gradebook ``problems``)
    troubles: list[tuple[str, str]]
    #: each student's first problem (Markdown): a trouble, else the first failing part
    first_problems: dict[str, str] = field(default_factory=dict)
    batch: list[str] = field(default_factory=list)  # the names of this run's batch
    graded_now: int = (
        0  # how many of them this run graded (the others kept their grade)
    )

    @property
    def scored(self) -> list[dict]:
        """The rows with scores (a submission the grader failed on has none)."""
        return [row for row in self.rows if row["score"] != ""]

    @property
    def scores(self) -> list[int]:
        return [row["score"] for row in self.scored]

    def mean(self) -> float:
        return statistics.fmean(self.scores) if self.scored else 0.0

    def median(self) -> float:
        return statistics.median(self.scores) if self.scored else 0.0

    def part_mean(self, k: int) -> float:
        scored = self.scored
        return statistics.fmean(r[f"part{k}"] for r in scored) if scored else 0.0


def summarize(
    out: Path, names: list[str], rows: list[dict], graded_now: int = 0
) -> ClassSummary:
    """The summary of the gradebook ``rows`` from the findings in their ``results.json``
    files; ``names`` is this run's batch, of which ``graded_now`` were graded."""
    made: dict[str, set[str]] = {}
    failed: Counter[str] = Counter()
    first: dict[str, str] = {}
    for row in rows:
        name = row["name"]
        results = json.loads((out / name / report.RESULTS).read_text(encoding="utf-8"))
        failed.update(t["name"] for t in results["tests"] if t["status"] == "failed")
        found = report.read_findings(results)
        for _, diagnosis in found.mistakes():
            made.setdefault(diagnosis, set()).add(name)
        first[name] = _first_problem(found)
    graded = {row["name"] for row in rows}
    mistakes = sorted(made.items(), key=lambda item: (-len(item[1]), item[0]))
    return ClassSummary(
        rows=rows,
        not_graded=sorted(set(names) - graded),
        mistakes=[(d, sorted(who)) for d, who in mistakes],
        failed_tests=sorted(failed.items(), key=lambda item: (-item[1], item[0])),
        troubles=[(row["name"], row["problems"]) for row in rows if row["problems"]],
        first_problems=first,
        batch=sorted(names),
        graded_now=graded_now,
    )


def _first_problem(found: findings.Findings) -> str:
    """What to look at first (Markdown): the first trouble, else the first part that lost
    points, with its first failing test and its likely mistake."""
    troubles = found.troubles()
    if troubles:
        return troubles[0]
    for p in found.parts:
        if p.first_failure:
            line = f"part {p.part}: `{p.first_failure}` failed"
            return line + (f" (likely mistake: {p.diagnosis})" if p.diagnosis else "")
    return ""


def summary_table(summary: ClassSummary) -> Table:
    """The report's summary as a short table for the terminal (names, tests and diagnoses
    printed as written: ``E[x^2]`` or a folder ``bob[2]`` is no rich markup, and control
    characters are shown, not sent)."""
    table = Table(title="Class summary", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("students in the gradebook", str(len(summary.rows)))
    graded = f"{summary.graded_now} of this run's {len(summary.batch)}"
    kept = len(summary.batch) - summary.graded_now - len(summary.not_graded)
    graded += f" ({kept} unchanged, kept)" if kept > 0 else ""
    if summary.not_graded:
        who = safe_text.terminal_cell(safe_text.first_of(summary.not_graded, 5))
        graded += f"; {len(summary.not_graded)} not graded: {who}"
    table.add_row("graded this run", graded)
    table.add_row(
        "mean / median score",
        f"{summary.mean():.1f} / {summary.median():.1f} of {TOTAL_POINTS}",
    )
    table.add_row(
        "part means",
        "  ".join(
            f"P{k} {summary.part_mean(k):.1f}/{p.points}" for k, p in PARTS.items()
        ),
    )
    for diagnosis, who in summary.mistakes[:SHOWN]:
        table.add_row(
            f"likely mistake ({len(who)})",
            safe_text.terminal_cell(f"{diagnosis}: {safe_text.first_of(who, 5)}"),
        )
    _more(table, "likely mistake", summary.mistakes)
    for test, count in summary.failed_tests[:SHOWN]:
        table.add_row(f"failed by {count}", safe_text.terminal_cell(test))
    _more(table, "failed by", summary.failed_tests)
    for name, what in summary.troubles[:SHOWN]:
        table.add_row(
            "trouble", safe_text.terminal_cell(f"{name}: {safe_text.md_plain(what)}")
        )
    _more(table, "trouble", summary.troubles)
    return table


#: The most students the terminal's table of the batch lists: about a screenful.
SCREENFUL = 30
#: The most characters of a first problem in that table (the files hold all of it).
PROBLEM_WIDTH = 100


def student_table(summary: ClassSummary) -> Table:
    """This run's students, one row each (name, score, first problem): up to
    ``SCREENFUL`` of them, then how many more the gradebook holds."""
    scores = {row["name"]: row["score"] for row in summary.rows}
    table = Table(title="This run's students")
    table.add_column("student")
    table.add_column("score", justify="right")
    table.add_column("first problem")
    for name in summary.batch[:SCREENFUL]:
        score = f"{scores[name]}/{TOTAL_POINTS}" if name in scores else "not graded"
        problem = safe_text.md_plain(summary.first_problems.get(name, ""))
        problem = safe_text.capped(problem, PROBLEM_WIDTH)
        table.add_row(
            safe_text.terminal_cell(name), score, safe_text.terminal_cell(problem)
        )
    more = len(summary.batch) - SCREENFUL
    if more > 0:
        table.add_row(f"... and {more} more", "", f"in {report.GRADEBOOK}, {REPORT}")
    return table


def _more(table: Table, label: str, rows: list) -> None:
    if len(rows) > SHOWN:
        table.add_row(label, f"... and {len(rows) - SHOWN} more in {REPORT}")


# The page ------------------------------------------------------------------------------------


def write_report(out: Path, summary: ClassSummary) -> Path:
    path = out / REPORT
    report.atomic_write(path, report_html(summary))
    return path


#: The page's style: it fits a phone (390 px) as a desktop: wide tables scroll inside their
#: own box, long text wraps, the plots shrink to the width.
STYLE = """
*, *::before, *::after { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 0 auto;
  padding: 0.75rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.5rem; margin: 0.5rem 0; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 0.5rem; }
.scroll { overflow-x: auto; max-width: 100%; margin: 0.25rem 0 1rem; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left;
  vertical-align: top; }
td.n { text-align: right; white-space: nowrap; }
td.text { min-width: 10rem; max-width: 32rem; overflow-wrap: anywhere; }
code { background: #f2f2f2; padding: 0 0.15em; overflow-wrap: anywhere; }
.plots { display: flex; flex-wrap: wrap; gap: 0 2rem; }
.plots > div { flex: 1 1 18rem; min-width: 0; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font-size: 11px; fill: #222; }
summary { cursor: pointer; }
"""


def report_html(summary: ClassSummary) -> str:
    """The page: the class at a glance, the students who need attention and the gradebook
    first, then the plots and what the class got wrong."""
    head = [
        ("students in the gradebook", str(len(summary.rows))),
        ("graded this run", str(summary.graded_now)),
        ("not graded", ", ".join(summary.not_graded) or "none"),
        ("mean score", f"{summary.mean():.1f} of {TOTAL_POINTS}"),
        ("median score", f"{summary.median():.1f} of {TOTAL_POINTS}"),
        ("full marks", str(sum(s == TOTAL_POINTS for s in summary.scores))),
    ]
    means = [
        (f"Part {k}: {p.title}", f"{summary.part_mean(k):.1f}", str(p.points))
        for k, p in PARTS.items()
    ]
    mistakes = [(d, str(len(who)), ", ".join(who)) for d, who in summary.mistakes]
    failed = [(t, str(n)) for t, n in summary.failed_tests]
    book = [
        (
            r["name"],
            str(r["score"]),
            *(str(r[f"part{k}"]) for k in PARTS),
            r["problems"],
        )
        for r in summary.rows
    ]
    attention = [*summary.troubles, *((n, "not graded") for n in summary.not_graded)]
    plots = [
        ("Score distribution", _histogram(summary.scores)),
        (
            "Mean points per part",
            _bars(
                [(f"P{k}", summary.part_mean(k), p.points) for k, p in PARTS.items()]
            ),
        ),
    ]
    plot_html = "\n".join(f"<div><h2>{t}</h2>\n{svg}</div>" for t, svg in plots)
    book_header = ("name", "score", *(f"P{k}" for k in PARTS), "problems")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Class report</title>
<style>{STYLE}</style>
</head>
<body>
<h1>Class report</h1>
{_table("summary", ("", "class"), head)}
<h2>Needs attention ({len(attention)})</h2>
{_table("troubles", ("submission", "what happened"), attention, markdown={1})}
<h2>Gradebook ({len(book)})</h2>
{_table("gradebook", book_header, book, markdown={len(book_header) - 1})}
<div class="plots">
{plot_html}
</div>
{_table("part-means", ("part", "mean", "points"), means)}
{_section("Most common likely mistakes", _table("mistakes", ("likely mistake", "submissions", "who"), mistakes), len(mistakes))}
{_section("Tests failed most", _table("failed-tests", ("test", "submissions"), failed), len(failed))}
</body>
</html>
"""


def _section(title: str, body: str, count: int) -> str:
    """A titled list, folded away when it is longer than the terminal's (``SHOWN``)."""
    if count <= SHOWN:
        return f"<h2>{title}</h2>\n{body}"
    return (
        f'<details>\n<summary><h2 style="display:inline">{title} ({count})</h2>'
        f"</summary>\n{body}\n</details>"
    )


def _table(ident: str, header: tuple[str, ...], rows, markdown=frozenset()) -> str:
    """A table in a box of its own that scrolls sideways where the page is narrower; the
    columns in ``markdown`` hold the grader's sentences (``safe_text.md_html``)."""
    e = safe_text.html_text
    if not rows:
        return f'<p id="{ident}">None.</p>'

    def cell(i: int, c: str) -> str:
        if i in markdown:
            return f'<td class="text">{safe_text.md_html(c)}</td>'
        if re.fullmatch(r"[\d.]+", c):
            return f'<td class="n">{e(c)}</td>'
        return f'<td class="text">{e(c)}</td>'

    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "\n".join(
        "<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return (
        f'<div class="scroll">\n<table id="{ident}">\n<tr>{head}</tr>\n{body}\n'
        "</table>\n</div>"
    )


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{safe_text.html_text(label)}">\n'
        + "\n".join(body)
        + "\n</svg>"
    )


def _histogram(scores: list[int]) -> str:
    """Submissions per band of ten points (the last band is 90-100)."""
    bands = [0] * 10
    for score in scores:
        bands[min(int(score * 10 // TOTAL_POINTS), 9)] += 1
    top = max(bands) or 1
    width, height, bar = 460, 180, 40
    body = []
    for i, count in enumerate(bands):
        h = 130 * count / top
        x, y = 30 + i * (bar + 3), 150 - h
        body.append(
            f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{h:.1f}" fill="#4a78b5"/>'
        )
        if count:
            body.append(
                f'<text x="{x + bar / 2}" y="{y - 3:.1f}" text-anchor="middle">{count}</text>'
            )
        upper = "100" if i == 9 else str((i + 1) * 10 - 1)
        body.append(
            f'<text x="{x + bar / 2}" y="165" text-anchor="middle">{i * 10}-{upper}</text>'
        )
    return _svg(width, height, body, "number of submissions per score band")


def _bars(values: list[tuple[str, float, int]]) -> str:
    """Each part's mean as a share of its points."""
    width, height = 460, 30 + 24 * len(values)
    body = []
    for i, (label, mean, points) in enumerate(values):
        y, w = 10 + i * 24, 360 * min(mean / points, 1)
        body.append(f'<text x="0" y="{y + 14}">{safe_text.html_text(label)}</text>')
        body.append(f'<rect x="30" y="{y}" width="360" height="18" fill="#e4e9f2"/>')
        body.append(
            f'<rect x="30" y="{y}" width="{w:.1f}" height="18" fill="#4a78b5"/>'
        )
        body.append(f'<text x="{30 + 365}" y="{y + 14}">{mean:.1f}/{points}</text>')
    return _svg(width, height, body, "mean points per part")
