"""The assignment's notebook: one source, ``notebooks/transformer_hw.ipynb``, for two audiences.

The student handout gets it as a plain notebook; the nbgrader course gets it with nbgrader's cell
metadata: the instructions and the setup cell locked, and one autograded cell per part, worth
that part's points from ``points.PARTS``. The source marks those cells by their ids alone
(``check-part1`` ... ``check-part7``), so course staff edit it as any notebook, and the points
live in one place. Standard library only: the handout builder runs without nbgrader installed.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from autograder.facts.points import PARTS

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "notebooks" / "transformer_hw.ipynb"
NAME = SOURCE.name
KINDS = ("handout", "nbgrader")
LOCKED_CODE = (
    "setup",
)  # code cells a student must not change: the checks rely on them
CHECK_ID = re.compile(r"check-part(\d+)")


class NotebookError(ValueError):
    """The source notebook breaks the rules the course and the handout rely on."""


def check_cell_part(cell_id: str) -> int | None:
    """The part an autograded cell grades, from its id (``check-part3`` -> 3); else ``None``."""
    match = CHECK_ID.fullmatch(cell_id)
    return int(match.group(1)) if match else None


def load_source(path: Path = SOURCE) -> dict:
    """The source notebook, checked: one check cell per part, cell ids present and unique."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    ids = [cell.get("id") for cell in notebook["cells"]]
    if None in ids or len(set(ids)) != len(ids):
        raise NotebookError(f"{path.name}: every cell needs an id of its own")
    checks = sorted(p for i in ids if (p := check_cell_part(i)) is not None)
    if checks != sorted(PARTS):
        missing = [
            f"a code cell with the id `check-part{n}` whose source is `check_part({n})`"
            for n in sorted(set(PARTS) - set(checks))
        ]
        raise NotebookError(
            f"{path.name}: check cells for parts {checks}, expected one for each of "
            f"{sorted(PARTS)}" + (f"; add {', '.join(missing)}" if missing else "")
        )
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and cell.get("outputs"):
            raise NotebookError(f"{path.name}: cell {cell['id']} keeps outputs")
    return notebook


def build_notebook(kind: str, path: Path = SOURCE) -> dict:
    """The notebook for ``kind`` ("handout" or "nbgrader") as JSON-ready data."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    notebook = copy.deepcopy(load_source(path))
    if kind == "nbgrader":
        for cell in notebook["cells"]:
            metadata = _nbgrader_metadata(cell)
            if metadata:
                cell["metadata"]["nbgrader"] = metadata
    return notebook


def _nbgrader_metadata(cell: dict) -> dict | None:
    """Locked instructions and setup; each check cell an autograded test worth its part."""
    part = check_cell_part(cell["id"])
    base = {"grade_id": cell["id"], "schema_version": 3, "solution": False}
    if part is not None:
        return base | {"grade": True, "locked": True, "points": PARTS[part].points}
    if cell["cell_type"] == "markdown" or cell["id"] in LOCKED_CODE:
        return base | {"grade": False, "locked": True}
    return None


def write_notebook(out: Path, kind: str) -> Path:
    """Write the notebook for ``kind`` to ``out`` (a file path); return it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(build_notebook(kind), indent=1, ensure_ascii=False) + "\n"
    out.write_text(text, encoding="utf-8")
    return out
