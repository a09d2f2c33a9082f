"""No import circles among the engine's modules, top-level and deferred imports alike: a
maintainer can read ``autograder/`` from the modules nothing else needs up to the commands."""

from __future__ import annotations

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "autograder"


def module_name(path: Path, engine: Path) -> str:
    parts = path.relative_to(engine.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def engine_imports(engine: Path = ENGINE) -> dict[str, set[str]]:
    """Each engine module -> the engine modules it imports anywhere in its source (a
    package's ``__init__``, which each of its modules imports, left out)."""
    modules = {module_name(p, engine): p for p in engine.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0]
                    base = f"{anchor}.{base}" if base else anchor
                found |= {base} | {f"{base}.{a.name}" for a in node.names}
        graph[name] = {
            m
            for m in found
            if m in modules and m != name and not name.startswith(f"{m}.")
        }
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """An import circle of ``graph``, or none."""
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        return exc.args[1]
    return []


def test_the_engine_has_no_import_circle():
    assert circle(engine_imports()) == []


def test_a_circle_is_found(tmp_path):
    """The check above can fail: two modules that import each other, one of them late."""
    engine = tmp_path / "autograder"
    engine.mkdir()
    (engine / "__init__.py").write_text("")
    (engine / "a.py").write_text("def f():\n    from autograder import b\n")
    (engine / "b.py").write_text("from . import a\n")
    graph = engine_imports(engine)
    assert graph == {
        "autograder": set(),
        "autograder.a": {"autograder.b"},
        "autograder.b": {"autograder.a"},
    }
    assert set(circle(graph)) == {"autograder.a", "autograder.b"}


#: The engine's rows from the bottom up, as docs/DESIGN.md draws them ("The engine's
#: modules"): one folder of ``autograder/`` each, and a module imports from its own row and
#: the rows above it.
ROWS = ("facts", "sources", "sandbox", "grading", "outputs", "batches", "commands")


def row_of(module: str) -> int:
    """The row of an engine module: its folder's (``autograder.__main__``: the commands')."""
    parts = module.split(".")[1:]
    if parts == ["__main__"]:
        return ROWS.index("commands")
    return ROWS.index(parts[0]) if parts and parts[0] in ROWS else -1


def test_each_module_imports_from_its_row_or_above():
    graph = engine_imports()
    assert [m for m in graph if m != "autograder" and row_of(m) < 0] == [], (
        "a module in no row"
    )
    below = sorted(
        f"{m} imports {d}"
        for m, deps in graph.items()
        for d in deps
        if row_of(d) > row_of(m)
    )
    assert below == []


def test_the_folders_are_the_rows_design_draws():
    """``autograder/`` holds one folder per row and nothing else but the package's face, and
    docs/DESIGN.md's table names each folder's modules as they are."""
    found = {
        p.name for p in ENGINE.iterdir() if not p.name.startswith((".", "__pycache__"))
    }
    assert found == {*ROWS, "__init__.py", "__main__.py"}
    design = (ENGINE.parent / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    for row in ROWS:
        line = next(x for x in design.splitlines() if x.startswith(f"| `{row}/` |"))
        named = set(re.findall(r"`([a-z_]+)/?`", line.split("|")[2]))
        on_disk = {
            p.stem
            for p in (ENGINE / row).iterdir()
            if p.name != "__init__.py"
            and (p.suffix == ".py" or (p / "__init__.py").is_file())
        }
        assert named == on_disk, f"DESIGN.md's row {row}/"
