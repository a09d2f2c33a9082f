"""``autograder grade`` and ``autograder check`` end to end, on a small subset of the suite."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from autograder import cli
from autograder.points import PARTS, TOTAL_POINTS

REPO = Path(__file__).resolve().parents[2]
KEYWORD = "part2"  # masks: the quickest part, enough to see the machinery work


def make_batch(folder: Path) -> Path:
    batch = folder / "batch"
    shutil.copytree(
        REPO / "solutions" / "transformer_hw", batch / "honest" / "transformer_hw"
    )
    with zipfile.ZipFile(batch / "broken.zip", "w") as archive:
        archive.writestr("transformer_hw/masks.py", "def causal_mask(t_q, t_k=None:\n")
        archive.writestr("../escape.py", "x = 1\n")
    return batch


def gradebook_line(name: str, masks: int) -> str:
    """A gradebook row of a submission graded on part 2 (masks) alone."""
    parts = [masks if k == 2 else 0 for k in PARTS]
    return ",".join(map(str, [name, masks, TOTAL_POINTS, *parts]))


def test_grade_writes_results_feedback_and_gradebook_and_resumes(tmp_path, capsys):
    batch, out = make_batch(tmp_path), tmp_path / "grades"
    assert cli.main(["grade", str(batch), "--out", str(out), "-k", KEYWORD]) == 0
    honest = json.loads((out / "honest" / "results.json").read_text())
    assert set(honest) == {"score", "max_score", "execution_time", "output", "tests"}
    assert honest["score"] == PARTS[2].points and honest["max_score"] == TOTAL_POINTS
    for test in honest["tests"]:
        assert set(test) == {
            "name",
            "number",
            "score",
            "max_score",
            "status",
            "output",
            "visibility",
        }
        assert test["status"] == "passed" and test["visibility"] in (
            "visible",
            "after_published",
        )
    broken = json.loads((out / "broken" / "results.json").read_text())
    assert broken["score"] == 0
    assert "masks.py has a syntax error at line 1" in broken["output"]
    assert "zip entry '../escape.py' points out of its folder" in broken["output"]
    assert all("masks.py has a syntax error" in t["output"] for t in broken["tests"])
    feedback = (out / "broken" / "feedback.md").read_text()
    assert (
        "## Problems with the submission" in feedback
        and f"## Part 2: Masks (0/{PARTS[2].points})" in feedback
    )
    gradebook = (out / "gradebook.csv").read_text().splitlines()
    assert gradebook[1:] == [gradebook_line("broken", 0), gradebook_line("honest", 10)]
    assert not list(out.rglob("*.tmp"))
    capsys.readouterr()

    before = (out / "honest" / "results.json").stat().st_mtime_ns
    assert cli.main(["grade", str(batch), "--out", str(out), "-k", KEYWORD]) == 0
    assert (out / "honest" / "results.json").stat().st_mtime_ns == before
    assert "already graded" in capsys.readouterr().out
    assert (
        cli.main(
            [
                "grade",
                str(batch / "honest"),
                "--out",
                str(out),
                "-k",
                KEYWORD,
                "--force",
            ]
        )
        == 0
    )
    assert (out / "honest" / "results.json").stat().st_mtime_ns != before


def test_check_runs_the_public_tests_in_process(capsys):
    assert cli.main(["check", str(REPO / "solutions")]) == 0
    text = capsys.readouterr().out
    assert "Public tests:" in text and "FAILED" not in text
    public = text.split("Public tests: ")[1].split(" ")[0]
    earned, total = public.split("/")
    assert earned == total
