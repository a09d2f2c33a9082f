"""What a batch shows while it grades.

On a terminal, a live view: the batch's bar, which names the submission and part last reported
and counts the finished submissions, and under it each submission under way with the part being
graded, so a slow start (the sandbox and the suite get ready first) or a slow part reads as
such. Elsewhere (a log file, CI), where a live view prints nothing until the end, one
plain line as each submission starts and as it finishes.

Grading processes report from threads of their own (``grade.grade_many``'s ``progress``), so
every method holds a lock. A report that arrives after its submission finished is dropped.
"""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from autograder.facts import safe_text
from autograder.facts.points import PARTS, TOTAL_POINTS

READYING = "readying the sandbox and the suite"


class BatchProgress:
    """``with BatchProgress(console, total) as progress``: ``grading(name, part)`` as a
    submission starts (``part`` None) and reaches each part, ``finished(name, score)``."""

    def __init__(self, console: Console, total: int):
        self.console = console
        self.total = total
        self.live = console.is_terminal
        self._lock = threading.Lock()
        self._rows: dict[str, TaskID] = {}  # submissions under way -> their row
        self._parts: dict[str, set[int]] = {}  # the parts each has reached so far
        self._done: set[str] = set()
        self._started = 0
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self._batch: TaskID | None = None

    def __enter__(self):
        if self.live:
            self._progress.start()
            self._batch = self._progress.add_task(READYING, total=self.total)
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self._progress.stop()

    def grading(self, name: str, part: int | None) -> None:
        with self._lock:
            if name in self._done:
                return
            if name not in self._rows:
                self._started += 1
                self._rows[name] = self._add_row(name)
            reached = self._parts.setdefault(name, set())
            reached.update([part] if part else [])
            if self.live:
                where = f"part {part}: {PARTS[part].title}" if part else "starting"
                shown = safe_text.terminal_cell(safe_text.capped(name, 40))
                self._progress.update(
                    self._rows[name],
                    description=f"  {shown}: {where}",
                    completed=max(
                        len(reached) - 1, 0
                    ),  # the parts done before this one
                )
                if part:  # the sandbox and the suite are ready: name what is under way
                    self._progress.update(
                        self._batch, description=f"grading {shown}, part {part}"
                    )

    def finished(self, name: str, score: int) -> None:
        with self._lock:
            self._done.add(name)
            row = self._rows.pop(name, None)
            self._parts.pop(name, None)
            if self.live:
                if row is not None:
                    self._progress.remove_task(row)
                under_way = next(iter(self._rows), None)
                description = (
                    f"grading {safe_text.terminal_cell(safe_text.capped(under_way, 40))}"
                    if under_way
                    else "graded"
                )
                self._progress.update(self._batch, advance=1, description=description)
            else:
                self._line(
                    f"[{len(self._done)}/{self.total}] graded {safe_text.one_line(name)}: "
                    f"{score}/{TOTAL_POINTS}"
                )

    def _add_row(self, name: str) -> TaskID | None:
        if self.live:
            return self._progress.add_task(
                f"  {safe_text.terminal_cell(safe_text.capped(name, 40))}",
                total=len(PARTS),
            )
        self._line(f"[{self._started}/{self.total}] grading {safe_text.one_line(name)}")
        return None

    def _line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
