"""A batch of submissions graded: what changed since its last grade, each grade written as it
finishes, and the gradebook from rows kept in memory (a grade kept from an earlier run is read
back once, not after every submission)."""

from __future__ import annotations

import json
from pathlib import Path

from autograder import classreport, grade, intake, report, safe_text, sandbox
from autograder.progress import BatchProgress


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
) -> int:
    """Grade what changed since its last grade; write grades, gradebook and class report; the
    number of submissions the grader failed on. With ``shard``, ``found`` is the shard's part
    of the names in ``batch``: its grades and manifest only, for ``merge``. Submissions are
    staged under ``staging``, which must outlast the grading."""
    console.print("[bold]protections in force:[/] " + "; ".join(sandbox.protections()))
    suite = grade.suite_digest(settings)
    names = [n for n, _ in found]
    if shard:
        from autograder import shards

        shards.write_manifest(out, shard, suite, batch, names)
    rows: dict[str, dict] = {}

    def write(graded: grade.Graded, digests: dict[str, str]) -> None:
        text = report.write_submission(out, graded, settings.hidden_visibility, digests)
        row = report.row_of(graded.name, json.loads(text))
        if row is not None:
            rows[graded.name] = row

    digests, todo = {}, []
    for name, source in found:
        if name in problems:  # nothing to grade: the upload itself is the problem
            write(grade.Graded(name, [], [problems[name]]), {})
            console.print(safe_text.plain(f"{name}: {problems[name]}"), markup=False)
            continue
        try:  # staged once: for its digest, then graded as staged
            source = intake.stage(name, source, staging / name)
            digests[name] = {
                "submission_sha256": grade.submission_digest(source),
                "suite_sha256": suite,
            }
        except Exception:  # noqa: BLE001 - grade_one reports it as the submission's problem
            digests[name] = {}
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
    failed = 0
    try:
        with BatchProgress(console, len(todo)) as progress:
            for name, graded in grade.grade_many(
                todo, settings, jobs, progress.grading
            ):
                write(graded, digests[name])
                if graded.failed:
                    failed += 1
                    console.print(
                        safe_text.plain(f"{name}: the grader failed: {graded.detail}"),
                        style="red",
                        markup=False,
                    )
                if not shard:  # a shard's gradebook is merge's to write
                    report.write_gradebook(out, list(rows.values()))
                progress.finished(name, sum(report.part_scores(graded.tests).values()))
    finally:
        # Interrupted: those not regraded keep the grades they had.
        for name in names:
            if name not in rows and (row := report.gradebook_row(out, name)):
                rows[name] = row
        if not shard:
            ordered = report.write_gradebook(out, list(rows.values()))
            summary = classreport.summarize(out, names, ordered)
            classreport.write_report(out, summary)
    if shard:
        console.print(
            f"shard {shard}: {len(names)} of the batch's {len(batch)} submissions, "
            f"results in {out}/<name>/results.json; autograder merge makes the gradebook"
        )
        return failed
    console.print(classreport.summary_table(summary))
    console.print(
        f"results in {out}/<name>/results.json, gradebook in {out / report.GRADEBOOK}, "
        f"class report in {out / classreport.REPORT}"
    )
    return failed
