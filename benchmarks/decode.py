"""How much the KV cache speeds up decoding: the reference ``CharLM`` generating greedily.

Each length is generated with ``use_cache=True`` and ``use_cache=False`` from the same prompt
and weights; the two outputs must be identical (the cache may change the cost, never the text).
Without the cache every step re-runs the whole prefix, so its cost per token grows with the
length; with it each step feeds one token, so the speedup grows with the length too.

    python benchmarks/decode.py [--device cpu|cuda] [--repeats 3] [--threads N]

Prints a table on stderr and one JSON line on stdout: per-token milliseconds for each length
with and without the cache (medians of ``--repeats`` runs), ``speedup_at_512`` and the load
average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
LENGTHS = (64, 256, 512)
PROMPT = "anna"


def load_reference():
    """The reference ``charlm`` module (``solutions/`` is importable as ``transformer_hw``)."""
    sys.path.insert(0, str(REPO / "solutions"))
    from transformer_hw import charlm

    return charlm


def per_token_ms(charlm, model, prompt, tokens: int, use_cache: bool, sync) -> tuple:
    """Milliseconds per new token of one greedy generation, and the ids it produced."""
    sync()
    start = time.perf_counter()
    ids = charlm.generate(model, prompt, tokens, greedy=True, use_cache=use_cache)
    sync()
    return 1000 * (time.perf_counter() - start) / tokens, ids.cpu()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (default 1: steadier)"
    )
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no CUDA device")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None

    charlm = load_reference()
    text = (REPO / "data" / "names.txt").read_text(encoding="utf-8")
    tokenizer = charlm.CharTokenizer(text)
    torch.manual_seed(0)
    # The assignment's model (CharLM's defaults), long enough for the longest generation.
    model = charlm.CharLM(tokenizer.vocab_size, max_len=len(PROMPT) + max(LENGTHS)).to(
        device
    )
    prompt = torch.tensor(tokenizer.encode(PROMPT), dtype=torch.long, device=device)
    per_token_ms(charlm, model, prompt, 8, True, sync)  # warm-up: kernels, allocator
    per_token_ms(charlm, model, prompt, 8, False, sync)

    figures: dict[str, float] = {}
    for tokens in LENGTHS:
        outputs = {}
        for use_cache, key in ((True, "cached"), (False, "uncached")):
            runs = []
            for _ in range(args.repeats):
                ms, outputs[key] = per_token_ms(
                    charlm, model, prompt, tokens, use_cache, sync
                )
                runs.append(ms)
            figures[f"{key}_ms_per_token_{tokens}"] = round(statistics.median(runs), 3)
        if not torch.equal(outputs["cached"], outputs["uncached"]):
            print(
                f"the reference decodes differently with and without the cache ({tokens} tokens)",
                file=sys.stderr,
            )
            return 1
        print(
            f"{tokens:4d} tokens: {figures[f'cached_ms_per_token_{tokens}']:8.3f} ms/token "
            f"cached, {figures[f'uncached_ms_per_token_{tokens}']:8.3f} uncached",
            file=sys.stderr,
        )
    longest = max(LENGTHS)
    speedup = (
        figures[f"uncached_ms_per_token_{longest}"]
        / figures[f"cached_ms_per_token_{longest}"]
    )
    line = {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        **figures,
        "speedup_at_512": round(speedup, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
