"""Check the held-out cases by hand: each wrong case fails a graded test of every part it breaks,
each correct case passes the whole graded suite.

Run from the repository root (one case after another, never in parallel):

    .venv/bin/python -m tests.engine.heldout.check_heldout [NAME ...] [--wording FILE]
        [--set {heldout,fresh,third,fourth,fifth,sixth,seventh}] [--blind]

``--set fresh`` checks the second set (``fresh.py``), ``--set third`` the third (``third.py``),
``--set fourth`` the fourth (``fourth.py``), ``--set fifth`` the fifth (``fifth.py``),
``--set sixth`` the sixth (``sixth.py``), ``--set seventh`` the seventh (``seventh.py``);
``--blind`` prints pass and fail only, never the suite's "Likely mistake" lines (a set is a
measure: no one tunes on its diagnoses).
Each case's base package is copied to a temporary folder, its edits applied (each old text must
occur exactly once), and the graded tests of its parts run there with ``--submission``.
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.engine.heldout.fifth import FIFTH
from tests.engine.heldout.fourth import FOURTH
from tests.engine.heldout.fresh import FRESH
from tests.engine.heldout.mistakes import BASES, HELDOUT, KINDS, Case
from tests.engine.heldout.seventh import SEVENTH
from tests.engine.heldout.sixth import SIXTH
from tests.engine.heldout.third import THIRD

ROOT = Path(__file__).resolve().parents[3]
GRADED = ROOT / "tests" / "graded"
PART_FILES = {
    1: ("test_part1_attention.py",),
    2: ("test_part2_masks.py",),
    3: ("test_part3_heads.py",),
    4: ("test_part4_rope.py",),
    5: ("test_part5_norm_block.py",),
    6: ("test_part6_gqa.py",),
    7: (
        "test_part7_data.py",
        "test_part7_loss_training.py",
        "test_part7_model_generation.py",
    ),
}
FAILED = re.compile(r"^FAILED (\S+?)(?: - |$)")
LIKELY = re.compile(r"Likely mistake: (.+)")
SETS = {
    "heldout": HELDOUT,
    "fresh": FRESH,
    "third": THIRD,
    "fourth": FOURTH,
    "fifth": FIFTH,
    "sixth": SIXTH,
    "seventh": SEVENTH,
}


def apply_edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path``; refuse any other count."""
    text = path.read_text()
    count = text.count(old)
    if count != 1:
        raise SystemExit(
            f"{path.name}: the old text occurs {count} times, not once:\n{old}"
        )
    path.write_text(text.replace(old, new))


def build(case: Case, into: Path) -> Path:
    """The case's submission folder (holding ``transformer_hw/``) under ``into``."""
    package = into / "transformer_hw"
    shutil.copytree(ROOT / BASES[case.base] / "transformer_hw", package)
    for old, new in case.edits:
        apply_edit(package / case.file, old, new)
    for file, old, new in case.extra:
        apply_edit(package / file, old, new)
    return into


def run_part(
    submission: Path, parts, select: str = ""
) -> tuple[int, list[str], list[str]]:
    """Exit code, failed test ids and the suite's "Likely mistake" lines for ``parts`` (those
    tests ``select`` names, as ``-k``, when given)."""
    files = [str(GRADED / name) for part in parts for name in PART_FILES[part]]
    narrow = ["-k", select] if select else []
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *files,
            *narrow,
            "-q",
            "-rf",
            "-p",
            "no:cacheprovider",
        ]
        + ["--submission", str(submission)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = result.stdout.splitlines()
    failed = [m.group(1).split("::")[-1] for m in map(FAILED.match, lines) if m]
    likely = sorted({m.group(1).strip() for m in map(LIKELY.search, lines) if m})
    return result.returncode, failed, likely


def check(case: Case, blind: bool = False) -> list[str]:
    """Problems with ``case`` (none when it behaves as declared); prints what it saw (``blind``:
    without the likely mistakes)."""
    with tempfile.TemporaryDirectory(prefix=f"heldout-{case.name}-") as tmp:
        submission = build(case, Path(tmp))
        if case.kind == "correct":
            code, failed, _ = run_part(submission, sorted(PART_FILES))
            print(f"{case.name}: correct, exit {code}, failed {failed}", flush=True)
            return [f"{case.name}: a correct case failed {failed}"] if code else []
        problems = []
        for part in (case.part, *case.also_parts):
            select = case.select if part == 7 else ""
            code, failed, likely = run_part(submission, (part,), select)
            named = "" if blind else f"; likely {likely}"
            print(f"{case.name}: part {part}, failed {failed}{named}", flush=True)
            if not failed:
                problems.append(
                    f"{case.name}: no test of part {part} fails (exit {code})"
                )
        return problems


def validate(cases, wording: Path | None) -> list[str]:
    """Structural problems: names, kinds, descriptions unknown to ``wording``."""
    problems = []
    names = [case.name for case in cases]
    problems += [
        f"duplicate name {n}" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    known = wording.read_text() if wording else None
    for case in cases:
        if case.kind not in KINDS or case.base not in BASES:
            problems.append(
                f"{case.name}: kind {case.kind!r} or base {case.base!r} unknown"
            )
        if (case.expected is None) != (case.kind in ("unknown", "correct")):
            problems.append(f"{case.name}: expected does not fit kind {case.kind}")
        if case.kind == "multi" and (not case.also or case.also[0] != case.expected):
            problems.append(f"{case.name}: also must start with expected")
        for text in (case.expected, *case.also):
            if known is not None and text is not None and f":: {text}\n" not in known:
                problems.append(
                    f"{case.name}: description not in the wording list: {text}"
                )
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="cases to run (default: all)")
    parser.add_argument("--from", dest="start", help="run the cases from this one on")
    parser.add_argument(
        "--wording", type=Path, help="the list of descriptions to check against"
    )
    parser.add_argument("--set", choices=sorted(SETS), default="heldout")
    parser.add_argument("--blind", action="store_true", help="print no likely mistakes")
    args = parser.parse_args()
    cases = SETS[args.set]
    problems = validate(cases, args.wording)
    chosen = [case for case in cases if not args.names or case.name in args.names]
    if args.start:
        chosen = chosen[[case.name for case in chosen].index(args.start) :]
    for case in chosen:
        problems += check(case, args.blind)
    print("\n".join(problems) or f"all {len(chosen)} cases behave as declared")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
