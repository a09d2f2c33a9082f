"""The README's "Adding a part" checklist is complete and enforced: following it in a copy of the
repository with a tiny new part built on ``causal_mask`` (a sliding-window mask), editing exactly
the files it names, gives a suite whose checks pass, a release that ships no oracle, and a
grader that scores the reference and alice on the new total. Leaving out any one step fails a
check whose message names the file left out. Written with its oracle inline instead, the new
test stops the release.

The copies run the checks the steps feed (``CHECKS``), not the whole engine suite: that would
take the better part of an hour per copy."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.facts.points import MODULES, PARTS, TOTAL_POINTS
from autograder.sources.release import ReleaseError, build_handout, make_stub

from .conftest import Run

REPO = Path(__file__).resolve().parents[2]
N = max(PARTS) + 1
POINTS = 2
TITLE = "Sliding-window mask"
#: Names the example part may take, the first that no part's module uses.
CANDIDATES = ("window", "window_mask", "sliding_window", "local_mask")


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
"""Part {n}: a sliding-window mask, the causal mask with the distant past prohibited too."""

import torch

from transformer_hw.masks import causal_mask


def window_mask(t: int, window: int) -> torch.Tensor:
    """Bool ``(t, t)``: True where key ``j`` lies in query ``i``'s future or ``window`` or
    more positions behind it."""
    # TODO: the causal mask, with the keys too far behind prohibited too.
    ### BEGIN SOLUTION
    behind = torch.arange(t)[:, None] - torch.arange(t)[None, :]
    return causal_mask(t) | (behind >= window)
    ### END SOLUTION
'''

ALICE = """\
import torch

from transformer_hw.masks import causal_mask


def window_mask(t, window):
    far = torch.tensor([[i - j >= window for j in range(t)] for i in range(t)])
    return causal_mask(t) | far
"""

ORACLE = '''

def window_oracle(t: int, window: int) -> torch.Tensor:
    """The sliding-window mask, position by position."""
    rows = [[j > i or i - j >= window for j in range(t)] for i in range(t)]
    return torch.tensor(rows, dtype=torch.bool)
'''

TESTS = '''\
"""Part {n}: the sliding-window mask, against its oracle."""

import pytest

from tests.graded.answers import window_oracle
from tests.graded.compare import assert_exact

pytestmark = pytest.mark.part({n})

WINDOW = "{module}.window_mask"


@pytest.mark.points(1)
@pytest.mark.public
def test_window_mask(hw):
    want = window_oracle(5, 2).to(hw.device)
    assert_exact(hw.call(WINDOW, 5, 2), want, "window_mask(5, 2)")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_window_mask_wider_than_the_sequence(hw):
    want = window_oracle(3, 4).to(hw.device)
    assert_exact(hw.call(WINDOW, 3, 4), want, "window_mask(3, 4)")
'''
#: The public test with the oracle written inline, comparisons and torch.arange only.
INLINE_ORACLE = """

def window_oracle(t: int, window: int) -> torch.Tensor:
    behind = torch.arange(t)[:, None] - torch.arange(t)[None, :]
    return (behind < 0) | (behind >= window)
"""
INLINE = (
    TESTS.replace("from tests.graded.answers import window_oracle\n", "import torch\n")
    .replace(
        "\n\n@pytest.mark.points(1)", INLINE_ORACLE + "\n\n@pytest.mark.points(1)", 1
    )
    .split("\n\n@pytest.mark.points(1)\n@pytest.mark.hidden")[0]
)
INLINE_LINE = INLINE.splitlines().index(
    "def window_oracle(t: int, window: int) -> torch.Tensor:"
)

SPEC_SECTION = f"""## {N}. `transformer_hw/{MODULE}.py`
- `window_mask(t, window) -> BoolTensor (t, t)`: True where key `j` lies in the future of query
  `i` or `window` or more positions behind it: `causal_mask(t)` with the distant past too.

"""
MUTANT = f"""    single(
        "window-off-by-one",
        "{MODULE}.py",
        "(behind >= window)",
        "(behind > window)",
        {N},
        "window one key too wide",
    ),
"""
WORDING = """    "window one key too wide": (
        "window one key too wide: the key exactly `window` positions behind is still seen"
    ),
"""


def add_part(points_py: str) -> str:
    end_of_parts = "\n    )\n}\n"
    assert points_py.count(end_of_parts) == 1, "PARTS is no longer laid out as expected"
    entry = f'\n        Part({N}, "{TITLE}", ("{MODULE}.py",), (2,), {POINTS}),'
    return points_py.replace(end_of_parts, entry + end_of_parts)


def add_rule(forbidden_py: str) -> str:
    head = "WITHOUT_RULES = frozenset({"
    assert forbidden_py.count(head) == 1, (
        "WITHOUT_RULES is no longer laid out as expected"
    )
    return forbidden_py.replace(head, f'{head}"{MODULE}.py", ')


def add_oracle(oracles_py: str) -> str:
    return oracles_py + ORACLE


def add_spec_section(spec: str) -> str:
    """The new part's section after the last part's: SPEC.md ends with the parts."""
    return spec.rstrip("\n") + "\n\n" + SPEC_SECTION.rstrip("\n") + "\n"


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


def add_mutant(mutants_py: str, worded: bool = True) -> str:
    """The part's mistake at the end of CATALOGUE, its words at the end of WORDING."""
    catalogue = mutants_py.index("\nCATALOGUE: tuple[Mutant, ...] = (\n")
    end = mutants_py.index("\n)\n", catalogue) + 1
    mutants_py = mutants_py[:end] + MUTANT + mutants_py[end:]
    if worded:
        wording = mutants_py.index("\nWORDING = {\n")
        end = mutants_py.index("\n}\n", wording) + 1
        mutants_py = mutants_py[:end] + WORDING + mutants_py[end:]
    return mutants_py


def add_row(readme: str) -> str:
    total = f"| | | **total** | **{TOTAL_POINTS}** |\n"
    assert readme.count(total) == 1
    row = f"| {N} | `{MODULE}.py` | {TITLE} | {POINTS} |\n"
    return readme.replace(
        total, row + total.replace(str(TOTAL_POINTS), str(TOTAL_POINTS + POINTS))
    )


def new_file(text: str):
    return lambda _: text


ALICE_DIR = "examples/submissions/alice_alternative_style"
#: checklist path -> what becomes of the file (given its old text, or None for a new file)
EDITS = {
    "solutions/transformer_hw/<module>.py": new_file(REFERENCE.format(n=N)),
    "autograder/facts/points.py": add_part,
    "autograder/facts/rules.py": add_rule,
    "tests/graded/oracles.py": add_oracle,
    "tests/graded/test_part<N>_<topic>.py": new_file(TESTS.format(n=N, module=MODULE)),
    "docs/SPEC.md": add_spec_section,
    "notebooks/transformer_hw.ipynb": add_check_cell,
    f"{ALICE_DIR}/transformer_hw/<module>.py": new_file(ALICE),
    "autograder/sources/zoo/mutants.py": add_mutant,
    "README.md": add_row,
    "assignments/transformer_hw/<module>.py": new_file(
        make_stub(REFERENCE.format(n=N), f"{MODULE}.py")
    ),
}
PLACEHOLDERS = {"<N>": str(N), "<module>": MODULE, "<topic>": TOPIC}
TEST_FILE = f"tests/graded/test_part{N}_{TOPIC}.py"

#: The checks the steps feed, in one interpreter (torch imported once): the engine's tests of
#: what derives from PARTS, the graded suite's collection (points per part), the leak check.
CHECKS = """
import sys, pytest
from autograder.sources.release import refused_test_code
engine = pytest.main([
    "-q", "-p", "no:cacheprovider", "tests/engine/test_points.py",
    "tests/engine/test_diagnosis.py::test_every_phrase_has_words_that_hold_it",
    "tests/engine/test_diagnosis.py::test_a_file_reaches_the_parts_whose_code_imports_it",
    "tests/engine/test_release.py::test_assignments_are_generated_from_solutions",
    "tests/engine/test_feedback_views.py::"
    "test_without_a_terminal_each_submission_is_a_plain_line",
])
graded = pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", "tests/graded"])
refused = refused_test_code()
print(*refused, sep="\\n")
sys.exit(engine or graded or bool(refused))
"""


def checklist() -> list[str]:
    """The paths the README's numbered "Adding a part" steps name, in order."""
    section = (REPO / "README.md").read_text().split("\n## Adding a part\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, re.MULTILINE)


def filled(template: str) -> str:
    for placeholder, value in PLACEHOLDERS.items():
        template = template.replace(placeholder, value)
    return template


def follow_checklist(copy: Path, skip: str | None = None, edits=None) -> None:
    """The repository copied to ``copy`` with the checklist's edits, but ``skip``'s."""
    ignored = ("__pycache__", ".venv", ".git", "build", "grades", "*.egg-info")
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(*ignored))
    for template, edit in (edits or EDITS).items():
        if template == skip:
            continue
        path = copy / filled(template)
        path.write_text(edit(path.read_text() if path.exists() else None))


def run_checks(copy: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHECKS],
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_checklist_names_what_a_new_part_needs(tmp_path):
    assert checklist() == list(EDITS)
    copy = tmp_path / "repo"
    follow_checklist(copy)

    # The checks the steps feed pass; side by side, the grader scores the new part.
    # Each imports the copy's own `autograder` and tests.
    checks = Run([sys.executable, "-c", CHECKS], copy, tmp_path / "checks.log")
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


#: What the refusal of a left-out step names: its file (a test file's topic is the author's).
NAMED = {step: filled(step) for step in EDITS} | {
    "tests/graded/test_part<N>_<topic>.py": f"tests/graded/test_part{N}_"
}


#: The one step left out in the README's test command. Each case costs a copy of the repository
#: and a Python that imports torch and runs the checks (10 to 15 s, 11 cases: the better part of
#: this file); all run the same way, so the others are marked slow and run in CI (`.ci/run`):
#: this case covers, faster, how a step left out is refused naming its file, and each check
#: the others trip passes on the repository itself in the README's command (CHECKS's tests).
QUICK_STEP = "tests/graded/test_part<N>_<topic>.py"


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(step, marks=() if step == QUICK_STEP else pytest.mark.slow)
        for step in EDITS
    ],
)
def test_each_step_left_out_is_refused_naming_its_file(step, tmp_path):
    copy = tmp_path / "repo"
    follow_checklist(copy, skip=step)
    done = run_checks(copy)
    assert done.returncode != 0, f"nothing refused the checklist without {step}"
    assert NAMED[step] in done.stdout + done.stderr, done.stdout[-4000:]


# Slow (a copy and its checks, 14 s) and covered faster: the check it trips is
# test_diagnosis.py's test_every_phrase_has_words_that_hold_it, and the QUICK_STEP case shows a
# tripped check in a copy naming its file.
@pytest.mark.slow
def test_a_mutant_without_its_wording_is_refused(tmp_path):
    copy = tmp_path / "repo"
    edits = EDITS | {
        "autograder/sources/zoo/mutants.py": lambda t: add_mutant(t, worded=False)
    }
    follow_checklist(copy, edits=edits)
    done = run_checks(copy)
    assert done.returncode != 0
    assert "to WORDING (autograder/sources/zoo/mutants.py)" in done.stdout


def test_an_inline_oracle_stops_the_release(tmp_path):
    """The checklist followed with the oracle in the test file: the release refuses, naming the
    function, its line, and where it belongs."""
    copy = tmp_path / "repo"
    follow_checklist(copy)
    (copy / TEST_FILE).write_text(INLINE.format(n=N, module=MODULE))
    with pytest.raises(ReleaseError) as refused:
        build_handout(tmp_path / "handout", copy)
    message = str(refused.value)
    assert (
        f"{TEST_FILE}:{INLINE_LINE + 1}: window_oracle computes on tensors" in message
    )
    assert "move window_oracle into tests/graded/oracles.py" in message
