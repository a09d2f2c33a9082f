"""``autograder examples`` writes the single-bug examples of the main job from the zoo.

What each one scores is the zoo's check (``tests/engine/test_zoo.py`` grades every mutant); here:
each example is the reference with exactly its mutant's file changed, and writing again replaces
what was there.
"""

from __future__ import annotations

import filecmp
from pathlib import Path

from autograder.batches.zoo.examples import SINGLE_BUG
from autograder.commands import cli
from autograder.facts.points import PACKAGE
from autograder.sources import intake
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE

REPO = Path(__file__).resolve().parents[2]


def test_each_example_is_the_reference_with_its_mutant(tmp_path):
    (tmp_path / "bob_mask_after_softmax" / PACKAGE).mkdir(parents=True)
    (tmp_path / "bob_mask_after_softmax" / PACKAGE / "stale.py").write_text("x = 1\n")
    assert cli.main(["examples", "--out", str(tmp_path)]) == 0
    mutants = {m.name: m for m in CATALOGUE}
    for name, mutant in SINGLE_BUG.items():
        package = tmp_path / name / PACKAGE
        names = sorted(p.name for p in SOLUTIONS.glob("*.py"))
        assert sorted(p.name for p in package.glob("*.py")) == names
        _, changed, _ = filecmp.cmpfiles(package, SOLUTIONS, names, shallow=False)
        assert changed == [mutants[mutant].file], name


def test_the_main_job_grades_the_kept_and_the_written_examples(tmp_path):
    cli.main(["examples", "--out", str(tmp_path)])
    found = intake.find([REPO / "examples" / "submissions", tmp_path])
    assert sorted(n for n, _ in found) == sorted(
        ["alice_alternative_style", "frank_broken", *SINGLE_BUG]
    )
