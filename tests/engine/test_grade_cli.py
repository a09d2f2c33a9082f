"""``autograder grade`` and ``autograder check`` end to end, on a small subset of the suite.

The batch graded once for the session (``graded_batch``, tests/engine/conftest.py) is the
example batch and a zoo mutant, graded on part 4.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

from autograder.commands import cli
from autograder.commands.check import TestResult as Outcome
from autograder.commands.check import check_in_fresh_process
from autograder.facts.points import PACKAGE, PARTS, TOTAL_POINTS
from autograder.grading import grade
from autograder.outputs import report
from autograder.sources import intake
from autograder.sources.release import SOLUTIONS

from .conftest import KEYWORD, MUTANT

REPO = Path(__file__).resolve().parents[2]
TEST_FIELDS = {"name", "number", "score", "max_score", "status", "output", "visibility"}


def results_of(out: Path, name: str) -> dict:
    return json.loads((out / name / "results.json").read_text())


def gradebook(out: Path) -> dict[str, dict]:
    with open(out / "gradebook.csv", newline="") as f:
        return {row["name"]: row for row in csv.DictReader(f)}


def test_results_feedback_and_gradebook_of_a_batch(graded_batch):
    _, out = graded_batch
    reference = results_of(out, "alice_alternative_style")
    assert (
        reference["score"] == PARTS[4].points and reference["max_score"] == TOTAL_POINTS
    )
    assert reference["stdout_visibility"] == "hidden"
    assert reference["tests"] and all(set(t) == TEST_FIELDS for t in reference["tests"])
    assert {t["visibility"] for t in reference["tests"]} == {
        "visible",
        "after_due_date",
    }
    broken = results_of(out, "frank_broken")
    assert "rope.py has a syntax error at line" in broken["output"]
    assert all("rope.py has a syntax error" in t["output"] for t in broken["tests"])
    feedback = (out / "frank_broken" / "feedback.md").read_text()
    # the file's problem, never a line of the grader's stand-in quoted as the student's
    assert "raise " not in feedback and "transformer_hw/rope.py:" not in feedback
    assert (
        "your code raised" not in feedback.lower().split("## part 4")[1].split("## ")[0]
    )
    assert "## Problems with the submission" in feedback and "## Part 4:" in feedback
    rows = gradebook(out)
    assert list(next(iter(rows.values())))[: 3 + len(PARTS)] == [
        "name",
        "score",
        "max_score",
        *(f"part{k}" for k in PARTS),
    ]
    for name, row in rows.items():
        assert int(row["score"]) == results_of(out, name)["score"]
    assert "rope.py has a syntax error" in rows["frank_broken"]["problems"]
    assert rows["alice_alternative_style"]["problems"] == ""
    assert int(rows[MUTANT.name]["part4"]) < PARTS[4].points
    assert not list(out.rglob("*.tmp"))


def test_grades_are_private(graded_batch):
    _, out = graded_batch
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for path in out.rglob("*"):
        assert stat.S_IMODE(path.stat().st_mode) == (
            0o700 if path.is_dir() else 0o600
        ), path


class Tables(HTMLParser):
    """The cells of every ``<table id=...>`` of a page."""

    def __init__(self, page: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table = self._row = None
        self._in_cell = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs)["id"], [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._row.append("")
            self._in_cell = True

    def handle_endtag(self, tag):
        self._in_cell = self._in_cell and tag not in ("td", "th")
        if tag == "table":
            self._table = self._row = None

    def handle_data(self, data):
        if self._in_cell:
            self._row[-1] += data


def test_class_report_agrees_with_the_gradebook(graded_batch):
    _, out = graded_batch
    page = (out / "report.html").read_text()
    assert "<svg" in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    tables = Tables(page).tables
    rows = gradebook(out)
    summary = dict(tables["summary"])
    assert summary["students in the gradebook"] == str(len(rows))
    scores = [int(r["score"]) for r in rows.values()]
    assert summary["mean score"] == f"{sum(scores) / len(scores):.1f} of {TOTAL_POINTS}"
    means = {row[0]: row[1] for row in tables["part-means"][1:]}
    for k, part in PARTS.items():
        mean = sum(int(r[f"part{k}"]) for r in rows.values()) / len(rows)
        assert means[f"Part {k}: {part.title}"] == f"{mean:.1f}"
    # Each part's likely mistake (the first its failures name), with exactly the submissions
    # that made it: one wording per mistake and submission, however many tests name it.
    made: dict[str, set[str]] = {}
    for name in rows:
        named: dict[str, str] = {}
        for test in results_of(out, name)["tests"]:
            part = test["name"].split(":")[0]
            for line in test["output"].splitlines():
                if line.strip().startswith("Likely mistake:"):
                    diagnosis = line.split("Likely mistake:")[1].strip().rstrip(".")
                    named.setdefault(part, diagnosis)
        for diagnosis in named.values():
            made.setdefault(diagnosis, set()).add(name)
    assert len(made) >= 2  # the half-split RoPE example and the mutant
    listed = {d: (int(n), set(who.split(", "))) for d, n, who in tables["mistakes"][1:]}
    assert listed == {d: (len(who), who) for d, who in made.items()}
    assert any(MUTANT.diagnosis in d for d in listed)
    troubles = dict(tables["troubles"][1:])
    assert "rope.py has a syntax error" in troubles["frank_broken"]


def test_editing_one_file_regrades_only_that_submission(graded_batch, tmp_path, capsys):
    batch, out = (shutil.copytree(p, tmp_path / p.name) for p in graded_batch)
    before = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json")}
    edited = batch / "bob_mask_after_softmax" / "transformer_hw" / "rope.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    capsys.readouterr()
    assert cli.main(["grade", str(batch), "--out", str(out), "-k", KEYWORD]) == 0
    after = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json")}
    assert {n for n in before if after[n] != before[n]} == {"bob_mask_after_softmax"}
    assert f"{len(before) - 1} unchanged since graded" in capsys.readouterr().out
    # --force regrades what did not change.
    alice = batch / "alice_alternative_style"
    assert (
        cli.main(["grade", str(alice), "--out", str(out), "-k", KEYWORD, "--force"])
        == 0
    )
    assert (out / alice.name / "results.json").stat().st_mtime_ns != after[alice.name]


def test_the_suite_digest_counts_torchs_version_also_without_its_metadata(monkeypatch):
    import importlib.metadata

    import torch

    def no_metadata(name):
        raise importlib.metadata.PackageNotFoundError(name)

    settings = grade.Settings()
    monkeypatch.setattr(grade, "version", no_metadata)  # a torch built from source
    without_metadata = grade.suite_digest(settings)
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert grade.suite_digest(settings) != without_metadata


def test_a_grader_failure_is_that_submissions_problem(tmp_path, monkeypatch):
    batch, out = tmp_path / "batch", tmp_path / "grades"
    for name in ("good", "unlucky"):
        shutil.copytree(
            REPO / "solutions" / "transformer_hw", batch / name / "transformer_hw"
        )
    passed = Outcome("t::test_x", "test_x", 2, 10, False, True, "")

    def run_isolated(root, settings, scrub):
        if (root / "transformer_hw" / "masks.py").read_text().startswith("# unlucky"):
            raise RuntimeError("the grader broke")
        return [passed]

    unlucky = batch / "unlucky" / "transformer_hw" / "masks.py"
    unlucky.write_text("# unlucky\n" + unlucky.read_text())
    monkeypatch.setattr(grade, "run_isolated", run_isolated)
    monkeypatch.setattr(grade, "_init_process", lambda settings: None)
    assert cli.main(["grade", str(batch), "--out", str(out)]) == 1  # the batch went on
    assert results_of(out, "good")["score"] == 10
    failed = results_of(out, "unlucky")
    assert failed["score"] == 0 and "the grader broke" in failed["output"]
    assert "the grader broke" in (out / "unlucky" / "feedback.md").read_text()
    assert "the grader broke" in gradebook(out)["unlucky"]["problems"]
    good_before = (out / "good" / "results.json").stat().st_mtime_ns
    monkeypatch.setattr(grade, "run_isolated", lambda root, settings, scrub: [passed])
    assert (
        cli.main(["grade", str(batch), "--out", str(out)]) == 0
    )  # failures are retried
    assert results_of(out, "unlucky")["score"] == 10
    assert (out / "good" / "results.json").stat().st_mtime_ns == good_before


def test_every_submission_gets_a_folder_of_its_own():
    found = [
        ("a", Path("1")),
        ("A", Path("2")),
        ("a-2", Path("3")),
        ("a", Path("4")),
        ("report.html", Path("5")),
        ("x y", Path("6")),
    ]
    names = [name for name, _ in intake.unique_names(found)]
    assert len({n.casefold() for n in names}) == len(names)
    assert names[0] == "a" and names[2] == "a-2" and "report.html" not in names
    assert names[5] == "x_y"


@pytest.mark.parametrize("visibility", ["after_due_date", "after_published"])
def test_hidden_outcomes_leave_every_visible_field_unchanged(visibility):
    def graded(hidden_passes: bool) -> dict:
        tests = [
            Outcome("a::v1", "test_v1", 1, 5, False, True, ""),
            Outcome("a::v2", "test_v2", 1, 3, False, False, "values differ"),
            Outcome(
                "a::h1",
                "test_h1",
                1,
                10,
                True,
                hidden_passes,
                "" if hidden_passes else "Likely mistake: x",
            ),
            Outcome(
                "b::h2",
                "test_h2",
                2,
                10,
                True,
                hidden_passes,
                "" if hidden_passes else "boom",
            ),
        ]
        text = report.results_json(grade.Graded("s", tests, ["a problem"]), visibility)
        return json.loads(text)

    def visible(results: dict) -> str:
        shown = {
            k: v
            for k, v in results.items()
            if k not in ("score", "execution_time", "extra_data", "tests")
        }
        shown["tests"] = [t for t in results["tests"] if t["visibility"] == "visible"]
        return json.dumps(shown, sort_keys=True)

    passing, failing = graded(True), graded(False)
    assert (
        passing["score"] == 25 and failing["score"] == 5
    )  # the hidden points do count
    assert visible(passing) == visible(failing)
    assert {t["visibility"] for t in failing["tests"]} == {"visible", visibility}
    assert "5/8 on the visible tests" in failing["output"]
    assert "Part 2" not in failing["output"]  # hidden tests only: nothing to show


def test_a_check_cell_runs_the_check_of_its_part_in_a_fresh_process(tmp_path):
    """A notebook's check cell (``check_in_fresh_process``): the command's status and output;
    where the student's code ends the process before it answers, a new Python runs the
    command, which says what happened."""
    code, out = check_in_fresh_process(SOLUTIONS.parent, 2)
    assert code == 0 and re.search(
        r"^Public tests: (\d+)/\1 points\.$", out, re.MULTILINE
    ), out
    assert "Part 2 " in out and "Part 1 " not in out
    shutil.copytree(SOLUTIONS, tmp_path / PACKAGE)
    masks = tmp_path / PACKAGE / "masks.py"
    masks.write_text("import os\n\nos._exit(3)\n" + masks.read_text())
    assert check_in_fresh_process(tmp_path, 2)[0] == 3


def test_check_runs_the_public_tests_in_process(capsys):
    assert cli.main(["check", str(REPO / "solutions")]) == 0
    text = capsys.readouterr().out
    assert "Public tests:" in text and "FAILED" not in text
    public = text.split("Public tests: ")[1].split(" ")[0]
    earned, total = public.split("/")
    assert earned == total


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_grading_on_a_gpu_that_is_not_there_is_refused_before_any_grade(
    tmp_path, capsys
):
    """Every worker would fail to start CUDA: one clear error, not a gradebook of failures."""
    out = tmp_path / "grades"
    args = ["grade", str(REPO / "solutions"), "--out", str(out), "--device", "cuda"]
    assert cli.main(args) == 2
    assert "--device cuda, but torch sees no CUDA device" in capsys.readouterr().err
    assert not out.exists()


def test_the_one_package_of_an_upload_is_found_whatever_its_shape(tmp_path):
    def upload(*files: str) -> Path:
        root = tmp_path / f"upload{len(list(tmp_path.iterdir()))}"
        for name in files:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("x = 1\n")
        return root

    bare = upload("attention.py", "masks.py", "notes.txt")
    assert intake.find_upload(bare) == (bare, None)
    deep = upload(
        "a/b/transformer_hw/attention.py", "a/notes/x.md", "__MACOSX/attention.py"
    )
    assert intake.find_upload(deep) == (deep / "a" / "b" / "transformer_hw", None)
    zipped = upload("hw.zip", "readme.md")
    assert intake.find_upload(zipped) == (zipped / "hw.zip", None)
    three_down = upload("a/b/c/transformer_hw/attention.py")
    assert intake.find_upload(three_down)[0] == three_down / "a/b/c/transformer_hw"
    too_deep = upload("a/b/c/d/transformer_hw/attention.py")
    source, problem = intake.find_upload(too_deep)
    assert source is None and "nothing to grade" in problem
    source, problem = intake.find_upload(upload("x/attention.py", "y.zip"))
    assert source is None and "2 candidate packages (`x`, `y.zip`)" in problem


def test_an_upload_with_nothing_to_grade_is_answered_without_torch(tmp_path):
    """Gradescope's command (``--single``, ``--device auto``) on an upload without the package:
    the student is told what to upload at once, not after torch is imported to pick a device."""
    (tmp_path / "upload").mkdir()
    (tmp_path / "upload" / "README.txt").write_text("hello\n")
    results = tmp_path / "results.json"
    code = (
        "import sys; from autograder.commands import cli; "
        f"cli.main(['grade', {str(tmp_path / 'upload')!r}, '--single', 'student', "
        f"'--out', {str(tmp_path / 'out')!r}, '--results', {str(results)!r}, "
        "'--device', 'auto']); "
        "print('torch imported' if 'torch' in sys.modules else 'torch not imported')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.stdout.strip().endswith("torch not imported"), done.stdout + done.stderr
    assert "upload your transformer_hw/ folder" in results.read_text()


def test_ctrl_c_ends_a_batch_at_once_and_keeps_the_gradebook(tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) while the grading
    processes wait on submissions whose softmax never returns: the command ends at once (going
    on would take minutes of time-outs), says so, and writes the gradebook."""
    batch = tmp_path / "batch"
    for name in ("a", "b", "c"):
        shutil.copytree(SOLUTIONS, batch / name / PACKAGE)
        with open(batch / name / PACKAGE / "attention.py", "a") as f:
            # Asleep, not spinning: two spinning workers would take the machine's CPUs.
            f.write("\n\nimport time\n\n\ndef softmax(x, dim=-1):\n")
            f.write("    while True:\n        time.sleep(1)\n")
    out = tmp_path / "out"
    # `autograder` with Python's own Ctrl-C handler: a shell may start a background command
    # with SIGINT ignored (a terminal's foreground command has it).
    # Part 1 only (softmax's part): a subset that trains nothing spares every grading process
    # and the pool's server `torch._dynamo`'s import.
    argv = ["autograder", "grade", str(batch), "--out", str(out), "--jobs", "2"]
    argv += ["-k", "part1"]
    start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        f"sys.argv = {[*argv, '--timeout', '60']!r}; "
        "runpy.run_module('autograder', run_name='__main__', alter_sys=True)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", start],
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not sandbox_workers_below(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    # Grading: its submissions' workers are under way, soon asleep in softmax.
    time.sleep(2)
    os.killpg(process.pid, signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # say which process held the batch up, and where
        pytest.fail(
            "still running a minute after Ctrl-C:\n" + describe_tree(process.pid)
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, output[-2000:]
    assert "interrupted: what was graded is kept" in output
    assert (out / "gradebook.csv").is_file()


def processes_below(pid: int) -> tuple[set[int], dict[int, int], dict[int, bytes]]:
    """The processes below ``pid``; every process's parent and command line."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat_fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                commands[int(entry.name)] = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat_fields[1])
    below, new = set(), {pid}
    while new:
        new = {p for p, parent in parents.items() if parent in new} - below
        below |= new
    return below, parents, commands


def sandbox_workers_below(pid: int) -> int:
    """How many sandbox workers (children of a template process) run below ``pid``."""
    below, parents, commands = processes_below(pid)
    return sum(b"template_main" in commands.get(parents[p], b"") for p in below)


def describe_tree(pid: int) -> str:
    """``pid`` and the processes below it: state, kernel wait channel, command line."""
    below, parents, commands = processes_below(pid)
    lines = []
    for p in sorted({pid} | below):
        proc = Path(f"/proc/{p}")
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = (proc / "wchan").read_text()
        except OSError:
            continue
        command = commands.get(p, b"").replace(b"\0", b" ").decode(errors="replace")
        lines.append(f"{p} (parent {parents.get(p)}) {state} {wchan}: {command[:160]}")
    return "\n".join(lines)
