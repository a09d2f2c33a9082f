"""The static forbidden-call scan: library calls and the ways around naming them are found, also
through aliases and other student files; the student's own functions, comments, strings and
dynamic lookups that resolve to something harmless are not."""

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
        "f = torch._C._VariableFunctions.softmax",
        "f = vars(torch)['softmax']",
        "f = torch.__dict__[name]",
        "self = torch\ny = self.softmax(x, -1)",
        "import transformer_hw.attention as torch\ny = torch.softmax(x, -1)",
        "if False:\n    from transformer_hw import attention as F\ny = F.softmax(x, -1)",
        (
            "class A:\n    def __init__(self):\n        self.f = F\n    def g(self, x):\n"
            "        return self.f.softmax(x, -1)"
        ),
        "t = __import__('torch')\ny = t.softmax(x, -1)",
        "t = __import__(name)",
        "import importlib\nm = importlib.import_module('torch.nn.functional')\ny = m.softmax(x)",
        "import importlib\nm = importlib.import_module(name)",
        "import sys\nm = sys.modules['torch'].softmax",
        "def f():\n    pass\ng = f.__globals__[name]",
        "c = torch.exp.__closure__",
        "c = cell.cell_contents",
        "c = torch.exp.__code__",
        "import sys\nw = sys.modules['autograder.tripwire']",
        "w = __import__('autograder.tripwire')",
        "f = F.__dict__['soft' + 'max']",
        "f = torch.softmax.__wrapped__",
        "f = eval('torch.soft' + 'max')",
        "from autograder import tripwire",
        # Scopes: a local alias, an enclosing function's, a global or nonlocal rebinding.
        "def f(x):\n    t = torch\n    return t.softmax(x, -1)",
        (
            "from transformer_hw import attention as a\ndef f(x):\n    a = torch\n"
            "    def g():\n        return a.softmax(x, -1)\n    return g()"
        ),
        (
            "from transformer_hw import attention as a\ndef f():\n    global a\n"
            "    a = torch\ndef g(x):\n    return a.softmax(x, -1)"
        ),
        (
            "from transformer_hw import attention as a\ndef f(x):\n    b = a\n"
            "    def g():\n        nonlocal b\n        b = torch\n    g()\n"
            "    return b.softmax(x, -1)"
        ),
        "class C:\n    a = torch\n    def g(self, x):\n        return self.a.softmax(x)",
        # A class tested against is named, never called, but only by the builtins.
        "def isinstance(a, b):\n    return b(4, 2)\nm = isinstance(x, nn.MultiheadAttention)",
        "ok = isinstance(nn.MultiheadAttention, type)",
        "ok = isinstance(x, [nn.MultiheadAttention][0])",
        "def f(m: nn.MultiheadAttention(4, 2)):\n    pass",
        "ok = type(m) == nn.MultiheadAttention(4, 2)",
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
        "warnings = __import__('warnings')\nwarnings.warn('careful')",
        "import importlib\nm = importlib.import_module('math')",
        "def f():\n    pass\ng = f.__globals__['torch']",
        "import sys\nm = sys.modules['torch'].exp",
        "import sys\nm = sys.modules['torch']",
        "f = getattr(torch, 'exp')",
        # A local name in one function is not the module name another function uses.
        (
            "from transformer_hw import attention\ndef f(q, k, v):\n"
            "    return attention.scaled_dot_product_attention(q, k, v)\n"
            "def g(x):\n    attention = x.softmax_like()\n    return attention"
        ),
        (
            "from transformer_hw import attention as a\nclass C:\n    a = torch\n"
            "    def g(self, x):\n        return a.softmax(x)"
        ),
        (
            "from transformer_hw import attention\ny = [attention for attention in xs]\n"
            "z = attention.softmax(x)"
        ),
        "ok = isinstance(m, nn.MultiheadAttention)",
        "ok = issubclass(C, (nn.Softmax, nn.Linear))",
        "ok = isinstance(m, ((nn.Softmax,), nn.Linear))",
        "ok = isinstance(m, Own | nn.MultiheadAttention)",
        "ok = type(m) is nn.MultiheadAttention",
        "match m:\n    case nn.MultiheadAttention():\n        pass",
        "def f(m: nn.MultiheadAttention) -> nn.Softmax:\n    pass",
        "layer: nn.MultiheadAttention = make()",
    ],
)
def test_own_code_comments_and_strings_are_not(line):
    assert scan_source("heads.py", HEADER + line + "\n") == []


def test_rules_follow_the_file():
    """rope.py forbids nothing; charlm.py may sample with a softmax but not normalize."""
    assert scan_source("rope.py", HEADER + "y = torch.softmax(x, -1)\n") == []
    assert scan_source("charlm.py", HEADER + "p = torch.softmax(x, -1)\n") == []
    assert scan_source("charlm.py", HEADER + "y = F.layer_norm(x, (4,))\n")


def test_a_name_bound_in_another_student_file_is_judged_where_it_is_used(tmp_path):
    """masks.py has no forbidden list, so an alias made there is charged to the file using it."""
    package = tmp_path / "transformer_hw"
    package.mkdir()
    (package / "masks.py").write_text(
        "import torch\nalias = torch.softmax\nhidden = getattr(torch, 'soft' + 'max')\n"
    )
    (package / "attention.py").write_text(
        "from transformer_hw import masks\nfrom transformer_hw.masks import hidden\n"
        "def softmax(x, dim=-1):\n    return masks.alias(x, dim)\n"
    )
    found = {(v.file, v.line, v.evasion) for v in scan_package(package)}
    assert found == {("attention.py", 2, True), ("attention.py", 4, False)}


def test_the_reference_is_clean():
    assert scan_package(SOLUTIONS) == []
