"""Does a correct solution keep full marks beside hostile neighbours?

Grades ``--copies`` copies of the reference with ``autograder grade --jobs J --force`` while
neighbours run beside it: two busy loops, a process that keeps about ``--hog-gb`` GB of memory
in use and touches it over and over, and (``--kill-every S``) one that sends SIGKILL to a live
sandbox worker every S seconds, as the kernel's out-of-memory killer or an operator would. Every
copy must keep full marks: a worker killed from outside is retried however often the kill lands
on the same request (the worker cannot send itself a SIGKILL, docs/DESIGN.md "What the grader
believes"), and such a grade says so in its problems.

    python benchmarks/soak.py [--copies 12] [--jobs CPUS] [--kill-every 5] [--hog-gb 1.5]

Prints one JSON line: copies, how many kept full marks, the undecided ones (their retries spent:
the grader's failure, no points lost) and why, workers killed, grades that met a grader-side
event, why each copy that lost points lost them, seconds, and the load average.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.facts.points import PACKAGE, TOTAL_POINTS
from autograder.sources.release import SOLUTIONS

BUSY = "while True: pass"
HOG = (
    "import sys\nblocks, size = [], int(float(sys.argv[1]) * 16)\n"
    "while True:\n    blocks.append(bytearray(64 << 20))\n    blocks = blocks[-size:]\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--kill-every", type=float, default=5.0, help="0: no kills")
    parser.add_argument("--hog-gb", type=float, default=1.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        batch, out = Path(tmp) / "batch", Path(tmp) / "grades"
        for n in range(args.copies):
            shutil.copytree(SOLUTIONS, batch / f"copy{n:03d}" / PACKAGE)
        neighbours = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(2)]
        neighbours.append(
            subprocess.Popen([sys.executable, "-c", HOG, str(args.hog_gb)])
        )
        grading = subprocess.Popen(
            [sys.executable, "-m", "autograder", "grade", str(batch), "--out", str(out)]
            + ["--jobs", str(args.jobs), "--force"],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        kills: list[int] = []
        stop = threading.Event()
        if args.kill_every > 0:
            threading.Thread(
                target=_killer, args=(args.kill_every, stop, kills), daemon=True
            ).start()
        started = time.monotonic()
        try:
            grading.wait()
        finally:
            stop.set()
            for neighbour in neighbours:
                neighbour.kill()
                neighbour.wait()
        seconds = time.monotonic() - started
        rows = _gradebook(out / "gradebook.csv")
        # An empty score: the grading was undecided (the grader's failure, no points lost).
        undecided = {name: r["problems"] for name, r in rows.items() if not r["score"]}
        scored = {name: r for name, r in rows.items() if name not in undecided}
        print(
            json.dumps(
                {
                    "copies": args.copies,
                    "full_marks": sum(
                        int(r["score"]) == TOTAL_POINTS for r in scored.values()
                    ),
                    "undecided": undecided,
                    "jobs": args.jobs,
                    "workers_killed": len(kills),
                    "grades_with_grader_events": sum(
                        _had_events(out / name) for name in rows
                    ),
                    "exit_status": grading.returncode,
                    # why each copy that lost points lost them
                    "lost": {
                        name: r["problems"]
                        for name, r in scored.items()
                        if int(r["score"]) != TOTAL_POINTS
                    },
                    "seconds": round(seconds, 1),
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                }
            )
        )


def _killer(every: float, stop: threading.Event, kills: list[int]) -> None:
    """SIGKILL a live sandbox worker (a fork of a template) every ``every`` seconds."""
    while not stop.wait(every):
        workers = _workers()
        if workers:
            pid = random.choice(workers)
            try:
                os.kill(pid, signal.SIGKILL)
                kills.append(pid)
            except OSError:
                pass


def _workers() -> list[int]:
    """Processes forked from a sandbox template: a fork keeps its parent's command line,
    and the template's own parent (bubblewrap, or the grading process) has another. Not
    bubblewrap's own process inside the sandbox, a fork of bubblewrap: that would be a kill
    of the whole sandbox, which ``tests/engine/test_faults.py`` covers."""
    commands, parents = {}, {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                commands[entry.name] = (entry / "cmdline").read_bytes()
                stat = (entry / "stat").read_text()
                parents[entry.name] = stat.rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
    return [
        int(pid)
        for pid, command in commands.items()
        if b"template_main" in command
        and commands.get(parents[pid]) == command
        and not command.split(b"\0")[0].endswith(b"bwrap")
    ]


def _gradebook(path: Path) -> dict[str, dict]:
    with open(path, newline="") as f:
        return {row["name"]: row for row in csv.DictReader(f)}


def _had_events(folder: Path) -> bool:
    results = json.loads((folder / "results.json").read_text())
    return bool(results["extra_data"].get("grader_events"))


if __name__ == "__main__":
    main()
