"""The rules a student file keeps, in one place: each file's forbidden families, the
allow-list the reader applies, and the text a student reads.

Forbidden library calls (SPEC.md) are refused where they are made, at run time
(``autograder.sandbox.tripwire``): the call fails with an error naming the rule, file and line, and
computes nothing. The reader (``autograder.sources.reader``) keeps out of student files what could take
that watch out or hide code from it, as an allow-list: the modules a file may import
(``IMPORTABLE``, some only for a few names, ``LIMITED``), library objects reached only by public
names, and the facilities that run code out of the grader's sight (``OFF_LIMITS``, the builtins
in ``BUILTINS_OFF``). ``student_rules`` states these tables as the handout README and
``autograder check --rules`` print them.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from autograder.facts import safe_text
from autograder.facts.points import PARTS, part_of_file

SOFTMAX = frozenset(
    {"softmax", "_softmax", "Softmax", "Softmax2d", "softmin", "Softmin"}
    | {"logcumsumexp", "cross_entropy"}  # a softmax in all but name
    | {"log_softmax", "_log_softmax", "LogSoftmax", "logsumexp"}
    | {"special_softmax", "special_log_softmax", "special_logsumexp"}
    | {"_safe_softmax", "_masked_softmax", "gumbel_softmax"}
    | {"_sparse_softmax", "_sparse_log_softmax", "AdaptiveLogSoftmaxWithLoss"}
)
ATTENTION = frozenset(
    {"scaled_dot_product_attention", "_scaled_dot_product_attention_math"}
    | {"_scaled_dot_product_flash_attention", "_scaled_dot_product_cudnn_attention"}
    | {"_scaled_dot_product_efficient_attention", "_fused_sdp_choice"}
    | {"MultiheadAttention", "multi_head_attention_forward"}
    | {"_native_multi_head_attention", "flex_attention"}
    | {"Transformer", "TransformerEncoder", "TransformerEncoderLayer"}
    | {"TransformerDecoder", "TransformerDecoderLayer"}
)
NORMALIZATION = frozenset(
    {"layer_norm", "native_layer_norm", "LayerNorm"}
    | {"rms_norm", "_fused_rms_norm", "RMSNorm"}
    | {"group_norm", "native_group_norm", "GroupNorm"}
    | {"batch_norm", "native_batch_norm", "_native_batch_norm_legit", "SyncBatchNorm"}
    | {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d"}
    | {"LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"}
    | {"instance_norm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"}
    | {"LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"}
    | {"local_response_norm", "LocalResponseNorm", "CrossMapLRN2d"}
    | {
        "renorm",
        "_weight_norm",
        "_weight_norm_interface",
    }  # what divides by a norm for you
)

#: Words that name a library function of each family whatever else its name says (private
#: kernels, variants): what the run-time watch matches a function's name against.
FAMILY_WORDS = {
    SOFTMAX: ("softmax", "softmin", "logsumexp", "logcumsumexp", "cross_entropy"),
    ATTENTION: ("attention", "multihead", "sdp_", "_sdp", "transformer"),
    NORMALIZATION: (
        *("layer_norm", "layernorm", "rms_norm", "rmsnorm", "group_norm", "groupnorm"),
        *("batch_norm", "batchnorm", "instance_norm", "instancenorm"),
        *("local_response_norm", "localresponsenorm", "crossmaplrn"),
        # a library function that divides by a norm or folds a batch norm for the caller
        # (F.normalize, weight_norm, torch.nn.utils.fusion): named on library objects only,
        # so a method of the student's own called normalize stays theirs
        *("normalize", "weight_norm", "fuse_linear_bn", "fuse_conv_bn"),
    ),
}

#: How the rules and the refusals name each family.
FAMILY_NAMES = {
    SOFTMAX: "softmax",
    ATTENTION: "library attention",
    NORMALIZATION: "library normalization",
}

#: file -> names forbidden in it (SPEC.md: parts 1, 3, 6 forbid part 1's list; 5 adds
#: normalization; the char-LM may use a softmax for sampling and the loss, not the layers).
RULES: dict[str, frozenset[str]] = {
    "attention.py": SOFTMAX | ATTENTION,
    "heads.py": SOFTMAX | ATTENTION,
    "gqa.py": SOFTMAX | ATTENTION,
    "norm.py": NORMALIZATION,
    "block.py": NORMALIZATION | SOFTMAX | ATTENTION,
    "charlm.py": NORMALIZATION | ATTENTION,
}

#: The part files with no forbidden list of their own: no library call does their work. Every
#: part file is in RULES or here (tests/engine/test_points.py), so a new part decides.
WITHOUT_RULES = frozenset({"masks.py", "rope.py"})

#: What a file without a forbidden list of its own (masks.py, rope.py) may not call either.
EVERY_FORBIDDEN = frozenset().union(*RULES.values())

#: Most forbidden-call records a worker keeps and sends (each refused call fails where it is
#: made, so the records only name the part's gate and its message).
MAX_RECORDS = 64

# The allow-list --------------------------------------------------------------------------------
#: The modules a student file may import, with their public submodules, by what they are for;
#: the package's own modules may be imported in any form.
IMPORTABLE = {
    "computing": ("torch", "numpy", "math", "cmath", "numbers", "random", "statistics"),
    "the language": (
        *("__future__", "typing", "typing_extensions", "dataclasses", "enum", "abc"),
        *("functools", "itertools", "operator", "collections", "copy", "contextlib"),
        *("warnings", "string", "re", "textwrap", "heapq", "bisect", "importlib", "gc"),
    ),
    "files and the system, which the grader's sandbox confines": (
        *("os", "sys", "pathlib", "glob", "json", "time", "shutil", "tempfile", "io"),
        "struct",
    ),
}
#: Of torch's ``torch.utils``, only what a model or its training needs: the rest holds timers
#: that run a string as code, extension builders and importers by name.
TORCH_UTILS = frozenset({"data"})
ROOTS = frozenset(name for group in IMPORTABLE.values() for name in group)
#: Modules used only by these names: the rest of them reaches the interpreter's frames, tracers
#: and modules, or turns a string into a module.
LIMITED = {
    "sys": frozenset(
        {"exit", "stdout", "stderr", "stdin", "argv", "prefix", "platform", "maxsize"}
        | {"version", "version_info", "float_info", "byteorder", "getsizeof"}
        | {"getrecursionlimit", "setrecursionlimit"}
    ),
    "importlib": frozenset({"import_module"}),
    "gc": frozenset({"collect"}),
}


class Reason(NamedTuple):
    """Why a kind of construct is refused, and what to write instead."""

    why: str
    instead: str


THREADS = Reason(
    why=(
        "code on another thread, in a signal handler or an async task outlives the call that "
        "started it, beyond the grader's time limits and its reports of where a call hung, and "
        "another process or program runs outside the watch of forbidden calls"
    ),
    instead="compute in the calling thread",
)
FRAMES = Reason(
    why=(
        "frames, tracebacks, class hierarchies and the insides of functions and modules reach the "
        "grader's own objects"
    ),
    instead="use your own names and objects",
)
FROM_TEXT = Reason(
    why=(
        "code made from text or compiled (eval, TorchScript, torch.compile, pickles, timers "
        "and registries that evaluate text) has no file and line of yours, by which the "
        "watch of forbidden calls judges what it sees"
    ),
    instead="write the code out in plain Python",
)
INSIDE = Reason(
    why=(
        "torch runs this code inside its own calls (dispatch hooks, `__torch_function__`, custom "
        "operators, tensor and autograd hooks, element-wise Python maps), or it changes which "
        "kernels torch's operators run, where the watch of forbidden calls sits"
    ),
    instead="compute in your own functions, on plain tensors",
)
PRIVATE = Reason(
    why="library objects are reached only by their public names",
    instead="call the public function (or read your own object's attribute on `self`)",
)
IMPORTS = Reason(
    why="it is not among the modules a student file may import",
    instead="compute with torch and the modules the rules list",
)
DYNAMIC = Reason(
    why="a name computed at run time or a namespace handed on hides what it reaches",
    instead="write the name out (`obj.name`), or look it up on `self` or `F`",
)

#: Names refused as an attribute, an import or a definition, and why. Those in ``ANYWHERE``
#: are refused on the student's own objects too; the rest only on library and unknown ones.
OFF_LIMITS = (
    dict.fromkeys(
        {"threading", "_thread", "concurrent", "multiprocessing", "asyncio", "futures"}
        | {"signal", "faulthandler", "sched", "subprocess", "system", "popen"}
        | {"distributed"}
        | {"fork", "forkpty", "vfork", "register_at_fork"}
        | {
            f"exec{suffix}"
            for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
        }
        | {
            f"spawn{suffix}"
            for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
        }
        | {"posix_spawn", "posix_spawnp", "startfile"},
        THREADS,
    )
    | dict.fromkeys(
        {
            "sys",
            "inspect",
            "gc",
            "ctypes",
            "ctypeslib",
            "builtins",
            "types",
            "traceback",
        }
        | {"importlib", "import_module", "importorskip", "__dict__", "__self__"}
        | {"__func__", "__wrapped__", "__getattribute__", "__import__"}
        | {"__setattr__", "__delattr__", "util", "machinery"},
        FRAMES,
    )
    | dict.fromkeys(
        {"jit", "fx", "export", "compiler", "compile", "package", "hub", "f2py"}
        | {"cpp_extension", "jiterator", "serialization", "load_library", "pickle"}
        | {"get_type_hints", "ForwardRef", "Formatter", "make_dataclass", "marshal"}
        # registries that evaluate string annotations, exporters that trace through jit
        | {"singledispatch", "singledispatchmethod", "evaluate_forward_ref", "onnx"}
        | {"get_annotations", "benchmark", "timeit"},  # and timers that run a string
        FROM_TEXT,
    )
    | dict.fromkeys(
        {
            "overrides",
            "library",
            "decompose",
            "cond",
            "while_loop",
            "graph",
            "hooks",
            "register_hook",
        }
        | {"apply_", "map_", "map2_", "register_backward_hook"}
        | {"register_full_backward_hook", "register_full_backward_pre_hook"}
        | {"register_post_accumulate_grad_hook"},
        INSIDE,
    )
)
ANYWHERE = dict.fromkeys(
    {"tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code"}
    | {"gi_frame", "gi_code", "cr_frame", "ag_frame", "__traceback__", "cell_contents"}
    | {"__subclasses__", "__bases__", "__base__", "__mro__", "mro", "__builtins__"}
    | {"__globals__", "__closure__", "__code__"},
    FRAMES,
) | dict.fromkeys(
    {"__torch_function__", "__torch_dispatch__", "__del__", "DisableTorchFunction"}
    | {"DisableTorchFunctionSubclass"},
    INSIDE,
)
#: Library paths allowed despite a name in ``OFF_LIMITS``.
ALLOWED_PATHS = frozenset(
    {
        "re.compile",
        "importlib.import_module",
        "os._exit",
        "torch.backends.cudnn.benchmark",
    }
)
#: Builtins refused where they are not the student's own name: ``getattr``, ``vars`` and
#: ``__import__`` only when handed on; called, they are judged by what they look up.
BUILTINS_OFF = {
    **dict.fromkeys(("eval", "exec", "compile", "breakpoint"), FROM_TEXT),
    **dict.fromkeys(("globals", "locals"), FRAMES),
}
HANDED_ON = frozenset({"getattr", "vars", "__import__"})
#: Library functions that import or look up by a string: called with the string written out,
#: never handed on as values (to a ``__reduce__``, a ``map``, a registry) nor called with
#: starred arguments.
IMPORTERS = frozenset({"importlib.import_module"})
#: Builtins and library functions judged by their arguments: a starred argument (``getattr(
#: *names)``) or ``**`` keywords hide those, so the call is judged as computed, and refused.
JUDGED_BY_ARGUMENTS = frozenset({"getattr", "setattr", "vars", "__import__", "type"})
JUDGED_PATHS = IMPORTERS | {"operator.attrgetter", "operator.methodcaller"}
#: Methods that look an attribute up by a string, judged as ``getattr`` is.
LOOKUP_METHODS = frozenset({"__getattr__", "__getattribute__"})
#: Library namespaces of functions and classes only, where a computed ``getattr`` is judged
#: when what it finds is called (``getattr(F, self.activation)``).
LOOKUPS = frozenset(
    {"torch.nn.functional", "torch.nn", "torch.nn.init", "torch.special"}
    | {"torch.linalg", "torch.fft", "math"}
)
#: Keyword arguments that load pickles, which run code as they load.
PICKLES = {"weights_only": True, "allow_pickle": False, "pickle_module": None}


@dataclasses.dataclass(frozen=True)
class Violation:
    file: str
    line: int
    call: str  # the construct as written, e.g. "torch.softmax"
    #: It costs every part: it is in a file without a forbidden list of its own, which serves
    #: the files that have one.
    whole: bool = False
    #: Why it is refused and what to write instead; empty for a forbidden call.
    advice: str = ""

    @property
    def part(self) -> int:
        return part_of_file(self.file)

    @property
    def parts(self) -> tuple[int, ...]:
        return tuple(PARTS) if self.whole else (self.part,)

    def describe(self) -> str:
        line = f":{self.line}" if self.line else ""
        where = f"{self.file}{line} uses `{self.call}`"
        cost = "every part" if self.whole else "this part"
        if self.advice:
            return (
                f"{where if self.call else self.file}: {self.advice}; it costs {cost}"
            )
        if self.whole:
            return (
                f"{where}, a library function the parts that use this file forbid (SPEC.md); "
                "a file without a forbidden list of its own may not call them for the others, "
                "so it costs every part"
            )
        return (
            f"{where}, a library function this part forbids (SPEC.md); write it yourself "
            "from tensor operations"
        )


def student_rules() -> list[str]:
    """The rules beyond each file's forbidden list, as a student reads them (Markdown), made
    from the tables the reader applies: the handout README and ``autograder check --rules``
    print these, so what students read is what is checked."""

    def names(items) -> str:
        return ", ".join(
            f"`{n}`" for n in sorted(set(items), key=lambda n: n.lstrip("_"))
        )

    # Names allowed in part (``sys.exit``, ``importlib.import_module``) are stated there.
    partly = {*LIMITED, *(name for names in LIMITED.values() for name in names)}

    def refused(reason: Reason, *more: str) -> str:
        tables = (OFF_LIMITS, ANYWHERE, BUILTINS_OFF)
        found = (n for t in tables for n, r in t.items() if r is reason)
        return names([*(n for n in found if n not in partly), *more])

    groups = "; ".join(
        f"for {what}: {names(mods)}" for what, mods in IMPORTABLE.items()
    )
    limited = ", ".join(f"`{m}` only for {names(n)}" for m, n in LIMITED.items())
    return [
        (
            "A forbidden call is refused when your code makes it, however it is reached (an "
            "alias, a computed name, a library class that calls one inside, another thread or "
            "process): it raises an error that names the rule, your file and line, computes "
            "nothing, and fails the test, and the part's other tests with it. `autograder "
            "check` also names one written out. The rules below keep that watch able to see."
        ),
        (
            f"Import only these modules and their public submodules ({groups}), and your own "
            "modules in any form (`from .attention import softmax`, `from transformer_hw "
            'import masks`, `importlib.import_module(".attention", __package__)`). Use '
            f"{limited}, each written out (`sys.exit(1)`, not `s = sys`). Of `torch.utils`, "
            f"import only {names(f'torch.utils.{m}' for m in TORCH_UTILS)}: the rest holds "
            "timers that run text as code and importers by name."
        ),
        (
            "Reach library objects only by their public names: no attribute or imported name "
            "that starts with `_` (dunders such as `__init__` aside) but on your own objects, "
            "directly: `self._cache`, `cls._table`, `super()._f`, `type(self)._f`, `_k._x` for "
            "`_k = MyClass()`, `attention._helper` for your module `attention`. A private "
            "method one of your classes defines (`def _device(self)`) may be called on any "
            "object (`model._device()`), unless a library binds that name to something no "
            "public name reaches (`_C`, `_parameters`): then only on your objects, directly."
        ),
        (
            "Write names out. A `getattr` with a computed name is fine on `self`, your own "
            f"objects, and on {names(LOOKUPS)} where what it finds is called at once "
            "(`getattr(F, self.activation)(x)`: the function it finds is judged when it is "
            "called; not `act = getattr(F, name)`), nowhere else; `setattr` with a computed "
            "name only on `self`; `getattr`, `vars`, `__import__` and "
            "`importlib.import_module` are called, never handed on as values. Their "
            "arguments are written out too: a starred argument or `**` keywords to "
            "`getattr`, `setattr`, `vars`, `type`, `__import__`, `importlib.import_module` or "
            "`operator.attrgetter` and `methodcaller` count as a computed name."
        ),
        (
            "No threads, other processes or programs, async tasks or signal handlers "
            f"({refused(THREADS)}): {THREADS.why}; {THREADS.instead}."
        ),
        (
            "No frames, tracebacks, class hierarchies or insides of functions and modules "
            f"({refused(FRAMES)}, and {names(LIMITED)} beyond the names above): "
            f"{FRAMES.why}; {FRAMES.instead}."
        ),
        (
            f"No code made from text or compiled ({refused(FROM_TEXT)}, `type` with three "
            f"arguments, `metaclass=`, loading pickles through {names(PICKLES)}), nor "
            "registries that evaluate annotations written as text: "
            f"{FROM_TEXT.why}; {FROM_TEXT.instead}."
        ),
        (
            "Nothing torch runs inside its own calls, and nothing that switches its dispatch "
            f"off ({refused(INSIDE)}): {INSIDE.instead}. Module forward hooks are fine."
        ),
        (
            f"The names {names(ANYWHERE)} are refused on your own objects too; the other names "
            "above only on library objects and objects of unknown origin (a method `compile` "
            "of your own class is fine as `self.compile`)."
        ),
        (
            "Names used only in annotations, or imported under `typing.TYPE_CHECKING`, are not "
            'uses; everything else in the file is read, `if __name__ == "__main__":` blocks '
            "included. Keep experiments with library functions in a script outside "
            "`transformer_hw/`."
        ),
        (
            "Breaking a rule costs the part of the file that breaks it; in `masks.py` and "
            "`rope.py`, which serve every part, it costs every part. The feedback names the "
            "construct, its file and line, and what to write instead."
        ),
        (
            f"Each module file is at most {MAX_MODULE // 1024} KB of ordinary code: one that "
            f"cannot be read within {READ_SECONDS} s and {READ_MEMORY >> 30} GiB of memory, or "
            "does not parse, costs its own part."
        ),
        (
            "Only the module files in the table above are graded. Another file in "
            "`transformer_hw/` (a `_utils.py` of helpers, say) is left out, and code that "
            "imports it fails: keep helpers in the module files that use them."
        ),
    ]


def by_part(violations) -> dict[int, list[str]]:
    """Descriptions of the violations, grouped by the parts whose points they cost: each
    construct described once per file, with the lines of its other uses, and at most
    ``MORE_LINES`` constructs per file and rule, the rest counted; so a file that breaks a rule
    thousands of times costs a few lines to describe."""
    rules: dict[tuple[str, bool, str], dict[str, list[Violation]]] = {}
    for v in sorted(violations, key=lambda v: (v.line, v.call)):
        rule = rules.setdefault((v.file, v.whole, v.advice), {})
        rule.setdefault(v.call, []).append(v)
    grouped: dict[int, list[str]] = {}
    for constructs in rules.values():
        texts = [_described(uses) for uses in list(constructs.values())[:MORE_LINES]]
        rest = list(constructs.values())[MORE_LINES:]
        if rest:
            lines = sorted({v.line for uses in rest for v in uses})
            texts[-1] += (
                f"; and {len(rest)} more constructs breaking the same rule "
                f"(lines {_lines(lines)})"
            )
        for part in next(iter(constructs.values()))[0].parts:
            grouped.setdefault(part, []).extend(texts)
    return grouped


def _described(uses: list[Violation]) -> str:
    """One construct's description, with the lines of its other uses."""
    others = sorted({v.line for v in uses[1:] if v.line} - {uses[0].line})
    text = uses[0].describe()
    return f"{text} (also on lines {_lines(others)})" if others else text


def _lines(lines: list[int]) -> str:
    return safe_text.first_of(map(str, lines), MORE_LINES)


#: Lines of further uses, and constructs per file and rule, that a description lists.
MORE_LINES = 5


#: Most bytes of one module file that is read at all (staging grades no larger file either);
#: the reference's largest module is 13 KB.
MAX_MODULE = 512 * 1024
#: What reading a package may take, in a child process: generous multiples of what the
#: reference takes (0.03 s, 40 MB), so a loaded machine never reaches them.
READ_SECONDS = 60
READ_MEMORY = 1 << 30
