"""Inputs for the graded suite: seeded tensors and hypothesis strategies.

Tensors are drawn on the CPU from a seeded ``torch.Generator`` and then moved to the device, so
a test sees the same numbers on every run and on every device. Property tests use the
``grading`` profile (registered in ``autograder/grading/plugin.py``: derandomized, no deadline) with a small
fixed ``max_examples`` each, so a grade never changes between runs.
"""

from __future__ import annotations

import torch
from hypothesis import settings
from hypothesis import strategies as st

GRADED_DTYPES = (torch.float32, torch.float64)

seeds = st.integers(min_value=0, max_value=2**31 - 1)


def sizes(low: int = 1, high: int = 4) -> st.SearchStrategy[int]:
    return st.integers(min_value=low, max_value=high)


def distinct_positions(high: int, min_size: int = 1) -> st.SearchStrategy[list[int]]:
    """Up to four distinct token positions in ``[0, high]``, unsorted and with gaps."""
    return st.lists(st.integers(0, high), min_size=min_size, max_size=4, unique=True)


def examples(n: int) -> settings:
    """A property test's fixed budget of examples."""
    return settings(max_examples=n)


def randn(
    *shape: int, seed: int, dtype=torch.float64, device="cpu", scale: float = 1.0
):
    """Standard normal values times ``scale``, identical for a seed on every device."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(
        device, dtype
    )


def randint(low: int, high: int, *shape: int, seed: int, device="cpu") -> torch.Tensor:
    """Integers in ``[low, high)`` as a LongTensor, identical for a seed on every device."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=gen).to(device)


def random_state(
    shapes: dict[str, torch.Size], seed: int, dtype, device, scale: float = 0.5
):
    """A state dict with the given parameter shapes, for loading into a student module."""
    return {
        name: randn(*shape, seed=seed + i, dtype=dtype, device=device, scale=scale)
        for i, (name, shape) in enumerate(sorted(shapes.items()))
    }
