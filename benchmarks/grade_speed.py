"""How much faster ``autograder grade`` is than the naive loop, on the same submissions.

The naive loop starts one ``pytest tests/graded --submission X`` process per submission (student
code in-process, no sandbox); ``autograder grade`` pays the torch import and pytest start-up once
per job and forks each sandboxed worker from a pre-loaded template. The target is at most half
the naive wall time.

    python benchmarks/grade_speed.py [SUBMISSIONS...] [--jobs N] [-k KEYWORD]

Default submissions: ``examples/submissions`` and ``solutions``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder import intake


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "paths", nargs="*", default=["examples/submissions", "solutions"]
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-k", dest="keyword", default="")
    args = parser.parse_args()
    found = intake.find([REPO / p for p in args.paths])
    keyword = ["-k", args.keyword] if args.keyword else []
    with tempfile.TemporaryDirectory() as tmp:
        staged = [intake.stage(n, s, Path(tmp) / "staged" / n) for n, s in found]
        start = time.perf_counter()
        for s in staged:
            subprocess.run(
                [sys.executable, "-m", "pytest", "tests/graded", "-q", "-p", "no:cacheprovider",
                 "--submission", str(s.root), *keyword],
                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
            )  # fmt: skip
        naive = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "autograder", "grade", *(str(REPO / p) for p in args.paths),
             "--out", str(Path(tmp) / "grades"), "--jobs", str(args.jobs), *keyword],
            cwd=REPO, stdout=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        ours = time.perf_counter() - start
    print(f"{len(staged)} submissions, {os.cpu_count()} CPUs")
    print(f"naive loop (one in-process pytest per submission): {naive:6.1f} s")
    print(f"autograder grade --jobs {args.jobs} (sandboxed):       {ours:6.1f} s")
    print(f"ratio: {ours / naive:.2f} (target <= 0.50)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
