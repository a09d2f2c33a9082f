"""The students of one ``nbgrader autograde`` run, graded together ahead of nbgrader's loop.

nbgrader autogrades one student after another. Grading each student's modules as nbgrader
reaches them would use one core, and leave it idle while that student's kernel runs. So when
``GradeModules`` reaches the first student, it grades every student the run is still to process
with ``grade.grade_many`` (``--jobs N``), in nbgrader's order, from a thread of its own; each
student's step then waits for its own grade only, which is usually in by then. The grades are
those of ``autograder grade`` on the submitted folders, which hold the same module files as the
autograded copies (``exclude_overwriting``).

Which students nbgrader will process is its converter's decision, made as it reaches each one;
``students_to_come`` foresees it. If it foresees wrong, no grade changes: a student left out is
graded when reached, and one graded for nothing costs only time.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from autograder.grading import grade


class Batch:
    """Grades ``submissions`` (``(student, folder)`` pairs) in a thread, and hands each out."""

    def __init__(self, submissions: list[tuple[str, Path]], settings, jobs: int):
        self.settings = settings
        self.students = {name for name, _ in submissions}
        self._graded: dict[str, grade.Graded] = {}
        self._over = False
        self._changed = threading.Condition()
        # A daemon: a grade nobody asks for (a student nbgrader skipped) holds up no exit.
        threading.Thread(
            target=self._grade,
            args=(submissions, jobs),
            name="autograde-batch",
            daemon=True,
        ).start()

    def _grade(self, submissions, jobs: int) -> None:
        reason = "the batch ended before grading it"
        try:
            for name, graded in grade.grade_many(submissions, self.settings, jobs):
                with self._changed:
                    self._graded[name] = graded
                    self._changed.notify_all()
        except Exception as exc:  # noqa: BLE001 - the students not graded yet score 0, with why
            reason = f"{type(exc).__name__}: {exc}"
        finally:
            with self._changed:
                for name in self.students - self._graded.keys():
                    self._graded[name] = grade.failure(name, reason)
                self._over = True
                self._changed.notify_all()

    def ready(self, student: str) -> bool:
        """Whether ``student``'s grade is in and not taken yet."""
        with self._changed:
            return student in self._graded

    def take(self, student: str) -> grade.Graded:
        """The student's grade, once it is in (each is handed out once)."""
        with self._changed:
            self._changed.wait_for(lambda: student in self._graded)
            self.students.discard(student)
            return self._graded.pop(student)


#: This process's batches: an autograde run makes one, more only where it foresaw wrong.
_BATCHES: list[Batch] = []


def holding(
    student: str, to_come: list[tuple[str, Path]], settings, jobs: int, log
) -> Batch:
    """The batch that holds ``student``'s grade (``take`` it); where none does, ``to_come``
    (the students still to process, ``student`` first) begin to be graded as a new batch,
    said in ``log``."""
    batch = next(
        (b for b in _BATCHES if b.settings == settings and student in b.students),
        None,
    )
    if batch is None:
        jobs = max(1, min(jobs, len(to_come)))
        log.info("grading %d submissions in %d processes", len(to_come), jobs)
        batch = Batch(to_come, settings, jobs)
        _BATCHES.append(batch)
    return batch


def students_waiting() -> bool:
    """Whether a batch holds a grade nobody has taken yet: a student still to come."""
    return any(b.students for b in _BATCHES)


def students_to_come(
    converter, assignment: str, student: str
) -> list[tuple[str, Path]]:
    """The students nbgrader's ``converter`` (an ``Autograde``) is still to process in this
    run, ``student`` (now under way) first, each with its submitted folder: the folders it
    found, in its order, less those it will skip, as ``BaseConverter.init_destination``
    decides: a student excluded, or autograded already and neither forced nor submitted
    again since."""
    coursedir = converter.coursedir
    here = os.path.normpath(
        coursedir.format_path(coursedir.submitted_directory, student, assignment)
    )
    pattern = coursedir.format_path(
        coursedir.submitted_directory, "(?P<student>.*)", re.escape(assignment), True
    )
    found = [(student, Path(here))]
    for folder in sorted(converter.assignments):
        match = re.fullmatch(pattern, folder)
        if match and os.path.normpath(folder) > here:
            name = match["student"]
            if _will_process(converter, assignment, name, folder):
                found.append((name, Path(folder)))
    return found


def _will_process(converter, assignment: str, student: str, folder: str) -> bool:
    coursedir = converter.coursedir
    if student in coursedir.student_id_exclude.split(","):
        return False
    dest = coursedir.format_path(coursedir.autograded_directory, student, assignment)
    if coursedir.notebook_id == "*":
        if not os.path.exists(dest):
            return True
    elif not all(
        os.path.exists(os.path.join(dest, os.path.basename(notebook)))
        for notebook in converter.assignments[folder]
    ):
        return True
    if converter.force:
        return True
    new = coursedir.get_existing_timestamp(folder)
    old = coursedir.get_existing_timestamp(dest)
    return new is not None and old is not None and new > old
