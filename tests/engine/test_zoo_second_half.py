"""The second half of the bug zoo (``conftest.zoo_half``), each mutant caught in its own part
with its diagnosis, as ``test_zoo.py`` checks the first."""

from __future__ import annotations

import pytest

from .conftest import grade_zoo, zoo_half

HALF = zoo_half(1)


@pytest.fixture(scope="module")
def zoo_verdicts(tmp_path_factory):
    return grade_zoo(tmp_path_factory, HALF)


@pytest.mark.parametrize("mutant", HALF, ids=lambda m: m.name)
def test_mutant_is_caught_with_its_diagnosis(zoo_verdicts, mutant):
    verdict = zoo_verdicts[mutant.name]
    assert verdict.ok, f"{mutant.name}: " + "; ".join(verdict.problems)
