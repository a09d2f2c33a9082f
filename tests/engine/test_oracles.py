"""One answer key: every oracle lives in tests/graded/oracles.py, and only there."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from tests.graded import answers
from tests.graded.compare import assert_close

GRADED = Path(__file__).resolve().parents[1] / "graded"
ORACLES = GRADED / "oracles.py"


def functions(path: Path) -> dict[str, str]:
    """Top-level function name -> its body without the docstring, as a canonical dump."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
            ):
                body = body[1:]
            found[node.name] = ast.dump(ast.Module(body=body, type_ignores=[]))
    return found


def duplicated_oracles(graded: Path = GRADED) -> list[str]:
    """Functions of oracles.py defined again elsewhere, by name or by the same body."""
    oracles = functions(graded / "oracles.py")
    bodies = {body: name for name, body in oracles.items()}
    found = []
    for path in sorted(graded.glob("*.py")):
        if path.name == "oracles.py":
            continue
        for name, body in functions(path).items():
            if name in oracles or body in bodies:
                found.append(f"{path.name}: {name} (oracles.{bodies.get(body, name)})")
    return found


def test_no_oracle_is_defined_in_two_modules():
    assert duplicated_oracles() == []


def test_a_second_copy_of_an_oracle_is_found(tmp_path):
    for path in GRADED.glob("*.py"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"))
    source = ORACLES.read_text(encoding="utf-8")
    tree = ast.parse(source)
    future = next(n for n in tree.body if getattr(n, "name", "") == "future")
    copy = ast.get_source_segment(source, future).replace("def future", "def later")
    with (tmp_path / "test_part2_masks.py").open("a", encoding="utf-8") as f:
        f.write("\n\n" + copy + "\n")
    assert duplicated_oracles(tmp_path) == [
        "test_part2_masks.py: later (oracles.future)"
    ]


def test_tests_reach_the_oracles_only_through_the_answers():
    """In the handout the answer key is absent and ``tests.graded.answers`` serves its values:
    a test module that imported ``tests.graded.oracles`` itself would not even import there."""
    direct = []
    for path in sorted(GRADED.glob("*.py")):
        if path.name in ("oracles.py", "answers.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if isinstance(node, ast.ImportFrom) and node.module == "tests.graded":
                names = [f"tests.graded.{a.name}" for a in node.names]
            if "tests.graded.oracles" in names:
                direct.append(path.name)
    assert direct == [], "import the oracles from tests.graded.answers"


def released(run, tmp_path, monkeypatch):
    """What ``run`` returns, with the oracle values it used recorded as a release does and
    stored where ``answers`` looks them up."""
    recorded: dict = {}
    answers.record(recorded)
    try:
        value = run()
    finally:
        answers.record(None)
    store = tmp_path / "answers.pt"
    answers.save(recorded, store)
    monkeypatch.setattr(answers, "STORE", store)
    monkeypatch.setattr(answers, "_stored", None)
    return value


def test_the_handout_reads_what_the_oracles_gave(tmp_path, monkeypatch):
    """Recorded at release, looked up by the arguments in the handout; a value that depends on
    the student's own outputs is left to the grader; any other miss is the suite's problem."""
    x = torch.linspace(-2, 2, 6, dtype=torch.float64).reshape(2, 3)
    want = released(lambda: answers.softmax(x, -1), tmp_path, monkeypatch)
    assert torch.equal(answers._looked_up("softmax")(x.clone(), -1), want)
    with pytest.raises(answers.AnswerMissing, match="no stored expected value"):
        answers._looked_up("softmax")(x + 1, -1)
    with pytest.raises(pytest.skip.Exception, match="only the grader"):
        answers._looked_up("losses_of")([(x, x.long())])


def test_a_handout_failure_names_the_mistake_its_suspect_gave_at_release(
    tmp_path, monkeypatch
):
    """A comparison's lazy suspects are recorded at release although the reference passes, so
    a failing public test in the handout still names its likely mistake; a suspect with no
    stored value names nothing, and the failure stands on its own."""
    x = torch.linspace(-2, 2, 6, dtype=torch.float64).reshape(2, 3)
    wrong_axis = {"softmax over dim 0": lambda: answers.softmax(x, 0)}

    def reference_passes():
        right = answers.softmax(x, -1)
        assert_close(right.clone(), right, "softmax", likely=wrong_axis)

    released(reference_passes, tmp_path, monkeypatch)
    monkeypatch.setattr(answers, "_oracles", None)  # the handout: values looked up
    student = torch.softmax(x, 0)
    with pytest.raises(AssertionError, match="Likely mistake: softmax over dim 0"):
        assert_close(student, answers.softmax(x, -1), "softmax", likely=wrong_axis)
    unstored = {"softmax of x + 1": lambda: answers.softmax(x + 1, -1)}
    with pytest.raises(AssertionError, match=": wrong, largest error") as failed:
        assert_close(student, answers.softmax(x, -1), "softmax", likely=unstored)
    assert "Likely" not in str(failed.value)
