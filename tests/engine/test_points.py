"""``autograder.facts.points.PARTS`` is the one list of parts: the reference's modules, the README's
points table, the graded tests, the forbidden-call rules, the contract, alice's example, the bug
zoo and the notebook agree with it, and the total is whatever the parts add up to. Each check
names the file that a new part left out (README.md, "Adding a part")."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from autograder.facts.points import MODULES, PACKAGE, PARTS, TOTAL_POINTS
from autograder.facts.rules import RULES, WITHOUT_RULES
from autograder.sources import notebook
from autograder.sources.zoo.mutants import CATALOGUE

REPO = Path(__file__).resolve().parents[2]
ALICE = REPO / "examples" / "submissions" / "alice_alternative_style" / PACKAGE
PART_FILES = [f for part in PARTS.values() for f in part.files]


def test_every_module_of_the_reference_belongs_to_exactly_one_part():
    owned = Counter(PART_FILES)
    modules = {p.name for p in (REPO / "solutions" / PACKAGE).glob("*.py")}
    unowned = (modules - {"__init__.py"}) - set(owned)
    assert not unowned, (
        f"modules that no part owns: {unowned} (autograder/facts/points.py)"
    )
    lacking = sorted(f"solutions/{PACKAGE}/{f}" for f in set(owned) - modules)
    assert not lacking, f"files of a part that the reference lacks: {lacking}"
    assert [f for f, n in owned.items() if n > 1] == [], "files in two parts"
    assert sorted(f"{m}.py" for m in MODULES) == sorted(owned)


def readme_points_table() -> list[str]:
    """The rows of the table under ``## Points`` in the README."""
    section = (REPO / "README.md").read_text().split("\n## Points\n", 1)[1]
    return [
        line for line in section.split("\n## ")[0].splitlines() if line.startswith("|")
    ]


def test_readme_points_table_is_the_parts_table():
    rows = ["| part | files | title | points |", "| --- | --- | --- | --- |"]
    for k, part in PARTS.items():
        files = ", ".join(f"`{f}`" for f in part.files)
        rows.append(f"| {k} | {files} | {part.title} | {part.points} |")
    rows.append(f"| | | **total** | **{TOTAL_POINTS}** |")
    assert readme_points_table() == rows, (
        "README.md: the points table differs from PARTS"
    )


def test_every_part_has_graded_tests():
    """A test file per part at least (the suite's points per part are checked as it is
    collected)."""
    marked = {
        int(n)
        for path in (REPO / "tests" / "graded").glob("test_*.py")
        for n in re.findall(r"pytest\.mark\.part\((\d+)\)", path.read_text())
    }
    missing = [
        f"tests/graded/test_part{k}_<topic>.py" for k in PARTS if k not in marked
    ]
    assert not missing, f"parts without graded tests: add {missing}"


def graded_points() -> Counter:
    """Part -> the points of its graded tests, read from their markers (a parametrized test
    once per case), whatever a run selects."""
    points: Counter = Counter()
    for path in (REPO / "tests" / "graded").glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_part = marker_args(tree.body, "part")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                part = marker_args([node], "part") or module_part
                cases = 1
                for call in node.decorator_list:
                    if ast.unparse(getattr(call, "func", call)).endswith(
                        ".parametrize"
                    ):
                        cases *= len(ast.literal_eval(call.args[1]))
                points[part[0]] += cases * marker_args([node], "points")[0]
    return points


def marker_args(nodes, marker: str) -> list:
    """The arguments of ``pytest.mark.<marker>(...)`` on these nodes, decorators or
    ``pytestmark``."""
    for node in nodes:
        for call in getattr(node, "decorator_list", None) or [
            getattr(node, "value", None)
        ]:
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) == f"pytest.mark.{marker}"
            ):
                return [ast.literal_eval(a) for a in call.args]
    return []


def test_the_graded_points_add_up_to_each_part():
    """Checked here as well as at collection, which checks an unfiltered run only."""
    wanted = {k: part.points for k, part in PARTS.items()}
    assert dict(graded_points()) == wanted, (
        "test points per part differ from PARTS (autograder/facts/points.py, "
        "tests/graded/test_part<N>_<topic>.py)"
    )


def test_every_answer_a_test_imports_is_an_oracle():
    """Tests take expected values from ``tests.graded.answers``, which serves the functions of
    the answer key: a name it lacks is an oracle not written yet."""
    oracles = {
        node.name
        for node in ast.parse((REPO / "tests/graded/oracles.py").read_text()).body
        if isinstance(node, ast.FunctionDef)
    }
    imported = {
        alias.name
        for path in (REPO / "tests" / "graded").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module == "tests.graded.answers"
        for alias in node.names
    }
    own = {  # what answers.py defines itself
        node.name
        for node in ast.parse((REPO / "tests/graded/answers.py").read_text()).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    missing = sorted(imported - oracles - own)
    assert not missing, f"tests/graded/oracles.py lacks the oracles {missing}"


def test_every_part_file_says_what_it_may_not_call():
    """In RULES (its forbidden library calls, watched as it runs) or in WITHOUT_RULES: left
    out of both, a file's library attention would go unwatched and earn full marks."""
    undecided = sorted(set(PART_FILES) - set(RULES) - WITHOUT_RULES)
    assert not undecided, (
        f"{undecided}: name the file in RULES or WITHOUT_RULES (autograder/facts/rules.py)"
    )
    assert not (set(RULES) | WITHOUT_RULES) - set(PART_FILES), (
        "rules for no part's file"
    )


def test_the_contract_describes_every_part():
    spec = (REPO / "docs" / "SPEC.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\d+)\. `transformer_hw/(\w+\.py)`", spec, re.MULTILINE)
    missing = [
        f"## {k}. `{PACKAGE}/{part.files[0]}`"
        for k, part in PARTS.items()
        if (str(k), part.files[0]) not in headings
    ]
    assert not missing, f"docs/SPEC.md lacks the sections {missing}"


def test_alice_writes_every_part_in_her_own_style():
    missing = [
        (ALICE / f).relative_to(REPO).as_posix()
        for f in PART_FILES
        if not (ALICE / f).is_file()
    ]
    assert not missing, f"alice's submission lacks {missing}"


def test_the_bug_zoo_has_mistakes_of_every_part():
    """The zoo measures every part (each mutant's wording: tests/engine/test_diagnosis.py)."""
    missing = sorted(set(PARTS) - {m.part for m in CATALOGUE})
    assert not missing, (
        f"parts {missing} have no mutant in CATALOGUE (autograder/sources/zoo/mutants.py): add "
        "their typical mistakes, each with its WORDING"
    )


def test_the_notebook_checks_every_part():
    try:
        notebook.load_source()
    except notebook.NotebookError as error:
        pytest.fail(f"notebooks/transformer_hw.ipynb: {error}")
