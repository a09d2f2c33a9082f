"""``autograder nbgrader --course DIR``: the assignment as an nbgrader course directory.

The course holds ``nbgrader_config.py`` and ``source/transformer_hw/``: the notebook, the stubs in
``transformer_hw/`` and the corpus in ``data/``. Nothing else: nbgrader copies every file of
``source/`` that is not a notebook unchanged into the students' release, so the reference, the
tests, their oracles and the bug zoo never go in. The configuration keeps the students' modules
when autograding (``exclude_overwriting``; by default nbgrader would put the stubs back) and
registers our preprocessors, which grade those modules with the full suite in the sandbox.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autograder.nbgrader.notebook import NAME, write_notebook
from autograder.points import MODULES, PACKAGE
from autograder.release import REPO, find_leaks, stub_files

ASSIGNMENT = PACKAGE
DATA = REPO / "data"
CONFIG = "nbgrader_config.py"
#: The files a student writes, relative to the assignment folder.
STUDENT_FILES = tuple(f"{PACKAGE}/{module}.py" for module in MODULES)

CONFIG_TEXT = '''\
"""nbgrader configuration of the {assignment} course, written by `autograder nbgrader`.

`nbgrader autograde` needs the autograder repository installed with its nbgrader extra
(`pip install -e '.[nbgrader]'`): our preprocessors grade the submitted modules with the full
graded suite, in the sandbox, outside the student's kernel.
"""

from autograder.nbgrader.preprocessors import autograde_preprocessors

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
    write_notebook(assignment / NAME, "nbgrader")
    (assignment / PACKAGE).mkdir(parents=True)
    for name, text in stub_files().items():
        (assignment / PACKAGE / name).write_text(text, encoding="utf-8")
    shutil.copytree(DATA, assignment / "data")
    config = CONFIG_TEXT.format(
        assignment=ASSIGNMENT,
        files="".join(f"        {name!r},\n" for name in STUDENT_FILES),
        timeout=cell_timeout,
    )
    (course / CONFIG).write_text(config, encoding="utf-8")
    leaks = find_leaks(course)
    if leaks:
        raise CourseError("the course would leak: " + "; ".join(leaks))
    return course
