"""Our steps in ``nbgrader autograde``: the grade is decided by our grader, never by the kernel.

nbgrader runs the student's notebook in a kernel and scores each autograded cell by its outputs,
after cells the student wrote, where student code could patch whatever a cell calls. So the
notebook's check cells decide nothing. ``GradeModules`` runs before nbgrader's ``Execute``
(here ``ExecuteStudentCells``), so before the student's kernel can touch a file: it hands over
the grade of the submitted modules, graded once, in the sandbox, with the same engine and suite
as ``autograder grade`` (with every other student of the run: ``batch``). ``WritePartGrades``
runs after the kernel, before nbgrader saves the grades, and replaces each check cell's outputs
with the part's feedback and its earned points as the cell's result, which nbgrader reads as
partial credit. The feedback follows ``feedback.md``'s rule: the hidden tests are counted in
points and named only once the instructor releases them (``GradeModules.show_hidden_tests``).

nbgrader (0.9) scores a cell 0 when an output is an error or goes to stderr, the number in its
first result otherwise, and full marks when there is no numeric result. So whatever goes wrong
while grading is written as an error output: it scores 0, never full marks.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from nbformat.v4 import new_output
from nbgrader.converters import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, SaveAutoGrades
from nbgrader.utils import is_grade
from traitlets import Bool, Enum, Float, Integer, Unicode

from autograder.facts import safe_text
from autograder.facts.points import PARTS
from autograder.sources.notebook import check_cell_part

#: The key under which the grades travel in nbconvert's resources from one step to the next.
GRADES = "autograder_grades"


@dataclass(frozen=True)
class PartGrade:
    points: int
    feedback: str  # Markdown, as ``feedback.md`` writes it


class GradingFailed(Exception):
    """No grade could be decided for this submission; every check cell scores 0 and says why.

    The message is for the student; ``detail``, the whole story, for the course staff's log.
    """

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail or message


def part_grades(graded, show_hidden: bool = False) -> dict[int, PartGrade]:
    """Each part's points and feedback from ``graded`` (a ``grade.Graded``).

    The feedback is ``feedback.md``'s for that part: its line of the summary, the submission's
    problems where the part lost points, then its tests. Unless ``show_hidden`` (the
    instructor released the hidden tests), only the visible tests are named, the hidden ones
    counted in points, so the feedback may go out before the due date.

    The full suite must have run: a grade from the public tests alone (a handout install of
    ``autograder``) would be a different grade, so it is refused.
    """
    from autograder.outputs import report

    if graded.failed:
        raise GradingFailed("; ".join(graded.problems), graded.detail)
    held = dict.fromkeys(PARTS, 0)
    for t in graded.tests:
        held[t.part] += t.points
    short = [
        f"part {k}: {held[k]} of {p.points}"
        for k, p in PARTS.items()
        if held[k] != p.points
    ]
    if short or not any(t.hidden for t in graded.tests):
        raise GradingFailed(
            "the graded suite is incomplete (hidden tests missing?) "
            + "; ".join(short or ["no hidden test ran"])
            + ": grade with an install of the full autograder repository"
        )
    scores = report.part_scores(graded.tests)
    sections = _sections(
        report.feedback_md(graded, None if show_hidden else HIDDEN_UNTIL)
    )
    problems = sections.get("problems", "")
    grades = {}
    for k, p in PARTS.items():
        lines = [f"### Part {k}: {p.title}: {scores[k]}/{p.points} points", ""]
        lines += [sections["summary"][k]] if k in sections["summary"] else []
        hidden = [t for t in graded.tests if t.part == k and t.hidden]
        if hidden and not show_hidden:
            earned = sum(t.points for t in hidden if t.passed)
            lines.append(
                f"- Hidden tests: {earned}/{sum(t.points for t in hidden)} points; they are "
                "named once your instructor releases them."
            )
        if problems and scores[k] < p.points:
            lines += ["", "#### Problems with the submission", "", problems]
        tests = sections[k].partition("\n")[2].strip()  # below its heading
        lines += ["", "#### Tests", "", tests] if tests else []
        grades[k] = PartGrade(scores[k], "\n".join(lines))
    return grades


#: What the student's view says of when the hidden tests are shown (``report.feedback_md``).
HIDDEN_UNTIL = "after_published"


def _sections(feedback: str) -> dict:
    """``feedback.md`` cut at its level-2 headings: part number -> its text, "problems" -> the
    submission's problems, "summary" -> part number -> its line of the summary."""
    found: dict = {"summary": {}}
    for chunk in re.split(r"^(?=## )", feedback, flags=re.MULTILINE):
        if match := re.match(r"## Part (\d+):", chunk):
            found[int(match.group(1))] = chunk.strip()
        elif chunk.startswith("## Problems"):
            found["problems"] = chunk.partition("\n")[2].strip()  # below its heading
        elif chunk.startswith("## Summary"):
            for line in chunk.splitlines():
                if match := re.match(r"- Part (\d+) ", line):
                    found["summary"][int(match.group(1))] = line
    return found


def check_outputs(part: int, max_points: float, grades) -> list:
    """The outputs of one check cell: feedback and points, or the error that scores 0."""
    if isinstance(grades, GradingFailed):
        return [_error(str(grades))]
    if not isinstance(grades, dict):
        return [
            _error("the modules were not graded: GradeModules must run before Execute")
        ]
    if part not in PARTS:
        return [_error(f"there is no part {part}: rebuild the course")]
    if max_points != PARTS[part].points:
        return [
            _error(
                f"this cell is worth {max_points:g} points, part {part} is worth "
                f"{PARTS[part].points}: rebuild the course with `autograder nbgrader`"
            )
        ]
    earned = grades[part]
    page = {"text/html": as_html(earned.feedback), "text/plain": earned.feedback + "\n"}
    return [
        new_output("display_data", data=page),
        new_output("execute_result", data={"text/plain": str(earned.points)}),
    ]


def as_html(markdown: str) -> str:
    """The feedback's Markdown as HTML, for the notebook and nbgrader's feedback page; any
    HTML in it (a student's text, quoted) is escaped, never rendered."""
    import mistune  # nbconvert's Markdown renderer

    return mistune.create_markdown(escape=True)(markdown)


def _error(message: str):
    """An error output that scores 0. Its text may carry the student's file names and
    messages: control characters are shown, never sent (a notebook shows ANSI escapes)."""
    message = safe_text.plain(message)
    return new_output(
        "error",
        ename="GradingFailed",
        evalue=message,
        traceback=[f"GradingFailed: {message}"],
    )


class GradeModules(NbGraderPreprocessor):
    """Grade the submission's modules in the sandbox, once, before its kernel runs; at the
    run's first student, those of every student still to come too (``batch``)."""

    device = Unicode("cpu", help="cpu or cuda: where the student code runs").tag(
        config=True
    )
    call_timeout = Float(
        None,
        allow_none=True,
        help="seconds per call of student code (default: the sandbox's)",
    ).tag(config=True)
    jobs = Integer(
        len(os.sched_getaffinity(0)),
        help="grading processes side by side (default: one per usable CPU)",
    ).tag(config=True)
    show_hidden_tests = Bool(
        False,
        help="name the hidden tests and their outcomes in the check cells, and so in the "
        "feedback: set it once they are released, then autograde again (--force)",
    ).tag(config=True)

    def preprocess(self, nb, resources):
        if all(check_cell_part(_grade_id(cell) or "") is None for cell in nb.cells):
            return nb, resources  # not our notebook
        student = resources["nbgrader"]["student"]
        converter = _converter(self)
        start = time.monotonic()
        try:
            from autograder.batches.nbgrader import batch
            from autograder.grading import grade  # the suite: only when grading

            if converter is None:  # run on its own: this notebook's folder alone
                coursedir = CourseDirectory(config=self.config)
                to_come = [(student, Path(resources["metadata"]["path"]))]
            else:
                coursedir = converter.coursedir
                assignment = resources["nbgrader"]["assignment"]
                to_come = batch.students_to_come(converter, assignment, student)
            settings = grade.Settings(
                device=self.device,
                call_timeout=self.call_timeout,
                # other students' work, the gradebook
                hidden_paths=(str(Path(coursedir.root).resolve()),),
            )
            holding = batch.holding(student, to_come, settings, self.jobs, self.log)
            if not holding.ready(student):
                # After the grading began: a kernel's start may wait for torch's import.
                ExecuteStudentCells(parent=self.parent).start_ahead_for(nb)
            graded = holding.take(student)
            resources[GRADES] = part_grades(graded, self.show_hidden_tests)
            self.log.info(
                "%s graded in %.1f s, waited %.1f s",
                student,
                graded.execution_time,
                time.monotonic() - start,
            )
        except Exception as exc:  # noqa: BLE001 - whatever failed scores 0, with the reason
            failure = (
                exc if isinstance(exc, GradingFailed) else GradingFailed(repr(exc))
            )
            self.log.error(
                "%s: no grade, 0 points: %s", student, safe_text.plain(failure.detail)
            )
            resources[GRADES] = failure
        return nb, resources


def _converter(step) -> Autograde | None:
    """The ``Autograde`` converter that runs ``step`` (the exporter's parent), if any."""
    parent = step.parent
    while parent is not None and not isinstance(parent, Autograde):
        parent = parent.parent
    return parent


class WritePartGrades(NbGraderPreprocessor):
    """Replace each check cell's outputs with its part's feedback and points."""

    def preprocess_cell(self, cell, resources, index):
        part = check_cell_part(_grade_id(cell) or "") if is_grade(cell) else None
        if part is not None:
            points = float(cell.metadata["nbgrader"]["points"])
            cell.outputs = check_outputs(part, points, resources.get(GRADES))
        return cell, resources


class ExecuteStudentCells(Execute):
    """nbgrader's ``Execute``, less the check cells: in the autograde kernel they only raise
    (the grade is decided outside it), and ``WritePartGrades`` writes their outputs. While a
    student's cells run, the next student's kernel starts (``kernels``)."""

    torch_threads = Integer(
        1,
        help="torch's threads in the kernel, which shares the cores with the grading "
        "processes: more threads than free cores spin, and take many times as long",
    ).tag(config=True)
    start_ahead = Bool(
        True,
        help="start the next student's kernel while this one's cells run, and the first "
        "student's while the grades are computed",
    ).tag(config=True)
    # Every output is in when the kernel is shut down: waiting for it to exit on its own
    # (nbclient's "graceful") costs each student up to a second for nothing.
    shutdown_kernel = Enum(["graceful", "immediate"], "immediate").tag(config=True)

    def preprocess(self, nb, resources, km=None):
        from autograder.batches.nbgrader import batch, kernels

        name, arguments, env = self._kernel_how(nb)
        folder = resources.get("metadata", {}).get("path")
        if km is None and folder:
            km = kernels.SPARE.take(name, arguments, env, folder, self.startup_timeout)
        if self.start_ahead and name and batch.students_waiting():
            kernels.SPARE.start(name, arguments, env, self.config)
        return super().preprocess(nb, resources, km)

    def start_ahead_for(self, nb) -> None:
        """Start ``nb``'s kernel now, unless one is started already: it starts while the
        grades are computed, and runs no cell before this student's grade is in."""
        from autograder.batches.nbgrader import kernels

        name, arguments, env = self._kernel_how(nb)
        if self.start_ahead and name and not kernels.SPARE.started:
            kernels.SPARE.start(name, arguments, env, self.config)

    def _kernel_how(self, nb) -> tuple[str, list[str], dict]:
        """The kernel's name, arguments and environment for ``nb``."""
        name = self.kernel_name or nb.metadata.get("kernelspec", {}).get("name", "")
        arguments = [*self.extra_arguments]
        if not any(a.startswith("--HistoryManager.hist_file") for a in arguments):
            arguments.append(f"--HistoryManager.hist_file={self.ipython_hist_file}")
        return name, arguments, self._kernel_env()

    def setup_kernel(self, **kwargs):
        # A kernel started ahead is this notebook's alone too: shut down after it.
        kwargs.setdefault("cleanup_kc", True)
        return super().setup_kernel(**kwargs)

    def start_new_kernel(self, **kwargs):
        kwargs.setdefault("env", self._kernel_env())
        return super().start_new_kernel(**kwargs)

    def _kernel_env(self) -> dict:
        return {**os.environ, "OMP_NUM_THREADS": str(self.torch_threads)}

    def preprocess_cell(self, cell, resources, index):
        if is_grade(cell) and check_cell_part(_grade_id(cell) or "") is not None:
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def autograde_preprocessors() -> list:
    """nbgrader's autograde steps with ours: grading before ``Execute`` (which leaves out the
    check cells), writing before saving."""
    steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
    steps[steps.index(Execute)] = ExecuteStudentCells
    steps.insert(steps.index(ExecuteStudentCells), GradeModules)
    steps.insert(steps.index(SaveAutoGrades), WritePartGrades)
    return steps
