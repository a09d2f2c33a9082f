"""The points table: the parts, their files and their weights. The one place they live.

Everything else derives from ``PARTS``: the modules a submission holds (``MODULES``),
the gradebook's columns, the total, the suite's marker check and the README's points table.

Dependencies are per test: every test of a part runs the code of the parts in its ``uses``
(earlier parts only, so the table has no cycle), and a test that needs more (part 3's tests of
the KV cache need part 6) says so with ``@pytest.mark.uses(6)``, which collection checks against
``tests_also_use``. Feedback's "fix part K first" follows these per-test dependencies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Part:
    number: int
    title: str
    files: tuple[str, ...]  # the student's own files for this part
    uses: tuple[int, ...]  # every earlier part whose code the tests of this part run
    points: int
    # Later parts that some of this part's tests also run, each marked with uses(...).
    tests_also_use: tuple[int, ...] = ()
    # Some of its tests train with torch.optim (both sides of the sandbox ready it beforehand).
    trains: bool = False


PARTS = {
    p.number: p
    for p in (
        Part(1, "Scaled dot-product attention", ("attention.py",), (), 18),
        Part(2, "Masks", ("masks.py",), (), 10),
        Part(3, "Heads and multi-head attention", ("heads.py",), (1,), 14, (6,)),
        Part(4, "Rotary position embeddings", ("rope.py",), (), 10),
        Part(
            5,
            "Normalization and residual blocks",
            ("norm.py", "block.py"),
            (1, 3),
            14,
            (6,),
        ),
        Part(
            6, "Grouped-query attention and the KV cache", ("gqa.py",), (1, 2, 3, 4), 14
        ),
        Part(
            7,
            "Character-level language model",
            ("charlm.py",),
            (1, 2, 3, 5, 6),
            20,
            trains=True,
        ),
    )
}

#: The student's package, and its modules (besides ``__init__``), part by part.
PACKAGE = "transformer_hw"
MODULES = tuple(Path(f).stem for part in PARTS.values() for f in part.files)

TOTAL_POINTS = sum(p.points for p in PARTS.values())


def part_of_file(filename: str) -> int:
    """The part whose points a file's forbidden calls cost."""
    for part in PARTS.values():
        if filename in part.files:
            return part.number
    raise KeyError(filename)


def builds_on(number: int) -> set[int]:
    """Every other part whose code some test of part ``number`` runs."""
    return set(PARTS[number].uses) | set(PARTS[number].tests_also_use)


def check_uses(part: int, uses: tuple) -> str | None:
    """What is wrong with a test's ``uses(...)`` marker (None when it is right)."""
    allowed = PARTS[part].tests_also_use
    if not uses or any(k not in allowed for k in uses):
        return (
            f"uses{uses!r} in part {part}: a test may add only {allowed or 'no part'} "
            "(autograder.facts.points.PARTS: tests_also_use)"
        )
    return None


#: How a test's message starts when its part is gated for a forbidden call (autograder/grading/plugin.py):
#: that is the part's own doing, whatever other parts the test runs.
GATED = "forbidden call: "


def fix_first(tests: Iterable) -> dict[int, list[int]]:
    """For each part that lost points, the other parts to fix first.

    ``tests`` have ``part``, ``passed``, ``message`` and ``uses`` (the marker's parts); a test
    gated for its part's forbidden call runs no other part's code. A part is a likely
    cause when its losses are not explained by another part's (``_explains``). A part is
    pointed to the causes among the dependencies of its own failing tests, never back over a
    cycle.
    """
    failing = _failing(tests)
    causes = {
        k
        for k in PARTS
        if failing[k] and not any(_explains(failing, i, k) for i in PARTS)
    }
    return {
        k: sorted((set().union(*failing[k]) & causes) - {k})
        for k in PARTS
        if failing[k]
    }


def from_other_parts(tests: Iterable) -> dict[str, set[int]]:
    """For each failing test whose failure may come from another part, by ``nodeid``, those
    parts: it runs their code, they have a failed test, and its own part does not explain
    their failures (``_explains``). Part 3's failing split_heads explains part 6's failures,
    so part 3's cache tests, which run part 6's cache, keep their own; a wrong cache,
    failing part 3's cache tests alone, does not, so they may come from there."""
    tests = [t for t in tests if not t.skipped]
    failing = _failing(tests)
    found = {}
    for t in tests:
        if t.passed:
            continue
        parts = {
            i
            for i in _reach(t) - {t.part}
            if failing[i] and not _explains(failing, t.part, i)
        }
        if parts:
            found[t.nodeid] = parts
    return found


def failed_reached(part: int, uses: Iterable[int], failed: set[int]) -> set[int]:
    """The parts with a failed test (``failed``) whose code a failing test of ``part`` runs:
    its part's ``uses`` and its marker's."""
    return (set(PARTS[part].uses) | set(uses)) & failed


def failed_earlier(part: int, uses: Iterable[int], failed: set[int]) -> set[int]:
    """The parts with a failed test (``failed``) a failing test of ``part`` (its marker's
    ``uses``) may fail because of, as far as known while the suite runs: those it runs that
    do not build on ``part`` (one that does may fail because of ``part``; the results
    decide, ``from_other_parts``)."""
    return {i for i in failed_reached(part, uses, failed) if part not in builds_on(i)}


def _reach(test) -> set[int]:
    """The parts whose code a test runs: its own, its part's ``uses`` and its marker's (a test
    gated for its part's forbidden call runs none but its own)."""
    if test.message.startswith(GATED):
        return {test.part}
    return {test.part, *PARTS[test.part].uses, *test.uses}


def _failing(tests: Iterable) -> dict[int, list[set[int]]]:
    """Per part, the parts each of its failing tests runs."""
    failing: dict[int, list[set[int]]] = {k: [] for k in PARTS}
    for t in tests:
        if not t.passed:
            failing[t.part].append(_reach(t) - {t.part})
    return failing


def _explains(failing: dict[int, list[set[int]]], i: int, j: int) -> bool:
    """Whether part ``i``'s failures explain part ``j``'s: every failing test of ``j`` runs
    ``i``'s code, and ``i`` has a failing test that does not run ``j``'s. When each only
    fails in tests that run the other's code (part 3's cache tests and part 6), the later
    part, which a test named explicitly, is the cause."""

    def runs(a: int, b: int) -> bool:  # every failing test of a runs part b's code
        return all(b in deps for deps in failing[a])

    return (
        i != j
        and bool(failing[i])
        and bool(failing[j])
        and runs(j, i)
        and (not runs(i, j) or i > j)
    )
