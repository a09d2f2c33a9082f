"""``call_with_default_dtype``: student code runs under another default float dtype, which is
put back afterwards even when the code raises, in-process and through the sandbox alike."""

from __future__ import annotations

import pytest
import torch

from autograder.facts.protocol import StudentError

from .conftest import probed_submission

PROBES = """

def default_dtype():
    return str(torch.get_default_dtype())


def fail_under_default(message):
    raise ValueError(message)
"""


@pytest.fixture(scope="module", params=["in-process", "isolated"])
def hw(request, tmp_path_factory):
    with probed_submission(request.param, tmp_path_factory, PROBES) as submission:
        yield submission


def test_the_call_sees_the_default_and_the_next_call_does_not(hw):
    assert hw.call_with_default_dtype(torch.float64, "masks.default_dtype") == (
        "torch.float64"
    )
    assert hw.call("masks.default_dtype") == "torch.float32"


def test_the_default_is_put_back_when_the_code_raises(hw):
    with pytest.raises(StudentError, match="refused"):
        hw.call_with_default_dtype(torch.float64, "masks.fail_under_default", "refused")
    assert hw.call("masks.default_dtype") == "torch.float32"
    assert torch.get_default_dtype() == torch.float32  # the grading side's own


def test_rope_angles_follows_the_default(hw):
    positions = torch.tensor([0, 3, 1])
    got = hw.call_with_default_dtype(torch.float64, "rope.rope_angles", positions, 4)
    assert got.dtype == torch.float64
