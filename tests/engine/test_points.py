"""``autograder.points.PARTS`` is the one list of parts: the reference's modules and the README's
points table agree with it, and the total is whatever the parts add up to."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from autograder.points import MODULES, PACKAGE, PARTS, TOTAL_POINTS

REPO = Path(__file__).resolve().parents[2]


def test_every_module_of_the_reference_belongs_to_exactly_one_part():
    owned = Counter(f for part in PARTS.values() for f in part.files)
    modules = {p.name for p in (REPO / "solutions" / PACKAGE).glob("*.py")}
    assert not (modules - {"__init__.py"}) - set(owned), "modules that no part owns"
    assert set(owned) <= modules, "files of a part that the reference lacks"
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
    assert readme_points_table() == rows
