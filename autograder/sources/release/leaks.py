"""What must not reach students: the hidden tests, taken out of the test files they ship in,
and the check that a folder holds no answer (runs of solution or answer-key code, a function of
the answer key, test code that computes what the stored answers give, hidden tests)."""

from __future__ import annotations

import ast
from pathlib import Path

from autograder.facts import shipped_shapes, shipped_tests
from autograder.facts.points import PACKAGE
from autograder.sources.release.stubs import BEGIN, END, REPO, SOLUTIONS

#: The answer key: in the handout its values, never its code (``tests.graded.answers``).
ORACLES = "tests/graded/oracles.py"
#: The suite's conftest, which ships to load the engine's plugin.
CONFTEST = "tests/conftest.py"


def strip_hidden_tests(
    source: str, filename: str = "<tests>", keep_lines: bool = False
) -> str:
    """A test module without its ``@pytest.mark.hidden`` tests (decorators included);
    ``keep_lines`` leaves their lines empty, so what remains keeps its line numbers."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and any(
            ast.unparse(d).startswith("pytest.mark.hidden") for d in node.decorator_list
        ):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            drop.update(range(first, node.end_lineno + 1))
    if drop:
        drop |= _helpers_of_hidden_tests(tree, drop, lines)
    blank = "\n" if keep_lines else ""
    return "".join(
        blank if n in drop else line for n, line in enumerate(lines, start=1)
    )


def _helpers_of_hidden_tests(
    tree: ast.Module, dropped: set[int], lines: list[str]
) -> set[int]:
    """The lines of what only the hidden tests use (helpers, classes, module constants, with
    the comment just above each): in the handout they would serve no test, and could compute
    or hold what the hidden tests expect."""
    definitions = [
        (node, names)
        for node in tree.body
        if (names := _defined_names(node)) and "pytestmark" not in names
    ]
    drop = set(dropped)
    while True:
        used = {
            node.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.lineno not in drop
        }
        found = {
            line
            for node, names in definitions
            if not names & used
            for line in _lines_of(node, lines)
        }
        if found <= drop:
            return drop - dropped
        drop |= found


def _defined_names(node: ast.stmt) -> set[str]:
    """The names a module-level statement defines (a test defines none: pytest runs it)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return set() if node.name.startswith(("test_", "Test")) else {node.name}
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _lines_of(node: ast.stmt, lines: list[str]) -> range:
    """A statement's lines, its decorators and the comment lines just above it included."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return range(first, node.end_lineno + 1)


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


def oracle_functions(oracles: Path = REPO / ORACLES) -> dict[str, set[tuple[str, ...]]]:
    """Each function of the answer key -> the runs of consecutive code lines of its body."""
    source = oracles.read_text(encoding="utf-8")
    # What ast.get_source_segment gives, without splitting the whole source for each function.
    lines = source.encode().splitlines()
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            body = lines[node.lineno - 1 : node.end_lineno]
            body[-1] = body[-1][: node.end_col_offset]  # offsets count UTF-8 bytes
            text = b"\n".join(body).decode()
            found[node.name] = _windows(_code_lines(text)[1:])  # without the def line
    return found


def find_leaks(
    root: Path, solutions: Path = SOLUTIONS, oracles: Path = REPO / ORACLES
) -> list[str]:
    """What under ``root`` gives an answer away: runs of solution or answer-key code, a
    function of the answer key, test code that computes what it should take from the stored
    answers (``autograder.facts.shipped_tests``), hidden tests."""
    key = oracle_functions(oracles)
    secret = solution_windows(solutions).union(*key.values())
    leaks = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix not in (".py", ".md", ".txt", ".toml", ".ipynb", ""):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(root)
        leaks += [
            f"{name}: {' / '.join(w)}"
            for w in sorted(_windows(_code_lines(text)) & secret)
        ]
        if path.suffix == ".py" and _has_hidden_tests(text):
            leaks.append(f"{name}: hidden tests")
        elif path.suffix == ".py" and path.name.startswith("test_"):
            leaks += [f"{name}:{leak}" for leak in _values_no_test_uses(text)]
        if path.suffix == ".py" and name.parts[0] == "tests":
            leaks += [f"{name}: {leak}" for leak in _answer_key_functions(text, key)]
    shipped = {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted((root / "tests" / "graded").glob("*.py"))
        if path.relative_to(root).as_posix() != ORACLES
    }
    if (root / CONFTEST).is_file():
        text = (root / CONFTEST).read_text(encoding="utf-8")
        leaks += shipped_shapes.conftest_refusals(CONFTEST, text)
    return leaks + shipped_tests.refusals(shipped)


def refused_test_code(repo: Path = REPO) -> list[str]:
    """The shipped test code's refusals, with the repository's own line numbers: what the
    release checks before it writes anything (shapes the check cannot follow, computed expected
    values, functions of the answer key, runs of solution or answer-key code)."""
    key = oracle_functions(repo / ORACLES)
    secret = solution_windows(repo / "solutions" / PACKAGE).union(*key.values())
    shipped = {}
    for path in sorted((repo / "tests" / "graded").glob("*.py")):
        name = path.relative_to(repo).as_posix()
        if name == ORACLES:
            continue
        text = path.read_text(encoding="utf-8")
        if path.name.startswith("test_"):
            text = strip_hidden_tests(text, path.name, keep_lines=True)
        shipped[name] = text
    leaks = []
    for name, text in shipped.items():
        leaks += [
            f"{name}: {' / '.join(w)}"
            for w in sorted(_windows(_code_lines(text)) & secret)
        ]
        leaks += [f"{name}: {leak}" for leak in _answer_key_functions(text, key)]
    conftest = repo / CONFTEST
    if conftest.is_file():
        leaks += shipped_shapes.conftest_refusals(CONFTEST, conftest.read_text())
    return leaks + shipped_tests.refusals(shipped)


def _answer_key_functions(source: str, key: dict) -> list[str]:
    """Functions named as the answer key's."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [
        f"{node.name} is a function of the answer key ({ORACLES})"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name in key
    ]


def _values_no_test_uses(source: str) -> list[str]:
    """A test file's module-level values and helpers that none of its tests uses: in a
    handout, what only the hidden tests needed (which ``strip_hidden_tests`` leaves out)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    used = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    return [
        f"{node.lineno}: {', '.join(sorted(names))} is used by no test of the handout, "
        "only by hidden ones: leave it out (strip_hidden_tests) or use it in a public test"
        for node in tree.body
        if (names := _defined_names(node)) - {"pytestmark"} and not names & used
    ]


def _has_hidden_tests(source: str) -> bool:
    try:
        return strip_hidden_tests(source) != source
    except SyntaxError:
        return False
