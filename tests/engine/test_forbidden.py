"""The reader of the rules (``autograder.sources.reader``, ``autograder.facts.rules``): what a student file may import and reach
is an allow-list, what could switch the run-time watch off or hide from it is refused with the
construct, its file:line and what to write instead, and a forbidden call written out is named;
the student's own code, correct idioms, comments and strings are not."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from autograder.facts import rules
from autograder.facts.points import PARTS
from autograder.facts.rules import (
    DYNAMIC,
    FRAMES,
    FROM_TEXT,
    IMPORTS,
    INSIDE,
    PRIVATE,
    THREADS,
)
from autograder.sources import reader
from autograder.sources.reader import scan_package, scan_source
from autograder.sources.release import SOLUTIONS

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"


def refusals(filename: str, line: str) -> list[rules.Violation]:
    return [v for v in scan_source(filename, HEADER + line + "\n") if v.advice]


@pytest.mark.parametrize(
    "line",
    [
        "y = torch.softmax(x, -1)",
        "y = x.softmax(-1)",
        "y = F.log_softmax(x, -1)",
        "y = torch.logsumexp(x, -1)",
        "layer = nn.MultiheadAttention(4, 2)",
        "from torch.nn.functional import softmax as s\ny = s(x)",
        "f = getattr(torch, 'softmax')",
        "t = __import__('torch')\ny = t.softmax(x, -1)",
        "import importlib\nm = importlib.import_module('torch.nn.functional')\ny = m.softmax(x)",
        "self = torch\ny = self.softmax(x, -1)",
        "def f(m: nn.MultiheadAttention(4, 2)):\n    pass",
        "class K(nn.Softmax):\n    pass",
        # library kernels by their family's name, and softmaxes in all but name
        "y = torch.special.logsumexp(x, -1)",
        "y = F.cross_entropy(x, t, reduction='none')",
        "y = torch.logcumsumexp(x, -1)",
    ],
)
def test_a_forbidden_call_written_out_is_named(line):
    (found,) = [v for v in scan_source("attention.py", HEADER + line + "\n")]
    assert not found.advice and found.parts == (1,), line
    assert "a library function this part forbids" in found.describe()


@pytest.mark.parametrize(
    "line, reason",
    [
        # the allow-list of modules
        ("import pickle", FROM_TEXT),
        ("import inspect", FRAMES),
        ("import ctypes", FRAMES),
        ("import pkgutil\nf = pkgutil.resolve_name(name)", IMPORTS),
        ("import _operator", IMPORTS),
        ("from autograder.sandbox import tripwire", IMPORTS),
        ("import autograder.sandbox.tripwire", IMPORTS),
        ("w = __import__('autograder.sandbox.tripwire')", IMPORTS),
        (
            "import importlib\nw = importlib.import_module('autograder.sandbox.executor')",
            IMPORTS,
        ),
        ("import importlib.util", FRAMES),
        ("import sys\nw = sys.modules.get('autograder.sandbox.tripwire')", FRAMES),
        ("import sys\nm = sys.modules['torch']", FRAMES),
        ("import sys\nfor m in list(sys.modules.values()):\n    pass", FRAMES),
        ("import sys as s\ns.settrace(None)", FRAMES),
        ("import sys\nkeep = [sys]", FRAMES),
        ("from sys import setprofile", FRAMES),
        ("import gc\nrefs = gc.get_referents(torch.exp)", FRAMES),
        ("import gc\nkeep = gc", FRAMES),
        ("import os\nf = os.sys.settrace", FRAMES),
        ("f = F.importlib.import_module('autograder.sandbox.tripwire')", FRAMES),
        # public names only
        ("f = torch._C._VariableFunctions.softmax", PRIVATE),
        ("y = torch.ops.aten._softmax(x, -1, False)", PRIVATE),
        ("f = F._VF", PRIVATE),
        ("from torch.utils._python_dispatch import _pop_mode", PRIVATE),
        ("t = torch\nf = t._C", PRIVATE),
        ("def f(ops):\n    return ops._C", PRIVATE),
        ("class A:\n    def __init__(self):\n        self.t = torch._VF", PRIVATE),
        ("class A:\n    def f(self):\n        return self.t._C", PRIVATE),
        ("f = getattr(torch, '_C')", PRIVATE),
        ("import operator\nf = operator.attrgetter('exp', '_C')(torch)", PRIVATE),
        # names written out
        ("f = getattr(torch, 'soft' + 'max')", DYNAMIC),
        ("f = getattr(x, name)", DYNAMIC),
        ("import sys\nf = getattr(sys, name)", FRAMES),
        ("class A:\n    def f(self, n):\n        return getattr(self.t, n)", DYNAMIC),
        ("y = torch.ops.aten.__getattr__('_soft' + 'max')", DYNAMIC),
        ("import functools\nf = functools.partial(getattr, F)", DYNAMIC),
        ("TOOLS = [getattr]", DYNAMIC),
        ("def f(g=getattr):\n    return g", DYNAMIC),
        ("t = __import__(name)", DYNAMIC),
        ("import importlib\nm = importlib.import_module(name)", DYNAMIC),
        ("import operator\nf = operator.attrgetter('exp', name)(torch)", DYNAMIC),
        ("import operator\nf = operator.methodcaller(name, -1)(x)", DYNAMIC),
        ("class C(torch.Tensor):\n    pass\nsetattr(C, name, f)", DYNAMIC),
        # frames, hierarchies, the insides of functions
        ("f = vars(torch)['softmax']", FRAMES),
        ("f = torch.__dict__[name]", FRAMES),
        ("f = F.__dict__['soft' + 'max']", FRAMES),
        ("g = globals()['torch']", FRAMES),
        ("def f():\n    pass\ng = f.__globals__[name]", FRAMES),
        ("c = torch.exp.__closure__", FRAMES),
        ("c = cell.cell_contents", FRAMES),
        ("c = torch.exp.__code__", FRAMES),
        ("f = torch.softmax.__wrapped__", FRAMES),
        ("k = torch.exp.__self__", FRAMES),
        ("try:\n    pass\nexcept Exception as e:\n    f = e.__traceback__", FRAMES),
        ("f = tb.tb_frame.f_back.f_globals", FRAMES),
        ("f = gen.gi_frame", FRAMES),
        ("k = object.__subclasses__()", FRAMES),
        ("k = type(x).__mro__", FRAMES),
        ("class A:\n    def f(self):\n        return self.__class__.__base__", FRAMES),
        ("f = getattr(e, '__traceback__')", FRAMES),
        # code from text
        ("f = eval('torch.soft' + 'max')", FROM_TEXT),
        ("exec('y = 1')", FROM_TEXT),
        ("g = torch.compile(f)", FROM_TEXT),
        ("g = model.compile()", FROM_TEXT),
        ("import torch.jit\nf = torch.jit.script(g)", FROM_TEXT),
        ("u = torch.jit.CompilationUnit(text)", FROM_TEXT),
        ("g = torch.fx.symbolic_trace(m)", FROM_TEXT),
        ("import torch._dynamo", PRIVATE),
        ("y = torch.load(f, weights_only=False)", FROM_TEXT),
        ("import numpy as np\ny = np.load(f, allow_pickle=True)", FROM_TEXT),
        ("import typing\nh = typing.get_type_hints(f)", FROM_TEXT),
        (
            "import string\nf = string.Formatter().get_field(name, (torch,), {})",
            FROM_TEXT,
        ),
        (
            "import dataclasses\nK = dataclasses.make_dataclass('K', [], namespace=ns)",
            FROM_TEXT,
        ),
        ("K = type('K', (torch.Tensor,), ns)", FROM_TEXT),
        ("class M(type):\n    pass", FROM_TEXT),
        ("class K(metaclass=M):\n    pass", FROM_TEXT),
        # what torch runs inside its own calls, and what switches its dispatch off
        ("with torch.DisableTorchFunction():\n    pass", INSIDE),
        ("from torch import DisableTorchFunctionSubclass", INSIDE),
        (
            (
                "class T(torch.Tensor):\n    @classmethod\n"
                "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                "        return func(*args)"
            ),
            INSIDE,
        ),
        ("class T(torch.Tensor):\n    __torch_dispatch__ = None", INSIDE),
        ("class A:\n    def __del__(self):\n        pass", INSIDE),
        ("from torch.overrides import TorchFunctionMode", INSIDE),
        ("from torch.library import custom_op", INSIDE),
        ("y = torch.cond(p, f, g, (x,))", INSIDE),
        ("h = x.register_hook(f)", INSIDE),
        (
            "class A:\n    def f(self, g):\n        return self.weight.register_hook(g)",
            INSIDE,
        ),
        ("h = m.register_full_backward_hook(f)", INSIDE),
        ("y = x.apply_(f)", INSIDE),
        ("from torch.autograd.graph import saved_tensors_hooks", INSIDE),
        # threads, process pools, signals
        ("import threading", THREADS),
        ("from concurrent.futures import ThreadPoolExecutor", THREADS),
        ("import _thread", THREADS),
        ("import multiprocessing as mp", THREADS),
        ("import torch.multiprocessing", THREADS),
        ("p = torch.multiprocessing.Process(target=f)", THREADS),
        ("import asyncio", THREADS),
        ("from signal import signal", THREADS),
        ("import faulthandler", THREADS),
        ("t = __import__('threading')", THREADS),
        ("f = torch.futures.Future()", THREADS),
        ("import torch.distributed as dist", THREADS),
        # arguments starred or computed hide what a lookup or an import reaches
        ("f = getattr(*(torch, '_C'))", DYNAMIC),
        ("f = getattr(torch, *names)", DYNAMIC),
        ("f = getattr(**where)", DYNAMIC),
        ("import importlib\nm = importlib.import_module(*names)", DYNAMIC),
        ("t = __import__(*names)", DYNAMIC),
        ("import operator\nf = operator.attrgetter(*names)(torch)", DYNAMIC),
        ("import operator\nf = operator.methodcaller(*names)(x)", DYNAMIC),
        (
            "class A:\n    def f(self, *key):\n        return getattr(self, *key)",
            DYNAMIC,
        ),
        # a library entry point that turns a string into an import or code
        ("from importlib import import_module\nloaders = [import_module]", DYNAMIC),
        (
            (
                "import importlib\nclass R:\n    def __reduce__(self):\n"
                "        return (importlib.import_module, ('torch.library',))"
            ),
            DYNAMIC,
        ),
        ("import pytest\npytest.MonkeyPatch().setattr('a.b', None)", IMPORTS),
        ("import socket", IMPORTS),
        ("import pkgutil", IMPORTS),
        ("import timeit", FROM_TEXT),
        ("import torch.utils.benchmark", FROM_TEXT),
        ("from torch.utils.benchmark import Timer", FROM_TEXT),
        ("t = torch.utils.benchmark.Timer('torch.softmax(x, 0)')", FROM_TEXT),
        ("from torch.utils import cpp_extension", FROM_TEXT),
        ("from torch.utils import bottleneck", IMPORTS),
        # a computed name on a library namespace: what it finds is called at once
        ("f = getattr(F, name)", DYNAMIC),
        ("b = getattr(F, name)['__import__']", DYNAMIC),
        ("object.__setattr__(F, '__class__', c)", FRAMES),
        ("t = F.torch\nm = t.__import__('torch.library')", FRAMES),
        ("import importlib\nu = importlib.util", FRAMES),
        ("u = torch.utils\nt = u.benchmark.Timer('x')", FROM_TEXT),
        (
            "import typing_extensions\nh = typing_extensions.get_annotations(f, eval_str=True)",
            FROM_TEXT,
        ),
        ("import functools\n@functools.singledispatch\ndef f(x):\n    pass", FROM_TEXT),
        ("from functools import singledispatchmethod", FROM_TEXT),
        ("y = torch.onnx.export(m, x, f)", FROM_TEXT),
    ],
)
def test_what_the_watch_cannot_see_is_refused_at_the_cost_of_the_files_parts(
    line, reason
):
    """Each refusal names the construct, its file:line, why and what to write instead; it
    costs the part of its file, and every part in masks.py and rope.py, which serve them all."""
    for filename, parts in (("attention.py", (1,)), ("masks.py", tuple(PARTS))):
        found = refusals(filename, line)
        assert found and all(v.parts == parts for v in found), (filename, line)
        assert any(v.advice == f"{reason.why}; {reason.instead}" for v in found), line
        last = HEADER.count("\n") + line.count("\n") + 1
        assert any(
            f"{filename}:{n} uses `" in v.describe()
            for v in found
            for n in range(4, last + 1)
        ), line


@pytest.mark.parametrize(
    "line",
    [
        "from transformer_hw.attention import softmax\ny = softmax(x)",
        "from transformer_hw import attention\ny = attention.scaled_dot_product_attention(q, k, v)",
        "from . import attention as _a\ny = _a._scale(q)",
        "y = self.softmax(x)",
        "w = getattr(self, name)",
        "model.eval()",
        "# torch.softmax would be forbidden here\nnote = 'F.softmax'",
        "warnings = __import__('warnings')\nwarnings.warn('careful')",
        "import importlib\nm = importlib.import_module('math')",
        "import os\nos._exit(0)",
        "import sys\nsys.stdout.write('x')\nsys.exit(0)",
        "import gc\ngc.collect()",
        "import re\np = re.compile('a+')",
        "f = getattr(torch, 'exp')",
        "v = torch.__version__",
        "class M(nn.Module):\n    def __init__(self):\n        nn.Module.__init__(self)",
        "class A:\n    def f(self, names):\n        return [getattr(self, n) for n in names]",
        "class A:\n    def __getattr__(self, name):\n        return super().__getattr__(name)",
        "class A:\n    def set(self, name, value):\n        setattr(self, name, value)",
        # self stays the method's own beside a parameter named self elsewhere in the file
        "def _fwd(self, x):\n    return x\nclass A:\n    def f(self):\n        return self._cache",
        "class A:\n    if True:\n        def f(self):\n            return self._cache",
        (
            "class A:\n    def f(self):\n        def inner(self=self):\n"
            "            return self._cache\n        return inner()"
        ),
        "class R:\n    pass\nrecord = dict(R().__dict__)",
        "class A:\n    def f(self):\n        return self._cache, self.__dict__",
        "class K:\n    _scale = 2\nk = K()\ny = k._scale",
        "class A:\n    def compile(self):\n        return self.compile",
        (
            "from transformer_hw import attention\ndef f(q, k, v):\n"
            "    return attention.scaled_dot_product_attention(q, k, v)\n"
            "def g(x):\n    attention = x.softmax_like()\n    return attention"
        ),
        "ok = isinstance(m, nn.MultiheadAttention)",
        "ok = issubclass(C, (nn.Softmax, nn.Linear))",
        "KINDS = (nn.MultiheadAttention, nn.LayerNorm)\ndef f(m):\n    return isinstance(m, KINDS)",
        "def f(m: nn.MultiheadAttention) -> nn.Softmax:\n    pass",
        "layer: nn.MultiheadAttention = make()",
        "def f(m: torch.jit.ScriptModule) -> None:\n    pass",
        "match m:\n    case nn.MultiheadAttention():\n        pass",
        (
            "class A:\n    def softmax(self, x):\n        return x\nclass B(A):\n"
            "    def softmax(self, x):\n        return super().softmax(x)\n"
            "    def again(self, x):\n        return type(self).softmax(self, x)"
        ),
        (
            "try:\n    from transformer_hw import attention\nexcept ImportError:\n"
            "    import attention\ny = attention.scaled_dot_product_attention(q, k, v)"
        ),
        "import operator\nf = operator.attrgetter('weight', 'bias')(layer)",
        "import operator\nkey = operator.itemgetter(0)",
        "import operator\nf = operator.methodcaller('exp')(x)",
        "h = self.register_forward_hook(f)",
        "import string\nletters = string.ascii_letters",
        "import math, typing, dataclasses, functools, itertools, collections",
        "import numpy as np\nimport torch.nn.init as init\ninit.xavier_uniform_(w)",
        "y = torch.load(f)\nz = torch.load(f, weights_only=True)",
        "act = getattr(F, name)(x)\nlayer = getattr(nn, name)()",
        "y = torch.cat(*parts)\nz = torch.stack(**kw)",
        "from torch.utils.data import DataLoader, TensorDataset",
        "torch.backends.cudnn.benchmark = False",
        "def f(x):\n    raise TypeError(f'not a {x.__class__.__name__}')",
        # a private helper of the file's own class, called through a parameter
        (
            "class CharLM(nn.Module):\n    def _device(self):\n        return self.w.device\n"
            "def generate(model, n):\n    return torch.zeros(n, device=model._device())"
        ),
    ],
)
def test_own_code_correct_idioms_comments_and_strings_are_not(line):
    assert scan_source("heads.py", HEADER + line + "\n") == []


@pytest.mark.parametrize(
    "filename, source",
    [
        (
            "heads.py",
            (
                "import importlib\n_attention = importlib.import_module('.attention', __package__)"
                "\ny = _attention.scaled_dot_product_attention(q, k, v)\n"
            ),
        ),
        (
            "heads.py",
            (
                "import importlib\na = importlib.import_module('transformer_hw.attention')\n"
                "y = a.scaled_dot_product_attention(q, k, v)\n"
            ),
        ),
        (
            "norm.py",
            (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from torch.nn import LayerNorm\n    from torch.utils import hooks\n"
                "def f(m: 'LayerNorm') -> 'LayerNorm':\n    return m\n"
            ),
        ),
        (
            "norm.py",
            (
                "import typing\nif typing.TYPE_CHECKING:\n    from .normalization import LayerNorm\n"
            ),
        ),
        (
            "block.py",
            (
                "import torch.nn.functional as F\nclass B:\n    def f(self, x):\n"
                "        return getattr(F, self.activation)(x)\n"
            ),
        ),
        ("block.py", "from torch import nn\nact = getattr(nn, name)()\n"),
    ],
)
def test_the_three_idioms_of_correct_solutions_are_allowed(filename, source):
    """The package's own modules in any form, names only under ``TYPE_CHECKING``, and a
    computed attribute of a library namespace of functions (judged when it runs)."""
    assert scan_source(filename, source) == []


@pytest.mark.parametrize(
    "line",
    [
        # TYPE_CHECKING that is not typing's runs its block.
        "TYPE_CHECKING = True\nif TYPE_CHECKING:\n    from torch.utils import hooks",
        (
            "from typing import TYPE_CHECKING\nTYPE_CHECKING = 1\nif TYPE_CHECKING:\n"
            "    from torch.utils import hooks"
        ),
        # an annotation that calls something runs
        "def f(m: torch.DisableTorchFunction()):\n    pass",
        # computed on a namespace that holds more than functions
        "f = getattr(torch, name)",
        # a parameter named self outside a method is anyone's object
        "def peek(self, name):\n    return getattr(self, name)\nr = peek(torch, '_refs')",
        "peek = lambda self: self._refs",
        "class A:\n    @staticmethod\n    def f(self):\n        return self._refs",
        # a private method name of the file's own class that a library binds to more
        "class A:\n    def _C(self):\n        pass\ndef f(m):\n    return m._C",
        "class A:\n    def _parameters(self):\n        pass\ndef f(m):\n    return m._parameters",
        # a private name the file's classes do not define as a method
        "class A:\n    _device = None\ndef f(m):\n    return m._device()",
    ],
)
def test_what_the_idioms_do_not_cover_is_still_refused(line):
    assert refusals("attention.py", line), line


def test_rules_follow_the_file():
    """charlm.py may sample with a softmax but not normalize; rope.py and masks.py have no
    list of their own, so what any list forbids costs every part there (they serve them)."""
    assert scan_source("charlm.py", HEADER + "p = torch.softmax(x, -1)\n") == []
    (norm,) = scan_source("charlm.py", HEADER + "y = F.layer_norm(x, (4,))\n")
    assert norm.parts == (7,)
    (softmax,) = scan_source("rope.py", HEADER + "y = torch.softmax(x, -1)\n")
    assert softmax.parts == tuple(PARTS) and "every part" in softmax.describe()
    assert scan_source("masks.py", HEADER + "y = torch.exp(x)\n") == []
    # a forbidden kernel by its family's name, and a private name of a library object
    kernels = scan_source("norm.py", HEADER + "y = torch._batch_norm_impl_index(x)\n")
    assert {v.parts for v in kernels} == {(5,)} and len(kernels) == 2


def test_a_refusal_says_what_to_write_instead():
    (found,) = scan_source("gqa.py", HEADER + "\n\nimport threading\n")
    assert found.describe() == (
        f"gqa.py:6 uses `import threading`: {THREADS.why}; {THREADS.instead}; "
        "it costs this part"
    )


def write_package(tmp_path, **modules: str):
    """A ``transformer_hw`` folder holding these modules' sources."""
    package = tmp_path / "transformer_hw"
    package.mkdir()
    for name, source in modules.items():
        (package / f"{name}.py").write_text(source)
    return package


def test_the_reference_is_clean():
    assert scan_package(SOLUTIONS) == []


def test_the_models_private_helper_called_through_a_parameter_keeps_charlm_clean(
    tmp_path,
):
    """A correct charlm.py whose functions ask the model for its device with a private
    helper of its own class (``model._device()``), as ``train`` and ``generate`` take it."""
    package = tmp_path / "transformer_hw"
    shutil.copytree(SOLUTIONS, package)
    charlm = package / "charlm.py"
    source = charlm.read_text()
    assert source.count("next(model.parameters()).device") >= 2
    source = source.replace("next(model.parameters()).device", "model._device()")
    source = source.replace(
        "    def make_caches(",
        "    def _device(self) -> torch.device:\n"
        "        return next(self.parameters()).device\n\n    def make_caches(",
        1,
    )
    charlm.write_text(source)
    assert scan_package(package) == []


def test_nesting_too_deep_to_parse_costs_only_its_own_part(tmp_path):
    """100,000 additions overflow the parser's recursion: rope.py's problem. Deep nesting the
    parser accepts (1,500 conditional expressions) is read without recursion."""
    package = write_package(
        tmp_path,
        rope="y = x" + "+x" * 100_000 + "\n",
        masks="import torch\ny = " + "x if c else " * 1500 + "0\n",
    )
    (found,) = scan_package(package)
    assert found.file == "rope.py" and found.parts == (4,)
    assert "nested too deeply" in found.describe()


def test_a_file_the_parser_cannot_read_costs_only_its_part(tmp_path):
    """Python's parser raises ``MemoryError`` on 7,000 unary minuses: the file's problem, and
    the other files are still read."""
    package = write_package(
        tmp_path,
        rope="x = " + "-" * 7000 + "1\n",
        attention="import torch\ny = torch.softmax(x, -1)\n",
    )
    softmax, unreadable = scan_package(package)
    assert (softmax.file, softmax.line, softmax.parts) == ("attention.py", 2, (1,))
    assert unreadable.file == "rope.py" and unreadable.parts == (4,)
    assert "too complex to read" in unreadable.describe()
    assert unreadable.describe().endswith("it costs this part")


def test_a_syntax_error_or_a_null_byte_costs_only_its_part(tmp_path):
    package = write_package(tmp_path, gqa="x = (\n", norm="x = 1\0\n", masks="y = 2\n")
    found = {v.file: v for v in scan_package(package)}
    assert set(found) == {"gqa.py", "norm.py"}
    assert (
        found["gqa.py"].parts == (6,) and "does not parse" in found["gqa.py"].describe()
    )
    assert (
        found["norm.py"].parts == (5,)
        and "does not parse" in found["norm.py"].describe()
    )


def test_a_file_over_the_size_cap_is_not_read(tmp_path):
    package = write_package(tmp_path, gqa="x = 1\n" * (rules.MAX_MODULE // 6 + 1))
    (found,) = scan_package(package)
    assert found.parts == (6,) and "over 512 KB" in found.describe()


def test_a_reader_out_of_time_names_the_file_it_was_reading(tmp_path, monkeypatch):
    """The child is killed at the budget; the file whose turn it was is charged, and the rest
    are read again without it (here the stand-in reader never ends on norm.py)."""
    never_ends = (
        "import json, sys, time; names = json.loads(sys.stdin.read()); "
        "print(json.dumps({'at': 'masks.py'}), flush=True); "
        "print(json.dumps({'at': 'norm.py'}), flush=True) if 'norm.py' in names "
        "else print(json.dumps({'violations': []}), flush=True); "
        "time.sleep(3600) if 'norm.py' in names else None"
    )
    monkeypatch.setattr(reader, "_CHILD", never_ends)
    monkeypatch.setattr(reader, "READ_SECONDS", 2)
    package = write_package(tmp_path, masks="x = 1\n", norm="y = 2\n")
    (found,) = scan_package(package)
    assert found.file == "norm.py" and found.parts == (5,)
    assert "took over 2 s" in found.describe()


def test_a_reader_that_cannot_start_is_the_graders_failure(tmp_path, monkeypatch):
    """Never a row of zeros: a ``SuiteError`` inside a test fails the grading, which the next
    run retries."""
    from autograder.sources.runner import SuiteError

    (tmp_path / "attention.py").write_text("x = 1\n")
    monkeypatch.setattr(reader, "_CHILD", "raise SystemExit(3)")
    with pytest.raises(SuiteError, match="reader did not start"):
        reader.scan_package(tmp_path)


def _too_slow(*_):
    raise TimeoutError("the reader took over 60 s")


def _seconds(source: str) -> float:
    start = time.process_time()
    scan_source("block.py", source)
    return time.process_time() - start


def test_reading_time_grows_with_the_file_not_faster():
    """Files built to be slow for a resolver (tuples of classes bound thousands of times,
    aliases of aliases, long attribute chains and call chains) read in time linear in their
    size: four times the file takes at most about four times as long. The alarm is a
    backstop."""
    classes = "(nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.BatchNorm1d, nn.Linear)"

    def source(n: int) -> str:
        return HEADER + "".join(
            f"K{i} = {classes}\nok{i} = isinstance(m, K{i})\nops = ops.linalg{i}\n"
            f"y = ops{'.real' * 30}\nz = f{'()' * 10}\n"
            for i in range(n)
        )

    signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(60)
    try:
        small, large = _seconds(source(300)), _seconds(source(1200))
    finally:
        signal.alarm(0)
    assert large < 6 * small + 0.5, (small, large)


def test_the_rules_students_read_name_everything_the_reader_refuses(capsys):
    """The handout README and `autograder check --rules` print ``student_rules``, made from
    the very tables the reader applies: nothing refused goes unnamed."""
    from autograder.commands import cli

    text = "\n".join(rules.student_rules())
    listed = (
        rules.ROOTS
        | set(rules.OFF_LIMITS)
        | set(rules.ANYWHERE)
        | set(rules.BUILTINS_OFF)
        | rules.LOOKUPS
        | set(rules.PICKLES)
        | {name for names in rules.LIMITED.values() for name in names}
    )
    assert [name for name in sorted(listed) if f"`{name}`" not in text] == []
    # what it allows by name it does not also list as refused
    (frames,) = [rule for rule in rules.student_rules() if rule.startswith("No frames")]
    refused = frames.split("(", 1)[1].split(", and", 1)[0]
    assert [name for name in rules.ROOTS if f"`{name}`" in refused] == []
    assert "`import_module`" not in refused
    assert cli.main(["check", "--rules"]) == 0
    assert capsys.readouterr().out.strip() == "\n\n".join(
        f"- {rule}" for rule in rules.student_rules()
    )


def test_library_private_names_are_found_once_per_installation(tmp_path, monkeypatch):
    """Found by a fresh Python the first time (a stand-in here), then read from the user's
    cache folder; a file there that is not a list of names is found afresh, and another Python
    keys another file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh: list[str] = []

    def fresh_python(*args, **kwargs):
        fresh.append(args[0][-1])
        return subprocess.CompletedProcess(args, 0, stdout='["_C", "_private"]')

    monkeypatch.setattr(reader.subprocess, "run", fresh_python)
    reader._library_private_names.cache_clear()
    try:
        assert reader._library_private_names() == {"_C", "_private"} and len(fresh) == 1
        kept = reader._private_names_file()
        assert kept.parent == tmp_path / "autograder"
        assert json.loads(kept.read_text()) == ["_C", "_private"]
        reader._library_private_names.cache_clear()
        assert reader._library_private_names() == {"_C", "_private"} and len(fresh) == 1
        kept.write_text('{"not": "a list"}')
        reader._library_private_names.cache_clear()
        assert reader._library_private_names() == {"_C", "_private"} and len(fresh) == 2
        monkeypatch.setattr(reader.sys, "version", sys.version + " (another)")
        assert reader._private_names_file() != kept
    finally:
        reader._library_private_names.cache_clear()
