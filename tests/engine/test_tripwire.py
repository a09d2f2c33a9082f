"""The run-time watch charges every softmax, attention and normalization path in torch to the
student file that forbids it, also through library code and files without a list, and nothing
that a file may use.

The watch wraps torch for good, so the cases run in one child process of their own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: (student file, expression on x, a float tensor (2, 3, 4)) -> charged to that file or not.
CHARGED = [
    ("attention.py", "torch.softmax(x, -1)"),
    ("attention.py", "torch._softmax(x, -1, False)"),
    ("attention.py", "torch.nn.functional.softmax(x, -1)"),
    ("attention.py", "torch.nn.functional.log_softmax(x, -1)"),
    ("attention.py", "torch.nn.functional.softmin(-x, -1)"),
    ("attention.py", "x.softmax(-1)"),
    ("attention.py", "x.log_softmax(-1)"),
    ("attention.py", "x.logsumexp(-1)"),
    ("attention.py", "torch.logsumexp(x, -1)"),
    ("attention.py", "torch.special.softmax(x, -1)"),
    ("attention.py", "torch.nn.Softmax(-1)(x)"),
    ("attention.py", "torch.nn.LogSoftmax(-1)(x)"),
    ("attention.py", "torch.nn.functional.scaled_dot_product_attention(x, x, x)"),
    ("heads.py", "torch.nn.MultiheadAttention(4, 1, batch_first=True)(x, x, x)"),
    ("gqa.py", "torch.distributions.Categorical(logits=x).probs"),
    ("norm.py", "torch.nn.functional.layer_norm(x, (4,))"),
    ("norm.py", "torch.layer_norm(x, (4,))"),
    ("norm.py", "torch.nn.functional.rms_norm(x, (4,), eps=1e-6)"),
    ("norm.py", "torch.nn.functional.group_norm(x, 1)"),
    ("norm.py", "torch.nn.functional.batch_norm(x, None, None, training=True)"),
    ("norm.py", "torch.nn.functional.instance_norm(x)"),
    ("norm.py", "torch.nn.LayerNorm(4)(x)"),
    ("norm.py", "torch.nn.RMSNorm(4)(x)"),
    ("norm.py", "torch.nn.GroupNorm(1, 3)(x)"),
    ("norm.py", "torch.nn.BatchNorm1d(3)(x)"),
    ("norm.py", "torch.nn.InstanceNorm1d(3)(x)"),
    ("block.py", "torch.nn.TransformerEncoderLayer(4, 1, 8, batch_first=True)(x)"),
    ("charlm.py", "torch.nn.functional.layer_norm(x, (4,))"),
]
#: Allowed where they are: the char-LM samples and computes its loss with a softmax.
ALLOWED = [
    ("charlm.py", "torch.softmax(x, -1)"),
    ("charlm.py", "torch.distributions.Categorical(logits=x).sample()"),
    ("rope.py", "torch.softmax(x, -1)"),
    ("norm.py", "torch.softmax(x, -1)"),
]

SCRIPT = """
import importlib, json, sys, torch
from autograder import tripwire
tripwire.install()
root, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, root)
tripwire.watch(root + "/transformer_hw")
x = torch.randn(2, 3, 4)
out = []
for i, (filename, _) in enumerate(cases):
    module = importlib.import_module("transformer_hw." + filename[:-3])
    del tripwire.found[:]
    getattr(module, f"case{i}")(x)
    out.append(sorted({f for f, _, _ in tripwire.found}))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def charged(tmp_path_factory) -> dict[tuple[str, str], list[str]]:
    """Each case -> the student files its call was charged to."""
    cases = CHARGED + ALLOWED
    package = tmp_path_factory.mktemp("submission") / "transformer_hw"
    package.mkdir()
    (package / "__init__.py").write_text("")
    sources: dict[str, str] = {}
    for i, (filename, expression) in enumerate(cases):
        sources.setdefault(filename, "import torch\n")
        sources[filename] += f"def case{i}(x):\n    return {expression}\n"
    for filename, source in sources.items():
        (package / filename).write_text(source)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(package.parent), json.dumps(cases)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(zip(cases, json.loads(done.stdout.splitlines()[-1])))


@pytest.mark.parametrize("case", CHARGED, ids=lambda c: f"{c[0]}:{c[1]}")
def test_a_forbidden_path_is_charged_to_its_file(charged, case):
    assert charged[case] == [case[0]]


@pytest.mark.parametrize("case", ALLOWED, ids=lambda c: f"{c[0]}:{c[1]}")
def test_an_allowed_call_is_not(charged, case):
    assert charged[case] == []
