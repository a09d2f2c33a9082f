"""``autograder nbgrader --course DIR``: the assignment as an nbgrader course directory.

The course holds ``nbgrader_config.py`` and ``source/transformer_hw/``: the notebook, the stubs in
``transformer_hw/``, the corpus in ``data/``, and what the check cells run in a student's kernel:
the handout's ``check`` runtime (``autograder/``), the public tests with their stored answers
(``tests/``), the student contract (``SPEC.md``) and ``requirements.txt``, so the release works
where nothing but ``pip install -r requirements.txt`` was run. nbgrader copies every file of
``source/`` that is not a notebook unchanged into the students' release, so the reference, the
hidden tests, the answer key and the bug zoo never go in: the handout's leak checks refuse the
course otherwise. The configuration keeps the students' modules when autograding
(``exclude_overwriting``; by default nbgrader would put the stubs back), registers our
preprocessors, which grade those modules with the full suite in the sandbox, names the hidden
tests only once the instructor releases them (``GradeModules.show_hidden_tests``), and makes
the feedback's formulas readable offline and free of this machine's folders.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
from pathlib import Path

from autograder.facts.points import MODULES, PACKAGE
from autograder.sources.notebook import NAME, write_notebook
from autograder.sources.release import (
    HANDOUT_FILES,
    REPO,
    SPEC,
    TORCH_CPU_INDEX,
    find_leaks,
    record_answers,
    stub_files,
    student_spec,
    write_public_tests,
)

ASSIGNMENT = PACKAGE
DATA = REPO / "data"
CONFIG = "nbgrader_config.py"
#: The files a student writes, relative to the assignment folder.
STUDENT_FILES = tuple(f"{PACKAGE}/{module}.py" for module in MODULES)
#: The handout's ``check`` runtime, without its ``pyproject.toml``: a release installs its
#: requirements, and its check cells run ``python -m autograder`` from the release folder.
CHECK_RUNTIME = tuple(name for name in HANDOUT_FILES if name != "pyproject.toml")
REQUIREMENTS = "requirements.txt"
#: What the notebook needs beyond the check runtime: Jupyter, its kernel and its plots (the
#: handout's ``notebook`` extra, whose version specifiers ``requirements.txt`` takes).
NOTEBOOK_REQUIREMENTS = ("notebook", "ipykernel", "matplotlib")
DISTRIBUTION = "transformer-hw-autograder"

CONFIG_TEXT = '''\
"""nbgrader configuration of the {assignment} course, written by `autograder nbgrader`.

`nbgrader autograde` needs the autograder repository installed with its nbgrader extra
(`pip install -e '.[nbgrader]'`): our preprocessors grade the submitted modules with the full
graded suite, in the sandbox, outside the student's kernel.
"""

from autograder.batches.nbgrader.feedback import feedback_preprocessors
from autograder.batches.nbgrader.preprocessors import autograde_preprocessors

c = get_config()  # noqa: F821 - nbgrader defines it when it loads this file

# The students' modules are their work: autograding must not put the stubs back.
c.Autograde.exclude_overwriting = {{
    {assignment!r}: [
{files}    ]
}}
# Grade the modules before the kernel runs; write each part's points into its check cell.
c.Autograde.autograde_preprocessors = autograde_preprocessors()
# Seconds per notebook cell while autograding; the grade itself is decided outside the kernel.
c.Execute.timeout = {timeout}
# A check cell the student deleted comes back, and is graded like the others.
c.OverwriteCells.add_missing_cells = True
# Where the student code runs while grading: "cpu" or "cuda".
c.GradeModules.device = "cpu"
# Grading processes side by side for the run's students (default: one per CPU), e.g.
# c.GradeModules.jobs = 4
# The check cells, and so the feedback, count the hidden tests and name none of them. Once you
# release them (after the due date), set True, then `nbgrader autograde {assignment} --force`
# and `nbgrader generate_feedback {assignment} --force`: each hidden test, named, with its outcome.
c.GradeModules.show_hidden_tests = False
# The feedback's formulas as images, readable offline (nbgrader's page loads MathJax online),
# and no folder of this machine in what the student's cells printed.
c.GenerateFeedback.preprocessors = feedback_preprocessors()
'''


class CourseError(ValueError):
    """The course cannot be written (the folder is in use, or something would leak)."""


def build_course(course: Path, cell_timeout: int = 30) -> Path:
    """Write the nbgrader course to ``course`` (new or empty); refuse if anything would leak."""
    if course.exists() and any(course.iterdir()):
        raise CourseError(f"{course} exists and is not empty")
    if cell_timeout <= 0:
        raise CourseError(f"the cell time-out must be positive, not {cell_timeout}")
    assignment = course / "source" / ASSIGNMENT
    (assignment / PACKAGE).mkdir(parents=True)
    for name, text in stub_files().items():
        (assignment / PACKAGE / name).write_text(text, encoding="utf-8")
    shutil.copytree(DATA, assignment / "data")
    for name in CHECK_RUNTIME:
        (assignment / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, assignment / name)
    write_public_tests(assignment)
    (assignment / "SPEC.md").write_text(student_spec(REPO / SPEC), encoding="utf-8")
    _refuse_leaks(assignment)  # before the slow part
    record_answers(assignment / "tests" / "graded" / "answers.pt")
    write_notebook(assignment / NAME, "nbgrader")
    (assignment / REQUIREMENTS).write_text(requirements_text(), encoding="utf-8")
    config = CONFIG_TEXT.format(
        assignment=ASSIGNMENT,
        files="".join(f"        {name!r},\n" for name in STUDENT_FILES),
        timeout=cell_timeout,
    )
    (course / CONFIG).write_text(config, encoding="utf-8")
    _refuse_leaks(assignment)
    return course


def requirements_text() -> str:
    """``requirements.txt``: this project's own requirements (the check runtime's), torch held
    to the minor release that recorded the public tests' stored answers and taken from
    PyTorch's CPU index (PyPI too, where that index cannot be reached), and the notebook's."""
    requires = importlib.metadata.requires(DISTRIBUTION) or []
    own = [line for line in requires if "extra ==" not in line]
    torch = importlib.metadata.version("torch").split("+")[0]  # 2.13.0+cpu: 2.13.0
    minor = ".".join(torch.split(".")[:2])
    own = [f"torch=={minor}.*" if _name(line) == "torch" else line for line in own]
    notebook = [
        line.split(";")[0].strip()
        for line in requires
        if "extra ==" in line and "notebook" in line.split("extra ==")[1]
    ]
    missing = set(NOTEBOOK_REQUIREMENTS) - {_name(line) for line in notebook}
    if missing:
        raise CourseError(f"pyproject.toml's notebook extra lacks {sorted(missing)}")
    return (
        "# What the notebook and its check cells need, with Jupyter to open it:\n"
        "#   pip install -r requirements.txt   then   jupyter notebook\n"
        "# torch's CPU build (about 200 MB) comes from PyTorch's index. Where that index cannot\n"
        "# be reached, pip takes torch from PyPI, which on Linux x86_64 is the CUDA build: about\n"
        "# 2.7 GB of downloads (nvidia-* packages), and it works on a CPU too.\n"
        f"--extra-index-url {TORCH_CPU_INDEX}\n"
        + "".join(f"{line}\n" for line in [*own, *notebook])
    )


def _name(requirement: str) -> str:
    """The distribution a requirement line names (``torch>=2.9`` -> ``torch``)."""
    return re.split(r"[<>=!~;\[\s]", requirement, maxsplit=1)[0]


def _refuse_leaks(assignment: Path) -> None:
    """What students get (``source/`` goes out as it is) gives nothing away."""
    leaks = find_leaks(assignment)
    if leaks:
        raise CourseError("the course would leak: " + "; ".join(leaks))
