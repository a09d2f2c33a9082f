"""The README's "Adding a part" checklist is complete: following it in a copy of the repository
with a tiny new part (an ALiBi bias), editing exactly the files it names, gives a suite whose
points add up, a release that ships no oracle, and a grader that scores the reference and alice
on the new total. Written with its oracle inline instead, the new test stops the release."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from autograder.points import MODULES, PARTS, TOTAL_POINTS
from autograder.release import ReleaseError, build_handout

from .conftest import Run

REPO = Path(__file__).resolve().parents[2]
N = max(PARTS) + 1
POINTS = 2
#: Names the example part may take, the first that no part's module uses.
CANDIDATES = ("alibi", "alibi_bias", "linear_bias", "distance_bias")


def free_module_name() -> str:
    taken = set(MODULES) | {p.stem for p in (REPO / "solutions").rglob("*.py")}
    free = [name for name in CANDIDATES if name not in taken]
    if not free:
        pytest.fail(
            f"every name this test may give its example part is a module already "
            f"({', '.join(CANDIDATES)}): add another to CANDIDATES"
        )
    return free[0]


MODULE = free_module_name()
TOPIC = MODULE

REFERENCE = '''\
"""Part {n}: ALiBi, a bias on attention scores that grows with the distance to the key."""

import torch


def alibi_bias(t: int, slope: float) -> torch.Tensor:
    """Float32 ``(t, t)``: ``-slope * |i - j|`` for query ``i`` and key ``j``."""
    # TODO: the bias from the distances between positions.
    ### BEGIN SOLUTION
    positions = torch.arange(t, dtype=torch.float32)
    return -slope * (positions[:, None] - positions[None, :]).abs()
    ### END SOLUTION
'''

ALICE = """\
import torch


def alibi_bias(t, slope):
    return torch.tensor([[-slope * abs(i - j) for j in range(t)] for i in range(t)])
"""

ORACLE = '''

def alibi_oracle(t: int, slope: float) -> torch.Tensor:
    """The ALiBi bias in float64, by the distances between positions."""
    distance = torch.arange(t, dtype=F64)[:, None] - torch.arange(t, dtype=F64)[None, :]
    return -slope * (distance * distance) ** 0.5
'''

TESTS = '''\
"""Part {n}: the ALiBi bias, against a float64 oracle."""

import pytest
import torch

from tests.graded.answers import alibi_oracle
from tests.graded.compare import assert_close

pytestmark = pytest.mark.part({n})


@pytest.mark.points(1)
@pytest.mark.public
def test_alibi_bias(hw):
    assert_close(hw.call("{module}.alibi_bias", 4, 0.5), alibi_oracle(4, 0.5).float(), "bias")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_alibi_bias_one_position(hw):
    assert_close(hw.call("{module}.alibi_bias", 1, 0.25), alibi_oracle(1, 0.25).float(), "bias")
'''
#: The same tests with the oracle written inline, operators and torch.arange only.
INLINE = TESTS.replace("from tests.graded.answers import alibi_oracle\n", "").replace(
    "\n\n@pytest.mark.points(1)\n@pytest.mark.public",
    "\n" + ORACLE.replace("F64", "torch.float64") + "\n\n@pytest.mark.points(1)\n"
    "@pytest.mark.public",
    1,
)
INLINE_LINE = INLINE.splitlines().index(
    "def alibi_oracle(t: int, slope: float) -> torch.Tensor:"
)


def add_part(points_py: str) -> str:
    end_of_parts = "\n    )\n}\n"
    assert points_py.count(end_of_parts) == 1, "PARTS is no longer laid out as expected"
    entry = f'\n        Part({N}, "ALiBi", ("{MODULE}.py",), (), {POINTS}),'
    return points_py.replace(end_of_parts, entry + end_of_parts)


def add_oracle(oracles_py: str) -> str:
    return oracles_py + ORACLE


def add_check_cell(notebook: str) -> str:
    data = json.loads(notebook)
    data["cells"].append(
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"check-part{N}",
            "metadata": {},
            "outputs": [],
            "source": [f"check_part({N})"],
        }
    )
    return json.dumps(data, indent=1) + "\n"


def add_row(readme: str) -> str:
    total = f"| | | **total** | **{TOTAL_POINTS}** |\n"
    assert readme.count(total) == 1
    row = f"| {N} | `{MODULE}.py` | ALiBi | {POINTS} |\n"
    return readme.replace(
        total, row + total.replace(str(TOTAL_POINTS), str(TOTAL_POINTS + POINTS))
    )


def new_file(text: str):
    return lambda _: text


ALICE_DIR = "examples/submissions/alice_alternative_style"
#: checklist path -> what becomes of the file (given its old text, or None for a new file)
EDITS = {
    "solutions/transformer_hw/<module>.py": new_file(REFERENCE.format(n=N)),
    "autograder/points.py": add_part,
    "tests/graded/oracles.py": add_oracle,
    "tests/graded/test_part<N>_<topic>.py": new_file(TESTS.format(n=N, module=MODULE)),
    "notebooks/transformer_hw.ipynb": add_check_cell,
    f"{ALICE_DIR}/transformer_hw/<module>.py": new_file(ALICE),
    "README.md": add_row,
}
PLACEHOLDERS = {"<N>": str(N), "<module>": MODULE, "<topic>": TOPIC}
TEST_FILE = f"tests/graded/test_part{N}_{TOPIC}.py"


#: two pytest runs in one interpreter: torch is imported once
SUITE_CHECKS = (
    "import pytest, sys; sys.exit("
    "pytest.main(['-q', 'tests/engine/test_points.py'])"
    " or pytest.main(['-q', '--collect-only', 'tests/graded']))"
)


def checklist() -> list[str]:
    """The paths the README's numbered "Adding a part" steps name, in order."""
    section = (REPO / "README.md").read_text().split("\n## Adding a part\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, re.MULTILINE)


def follow_checklist(copy: Path) -> None:
    ignored = ("__pycache__", ".venv", ".git", "build", "grades", "*.egg-info")
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*ignored))
    for template, edit in EDITS.items():
        for placeholder, value in PLACEHOLDERS.items():
            template = template.replace(placeholder, value)
        path = copy / template
        path.write_text(edit(path.read_text() if path.exists() else None))


def test_the_checklist_names_what_a_new_part_needs(tmp_path):
    assert checklist() == list(EDITS)
    copy = tmp_path / "repo"
    follow_checklist(copy)

    # The README's table and the part's modules agree with PARTS; the suite's points add up.
    # Side by side with the grading; each imports the copy's own `autograder` and tests.
    checks = Run([sys.executable, "-c", SUITE_CHECKS], copy, tmp_path / "checks.log")
    grade = ["grade", "solutions", ALICE_DIR, "--out", "grades", "-k", f"part{N}"]
    grading = Run(
        [sys.executable, "-m", "autograder", *grade], copy, tmp_path / "grade.log"
    )
    try:
        checks.output()
        grading.output()
    finally:
        grading.process.kill()  # nothing left running when the checks failed
    for name in ("solutions", "alice_alternative_style"):
        results = json.loads((copy / "grades" / name / "results.json").read_text())
        assert results["score"] == POINTS, name
        assert results["max_score"] == TOTAL_POINTS + POINTS, name
    gradebook = (copy / "grades" / "gradebook.csv").read_text().splitlines()
    assert gradebook[0].endswith(f",part{N},problems")


def test_an_inline_oracle_stops_the_release(tmp_path):
    """The checklist followed with the oracle in the test file: the release refuses, naming the
    function, its line, and where it belongs."""
    copy = tmp_path / "repo"
    follow_checklist(copy)
    (copy / TEST_FILE).write_text(INLINE.format(n=N, module=MODULE))
    with pytest.raises(ReleaseError) as refused:
        build_handout(tmp_path / "handout", copy)
    message = str(refused.value)
    assert f"{TEST_FILE}:{INLINE_LINE + 1}: alibi_oracle computes on tensors" in message
    assert "move alibi_oracle into tests/graded/oracles.py" in message
