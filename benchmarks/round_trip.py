"""What one request costs the sandbox: the same calls isolated and in-process, and the host's own
price of a switch between two processes.

``sandbox_overhead`` (``benchmarks/grading.py``) sums a fixed price per request over the suite's
several hundred requests. This prints that price directly, on the reference: the median
microseconds per request of a call that carries no tensors in (``masks.causal_mask``) and of one
that carries three and returns two (``attention.scaled_dot_product_attention``), and of four
``apply_rope`` calls made as four requests and as one (what batching requests would save), each
through an ``IsolatedSubmission`` and an ``InProcessSubmission``; and the same attention twice
in a row inside one request of the worker (the first right after a switch, the second on warm
caches). The two single calls are timed again with the grading side evicting its caches before
each request, as a test's own work (hypothesis, the expected values) does between requests in the
suite: what a request costs there. Then a one-byte ping-pong between two bare processes, on one
CPU and on two: what the host charges for the switch alone, without Python's or torch's working
sets.

    python benchmarks/round_trip.py [--requests 1000]

Prints one JSON line (microseconds) with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy
import torch

from autograder.facts.points import PACKAGE
from autograder.sandbox.client import IsolatedSubmission
from autograder.sandbox.executor import InProcessSubmission
from autograder.sources.release import SOLUTIONS

SDPA = "attention.scaled_dot_product_attention"
#: The kinds timed both in a loop and after an eviction, whose extra per request is reported.
SINGLE_CALLS = ("mask", "attention")
#: Appended to the reference's masks.py in a copy: the attention twice in one request, timed;
#: and four ``apply_rope`` calls in one request, what a batch of requests would cost.
HELPERS = """

def _twice(x):
    import time
    from transformer_hw.attention import scaled_dot_product_attention as attend
    start = time.perf_counter()
    attend(x, x, x)
    middle = time.perf_counter()
    attend(x, x, x)
    return (middle - start) * 1e6, (time.perf_counter() - middle) * 1e6


def _four(q, k, p, r):
    from transformer_hw.rope import apply_rope
    return [apply_rope(x, at).clone() for at in (p, r) for x in (q, k)]
"""


#: What the grading side touches between two timed requests "after eviction": more than a CPU's
#: 4 MiB of L2 cache in data, and Python objects spread over the heap.
_EVICT_BYTES = numpy.zeros(16 << 20, dtype=numpy.uint8)
_EVICT_OBJECTS = [{"n": n, "s": str(n)} for n in range(50_000)]


def evict() -> None:
    """Stand in for a test's own work between two requests: it leaves the caches cold."""
    _EVICT_BYTES[::64] += 1
    sum(o["n"] for o in _EVICT_OBJECTS[::5])


def per_request(submission, requests: int) -> dict[str, float]:
    """Median microseconds per request of each kind, and of the attention inside a request."""
    x = torch.randn(2, 4, 8, 16)
    q, k = torch.randn(2, 5, 6), torch.randn(2, 5, 6)
    p = torch.tensor([0, 3, 1, 7, 2])
    r = p + 11  # made once: the timed requests do no torch work of their own
    kinds = {
        "mask": lambda: submission.call("masks.causal_mask", 3),
        "attention": lambda: submission.call(SDPA, x, x, x),
        "four_ropes": lambda: [
            submission.call("rope.apply_rope", y, at) for at in (p, r) for y in (q, k)
        ],
        "four_ropes_in_one_request": lambda: submission.call("masks._four", q, k, p, r),
    }
    figures = {}
    for kind, request in kinds.items():
        figures[kind] = _median_us(request, requests)
    for kind in SINGLE_CALLS:
        # A quarter as many: each eviction takes a few milliseconds.
        figures[f"{kind}_after_eviction"] = _median_us(
            kinds[kind], max(requests // 4, 1), evict
        )
    inside = [submission.call("masks._twice", x) for _ in range(requests)]
    figures["attention_first_inside"] = statistics.median(f for f, _ in inside)
    figures["attention_second_inside"] = statistics.median(s for _, s in inside)
    return figures


def _median_us(request, requests: int, before=None) -> float:
    """Median microseconds of ``request`` over ``requests`` timed calls, ``before`` (untimed)
    ahead of each."""
    request()
    times = []
    for _ in range(requests):
        if before is not None:
            before()
        start = time.perf_counter()
        request()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def ping_pong(same_cpu: bool, rounds: int = 20_000) -> float | None:
    """Microseconds per one-byte round trip between this process and a forked one; ``None``
    where there are not two CPUs to choose from."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    mine, theirs = allowed[0], allowed[0] if same_cpu else allowed[1]
    ours, peer = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # echo until the parent closes; never return into the parent's code
        try:
            ours.close()
            os.sched_setaffinity(0, {theirs})
            while data := peer.recv(64):
                peer.send(data)
        finally:
            os._exit(0)
    peer.close()
    os.sched_setaffinity(0, {mine})
    try:
        start = time.perf_counter()
        for _ in range(rounds):
            ours.send(b"x")
            ours.recv(64)
        return (time.perf_counter() - start) / rounds * 1e6
    finally:
        ours.close()
        os.waitpid(pid, 0)
        os.sched_setaffinity(0, set(allowed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    torch.set_num_threads(1)  # as in the sandbox's worker
    line = {}
    with tempfile.TemporaryDirectory(prefix="round-trip-") as name:
        root = Path(name)
        shutil.copytree(SOLUTIONS, root / PACKAGE)
        with open(root / PACKAGE / "masks.py", "a", encoding="utf-8") as f:
            f.write(HELPERS)
        for label, kind in (
            ("isolated", IsolatedSubmission),
            ("in_process", InProcessSubmission),
        ):
            with kind(root) as submission:
                figures = per_request(submission, args.requests)
            line |= {f"{label}_{k}_us": round(v, 1) for k, v in figures.items()}
    for kind in (*SINGLE_CALLS, *(f"{k}_after_eviction" for k in SINGLE_CALLS)):
        extra = line[f"isolated_{kind}_us"] - line[f"in_process_{kind}_us"]
        line[f"extra_per_{kind}_request_us"] = round(extra, 1)
    saved = (
        line["isolated_four_ropes_us"] - line["isolated_four_ropes_in_one_request_us"]
    )
    line["saved_per_request_merged_us"] = round(saved / 3, 1)
    for label, same in (("one_cpu", True), ("two_cpus", False)):
        us = ping_pong(same)
        line[f"process_ping_pong_{label}_us"] = None if us is None else round(us, 1)
    line["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
