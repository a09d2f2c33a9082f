"""The class report: what a whole batch got wrong, as ``DIR/report.html`` and as a short table.

Made from the findings each ``results.json`` carries (``autograder.findings``) and from the
gradebook's rows, and never from feedback's wording: the terminal's table, the page and the
gradebook's ``problems`` column say the same things about the same submissions. The terminal
shows the first rows of each list and says how many more the page holds. The page is one file with its plots as inline SVG: it opens anywhere,
offline, and can be mailed to the course staff as it is.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from autograder import report, safe_text
from autograder.points import PARTS, TOTAL_POINTS

REPORT = "report.html"
SHOWN = 10  # rows of each list in the terminal, the rest in the page


@dataclass(frozen=True)
class ClassSummary:
    rows: list[dict]  # the gradebook's rows
    not_graded: list[str]  # names in the batch without a grade
    # likely mistake, who made it (in any part); most common first
    mistakes: list[tuple[str, list[str]]]
    failed_tests: list[
        tuple[str, int]
    ]  # test, how many submissions failed it; most first
    # submission, what went wrong beyond its score (its gradebook ``problems``)
    troubles: list[tuple[str, str]]

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


def summarize(out: Path, names: list[str], rows: list[dict]) -> ClassSummary:
    """The summary of a batch from its gradebook rows and the findings in its
    ``results.json`` files."""
    made: dict[str, set[str]] = {}
    failed: Counter[str] = Counter()
    for row in rows:
        name = row["name"]
        results = json.loads((out / name / report.RESULTS).read_text(encoding="utf-8"))
        failed.update(t["name"] for t in results["tests"] if t["status"] == "failed")
        for _, diagnosis in report.read_findings(results).mistakes():
            made.setdefault(diagnosis, set()).add(name)
    graded = {row["name"] for row in rows}
    mistakes = sorted(made.items(), key=lambda item: (-len(item[1]), item[0]))
    return ClassSummary(
        rows=rows,
        not_graded=sorted(set(names) - graded),
        mistakes=[(d, sorted(who)) for d, who in mistakes],
        failed_tests=sorted(failed.items(), key=lambda item: (-item[1], item[0])),
        troubles=[(row["name"], row["problems"]) for row in rows if row["problems"]],
    )


def _who(names: list[str], limit: int = 5) -> str:
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


def summary_table(summary: ClassSummary) -> Table:
    """The report's summary as a short table for the terminal (names, tests and diagnoses
    printed as written: ``E[x^2]`` or a folder ``bob[2]`` is no rich markup, and control
    characters are shown, not sent)."""
    table = Table(title="Class summary", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    graded = f"{len(summary.rows)}"
    if summary.not_graded:
        who = safe_text.terminal_cell(_who(summary.not_graded))
        graded += f" ({len(summary.not_graded)} not graded: {who})"
    table.add_row("submissions graded", graded)
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
            safe_text.terminal_cell(f"{diagnosis}: {_who(who)}"),
        )
    _more(table, "likely mistake", summary.mistakes)
    for test, count in summary.failed_tests[:SHOWN]:
        table.add_row(f"failed by {count}", safe_text.terminal_cell(test))
    _more(table, "failed by", summary.failed_tests)
    for name, what in summary.troubles[:SHOWN]:
        table.add_row("trouble", safe_text.terminal_cell(f"{name}: {what}"))
    _more(table, "trouble", summary.troubles)
    return table


def _more(table: Table, label: str, rows: list) -> None:
    if len(rows) > SHOWN:
        table.add_row(label, f"... and {len(rows) - SHOWN} more in {REPORT}")


# The page ------------------------------------------------------------------------------------


def write_report(out: Path, summary: ClassSummary) -> Path:
    path = out / REPORT
    report.atomic_write(path, report_html(summary))
    return path


def report_html(summary: ClassSummary) -> str:
    head = [
        ("submissions graded", str(len(summary.rows))),
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
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Class report</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5rem 0 1.5rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }}
td.n {{ text-align: right; }}
svg text {{ font-size: 11px; fill: #222; }}
</style>
</head>
<body>
<h1>Class report</h1>
{_table("summary", ("", "class"), head)}
<h2>Score distribution</h2>
{_histogram(summary.scores)}
<h2>Mean points per part</h2>
{_bars([(f"P{k}", summary.part_mean(k), p.points) for k, p in PARTS.items()])}
{_table("part-means", ("part", "mean", "points"), means)}
<h2>Most common likely mistakes</h2>
{_table("mistakes", ("likely mistake", "submissions", "who"), mistakes)}
<h2>Tests failed most</h2>
{_table("failed-tests", ("test", "submissions"), failed)}
<h2>Submissions that hit limits or broke</h2>
{_table("troubles", ("submission", "what happened"), summary.troubles)}
<h2>Gradebook</h2>
{_table("gradebook", ("name", "score", *(f"P{k}" for k in PARTS), "problems"), book)}
</body>
</html>
"""


def _table(ident: str, header: tuple[str, ...], rows) -> str:
    e = safe_text.html_text
    if not rows:
        return f'<p id="{ident}">None.</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "\n".join(
        "<tr>"
        + "".join(
            f'<td class="n">{e(c)}</td>'
            if re.fullmatch(r"[\d.]+", c)
            else f"<td>{e(c)}</td>"
            for c in row
        )
        + "</tr>"
        for row in rows
    )
    return f'<table id="{ident}">\n<tr>{head}</tr>\n{body}\n</table>'


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
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
        y, w = 10 + i * 24, 360 * mean / points
        body.append(f'<text x="0" y="{y + 14}">{safe_text.html_text(label)}</text>')
        body.append(f'<rect x="30" y="{y}" width="360" height="18" fill="#e4e9f2"/>')
        body.append(
            f'<rect x="30" y="{y}" width="{w:.1f}" height="18" fill="#4a78b5"/>'
        )
        body.append(f'<text x="{30 + 365}" y="{y + 14}">{mean:.1f}/{points}</text>')
    return _svg(width, height, body, "mean points per part")
