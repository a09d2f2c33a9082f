"""The premises of graded tests, checked here rather than inside them.

A graded test judges the student alone: were one of its own design assumptions to fail (inputs
that do not reach the edge case they are meant to, an argmax the oracle can barely tell), the
suite is wrong, and it must fail here instead of costing a student a point.
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.graded import oracles
from tests.graded import part7_setup as part7
from tests.graded import test_part1_attention as part1


def test_large_logits_case_reaches_logits_near_1000():
    """test_scaled_dot_product_attention_large_logits is about overflow: its scaled logits
    must be large enough to overflow exp without the max subtraction."""
    q, k, _, _ = part1.large_logits_case()
    scaled = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    assert scaled.abs().max() > 800


@pytest.mark.parametrize(
    ("seed", "max_len", "prompt", "n_new", "pad_bias"),
    [
        (760, 32, [3, 1, 4], 5, None),  # test_generate_greedy_cache_matches_no_cache
        (770, 16, [5, 2], 6, 30.0),  # test_generate_output_contract
        (790, 8, [4, 2], 6, None),  # test_generate_errors
    ],
)
def test_greedy_decoding_of_the_graded_models_has_no_near_ties(
    seed, max_len, prompt, n_new, pad_bias
):
    """Greedy ids are compared exactly: at every step the oracle's two best logits (PAD_ID
    excluded) must differ by far more than rounding, so any correct style picks the same id."""
    shapes = part7.lm_shapes(part7.V, part7.D, part7.LAYERS, part7.FF, max_len)
    state = part7.lm_state(shapes, seed)
    if pad_bias is not None:
        state["head.bias"][part7.PAD] = pad_bias
    ids = list(prompt)
    for step in range(n_new):
        idx = torch.tensor([ids])
        logits = oracles.oracle_logits(state, idx, part7.H)[0, -1]
        logits[part7.PAD] = -math.inf
        top2 = logits.topk(2).values
        assert top2[0] - top2[1] > 1e-6, f"near-tie at step {step} after {ids}"
        ids.append(int(logits.argmax()))
