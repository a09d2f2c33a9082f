"""``forwards_during``: a call that records how it ran a module (tokens, caches, grad mode,
train mode), in-process and through the sandbox alike, and leaves the module unwatched after."""

from __future__ import annotations

import pytest
import torch

from autograder.facts.protocol import StudentError

from .conftest import probed_submission

PROBES = """

def run_twice(model, idx, caches=None):
    model(idx)
    with torch.no_grad():
        model.eval()
        model(idx[:, -1:], caches=caches)
    model.train()
    return "done"


def run_then_fail(model, idx):
    model(idx)
    raise ValueError("after one pass")


def run_forward_directly(model, idx):
    model.forward(idx)
    return "done"


def hooks_on(model):
    return len(model._forward_pre_hooks)
"""


@pytest.fixture(scope="module", params=["in-process", "isolated"])
def hw(request, tmp_path_factory):
    with probed_submission(request.param, tmp_path_factory, PROBES) as submission:
        yield submission


@pytest.fixture
def model(hw):
    return hw.new("charlm.CharLM", 5, d_model=8, n_heads=2, n_layers=1, d_ff=8)


def test_each_pass_is_recorded_as_it_ran(hw, model):
    caches = model.call("make_caches")
    idx = torch.tensor([[1, 2, 3]])
    result, passes = hw.forwards_during(model, "masks.run_twice", model, idx, caches)
    assert result == "done"
    assert passes == [
        {"tokens": 3, "cached": False, "grad": True, "training": True},
        {"tokens": 1, "cached": True, "grad": False, "training": False},
    ]


def test_the_module_is_unwatched_after_the_call_even_when_it_raises(hw, model):
    idx = torch.tensor([[1, 2]])
    with pytest.raises(StudentError, match="after one pass"):
        hw.forwards_during(model, "masks.run_then_fail", model, idx)
    _, passes = hw.forwards_during(model, "masks.run_twice", model, idx)
    assert len(passes) == 2  # no hook left behind from the failed call adds a record
    assert hw.call("masks.hooks_on", model) == 0


def test_a_direct_forward_goes_unrecorded(hw, model):
    _, passes = hw.forwards_during(
        model, "masks.run_forward_directly", model, torch.tensor([[1]])
    )
    assert passes == []
