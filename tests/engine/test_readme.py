"""The README's walkthroughs, run as written in temporary folders.

Each walkthrough is a section of the README whose ```bash blocks a user types. The test runs
them with bash, with two stand-ins: ``.venv/bin/autograder`` and ``autograder`` start this
interpreter's ``python -m autograder`` (inside the unpacked handout that is the handout's own
package, as the student's environment has it), and the student's set-up lines (a virtual
environment, pip) are left out here: tests/engine/test_release.py runs every command of the
handout's README, and these lines must be among them. The instructor's ``grade`` runs on part 4
only (``-k part4``), on two submissions put where the README says to collect them. nbgrader's
course runs whole in tests/engine/test_nbgrader.py; here its commands must exist.
"""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.commands.cli import build_parser
from autograder.facts.points import PACKAGE, PARTS
from autograder.sources.release import SOLUTIONS

REPO = Path(__file__).resolve().parents[2]
STUDENT = "A student with the handout"
LAPTOP = "An instructor on a laptop"
GRADESCOPE = "Gradescope"
NBGRADER = "nbgrader"
#: The student's set-up lines: the handout README's own, which test_release.py runs.
SETUP = ("python3 -m venv ", ". .venv/bin/activate", "pip install ")
KEYWORD = "part4"


def readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    return readme().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str) -> list[str]:
    """The ```bash blocks of ``text``."""
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


def commands(text: str) -> list[list[str]]:
    """Every command of the ```bash blocks of ``text``, as words, split at ``&&``, ``;``, ``|``."""
    found = []
    for block in blocks(text):
        for line in block.splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for word in [*lexer, "&&"]:
                if word in ("&&", ";", "|", "||"):
                    if words:
                        found.append(words)
                    words = []
                else:
                    words.append(word)
    return found


def test_each_user_has_a_walkthrough():
    for title in (STUDENT, LAPTOP, GRADESCOPE, NBGRADER):
        assert blocks(section(title)), f"the README's {title!r} has no ```bash block"


def test_every_autograder_command_of_the_readme_parses():
    """Each ``autograder`` command in a ```bash block is one the command line accepts."""
    called = [
        words[1:] for words in commands(readme()) if Path(words[0]).name == "autograder"
    ]
    assert len(called) >= 6
    for args in called:
        try:
            build_parser().parse_args(args)
        except SystemExit as stop:
            pytest.fail(f"`autograder {' '.join(args)}` is refused ({stop.code})")


def test_the_nbgrader_walkthrough_names_nbgrader_commands():
    pytest.importorskip("nbgrader")
    from nbgrader.apps.nbgraderapp import NbGraderApp

    text = section(NBGRADER)
    named = [words[1] for words in commands(text) if words[0] == "nbgrader"]
    named += re.findall(r"`nbgrader\s+(\w+)", text)
    assert {"generate_assignment", "autograde", "generate_feedback", "export"} <= set(
        named
    )
    assert set(named) <= set(NbGraderApp.subcommands), named
    assert ["autograder", "nbgrader", "--course", "course"] in commands(text)


def stand_ins(folder: Path) -> dict[str, str]:
    """``autograder``, ``python`` and ``python3`` on PATH, and ``.venv/bin/autograder`` in
    ``folder`` (the repository's place in the walkthroughs): this interpreter. The environment
    for bash."""
    bin_ = folder.parent / "bin"
    bin_.mkdir()
    launcher = f'#!/bin/sh\nexec "{sys.executable}" -m autograder "$@"\n'
    for path in (bin_ / "autograder", folder / ".venv" / "bin" / "autograder"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(launcher)
        path.chmod(0o755)
    for name in ("python", "python3"):
        (bin_ / name).symlink_to(sys.executable)
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env["PATH"] = f"{bin_}:{env['PATH']}"
    return env


def run_blocks(text: str, cwd: Path, env: dict[str, str], skip=(), extra="") -> str:
    """Run ``text``'s ```bash blocks as one bash script in ``cwd`` (stopping at a failure);
    lines starting with ``skip`` are left out, ``extra`` is added to each ``grade``."""
    lines = ["set -e"]
    for block in blocks(text):
        for line in block.splitlines():
            if line.startswith(tuple(skip)):
                continue
            if extra and " grade " in f" {line} ":
                line += f" {extra}"
            if line.startswith("autograder check"):  # 1: it ran, and tests failed
                line += " || [ $? -eq 1 ]"
            lines.append(line)
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, "\n".join(lines) + "\n" + output[-4000:]
    return output


def collect(submissions: Path, student_zip: Path) -> list[str]:
    """Two uploads where the README says to collect them: the reference as a folder, and the
    student's ``submission.zip`` from the walkthrough (the stubs)."""
    submissions.mkdir()
    shutil.copytree(SOLUTIONS, submissions / "ada" / PACKAGE)
    shutil.copy(student_zip, submissions / "bo.zip")
    return ["ada", "bo"]


def test_the_walkthroughs_run_as_written(tmp_path):
    home = tmp_path / "repository"
    home.mkdir()
    env = stand_ins(home)
    laptop = section(LAPTOP)
    release, grade = blocks(laptop)[0], blocks(laptop)[1:]
    assert "autograder release --out handout" in release
    assert "`submissions/" in laptop and "autograder grade submissions" in grade[0]

    # The instructor releases the handout.
    run_blocks(f"```bash\n{release}```", home, env)
    assert (home / "handout.zip").is_file() and (home / "handout" / "SPEC.md").is_file()

    # A student unpacks it, checks the stubs, and zips the submission.
    student = tmp_path / "student"
    student.mkdir()
    shutil.copy(home / "handout.zip", student)
    text = section(STUDENT)
    handout_readme = (home / "handout" / "README.md").read_text(encoding="utf-8")
    handout_lines = {
        line.strip() for block in blocks(handout_readme) for line in block.splitlines()
    }
    setup = [
        line
        for block in blocks(text)
        for line in block.splitlines()
        if line.startswith(SETUP)
    ]
    assert setup and set(setup) <= handout_lines, (
        "set-up lines the handout README lacks"
    )
    out = run_blocks(text, student, env, skip=SETUP)
    assert "Public tests: 0/" in out and "Hidden tests: " in out
    with zipfile.ZipFile(student / "handout" / "submission.zip") as archive:
        assert f"{PACKAGE}/attention.py" in archive.namelist()

    # The instructor collects two submissions, grades them and finds the files to return.
    names = collect(home / "submissions", student / "handout" / "submission.zip")
    run_blocks(
        "".join(f"```bash\n{b}```" for b in grade), home, env, extra=f"-k {KEYWORD}"
    )
    named = set(re.findall(r"`(grades/[^`]+)`", laptop))
    assert {"grades/gradebook.csv", "grades/report.html"} <= named
    for path in named:
        for name in names if "<student>" in path else [None]:
            found = home / (path.replace("<student>", name) if name else path)
            assert found.is_file(), (
                f"the README names {path}, but grading left no {found}"
            )
    with open(home / "grades" / "gradebook.csv", newline="") as sheet:
        rows = {row["name"]: row for row in csv.DictReader(sheet)}
    assert sorted(rows) == names
    assert float(rows["ada"]["part4"]) == PARTS[4].points
    assert float(rows["bo"]["part4"]) == 0

    # Gradescope: the zip to upload.
    run_blocks(section(GRADESCOPE), home, env)
    with zipfile.ZipFile(home / "autograder.zip") as archive:
        assert {"setup.sh", "run_autograder"} <= set(archive.namelist())
