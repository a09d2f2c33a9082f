"""The static forbidden-call scan: library calls and the ways around naming them are found;
the student's own functions, comments and strings are not."""

from __future__ import annotations

import pytest

from autograder.forbidden import scan_package, scan_source
from autograder.release import SOLUTIONS

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


@pytest.mark.parametrize(
    "line",
    [
        "y = torch.softmax(x, -1)",
        "y = x.softmax(-1)",
        "y = F.log_softmax(x, -1)",
        "y = torch.logsumexp(x, -1)",
        "layer = nn.MultiheadAttention(4, 2)",
        "y = torch.ops.aten._softmax(x, -1, False)",
        "from torch.nn.functional import softmax",
        "f = getattr(torch, 'softmax')",
        "f = getattr(torch, 'soft' + 'max')",
        "f = getattr(x, name)",
        "f = torch._C._VariableFunctions",
        "f = F.__dict__['soft' + 'max']",
        "f = torch.softmax.__wrapped__",
        "f = eval('torch.soft' + 'max')",
        "import importlib",
        "from autograder import tripwire",
        "import sys\nm = sys.modules['torch']",
    ],
)
def test_forbidden_uses_are_found(line):
    found = scan_source("attention.py", HEADER + line + "\n")
    assert found and all(v.part == 1 for v in found), line


@pytest.mark.parametrize(
    "line",
    [
        "from transformer_hw.attention import softmax\ny = softmax(x)",
        "from transformer_hw import attention\ny = attention.scaled_dot_product_attention(q, k, v)",
        "y = self.softmax(x)",
        "w = getattr(self, name)",
        "model.eval()",
        "# torch.softmax would be forbidden here\nnote = 'F.softmax'",
    ],
)
def test_own_code_comments_and_strings_are_not(line):
    assert scan_source("heads.py", HEADER + line + "\n") == []


def test_rules_follow_the_file():
    """rope.py forbids nothing; charlm.py may sample with a softmax but not normalize."""
    assert scan_source("rope.py", HEADER + "y = torch.softmax(x, -1)\n") == []
    assert scan_source("charlm.py", HEADER + "p = torch.softmax(x, -1)\n") == []
    assert scan_source("charlm.py", HEADER + "y = F.layer_norm(x, (4,))\n")


def test_the_reference_is_clean():
    assert scan_package(SOLUTIONS) == []
