"""The second device (``autograder.sandbox.second_device``) is a real one for correct code: whatever
works on a CPU and on a CUDA GPU works there (any grad mode, devices by index, moves in every
spelling), and what mixes devices is refused there as a GPU refuses it. The zoo's device
mutants (``autograder/sources/zoo/mutants.py``) are its tests of each mistake class."""

from __future__ import annotations

import re

import pytest
import torch

from autograder.batches.zoo.restyled import DEVICE_STYLES, write_correct
from autograder.commands import cli
from autograder.facts.protocol import SECOND_DEVICE, ErrorInfo, StudentError
from autograder.sandbox import second_device
from autograder.sources.runner import run_suite
from tests.graded.compare import LIKELY
from tests.graded.inputs import SECOND, data_left_on_the_cpu

MODES = {
    "grad": torch.enable_grad,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}

#: Ways correct code makes a tensor on the input's device (``x`` is on the second device).
MAKERS = {
    "zeros(device=x.device)": lambda x: torch.zeros(3, device=x.device),
    "arange(device=x.device)": lambda x: torch.arange(3, device=x.device),
    "tensor(device=x.device)": lambda x: torch.tensor([1.0, 2.0], device=x.device),
    "x.new_zeros": lambda x: x.new_zeros(2),
    "x.new_tensor": lambda x: x.new_tensor([1.0]),
    "zeros_like": lambda x: torch.zeros_like(x),
    ".to(x)": lambda x: torch.ones(3).to(x),
    ".to(x.device)": lambda x: torch.ones(3).to(x.device),
    ".to(device=, dtype=)": lambda x: torch.ones(3).to(
        device=x.device, dtype=torch.float64
    ),
    "type_as": lambda x: torch.ones(3).type_as(x),
    "a device with an index": lambda x: torch.ones(
        3, device=torch.device(x.device.type, 0)
    ),
    "a device string": lambda x: torch.ones(3, device=f"{x.device.type}:0"),
}


ON_CPU = torch.arange(6.0).reshape(2, 3)


@pytest.fixture
def x():
    with second_device.active():
        yield second_device.moved(ON_CPU)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("maker", MAKERS)
def test_a_tensor_made_for_the_inputs_device_is_there(x, mode, maker):
    """There, with the values it has when made for a tensor on the CPU."""
    with MODES[mode]():
        made = MAKERS[maker](x)
    assert isinstance(made, second_device.Elsewhere)
    values, devices = second_device.brought_back(made)
    assert devices == [("result", SECOND_DEVICE.type)]
    expected = MAKERS[maker](ON_CPU)
    assert values.dtype == expected.dtype and torch.equal(values, expected)


@pytest.mark.parametrize("mode", MODES)
def test_moves_back_to_the_cpu_leave_the_second_device(x, mode):
    cpu = torch.ones(2, 3)
    with MODES[mode]():
        for moved in (x.cpu(), x.to("cpu"), x.to(cpu), x.type_as(cpu)):
            assert type(moved) is torch.Tensor and moved.device.type == "cpu"
            assert torch.equal(moved, ON_CPU)


@pytest.mark.parametrize("mode", MODES)
def test_mixing_devices_is_refused_in_every_mode(x, mode):
    with MODES[mode](), pytest.raises(RuntimeError, match="same device"):
        x + torch.ones(2, 3)  # made on the CPU
    with MODES[mode](), pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, 3) @ x.T


#: Operations in place that change a tensor's shape, strides or size, not its values' kind.
RESHAPED_IN_PLACE = {
    "transpose_": lambda t: t.transpose_(0, 1),
    "t_": lambda t: t.t_(),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "squeeze_": lambda t: t.unsqueeze_(0).squeeze_(0),
    "swapdims_": lambda t: t.swapdims_(0, 1),
    "as_strided_": lambda t: t.as_strided_((3, 2), (1, 3)),
    "resize_": lambda t: t.resize_(2, 2),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", RESHAPED_IN_PLACE)
def test_a_shape_changed_in_place_is_the_tensors_shape_there(x, mode, change):
    """As on a GPU: every later operation reads the new shape (a transpose made in place of
    an attention's output, then ``reshape``)."""
    cpu = ON_CPU.clone()
    with MODES[mode]():
        there = x.clone()
        RESHAPED_IN_PLACE[change](there)
        RESHAPED_IN_PLACE[change](cpu)
        flat = there.reshape(-1) * 1
    assert there.shape == cpu.shape and there.stride() == cpu.stride()
    values, devices = second_device.brought_back(flat)
    assert devices == [("result", SECOND_DEVICE.type)]
    assert torch.equal(values, cpu.reshape(-1))


def test_a_view_made_under_inference_mode_of_an_earlier_tensor(x):
    """torch refuses an inference tensor a view's version counter: such a view is normal."""
    with torch.inference_mode():
        row = x[None][0, -1]
        row[0] = float("-inf")
        grown = torch.cat([x[0], row.argmax()[None].to(x.dtype)])
    values, devices = second_device.brought_back(grown)
    assert devices == [("result", SECOND_DEVICE.type)]
    assert values.tolist() == [0.0, 1.0, 2.0, 2.0]


def test_a_generator_for_the_inputs_device_draws_there(x):
    """``torch.Generator(device=x.device)`` works as on a GPU, and the generators torch made
    before are generators still."""
    made = torch.Generator(device=x.device).manual_seed(3)
    drawn = torch.rand(4, generator=made, device=x.device)
    assert isinstance(drawn, second_device.Elsewhere)
    probs = x[0] + 1
    picked = torch.multinomial(probs, 2, generator=made)
    assert isinstance(picked, second_device.Elsewhere)
    again = torch.Generator().manual_seed(3)
    assert torch.equal(drawn.cpu(), torch.rand(4, generator=again))
    assert isinstance(torch.default_generator, torch.Generator)


def test_torch_is_left_as_it_was():
    with second_device.active():
        pass
    assert torch.Generator is torch._C.Generator


@pytest.mark.parametrize("style", DEVICE_STYLES)
def test_correct_code_in_a_device_style_gets_full_marks(tmp_path, style, capsys):
    """Every graded test passes, on the CPU and the second device, and ``autograder check``
    gives every public point."""
    [(_, folder)] = write_correct(tmp_path, {style: DEVICE_STYLES[style]})
    results, _ = run_suite(folder, [], [])
    failed = [f"{r.name}: {r.message}" for r in results if not r.passed]
    assert results and not failed, failed
    assert cli.main(["check", str(folder)]) == 0
    text = capsys.readouterr().out
    earned, total = re.search(r"Public tests: (\d+)/(\d+)", text).groups()
    assert earned == total, text


def _run_moving(placed: bool):
    """A fake ``on_second_device`` request for a model already there: data left on the CPU
    meets it; moved too, the call runs (``placed``) or a tensor made inside meets it still."""
    mixed = StudentError(
        ErrorInfo("RuntimeError", "found at least two devices, meta and cpu", "", ())
    )

    def run(*args, move=True, **kwargs):
        if move and placed:
            return torch.ones(1), [("result", SECOND)]
        raise mixed

    return run


@pytest.mark.parametrize(
    ("placed", "named", "not_named"),
    [
        (True, "prompt not moved", "without device="),
        (False, "made on the CPU", "not moved"),
    ],
)
def test_data_left_on_the_cpu_names_the_one_mistake_it_shows(placed, named, not_named):
    """A function handed data on the CPU next to a model on the second device fails for one of
    two mistakes, and the hint names only the one a run with the data moved too points to."""
    with pytest.raises(AssertionError) as failure:
        data_left_on_the_cpu("generate", _run_moving(placed), data="the prompt")
    hint = str(failure.value).split(LIKELY)[1]
    assert named in hint and not_named not in hint
