"""``autograder examples``: the single-bug example submissions of the main job, made from the zoo.

Each is the reference with one named mutant of the catalogue, so it never drifts from the
reference, and the zoo's own check (``autograder zoo``) already proves what it must score: points
lost only in the mutant's part and the parts built on it, with the mutant's diagnosis. The
examples that are not one bug, a correct solution in another style and a broken archive, are
files under ``examples/submissions/``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, apply

#: example submission -> the zoo mutant it is
SINGLE_BUG = {
    "bob_mask_after_softmax": "mask-after-softmax",
    "carol_split_heads_without_transpose": "split-heads-no-transpose",
    "dave_residual_of_normalized": "residual-adds-normalized",
    "erin_half_split_rope": "rope-half-split",
}


def write(out: Path) -> list[Path]:
    """Write (or rewrite) each single-bug example to ``out/<name>/``; their folders."""
    mutants = {m.name: m for m in CATALOGUE}
    written = []
    for name, mutant in SINGLE_BUG.items():
        shutil.rmtree(out / name, ignore_errors=True)
        written.append(apply(mutants[mutant], SOLUTIONS, out / name))
    return written
