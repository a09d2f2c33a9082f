"""Stubs from the reference: a solution block (the lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION``) becomes ``raise NotImplementedError("TODO: <function>")``. The ``# TODO:``
comment that every block must have just above its BEGIN marker stays, so the stub says what to
do; signatures, docstrings and imports stay as they are.
"""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.facts.points import PACKAGE

REPO = Path(__file__).resolve().parents[3]
SOLUTIONS = REPO / "solutions" / PACKAGE
ASSIGNMENTS = REPO / "assignments" / PACKAGE
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


class ReleaseError(ValueError):
    """The reference breaks the marker rules, so no stub can be made from it."""


def make_stub(source: str, filename: str = "<solution>") -> str:
    """The stub for one solution file."""
    lines = source.splitlines(keepends=True)
    owners = _enclosing_functions(source, filename)
    out: list[str] = []
    inside = False
    for number, line in enumerate(lines, start=1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ReleaseError(f"{filename}:{number}: nested {BEGIN}")
            if not out or not out[-1].lstrip().startswith("#"):
                raise ReleaseError(
                    f"{filename}:{number}: a solution block needs a # TODO above"
                )
            indent = line[: len(line) - len(line.lstrip())]
            owner = owners.get(number, "this block")
            out.append(f'{indent}raise NotImplementedError("TODO: {owner}")\n')
            inside = True
        elif marker == END:
            if not inside:
                raise ReleaseError(f"{filename}:{number}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ReleaseError(f"{filename}: {BEGIN} without {END}")
    stub = "".join(out)
    ast.parse(stub, filename)  # a stub must at least import
    return stub


def _enclosing_functions(source: str, filename: str) -> dict[int, str]:
    """Line number of each BEGIN marker -> qualified name of the function around it."""
    tree = ast.parse(source, filename)
    owners: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if isinstance(child, ast.FunctionDef):
                    for number in range(child.lineno, child.end_lineno + 1):
                        owners[number] = name
                visit(child, name + ".")

    visit(tree, "")
    lines = source.splitlines()
    return {n: owners[n] for n in owners if lines[n - 1].strip() == BEGIN}


def stub_files(solutions: Path = SOLUTIONS) -> dict[str, str]:
    """File name -> stub text for every module of the reference."""
    return {
        path.name: make_stub(path.read_text(encoding="utf-8"), path.name)
        for path in sorted(solutions.glob("*.py"))
    }


def write_assignments(
    out: Path = ASSIGNMENTS, solutions: Path = SOLUTIONS
) -> list[Path]:
    """(Re)write the stubs that changed; return the files written. A stub that is current is
    left alone, so a release of an unchanged reference changes nothing in the repository."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in stub_files(solutions).items():
        path = out / name
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
