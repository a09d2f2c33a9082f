"""The graded suite has teeth: every mutant of the bug zoo is caught in its own part, with its
diagnosis, costing nothing in the parts that do not use the broken code. This file grades the
first half of the zoo, ``test_zoo_second_half.py`` the second (``conftest.zoo_half``)."""

from __future__ import annotations

import pytest

from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, Mutant, MutantError, apply

from .conftest import SPREAD, grade_zoo, zoo_half

HALF = zoo_half(0)


@pytest.fixture(scope="module")
def zoo_verdicts(tmp_path_factory):
    return grade_zoo(tmp_path_factory, HALF)


def test_catalogue_is_large_and_names_are_unique():
    assert len(CATALOGUE) >= 30
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)


def test_an_edit_must_match_exactly_once(tmp_path):
    stale = Mutant("stale", "masks.py", (("text that is not there", ""),), 2, "x")
    with pytest.raises(MutantError):
        apply(stale, SOLUTIONS, tmp_path)


@pytest.mark.parametrize("mutant", HALF, ids=lambda m: m.name)
def test_mutant_is_caught_with_its_diagnosis(zoo_verdicts, mutant):
    verdict = zoo_verdicts[mutant.name]
    assert verdict.ok, f"{mutant.name}: " + "; ".join(verdict.problems)


def test_parts_that_build_on_a_broken_one_are_checked_for_their_pointer(zoo_verdicts):
    """Some mutant graded in every part it reaches (``conftest.SPREAD``) costs points in a
    part that builds on its own, so its verdict checks that part's pointer back to it."""
    spread = [zoo_verdicts[m.name] for m in SPREAD if m.name in zoo_verdicts]
    assert any(n and k != v.mutant.part for v in spread for k, n in v.lost.items())


def test_the_two_halves_grade_the_whole_zoo():
    halves = [m.name for m in zoo_half(0)] + [m.name for m in zoo_half(1)]
    assert sorted(halves) == sorted(m.name for m in CATALOGUE)
