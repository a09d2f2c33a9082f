"""The ``autograder`` command line: one sub-command per job (the ones that ship here)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from autograder.facts.points import PARTS

#: Gradescope's visibilities that hide a test until a date (its ``hidden`` hides no points).
HIDDEN_VISIBILITIES = ("after_due_date", "after_published")


def cmd_release(args: argparse.Namespace) -> int:
    from autograder.sources.release import build_handout, write_assignments

    # The handout first: it refuses a leak before writing anything, assignments/ included.
    zip_path = build_handout(Path(args.out))
    write_assignments()
    print(f"handout written to {args.out} and {zip_path}")
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from autograder.outputs.gradescope import build_gradescope

    path = build_gradescope(Path(args.out), hidden_visibility=args.hidden_visibility)
    print(f"Gradescope autograder written to {path}")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console(file=sys.stdout)
    if args.results and not args.single:
        console.print("[red]--results needs --single[/]")
        return 2
    if args.shard and args.single:
        console.print("[red]--shard slices a batch: not with --single[/]")
        return 2
    if args.shard and (args.remove or args.prune):
        console.print(
            "[red]--remove and --prune change a gradebook: not with --shard[/]"
        )
        return 2
    if not args.paths and not args.remove:
        console.print("[red]give the submissions to grade (or --remove NAME)[/]")
        return 2
    # A zipped batch is unpacked into the staging folder, which outlasts the grading.
    with tempfile.TemporaryDirectory(prefix="autograder-batch-") as staging:
        return _grade_in(console, args, Path(staging))


def _grade_in(console, args: argparse.Namespace, staging: Path) -> int:
    from autograder.batches import batch as batch_grading
    from autograder.grading import grade
    from autograder.sources import intake

    out = Path(args.out)
    batch = None  # with --shard: the whole batch's names, of which found is a slice
    if args.single:
        if len(args.paths) != 1:
            console.print("[red]--single grades one upload: give one path[/]")
            return 2
        source, problem = intake.find_upload(Path(args.paths[0]))
        found = intake.unique_names([(args.single, source)])
        problems = {found[0][0]: problem} if problem else {}
    else:
        paths = [Path(p) for p in args.paths]
        found = intake.find(paths, unpack=staging / "unpacked") if paths else []
        problems = {}
        if paths and not found:
            console.print(f"[red]no submissions found in {' '.join(args.paths)}[/]")
            return 2
        if args.shard:
            from autograder.outputs import shards

            batch = [name for name, _ in found]
            found = shards.owned(found, args.shard)
    # An upload that is itself the problem needs no device: "auto" would import torch (seconds)
    # only to say what to upload.
    nothing_to_grade = len(problems) == len(found)  # also a shard that owns none
    try:
        settings = grade.Settings(
            device=args.device if nothing_to_grade else _device(args.device),
            call_timeout=args.timeout,
            hidden_paths=tuple(
                str(p.resolve())
                for p in (
                    out,
                    staging,  # every submission of the batch, staged
                    *map(Path, args.paths),
                    *([Path(args.results).parent] if args.results else []),
                )
            ),
            keyword=args.keyword,
            hidden_visibility=args.hidden_visibility,
        )
        failed = batch_grading.grade_batch(
            console,
            staging / "staged",
            out,
            found,
            problems,
            settings,
            jobs=args.jobs,
            force=args.force,
            shard=args.shard,
            batch=batch,
            remove=tuple(args.remove),
            prune=args.prune,
        )
    except KeyboardInterrupt:
        console.print(
            "[yellow]interrupted: what was graded is kept; run again to go on[/]"
        )
        return 130
    finally:
        if args.results:
            _copy_results(out / found[0][0], Path(args.results))
    return 1 if failed else 0


def cmd_merge(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autograder.batches import batch
    from autograder.outputs import shards

    console = Console(file=sys.stdout)
    out = Path(args.out)
    try:
        names = shards.merge([Path(f) for f in args.folders], out)
    except shards.ShardError as exc:
        console.print(f"autograder merge: {exc}", style="red", markup=False)
        return 2
    console.print(f"{len(args.folders)} shards merged", markup=False)
    batch.write_class_files(console, out, names, {}, len(names))
    return 0


def _shard(text: str):
    """``--shard I/N`` read as argparse reads a type (its message on a bad value)."""
    from autograder.outputs import shards

    try:
        return shards.parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _copy_results(folder: Path, target: Path) -> None:
    """Put ``results.json`` where Gradescope reads it; a message when there is none."""
    from autograder.outputs import report

    try:
        text = (folder / report.RESULTS).read_text(encoding="utf-8")
    except OSError:
        text = json.dumps(
            {
                "score": 0,
                "output": "The autograder could not grade this submission; please tell the course staff.",
                "stdout_visibility": "hidden",
                "tests": [],
            }
        )
    report.atomic_write(target, text)


def cmd_check(args: argparse.Namespace) -> int:
    from autograder.commands.check import check, print_rules

    if args.rules:
        return print_rules()
    return check(Path(args.path), args.device, args.part, args.keyword)


def cmd_zoo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autograder.batches import zoo
    from autograder.batches.zoo import rates
    from autograder.batches.zoo.restyled import RESTYLED
    from autograder.sources.zoo.mutants import CATALOGUE

    chosen = [m for m in CATALOGUE if not args.only or m.name in args.only]
    device = _device(args.device)
    verdicts, reference = zoo.run(Path(args.out), args.jobs, device, chosen)
    Console().print(zoo.table(verdicts, reference))
    missed = [v for v in verdicts if not v.ok]
    restyled = [r for r in RESTYLED if not args.only or r.of in args.only]
    found = rates.measure(Path(args.out) / "restyled", args.jobs, device, restyled)
    print(found.summary())
    poor = found.rate < rates.TARGET or found.false_names
    return 1 if missed or poor or reference != zoo.TOTAL_POINTS else 0


def cmd_examples(args: argparse.Namespace) -> int:
    from autograder.batches.zoo import examples

    for folder in examples.write(Path(args.out)):
        print(f"wrote {folder}")
    return 0


def cmd_nbgrader(args: argparse.Namespace) -> int:
    from autograder.batches.nbgrader.course import ASSIGNMENT, build_course

    course = build_course(Path(args.course), args.cell_timeout)
    print(
        f"nbgrader course written to {course}; next, in that folder: "
        f"nbgrader generate_assignment {ASSIGNMENT}"
    )
    return 0


def _device(name: str) -> str:
    """The device to grade on: ``cuda`` only where torch sees one. Asking loads the GPU's
    driver in this process, which makes its device nodes (``/dev/nvidia-uvm`` on a freshly
    booted host) before the sandbox's boundary looks for them."""
    if name == "cpu":
        return name
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if name == "cuda":
        raise ValueError("--device cuda, but torch sees no CUDA device")
    return "cpu"


def _command(
    commands, name: str, func, module: str | None = None, **kwargs
) -> argparse.ArgumentParser:
    """The sub-command ``name``, run by ``func``, offered only where ``autograder.<module>``
    (default: the command's name) ships; the student handout carries ``check`` alone.
    Elsewhere a parser that nothing reaches."""
    rows, module = Path(__file__).parents[1], module or name
    if not any(
        (row / f"{module}.py").is_file() or (row / module).is_dir()
        for row in rows.iterdir()
    ):
        return argparse.ArgumentParser(prog=name, add_help=False)
    command = commands.add_parser(name, **kwargs)
    command.set_defaults(func=func)
    return command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    # Options that several sub-commands share, each written once (argparse's parents=).
    on_device = argparse.ArgumentParser(add_help=False)
    on_device.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu")
    matching = argparse.ArgumentParser(add_help=False)
    matching.add_argument(
        "-k", dest="keyword", default="", help="only tests matching (pytest -k)"
    )

    release = _command(
        commands,
        "release",
        cmd_release,
        help="regenerate assignments/ and write the student handout and its zip",
    )
    release.add_argument(
        "--out", required=True, help="folder for the handout (must be new)"
    )

    gradescope = _command(
        commands,
        "gradescope",
        cmd_gradescope,
        help="write the Gradescope autograder zip",
    )
    gradescope.add_argument("--out", required=True, help="path of the zip to write")
    gradescope.add_argument(
        "--hidden-visibility",
        choices=HIDDEN_VISIBILITIES,
        default="after_due_date",
        help="when Gradescope shows hidden tests to students",
    )

    grade = _command(
        commands,
        "grade",
        cmd_grade,
        parents=[on_device, matching],
        help="grade submissions in the sandbox",
    )
    grade.add_argument(
        "paths",
        nargs="*",
        help="submissions (folders or zips), batch folders (a folder or zip per student, "
        "or a folder per student holding its zip), or zips of a batch",
    )
    grade.add_argument("--out", required=True, help="folder for the grades")
    grade.add_argument(
        "--jobs", type=int, default=1, help="submissions graded in parallel"
    )
    grade.add_argument(
        "--timeout",
        type=float,
        help="seconds per call of student code, less any wait for a CPU (default 60)",
    )
    grade.add_argument(
        "--force",
        action="store_true",
        help="regrade every submission (default: only those whose files or suite changed)",
    )
    grade.add_argument(
        "--hidden-visibility",
        choices=HIDDEN_VISIBILITIES,
        default="after_due_date",
        help="when Gradescope shows hidden tests; nothing visible before then counts them",
    )
    grade.add_argument(
        "--single",
        metavar="NAME",
        help="grade the one upload PATH as one submission called NAME, whatever its shape",
    )
    grade.add_argument(
        "--results",
        metavar="FILE",
        help="with --single: also write its results.json to FILE (always, even on failure)",
    )

    grade.add_argument(
        "--remove",
        metavar="NAME",
        action="append",
        default=[],
        help="take NAME's grades out of --out and its gradebook (repeat for more); "
        "the gradebook keeps every other student graded into --out",
    )
    grade.add_argument(
        "--prune",
        action="store_true",
        help="keep in --out and its gradebook only the students of this batch",
    )
    grade.add_argument(
        "--shard",
        metavar="I/N",
        type=_shard,
        help="grade only the I-th of N slices of the batch (by a hash of each name); "
        "autograder merge joins the N folders (docs/sharding.md)",
    )

    merge = _command(
        commands,
        "merge",
        cmd_merge,
        "shards",
        help="merge the folders of grade --shard 1/N ... N/N into one gradebook",
    )
    merge.add_argument("folders", nargs="+", help="the shards' --out folders")
    merge.add_argument("--out", required=True, help="folder for the merged grades")

    check = _command(
        commands,
        "check",
        cmd_check,
        parents=[on_device, matching],
        help="run the public tests against your own code",
    )
    check.add_argument(
        "path", nargs="?", default="assignments", help="default: assignments/"
    )
    check.add_argument(
        "--part",
        type=int,
        help=f"only this part's tests ({', '.join(map(str, PARTS))})",
    )
    check.add_argument(
        "--rules",
        action="store_true",
        help="print the rules every file follows (beyond its forbidden calls) and stop",
    )

    zoo = _command(
        commands,
        "zoo",
        cmd_zoo,
        parents=[on_device],
        help="grade every known wrong solution; fail if one is not caught; then measure "
        "diagnosis on the same mistakes written differently and on correct solutions",
    )
    zoo.add_argument(
        "--out", default="zoo-grades", help="folder for the mutants' grades"
    )
    zoo.add_argument("--jobs", type=int, default=1, help="mutants graded in parallel")
    zoo.add_argument("--only", nargs="*", help="just these mutants (by name)")

    examples = _command(
        commands,
        "examples",
        cmd_examples,
        "zoo",
        help="write the single-bug example submissions (reference + one zoo mutant each)",
    )
    examples.add_argument("--out", required=True, help="folder to write them to")

    nbgrader = _command(
        commands,
        "nbgrader",
        cmd_nbgrader,
        help="write an nbgrader course whose autograding grades the modules in the sandbox",
    )
    nbgrader.add_argument(
        "--course", required=True, help="folder for the course (must be new)"
    )
    nbgrader.add_argument(
        "--cell-timeout",
        type=int,
        default=30,
        help="seconds per notebook cell while autograding (default 30)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (OSError, ValueError) as exc:
        print(f"autograder {args.command}: {exc}", file=sys.stderr)
        return 2
