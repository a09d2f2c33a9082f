"""The static forbidden-call scan: library calls and the ways around naming them are found, also
through aliases and other student files; the student's own functions, comments, strings and
dynamic lookups that resolve to something harmless are not."""

from __future__ import annotations

import signal

import pytest

from autograder import forbidden
from autograder.forbidden import scan_package, scan_source
from autograder.points import PARTS
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
        # Named in a tuple: only when every use of the name tests against it.
        "KINDS = (nn.MultiheadAttention,)",
        "KINDS = (nn.MultiheadAttention,)\nlayer = KINDS[0](4, 2)",
        "KINDS = (nn.MultiheadAttention,)\nok = isinstance(m, KINDS)\nKINDS = KINDS + (x,)",
        # A call's result is the student's own object only when the call makes an own class.
        "def make():\n    return torch\ny = make().softmax(x, -1)",
        "class K(nn.Softmax):\n    pass\ny = K()(x)",
        # Library kernels by their family's name, and softmaxes in all but name.
        "y = torch._scaled_dot_product_flash_attention_for_cpu(q, k, v)",
        "y = torch._transformer_encoder_layer_fwd(x)",
        "y = F.cross_entropy(x, t, reduction='none')",
        "y = torch.logcumsumexp(x, -1)",
        # Lookups by a string the scan cannot follow.
        "y = torch.ops.aten.__getattr__('_soft' + 'max')",
        "import functools\nf = functools.partial(getattr, torch)",
        "TOOLS = [getattr]",
        "def f(g=getattr):\n    return g",
        "import pickle\nf = pickle.loads(blob)",
        "import pkgutil\nf = pkgutil.resolve_name(name)",
        "import string\nf = string.Formatter().get_field(name, (torch,), {})",
        "import _operator\nf = _operator.attrgetter(name)",
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
        "ok = type(m) in (nn.MultiheadAttention, nn.Linear)",
        "ok = type(m) == nn.MultiheadAttention",
        "KINDS = (nn.MultiheadAttention, Own)\ndef f(m):\n    return isinstance(m, KINDS)",
        # The student's own objects: an instance of an own class, its methods and namespace.
        "class K:\n    def softmax(self, x):\n        return x\n_k = K()\ny = _k.softmax(x)",
        (
            "class K:\n    def softmax(self, x):\n        return x\nclass M:\n"
            "    def __init__(self):\n        self.k = K()\n"
            "    def f(self, x, names):\n"
            "        return self.k.softmax(x), [getattr(self.k, n) for n in names]"
        ),
        "class R:\n    pass\nrecord = dict(R().__dict__)",
        # super(), type(self), a script's fallback import, classes only tested against.
        (
            "class A:\n    def softmax(self, x):\n        return x\nclass B(A):\n"
            "    def softmax(self, x):\n        return super().softmax(x)\n"
            "    def again(self, x):\n        return type(self).softmax(self, x)"
        ),
        (
            "try:\n    from transformer_hw import attention\nexcept ImportError:\n"
            "    import attention\ny = attention.scaled_dot_product_attention(q, k, v)"
        ),
        (
            "try:\n    from transformer_hw.attention import scaled_dot_product_attention\n"
            "except ImportError:\n"
            "    from attention import scaled_dot_product_attention\n"
            "y = scaled_dot_product_attention(q, k, v)"
        ),
        "from torch.nn import MultiheadAttention as M\nok = isinstance(m, (M, Own))",
        (
            "class C:\n    kinds = (nn.MultiheadAttention, nn.Linear)\n"
            "    def f(self, m):\n        return isinstance(m, self.kinds)"
        ),
        "match type(m):\n    case nn.MultiheadAttention:\n        pass",
        "import sys\ncolab = 'google.colab' in sys.modules",
        "import string\nletters = string.ascii_letters",
    ],
)
def test_own_code_comments_and_strings_are_not(line):
    assert scan_source("heads.py", HEADER + line + "\n") == []


def test_rules_follow_the_file():
    """charlm.py may sample with a softmax but not normalize; rope.py and masks.py have no
    list of their own, so what any list forbids costs every part there (they only serve the
    files that have one)."""
    assert scan_source("charlm.py", HEADER + "p = torch.softmax(x, -1)\n") == []
    (norm,) = scan_source("charlm.py", HEADER + "y = F.layer_norm(x, (4,))\n")
    assert norm.parts == (7,)
    (softmax,) = scan_source("rope.py", HEADER + "y = torch.softmax(x, -1)\n")
    assert softmax.parts == tuple(PARTS) and "every part" in softmax.describe()
    assert scan_source("masks.py", HEADER + "y = torch.exp(x)\n") == []
    # a forbidden kernel, and a private name of a library object
    kernels = scan_source("norm.py", HEADER + "y = torch._batch_norm_impl_index(x)\n")
    assert {v.parts for v in kernels} == {(5,)} and len(kernels) == 2


@pytest.mark.parametrize(
    "line",
    [
        "import autograder.tripwire",
        "from autograder import executor",
        "import sys\nw = sys.modules.get('autograder.tripwire')",
        "import sys\nfor m in list(sys.modules.values()):\n    pass",
        "c = torch.exp.__closure__",
        "exec('y = 1')",
        "import gc\nrefs = gc.get_referents(torch.exp)",
        "import gc\nkeep = gc",
        "import inspect",
    ],
)
def test_reaching_the_graders_machinery_costs_every_part_from_any_file(line):
    for filename in ("masks.py", "attention.py"):
        found = scan_source(filename, HEADER + line + "\n")
        assert found and all(v.parts == tuple(PARTS) for v in found), (filename, line)


def test_a_lookup_on_an_object_of_no_library_costs_its_own_part_unless_shared(tmp_path):
    """In a def no other file uses it costs that part; where another file can reach its
    result (heads.get handed torch._C... by attention.py) it costs every part."""
    lookup = (
        "def init(model, names):\n    return [getattr(model.attn, n) for n in names]\n"
    )
    (found,) = scan_source("charlm.py", HEADER + lookup)
    assert found.evasion and found.parts == (7,)
    assert found.describe().endswith("so it costs this part")
    package = write_package(
        tmp_path,
        heads="def get(ns, *names):\n    for n in names:\n        ns = getattr(ns, n)\n"
        "    return ns\n",
        attention="import torch\nfrom transformer_hw.heads import get\n"
        "def softmax(x, dim=-1):\n    return get(torch, '_C', 'sm')(x, dim)\n",
    )
    (found,) = scan_package(package)
    assert found.file == "heads.py" and found.parts == tuple(PARTS)


def test_nesting_too_deep_to_read_costs_only_its_own_part(tmp_path):
    package = write_package(
        tmp_path, rope="y = " + "x if c else " * 1500 + "0\n", masks="import torch\n"
    )
    (found,) = scan_package(package)
    assert found.file == "rope.py" and found.parts == (4,)


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


def test_a_file_over_the_size_cap_is_not_read(tmp_path):
    package = write_package(tmp_path, gqa="x = 1\n" * (forbidden.MAX_MODULE // 6 + 1))
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
    monkeypatch.setattr(forbidden, "_CHILD", never_ends)
    monkeypatch.setattr(forbidden, "READ_SECONDS", 2)
    package = write_package(tmp_path, masks="x = 1\n", norm="y = 2\n")
    (found,) = scan_package(package)
    assert found.file == "norm.py" and found.parts == (5,)
    assert "took over 2 s" in found.describe()


def test_tuples_of_classes_bound_thousands_of_times_stay_cheap():
    """Each binding of a tuple of library classes asks whether every use of its name only
    tests against it: the uses are indexed once, not searched for in the whole file per
    binding (which took minutes for a 180 KB file). The alarm is a backstop."""
    classes = "(nn.LayerNorm, nn.GroupNorm, nn.RMSNorm, nn.BatchNorm1d, nn.Linear)"
    bindings = "".join(f"K{i} = {classes}\n" for i in range(1500))
    tests = "".join(f"ok{i} = isinstance(m, K{i})\n" for i in range(1500))
    signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(120)
    try:
        assert scan_source("block.py", HEADER + bindings + tests) == []
    finally:
        signal.alarm(0)


def test_gc_collect_is_harmless():
    assert scan_source("charlm.py", HEADER + "import gc\ngc.collect()\n") == []
    assert scan_source("masks.py", HEADER + "from gc import collect\ncollect()\n") == []


def test_a_computed_attribute_costs_every_part_wherever_it_is():
    """Its result may serve another file: ``getattr(ns, n)`` in gqa.py handed
    ``torch._C._VariableFunctions`` and ``"soft" + "max"`` by attention.py."""
    for filename in ("charlm.py", "gqa.py", "masks.py"):
        (found,) = scan_source(filename, HEADER + "f = getattr(cfg, name)\n")
        assert found.evasion and found.parts == tuple(PARTS), filename
    assert scan_source("gqa.py", HEADER + "f = getattr(self, name)\n") == []


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
    found = {(v.file, v.line, v.evasion, v.whole) for v in scan_package(package)}
    assert found == {
        ("attention.py", 2, True, True),
        ("attention.py", 4, False, False),
        # masks.py has no list: what any list forbids costs every part there
        ("masks.py", 2, False, True),
        ("masks.py", 3, True, True),
    }


def test_a_tuple_of_classes_another_file_imports_is_a_use(tmp_path):
    """Only named where it is bound, but attention.py may call what it imports."""
    package = write_package(
        tmp_path,
        heads="from torch import nn\nKINDS = (nn.MultiheadAttention,)\n"
        "def known(m):\n    return isinstance(m, KINDS)\n",
        attention="from transformer_hw.heads import KINDS\nlayer = KINDS[0](4, 2)\n",
    )
    assert {(v.file, v.line) for v in scan_package(package)} == {("heads.py", 2)}


def write_package(tmp_path, **modules: str):
    """A ``transformer_hw`` folder holding these modules' sources."""
    package = tmp_path / "transformer_hw"
    package.mkdir()
    for name, source in modules.items():
        (package / f"{name}.py").write_text(source)
    return package


def test_the_reference_is_clean():
    assert scan_package(SOLUTIONS) == []


def test_aliases_that_multiply_and_long_chains_stay_cheap():
    """Each ``ops = ops.x`` would multiply what ``ops`` may be, round after round, and a long
    attribute chain costs its length cubed: both are capped (the scan runs in the grading
    process). Without the caps this took minutes and gigabytes; the alarm is a backstop."""
    aliases = "ops = torch\n" + "".join(
        f"ops = ops.{name}\n" for name in ("linalg", "fft", "special", "nn", "sparse")
    )
    chain = "y = ops" + ".real" * 300 + "\n" + "z = f" + "()" * 40 + "\n"
    signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(120)
    try:
        assert scan_source("attention.py", HEADER + aliases + chain * 5) == []
        assert scan_source("attention.py", HEADER + aliases + "y = ops.softmax(x)\n")
    finally:
        signal.alarm(0)


def _too_slow(*_):
    raise TimeoutError("the scan took over 120 s")


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
                "    from torch.nn import LayerNorm\n"
                "def f(m: 'LayerNorm') -> 'LayerNorm':\n    return m\n"
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
        "TYPE_CHECKING = True\nif TYPE_CHECKING:\n    from torch import softmax",
        (
            "from typing import TYPE_CHECKING\nTYPE_CHECKING = 1\nif TYPE_CHECKING:\n"
            "    from torch import softmax"
        ),
        # getattr handed on, or computed on a namespace that holds more than functions.
        "import functools\nf = functools.partial(getattr, F)",
        "f = getattr(torch, name)",
        "import sys\nf = getattr(sys, name)",
    ],
)
def test_what_the_idioms_do_not_cover_is_still_refused(line):
    assert scan_source("attention.py", HEADER + line + "\n"), line


@pytest.mark.parametrize(
    "line, advice",
    [
        ("import threading", forbidden.CONCURRENCY),
        ("from concurrent.futures import ThreadPoolExecutor", forbidden.CONCURRENCY),
        ("import _thread", forbidden.CONCURRENCY),
        ("import multiprocessing as mp", forbidden.CONCURRENCY),
        ("import torch.multiprocessing", forbidden.CONCURRENCY),
        ("p = torch.multiprocessing.Process(target=f)", forbidden.CONCURRENCY),
        ("import asyncio", forbidden.CONCURRENCY),
        ("from signal import signal", forbidden.CONCURRENCY),
        ("import faulthandler", forbidden.CONCURRENCY),
        ("t = __import__('threading')", forbidden.CONCURRENCY),
        ("import sys\nsys.settrace(None)", forbidden.INTROSPECTION),
        ("import sys\nf = sys._getframe(1)", forbidden.INTROSPECTION),
        ("from torch.overrides import TorchFunctionMode", forbidden.WATCH_MACHINERY),
        (
            "from torch.utils._python_dispatch import _pop_mode",
            forbidden.WATCH_MACHINERY,
        ),
        ("f = torch._C._VariableFunctions.exp", forbidden.WATCH_MACHINERY),
        ("import torch._dynamo", forbidden.WATCH_MACHINERY),
        ("g = torch.compile(f)", forbidden.WATCH_MACHINERY),
        ("import torch.jit\nf = torch.jit.script(g)", forbidden.WATCH_MACHINERY),
        ("u = torch.jit.CompilationUnit(text)", forbidden.WATCH_MACHINERY),
        ("g = torch.fx.symbolic_trace(m)", forbidden.WATCH_MACHINERY),
        ("from torch.library import custom_op", forbidden.CALLBACKS),
        ("y = torch.cond(p, f, g, (x,))", forbidden.CALLBACKS),
        ("h = x.register_hook(f)", forbidden.CALLBACKS),
        ("y = x.apply_(f)", forbidden.CALLBACKS),
        ("from torch.autograd.graph import saved_tensors_hooks", forbidden.CALLBACKS),
        ("try:\n    pass\nexcept Exception as e:\n    f = e.__traceback__", None),
        ("f = tb.tb_frame.f_back.f_globals", forbidden.INTROSPECTION),
        ("f = gen.gi_frame", forbidden.INTROSPECTION),
        ("k = object.__subclasses__()", forbidden.INTROSPECTION),
        ("k = type(x).__mro__", forbidden.INTROSPECTION),
        ("k = torch.exp.__self__", forbidden.INTROSPECTION),
        ("f = getattr(e, '__traceback__')", forbidden.INTROSPECTION),
        ("f = getattr(torch, '_C')", forbidden.PRIVATE),
        ("f = F._VF", forbidden.PRIVATE),
        ("import operator\nf = operator.attrgetter('exp', '_C')(torch)", None),
        (
            "import operator\nf = operator.attrgetter('nn.functional.softmax')(torch)",
            None,
        ),
        ("import operator\nf = operator.attrgetter('exp', name)(torch)", None),
        ("import operator\nf = operator.methodcaller(name, -1)(x)", None),
        ("import operator\nf = operator.itemgetter('_C')(vars(torch))", None),
    ],
)
def test_what_could_switch_the_watch_off_is_refused_in_every_file(line, advice):
    """Each refusal names the construct, its file:line and what to write instead, and costs
    the part of its file."""
    for filename, part in (("masks.py", 2), ("attention.py", 1)):
        found = scan_source(filename, HEADER + line + "\n")
        assert found and all(v.parts in ((part,), tuple(PARTS)) for v in found), line
        if advice is not None:
            assert any(v.advice == advice and v.parts == (part,) for v in found), line
            where = (
                f"{filename}:{HEADER.count(chr(10)) + line.count(chr(10)) + 1} uses `"
            )
            assert any(where in v.describe() for v in found), line


@pytest.mark.parametrize(
    "line",
    [
        "import operator\nf = operator.attrgetter('weight', 'bias')(layer)",
        "h = self.register_forward_hook(f)",
        "import operator\nkey = operator.itemgetter(0)",
        "import operator\nf = operator.methodcaller('exp')(x)",
        "class A:\n    def __getattr__(self, name):\n        return super().__getattr__(name)",
        "import signal_processing",
    ],
)
def test_what_leaves_the_watch_on_is_not(line):
    assert scan_source("heads.py", HEADER + line + "\n") == []


def test_a_library_name_public_despite_its_underscore_is_not_private():
    assert scan_source("attention.py", "import os\nos._exit(0)\n") == []
    assert scan_source("attention.py", "import torch\nf = torch._softmax\n")


def test_the_rules_students_read_name_everything_the_scan_refuses(capsys):
    """The handout README and `autograder check --rules` print ``student_rules``, made from
    the very lists the scan applies: nothing refused goes unnamed."""
    from autograder import cli

    text = "\n".join(forbidden.student_rules())
    listed = (
        set(forbidden.WATCH_PATHS)
        | forbidden.CALLBACK_ATTRIBUTES
        | forbidden.WATCH_ATTRIBUTES
        | forbidden.TAMPER_MODULES
        | forbidden.TAMPER_ATTRIBUTES
        | forbidden.RUNTIME_LOOKUPS
    )
    assert [name for name in sorted(listed) if f"`{name}`" not in text] == []
    assert cli.main(["check", "--rules"]) == 0
    assert capsys.readouterr().out.strip() == "\n\n".join(
        f"- {rule}" for rule in forbidden.student_rules()
    )


def test_a_reader_that_cannot_start_is_the_graders_failure(tmp_path, monkeypatch):
    """Never a row of zeros: a ``SuiteError`` inside a test fails the grading, which the next
    run retries."""
    from autograder.runner import SuiteError

    (tmp_path / "attention.py").write_text("x = 1\n")
    monkeypatch.setattr(forbidden, "_CHILD", "raise SystemExit(3)")
    with pytest.raises(SuiteError, match="reader did not start"):
        forbidden.scan_package(tmp_path)
