"""``autograder nbgrader`` end to end, headless: the course, its release, the student's side
(``nbgrader validate`` and ``check`` from the release alone, in an environment without this
repository), autograding four submissions in one run (the reference, the stubs, a zoo mutant
whose kernel tries to grade itself, a broken upload) to the grades of ``autograder grade``,
feedback and export; and the rule that a grading failure scores 0, never full marks."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# nbformat and nbgrader are imported where they are used: importing them takes seconds, which
# every pytest-xdist worker would pay at collection, whether it runs these tests or not. The
# README's test command installs them.
if importlib.util.find_spec("nbgrader") is None:
    raise ImportError(
        "these tests need the nbgrader extra: pip install -e '.[dev,nbgrader]'"
    )
if TYPE_CHECKING:
    import nbformat

from autograder.batches.nbgrader import batch
from autograder.batches.nbgrader.course import (
    CHECK_RUNTIME,
    CONFIG,
    NOTEBOOK_REQUIREMENTS,
    REQUIREMENTS,
    STUDENT_FILES,
)
from autograder.commands import cli
from autograder.facts.points import PARTS, TOTAL_POINTS, part_of_file
from autograder.grading import grade
from autograder.sources.notebook import (
    NotebookError,
    build_notebook,
    check_cell_part,
    load_source,
)
from autograder.sources.release import (
    ORACLES,
    SOLUTIONS,
    find_leaks,
    strip_hidden_tests,
)
from autograder.sources.zoo.mutants import CATALOGUE, apply
from tests.engine.conftest import Run

pytestmark = [
    pytest.mark.nbgrader,
    # nbgrader's autograde adds its submission records in a way SQLAlchemy warns about (under
    # `nbgrader autograde` too, where they go to its log); in this process they are its noise.
    pytest.mark.filterwarnings(
        "ignore:Object of type <Submitted:sqlalchemy.exc.SAWarning"
    ),
]

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "transformer_hw"
NOTEBOOK_ID = "transformer_hw"
NOTEBOOK = f"{NOTEBOOK_ID}.ipynb"
# Quick to grade, and it costs points in parts 2, 6 and 7 while the others keep full marks.
MUTANT = next(m for m in CATALOGUE if m.name == "causal-hides-diagonal")
STUDENTS = ("ref", "stubs", "mutant", "broken")
# The broken upload: a module that does not compile (its parts score 0, and say why).
BROKEN = ("heads.py", "def split_heads(x, n_heads)\n")
# The student of ``nbgrader validate``: the reference but for this file, a stub. (Validating the
# stubs and the reference apart would run the notebook, and each part's check, twice.)
UNFINISHED = "charlm.py"
TIMEOUT = 900  # seconds for one nbgrader command: generous, the machine may be loaded

# A student's own cell in the mutant's notebook: it tries every way a kernel has to raise its
# grade. Each check cell would print full points, the check it runs (the release's, next to
# the notebook) is replaced, and the bug is fixed on disk after the deadline.
PATCH = f"""\
import autograder.commands.check
from autograder.facts.points import PARTS


def check_part(part):
    return PARTS[part].points


autograder.commands.check.check = lambda *args, **kwargs: 0
masks_py = HOME / "transformer_hw" / {MUTANT.file!r}
masks_py.write_text(masks_py.read_text().replace({MUTANT.edits[0][1]!r}, {MUTANT.edits[0][0]!r}))
print(f"patched, {{torch.get_num_threads()}} thread")
"""


def nbgrader_path() -> str:
    """``PATH`` for nbgrader, which runs alembic from it: this environment's first."""
    return f"{Path(sys.executable).parent}:{os.environ['PATH']}"


def run_nbgrader(course: Path, *args: str) -> str:
    env = dict(os.environ, PATH=nbgrader_path())
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        check=False,
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stderr[-4000:]}"
    return done.stderr


def nbgrader_api(course: Path, **grade_modules):
    """nbgrader's own Python API (the one its formgrader serves) on ``course``, configured by
    the course's ``nbgrader_config.py`` as the commands are. It runs in this process, which has
    imported torch and nbgrader and started a sandbox already: a command of its own would
    start all three again (seconds of CPU each). ``grade_modules``: settings of our
    ``GradeModules`` preprocessor beside the course's."""
    from nbgrader.apps import NbGraderAPI
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(CONFIG, path=str(course)).load_config()
    config.CourseDirectory.root = str(course)
    for name, value in grade_modules.items():
        setattr(config.GradeModules, name, value)
    return NbGraderAPI(config=config)


def succeeded(result: dict, what: str) -> None:
    """An NbGraderAPI result that must report success."""
    assert result["success"], (
        f"nbgrader {what}:\n{result.get('log', '')[-3000:]}{result.get('error', '')[-3000:]}"
    )


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The course and its release (``nbgrader generate_assignment`` through ``nbgrader_api``:
    this process imports nbgrader anyway)."""
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    assert cli.main(["nbgrader", "--course", str(course)]) == 0
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PATH", nbgrader_path())  # it makes the gradebook with alembic
        result = nbgrader_api(course).generate_assignment(ASSIGNMENT)
    succeeded(result, "generate_assignment")
    return course


def fresh_environment(folder: Path) -> tuple[Path, dict]:
    """A Python environment without this repository: a new virtual environment that sees this
    one's packages (torch, pytest, nbgrader, ...) through a ``.pth`` line naming its
    site-packages. Python reads the ``.pth`` files of its own site-packages only, so this
    repository's editable install (a ``.pth`` file in this one's) is not there: what a student
    gets with ``pip install -r requirements.txt``. Its interpreter, and the environment to run
    it in."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True
    )
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    seed = folder / "lib" / version / "site-packages" / "_requirements.pth"
    seed.write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PYTHONNOUSERSITE"] = "1"
    env["JUPYTER_PATH"] = env["JUPYTER_DATA_DIR"] = str(folder / "share" / "jupyter")
    return folder / "bin" / "python", env


@pytest.fixture(scope="module")
def student_side(course, tmp_path_factory) -> dict:
    """A student's commands, each from a copy of the release alone, in ``fresh_environment``:
    ``nbgrader validate`` on the reference with part 7 still a stub (``UNFINISHED``), ``python
    -m autograder check`` on the stubs from a folder inside the release and from outside it.
    They start when the first test asks for them, so that they run while the course
    autogrades, and are finished by the test that reads them."""
    where = tmp_path_factory.mktemp("student")
    python, env = fresh_environment(where / "venv")
    release = course / "release" / ASSIGNMENT
    copies = {name: where / name / ASSIGNMENT for name in ("stubs", "unfinished")}
    for folder in copies.values():
        shutil.copytree(release, folder)
    for module in SOLUTIONS.glob("*.py"):
        if module.name != UNFINISHED:
            shutil.copy(module, copies["unfinished"] / ASSIGNMENT / module.name)
    without_repo = subprocess.run(
        [python, "-c", "import autograder"],
        check=False,
        cwd=where,
        env=env,
        capture_output=True,
    )
    check = [python, "-m", "autograder", "check"]
    runs = {
        "validate": Run(
            [python, "-m", "nbgrader", "validate", NOTEBOOK],
            copies["unfinished"],
            where / "validate.log",
            env,
        )
    }
    inside = copies["stubs"] / ASSIGNMENT  # the stubs' own folder, in the release
    runs["check inside"] = Run(
        [*check, "--part", "1", "-k", "example_412_7"],
        inside,
        where / "in.log",
        env | {"PYTHONPATH": str(copies["stubs"])},
    )
    # the release's check runtime, run from a folder that is no part of a release
    runs["check outside"] = Run(
        check, where, where / "out.log", env | {"PYTHONPATH": str(copies["stubs"])}
    )
    return {"without_repo": without_repo, "runs": runs}


@pytest.fixture(scope="module")
def autograded(course, tmp_path_factory) -> dict:
    """Autograde the four ``STUDENTS`` in one run (``nbgrader_api``; the course's export goes
    through nbgrader's command), and grade their submitted folders with ``autograder grade``:
    each one's points per part from nbgrader's gradebook and from ``autograder grade``, and
    the autograde run's log."""
    import nbformat
    from nbgrader.api import Gradebook

    release = course / "release" / ASSIGNMENT
    submitted = {s: course / "submitted" / s / ASSIGNMENT for s in STUDENTS}
    for folder in submitted.values():
        shutil.copytree(release, folder)
    for student in ("ref", "broken"):
        shutil.copytree(SOLUTIONS, submitted[student] / ASSIGNMENT, dirs_exist_ok=True)
    (submitted["broken"] / ASSIGNMENT / BROKEN[0]).write_text(BROKEN[1])
    apply(MUTANT, SOLUTIONS, submitted["mutant"])
    notebook = nbformat.read(submitted["mutant"] / NOTEBOOK, as_version=4)
    setup = [c.get("id") for c in notebook.cells].index("setup")
    notebook.cells.insert(setup + 1, nbformat.v4.new_code_cell(PATCH))
    nbformat.write(notebook, submitted["mutant"] / NOTEBOOK)

    # One grading process, this one: it has imported torch and started the sandbox already
    # (a pool's processes would each import torch again; the pool has tests of its own).
    # The kernels' torch threads are the preprocessor's (one): not this environment's.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OMP_NUM_THREADS", "2")
        run = nbgrader_api(course, jobs=1).autograde(ASSIGNMENT, "*")
    succeeded(run, "autograde")
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in STUDENTS:
            nb = gradebook.find_submission_notebook(NOTEBOOK_ID, ASSIGNMENT, student)
            scores[student] = {g.name: g.auto_score for g in nb.grades}
    print("gradebook:", json.dumps(scores, sort_keys=True))
    # The submitted folders, which the kernels never touch (they run in autograded/).
    out = tmp_path_factory.mktemp("grades")
    assert cli.main(["grade", str(course / "submitted"), "--out", str(out)]) == 0
    with open(out / "gradebook.csv", newline="") as f:
        graded = {
            row["name"]: {k: int(row[f"part{k}"]) for k in PARTS}
            for row in csv.DictReader(f)
        }
    return {
        "scores": scores,
        "grade": graded,
        "log": run["log"],
        "course": course,
        "grades": out,
    }


def per_part(scores: dict[int, float]) -> dict[str, float]:
    return {f"check-part{k}": float(v) for k, v in scores.items()}


def read_cells(path: Path) -> dict[str, nbformat.NotebookNode]:
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    return {c.get("id"): c for c in notebook.cells}


def text_of(cell) -> str:
    """What a cell printed: its streams, and the plain text of what it displayed."""
    return "".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for o in cell.outputs
        if o.output_type in ("stream", "display_data")
    )


# The course gives nothing away ----------------------------------------------------------------


def code_windows(text: str, width: int = 3) -> set[tuple[str, ...]]:
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("#", "import ", "from "))]
    return {tuple(lines[i : i + width]) for i in range(len(lines) - width + 1)}


def secret_windows() -> set[tuple[str, ...]]:
    """Code of the answer key, the hidden tests and the bug zoo."""
    graded, engine = REPO / "tests" / "graded", REPO / "autograder"
    secrets = code_windows((REPO / ORACLES).read_text(encoding="utf-8"))
    for path in [*engine.glob("sources/zoo/*.py"), *engine.glob("batches/zoo/*.py")]:
        secrets |= code_windows(path.read_text(encoding="utf-8"))
    tests = [p.read_text(encoding="utf-8") for p in graded.glob("test_*.py")]
    hidden = set().union(*map(code_windows, tests))
    public = set().union(*(code_windows(strip_hidden_tests(t)) for t in tests))
    return secrets | (hidden - public)


def copied_from_the_suite_or_zoo(folder: Path) -> list[str]:
    """Text files under ``folder`` that share three code lines with the answer key, the hidden
    tests or the bug zoo."""
    secrets = secret_windows()
    texts = (".py", ".md", ".txt", ".ipynb")
    return [
        p.relative_to(folder).as_posix()
        for p in sorted(folder.rglob("*"))
        if p.suffix in texts and code_windows(p.read_text(encoding="utf-8")) & secrets
    ]


def release_files() -> set[str]:
    """What the release holds: the notebook, the stubs, the corpus, and what its check cells
    need (the handout's check runtime, the public tests with their stored answers, the student
    contract, the requirements)."""
    graded = {
        f"tests/graded/{p.name}"
        for p in (REPO / "tests" / "graded").glob("*.py")
        if f"tests/graded/{p.name}" != ORACLES
    }
    return {
        NOTEBOOK,
        "data/names.txt",
        f"{ASSIGNMENT}/__init__.py",
        *STUDENT_FILES,
        *CHECK_RUNTIME,
        *graded,
        "tests/graded/answers.pt",
        "SPEC.md",
        REQUIREMENTS,
    }


def test_course_and_release_hold_what_the_check_cells_need_and_nothing_secret(
    course, student_side
):
    for folder in (course / "source" / ASSIGNMENT, course / "release" / ASSIGNMENT):
        files = {
            p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
        }
        assert files == release_files(), folder
        # reference lines, the answer key's code and functions, hidden tests
        assert find_leaks(folder) == [], folder
        assert copied_from_the_suite_or_zoo(folder) == [], folder
    config = (course / "nbgrader_config.py").read_text()
    assert (
        "autograde_preprocessors()" in config
        and "'transformer_hw/attention.py'" in config
    )


def test_the_release_names_its_requirements():
    """``requirements.txt`` holds this project's own requirements and the notebook's (Jupyter
    among them), which the handout installs as its ``notebook`` extra."""
    from autograder.batches.nbgrader.course import requirements_text

    names = {
        re.split(r"[<>=;\s]", line, maxsplit=1)[0]
        for line in requirements_text().splitlines()
        if line and not line.startswith("#")
    }
    assert {"torch", "pytest", "hypothesis", "rich", *NOTEBOOK_REQUIREMENTS} <= names
    # torch's CPU build, held to the minor release that recorded the stored answers
    lines = requirements_text().splitlines()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    import torch

    minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert f"torch=={minor}.*" in lines
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^notebook = \[(.*)\]$", pyproject, re.MULTILINE)
    assert extra, "pyproject.toml: no notebook extra"
    listed = {re.split(r"[<>=]", e.strip(' "'))[0] for e in extra[1].split(",")}
    assert set(NOTEBOOK_REQUIREMENTS) <= listed


def test_leak_assertions_can_fail(tmp_path):
    shutil.copy(
        REPO / "autograder" / "sources" / "zoo" / "mutants.py", tmp_path / "a.py"
    )
    shutil.copy(REPO / "tests" / "graded" / "oracles.py", tmp_path / "b.py")
    shutil.copy(
        REPO / "tests" / "graded" / "test_part1_attention.py", tmp_path / "c.py"
    )
    assert copied_from_the_suite_or_zoo(tmp_path) == ["a.py", "b.py", "c.py"]
    shutil.copy(SOLUTIONS / "attention.py", tmp_path / "attention.py")
    assert find_leaks(tmp_path)


# Autograding ----------------------------------------------------------------------------------


def test_autograde_gives_each_part_its_grade(autograded):
    scores, graded = autograded["scores"], autograded["grade"]
    assert scores["ref"] == per_part({k: p.points for k, p in PARTS.items()})
    assert scores["stubs"] == per_part(dict.fromkeys(PARTS, 0))
    # the mutant and the broken upload lose some points, not all
    for student in ("mutant", "broken"):
        assert 0 < sum(graded[student].values()) < TOTAL_POINTS, student
    # all four in one batch, ahead of nbgrader's loop
    assert autograded["log"].count("grading 4 submissions in") == 1


def test_the_gradebook_equals_autograder_grade_student_for_student(autograded):
    """nbgrader's gradebook (what ``nbgrader export`` reads) holds, for each student and
    part, the points ``autograder grade`` gives the same submitted folder."""
    assert set(autograded["grade"]) == set(STUDENTS)
    for student in STUDENTS:
        assert autograded["scores"][student] == per_part(autograded["grade"][student])


def test_a_kernel_that_patches_the_grading_gets_the_same_score(autograded):
    course = autograded["course"]
    cells = read_cells(course / "autograded" / "mutant" / ASSIGNMENT / NOTEBOOK)
    patch = next(c for c in cells.values() if c.source == PATCH)
    # the kernel ran the patch (with one torch thread) and fixed the bug on disk
    assert "patched, 1 thread" in text_of(patch)
    fixed = course / "autograded" / "mutant" / ASSIGNMENT / ASSIGNMENT / MUTANT.file
    assert MUTANT.edits[0][1] not in fixed.read_text()
    # ... yet the grade is that of the modules as submitted
    alone = autograded["grade"]["mutant"]
    assert autograded["scores"]["mutant"] == per_part(alone)
    lost = next(k for k in PARTS if alone[k] < PARTS[k].points)
    check = cells[f"check-part{lost}"]
    assert re.search(f"Likely mistake:.*{re.escape(MUTANT.diagnosis)}", text_of(check))
    result = [o for o in check.outputs if o.output_type == "execute_result"]
    assert [r.data["text/plain"] for r in result] == [str(alone[lost])]


def test_a_broken_upload_is_told_why_in_the_parts_it_loses(autograded):
    cells = read_cells(
        autograded["course"] / "autograded" / "broken" / ASSIGNMENT / NOTEBOOK
    )
    lost = [k for k in PARTS if autograded["grade"]["broken"][k] < PARTS[k].points]
    assert lost and all(BROKEN[0] in text_of(cells[f"check-part{k}"]) for k in lost)


def test_the_reference_notebook_runs_without_errors(autograded):
    cells = read_cells(
        autograded["course"] / "autograded" / "ref" / ASSIGNMENT / NOTEBOOK
    )
    errors = [
        f"{name}: {output.evalue}"
        for name, cell in cells.items()
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]
    assert errors == []
    assert "412/7 =" in text_of(cells["part1-examples"])
    assert "training skipped while nbgrader runs this notebook (autograde)" in text_of(
        cells["part7-train"]
    )
    # the kernel ran the student's cells, not the check cells: their outputs are the grader's
    ran = {name for name, cell in cells.items() if cell.get("execution_count")}
    assert "part7-samples" in ran
    assert not ran & {f"check-part{k}" for k in PARTS}


def test_feedback_and_export_write_their_files(autograded):
    course = autograded["course"]
    succeeded(nbgrader_api(course).generate_feedback(ASSIGNMENT), "generate_feedback")
    html = {
        s: course / "feedback" / s / ASSIGNMENT / f"{NOTEBOOK_ID}.html"
        for s in STUDENTS
    }
    assert all(path.is_file() for path in html.values())
    page = html["mutant"].read_text(encoding="utf-8")
    assert MUTANT.diagnosis in page
    # the mutant fails hidden tests: counted, never named, until they are released
    results = json.loads((autograded["grades"] / "mutant" / "results.json").read_text())
    failed_hidden = [
        t["name"].partition(": ")[2]  # "Part 2: test_..."
        for t in results["tests"]
        if t["visibility"] != "visible" and t["score"] < t["max_score"]
    ]
    assert failed_hidden
    assert not [name for name in failed_hidden if name in page]
    assert "Hidden tests: " in page and "(hidden test)" not in page
    # the per-part feedback is HTML, not Markdown, and names no folder of this machine
    assert (
        "<h3>Part 1: " in page and "### Part" not in page and "- FAILED: " not in page
    )
    for student, path in html.items():
        text = path.read_text(encoding="utf-8")
        assert str(course) not in text and sys.prefix not in text, student
    # the formulas are drawn into the page (readable offline), their TeX kept as alt text
    assert "$$\\mathrm{Attention}" not in page
    assert "data:image/svg+xml;base64," in page and 'alt="\\mathrm{Attention}' in page
    run_nbgrader(course, "export")
    with open(course / "grades.csv", newline="") as f:
        rows = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}
    assert rows == {s: sum(autograded["grade"][s].values()) for s in STUDENTS}
    assert rows["ref"] == TOTAL_POINTS


# The student's side, from the release alone ----------------------------------------------------


def test_the_student_side_runs_from_the_release_alone(student_side):
    """In an environment where this repository cannot be imported, the release's check cells
    run its own check: ``nbgrader validate`` fails on the check cell of the part left a stub
    alone, and passes the others; ``check`` runs from a folder inside the release and
    says what to do outside it."""
    assert b"No module named 'autograder'" in student_side["without_repo"].stderr
    runs = student_side["runs"]
    out = runs["validate"].output()
    assert "VALIDATION FAILED ON 1 CELL(S)" in out, out[-3000:]
    failed = re.findall(
        r"^\s+AssertionError: part (\d+): Public tests: 0/", out, re.MULTILINE
    )
    assert failed == [str(part_of_file(UNFINISHED))], out[-3000:]
    code, out = runs["check inside"].finish()
    assert code == 1, out[-3000:]
    assert "not implemented yet (transformer_hw/attention.py:" in out
    assert "Public tests: 0/1 points." in out
    code, out = runs["check outside"].finish()
    assert code == 2 and "run this inside the handout" in out, out[-3000:]


# A grade is never full marks by default -------------------------------------------------------


def course_notebook() -> nbformat.NotebookNode:
    import nbformat

    return nbformat.reads(json.dumps(build_notebook("nbgrader")), as_version=4)


def check_cells() -> list:
    return [c for c in course_notebook().cells if check_cell_part(c.id) is not None]


def test_nbgrader_reads_our_outputs_as_partial_credit_and_failures_as_zero():
    from nbgrader.utils import determine_grade

    from autograder.batches.nbgrader import preprocessors

    cell = check_cells()[0]
    assert (
        determine_grade(cell)[0] == PARTS[1].points
    )  # premise: no result is full marks
    points = float(cell.metadata.nbgrader.points)
    earned = {k: preprocessors.PartGrade(k, f"part {k}") for k in PARTS}
    cell.outputs = preprocessors.check_outputs(1, points, earned)
    assert determine_grade(cell)[0] == 1
    for grades in (preprocessors.GradingFailed("the sandbox broke"), None):
        cell.outputs = preprocessors.check_outputs(1, points, grades)
        assert determine_grade(cell)[0] == 0
    cell.outputs = preprocessors.check_outputs(1, points + 1, earned)  # a stale course
    assert determine_grade(cell)[0] == 0
    cell.outputs = preprocessors.check_outputs(max(PARTS) + 1, points, earned)
    assert determine_grade(cell)[0] == 0


def test_a_grader_that_fails_scores_zero_in_every_part(monkeypatch, tmp_path):
    from nbgrader.utils import determine_grade

    from autograder.batches.nbgrader import preprocessors

    def broken(*args, **kwargs):
        raise RuntimeError("the grader fell over")

    monkeypatch.setattr(grade, "grade_many", broken)
    notebook = course_notebook()
    resources = {"nbgrader": {"student": "s"}, "metadata": {"path": str(tmp_path)}}
    for step in (preprocessors.GradeModules(), preprocessors.WritePartGrades()):
        notebook, resources = step.preprocess(notebook, resources)
    graded = [c for c in notebook.cells if check_cell_part(c.id) is not None]
    assert len(graded) == len(PARTS)
    assert all(determine_grade(c)[0] == 0 for c in graded)
    assert all("the grader fell over" in c.outputs[0].evalue for c in graded)


def test_a_grade_from_the_public_tests_alone_or_a_failed_one_is_refused():
    from autograder.batches.nbgrader import preprocessors

    public = [
        grade.TestResult(f"t{k}", f"test_{k}", k, p.points, False, True, "")
        for k, p in PARTS.items()
    ]
    with pytest.raises(preprocessors.GradingFailed, match="hidden"):
        preprocessors.part_grades(grade.Graded("s", public))
    hidden = [grade.TestResult("h", "test_h", 1, 1, True, True, ""), *public[1:]]
    with pytest.raises(preprocessors.GradingFailed, match="part 1: 1 of 18"):
        preprocessors.part_grades(grade.Graded("s", hidden))
    failed = grade.Graded("s", [], ["the autograder failed"], failed=True, detail="why")
    with pytest.raises(preprocessors.GradingFailed, match="the autograder failed"):
        preprocessors.part_grades(failed)


def graded_with_a_failing_hidden_test() -> grade.Graded:
    """Every part: a public test worth all but one point, and a hidden one. Part 1's hidden
    test fails, part 2's public one fails, with a message that holds HTML."""
    tests = []
    for k, p in PARTS.items():
        message = "expected <b>3</b>" if k == 2 else ""
        tests += [
            grade.TestResult(
                f"p{k}", f"test_public_{k}", k, p.points - 1, False, k != 2, message
            ),
            grade.TestResult(f"h{k}", f"test_secret_{k}", k, 1, True, k != 1, "x"),
        ]
    return grade.Graded("s", tests, ["rope.py is missing from the submission"])


def test_the_check_cells_name_the_hidden_tests_only_once_released():
    from autograder.batches.nbgrader import preprocessors

    graded = graded_with_a_failing_hidden_test()
    for released in (False, True):
        grades = preprocessors.part_grades(graded, show_hidden=released)
        assert grades[1].points == PARTS[1].points - 1
        shown = {
            k: json.dumps(preprocessors.check_outputs(k, PARTS[k].points, grades))
            for k in (1, 2)
        }
        assert ("test_secret_1" in shown[1]) is released
        assert ("test_secret_2" in shown[2]) is released  # passed ones too
        assert "test_public_1" in shown[1]
        if not released:
            assert "Hidden tests: 0/1 points" in grades[1].feedback
    # the per-part summary and the problems as feedback.md has them, rendered as HTML
    page = preprocessors.check_outputs(2, PARTS[2].points, grades)[0].data["text/html"]
    assert "<h3>Part 2: Masks: 1/" in page and "<li>Part 2 (Masks): " in page
    assert "rope.py is missing" in page
    # text of the student's (a failure's message) is escaped, never markup
    assert "expected &lt;b&gt;3&lt;/b&gt;" in page and "<b>3" not in page


def test_the_feedback_names_no_folder_of_the_grading_machine():
    from autograder.batches.nbgrader.feedback import without_paths

    traceback = (
        "File \x1b[0;32m/home/prof/course/autograded/ada/transformer_hw/"
        "transformer_hw/attention.py:12\x1b[0m, in softmax\n"
        'File "/opt/env/lib/python3.11/site-packages/torch/functional.py", line 3\n'
        "File ~/course/notes.py:3"
    )
    assert without_paths(traceback) == (
        "File \x1b[0;32mattention.py:12\x1b[0m, in softmax\n"
        'File "functional.py", line 3\n'
        "File notes.py:3"
    )
    kept = "transformer_hw/attention.py:12, 3/4/5, https://example.org/a/b"
    assert without_paths(kept) == kept


def test_the_batch_holds_the_students_nbgrader_will_process(tmp_path):
    """``students_to_come`` foresees nbgrader's choice: from the student under way on, in
    its order, less those excluded and those autograded already (unless forced, or submitted
    again since)."""
    from types import SimpleNamespace

    from nbgrader.coursedir import CourseDirectory

    def folder(step: str, student: str, timestamp: str = "") -> str:
        path = tmp_path / step / student / "hw"
        path.mkdir(parents=True)
        if timestamp:
            (path / "timestamp.txt").write_text(timestamp)
        return str(path)

    assignments = {
        folder("submitted", s, "2026-12-01 10:00:00"): [f"{s}/{NOTEBOOK}"]
        for s in ("a", "b", "c", "d", "e")
    }
    folder("autograded", "c", "2026-12-01 10:00:00")  # autograded, not submitted since
    folder("autograded", "d", "2026-11-30 10:00:00")  # submitted again since
    coursedir = CourseDirectory(root=str(tmp_path), student_id_exclude="e")
    converter = SimpleNamespace(
        coursedir=coursedir, assignments=assignments, force=False
    )
    names = [name for name, _ in batch.students_to_come(converter, "hw", "b")]
    assert names == ["b", "d"]
    converter.force = True
    to_come = batch.students_to_come(converter, "hw", "a")
    assert [name for name, _ in to_come] == ["a", "b", "c", "d"]
    assert to_come[1][1] == tmp_path / "submitted" / "b" / "hw"


def test_a_students_kernel_starts_while_the_grades_are_computed(monkeypatch):
    """The first student's kernel starts as grading begins, not once the grade is in (its
    cells still run only after ``GradeModules``); a kernel started already is not doubled,
    and none starts with starting ahead switched off."""
    import nbformat

    from autograder.batches.nbgrader import kernels
    from autograder.batches.nbgrader.preprocessors import ExecuteStudentCells

    class Recording:
        def __init__(self):
            self.started, self.calls = False, []

        def start(self, name, arguments, env, config):
            self.calls.append(name)
            self.started = True

    spare = Recording()
    monkeypatch.setattr(kernels, "SPARE", spare)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    ExecuteStudentCells().start_ahead_for(nb)
    ExecuteStudentCells().start_ahead_for(nb)
    assert spare.calls == ["python3"]
    spare.started = False
    ExecuteStudentCells(start_ahead=False).start_ahead_for(nb)
    assert spare.calls == ["python3"]


def test_a_students_kernel_is_forked_from_one_that_imported_torch(tmp_path):
    """The kernel started ahead is a fork of the zygote (torch imported once for every
    kernel), in the student's folder with the environment it was started with; shut down, it
    ends; left running, it ends with its zygote, which ends as its socket closes."""
    from jupyter_core.utils import run_sync
    from traitlets.config import Config

    from autograder.batches.nbgrader import kernels

    spare, forks = kernels.Spare(), kernels.Forks()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "A_SETTING": "kept"}
    arguments = ["--HistoryManager.hist_file=:memory:"]

    def started():
        spare.start("python3", arguments, env, Config())
        km = spare.take("python3", arguments, env, str(tmp_path), 120)
        assert km is not None and isinstance(km.provisioner.process, kernels._Forked)
        return km

    old = kernels.FORKS
    kernels.FORKS = forks
    try:
        kms = [started(), started()]
    finally:
        kernels.FORKS = old
    said = []
    client = kms[0].blocking_client()
    client.start_channels()
    code = "import os; print(os.getcwd(), os.environ['A_SETTING'], os.getppid())"
    client.execute_interactive(
        code,
        timeout=120,
        output_hook=lambda m: said.append(m["content"].get("text", "")),
    )
    client.stop_channels()
    folder, setting, parent = "".join(said).split()
    assert (folder, setting) == (str(tmp_path), "kept")
    assert int(parent) == forks._zygote.pid != os.getpid()
    first, second = (km.provisioner.process for km in kms)
    run_sync(kms[0].shutdown_kernel)(now=True)
    assert first.poll() is not None
    forks.close()  # the second kernel was never shut down: it ends with the zygote
    assert second.wait(timeout=60) is not None


def test_a_check_cell_without_our_preprocessor_scores_zero(monkeypatch, tmp_path):
    """Under autograde the kernel's own check cell is an error: a course whose configuration
    lost our preprocessors grades 0, never full marks."""
    from nbclient import NotebookClient
    from nbgrader.utils import determine_grade

    notebook = course_notebook()
    notebook.cells = [
        c for c in notebook.cells if c.get("id") in ("setup", "check-part1")
    ]
    shutil.copytree(REPO / "assignments" / ASSIGNMENT, tmp_path / ASSIGNMENT)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    client = NotebookClient(
        notebook,
        timeout=TIMEOUT,
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    setup, check = notebook.cells
    assert not [o for o in setup.outputs if o.output_type == "error"]
    assert determine_grade(check)[0] == 0
    assert "graded outside this notebook" in check.outputs[0].evalue


# The notebook ----------------------------------------------------------------------------------


def test_one_source_gives_the_course_and_the_handout_notebook():
    import nbformat
    from nbgrader.nbgraderformat import MetadataValidator

    course, handout = build_notebook("nbgrader"), build_notebook("handout")
    for notebook in (course, handout):
        nbformat.validate(nbformat.from_dict(notebook))
    MetadataValidator().validate_nb(nbformat.from_dict(course))
    assert [c["source"] for c in course["cells"]] == [
        c["source"] for c in handout["cells"]
    ]
    assert not any("nbgrader" in c["metadata"] for c in handout["cells"])
    graded = {
        c["id"]: c["metadata"]["nbgrader"]["points"]
        for c in course["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
    }
    assert graded == {f"check-part{k}": p.points for k, p in PARTS.items()}
    locked = [
        c for c in course["cells"] if c["metadata"].get("nbgrader", {}).get("locked")
    ]
    assert all(
        c["cell_type"] == "markdown" or c["id"] in graded or c["id"] == "setup"
        for c in locked
    )
    with pytest.raises(ValueError):
        build_notebook("gradescope")


def test_the_cells_of_a_part_use_only_that_part_and_earlier_ones():
    """With parts 1 to K done, the notebook runs through part K: no cell of a part calls a
    module that a later part writes."""
    part_of_module = {
        f.removesuffix(".py"): k for k, part in PARTS.items() for f in part.files
    }
    modules = "|".join(part_of_module)
    later = []
    for cell in load_source()["cells"]:
        found = re.match(r"(?:check-)?part(\d+)", cell["id"])
        if cell["cell_type"] != "code" or not found:
            continue
        used = re.findall(rf"\b({modules})\.", "".join(cell["source"]))
        later += [
            f"{cell['id']} uses {m}" for m in used if part_of_module[m] > int(found[1])
        ]
    assert later == []


def test_a_source_without_a_check_cell_per_part_is_refused(tmp_path):
    source = load_source()
    source["cells"] = [c for c in source["cells"] if c["id"] != "check-part4"]
    (tmp_path / NOTEBOOK).write_text(json.dumps(source))
    with pytest.raises(NotebookError, match="check cells"):
        build_notebook("handout", tmp_path / NOTEBOOK)


def test_the_course_folder_must_be_new(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert cli.main(["nbgrader", "--course", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
