"""The run-time watch refuses every softmax, attention and normalization path in torch where the
student file that forbids it makes the call, also through library code, files without a list,
threads and forked processes: the call raises, naming its file, and computes nothing. What a file
may use runs as it did.

The watch stays on for the rest of its process, so the cases run in one child process of their own.
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
    # Routes no name gives away: the watch sees the call itself.
    ("attention.py", "getattr(torch.nn.functional, 'soft' + 'max')(x, -1)"),
    ("attention.py", "operator.methodcaller('softmax', -1)(x)"),
    ("attention.py", "operator.attrgetter('shape', 'softmax')(x)[1](-1)"),
    ("attention.py", "torch._C.TensorBase.softmax(x, -1)"),
    ("attention.py", "torch.Tensor.__mro__[1].softmax(x, -1)"),
    ("attention.py", "torch._C._VariableFunctions.softmax(x, -1)"),
    ("attention.py", "torch.ops.aten._softmax(x, -1, False)"),
    ("attention.py", "torch.ops.aten._softmax.default(x, -1, False)"),
    ("attention.py", "torch.vmap(lambda r: r.softmax(-1))(x)"),
    ("norm.py", "torch.ops.aten.native_layer_norm(x, (4,), None, None, 1e-5)[0]"),
    ("attention.py", "torch.special.log_softmax(x, -1)"),
    ("attention.py", "torch.nn.functional.cross_entropy(x, x.softmax(1))"),
    ("attention.py", "torch.inference_mode()(lambda: torch.softmax(x, -1))()"),
    ("attention.py", "torch.jit.script(scripted_softmax)(x)"),
    ("attention.py", "torch.nn.functional.gumbel_softmax(x)"),
    ("norm.py", "torch.nn.functional.local_response_norm(x, 2)"),
    ("norm.py", "torch.nn.LocalResponseNorm(2)(x)"),
    ("norm.py", "torch.nn.CrossMapLRN2d(2)(x[None])"),
    ("norm.py", "torch.rms_norm(x.detach(), (4,))"),
    # Libraries that divide by a norm or fold a batch norm for the caller.
    ("norm.py", "torch.nn.functional.normalize(x, dim=-1)"),
    ("norm.py", "torch.renorm(x, 2, 0, 1e-9)"),
    ("norm.py", "torch._weight_norm(x, x[..., :1], 0)"),
    (
        "norm.py",
        (
            "torch.nn.utils.fusion.fuse_linear_bn_weights("
            "x[0, :, :1], x[0, 0], x[0, 0], x[0, 0].abs(), 1e-5, x[0, 0], x[0, 0])[1]"
        ),
    ),
    ("attention.py", "torch.distributions.transforms.SoftmaxTransform()(x)"),
    (
        "attention.py",
        "torch.distributions.transform_to(torch.distributions.constraints.simplex)(x)",
    ),
    # Another thread: the watch follows it.
    ("attention.py", "in_thread(lambda: torch.softmax(x, -1))"),
    ("heads.py", "in_pool(lambda: x.log_softmax(-1))"),
    ("norm.py", "in_raw_thread(lambda: torch.nn.functional.layer_norm(x, (4,)))"),
    # Another process: a forked child keeps the watch, a library's worker process too.
    ("attention.py", "in_child(lambda: torch.softmax(x, -1))"),
    ("attention.py", "in_loader_workers(lambda row: row.softmax(-1), x)"),
    # A file without a list passes the call on; with no request served, every family is refused.
    ("rope.py", "torch.softmax(x, -1)"),
    # Handed on to a library with no student frame on the way, outside any request.
    ("attention.py", "in_pool(functools.partial(torch.softmax, x, -1))"),
]
#: Allowed where they are: the char-LM samples and computes its loss with a softmax.
ALLOWED = [
    ("charlm.py", "torch.softmax(x, -1)"),
    ("charlm.py", "torch.distributions.Categorical(logits=x).sample()"),
    ("norm.py", "torch.softmax(x, -1)"),
]

#: What the cases above call on, in every file.
HELPERS = """import _thread, concurrent.futures, functools, operator, os, threading, time, torch


def outcome(f):
    try:
        return f()
    except Exception as exc:
        return exc


def raised(value):
    if isinstance(value, Exception):
        raise value
    return value


def in_thread(f):
    out = []
    t = threading.Thread(target=lambda: out.append(outcome(f)))
    t.start()
    t.join()
    return raised(out[0])


def scripted_softmax(y: torch.Tensor) -> torch.Tensor:
    return torch.softmax(y, -1)


def in_pool(f):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(f).result()


def in_raw_thread(f):
    out = []
    _thread.start_new_thread(lambda: out.append(outcome(f)), ())
    while not out:
        time.sleep(0.001)
    return raised(out[0])


def in_child(f):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            f()
            os.write(write, b"computed")
        except Exception as exc:
            os.write(write, str(exc).encode()[:500])
        finally:
            os._exit(0)
    os.close(write)
    said = os.read(read, 1000).decode()
    os.waitpid(pid, 0)
    if said != "computed":
        raise RuntimeError(said)


class _Rows(torch.utils.data.Dataset):
    def __init__(self, f, x):
        self.f, self.x = f, x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.f(self.x[i])


def in_loader_workers(f, x):
    loader = torch.utils.data.DataLoader(
        _Rows(f, x), num_workers=2, multiprocessing_context="fork"
    )
    return [row for row in loader]


"""

SCRIPT = """
import importlib, json, sys, torch
from autograder.sandbox import tripwire
tripwire.install()
root, cases = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, root)
tripwire.watch(root + "/transformer_hw")
x = torch.randn(2, 3, 4)
out = []
for i, (filename, _) in enumerate(cases):
    module = importlib.import_module("transformer_hw." + filename[:-3])
    try:
        getattr(module, f"case{i}")(x)
    except Exception as exc:  # a thread's or a child's error comes back as another kind
        named = f"{filename}:" in str(exc) or "code of yours" in str(exc)
        refused = named and "is forbidden here" in str(exc)
        out.append([filename] if refused else [repr(exc)])
    else:
        out.append([])
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
        source = source.replace("import torch\n", HELPERS, 1)
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


RECORD_SCRIPT = """
import json, sys, torch
from autograder.sandbox import tripwire
tripwire.install()
root = sys.argv[1]
sys.path.insert(0, root)
tripwire.watch(root + "/transformer_hw")
from transformer_hw import attention
print(json.dumps([attention.caught(torch.randn(3)), list(tripwire.found)]))
"""


def test_a_refused_call_computes_nothing_even_when_caught_and_its_record_is_kept(
    tmp_path,
):
    package = tmp_path / "transformer_hw"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "attention.py").write_text(
        "import torch\n"
        "def caught(x):\n"
        "    try:\n"
        "        return torch.softmax(x, 0).tolist()\n"
        "    except Exception as exc:\n"
        "        return f'{type(exc).__name__}: {exc}'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", RECORD_SCRIPT, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    message, kept = json.loads(done.stdout.splitlines()[-1])
    assert message.startswith(
        "ForbiddenCall: aten::softmax is forbidden here (attention.py:4"
    )
    assert "softmax family" in message
    assert kept == [["attention.py", 4, "aten::softmax"]]


SET_TWICE = """
from autograder.sandbox import tripwire
tripwire.watch("/a")
try:
    tripwire.watch("/nowhere")
except RuntimeError:
    print("refused")
"""


def test_the_watch_is_set_once():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SET_TWICE,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "refused"


NAMESPACE_SCRIPT = """
import math, torch
import torch.nn.functional as F
from autograder.sandbox import tripwire
tripwire.install()
refused = []
for name in ("__getattribute__", "__builtins__", "__dict__", "__setattr__", "__getstate__"):
    try:
        getattr(F, name)
    except AttributeError:
        refused.append(name)
try:
    setattr(F, "__class__", type(torch))
except AttributeError:
    refused.append("__class__")
print(refused, F.relu(torch.tensor([-1.0]))[0].item(), getattr(math, "sqrt")(4.0))
"""


def test_a_namespace_searched_by_computed_names_finds_only_its_functions():
    """``getattr(F, name)(x)`` is allowed; F's own lookup, builtins, dictionary and state
    are not there to find, and F keeps its class."""
    done = subprocess.run(
        [sys.executable, "-c", NAMESPACE_SCRIPT],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split("\n")[-2] == (
        "['__getattribute__', '__builtins__', '__dict__', '__setattr__', '__getstate__', "
        "'__class__'] 0.0 2.0"
    )
