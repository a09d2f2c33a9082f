"""The release builder: stubs match the reference, handouts and Gradescope zips leak nothing."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

import pytest

from autograder.gradescope import build_gradescope
from autograder.release import (
    ASSIGNMENTS,
    REPO,
    ReleaseError,
    build_handout,
    find_leaks,
    make_stub,
    strip_hidden_tests,
    stub_files,
)


def test_assignments_are_generated_from_solutions():
    expected = stub_files()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in ASSIGNMENTS.glob("*.py")}
    stale = sorted(
        n for n in expected.keys() | on_disk.keys() if expected.get(n) != on_disk.get(n)
    )
    assert not stale, (
        f"assignments/ is out of date for {stale}: run `autograder release`"
    )


def test_stub_keeps_signature_docstring_and_todo():
    source = (
        "def f(x):\n"
        '    """Doc."""\n'
        "    # TODO: double x.\n"
        "    ### BEGIN SOLUTION\n"
        "    return 2 * x\n"
        "    ### END SOLUTION\n"
    )
    assert make_stub(source) == (
        'def f(x):\n    """Doc."""\n    # TODO: double x.\n'
        '    raise NotImplementedError("TODO: f")\n'
    )


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n",  # no TODO
        "def f():\n    # TODO: x\n    ### BEGIN SOLUTION\n    return 1\n",  # unterminated
        "def f():\n    return 1\n    ### END SOLUTION\n",  # END without BEGIN
    ],
)
def test_broken_markers_are_refused(source):
    with pytest.raises(ReleaseError):
        make_stub(source)


def test_strip_hidden_tests_removes_decorators_and_body():
    source = (
        "import pytest\n\n\n"
        "@pytest.mark.points(1)\n@pytest.mark.public\ndef test_a():\n    assert True\n\n\n"
        "@pytest.mark.points(2)\n@pytest.mark.hidden\ndef test_b():\n    assert 'secret'\n"
    )
    stripped = strip_hidden_tests(source)
    assert (
        "test_a" in stripped and "test_b" not in stripped and "secret" not in stripped
    )
    assert "points(2)" not in stripped


def test_handout_has_stubs_public_tests_and_no_solution(tmp_path):
    out = tmp_path / "handout"
    zip_path = build_handout(out)
    assert (out / "assignments" / "transformer_hw" / "attention.py").is_file()
    assert not (out / "solutions").exists()
    assert find_leaks(out) == []
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
    assert "handout/assignments/transformer_hw/charlm.py" in names
    assert not [
        n for n in names if "solutions" in n or "mutants" in n or "sandbox" in n
    ]


def test_handout_runs_its_public_tests_against_its_stubs(tmp_path):
    """A student's first run: every public test collects, runs and fails on the stubs."""
    build_handout(tmp_path / "handout")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path / "handout", capture_output=True, text=True, check=False,
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1 and " failed" in summary and "passed" not in summary, (
        summary
    )
    assert "error" not in summary, done.stdout[-2000:]


def test_handout_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(ReleaseError):
        build_handout(tmp_path)


def test_every_graded_test_fails_against_the_stubs(tmp_path):
    """The stubs earn nothing: run the whole graded suite against assignments/."""
    report = tmp_path / "stubs.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/graded", "-q", "-p", "no:cacheprovider",
         "--submission", str(ASSIGNMENTS.parent), f"--junitxml={report}"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    cases = list(ET.parse(report).getroot().iter("testcase"))
    # Exit 1 is "tests failed"; no test collected (5) or a collection error must fail here.
    assert cases and done.returncode == 1, done.stdout[-2000:]
    passed = [c.get("name") for c in cases if not list(c)]
    assert not passed, f"tests passing against the stubs: {passed}"


def test_gradescope_zip_has_the_entry_points_and_no_solution(tmp_path):
    zip_path = build_gradescope(tmp_path / "autograder.zip")
    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
        assert archive.getinfo("run_autograder").external_attr >> 16 & 0o111
        archive.extractall(tmp_path / "unpacked")
    assert {
        "setup.sh",
        "run_autograder",
        "autograder/cli.py",
        "tests/conftest.py",
    } <= names
    assert not [n for n in names if n.startswith("solutions/") or "mutants" in n]
    assert not [
        leak for leak in find_leaks(tmp_path / "unpacked") if "hidden" not in leak
    ]


def test_leak_check_finds_a_copied_solution_block(tmp_path):
    reference = ASSIGNMENTS.parent.parent / "solutions" / "transformer_hw" / "masks.py"
    body = reference.read_text(encoding="utf-8").split("### BEGIN SOLUTION")[1]
    (tmp_path / "notes.py").write_text(
        body.split("### END SOLUTION")[0], encoding="utf-8"
    )
    assert find_leaks(tmp_path)
