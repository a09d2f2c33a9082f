"""The leak check fails closed: a shipped test that computes what it expects is refused
whatever shape it takes (a module constant, a fixture, a parametrize list, a class, a decorator,
a conftest), and the refusal names the function or value and the fix. What only hidden tests
use never reaches a public file of the handout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sources.release import ReleaseError, build_handout, find_leaks
from autograder.sources.release.leaks import strip_hidden_tests

REPO = Path(__file__).resolve().parents[2]
TARGET = "tests/graded/test_part2_masks.py"
PUBLIC = "@pytest.mark.points(1)\n@pytest.mark.public\n"
FIX_ANSWERS = "import it from tests.graded.answers"

#: name -> (code appended to a public test file, fragments the refusal holds)
SLIPS = {
    "module constant built from comparisons": (
        (
            "FUTURE_4 = torch.arange(4)[None, :] > torch.arange(4)[:, None]\n\n\n"
            f"{PUBLIC}def test_slip(hw):\n"
            '    assert_exact(hw.call(CAUSAL, 4), FUTURE_4, "mask")\n'
        ),
        ["test_part2_masks.py:", "FUTURE_4: computed at import", FIX_ANSWERS],
    ),
    "fixture with params computed at import": (
        (
            "@pytest.fixture(params=[torch.arange(3)[None, :] > torch.arange(3)[:, None]])\n"
            "def expected_mask(request):\n    return request.param\n\n\n"
            f"{PUBLIC}def test_slip(hw, expected_mask):\n"
            '    assert_exact(hw.call(CAUSAL, 3), expected_mask, "mask")\n'
        ),
        ["expected_mask (@pytest.fixture", "a fixture", "take expected values from"],
    ),
    "fixture computing in its body": (
        (
            "@pytest.fixture\ndef expected_mask():\n"
            "    t = torch.arange(3)\n    return t[None, :] > t[:, None]\n\n\n"
            f"{PUBLIC}def test_slip(hw, expected_mask):\n"
            '    assert_exact(hw.call(CAUSAL, 3), expected_mask, "mask")\n'
        ),
        ["expected_mask (@pytest.fixture)", "a fixture"],
    ),
    "parametrize list built from a helper": (
        (
            "def cases():\n"
            "    return [(t, torch.ones(t, t).triu(1).bool()) for t in (2, 3)]\n\n\n"
            "CASES = cases()\n\n\n"
            f'{PUBLIC}@pytest.mark.parametrize("t, want", CASES)\n'
            "def test_slip(hw, t, want):\n"
            '    assert_exact(hw.call(CAUSAL, t), want, "mask")\n'
        ),
        ["CASES: computed at import (`cases()`)", FIX_ANSWERS],
    ),
    "parametrize calling a helper in the decorator": (
        (
            "def cases():\n"
            "    return [(t, torch.ones(t, t).triu(1).bool()) for t in (2, 3)]\n\n\n"
            f'{PUBLIC}@pytest.mark.parametrize("t, want", cases())\n'
            "def test_slip(hw, t, want):\n"
            '    assert_exact(hw.call(CAUSAL, t), want, "mask")\n'
        ),
        ["test_slip (@pytest.mark.parametrize(", "parametrize's values", FIX_ANSWERS],
    ),
    "parametrize list written in the decorator": (
        (
            f'{PUBLIC}@pytest.mark.parametrize("want", [torch.ones(3, 3).triu(1).bool()])\n'
            "def test_slip(hw, want):\n"
            '    assert_exact(hw.call(CAUSAL, 3), want, "mask")\n'
        ),
        ["test_slip (@pytest.mark.parametrize(", "parametrize's values"],
    ),
    "test class whose method computes": (
        (
            "class TestSlip:\n"
            "    @pytest.mark.points(1)\n    @pytest.mark.public\n"
            "    def test_slip(self, hw):\n"
            "        want = torch.ones(3, 3).triu(1).bool()\n"
            '        assert_exact(hw.call(CAUSAL, 3), want, "mask")\n'
        ),
        ["class TestSlip", "module-level function test_<name>(hw, ...)"],
    ),
    "comparison inside the test": (
        (
            f"{PUBLIC}def test_slip(hw):\n"
            "    want = torch.arange(3)[None, :] > torch.arange(3)[:, None]\n"
            '    assert_exact(hw.call(CAUSAL, 3), want, "mask")\n'
        ),
        [
            "test_slip computes on tensors",
            "move test_slip into tests/graded/oracles.py",
        ],
    ),
    "an unknown decorator": (
        (
            "def with_expected(test):\n    return test\n\n\n"
            f"@with_expected\n{PUBLIC}def test_slip(hw):\n"
            '    assert_exact(hw.call(CAUSAL, 2), future(2, 2), "mask")\n'
        ),
        ["test_slip (@with_expected)", "a decorator the leak check does not know"],
    ),
    "a strategy that carries an expected value": (
        (
            "from hypothesis import strategies as st\n\n\n"
            f"{PUBLIC}@given(want=st.just(torch.ones(2, 2).triu(1).bool()))\n"
            "def test_slip(hw, want):\n"
            '    assert_exact(hw.call(CAUSAL, 2), want, "mask")\n'
        ),
        ["test_slip (@given(", "given's arguments must be strategies"],
    ),
    "module-level code": (
        (
            "EXPECTED = {}\nfor t in (2, 3):\n"
            "    EXPECTED[t] = torch.ones(t, t).triu(1).bool()\n\n\n"
            f"{PUBLIC}def test_slip(hw):\n"
            '    assert_exact(hw.call(CAUSAL, 2), EXPECTED[2], "mask")\n'
        ),
        ["module-level code", "runs at import", FIX_ANSWERS],
    ),
    "a library the check does not know": (
        (
            "import numpy\n\n\n"
            f"{PUBLIC}def test_slip(hw):\n"
            "    want = torch.from_numpy(numpy.triu(numpy.ones((2, 2)), 1) > 0)\n"
            '    assert_exact(hw.call(CAUSAL, 2), want, "mask")\n'
        ),
        ["import of numpy", "expected values from tests.graded.answers"],
    ),
    "a default value computed at import": (
        (
            f"{PUBLIC}def test_slip(hw, want=torch.ones(2, 2).triu(1).bool()):\n"
            '    assert_exact(hw.call(CAUSAL, 2), want, "mask")\n'
        ),
        ["test_slip (default `torch.ones(2, 2).triu(1).bool()`)", FIX_ANSWERS],
    ),
    "a global set by one test for another": (
        (
            "WANT = None\n\n\n"
            "def test_setup(hw):\n    global WANT\n    WANT = torch.ones(2, 2).triu(1).bool()\n"
            f"\n\n{PUBLIC}def test_slip(hw):\n"
            '    assert_exact(hw.call(CAUSAL, 2), WANT, "mask")\n'
        ),
        ["WANT: a name rebound from inside a function"],
    ),
    "code from a string": (
        (
            f"{PUBLIC}def test_slip(hw):\n"
            '    want = eval("torch.ones(2, 2).triu(1).bool()")\n'
            '    assert_exact(hw.call(CAUSAL, 2), want, "mask")\n'
        ),
        ["eval(...): code or names made from strings"],
    ),
    "a composite strategy that returns the expected value": (
        (
            "from hypothesis import strategies as st\n\n\n"
            "@st.composite\ndef case(draw):\n    t = draw(sizes(1, 4))\n"
            "    return t, torch.ones(t, t).triu(1).bool()\n\n\n"
            f"{PUBLIC}@given(c=case())\ndef test_slip(hw, c):\n    t, want = c\n"
            '    assert_exact(hw.call(CAUSAL, t), want, "mask")\n'
        ),
        ["case computes on tensors", "handed to `given(...)`", "move case into"],
    ),
    "a torch function kept in a name": (
        (
            f"{PUBLIC}def test_slip(hw):\n    make = torch.ones\n"
            "    want = make(2, 2).triu(1).bool()\n"
            '    assert_exact(hw.call(CAUSAL, 2), want, "mask")\n'
        ),
        ["`torch.ones` held as a value", "call it where it stands"],
    ),
    "a written-out tensor computed on": (
        (
            f"{PUBLIC}def test_slip(hw):\n"
            "    want = torch.tensor([[0.0, 1.0], [0.0, 0.0]]).bool()\n"
            "    assert_exact(hw.call(CAUSAL, 2), ~want.logical_not(), 'mask')\n"
        ),
        ["test_slip computes on tensors", "move test_slip into"],
    ),
    "an expected value worked out in floats": (
        (
            "import math\n\nfrom tests.graded.compare import assert_close\n\n\n"
            f"{PUBLIC}def test_slip(hw):\n"
            "    want = torch.tensor([1 / (1 + math.exp(-x)) for x in (0.5, 1.0)])\n"
            '    assert_close(hw.call("attention.softmax", torch.zeros(2)), want, "p")\n'
        ),
        ["test_slip computes on tensors (line", "math.exp(-x)"],
    ),
    "the answer key imported directly": (
        (
            "from tests.graded.oracles import future as future_oracle\n\n\n"
            f"{PUBLIC}def test_slip(hw):\n"
            '    assert_exact(hw.call(CAUSAL, 2), future_oracle(2, 2), "mask")\n'
        ),
        ["import of the answer key", "import its functions from tests.graded.answers"],
    ),
}


def graded_copy(tmp_path: Path) -> Path:
    """A repository holding the graded suite: the release judges it before anything else."""
    repo = tmp_path / "repo"
    shutil.copytree(
        REPO / "tests" / "graded",
        repo / "tests" / "graded",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return repo


@pytest.mark.parametrize("slip", SLIPS)
def test_a_slip_stops_the_release_naming_what_and_the_fix(slip, tmp_path):
    code, fragments = SLIPS[slip]
    repo = graded_copy(tmp_path)
    target = repo / TARGET
    target.write_text(target.read_text(encoding="utf-8") + "\n\n" + code)
    with pytest.raises(ReleaseError) as refused:
        build_handout(tmp_path / "handout", repo)
    message = str(refused.value)
    for fragment in fragments:
        assert fragment in message, message
    assert not (tmp_path / "handout").exists()


def test_a_conftest_beside_the_tests_stops_the_release(tmp_path):
    repo = graded_copy(tmp_path)
    (repo / "tests" / "graded" / "conftest.py").write_text(
        "import pytest\nimport torch\n\n\n@pytest.fixture\ndef want():\n"
        "    return torch.ones(2, 2).triu(1).bool()\n"
    )
    with pytest.raises(ReleaseError, match="conftest.py beside the graded tests"):
        build_handout(tmp_path / "handout", repo)


def test_code_in_the_top_conftest_stops_the_release(tmp_path):
    """tests/conftest.py ships to load the engine's plugin, and may do nothing else."""
    repo = graded_copy(tmp_path)
    plugin = (REPO / "tests" / "conftest.py").read_text(encoding="utf-8")
    (repo / "tests" / "conftest.py").write_text(
        plugin + "\n\n@pytest.fixture\ndef want():\n    return 1\n"
    )
    with pytest.raises(ReleaseError, match="only loads the engine's plugin"):
        build_handout(tmp_path / "handout", repo)


HIDDEN = (
    "HIDDEN_WANT = torch.tensor([[False, True], [False, False]])\n"
    "HIDDEN_SIZE = 2\n\n\n"
    "@pytest.mark.points(1)\n@pytest.mark.hidden\ndef test_hidden_slip(hw):\n"
    '    assert_exact(hw.call(CAUSAL, HIDDEN_SIZE), HIDDEN_WANT, "mask")\n'
)


def test_what_only_hidden_tests_use_stays_home(tmp_path):
    """A hidden test's expected value, written out or computed, as a module constant of a
    public file: the handout's file leaves it out; a handout holding it is a leak."""
    source = (REPO / TARGET).read_text(encoding="utf-8") + "\n\n" + HIDDEN
    shipped = strip_hidden_tests(source, TARGET)
    assert "HIDDEN_WANT" not in shipped and "HIDDEN_SIZE" not in shipped
    assert "test_causal_mask_square" in shipped
    kept = strip_hidden_tests(source, TARGET).replace(
        "pytestmark =", HIDDEN.split("\n\n\n")[0] + "\npytestmark =", 1
    )
    (tmp_path / "tests" / "graded").mkdir(parents=True)
    (tmp_path / TARGET).write_text(kept)
    leaks = find_leaks(tmp_path)
    for name in ("HIDDEN_WANT", "HIDDEN_SIZE"):
        assert any(f": {name} is used by no test of the handout" in x for x in leaks)


def test_the_real_handout_ships_no_value_of_a_hidden_test():
    """TARGET_P (the sampling test's distribution) and NOT_OFFSET (a hidden test's mistake)
    and everything else only hidden tests use stay out of the public files."""
    for path in sorted((REPO / "tests" / "graded").glob("test_*.py")):
        shipped = strip_hidden_tests(path.read_text(encoding="utf-8"), path.name)
        for name in ("TARGET_P", "NOT_OFFSET", "chernoff_interval", "TAU"):
            assert name not in shipped, (path.name, name)


def test_the_release_command_refuses_before_writing_anything(tmp_path):
    """``autograder release`` on a repository with a slip: refused, the handout folder never
    made, and assignments/ as it was (a stale stub stays stale)."""
    copy = tmp_path / "repo"
    ignored = ("__pycache__", ".venv", ".git", "build", "grades", "*.egg-info")
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*ignored))
    code, _ = SLIPS["module constant built from comparisons"]
    target = copy / TARGET
    target.write_text(target.read_text(encoding="utf-8") + "\n\n" + code)
    stub = copy / "assignments" / "transformer_hw" / "masks.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "# stale\n")
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "release", "--out", "handout"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "FUTURE_4: computed at import" in done.stdout + done.stderr
    assert not (copy / "handout").exists()
    assert stub.read_text(encoding="utf-8").endswith("# stale\n")
