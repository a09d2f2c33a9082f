"""Where the student's code fails with an error that says nothing of its cause, the suite looks
for the cause itself and names the mistake: a weight kept as a plain tensor, a size hard-coded
to 128 (where loading the weights by SPEC.md's names fails: ``tests/graded/modules.py``), a
cache whose buffers ignore the dtype given (``tests/graded/test_part6_gqa.py``). Each edit
below is the reference's with that one mistake."""

from __future__ import annotations

import pytest

from autograder.sources.release import SOLUTIONS
from autograder.sources.runner import run_suite
from autograder.sources.zoo.mutants import Mutant, apply
from tests.graded.compare import LIKELY

CASES = {
    "plain tensor": (
        "norm.py",
        "        self.weight = nn.Parameter(torch.ones(d))\n        self.bias",
        "        self.weight = torch.ones(d)\n        self.bias",
        "test_layer_norm_matches_torch or test_layer_norm_float32 or test_pre_norm_block",
        "weight kept as a buffer or a plain tensor; make it an nn.Parameter",
    ),
    "128": (
        "charlm.py",
        "        self.pos_emb = nn.Embedding(max_len, d_model)\n",
        "        self.pos_emb = nn.Embedding(128, d_model)\n",
        "test_charlm_forward_matches_oracle",
        "a size hard-coded to 128",
    ),
    "cache dtype": (
        "gqa.py",
        "device=device, dtype=dtype\n        )\n        self.v = torch.zeros_like(self.k)",
        "device=device\n        )\n        self.v = torch.zeros_like(self.k)",
        "test_gqa_cached_chunks or test_gqa_rope_base or test_kv_cache_errors",
        "the cache's dtype follows torch.get_default_dtype() instead of the dtype",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_mistake_behind_an_uninformative_error_is_named(tmp_path, case):
    file, old, new, tests, named = CASES[case]
    edited = apply(Mutant(case, file, ((old, new),), 0, ""), SOLUTIONS, tmp_path)
    results, _ = run_suite(edited, ["-k", tests], [])
    failed = [r for r in results if not r.passed]
    assert failed
    for result in failed:
        hints = [line for line in result.message.splitlines() if LIKELY in line]
        assert any(named in line for line in hints), (result.name, result.message)
