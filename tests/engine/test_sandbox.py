"""The sandboxed submission directly: plain data back, clear errors, limits that hold."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from autograder.protocol import PACKAGE, StudentError, expect_student_error
from autograder import hangs
from autograder.sandbox import IsolatedSubmission, Limits

REPO = Path(__file__).resolve().parents[2]


def submission(tmp_path: Path, **appended: str) -> Path:
    """The reference, with code appended to the named modules."""
    root = tmp_path / "sub"
    shutil.copytree(REPO / "solutions" / PACKAGE, root / PACKAGE)
    for module, code in appended.items():
        path = root / PACKAGE / f"{module}.py"
        path.write_text(path.read_text() + "\n\n" + code)
    return root


@pytest.fixture
def quick():
    """Limits small enough for hang tests."""
    return Limits(call_timeout=1.5, submission_timeout=30.0)


def test_results_are_plain_tensors_and_objects_stay_behind_handles(tmp_path):
    with IsolatedSubmission(submission(tmp_path)) as hw:
        x = torch.randn(2, 3, dtype=torch.float64)
        out = hw.call("attention.softmax", x)
        assert type(out) is torch.Tensor and out.dtype == torch.float64
        assert torch.allclose(out, torch.softmax(x, -1), rtol=1e-12, atol=1e-12)
        cache = hw.new("gqa.KVCache", 1, 2, 4, 2, dtype=torch.float64)
        assert cache.attr("length") == 0
        ones = torch.ones(1, 2, 3, 2, dtype=torch.float64)
        k_all, _ = cache.call("append", ones, ones)
        assert k_all.shape == (1, 2, 3, 2) and cache.attr("length") == 3
        with expect_student_error(ValueError):
            cache.call("append", ones.float(), ones.float())
        layer = hw.new("norm.LayerNorm", 4)
        assert set(layer.state_dict()) == {"weight", "bias"}


def test_errors_carry_student_frames_without_temporary_paths(tmp_path):
    hw = IsolatedSubmission(submission(tmp_path))
    with hw, pytest.raises(StudentError) as caught:
        hw.call("attention.softmax", torch.full((2, 2), float("-inf")))
    info = caught.value.info
    assert caught.value.is_a(ValueError)
    assert 'File "transformer_hw/attention.py"' in info.traceback
    assert "/tmp" not in info.traceback and "autograder" not in info.traceback


def test_a_crash_is_reported_and_the_next_call_gets_a_fresh_worker(tmp_path):
    code = "import os\n\n\ndef crash():\n    os._exit(3)\n"
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        cache = hw.new("gqa.KVCache", 1, 1, 2, 2)
        with pytest.raises(
            StudentError, match="exited with status 3 during masks.crash"
        ):
            hw.call("masks.crash")
        with pytest.raises(
            StudentError, match="ended the submission's process earlier"
        ):
            hw.call("masks.crash")
        with pytest.raises(StudentError, match="KVCache was lost"):
            cache.attr("length")
        assert hw.call("masks.causal_mask", 2).shape == (2, 2)


def test_each_hang_fails_alone_until_the_function_is_disarmed(tmp_path, quick):
    code = "def softmax(x, dim=-1):\n    while True:\n        pass\n"
    q = torch.randn(1, 2, 4)
    with IsolatedSubmission(submission(tmp_path, attention=code), limits=quick) as hw:
        for _ in range(hangs.DISARM_AFTER):
            with pytest.raises(
                StudentError, match="attention.softmax took longer than 1.5 s"
            ):
                hw.call("attention.softmax", q)
            assert hw.call("masks.causal_mask", 2).shape == (2, 2)
        with pytest.raises(
            StudentError, match="softmax in attention.py ran longer than 1.5 s"
        ):
            hw.call("attention.scaled_dot_product_attention", q, q, q)


def test_a_hang_on_one_input_costs_only_that_input(tmp_path, quick):
    code = (
        "_reference_softmax = softmax\n\n\n"
        "def softmax(x, dim=-1):\n"
        "    while bool(torch.isinf(x).all()):\n"
        "        pass\n"
        "    return _reference_softmax(x, dim)\n"
    )
    q = torch.randn(1, 2, 4)
    with IsolatedSubmission(submission(tmp_path, attention=code), limits=quick) as hw:
        with pytest.raises(StudentError, match="took longer than 1.5 s"):
            hw.call("attention.softmax", torch.full((2,), float("-inf")))
        out = hw.call("attention.scaled_dot_product_attention", q, q, q)
        assert out[0].shape == (1, 2, 4)


def test_the_total_time_of_a_submission_is_bounded(tmp_path, quick):
    code = "import time\n\n\ndef nap(s):\n    time.sleep(s)\n"
    limits = dataclasses.replace(quick, call_timeout=2.0, submission_timeout=1.0)
    with IsolatedSubmission(submission(tmp_path, masks=code), limits=limits) as hw:
        with pytest.raises(StudentError, match="used up its 1 s of run time"):
            hw.call("masks.nap", 5)
        with pytest.raises(StudentError, match="used up its 1 s"):
            hw.call("masks.causal_mask", 2)


def test_a_forbidden_call_made_at_run_time_is_reported(tmp_path):
    code = (
        "def softmax(x, dim=-1):\n    return getattr(torch, 'soft' + 'max')(x, dim)\n"
    )
    with IsolatedSubmission(submission(tmp_path, attention=code)) as hw:
        assert hw.runtime_violations() == []
        hw.call("attention.softmax", torch.randn(2, 2))
        (found,) = hw.runtime_violations()
    assert found.file == "attention.py" and found.part == 1
    assert "torch.softmax (called at run time)" in found.describe()


def test_prints_do_not_disturb_the_protocol(tmp_path):
    code = "import os\n\n\ndef loud():\n    print('x' * 10**6)\n    os.write(1, b'\\0' * 10**6)\n    return 7\n"
    with IsolatedSubmission(submission(tmp_path, masks=code)) as hw:
        assert hw.call("masks.loud") == 7
