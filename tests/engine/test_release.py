"""The release builder: stubs match the reference, handouts and Gradescope zips leak nothing."""

from __future__ import annotations

import ast
import os
import re
import shutil
import site
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.outputs.gradescope import build_gradescope
from autograder.sources import intake, runner
from autograder.sources.release import (
    ASSIGNMENTS,
    ORACLES,
    REPO,
    TORCH_CPU_INDEX,
    ReleaseError,
    build_handout,
    find_leaks,
    make_stub,
    refused_test_code,
    strip_hidden_tests,
    stub_files,
)

from .conftest import Run

#: The sandbox row's modules that run student code in-process too (``autograder check``).
IN_PROCESS = ("__init__.py", "executor.py", "second_device.py")


def test_assignments_are_generated_from_solutions():
    expected = stub_files()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in ASSIGNMENTS.glob("*.py")}
    stale = sorted(
        f"assignments/transformer_hw/{n}"
        for n in expected.keys() | on_disk.keys()
        if expected.get(n) != on_disk.get(n)
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


@pytest.fixture(scope="module")
def handout(tmp_path_factory) -> Path:
    """The handout zip, built once for this module's tests."""
    return build_handout(tmp_path_factory.mktemp("release") / "handout")


def test_handout_has_stubs_public_tests_and_no_answers(handout):
    out = handout.with_suffix("")
    assert (out / "assignments" / "transformer_hw" / "attention.py").is_file()
    assert (out / "tests" / "graded" / "answers.pt").is_file()
    assert not (out / "solutions").exists()
    assert not (out / "tests" / "graded" / "oracles.py").exists()
    assert find_leaks(out) == []
    with zipfile.ZipFile(handout) as archive:
        names = archive.namelist()
    assert "handout/assignments/transformer_hw/charlm.py" in names
    assert "handout/autograder/sources/runner.py" in names
    assert not [
        n
        for n in names
        if "solutions" in n
        or "mutants" in n
        or "oracles" in n
        or ("sandbox" in n and n.rpartition("/")[2] not in IN_PROCESS)
    ]


#: Words of notes for test writers (docs/TESTING.md), which the student contract never holds.
FOR_TEST_WRITERS = re.compile(
    r"tests? must|do not test|test with|not student-facing|oracle|graded suite",
    re.IGNORECASE,
)


def test_handout_carries_the_student_contract(handout):
    """Feedback cites SPEC.md: the handout holds it at its top level, the repository's
    docs/SPEC.md as it is, which speaks to students alone."""
    text = (handout.with_suffix("") / "SPEC.md").read_text(encoding="utf-8")
    assert text == (REPO / "docs" / "SPEC.md").read_text(encoding="utf-8")
    assert "## 7. `transformer_hw/charlm.py`" in text
    assert FOR_TEST_WRITERS.findall(text) == []
    notes = (REPO / "docs" / "TESTING.md").read_text(encoding="utf-8")
    assert len(FOR_TEST_WRITERS.findall(notes)) >= 3  # the pattern finds such notes
    with zipfile.ZipFile(handout) as archive:
        assert "handout/SPEC.md" in archive.namelist()


def test_the_handouts_install_lines_name_releases_their_index_holds():
    """The README's set-up takes torch's CPU build from PyTorch's index, and its fallback pins
    name versions an index serves: ``torch==2.13.0`` from that index, never the installed
    build's label (``2.13.0+cpu`` is no release of PyPI's)."""
    from autograder.sources.release.handout import EXAMPLE_TESTS, student_readme

    text = student_readme(set(EXAMPLE_TESTS.values()), REPO / "tests" / "graded")
    assert f"pip install torch --index-url {TORCH_CPU_INDEX}\n" in text
    pins = re.findall(r"`pip install ([^`]+)`", text)
    torch_pin = [p for p in pins if p.startswith("torch==")]
    assert torch_pin == [f"torch=={version('torch')} --index-url {TORCH_CPU_INDEX}"]
    assert f"hypothesis=={version('hypothesis')}" in pins
    assert not [p for p in pins if "+" in p]


def version(name: str) -> str:
    """The release of ``name`` installed here, without its build's label."""
    import importlib.metadata

    return importlib.metadata.version(name).split("+")[0]


def start_pytest(submission: Path, tests: str, cwd: Path, log: Path, *more: str) -> Run:
    """``pytest tests`` on ``submission``, run from ``cwd``."""
    command = [sys.executable, "-m", "pytest", tests, "-q", "-p", "no:cacheprovider"]
    return Run([*command, "--submission", str(submission), *more], cwd, log)


@pytest.fixture(scope="module")
def runs(handout, tmp_path_factory) -> dict:
    """The module's two slow runs, side by side (each mostly starts Python and torch): the
    handout's public tests on the reference, and the handout's README as a student runs it.
    ``{name: (status, output)}``."""
    folder = tmp_path_factory.mktemp("runs")
    started = {
        "answers": start_pytest(
            REPO / "solutions", "tests", handout.with_suffix(""), folder / "answers.log"
        ),
        "readme": start_readme(handout, folder / "student"),
    }
    found = {name: run.finish() for name, run in started.items()}
    return found | {"student": folder / "student"}


def test_the_stored_answers_pass_the_reference(runs):
    """In the handout the public tests read stored values: the reference passes them all."""
    code, out = runs["answers"]
    summary = out.strip().splitlines()[-1]
    assert code == 0 and "passed" in summary, out[-3000:]
    assert "skipped" not in summary and "error" not in summary, summary


def readme_commands(readme: str) -> list[str]:
    """Every command line of the README's ```bash blocks, in order."""
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def start_readme(handout: Path, where: Path) -> Run:
    """A student's path: unpack the zip into ``where``, run every command block of its README
    in order.

    The README makes a virtual environment and installs torch into it. To stay lean (no copy of
    torch, no network) the new environment is seeded, right after the README makes it, with a
    ``.pth`` file naming this interpreter's site-packages, so torch and the other requirements
    are already there: the README's ``pip install`` lines find them satisfied, and
    ``pip install -e .`` installs only the handout itself (from the local wheels pip is
    configured with). pip may install into that environment only. The seeded packages'
    commands are not there, so the environment gets pytest's (else another Python's would run).
    """
    with zipfile.ZipFile(handout) as archive:
        archive.extractall(where)
    folder = where / "handout"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    seed = f".venv/lib/{version}/site-packages/_reuse.pth"
    commands = readme_commands((folder / "README.md").read_text(encoding="utf-8"))
    assert commands[0] == "python3 -m venv .venv" and "pip install -e ." in commands
    lines = []
    for command in commands:
        lines.append(command)
        if "activate" not in command:
            lines.append('echo "__rc__ $?"')
        if command == commands[0]:
            paths = "\n".join(site.getsitepackages())
            lines.append(f"printf '%s\\n' '{paths}' > {seed}")
            # The seeded packages come without their commands: pytest's, as pip makes it.
            launcher = 'exec "$(dirname "$0")/python" -m pytest "$@"'
            lines.append(f"printf '#!/bin/sh\\n%s\\n' '{launcher}' > .venv/bin/pytest")
            lines.append("chmod +x .venv/bin/pytest")
    script = "\n".join(lines) + "\n"
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env["PATH"] = f"{Path(sys.base_prefix) / 'bin'}:{env['PATH']}"
    env["PIP_REQUIRE_VIRTUALENV"] = "1"
    # Offline here: pip's retries of an index it cannot reach (the README names one) only sleep.
    env["PIP_RETRIES"] = "0"
    return Run(["bash", "-c", script], folder, where / "readme.log", env)


def test_every_readme_command_works_from_the_unpacked_zip(runs, handout, tmp_path):
    """A student's path (``start_readme``): every command of the README works."""
    _, out = runs["readme"]
    folder = runs["student"] / "handout"
    commands = readme_commands((folder / "README.md").read_text(encoding="utf-8"))
    codes = [int(c) for c in re.findall(r"^__rc__ (\d+)$", out, re.MULTILINE)]
    ran = [c for c in commands if "activate" not in c]
    failed = [
        (c, rc)
        for c, rc in zip(ran, codes, strict=True)
        # failing tests (the stubs): pytest and autograder check exit with 1
        if rc != 0 and not (c.startswith(("pytest", "autograder check")) and rc == 1)
    ]
    assert not failed, out[-6000:]
    assert (folder / ".venv" / "bin" / "autograder").is_file()
    assert "usage: autograder [-h] {check}" in out  # the CLI offers only what ships
    assert "Public tests: 0/" in out and "Hidden tests: " in out
    assert "not implemented yet (transformer_hw/attention.py:" in out
    staged = intake.stage("student", folder / "submission.zip", tmp_path / "staged")
    assert staged.problems == []
    [(name, source)] = intake.find([handout])
    assert intake.stage(name, source, tmp_path / "whole").problems == []


#: An oracle written with operators and torch.arange only, and a public test that uses it.
INLINE_ORACLE = """

def my_angles(positions, d_head):
    return positions[:, None] * 10000.0 ** (-torch.arange(0, d_head, 2) / d_head)


@pytest.mark.points(1)
@pytest.mark.public
def test_planted_angles(hw):
    positions = torch.arange(5)
    assert_close(hw.call("rope.rope_angles", positions, 8), my_angles(positions, 8), "angles")
"""


def copy_of_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    for name in ("solutions", "tests", "autograder", "data", "docs"):
        shutil.copytree(
            REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", repo)
    return repo


PUBLIC_USE_OF_TABLE = """@pytest.mark.points(1)
@pytest.mark.public
def test_planted_table(hw):
    assert TABLE is not None
"""


def test_a_planted_oracle_fails_the_release(tmp_path):
    """A function of the answer key, or a function that computes what a shipped test compares
    with, stops the release, which names it and where it lives."""
    repo = copy_of_repo(tmp_path)
    source = (REPO / ORACLES).read_text(encoding="utf-8")
    node = next(
        n for n in ast.parse(source).body if getattr(n, "name", "") == "rotate_pairs"
    )
    planted = ast.get_source_segment(source, node)
    target = repo / "tests" / "graded" / "test_part4_rope.py"
    original = (REPO / "tests" / "graded" / "test_part4_rope.py").read_text()
    line = len(original.splitlines()) + 3  # where my_angles lands
    leaks = (
        (
            planted + "\n\n\nTABLE = rotate_pairs\n\n\n" + PUBLIC_USE_OF_TABLE,
            "rotate_pairs is a function of the answer key",
        ),
        (
            INLINE_ORACLE,
            f"tests/graded/test_part4_rope.py:{line}: my_angles computes on tensors",
        ),
    )
    for code, leak in leaks:
        target.write_text(original + code, encoding="utf-8")
        with pytest.raises(ReleaseError, match=re.escape(leak)) as refused:
            build_handout(tmp_path / "out" / leak.split()[0], repo)
    assert "move my_angles into tests/graded/oracles.py" in str(refused.value)


def test_the_same_oracle_in_the_answer_key_ships(tmp_path):
    """Moved into oracles.py and reached through answers.py, the planted oracle is refused no
    more: the shipped test then holds its stored values."""
    repo = copy_of_repo(tmp_path)
    definition, test = INLINE_ORACLE.split("\n\n\n@pytest", 1)
    with (repo / ORACLES).open("a", encoding="utf-8") as oracles:
        oracles.write("\n" + definition + "\n")
    target = repo / "tests" / "graded" / "test_part4_rope.py"
    original = target.read_text(encoding="utf-8")
    target.write_text(
        "from tests.graded.answers import my_angles\n"
        + original
        + "\n\n@pytest"
        + test,
        encoding="utf-8",
    )
    assert refused_test_code(repo) == []


def test_a_helper_of_hidden_tests_only_does_not_ship():
    source = (
        "import pytest\n\n\ndef helper(x):\n    return x * 2\n\n\n"
        "@pytest.mark.hidden\ndef test_b(hw):\n    helper(1)\n"
    )
    assert "helper" not in strip_hidden_tests(source)


def test_handout_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("x")
    with pytest.raises(ReleaseError):
        build_handout(tmp_path)


def test_every_graded_test_fails_against_the_stubs():
    """The stubs earn nothing: the whole graded suite run against assignments/ (in this
    process: a collection error or no test at all raises)."""
    tests, _ = runner.run_suite(ASSIGNMENTS.parent, [], [])
    assert len(tests) > 50
    passed = [t.name for t in tests if t.passed]
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
        "autograder/commands/cli.py",
        "tests/conftest.py",
    } <= names
    assert not [n for n in names if n.startswith("solutions/") or "mutants" in n]
    # The grader carries the whole suite (hidden tests, the answer key); nothing else leaks.
    leaks = find_leaks(tmp_path / "unpacked")
    assert not [leak for leak in leaks if not leak.startswith("tests/graded/")], leaks


def test_leak_check_finds_a_copied_solution_block(tmp_path):
    reference = ASSIGNMENTS.parent.parent / "solutions" / "transformer_hw" / "masks.py"
    body = reference.read_text(encoding="utf-8").split("### BEGIN SOLUTION")[1]
    (tmp_path / "notes.py").write_text(
        body.split("### END SOLUTION")[0], encoding="utf-8"
    )
    assert find_leaks(tmp_path)


def test_answers_are_recorded_again_only_when_what_they_depend_on_changed(
    tmp_path, monkeypatch
):
    from autograder.sources import release

    repo = tmp_path / "repo"
    for name in ("tests/graded/test_a.py", "solutions/x.py", "autograder/y.py"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("A = 1\n")
    runs = []

    def record(path, _repo):
        runs.append(path)
        path.write_bytes(b"answers %d" % len(runs))

    monkeypatch.setattr(release.handout, "_record", record)
    first, second, third = (tmp_path / f"{n}.pt" for n in ("first", "second", "third"))
    release.record_answers(first, repo)
    release.record_answers(second, repo)
    assert len(runs) == 1 and second.read_bytes() == first.read_bytes()
    (repo / "solutions" / "x.py").write_text("A = 2\n")
    release.record_answers(third, repo)
    assert len(runs) == 2 and third.read_bytes() == b"answers 2"
