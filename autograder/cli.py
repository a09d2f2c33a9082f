"""The ``autograder`` command line: one sub-command per job (see AUTOGRADER.md)."""

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    release = commands.add_parser(
        "release",
        help="regenerate assignments/ and write the student handout and its zip",
    )
    release.add_argument(
        "--out", required=True, help="folder for the handout (must be new)"
    )
    release.set_defaults(func=cmd_release)

    gradescope = commands.add_parser(
        "gradescope", help="write the Gradescope autograder zip"
    )
    gradescope.add_argument("--out", required=True, help="path of the zip to write")
    gradescope.set_defaults(func=cmd_gradescope)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (OSError, ValueError) as exc:
        print(f"autograder {args.command}: {exc}", file=sys.stderr)
        return 2
