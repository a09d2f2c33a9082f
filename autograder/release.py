"""Build what students get from the reference: stubs, and the handout that carries them.

A solution block (the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION``) becomes
``raise NotImplementedError("TODO: <function>")``. The ``# TODO:`` comment that every block must
have just above its BEGIN marker stays, so the stub says what to do; signatures, docstrings and
imports stay as they are.
"""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

from autograder.protocol import PACKAGE

REPO = Path(__file__).resolve().parent.parent
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
    """(Re)write the stubs; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in stub_files(solutions).items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


# The student handout ---------------------------------------------------------------------------

#: What the handout carries besides the stubs and ``tests/graded`` (its test files stripped of
#: hidden tests): the machinery the public tests need to run in-process (``autograder check``).
#: The sandbox, the reports and the bug zoo stay home.
HANDOUT_FILES = (
    "pyproject.toml",
    "autograder/__init__.py",
    "autograder/__main__.py",
    "autograder/cli.py",
    "autograder/check.py",
    "autograder/executor.py",
    "autograder/forbidden.py",
    "autograder/points.py",
    "autograder/protocol.py",
    "tests/__init__.py",
    "tests/conftest.py",
)
HANDOUT_DIRS = ("data",)


def strip_hidden_tests(source: str, filename: str = "<tests>") -> str:
    """A test module without its ``@pytest.mark.hidden`` tests (decorators included)."""
    tree = ast.parse(source, filename)
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and any(
            ast.unparse(d).startswith("pytest.mark.hidden") for d in node.decorator_list
        ):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            drop.update(range(first, node.end_lineno + 1))
    lines = source.splitlines(keepends=True)
    kept = "".join(line for n, line in enumerate(lines, start=1) if n not in drop)
    return kept


# Consecutive code lines that make a leak: single lines recur in honest oracles.
WINDOW = 3


def _code_lines(text: str) -> list[str]:
    stripped = (line.strip() for line in text.splitlines())
    return [
        line
        for line in stripped
        if line and (not line.startswith("#") or line in (BEGIN, END))
    ]


def _windows(lines: list[str]) -> set[tuple[str, ...]]:
    return {tuple(lines[i : i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}


def solution_windows(solutions: Path = SOLUTIONS) -> set[tuple[str, ...]]:
    """Every run of consecutive code lines inside a solution block."""
    found: set[tuple[str, ...]] = set()
    for path in solutions.glob("*.py"):
        block: list[str] | None = None
        for line in _code_lines(path.read_text(encoding="utf-8")) + [BEGIN]:
            if line in (BEGIN, END):
                if block:
                    found |= _windows(block)
                block = [] if line == BEGIN else None
            elif block is not None:
                block.append(line)
    return found


def find_leaks(root: Path, solutions: Path = SOLUTIONS) -> list[str]:
    """What under ``root`` gives a solution away: runs of solution code, hidden tests."""
    secret = solution_windows(solutions)
    leaks = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(root)
        leaks += [
            f"{name}: {' / '.join(w)}"
            for w in sorted(_windows(_code_lines(text)) & secret)
        ]
        if path.suffix == ".py" and _has_hidden_tests(text):
            leaks.append(f"{name}: hidden tests")
    return leaks


def _has_hidden_tests(source: str) -> bool:
    try:
        return strip_hidden_tests(source) != source
    except SyntaxError:
        return False


def build_handout(out: Path, repo: Path = REPO) -> Path:
    """Write the student handout to ``out`` and ``out.zip``; refuse if anything leaks."""
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"{out} exists and is not empty")
    write_assignments(out / "assignments" / PACKAGE, repo / "solutions" / PACKAGE)
    for name in HANDOUT_FILES:
        _copy(repo / name, out / name)
    for folder in HANDOUT_DIRS:
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file():
                _copy(path, out / path.relative_to(repo))
    for path in sorted((repo / "tests" / "graded").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name.startswith("test_"):
            text = strip_hidden_tests(text, path.name)
        _write(out / "tests" / "graded" / path.name, text)
    leaks = find_leaks(out, repo / "solutions" / PACKAGE)
    if leaks:
        raise ReleaseError("the handout would leak: " + "; ".join(leaks))
    return _zip_folder(out, out.with_suffix(".zip"))


def _copy(src: Path, dst: Path) -> None:
    _write(dst, src.read_text(encoding="utf-8"))


def _write(dst: Path, text: str) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, encoding="utf-8")


def _zip_folder(folder: Path, zip_path: Path) -> Path:
    """A reproducible zip (sorted names, fixed timestamps) of ``folder``."""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(
                str(path.relative_to(folder.parent)), (2020, 1, 1, 0, 0, 0)
            )
            info.external_attr = (path.stat().st_mode & 0o777) << 16
            archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return zip_path
