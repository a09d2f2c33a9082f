"""``autograder grade --shard I/N`` and ``autograder merge``: a batch graded as 3 shards and
merged gives what one run of it gives, and shards that would not are refused.

A small batch on part 4 (``-k``): two copies of the reference, the stubs, one with a syntax
error and a zoo mutant, named so that every shard owns at least one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.commands import cli
from autograder.facts.points import PACKAGE
from autograder.grading import grade
from autograder.outputs import shards
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import apply

from .conftest import KEYWORD, MUTANT

REPO = Path(__file__).resolve().parents[2]
STUBS = REPO / "assignments" / PACKAGE
SPLIT = 3


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, Path, list[Path]]:
    """The batch graded in one run and as 3 shards: ``(batch, one run's out, shard outs)``."""
    folder = tmp_path_factory.mktemp("shards")
    batch = folder / "batch"
    for name in ("ada", "cleo"):
        shutil.copytree(SOLUTIONS, batch / name / PACKAGE)
    shutil.copytree(STUBS, batch / "stub" / PACKAGE)
    shutil.copytree(SOLUTIONS, batch / "broken" / PACKAGE)
    with open(batch / "broken" / PACKAGE / "rope.py", "a") as f:
        f.write("\ndef (:\n")
    apply(MUTANT, SOLUTIONS, batch / "gus")
    owners = {shards.shard_of(p.name, SPLIT) for p in batch.iterdir()}
    assert owners == set(range(1, SPLIT + 1)), "every shard should own a submission"

    command = ["grade", str(batch), "-k", KEYWORD, "--out"]
    outs = [folder / f"shard-{i}" for i in range(1, SPLIT + 1)]
    # One suite for the four runs, even while the checkout is edited under them (the digest
    # reads the engine's files): this test compares gradings, not checkouts.
    suite = grade.suite_digest(grade.Settings(keyword=KEYWORD))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grade, "suite_digest", lambda settings: suite)
        assert cli.main([*command, str(folder / "one-run")]) == 0
        for i, out in enumerate(outs, 1):
            assert cli.main([*command, str(out), "--shard", f"{i}/{SPLIT}"]) == 0
    return batch, folder / "one-run", outs


def without_times(path: Path) -> dict:
    results = json.loads(path.read_text(encoding="utf-8"))
    results.pop("execution_time")
    return results


def test_three_shards_merged_equal_one_run(graded, tmp_path):
    batch, one_run, outs = graded
    names = sorted(p.name for p in batch.iterdir())
    owned = [json.loads((out / shards.MANIFEST).read_text())["names"] for out in outs]
    assert sorted(n for names_of in owned for n in names_of) == names  # disjoint, all
    for out, names_of in zip(outs, owned):
        assert sorted(p.name for p in out.iterdir() if p.is_dir()) == names_of
        assert not (out / "gradebook.csv").exists()  # only its results and manifest

    merged = tmp_path / "merged"
    assert cli.main(["merge", *map(str, reversed(outs)), "--out", str(merged)]) == 0
    for file in ("gradebook.csv", "report.html"):  # no time recorded: the same bytes
        assert (merged / file).read_bytes() == (one_run / file).read_bytes(), file
    for name in names:
        for file in ("feedback.md", "instructor.md"):
            assert (merged / name / file).read_bytes() == (
                one_run / name / file
            ).read_bytes(), (name, file)
        mine, theirs = merged / name / "results.json", one_run / name / "results.json"
        assert without_times(mine) == without_times(theirs), name
        # Byte for byte, once the one recorded time is the same.
        times = json.loads(theirs.read_text())["execution_time"]
        text = mine.read_text().replace(
            f'"execution_time": {json.loads(mine.read_text())["execution_time"]},',
            f'"execution_time": {times},',
        )
        assert text == theirs.read_text(), name


def test_adding_a_submission_moves_no_other():
    names = [f"student{i}" for i in range(200)]
    before = {n: shards.shard_of(n, SPLIT) for n in names}
    batch = [(n, Path(n)) for n in [*names, "newcomer"]]
    slices = [shards.owned(batch, shards.Shard(i, SPLIT)) for i in (1, 2, 3)]
    assert sorted(n for part in slices for n, _ in part) == sorted(n for n, _ in batch)
    assert all(
        before[n] == i
        for i, part in enumerate(slices, 1)
        for n, _ in part
        if n in before
    )
    assert all(len(part) > 40 for part in slices)  # a hash, not one shard for all


def merge(capsys, *folders: Path, out: Path) -> tuple[int, str]:
    code = cli.main(["merge", *map(str, folders), "--out", str(out)])
    return code, " ".join(capsys.readouterr().out.split())


def edited_copy(folder: Path, to: Path, **manifest) -> Path:
    """A copy of a shard's output with ``manifest``'s entries in its manifest."""
    shutil.copytree(folder, to)
    path = to / shards.MANIFEST
    path.write_text(json.dumps(json.loads(path.read_text()) | manifest))
    return to


def test_missing_overlapping_and_foreign_shards_are_refused(graded, tmp_path, capsys):
    batch, one_run, (first, second, third) = graded
    out = tmp_path / "merged"

    code, said = merge(capsys, first, third, out=out)
    assert code == 2 and f"shard 2/{SPLIT} missing: merging needs all {SPLIT}" in said
    code, said = merge(capsys, first, second, second, third, out=out)
    assert code == 2 and "shard 2/3 is given twice" in said and "overlap" in said
    other_split = edited_copy(second, tmp_path / "halves", shard="2/2")
    code, said = merge(capsys, first, other_split, third, out=out)
    assert code == 2 and "come from different splits and overlap" in said
    other_suite = tmp_path / "suite"  # the same shard of the same batch, on part 1
    command = ["grade", str(batch), "-k", "part1", "--shard", "2/3"]
    assert cli.main([*command, "--out", str(other_suite)]) == 0
    capsys.readouterr()
    code, said = merge(capsys, first, other_suite, third, out=out)
    assert code == 2 and "graded with different suites" in said
    other_batch = edited_copy(second, tmp_path / "batch", batch_sha256="0" * 64)
    code, said = merge(capsys, first, other_batch, third, out=out)
    assert code == 2 and "cut from different batches" in said
    unfinished = edited_copy(second, tmp_path / "unfinished")
    lost = json.loads((unfinished / shards.MANIFEST).read_text())["names"][0]
    (unfinished / lost / "results.json").unlink()
    code, said = merge(capsys, first, unfinished, third, out=out)
    assert code == 2 and f"has no grade for 1 of its submissions ({lost})" in said
    code, said = merge(capsys, first, one_run, third, out=out)
    assert code == 2 and "holds no shard.json: it is not a shard's output" in said
    assert not out.exists()  # nothing written before the shards are checked

    # As a command: the message and status, never a traceback.
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "merge", str(first), str(third)]
        + ["--out", str(out)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    assert "missing: merging needs all 3" in done.stdout


def test_a_shard_must_be_i_of_n(capsys):
    for wrong in ("0/3", "4/3", "2", "a/b"):
        with pytest.raises(SystemExit) as exit:
            cli.main(["grade", "batch", "--out", "out", "--shard", wrong])
        assert exit.value.code == 2
        assert "--shard" in capsys.readouterr().err
