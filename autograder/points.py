"""The points table: the parts, their files and their weights. The one place they live.

Everything else derives from ``PARTS``: the modules a submission holds (``protocol.MODULES``),
the gradebook's columns, the total, the suite's marker check and the README's points table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    number: int
    title: str
    files: tuple[str, ...]  # the student's own files for this part
    uses: tuple[int, ...]  # earlier parts whose code this part builds on
    points: int


PARTS = {
    p.number: p
    for p in (
        Part(1, "Scaled dot-product attention", ("attention.py",), (), 18),
        Part(2, "Masks", ("masks.py",), (), 10),
        Part(3, "Heads and multi-head attention", ("heads.py",), (1, 6), 14),
        Part(4, "Rotary position embeddings", ("rope.py",), (), 10),
        Part(
            5,
            "Normalization and residual blocks",
            ("norm.py", "block.py"),
            (1, 3, 6),
            14,
        ),
        Part(
            6, "Grouped-query attention and the KV cache", ("gqa.py",), (1, 2, 3, 4), 14
        ),
        Part(7, "Character-level language model", ("charlm.py",), (1, 2, 3, 5, 6), 20),
    )
}

TOTAL_POINTS = sum(p.points for p in PARTS.values())


def part_of_file(filename: str) -> int:
    """The part whose points a file's forbidden calls cost."""
    for part in PARTS.values():
        if filename in part.files:
            return part.number
    raise KeyError(filename)


def builds_on(number: int) -> set[int]:
    """Every part whose code part ``number`` uses, directly or through another part."""
    found: set[int] = set()
    todo = list(PARTS[number].uses)
    while todo:
        part = todo.pop()
        if part not in found and part != number:
            found.add(part)
            todo += PARTS[part].uses
    return found
