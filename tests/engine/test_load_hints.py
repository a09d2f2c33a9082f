"""A module whose weights fail to load by SPEC.md's names gets the mistake the grader sees for
itself (``tests/graded/modules.py``): a weight kept as a plain tensor, a size hard-coded to
128. Each edit below is the reference's with that one mistake."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.sources.runner import run_suite
from tests.graded.compare import LIKELY

SOLUTIONS = Path(__file__).resolve().parents[2] / "solutions"

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
}


@pytest.mark.parametrize("case", CASES)
def test_a_failed_load_names_the_mistake_the_grader_sees(tmp_path, case):
    file, old, new, tests, named = CASES[case]
    shutil.copytree(SOLUTIONS, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "transformer_hw" / file
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1
    path.write_text(text.replace(old, new), encoding="utf-8")
    results, _ = run_suite(tmp_path, ["-k", tests], [])
    failed = [r for r in results if not r.passed]
    assert failed
    for result in failed:
        hints = [line for line in result.message.splitlines() if LIKELY in line]
        assert any(named in line for line in hints), (result.name, result.message)
