"""How fast ``autograder grade`` grades a class, against the naive loop and the bare suite.

The batch is weighted like a class: at least half correct solutions (the reference and the
alternative-style example, as folders, zips and bare module files), the rest bug-zoo mutants
and broken uploads (an archive that escapes its folder, a syntax error, a missing module,
non-UTF-8 text), repeated up to ``--submissions``. Three figures, the first two the
median of ``--runs`` runs:

- ``autograder grade BATCH --jobs J`` (sandboxed, the suite run in J grading processes);
- the naive loop: one ``pytest tests/graded --submission X`` process per submission (student code
  in-process, no sandbox), J of them at a time, so the ratio is not flattered by parallelism;
- the graded suite on the reference in this warm process, in-process, imports and collection
  excluded (the cost of the tests themselves: ``arithmetic_floor_minutes_for_300`` is 300 of it
  on the jobs' cores, which no grader of this suite can beat), and right after it the same
  reference graded by ``grade_many(jobs=1)`` in this process, ``--pairs`` times: the median
  of the pairs' quotients is ``sandbox_overhead`` (on a shared host one pair's quotient can be half off
  either way, so it takes many; ``sandbox_overhead_interval`` says where the median lies with
  95 % confidence).

    python benchmarks/grading.py [--submissions 60] [--jobs 2] [--runs 3] [--pairs 40]

Prints a table per kind of submission on stderr and one JSON line on stdout. The machine's load
average is part of the line: on a shared machine, compare figures taken under similar load.

``--profile`` instead grades the batch once and says where its time went (``autograder.facts.stages``):
per stage, wall and CPU seconds summed over the batch, and the mean per correct and per failing
submission (the sandbox's CPU, its template's and workers', counted in the stages that wait on
it). ``--mostly-wrong`` makes the batch nine tenths zoo mutants and broken uploads.

    python benchmarks/grading.py --profile [--mostly-wrong] [--submissions 60] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.facts import stages
from autograder.facts.points import PACKAGE
from autograder.grading import grade
from autograder.outputs import report
from autograder.sources import intake
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, apply

EXAMPLES = REPO / "examples" / "submissions"
GRADED_DIR = REPO / "tests" / "graded"


# The batch ---------------------------------------------------------------------------------------


def _as_folder(source: Path, target: Path) -> Path:
    shutil.copytree(source, target / PACKAGE)
    return target


def _as_zip(source: Path, target: Path) -> Path:
    zip_path = target.with_suffix(".zip")
    with zipfile.ZipFile(zip_path, "w") as z:
        for f in sorted(source.glob("*.py")):
            z.write(f, f"{target.name}/{PACKAGE}/{f.name}")
    return zip_path


def _as_bare_files(source: Path, target: Path) -> Path:
    """The module files at the top level, as Gradescope uploads them."""
    target.mkdir(parents=True)
    for f in source.glob("*.py"):
        shutil.copyfile(f, target / f.name)
    return target


def _broken(edit):
    """A broken upload: the reference package with one file damaged by ``edit``."""

    def make(target: Path) -> Path:
        _as_folder(SOLUTIONS, target)
        edit(target / PACKAGE)
        return target

    return make


def _syntax_error(package: Path) -> None:
    (package / "heads.py").write_text("def split_heads(x, n_heads)\n    return x\n")


def _missing_module(package: Path) -> None:
    (package / "charlm.py").unlink()


def _not_utf8(package: Path) -> None:
    path = package / "rope.py"
    path.write_bytes(path.read_bytes() + "# r\xe9sum\xe9\n".encode("latin-1"))


def _correct_styles(alternative: Path) -> list:
    """The reference and the alternative-style solution, as a folder, a zip and bare files."""
    return [
        ("reference", lambda t: _as_folder(SOLUTIONS, t)),
        ("alternative", lambda t: _as_folder(alternative, t)),
        ("reference-zip", lambda t: _as_zip(SOLUTIONS, t)),
        ("alternative-bare", lambda t: _as_bare_files(alternative, t)),
    ]


def _mutant_kinds() -> list:
    """Every mutant of the bug zoo (the single-bug examples of the main job are among them)."""
    return [(f"zoo-{m.name}", lambda t, m=m: apply(m, SOLUTIONS, t)) for m in CATALOGUE]


def _broken_kinds() -> list:
    escape = EXAMPLES / "frank_broken.zip"
    return [
        (
            "zip-escapes",
            lambda t: Path(shutil.copyfile(escape, t.with_suffix(".zip"))),
        ),
        ("syntax-error", _broken(_syntax_error)),
        ("missing-module", _broken(_missing_module)),
        ("not-utf8", _broken(_not_utf8)),
    ]


def build_batch(n: int, batch: Path, mostly_wrong: bool = False) -> dict[str, str]:
    """Write ``n`` submissions into ``batch``; their names and kinds (correct/mutant/broken):
    half correct, or with ``mostly_wrong`` a tenth."""
    alternative = EXAMPLES / "alice_alternative_style" / PACKAGE
    n_correct = max(1, n // 10) if mostly_wrong else (n + 1) // 2
    n_broken = max(1, n // 10)
    counts = {
        "correct": n_correct,
        "broken": n_broken,
        "mutant": n - n_correct - n_broken,
    }
    makers = {
        "correct": _correct_styles(alternative),
        "mutant": _mutant_kinds(),
        "broken": _broken_kinds(),
    }
    kinds: dict[str, str] = {}
    batch.mkdir(parents=True)
    for kind, count in counts.items():
        for i in range(count):
            label, make = makers[kind][i % len(makers[kind])]
            name = f"{kind}-{i:03d}-{label}"
            make(batch / name)
            kinds[name] = kind
    return kinds


# The three ways to grade it ------------------------------------------------------------------------


def run_ours(batch: Path, out: Path, jobs: int) -> tuple[float, dict[str, float]]:
    """Wall time of ``autograder grade``, and each submission's time in its grading process."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "autograder", "grade", str(batch)]
    command += ["--out", str(out), "--jobs", str(jobs)]
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    each = {}
    for name, _ in intake.find([batch]):
        results = json.loads((out / name / report.RESULTS).read_text(encoding="utf-8"))
        each[name] = results["execution_time"]
    return wall, each


def run_naive(
    staged: dict[str, Path], jobs: int
) -> tuple[float, float, dict[str, float]]:
    """Wall time and CPU seconds of one in-process ``pytest`` per submission, ``jobs`` at a
    time, and each submission's wall time."""

    def one(name: str) -> tuple[str, float]:
        command = [sys.executable, "-m", "pytest", str(GRADED_DIR), "-q"]
        command += ["-p", "no:cacheprovider", "--submission", str(staged[name])]
        start = time.perf_counter()
        subprocess.run(
            command,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        return name, time.perf_counter() - start

    start, cpu = time.perf_counter(), _children_cpu()
    with ThreadPoolExecutor(jobs) as pool:
        each = dict(pool.map(one, staged))
    return time.perf_counter() - start, _children_cpu() - cpu, each


def _children_cpu() -> float:
    """CPU seconds of this process's finished, waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu() -> float:
    """CPU seconds of this process and all its descendants, with what they reaped: the grading
    process, the sandbox's boundary and template, and every worker the template waited for
    (Linux ``/proc``; a live process's reaped children are counted once, by their parent)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # after the name: state, ppid, ...; utime, stime, cutime, cstime at 11..14
            parent[int(entry.name)] = int(fields[1])
            cpu[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick
    total = time.process_time() + _children_cpu()
    mine, new = {os.getpid()}, {os.getpid()}
    while new:  # each round adds the next generation
        new = {p for p, pp in parent.items() if pp in new}
        mine |= new
    return total + sum(cpu[p] for p in mine if p != os.getpid())


class _SuiteTimer:
    """Wall and CPU seconds from the end of collection to the end of the session: the tests."""

    def pytest_collection_finish(self, session):
        self.start, self.cpu_start = time.perf_counter(), time.process_time()

    def pytest_sessionfinish(self, session, exitstatus):
        self.seconds = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu_start
        self.status = exitstatus


def _suite_once(root: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the graded suite's tests on ``root``, in this process."""
    import pytest

    timer = _SuiteTimer()
    argv = [str(GRADED_DIR), "-q", "--tb=no", "-p", "no:cacheprovider"]
    argv += ["--rootdir", str(REPO), "--submission", str(root)]
    with open(os.devnull, "w") as null:
        saved = sys.stdout
        sys.stdout = null
        try:
            pytest.main(argv, plugins=[timer])
        finally:
            sys.stdout = saved
    if timer.status != 0:
        raise RuntimeError(
            f"the reference failed the suite in-process ({timer.status})"
        )
    return timer.seconds, timer.cpu


def _graded_once(root: Path, settings: grade.Settings) -> tuple[float, float]:
    """Wall and CPU seconds of one submission graded by ``grade_many(jobs=1)`` in this process
    (CPU: the grading side, the sandbox's template and its worker), timed once the grading
    session is warm: the first submission of the batch starts it."""
    times = []
    start, cpu_start = time.perf_counter(), _tree_cpu()
    for name, graded in grade.grade_many(
        [("warm-up", root), ("timed", root)], settings, 1
    ):
        if graded.failed:
            raise RuntimeError(f"{name} was not graded: {graded.detail}")
        time.sleep(0.2)  # the template reaps the worker
        times.append((time.perf_counter() - start - 0.2, _tree_cpu() - cpu_start))
        start, cpu_start = time.perf_counter(), _tree_cpu()
    return times[1]


def side_by_side(root: Path, pairs: int, tmp: Path) -> list[tuple[float, ...]]:
    """``(suite, suite_cpu, graded, graded_cpu)`` of each pair: the graded suite's tests on the
    reference in this warm process (imports and collection excluded), then the reference
    graded by ``grade_many(jobs=1)``. Taken one right after the other, the two terms of a pair
    see the same load, so their quotient drifts far less than either."""
    settings = grade.Settings(hidden_paths=(str(tmp),))
    _suite_once(root)  # imports and first-use costs
    return [(*_suite_once(root), *_graded_once(root, settings)) for _ in range(pairs)]


#: Stages a grading process goes through once, whatever the number of submissions: summed over
#: the batch, left out of the means per submission.
ONCE_PER_PROCESS = ("the template's start", "the suite's collection")


def profile(batch: Path, out: Path, jobs: int, kinds: dict[str, str]) -> dict:
    """Grade ``batch`` once with ``autograder.facts.stages`` on: per stage, wall and CPU seconds over
    the batch and per correct and per failing submission (mutants and broken uploads)."""
    records = out.parent / "profile"
    records.mkdir()
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "autograder", "grade", str(batch)]
    command += ["--out", str(out), "--jobs", str(jobs)]
    start = time.perf_counter()
    subprocess.run(
        command,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        check=True,
        env={**os.environ, stages.ENV: str(records)},
    )
    wall = time.perf_counter() - start
    groups = {"correct": "correct", "mutant": "failing", "broken": "failing"}
    count = {
        g: sum(groups[k] == g for k in kinds.values()) for g in ("correct", "failing")
    }
    table: dict[str, dict] = {}
    for record in stages.read(records):
        group = groups[kinds[record["name"]]] if record["name"] in kinds else ""
        for stage, (seconds, cpu, times) in record["stages"].items():
            row = table.setdefault(stage, {"wall": 0.0, "cpu": 0.0, "times": 0})
            row["wall"] += seconds
            row["cpu"] += cpu
            row["times"] += times
            if group and stage not in ONCE_PER_PROCESS:
                row[f"{group}_wall"] = (
                    row.get(f"{group}_wall", 0.0) + seconds / count[group]
                )
                row[f"{group}_cpu"] = row.get(f"{group}_cpu", 0.0) + cpu / count[group]
    total_cpu = sum(row["cpu"] for row in table.values())
    for row in table.values():
        row["cpu_share"] = row["cpu"] / total_cpu
    rounded = {
        stage: {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
        for stage, row in sorted(table.items(), key=lambda item: -item[1]["cpu"])
    }
    return {
        "wall_seconds": round(wall, 2),
        "stages_cpu_seconds": round(total_cpu, 2),
        "count": count,
        "stages": rounded,
    }


def _print_profile(found: dict) -> None:
    """The profile as a table on stderr."""
    print(
        f"{'stage':26s} {'wall':>7s} {'CPU':>7s} {'share':>6s} {'times':>6s} "
        f"{'correct wall/CPU':>17s} {'failing wall/CPU':>17s}",
        file=sys.stderr,
    )
    for stage, row in found["stages"].items():
        each = [
            f"{row.get(g + '_wall', 0):7.3f} {row.get(g + '_cpu', 0):7.3f}"
            if stage not in ONCE_PER_PROCESS
            else f"{'':15s}"
            for g in ("correct", "failing")
        ]
        print(
            f"{stage:26s} {row['wall']:7.2f} {row['cpu']:7.2f} {row['cpu_share']:6.1%} "
            f"{row['times']:6d}   {each[0]}   {each[1]}",
            file=sys.stderr,
        )


def _median_interval(
    values: list[float], confidence: float = 0.95
) -> list[float] | None:
    """A distribution-free interval for the median: the k-th smallest and the k-th largest value,
    k the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2, so that it holds the
    true median with at least that confidence whatever the spread (order statistics). ``None``
    below six values, where no such interval exists at 95 %."""
    n, ordered = len(values), sorted(values)
    k, below = 0, 0.0
    while below + math.comb(n, k) / 2**n <= (1 - confidence) / 2:
        below += math.comb(n, k) / 2**n
        k += 1
    return [round(ordered[k - 1], 2), round(ordered[n - k], 2)] if k else None


def _quartiles(values: list[float]) -> list[float]:
    """The first and third quartiles: how far one pair's quotient strays."""
    if len(values) < 2:
        return [round(values[0], 2)] * 2
    q1, _, q3 = statistics.quantiles(values, n=4)
    return [round(q1, 2), round(q3, 2)]


def _medians_by_kind(runs: list[dict[str, float]], kinds: dict[str, str]) -> dict:
    """Per kind: the median over submissions of each submission's median over runs."""
    each = {name: statistics.median(r[name] for r in runs) for name in kinds}
    return {
        kind: round(
            statistics.median(s for n, s in each.items() if kinds[n] == kind), 2
        )
        for kind in sorted(set(kinds.values()))
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=60)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="median of this many runs")
    parser.add_argument(
        "--pairs",
        type=int,
        default=40,
        help="sandbox_overhead: median of this many pairs",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="grade the batch once and print where its time goes, stage by stage",
    )
    parser.add_argument(
        "--mostly-wrong",
        action="store_true",
        help="a batch nine tenths zoo mutants and broken uploads",
    )
    args = parser.parse_args()
    if args.submissions < 4:
        parser.error("--submissions must be at least 4")
    if args.runs < 1 or args.pairs < 1:
        parser.error("--runs and --pairs must be at least 1")
    import torch

    torch.set_num_threads(1)  # as in the sandbox's worker, for the in-process suite
    if args.profile:
        with tempfile.TemporaryDirectory(prefix="grading-profile-") as name:
            tmp = Path(name)
            kinds = build_batch(args.submissions, tmp / "batch", args.mostly_wrong)
            load = os.getloadavg()[0]
            found = profile(tmp / "batch", tmp / "grades", args.jobs, kinds)
        _print_profile(found)
        found["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
        found |= {"submissions": args.submissions, "jobs": args.jobs}
        print(json.dumps(found))
        return 0
    with tempfile.TemporaryDirectory(prefix="grading-benchmark-") as name:
        tmp = Path(name)
        kinds = build_batch(args.submissions, tmp / "batch", args.mostly_wrong)
        found = intake.find([tmp / "batch"])
        staged = {n: intake.stage(n, s, tmp / "staged" / n).root for n, s in found}
        ours, naive, naive_cpu, ours_each, naive_each = [], [], [], [], []
        for run in range(args.runs):
            wall, each = run_ours(tmp / "batch", tmp / "grades", args.jobs)
            ours.append(wall)
            ours_each.append(each)
            wall, cpu, each = run_naive(staged, args.jobs)
            naive.append(wall)
            naive_cpu.append(cpu)
            naive_each.append(each)
            print(
                f"run {run + 1}: ours {ours[-1]:.1f} s, naive {naive[-1]:.1f} s, "
                f"load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
            )
        reference = staged[next(n for n in kinds if n.endswith("-reference"))]
        pairs = side_by_side(reference, args.pairs, tmp)
    suite, suite_cpu, one_job, one_job_cpu = map(statistics.median, zip(*pairs))
    n = args.submissions
    per_submission = statistics.median(ours) / n
    naive_per_submission = statistics.median(naive) / n
    per_kind = {
        "ours_seconds_in_process": _medians_by_kind(ours_each, kinds),
        "naive_seconds_each": _medians_by_kind(naive_each, kinds),
        "count": {
            k: list(kinds.values()).count(k) for k in sorted(set(kinds.values()))
        },
    }
    line = {
        "submissions": n,
        "jobs": args.jobs,
        "seconds_per_submission": round(per_submission, 2),
        "naive_seconds_per_submission": round(naive_per_submission, 2),
        "ratio": round(per_submission / naive_per_submission, 2),
        "suite_seconds_in_process": round(suite, 2),
        "sandbox_overhead": round(statistics.median(g / s for s, _, g, _ in pairs), 2),
        "sandbox_overhead_quartiles": _quartiles([g / s for s, _, g, _ in pairs]),
        "sandbox_overhead_interval": _median_interval([g / s for s, _, g, _ in pairs]),
        "projected_minutes_for_300": round(per_submission * 300 / 60, 1),
        # The graded suite's own work (its tests and the reference's code, in-process, no
        # sandbox) on the cores the jobs use: no grader of this suite can go below it.
        "arithmetic_floor_minutes_for_300": round(
            suite_cpu * 300 / 60 / min(args.jobs, os.cpu_count() or 1), 1
        ),
        # What a single-bug submission costs against a correct one, each in its process.
        "mutant_over_correct": round(
            per_kind["ours_seconds_in_process"]["mutant"]
            / per_kind["ours_seconds_in_process"]["correct"],
            2,
        ),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        # Load-independent figures: CPU seconds, which a busy machine stretches far less.
        "one_job_seconds_per_submission": round(one_job, 2),
        "one_job_cpu_seconds_per_submission": round(one_job_cpu, 2),
        "suite_cpu_seconds_in_process": round(suite_cpu, 2),
        "sandbox_overhead_cpu": round(
            statistics.median(g / s for _, s, _, g in pairs), 2
        ),
        "naive_cpu_seconds_per_submission": round(statistics.median(naive_cpu) / n, 2),
        "per_kind": per_kind,
        "cpus": os.cpu_count(),
    }
    for kind, count in per_kind["count"].items():
        print(
            f"{kind:8s} x{count:3d}: ours {per_kind['ours_seconds_in_process'][kind]:5.2f} s "
            f"in its grading process, naive {per_kind['naive_seconds_each'][kind]:5.2f} s "
            "per pytest",
            file=sys.stderr,
        )
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
