"""A batch of submissions graded: what changed since its last grade, each grade written as it
finishes, and the gradebook from rows kept in memory (a grade kept from an earlier run is read
back once, not after every submission).

The gradebook of an output folder accumulates: it holds every student graded into that folder,
by any run, so grading one late submission, or a few, updates their rows and keeps everyone
else's. A student leaves it only on request (``remove``, or ``prune`` to keep only this run's
batch)."""

from __future__ import annotations

import json
from pathlib import Path

from autograder import sandbox
from autograder.facts import safe_text, stages
from autograder.facts.progress import BatchProgress
from autograder.grading import grade
from autograder.outputs import classreport, report
from autograder.sources import intake

#: The most characters of a grader failure's detail printed (the traceback's start).
MAX_DETAIL = 4000


def grade_batch(
    console,
    staging: Path,
    out: Path,
    found: list[tuple[str, Path]],
    problems: dict[str, str],
    settings: grade.Settings,
    *,
    jobs: int,
    force: bool = False,
    shard=None,
    batch: list[str] | None = None,
    remove: tuple[str, ...] = (),
    prune: bool = False,
) -> int:
    """Grade what changed since its last grade; write grades, gradebook and class report; the
    number of submissions the grader failed on. With ``shard``, ``found`` is the shard's part
    of the names in ``batch``: its grades and manifest only, for ``merge``. Submissions are
    staged under ``staging``, which must outlast the grading. ``remove`` names students whose
    grades leave the folder; ``prune`` removes every student not in ``found``."""
    names = [n for n, _ in found]
    if not shard:
        _remove_students(console, out, names, remove, prune)
        if not found:  # only removals asked for
            write_class_files(console, out, names, {}, 0)
            return 0
    console.print("[bold]protections in force:[/] " + "; ".join(sandbox.protections()))
    suite = grade.suite_digest(settings)
    if shard:
        from autograder.outputs import shards

        shards.write_manifest(out, shard, suite, batch, names)
    # Everyone the folder holds stays in the gradebook while this run rewrites it.
    rows: dict[str, dict] = {} if shard else _kept_rows(out)
    failed = graded_now = 0

    def write(graded: grade.Graded, digests: dict[str, str]) -> None:
        with stages.timed("writing the outputs"):
            text = report.write_submission(
                out, graded, settings.hidden_visibility, digests
            )
            row = report.row_of(graded.name, json.loads(text))
            if row is not None:
                rows[graded.name] = row
        stages.flush(graded.name)

    digests, todo = {}, []
    for name, source in found:
        if name in problems:  # nothing to grade: the upload itself is the problem
            write(grade.Graded(name, [], [problems[name]]), {})
            graded_now += 1
            console.print(safe_text.md_plain(f"{name}: {problems[name]}"), markup=False)
            continue
        try:  # staged once: for its digest, then graded as staged
            with stages.timed("staging"):
                source = intake.stage(name, source, staging / name)
                digests[name] = {
                    "submission_sha256": grade.submission_digest(source),
                    "suite_sha256": suite,
                }
        except Exception:  # noqa: BLE001 - grade_one reports it as the submission's problem
            digests[name] = {}
        stages.flush(name)
        kept = None if force else report.current_results(out, name, digests[name])
        if kept is None:
            todo.append((name, source))
        elif row := report.row_of(name, kept):
            rows[name] = row
    if len(todo) < len(found) - len(problems):
        skipped = len(found) - len(problems) - len(todo)
        console.print(
            f"{skipped} unchanged since graded (same files, same suite): kept; --force regrades"
        )
    try:
        with BatchProgress(console, len(todo)) as progress:
            for name, graded in grade.grade_many(
                todo, settings, jobs, progress.grading
            ):
                write(graded, digests[name])
                graded_now += 1
                if graded.failed:
                    failed += 1
                    console.print(
                        safe_text.plain(
                            f"{name}: the grader failed: {graded.detail[:MAX_DETAIL]}"
                        ),
                        style="red",
                        markup=False,
                    )
                if not shard:  # a shard's gradebook is merge's to write
                    with stages.timed("writing the outputs"):
                        report.write_gradebook(out, list(rows.values()))
                    stages.flush("")
                progress.finished(name, sum(report.part_scores(graded.tests).values()))
    finally:
        if not shard:
            # Interrupted: those not regraded keep the grades they had.
            with stages.timed("writing the outputs"):
                summary = write_class_files(None, out, names, rows, graded_now)
            stages.flush("")
    if shard:
        console.print(
            f"shard {shard}: {len(names)} of the batch's {len(batch)} submissions, "
            f"results in {out}/<name>/results.json; autograder merge makes the gradebook"
        )
        return failed
    _print_summary(console, out, summary)
    return failed


def write_class_files(console, out: Path, names: list[str], rows: dict, graded_now):
    """(Also ``autograder merge``'s.) The gradebook and the class report of every student ``out`` holds: ``rows`` (this
    run's) and the grades the folder kept (earlier runs', and this batch's unchanged ones);
    printed too when ``console`` is given. The class summary."""
    rows = _kept_rows(out) | rows
    ordered = report.write_gradebook(out, list(rows.values()))
    summary = classreport.summarize(out, names, ordered, graded_now)
    classreport.write_report(out, summary)
    if console is not None:
        _print_summary(console, out, summary)
    return summary


def _kept_rows(out: Path) -> dict[str, dict]:
    """The gradebook rows of every grade ``out`` holds, by name."""
    return {
        name: row
        for name in report.graded_names(out)
        if (row := report.gradebook_row(out, name))
    }


def _print_summary(console, out: Path, summary: classreport.ClassSummary) -> None:
    console.print(classreport.summary_table(summary))
    if summary.batch:
        console.print(classreport.student_table(summary))
    console.print(
        f"the gradebook holds {len(summary.rows)} students, {summary.graded_now} graded "
        f"this run: results in {out}/<name>/results.json, gradebook in "
        f"{out / report.GRADEBOOK}, class report in {out / classreport.REPORT}",
        markup=False,
        highlight=False,
    )


def _remove_students(console, out: Path, batch: list[str], remove, prune: bool) -> None:
    """Take the grades of ``remove`` (and with ``prune``, of every student not in ``batch``)
    out of ``out``. Only a folder of grades is removed (``report.remove_grade``); a name
    that has none is said so."""
    names = list(remove)
    if prune:
        names += [n for n in report.graded_names(out) if n not in batch]
    for name in names:
        if report.remove_grade(out, name):
            console.print(
                safe_text.one_line(f"removed {name} from {out}"), markup=False
            )
        else:
            console.print(
                safe_text.one_line(f"{out} holds no grade of {name}: nothing removed"),
                style="yellow",
                markup=False,
            )
