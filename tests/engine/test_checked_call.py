"""``checked_call``: student code gets non-contiguous tensors and the caller learns which
arguments it changed, in-process and through the sandbox alike."""

from __future__ import annotations

import pytest
import torch

from .conftest import probed_submission

PROBES = '''

def layout(x, y=None):
    """Whether each tensor argument arrived contiguous, and its values."""
    return x.is_contiguous(), None if y is None else y.is_contiguous(), x.clone()


def shift(x, by):
    """A mistake: the caller's tensor is changed."""
    x -= by
    return x.sum()


def nest(pair, scale):
    pair[1].mul_(scale)
    return pair[0] * scale


def turn(x):
    """A mistake: the caller's tensor is transposed in place (its values stay)."""
    x.transpose_(0, 1)
    return x.sum()
'''


@pytest.fixture(scope="module", params=["in-process", "isolated"])
def hw(request, tmp_path_factory):
    with probed_submission(request.param, tmp_path_factory, PROBES) as submission:
        yield submission


def test_tensors_arrive_non_contiguous_with_their_values(hw):
    x = torch.arange(12.0).reshape(3, 4)
    y = torch.arange(5)  # 1-D: every other element
    plain = hw.call("masks.layout", x, y=y)  # a plain call: contiguous copies
    assert plain[:2] == (True, True)
    (x_contiguous, y_contiguous, values), changed = hw.checked_call(
        "masks.layout", x, y=y
    )
    assert (x_contiguous, y_contiguous) == (False, False)
    assert torch.equal(values, x) and changed == []


def test_arguments_changed_in_place_are_named(hw):
    x = torch.ones(2, 3)
    total, changed = hw.checked_call("masks.shift", x, torch.tensor(0.5))
    assert float(total) == 3.0 and changed == ["args[0]"]
    _, changed = hw.checked_call(
        "masks.nest", [torch.ones(2, 2), torch.ones(2)], scale=torch.tensor(2.0)
    )
    assert changed == ["args[0][1]"]
    _, changed = hw.checked_call("masks.turn", torch.ones(2, 3))
    assert changed == ["args[0]"]


def test_untouched_nan_is_no_change(hw):
    x = torch.tensor([[1.0, float("nan")], [float("-inf"), 2.0]])
    _, changed = hw.checked_call("masks.layout", x)
    assert changed == []


def test_methods_of_handles_are_checked_too(hw):
    layer = hw.new("norm.LayerNorm", 4)
    out, changed = layer.checked_call("__call__", torch.randn(3, 5, 4))
    assert out.shape == (3, 5, 4) and changed == []


def test_the_verdict_is_the_graders_and_a_forged_answer_is_refused():
    """The worker only sends the inputs back; the grading process compares them (another
    shape is a change: a transpose made in place), and inputs of another number, or that are
    no tensors, cannot have come from the executor."""
    from autograder.facts.protocol import StudentError, changed_arguments

    x, mask = torch.ones(2, 3), torch.zeros(3, dtype=torch.bool)
    assert changed_arguments((x,), {"mask": mask}, [x.clone(), mask.clone()]) == []
    assert changed_arguments((x,), {"mask": mask}, [x - 1, mask.clone()]) == ["args[0]"]
    assert changed_arguments((x,), {"mask": mask}, [x.t(), mask.clone()]) == ["args[0]"]
    for forged in ([], [x.clone()], [x.clone(), "mask"], "nothing changed"):
        with pytest.raises(StudentError, match="not those of the call"):
            changed_arguments((x,), {"mask": mask}, forged)


def test_gradients_and_forward_passes_of_another_form_are_refused():
    """What the worker gathers next to the student code must have the form only the
    executor gives it."""
    from autograder.facts.protocol import StudentError, gradients_of

    x, ids = torch.ones(2, 3), torch.zeros(3, dtype=torch.long)
    good = {"inputs": {"args[0]": torch.zeros(2, 3)}, "parameters": {"w": None}}
    assert gradients_of(good, (x, ids), {}) is good
    forged = [
        {"inputs": {}, "parameters": {}},
        {"inputs": {"args[0]": torch.zeros(3)}, "parameters": {}},
        {"inputs": {"args[0]": None, "args[1]": None}, "parameters": {}},
        {"inputs": {"args[0]": None}, "parameters": {"w": "zero"}},
    ]
    for answer in forged:
        with pytest.raises(StudentError, match="gradients that were not"):
            gradients_of(answer, (x, ids), {})
