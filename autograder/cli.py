"""The ``autograder`` command line: one sub-command per job (the ones that ship here)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_release(args: argparse.Namespace) -> int:
    from autograder.release import build_handout, write_assignments

    write_assignments()
    zip_path = build_handout(Path(args.out))
    print(f"handout written to {args.out} and {zip_path}")
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from autograder.gradescope import build_gradescope

    print(f"Gradescope autograder written to {build_gradescope(Path(args.out))}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from autograder import boundary, grade, intake, report

    console = Console(file=sys.stdout)
    console.print("[bold]protections in force:[/] " + "; ".join(boundary.protections()))
    out = Path(args.out)
    found = intake.find([Path(p) for p in args.paths])
    if not found:
        console.print(f"[red]no submissions found in {' '.join(args.paths)}[/]")
        return 2
    todo = [(n, s) for n, s in found if args.force or not report.is_graded(out, n)]
    notes = {n: "already graded" for n, s in found if (n, s) not in todo}
    settings = grade.Settings(
        device=_device(args.device),
        call_timeout=args.timeout,
        hidden_paths=(
            str(out.resolve()),
            *(str(Path(p).resolve()) for p in args.paths),
        ),
        keyword=args.keyword,
    )
    failed = 0
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    names = [n for n, _ in found]
    try:
        with Progress(*columns, console=console) as progress:
            task = progress.add_task("grading", total=len(todo))
            for name, graded in grade.grade_many(todo, settings, args.jobs):
                if isinstance(graded, grade.GradingError):
                    failed += 1
                    notes[name] = "NOT GRADED"
                    console.print(f"[red]{name}: {graded}[/]")
                else:
                    report.write_submission(out, graded)
                    count = len(graded.problems)
                    notes[name] = (
                        f"{count} problem{'s' * (count != 1)}" if count else ""
                    )
                report.write_gradebook(out, names)
                progress.update(task, advance=1, description=name)
    except KeyboardInterrupt:
        report.write_gradebook(out, names)
        console.print(
            "[yellow]interrupted: what was graded is kept; run again to go on[/]"
        )
        return 130
    rows = report.write_gradebook(out, names)
    console.print(report.summary_table(names, rows, notes))
    console.print(
        f"results in {out}/<name>/results.json, gradebook in {out / report.GRADEBOOK}"
    )
    return 1 if failed else 0


def cmd_check(args: argparse.Namespace) -> int:
    from autograder.check import check

    return check(Path(args.path), args.device, args.part, args.keyword)


def cmd_zoo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autograder import zoo
    from autograder.zoo.mutants import CATALOGUE

    chosen = [m for m in CATALOGUE if not args.only or m.name in args.only]
    verdicts, reference = zoo.run(
        Path(args.out), args.jobs, _device(args.device), chosen
    )
    Console().print(zoo.table(verdicts, reference))
    missed = [v for v in verdicts if not v.ok]
    return 1 if missed or reference != zoo.TOTAL_POINTS else 0


def cmd_examples(args: argparse.Namespace) -> int:
    from autograder.zoo import examples

    for folder in examples.write(Path(args.out)):
        print(f"wrote {folder}")
    return 0


def _device(name: str) -> str:
    if name == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _command(
    commands, name: str, module: str | None = None, **kwargs
) -> argparse.ArgumentParser:
    """The sub-command ``name``, offered only where ``autograder.<module>`` (default: the
    command's name) ships; the student handout carries ``check`` alone. Elsewhere a parser
    that nothing reaches."""
    here, module = Path(__file__).parent, module or name
    if not (here / f"{module}.py").is_file() and not (here / module).is_dir():
        return argparse.ArgumentParser(prog=name, add_help=False)
    return commands.add_parser(name, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    release = _command(
        commands,
        "release",
        help="regenerate assignments/ and write the student handout and its zip",
    )
    release.add_argument(
        "--out", required=True, help="folder for the handout (must be new)"
    )
    release.set_defaults(func=cmd_release)

    gradescope = _command(
        commands, "gradescope", help="write the Gradescope autograder zip"
    )
    gradescope.add_argument("--out", required=True, help="path of the zip to write")
    gradescope.set_defaults(func=cmd_gradescope)

    grade = _command(commands, "grade", help="grade submissions in the sandbox")
    grade.add_argument(
        "paths", nargs="+", help="submissions (folders or zips) or batch folders"
    )
    grade.add_argument("--out", required=True, help="folder for the grades")
    grade.add_argument(
        "--jobs", type=int, default=1, help="submissions graded in parallel"
    )
    grade.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    grade.add_argument(
        "--timeout", type=float, help="seconds per call of student code (default 60)"
    )
    grade.add_argument(
        "--force", action="store_true", help="regrade submissions already graded"
    )
    grade.add_argument(
        "-k", dest="keyword", default="", help="only tests matching (pytest -k)"
    )
    grade.set_defaults(func=cmd_grade)

    check = _command(
        commands, "check", help="run the public tests against your own code"
    )
    check.add_argument(
        "path", nargs="?", default="assignments", help="default: assignments/"
    )
    check.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    check.add_argument("--part", type=int, help="only this part's tests (1-7)")
    check.add_argument(
        "-k", dest="keyword", default="", help="only tests matching (pytest -k)"
    )
    check.set_defaults(func=cmd_check)

    zoo = _command(
        commands,
        "zoo",
        help="grade every known wrong solution; fail if one is not caught",
    )
    zoo.add_argument(
        "--out", default="zoo-grades", help="folder for the mutants' grades"
    )
    zoo.add_argument("--jobs", type=int, default=1, help="mutants graded in parallel")
    zoo.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    zoo.add_argument("--only", nargs="*", help="just these mutants (by name)")
    zoo.set_defaults(func=cmd_zoo)

    examples = _command(
        commands,
        "examples",
        "zoo",
        help="write the single-bug example submissions (reference + one zoo mutant each)",
    )
    examples.add_argument("--out", required=True, help="folder to write them to")
    examples.set_defaults(func=cmd_examples)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (OSError, ValueError) as exc:
        print(f"autograder {args.command}: {exc}", file=sys.stderr)
        return 2
