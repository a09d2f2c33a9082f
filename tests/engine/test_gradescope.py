"""The Gradescope autograder zip, run as Gradescope runs it: ``run_autograder`` in a root of
its own (``AUTOGRADER_ROOT``), on the part-4 subset of the suite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.commands import cli
from autograder.facts.points import PACKAGE, PARTS
from autograder.outputs import gradescope
from autograder.sandbox import bubblewrap
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import apply

from .conftest import KEYWORD, MUTANT

REPO = Path(__file__).resolve().parents[2]
LOCKS = sorted((REPO / "gradescope").glob("requirements-py*.txt"))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """The autograder zip, unpacked as Gradescope unpacks it."""
    folder = tmp_path_factory.mktemp("gradescope")
    path = gradescope.build_gradescope(
        folder / "autograder.zip", hidden_visibility="after_published"
    )
    with zipfile.ZipFile(path) as archive:
        archive.extractall(folder / "source")
        for info in archive.infolist():
            os.chmod(folder / "source" / info.filename, info.external_attr >> 16)
    return folder / "source"


def start_autograder(
    source: Path, root: Path, upload: dict[str, str], python: str = sys.executable
) -> subprocess.Popen:
    """Lay out ``root`` as Gradescope does, with ``upload`` as the submission, and start
    ``run_autograder`` there."""
    (root / "submission").mkdir(parents=True)
    (root / "source").symlink_to(source)
    for name, text in upload.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(text)
    env = os.environ | {
        "AUTOGRADER_ROOT": str(root),
        "AUTOGRADER_PYTHON": python,
        "AUTOGRADER_ARGS": f"-k {KEYWORD}",
    }
    return subprocess.Popen(["bash", str(source / "run_autograder")], env=env)


@pytest.fixture(scope="module")
def results(source, tmp_path_factory) -> dict[str, dict]:
    """The results of each upload the tests below look at, graded at once: each
    ``run_autograder`` starts Python, torch and a sandbox, mostly waiting, so side by side they
    take little more than one alone."""
    runs = tmp_path_factory.mktemp("runs")
    mutant = apply(MUTANT, SOLUTIONS, runs / "mutant") / PACKAGE
    uploads = {
        "reference": (package(), sys.executable),
        # Its package in a folder of the upload, beside notes and another Python file.
        "mutant": (
            package("hw3/transformer_hw", solutions=mutant)
            | {"hw3/notes/ideas.md": "# notes\n", "notes/x.py": "x = 1\n"},
            sys.executable,
        ),
        "two packages": (
            package("mine/transformer_hw") | package("backup/transformer_hw"),
            sys.executable,
        ),
        "empty": ({"README.txt": "hello\n"}, sys.executable),
        "cannot start": (package(), "false"),
    }
    started = {
        name: start_autograder(source, runs / name, upload, python)
        for name, (upload, python) in uploads.items()
    }
    # The mutant graded by `autograder grade` too, meanwhile (in this process, which has
    # imported torch already): both must give one score.
    command = ["grade", str(mutant.parent), "--out", str(runs / "grade"), "-k", KEYWORD]
    alone = cli.main(command)
    found = {}
    for name, process in started.items():
        assert process.wait(timeout=600) == 0, name
        found[name] = json.loads((runs / name / "results" / "results.json").read_text())
    assert alone == 0
    found["mutant graded alone"] = json.loads(
        (runs / "grade" / "mutant" / "results.json").read_text()
    )
    return found


def package(folder: str = PACKAGE, solutions: Path = SOLUTIONS) -> dict[str, str]:
    return {f"{folder}/{p.name}": p.read_text() for p in solutions.glob("*.py")}


def test_the_zip_holds_what_gradescope_runs_and_no_reference(source):
    assert os.access(source / "setup.sh", os.X_OK) and os.access(
        source / "run_autograder", os.X_OK
    )
    assert (
        "HIDDEN_VISIBILITY=after_published" in (source / "run_autograder").read_text()
    )
    names = {p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file()}
    assert not any(
        n.startswith(("solutions/", "autograder/batches/zoo/", "tests/engine/"))
        for n in names
    )
    assert {f"gradescope/{lock.name}" for lock in LOCKS} <= names
    assert (
        f"assignments/{PACKAGE}/attention.py" in names
    )  # the stubs, for the smoke grade


@pytest.mark.skipif(
    bubblewrap.bwrap_path() is None, reason="no bubblewrap boundary here"
)
def test_the_unpacked_grader_gets_the_bubblewrap_boundary(source):
    probe = "from autograder.sandbox import bubblewrap; print(bubblewrap.bwrap_path() is not None)"
    found = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=source,
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "True"


def test_the_reference_gets_full_marks(results):
    reference = results["reference"]
    assert gradescope.results_problems(reference) == []
    assert reference["score"] == PARTS[4].points
    assert {t["visibility"] for t in reference["tests"]} == {
        "visible",
        "after_published",
    }


def test_a_mutant_gets_its_autograder_grade_score(results):
    expected = results["mutant graded alone"]["score"]
    assert results["mutant"]["score"] == expected < PARTS[4].points


def test_an_extra_folder_beside_the_package_is_ignored(results):
    """The mutant's package sits in a folder of its upload, beside other files: it is found
    and graded all the same (a second candidate would be a problem, scoring 0)."""
    mutant = results["mutant"]
    assert mutant["tests"] and "candidate" not in mutant.get("output", "")
    assert mutant["score"] == results["mutant graded alone"]["score"] > 0


def test_two_packages_in_one_upload_are_a_reported_problem(results):
    two = results["two packages"]
    assert two["score"] == 0 and two["tests"] == []
    assert re.search(
        r"2 candidate packages \(`backup/transformer_hw`, `mine/transformer_hw`\)",
        two["output"],
    )


def test_an_empty_upload_says_what_to_upload(results):
    empty = results["empty"]
    assert empty["score"] == 0
    assert "upload your transformer_hw/ folder" in empty["output"]
    assert "attention.py" in empty["output"]


def test_a_grader_that_cannot_start_still_leaves_results(results):
    failed = results["cannot start"]
    assert failed["score"] == 0 and failed["tests"] == []
    assert "could not grade this submission" in failed["output"]


def pinned(name: str) -> str:
    """The exact version pyproject.toml pins ``name`` to."""
    text = (REPO / "pyproject.toml").read_text()
    return re.search(rf'"{name}==([^";]+)', text).group(1)


def test_each_lock_pins_every_dependency_exactly_with_hashes():
    assert {lock.name for lock in LOCKS} >= {
        "requirements-py3.10.txt",
        "requirements-py3.12.txt",
    }
    wanted = {
        re.split(r"[<>=; ]", line)[0].lower()
        for line in (REPO / "gradescope" / "requirements.in").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert {"numpy", "pytest", "hypothesis", "rich"} <= wanted and "torch" not in wanted
    for lock in LOCKS:
        text = lock.read_text()
        pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.MULTILINE))
        assert wanted <= {name.lower() for name in pins}, lock.name
        assert "torch" not in pins
        if lock.name != "requirements-py3.10.txt":  # 3.10: see requirements.in
            assert pins["hypothesis"] == pinned("hypothesis")
        for name in pins:
            assert re.search(
                rf"^{re.escape(name)}==\S+ \\\n    --hash=sha256:", text, re.MULTILINE
            ), name
