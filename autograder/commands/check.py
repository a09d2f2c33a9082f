"""``autograder check``: a student runs the public tests against their own code.

The tests run in-process (tracebacks and ``pdb`` work) through ``autograder.sources.runner``. The
student sees, part by part, the public points they would get, each failure's whole message
(with its "Likely mistake" line when one matches) and, for an exception in their code, the file
and line where it was raised; then how many points the hidden tests hold. Its exit status is 1
when a public test fails, so a notebook's check cell can fail too. It runs from any folder inside
the handout (or an nbgrader release): it walks up to the folder that holds the code. This module
ships in the student handout.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

from autograder.facts.points import PACKAGE
from autograder.sources.runner import Collector, SuiteError, TestResult, run_suite


def find_code(path: Path, start: Path) -> Path | None:
    """The folder that holds ``transformer_hw/``: ``path`` itself, else, from ``start`` up,
    ``path`` inside a handout's folder or the folder itself (an nbgrader release). A handout's
    folder (or a release) is one with the public tests, ``tests/graded/``."""
    if (path / PACKAGE).is_dir():
        return path
    if path.is_absolute():
        return None
    for folder in (start, *start.parents):
        if (folder / "tests" / "graded").is_dir():
            for candidate in (folder / path, folder):
                if (candidate / PACKAGE).is_dir():
                    return candidate
    return None


def check(
    path: Path, device: str = "cpu", part: int | None = None, keyword: str = ""
) -> int:
    """Print the public tests' score for the code in ``path`` and what to fix; the exit status:
    0 when every public test that ran passes, 1 when one fails, 2 when none could run."""
    from rich.console import Console

    from autograder.facts.points import PARTS

    console = Console(highlight=False, soft_wrap=True)
    found = find_code(path, Path.cwd())
    if found is None:
        console.print(
            f"[red]No {PACKAGE}/ folder in {path}, nor in a handout around "
            f"{Path.cwd()}: run this inside the handout (or the assignment's folder), or "
            f"give the folder that holds {PACKAGE}/[/]"
        )
        return 2
    root = found.resolve()
    if part is not None and part not in PARTS:
        console.print(
            f"[red]--part {part}: the parts are {', '.join(map(str, PARTS))}[/]"
        )
        return 2
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            console.print("[red]--device cuda, but torch sees no CUDA device[/]")
            return 2
    args = ["-m", "public", "--device", device, *(["-k", keyword] if keyword else [])]
    collector = Collector([str(root)], part)
    try:
        tests, _ = run_suite(root, args, [str(root)], collector=collector)
    except SuiteError as exc:
        console.print(str(exc), style="red", markup=False)
        return 2
    if not tests:
        console.print("[yellow]no public test matches[/]")
        return 2
    parts = [k for k in PARTS if part in (None, k)]
    for k in parts:
        mine = [t for t in tests if t.part == k]
        if mine:
            _print_part(console, PARTS[k].title, k, mine)
    earned = sum(t.points for t in tests if t.passed)
    total = sum(t.points for t in tests if not t.skipped)
    console.print(f"\n[bold]Public tests: {earned}/{total} points.[/]")
    later = sum(t.points for t in tests if t.skipped)
    if later:
        console.print(f"Public tests that run only when graded: {later} points.")
    if not keyword:
        public = {k: 0 for k in parts}
        for test_part, points, hidden in collector.collected.values():
            if not hidden and test_part in public:
                public[test_part] += points
        hidden = sum(PARTS[k].points - public[k] for k in parts)
        console.print(f"Hidden tests: {hidden} points, run at grading.")
    console.print(
        "Debug one test: `pytest tests -k <test name>` (--pdb stops at the failure)."
    )
    return 1 if any(not t.passed and not t.skipped for t in tests) else 0


def check_in_fresh_process(path: Path | str, part: int) -> tuple[int, str]:
    """``autograder check PATH --part PART`` in a process of its own, so that it tests the
    student's code as it is on disk now: its exit status and output. A notebook's check cells
    run it. On Linux the process forks from a server that imported torch and this module once
    (a check takes a fraction of a second instead of the two a new Python spends importing
    them); elsewhere (macOS refuses forking after some imports), or where that process ends
    without an answer (the student's code ended it), it is a new Python."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, EOFError):
            return _forked_check(str(path), part)
    command = [sys.executable, "-m", "autograder", "check", str(path)]
    done = subprocess.run(
        [*command, "--part", str(part)], capture_output=True, text=True, check=False
    )
    return done.returncode, done.stdout + done.stderr


def _forked_check(path: str, part: int) -> tuple[int, str]:
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", __name__])
    answer, sender = context.Pipe(duplex=False)
    process = context.Process(target=_check_into, args=(path, part, sender))
    process.start()
    sender.close()
    try:
        return answer.recv()  # EOFError: it ended without answering
    finally:  # interrupted (the student stopped the cell), too: the check ends with it
        process.kill()
        process.join()
        answer.close()


def _check_into(path: str, part: int, sender) -> None:
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        code = check(Path(path), part=part)
    sender.send((code, output.getvalue()))


def print_rules() -> int:
    """The rules beyond each file's forbidden list, from the lists the grader applies."""
    from autograder.facts.rules import student_rules

    for rule in student_rules():
        print(f"- {rule}\n")
    return 0


def _print_part(console, title: str, number: int, tests: list[TestResult]) -> None:
    got = sum(t.points for t in tests if t.passed)
    total = sum(t.points for t in tests if not t.skipped)
    style = "green" if got == total else "red"
    console.print(f"[{style}]Part {number} ({title}): {got}/{total} public points[/]")
    for t in tests:
        points = f"{t.points} point{'s' * (t.points != 1)}"
        if t.skipped:
            console.print(f"  [dim]{t.name} ({points}): runs when graded[/]")
        elif not t.passed:
            console.print(f"  [bold]{t.name}[/] ({points}):", end=" ")
            console.print(_summary(t.message), markup=False)


def _summary(message: str) -> str:
    """The whole message, indented. For an exception in the student's code: its type, message
    and innermost frame in their files (``pytest -k`` shows the whole traceback); for a stub,
    one line."""
    if message.startswith("Your code raised"):
        message = message.split("\n\n")[0]
        if message.startswith("Your code raised NotImplementedError"):
            at = [line for line in message.splitlines() if line.startswith("  at ")]
            where = f" ({at[0][5:].split(': ')[0]})" if at else ""
            return "not implemented yet" + where
    head, *rest = message.splitlines()
    return "\n".join(
        [head, *("      " + line.strip() if line else "" for line in rest)]
    )
