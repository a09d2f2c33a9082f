"""Forbidden library calls (SPEC.md), found statically in a submission's source, and the rules
that keep the run-time watch (``autograder.tripwire``) able to see the rest.

The scan reads every student file and resolves names before it judges them: what each name can
be bound to in the scope Python looks it up in (a function's locals, enclosing functions, the
module; ``global`` and ``nonlocal`` obeyed), what ``self.<attribute>`` and a module attribute can
be bound to anywhere in the file (aliases, imports of another student file, ``self = torch``),
what a dynamic import or attribute reaches when its target is a constant
(``__import__("warnings")``, ``getattr(torch, "softmax")``, ``sys.modules["torch"]``). A use is
an attribute access or imported name that reaches the library function, here or in another
student file; names of the student's own package, comments, strings, a library class only
tested against or named in an annotation, and imports under ``typing.TYPE_CHECKING`` never
count. Library names also match by family (``FAMILY_WORDS``). A file without a forbidden list of
its own (masks.py, rope.py) is read with every list, at the cost of every part.

What could switch the watch off or hide from it is refused too (``WATCH_PATHS``,
``WATCH_ATTRIBUTES``, ``CALLBACK_ATTRIBUTES``, private names of library objects), and so is what
the scan cannot follow (code built from strings, the grader's own modules, ``TAMPER_*``); a
computed attribute of the namespaces in ``RUNTIME_LOOKUPS`` is left to the watch, which sees the
call it makes. ``student_rules`` states all of it as the handout prints it. The scan runs in a
child process under a time and memory budget (``scan_package``): a file it cannot read costs its
own part.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections import deque
from pathlib import Path

from autograder.points import MODULES, PACKAGE, PARTS, part_of_file

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
)

#: Words that name a library function of each family whatever else its name says (private
#: kernels, variants): what a library path is checked against besides the lists.
FAMILY_WORDS = {
    SOFTMAX: ("softmax", "softmin", "logsumexp", "logcumsumexp", "cross_entropy"),
    ATTENTION: ("attention", "multihead", "sdp_", "_sdp", "transformer"),
    NORMALIZATION: (
        *("layer_norm", "layernorm", "rms_norm", "rmsnorm", "group_norm", "groupnorm"),
        *("batch_norm", "batchnorm", "instance_norm", "instancenorm"),
        *("local_response_norm", "localresponsenorm", "crossmaplrn"),
    ),
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

#: What a file without a forbidden list of its own may not call either.
EVERY_FORBIDDEN = frozenset().union(*RULES.values())

#: Modules whose only use here is to reach around the rules: the grader itself, and tools that
#: read any object or frame of the process.
TAMPER_MODULES = frozenset(
    {"autograder", "tests", "ctypes", "gc", "inspect"}
    # what turns a string into an object: a name resolved, a pickle loaded, code run
    | {"pickle", "_pickle", "copyreg", "marshal", "shelve", "pkgutil", "pydoc", "runpy"}
    | {"code", "codeop", "_operator", "builtins"}
)
#: Library objects that resolve a dotted name from a string.
STRING_RESOLVERS = ("string.Formatter", "importlib.util", "importlib.machinery")
#: Builtins that look up, set or run by a string: fine called directly (the call is judged),
#: an evasion handed on as a value (``functools.partial(getattr, ...)``, ``[getattr][0]``).
DYNAMIC_BUILTINS = frozenset(
    {"getattr", "setattr", "delattr", "vars", "globals", "locals", "__import__"}
    | {"eval", "exec", "compile", "breakpoint"}
)
#: What of ``gc`` reaches no object: ``import gc`` for ``gc.collect()`` is fine, any other use
#: of the module (``gc.get_referents``, the module handed on) is not.
GC_HARMLESS = frozenset({"collect", "enable", "disable", "isenabled"})
#: Attributes that open a function or a namespace: its globals, closure cells, code, original.
TAMPER_ATTRIBUTES = frozenset(
    {"__globals__", "__closure__", "cell_contents", "__code__", "__wrapped__"}
    | {"__builtins__", "__dict__"}
)


#: What could switch the run-time watch off, refused in every student file at the cost of its
#: part (``WATCH_RULES``): each kind of construct, the names that make it, what to write instead.
CONCURRENCY = "threads, processes, async tasks and signal handlers run code the watch of forbidden calls does not follow; compute in the calling thread"
WATCH_MACHINERY = "torch's dispatch hooks, C bindings and compilers (torch.compile, TorchScript) are what the watch of forbidden calls is built on or runs outside it; call public torch functions from plain Python"
CALLBACKS = "torch runs these callbacks inside its own calls (custom operators, control-flow operators, tensor and autograd hooks, element-wise Python maps), where the watch of forbidden calls cannot follow; compute in your own functions"
INTROSPECTION = "frames, tracebacks, class hierarchies and bound methods' owners open the grader's own objects; use your own names and objects"
PRIVATE = (
    "library objects are reached only by their public names; call the public function"
)
#: Modules and library paths (a prefix of what a name resolves to) that are refused.
WATCH_PATHS = {
    **dict.fromkeys(
        ("threading", "_thread", "concurrent", "multiprocessing", "asyncio"),
        CONCURRENCY,
    ),
    **dict.fromkeys(("signal", "faulthandler", "torch.multiprocessing"), CONCURRENCY),
    **dict.fromkeys(("sys.settrace", "sys.setprofile", "sys._getframe"), INTROSPECTION),
    **dict.fromkeys(
        ("torch.overrides", "torch.utils._python_dispatch"), WATCH_MACHINERY
    ),
    **dict.fromkeys(("torch._C", "torch._dynamo", "torch.compile"), WATCH_MACHINERY),
    **dict.fromkeys(("torch.jit", "torch.export", "torch.fx"), WATCH_MACHINERY),
    **dict.fromkeys(
        ("torch.library", "torch.cond", "torch.while_loop", "torch._higher_order_ops"),
        CALLBACKS,
    ),
    **dict.fromkeys(("torch.autograd.graph", "torch.utils.hooks"), CALLBACKS),
}
#: Library names that are public despite their underscore (documented as such).
PUBLIC_UNDERSCORED = frozenset({"os._exit"})
#: Methods refused whatever they are read on: torch calls them back from inside its own calls.
CALLBACK_ATTRIBUTES = frozenset(
    {"register_hook", "register_post_accumulate_grad_hook", "apply_", "map_", "map2_"}
)
#: Attributes refused whatever they are read on (``__self__`` only on a library object).
WATCH_ATTRIBUTES = frozenset(
    {"tb_frame", "f_back", "f_globals", "f_locals", "f_builtins", "gi_frame"}
    | {
        "cr_frame",
        "ag_frame",
        "__traceback__",
        "__subclasses__",
        "__bases__",
        "__base__",
    }
    | {"__mro__", "__getattribute__", "__self__"}
)


@dataclasses.dataclass(frozen=True)
class Violation:
    file: str
    line: int
    call: str  # the expression as written, e.g. "torch.softmax"
    evasion: bool = False  # a construct that hides which function it reaches
    #: It could change any part's verdict, so it costs every part: an evasion (what it reaches,
    #: or where its result goes, the scan cannot follow), or a call in a file without a
    #: forbidden list of its own (which only serves the files that have one).
    whole: bool = False
    #: Why it is refused and what to write instead, for a rule that says so itself.
    advice: str = ""

    @property
    def part(self) -> int:
        return part_of_file(self.file)

    @property
    def parts(self) -> tuple[int, ...]:
        return tuple(PARTS) if self.whole else (self.part,)

    def describe(self) -> str:
        where = f"{self.file}:{self.line} uses `{self.call}`"
        if self.advice:
            cost = "every part" if self.whole else "this part"
            return (
                f"{where if self.call else self.file}: {self.advice}; it costs {cost}"
            )
        if self.evasion:
            cost = "every part" if self.whole else "this part"
            return (
                f"{where}, which hides which library function it reaches or reaches into "
                "the grader; no student file may (the README's Forbidden calls: write library "
                f"calls out by name), so it costs {cost}"
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
    from the lists the scan applies: the handout README and ``autograder check --rules``
    print these, so what students read is what is checked."""

    def names(items) -> str:
        return ", ".join(f"`{n}`" for n in sorted(items, key=lambda n: n.lstrip("_")))

    def paths(advice: str) -> str:
        return names(p for p, a in WATCH_PATHS.items() if a == advice)

    return [
        (
            "Write library calls out by name. A `getattr` with a computed name is fine on "
            f"{names(RUNTIME_LOOKUPS)} (what it reaches is judged when it is called) and on "
            "your own objects (`self`, `cls`, `super()`, instances of your classes); on any "
            "other library module or object, and `getattr`, `setattr` or `vars` handed on as "
            "values rather than called, it hides which function it reaches and costs every part."
        ),
        (
            'The check reads the whole file, `if __name__ == "__main__":` blocks included; '
            "names used only in annotations or under `typing.TYPE_CHECKING` are not uses. Keep "
            "comparisons against library functions in a script of your own, outside "
            "`transformer_hw/`."
        ),
        (
            f"No threads, processes, async tasks or signal handlers ({paths(CONCURRENCY)}): "
            "compute in the calling thread."
        ),
        (
            f"No compilers or dispatch hooks ({paths(WATCH_MACHINERY)}), and nothing torch calls "
            f"back from inside its own calls ({paths(CALLBACKS)}, the methods "
            f"{names(CALLBACK_ATTRIBUTES)}): the watch of forbidden calls cannot follow them. "
            "Module forward hooks are fine."
        ),
        (
            "No frames, tracebacks or class hierarchies "
            f"({names(WATCH_ATTRIBUTES)}, {paths(INTROSPECTION)}), and library objects only by "
            "their public names (no attribute that starts with `_`, `os._exit` aside). Each of "
            "these rules costs the part of the file that breaks it."
        ),
        (
            "No file may reach into the grader or turn a string into an object: importing any of "
            f"{names(TAMPER_MODULES)} (`import gc` for `gc.collect()` is fine; to save objects "
            'use `torch.save` or `json`), using `sys.modules` other than `sys.modules["name"]`, '
            f"{names(TAMPER_ATTRIBUTES)}, {names({'eval', 'exec', 'compile'})}. Any of these "
            "costs every part."
        ),
        (
            f"Each module file is at most {MAX_MODULE // 1024} KB of ordinary code: one that "
            f"cannot be read within {READ_SECONDS} s and {READ_MEMORY >> 30} GiB of memory costs "
            "its own part."
        ),
        (
            "Only the module files in the table above are graded. Another file in "
            "`transformer_hw/` (a `_utils.py` of helpers, say) is left out, and code that imports "
            "it fails: keep helpers in the module files that use them. Importing your own "
            "modules in any form (absolute, relative, `importlib.import_module`) is fine."
        ),
    ]


def by_part(violations) -> dict[int, list[str]]:
    """Descriptions of the violations, grouped by the parts whose points they cost."""
    grouped: dict[int, list[str]] = {}
    for v in violations:
        for part in v.parts:
            grouped.setdefault(part, []).append(v.describe())
    return grouped


def scan_source(filename: str, source: str) -> list[Violation]:
    """Violations in one file's source, read on its own (other student files unknown), in this
    process: for tests and trusted text."""
    return _Package({filename: source}).violations(filename)


#: Most bytes of one module file that is read at all (staging grades no larger file either);
#: the reference's largest module is 13 KB.
MAX_MODULE = 512 * 1024
#: What reading a package may take, in a child process: generous multiples of what the
#: reference takes (0.03 s, 40 MB), so a loaded machine never reaches them.
READ_SECONDS = 60
READ_MEMORY = 1 << 30


def read_source(data: bytes) -> str:
    """A student file's text as Python's import reads it (its BOM or coding line obeyed, line
    ends made ``\\n``), so the scan sees what runs; bytes that do not decode are replaced."""
    try:
        return importlib.util.decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("utf-8", errors="replace")


def scan_package(package_dir: Path) -> list[Violation]:
    """Violations in every file of a ``transformer_hw`` directory, read together.

    The text is untrusted and the caller may be the grading process, so it is read in a child
    process under ``READ_SECONDS`` and ``READ_MEMORY``: a file that
    cannot be read within them, or at all, is that file's violation, and the others are read
    again without it."""
    sources, violations = {}, []
    for name in MODULES:
        path = Path(package_dir) / f"{name}.py"
        if path.is_file():
            with open(path, "rb") as f:
                data = f.read(MAX_MODULE + 1)
            if len(data) > MAX_MODULE:
                violations.append(
                    unreadable(path.name, f"it is over {MAX_MODULE >> 10} KB")
                )
            else:
                sources[path.name] = read_source(data)
    while sources:
        found, failed = _read_in_child(sources)
        if failed is None:
            violations += [Violation(**v) for v in found]
            break
        filename, why = failed
        violations.append(unreadable(filename, why))
        del sources[filename]
    return sorted(violations, key=lambda v: (v.file, v.line, v.call))


def unreadable(filename: str, why: str) -> Violation:
    """The violation of a file the scan could not read: only its own part, as a file that does
    not compile."""
    return Violation(
        filename,
        1,
        "",
        advice=f"{why}, so it cannot be checked for forbidden calls; write ordinary code "
        "(statements rather than one vast expression, no deep nesting, no generated tables)",
    )


def scan_reporting(sources: dict[str, str], progress) -> list[Violation]:
    """``scan_package``'s reading, with ``progress(filename)`` called as each file's turn
    comes (parsing, binding, judging), so a reader stopped on the way names the file."""
    package = _Package(sources, progress)
    found = []
    for filename in sorted(sources):
        progress(filename)
        found += package.violations(filename)
    return found


# Reading under a budget ----------------------------------------------------------------------
#: The folder ``autograder`` is imported from, for the child.
_ENGINE_ROOT = str(Path(__file__).resolve().parent.parent)
_CHILD = (
    "import sys; sys.path.append(sys.argv[1]); "
    "from autograder.forbidden import child_main; child_main(int(sys.argv[2]))"
)


def _read_in_child(sources: dict[str, str]):
    """``(violations as dicts, None)``, or ``([], (file, why))`` when reading stopped on that
    file: it raised, ran out of time or memory, or the child died reading it."""
    command = [sys.executable, "-I", "-S", "-c", _CHILD, _ENGINE_ROOT, str(READ_MEMORY)]
    stderr = b""
    try:
        done = subprocess.run(
            command,
            input=json.dumps(sources).encode(),
            capture_output=True,
            timeout=READ_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        lines, why = _lines(exc.stdout), f"reading it took over {READ_SECONDS} s"
    else:
        lines, stderr = _lines(done.stdout), done.stderr
        why = f"reading it stopped the reader (exit status {done.returncode})"
        if lines and "violations" in lines[-1]:
            return lines[-1]["violations"], None
        if lines and "failed" in lines[-1]:
            why = lines.pop()["failed"]
    at = [line["at"] for line in lines if "at" in line]
    if not at:  # it never began: the engine's fault, not the file's
        from autograder.runner import SuiteError  # a grader's failure, never a zero

        detail = (stderr or b"").decode(errors="replace")[-2000:]
        raise SuiteError(f"the forbidden-call reader did not start: {detail}")
    return [], (at[-1], why)


def _lines(output: bytes | None) -> list[dict]:
    """The child's complete lines (a line cut short by a kill is dropped)."""
    lines = []
    for line in (output or b"").split(b"\n"):
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


def child_main(memory: int) -> None:
    """The child: caps its own memory before it reads anything, then reads the sources from
    stdin and writes a line as each file's turn comes, and the violations last."""
    try:
        import resource  # POSIX only; elsewhere the time budget alone holds
    except ImportError:
        pass
    else:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    sources = json.loads(sys.stdin.buffer.read())
    out = sys.stdout

    def progress(filename: str) -> None:
        out.write(json.dumps({"at": filename}) + "\n")
        out.flush()

    try:
        found = scan_reporting(sources, progress)
    except RecursionError:
        failed = "its code is nested too deeply to read"
    except MemoryError:
        failed = (
            f"it is too complex to read within {memory >> 30} GiB of memory (Python's "
            "parser overflows its stack on such code)"
        )
    else:
        found = [dataclasses.asdict(v) for v in found]
        out.write(json.dumps({"violations": found}) + "\n")
        return
    out.write(json.dumps({"failed": failed}) + "\n")


# What a name can be bound to ----------------------------------------------------------------
# ("lib", "torch.nn.functional")  a library object, by its import path
# ("own", "attention.softmax")    the student's own module, function, class or object
# ("hidden", "masks.py:3")        reached by a construct the scan cannot resolve
# ("opaque", "")                  anything else: a tensor, a number, a call's result

OPAQUE = ("opaque", "")
#: Most values one name may be bound to, and the longest attribute chain followed: beyond
#: them a name or an expression is opaque (and so judged conservatively). Aliases of aliases
#: would otherwise multiply from round to round, in the grading process.
MAX_VALUES = 64
MAX_CHAIN = 32


#: The nodes that bind a name (``_Module.bind_all``).
_BINDERS = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.Assign,
    ast.AnnAssign,
    ast.NamedExpr,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.withitem,
    ast.AugAssign,
    ast.ExceptHandler,
)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: The nodes that make a name local to a scope, or declare it another scope's.
_NAME_BINDERS = frozenset(
    {ast.Name, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef}
    | {ast.ClassDef, ast.arg, ast.ExceptHandler, ast.Global, ast.Nonlocal}
)


class _Module:
    """One student file: its syntax tree and what each of its names may be bound to, scope by
    scope (a function's local ``norm`` is not the module ``norm`` another function uses)."""

    def __init__(self, package: _Package, filename: str, source: str):
        self.package, self.filename = package, filename
        try:
            self.tree = ast.parse(source)
        except (SyntaxError, ValueError):
            self.tree = ast.Module(body=[], type_ignores=[])
        #: (scope, name) -> values; ``self.<attribute>`` -> values, for the whole file.
        self.bindings: dict[tuple[ast.AST, str], set[tuple[str, str]]] = {}
        self.attributes: dict[str, set[tuple[str, str]]] = {}
        # One walk of the tree, kept: the binding rounds and the judging read its nodes again
        # (walking anew each time cost most of a scan).
        self.nodes: list[ast.AST] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        todo = deque([self.tree])
        while todo:
            node = todo.popleft()
            self.nodes.append(node)
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
                todo.append(child)
        self.binders = [n for n in self.nodes if isinstance(n, _BINDERS)]
        self.class_names = {n.name for n in self.nodes if isinstance(n, ast.ClassDef)}
        #: Each name's and each attribute's nodes, and what another file may import from
        #: this one: found once, so that judging a name costs its uses, not the file.
        self.uses: dict[str, list[ast.AST]] = {}
        self.mentions: set[str] = set()
        for node in self.nodes:
            if isinstance(node, ast.Name):
                self.uses.setdefault(node.id, []).append(node)
            elif isinstance(node, ast.Attribute):
                self.uses.setdefault(node.attr, []).append(node)
                self.mentions.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                self.mentions.update(a.name for a in node.names)
        self._scope_cache: dict[ast.AST, ast.AST] = {}
        self.local_names, self.declared = self._scope_names()
        self._homes: dict[tuple[ast.AST, str], ast.AST | None] = {}
        self._saturated: set = set()  # bindings grown past MAX_VALUES: opaque for good
        self._resolved: dict[ast.AST, tuple[int, set]] = {}
        self._kept_uses: dict[tuple[ast.AST, str], tuple[list[ast.AST], bool]] = {}
        self.type_checking_only = self._type_checking_blocks()

    def _type_checking_blocks(self) -> set[ast.AST]:
        """The nodes under ``if TYPE_CHECKING:`` (``typing``'s, never bound again here): they
        never run, so what they import only serves annotations."""
        guards = [
            node
            for node in self.nodes
            if isinstance(node, ast.If)
            and isinstance(node.test, (ast.Name, ast.Attribute))
            and getattr(node.test, "id", getattr(node.test, "attr", ""))
            == "TYPE_CHECKING"
        ]
        if not guards or not self._type_checking_is_typing():
            return set()
        return {inner for g in guards for top in g.body for inner in ast.walk(top)}

    def _type_checking_is_typing(self) -> bool:
        """``TYPE_CHECKING`` is bound only by an import from ``typing`` and only read."""
        for node in self.uses.get("TYPE_CHECKING", ()):
            if not isinstance(node.ctx, ast.Load):
                return False
        for node in self.nodes:
            if isinstance(node, ast.ImportFrom) and any(
                (a.asname or a.name) == "TYPE_CHECKING" for a in node.names
            ):
                if node.module != "typing" or any(
                    a.asname not in (None, "TYPE_CHECKING")
                    for a in node.names
                    if a.name == "TYPE_CHECKING"
                ):
                    return False
            elif (
                isinstance(node, (ast.Global, ast.Nonlocal))
                and "TYPE_CHECKING" in node.names
            ):
                return False
        return True

    # Scopes, as Python's compiler sees them ----------------------------------------------------
    def scope_of(self, node: ast.AST) -> ast.AST:
        """The scope ``node`` is evaluated in. A function's decorators, defaults and annotations
        belong to the scope around it, as does a comprehension's first iterable."""
        if node in self._scope_cache:
            return self._scope_cache[node]
        child, grandchild, parent = node, None, self.parents.get(node)
        while parent is not None:
            if isinstance(parent, ast.Module):
                break
            if isinstance(
                parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                if child in parent.body:
                    break
            elif isinstance(parent, ast.Lambda):
                if child is parent.body:
                    break
            elif isinstance(parent, _COMPREHENSIONS):
                first = parent.generators[0]
                if not (child is first and grandchild is first.iter):
                    break
            child, grandchild, parent = parent, child, self.parents.get(parent)
        scope = self.tree if parent is None else parent
        self._scope_cache[node] = scope
        return scope

    def _scope_names(self):
        """The names each scope binds, and those it declares ``global`` or ``nonlocal``."""
        local_names: dict[ast.AST, set[str]] = {}
        declared: dict[ast.AST, dict[str, str]] = {}

        def bound(scope, name):
            local_names.setdefault(scope, set()).add(name)

        for node in self.nodes:
            kind = type(node)
            if kind not in _NAME_BINDERS:
                continue
            if kind is ast.Name:
                if type(node.ctx) is ast.Load:
                    continue
                bound(self.binding_scope(node), node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    if a.name != "*":
                        bound(self.scope_of(node), a.asname or a.name.split(".")[0])
            elif isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                bound(self.scope_of(node), node.name)
            elif isinstance(node, ast.arg):
                bound(self.parents[self.parents[node]], node.arg)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                bound(self.scope_of(node), node.name)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                how = "global" if kind is ast.Global else "nonlocal"
                for name in node.names:
                    declared.setdefault(self.scope_of(node), {})[name] = how
        return local_names, declared

    def binding_scope(self, where: ast.AST) -> ast.AST:
        """The scope the statement or target ``where`` binds its names in: its own, but an
        assignment expression inside a comprehension binds outside it (PEP 572)."""
        scope = self.scope_of(where)
        if isinstance(self.parents.get(where), ast.NamedExpr):
            while isinstance(scope, _COMPREHENSIONS):
                scope = self.scope_of(scope)
        return scope

    def home(self, scope: ast.AST, name: str) -> ast.AST | None:
        """The scope whose binding of ``name`` a use in ``scope`` reads (and an assignment
        there writes), or None: a builtin or an unbound name. Class bodies are not seen from
        the functions inside them."""
        key = (scope, name)
        if key not in self._homes:
            self._homes[key] = self._find_home(scope, name)
        return self._homes[key]

    def _find_home(self, scope: ast.AST, name: str) -> ast.AST | None:
        kind = self.declared.get(scope, {}).get(name)
        if kind == "global":
            return self.tree
        if kind is None and name in self.local_names.get(scope, ()):
            return scope
        while scope is not self.tree:
            scope = self.scope_of(scope)
            if isinstance(scope, ast.ClassDef):
                continue
            if name in self.declared.get(scope, {}) or name in self.local_names.get(
                scope, ()
            ):
                return self.home(scope, name)
        return None

    # Collecting bindings --------------------------------------------------------------------
    def bind_all(self) -> None:
        """One round of collection (what it learns grows ``package.version``)."""
        for node in self.binders:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self._bind(node, a.asname, self._module_value(a.name))
                    else:  # import torch.nn.functional binds torch
                        top = a.name.split(".")[0]
                        self._bind(node, top, self._module_value(top))
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name != "*":
                        name = a.asname or a.name
                        self._bind(node, name, self._imported(node, a.name))
            elif isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                self._bind(node, node.name, {("own", self._own(node.name))})
                if not isinstance(node, ast.ClassDef):
                    self._bind_arguments(node, own_self=True)
            elif isinstance(node, ast.Lambda):
                self._bind_arguments(node, own_self=False)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                if node.value is not None:
                    for target in targets:
                        self._assign(target, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self._assign_opaque(node.target)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._assign_opaque(node.optional_vars)
            elif isinstance(node, ast.AugAssign):
                self._assign_opaque(node.target)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._bind(node, node.name, {OPAQUE})

    def _bind_arguments(self, function: ast.AST, own_self: bool) -> None:
        """A function's parameters, bound in its own scope (``self`` and ``cls`` of a def are
        the student's own object)."""
        args = function.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            own = own_self and arg.arg in ("self", "cls")
            self._bind_in(function, arg.arg, {("own", "self")} if own else {OPAQUE})
        for arg in (args.vararg, args.kwarg):
            if arg is not None:
                self._bind_in(function, arg.arg, {OPAQUE})

    def _bind(self, where: ast.AST, name: str, values) -> None:
        """Bind ``name`` as the statement or target ``where`` does, in its scope."""
        self._bind_in(self.binding_scope(where), name, values)

    def _bind_in(self, scope: ast.AST, name: str, values) -> None:
        key = (self.home(scope, name) or scope, name)
        self._add_values(self.bindings, key, values)
        if key[0] is scope and isinstance(scope, ast.ClassDef):
            self._bind_attribute(name, values)  # a class attribute is also self.<name>

    def _bind_attribute(self, attr: str, values) -> None:
        self._add_values(self.attributes, attr, values)

    def _add_values(self, table: dict, key, values) -> None:
        if (id(table), key) in self._saturated:
            return
        bound = table.setdefault(key, set())
        size = len(bound)
        bound.update(values)
        if len(bound) != size:
            self.package.version += 1
        if len(bound) > MAX_VALUES:
            table[key] = {OPAQUE}
            self._saturated.add((id(table), key))

    def module_binding(self, name: str) -> set[tuple[str, str]] | None:
        """What the module attribute ``name`` may be bound to."""
        return self.bindings.get((self.tree, name))

    def _assign(self, target: ast.AST, value: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(
                target.elts
            ):
                for t, v in zip(target.elts, value.elts):
                    self._assign(t, v)
            else:
                self._assign_opaque(target)
        elif isinstance(target, ast.Name):
            self._bind(target, target.id, self.resolve(value))
        elif isinstance(target, ast.Attribute) and self._is_self(target.value):
            self._bind_attribute(target.attr, self.resolve(value))

    def _assign_opaque(self, target: ast.AST) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                self._bind(node, node.id, {OPAQUE})
            elif isinstance(node, ast.Attribute) and self._is_self(node.value):
                self._bind_attribute(node.attr, {OPAQUE})

    def _is_self(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and ("own", "self") in (
            self._name_value(node) or ()
        )

    def _own(self, name: str) -> str:
        return f"{self.filename.removesuffix('.py')}.{name}"

    def _module_value(self, dotted: str) -> set[tuple[str, str]]:
        parts = dotted.split(".")
        if parts[0] == PACKAGE:
            return {("own", ".".join(parts[1:]) or PACKAGE)}
        if parts[0] in MODULES:  # ``import attention``, a script's fallback import
            return {("own", dotted)}
        return {("lib", dotted)}

    def _imported(self, node: ast.ImportFrom, name: str) -> set[tuple[str, str]]:
        module = node.module or ""
        if _own_import(node):
            inner = (
                module.split(".", 1)[1] if module.startswith(PACKAGE + ".") else module
            )
            if node.level > 0 and not module:
                return {("own", name)}  # from . import attention
            return self.package.attribute({("own", inner or PACKAGE)}, name)
        return {("lib", f"{module}.{name}")}

    # Resolving an expression -----------------------------------------------------------------
    def resolve(self, node: ast.AST) -> set[tuple[str, str]]:
        """What ``node`` may be. Kept until a binding anywhere grows: an expression such as
        ``f()()()`` is resolved from several places, and anew each time its cost would
        multiply with each call."""
        kept = self._resolved.get(node)
        if kept is not None and kept[0] == self.package.version:
            return kept[1]
        values = self._resolve(node)
        self._resolved[node] = (self.package.version, values)
        return values

    def _resolve(self, node: ast.AST) -> set[tuple[str, str]]:
        if isinstance(node, ast.Name):
            values = self._name_value(node)
            if values is not None:
                return values
            return (
                {("own", "self")}
                if node.id in ("self", "cls")
                else {("builtin", node.id)}
            )
        if isinstance(node, ast.Attribute):
            if node.attr in TAMPER_ATTRIBUTES:
                return self._tamper_value(node)
            if _chain_length(node) > MAX_CHAIN:
                return {OPAQUE}
            return self.package.attribute(self.resolve(node.value), node.attr, self)
        if isinstance(node, ast.Call):
            return self._call_value(node)
        if isinstance(node, ast.Subscript):
            return self._subscript_value(node)
        if isinstance(node, (ast.IfExp,)):
            return self.resolve(node.body) | self.resolve(node.orelse)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self.resolve(v) for v in node.values))
        return {OPAQUE}

    def _name_value(self, node: ast.Name) -> set[tuple[str, str]] | None:
        """What a use of a name may be, from the scope Python reads it in; None when no scope
        binds it (a builtin)."""
        home = self.home(self.scope_of(node), node.id)
        return None if home is None else self.bindings.get((home, node.id), set())

    def _hidden(self, node: ast.AST) -> set[tuple[str, str]]:
        return {("hidden", f"{self.filename}:{node.lineno}")}

    def _tamper_value(self, node: ast.Attribute) -> set[tuple[str, str]]:
        base = self.resolve(node.value)
        if node.attr == "__globals__" and _all_own(base):
            return {("globals", v[1]) for v in base}
        if _all_own(base):
            return {("own", f"{v[1]}.{node.attr}") for v in base}
        return self._hidden(node)

    def _call_value(self, node: ast.Call) -> set[tuple[str, str]]:
        target = self.dynamic_target(node)
        if target is None:
            return self._instance_value(node)
        if target == "unresolved":
            return self._hidden(node)
        base, name = target
        return self.package.attribute(base, name, self) if name else base

    def _instance_value(self, node: ast.Call) -> set[tuple[str, str]]:
        """A call of the student's own class makes the student's own object: its attributes
        are the class's (a forbidden class among its bases is judged in the class statement;
        what another library base brings, the run-time watch sees). Any other call's result
        is opaque. ``super()`` and ``type(self)`` in a method are the student's own too."""
        if _is_builtin_call(node, "super", self) and not node.args:
            return {("own", "super()")}
        if (
            _is_builtin_call(node, "type", self)
            and len(node.args) == 1
            and _all_own(self.resolve(node.args[0]))
        ):
            return {("own", "type()")}
        classes = self.resolve(node.func)
        if classes and all(
            kind == "own" and self.package.is_class(where) for kind, where in classes
        ):
            return {("own", f"{where}()") for _, where in classes}
        return {OPAQUE}

    def _subscript_value(self, node: ast.Subscript) -> set[tuple[str, str]]:
        key = node.slice.value if isinstance(node.slice, ast.Constant) else None
        inner = node.value
        if _is_sys_modules(inner, self):
            if isinstance(key, str) and key.split(".")[0] not in TAMPER_MODULES:
                return {("lib", key)}
            return self._hidden(node)
        namespace = None
        if isinstance(inner, ast.Attribute) and inner.attr == "__dict__":
            namespace = self.resolve(inner.value)
        elif _is_builtin_call(inner, "vars", self) and len(inner.args) == 1:
            namespace = self.resolve(inner.args[0])
        elif isinstance(inner, ast.Attribute) and inner.attr == "__globals__":
            base = self.resolve(inner.value)
            if _all_own(base) and isinstance(key, str):
                return self.package.attribute(
                    {("own", v[1].split(".")[0]) for v in base}, key
                )
            return self._hidden(node)
        if namespace is None:
            return {OPAQUE}
        if isinstance(key, str):
            return self.package.attribute(namespace, key, self)
        return self._hidden(node)

    def dynamic_target(self, node: ast.Call):
        """What a dynamic lookup reaches: ``(base values, attribute or "")``, ``"unresolved"``,
        or None when the call is not a dynamic lookup."""
        func, args = node.func, node.args
        name = _const_str(args[1]) if len(args) >= 2 else None
        if _is_builtin_call(node, "getattr", self) and len(args) >= 2:
            base = self.resolve(args[0])
            if name is not None:
                return base, name
            return None if _all_own(base) or _runtime_lookup(base) else "unresolved"
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("__getattribute__", "__getattr__")
            and args
        ):
            base = self.resolve(func.value)
            if (attr := _const_str(args[0])) is not None:
                return base, attr
            return None if _all_own(base) else "unresolved"
        module = None
        if _is_builtin_call(node, "__import__", self) and args:
            module = _const_str(args[0])
            if module is not None:
                fromlist = next(
                    (k.value for k in node.keywords if k.arg == "fromlist"),
                    args[3] if len(args) >= 4 else None,
                )
                if not fromlist or (
                    isinstance(fromlist, (ast.List, ast.Tuple)) and not fromlist.elts
                ):
                    module = module.split(".")[0]
        elif self._reaches(func, "importlib.import_module") and args:
            module = _const_str(args[0])
            if module is not None and module.startswith("."):  # relative: the package's
                return {("own", module.lstrip(".") or PACKAGE)}, ""
        else:
            return None
        if module is None or module.split(".")[0] in TAMPER_MODULES:
            return "unresolved"
        return self._module_value(module), ""

    def _reaches(self, node: ast.AST, path: str) -> bool:
        return ("lib", path) in self.resolve(node)

    # Judging ----------------------------------------------------------------------------------
    def violations(self, forbidden: frozenset[str]) -> list[Violation]:
        found = []

        def add(node, call, evasion=False, lookup=False):
            # A lookup on an object that is no library's costs its own part, unless its
            # result can reach another file (it runs at import, or in a def or class that
            # another file uses); every other evasion costs every part.
            whole = evasion and not (lookup and not self._serves_others(node))
            found.append(Violation(self.filename, node.lineno, call, evasion, whole))

        def refuse(node, call, advice):
            found.append(
                Violation(self.filename, node.lineno, call, True, advice=advice)
            )

        for node in self.nodes:
            if node in self.type_checking_only:
                continue
            self._judge_watch(refuse, node)
            if isinstance(node, (ast.Name, ast.Attribute)) and (
                self._modules_at_large(node) or self._string_resolver(node)
            ):
                add(node, _snippet(self.parents[node]), evasion=True)
            elif isinstance(node, ast.Attribute):
                if node.attr in TAMPER_ATTRIBUTES:
                    if not self._resolved_namespace(node):
                        lookup = node.attr == "__dict__" and not self._lib_based(
                            node.value
                        )
                        add(node, _snippet(node), evasion=True, lookup=lookup)
                elif (
                    _forbidden(node.attr, forbidden, self._lib_based(node.value))
                    and not _all_own(self.resolve(node.value))
                    and not self._only_named(node)
                ):
                    add(node, ast.unparse(node))
                elif _all_own(base := self.resolve(node.value)):
                    self._judge_own(add, node, base, node.attr, forbidden)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                own = _own_import(node)
                for a in node.names:
                    if own:
                        self._judge_value(
                            add, node, a.name, self._imported(node, a.name), forbidden
                        )
                    elif _forbidden(a.name, forbidden) and not self._only_tested(
                        a.asname or a.name, self.scope_of(node), node
                    ):
                        add(node, f"{module}.{a.name}")
                if (
                    not own
                    and module.split(".")[0] in TAMPER_MODULES
                    and (
                        module != "gc"
                        or any(a.name not in GC_HARMLESS for a in node.names)
                    )
                ):
                    add(node, _snippet(node), evasion=True)
            elif isinstance(node, ast.Import):
                if any(
                    a.name.split(".")[0] in TAMPER_MODULES and a.name != "gc"
                    for a in node.names
                ):
                    add(node, _snippet(node), evasion=True)
            elif isinstance(node, ast.Name) and self._dynamic_builtin_as_value(node):
                add(node, _snippet(self.parents[node]), evasion=True)
            elif isinstance(node, ast.Name) and type(node.ctx) is ast.Load:
                if ("lib", "gc") in (self._name_value(node) or ()) and not (
                    isinstance(parent := self.parents.get(node), ast.Attribute)
                    and parent.attr in GC_HARMLESS
                ):
                    add(node, _snippet(parent or node), evasion=True)
            elif isinstance(node, ast.Call):
                self._judge_call(add, node, forbidden)
            elif isinstance(node, ast.Subscript):
                if _is_sys_modules(node.value, self) and (
                    (_const_str(node.slice) or "?").split(".")[0]
                    in TAMPER_MODULES | {"?"}
                ):
                    add(node, _snippet(node), evasion=True)
                elif _forbidden(_const_str(node.slice) or "", forbidden) and any(
                    kind == "lib" and _forbidden(where.split(".")[-1], forbidden)
                    for kind, where in self._subscript_value(node)
                ):
                    add(node, _snippet(node))
        return sorted(set(found), key=lambda v: (v.line, v.call))

    def _judge_watch(self, refuse, node: ast.AST) -> None:
        """The rules that keep the run-time watch on (``WATCH_PATHS``, ``WATCH_ATTRIBUTES``,
        private names of library objects)."""
        if isinstance(node, ast.Import):
            for a in node.names:
                if advice := watch_rule(a.name):
                    refuse(node, f"import {a.name}", advice)
        elif isinstance(node, ast.ImportFrom) and not _own_import(node):
            module = node.module or ""
            for a in node.names:
                if advice := watch_rule(f"{module}.{a.name}") or watch_rule(module):
                    refuse(node, f"from {module} import {a.name}", advice)
        elif isinstance(node, ast.Attribute):
            lib = self._lib_based(node.value)
            if node.attr in CALLBACK_ATTRIBUTES and not self._own_based(node.value):
                refuse(node, _snippet(node), CALLBACKS)
            elif node.attr in WATCH_ATTRIBUTES and (node.attr != "__self__" or lib):
                if not (
                    node.attr == "__getattribute__" and self._own_based(node.value)
                ):
                    refuse(node, _snippet(node), INTROSPECTION)
            elif (
                lib
                and _private(node.attr)
                and not _is_attribute_of(node, self)
                and not any(
                    where in PUBLIC_UNDERSCORED for _, where in self.resolve(node)
                )
            ):
                refuse(node, _snippet(node), PRIVATE)
            self._judge_watch_path(refuse, node)
        elif isinstance(node, ast.Call):
            target = self.dynamic_target(node)
            if isinstance(target, tuple) and target[1]:
                base, name = target
                if name in WATCH_ATTRIBUTES and not _all_own(base):
                    refuse(node, _snippet(node), INTROSPECTION)
                elif _private(name) and _any_lib(base):
                    refuse(node, _snippet(node), PRIVATE)
            if target is not None:
                self._judge_watch_path(refuse, node)
            self._judge_getters(refuse, node)

    def _judge_watch_path(self, refuse, node: ast.AST) -> None:
        """``node`` reaches a refused library path (``torch._C._VariableFunctions`` is judged
        once, as a whole)."""
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        for kind, where in self.resolve(node):
            if kind == "lib" and (advice := watch_rule(where)):
                refuse(node, _snippet(node), advice)
                return

    def _judge_getters(self, refuse, node: ast.Call) -> None:
        """Every name given to ``operator.attrgetter`` (dotted, each part), the method name
        given to ``methodcaller`` and every string key given to ``itemgetter``, judged as an
        attribute name; a computed name for the first two is refused."""
        getter = next(
            (
                name
                for name in ("attrgetter", "methodcaller", "itemgetter")
                if self._reaches(node.func, f"operator.{name}")
            ),
            None,
        )
        if getter is None:
            return
        names = node.args[:1] if getter == "methodcaller" else node.args
        for arg in names:
            name = _const_str(arg)
            if name is None:
                if getter != "itemgetter":
                    refuse(node, _snippet(node), PRIVATE + " (name them as constants)")
                continue
            for part in name.split(".") if getter == "attrgetter" else [name]:
                if part in WATCH_ATTRIBUTES or _private(part):
                    advice = INTROSPECTION if part in WATCH_ATTRIBUTES else PRIVATE
                    refuse(node, _snippet(node), advice)

    def _own_based(self, node: ast.AST) -> bool:
        return _all_own(self.resolve(node))

    def _dynamic_builtin_as_value(self, node: ast.Name) -> bool:
        """``getattr`` and its kin handed on rather than called (a call is judged as one)."""
        if type(node.ctx) is not ast.Load or node.id not in DYNAMIC_BUILTINS:
            return False
        if self._name_value(node) is not None:
            return False  # the student's own name
        parent = self.parents.get(node)
        return not (isinstance(parent, ast.Call) and parent.func is node)

    def _modules_at_large(self, node: ast.AST) -> bool:
        """``sys.modules`` used other than by a subscript (``sys.modules.get(...)``,
        ``.values()``): it reaches every module, the grader's among them. Subscripts are
        judged by their key."""
        if isinstance(node, ast.Name) and type(node.ctx) is not ast.Load:
            return False
        parent = self.parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node:
            return False
        if isinstance(parent, ast.Attribute) and parent.attr == "modules":
            return False  # the ``sys`` of ``sys.modules``
        if isinstance(parent, ast.Compare) and node in parent.comparators:
            return False  # ``"google.colab" in sys.modules``
        return _is_sys_modules(node, self)

    def _serves_others(self, node: ast.AST) -> bool:
        """``node`` runs at import, or in a function or class another student file names."""
        statement = node
        while self.parents.get(statement) is not self.tree:
            statement = self.parents[statement]
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return self.package.mentioned_elsewhere(statement.name, self)
        return True

    def _lib_based(self, node: ast.AST) -> bool:
        return _any_lib(self.resolve(node))

    def _string_resolver(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name) and type(node.ctx) is not ast.Load:
            return False
        return any(
            kind == "lib" and where.startswith(STRING_RESOLVERS)
            for kind, where in self.resolve(node)
        )

    def _only_named(self, node: ast.Attribute) -> bool:
        """``node`` names a library class without reaching it: the class the builtin
        ``isinstance`` or ``issubclass`` tests against (alone, in tuples, in ``|`` unions), an
        operand of an identity, equality or membership test, a ``case`` pattern's class, part
        of an annotation that calls nothing, or in a tuple bound to a name that is itself
        only used so (``NORMS = (nn.LayerNorm,)`` for ``isinstance(m, NORMS)``)."""
        child, parent = self._container(node)
        if self._tested_against(node, child, parent):
            return True
        if (
            child is not node
            and isinstance(parent, (ast.Assign, ast.AnnAssign))
            and parent.value is child
        ):
            targets = (
                parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            )
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                return self._used_only_as_named(targets[0])
        return self._in_annotation(node)

    def _container(self, node: ast.AST) -> tuple[ast.AST, ast.AST | None]:
        """The outermost tuple, list, set or ``|`` union around ``node`` (or ``node``), and
        what holds it."""
        child, parent = node, self.parents.get(node)
        while isinstance(parent, (ast.Tuple, ast.List, ast.Set)) or (
            isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.BitOr)
        ):
            child, parent = parent, self.parents.get(parent)
        return child, parent

    def _tested_against(self, node, child, parent) -> bool:
        if (
            isinstance(parent, ast.Call)
            and len(parent.args) == 2
            and parent.args[1] is child
            and not parent.keywords
            and (
                _is_builtin_call(parent, "isinstance", self)
                or _is_builtin_call(parent, "issubclass", self)
            )
        ):
            return True
        if isinstance(parent, ast.Compare) and all(
            isinstance(op, _NAMING_TESTS) for op in parent.ops
        ):
            return True
        return (
            isinstance(parent, ast.MatchClass) and parent.cls is node
        ) or isinstance(parent, ast.MatchValue)

    def _used_only_as_named(self, target: ast.Name) -> bool:
        return self._only_tested(target.id, self.binding_scope(target), target)

    def _only_tested(self, name: str, scope: ast.AST, binder: ast.AST) -> bool:
        """The name ``binder`` binds in ``scope`` is used in this file (as ``self.<name>`` too,
        for a class attribute), every use a test against it or an annotation, and no other
        student file can import it."""
        home = self.home(scope, name) or scope
        if home is self.tree and self.package.mentioned_elsewhere(name, self):
            return False
        bindings, only_tested = self._uses_of(home, name)
        # bound again: to what, the uses no longer say
        return only_tested and all(node is binder for node in bindings)

    def _uses_of(self, home: ast.AST, name: str) -> tuple[list[ast.AST], bool]:
        """The nodes that bind ``name`` of ``home`` again (as ``self.<name>`` too, for a class
        attribute), and whether it is read at all and every read tests against it or lies
        in an annotation. Kept: each binding of a name asks again."""
        if (home, name) not in self._kept_uses:
            self._kept_uses[home, name] = self._find_uses(home, name)
        return self._kept_uses[home, name]

    def _find_uses(self, home: ast.AST, name: str) -> tuple[list[ast.AST], bool]:
        in_class = isinstance(home, ast.ClassDef)
        bindings, read, only_tested = [], False, True
        for node in self.uses.get(name, ()):
            if isinstance(node, ast.Name):
                if self.home(self.scope_of(node), name) is not home:
                    continue
            elif not (in_class and self._is_self(node.value)):
                continue
            if not isinstance(node.ctx, ast.Load):
                bindings.append(node)
                continue
            child, parent = self._container(node)
            read = True
            only_tested &= self._tested_against(
                node, child, parent
            ) or self._in_annotation(node)
        return bindings, read and only_tested

    def _in_annotation(self, node: ast.AST) -> bool:
        """``node`` lies in a parameter's, a return's or a variable's annotation, with no
        call between them."""
        child, parent = node, self.parents.get(node)
        while parent is not None and not isinstance(parent, ast.Call):
            if (
                isinstance(parent, (ast.arg, ast.AnnAssign))
                and child is parent.annotation
            ) or (
                isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef))
                and child is parent.returns
            ):
                return True
            child, parent = parent, self.parents.get(parent)
        return False

    def _judge_call(self, add, node: ast.Call, forbidden) -> None:
        target = self.dynamic_target(node)
        if target == "unresolved":
            func = node.func
            on = node.args[0] if _is_builtin_call(node, "getattr", self) else None
            if isinstance(func, ast.Attribute) and func.attr.startswith("__getattr"):
                on = func.value
            lookup = on is not None and not self._lib_based(on)
            add(node, _snippet(node), evasion=True, lookup=lookup)
        elif target is not None:
            base, name = target
            if not _all_own(base) and _forbidden(name, forbidden, _any_lib(base)):
                add(node, _snippet(node))
        elif any(_is_builtin_call(node, b, self) for b in ("eval", "exec", "compile")):
            add(node, _snippet(node), evasion=True)
        elif self._reaches(node.func, "operator.attrgetter") or self._reaches(
            node.func, "operator.methodcaller"
        ):
            many = self._reaches(node.func, "operator.attrgetter")
            for arg in node.args if many else node.args[:1]:
                name = _const_str(arg)
                if name is not None and any(
                    _forbidden(part, forbidden) for part in name.split(".")
                ):
                    add(node, _snippet(node))

    def _judge_own(self, add, node, base, attr: str, forbidden) -> None:
        """An attribute of the student's own module that another file bound to a library."""
        if any(v[1] in MODULE_NAMES for v in base):
            self._judge_value(
                add, node, attr, self.package.attribute(base, attr), forbidden
            )

    def _judge_value(self, add, node, name: str, values, forbidden) -> None:
        for kind, where in values:
            if kind == "lib" and _forbidden(where.split(".")[-1], forbidden):
                add(node, f"{name} (bound to {where} in another file)")
            elif kind == "hidden" and not where.startswith(self.filename + ":"):
                add(node, f"{name} (bound at {where})", evasion=True)

    def _resolved_namespace(self, node: ast.Attribute) -> bool:
        """``X.__dict__["name"]``, ``f.__globals__["name"]`` of the student's own ``f``, and any
        of these attributes of the student's own objects are resolved, not hidden."""
        parent = self.parents.get(node)
        if _all_own(self.resolve(node.value)) and node.attr != "__globals__":
            return True
        if not (isinstance(parent, ast.Subscript) and parent.value is node):
            return False
        if _const_str(parent.slice) is None:
            return False
        if node.attr == "__dict__":
            return True
        return node.attr == "__globals__" and _all_own(self.resolve(node.value))


MODULE_NAMES = frozenset(MODULES) | {PACKAGE}
#: Comparisons that test against an object without calling it.
_NAMING_TESTS = (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)


class _Package:
    """Every student file, read together, so one file's binding is known in another."""

    def __init__(self, sources: dict[str, str], progress=lambda filename: None):
        self.version = 0  # grows with every binding learned (``_Module.resolve``)
        self.modules = {}
        for name, text in sources.items():
            progress(name)
            self.modules[name.removesuffix(".py")] = _Module(self, name, text)
        for _ in range(8):  # aliases of aliases, across files: a few rounds settle them
            before = self.version
            for module in self.modules.values():
                progress(module.filename)
                module.bind_all()
            if self.version == before:  # nothing learned this round
                break

    def attribute(self, base, attr: str, module: _Module | None = None):
        """What ``<base>.<attr>`` may be, for each value ``base`` may be."""
        out = set()
        for kind, where in base:
            if kind == "lib":
                out.add(("lib", f"{where}.{attr}"))
            elif kind in ("own", "globals"):
                if kind == "own" and where == "self":
                    bound = module.attributes.get(attr) if module else None
                    out |= bound or {("own", f"self.{attr}")}
                    continue
                name = where.split(".")[0] if kind == "globals" else where
                if name == PACKAGE:
                    out.add(("own", attr))
                elif name in self.modules and (
                    bound := self.modules[name].module_binding(attr)
                ):
                    out |= bound
                else:
                    out.add(("own", f"{where}.{attr}"))
            elif kind == "hidden":
                out.add((kind, where))
            else:
                out.add(OPAQUE)
        return out

    def is_class(self, where: str) -> bool:
        """``where`` (``"attention.Kernel"``) names a class a student file defines."""
        module, _, name = where.partition(".")
        return module in self.modules and name in self.modules[module].class_names

    def mentioned_elsewhere(self, name: str, module: _Module) -> bool:
        """Another student file imports ``name`` or reads an attribute of that name (or
        imports everything)."""
        return any(
            name in other.mentions or "*" in other.mentions
            for other in self.modules.values()
            if other is not module
        )

    def violations(self, filename: str) -> list[Violation]:
        """A file with a forbidden list is judged by it; a file without one (masks.py,
        rope.py) by every list, at the cost of every part: what it calls, it calls for the
        files that have one."""
        module = self.modules.get(filename.removesuffix(".py"))
        if module is None:
            return []
        if filename in RULES:
            return module.violations(RULES[filename])
        return [
            v if v.advice else dataclasses.replace(v, whole=True)
            for v in module.violations(EVERY_FORBIDDEN)
        ]


def _forbidden(name: str, forbidden: frozenset[str], library: bool = True) -> bool:
    """``name`` is forbidden: listed, or, for a library object, a name of its family
    (``_scaled_dot_product_flash_attention_for_cpu``, ``_batch_norm_impl_index``)."""
    if name in forbidden:
        return True
    lowered = name.lower()
    return library and any(
        word in lowered
        for family, words in FAMILY_WORDS.items()
        if family <= forbidden
        for word in words
    )


#: Library namespaces that hold only functions and classes the run-time watch sees called:
#: a computed attribute of one (``getattr(F, self.activation)``) is judged when it runs.
RUNTIME_LOOKUPS = frozenset(
    {"torch.nn.functional", "torch.nn", "torch.nn.init", "torch.special"}
    | {"torch.linalg", "torch.fft", "math"}
)


def _runtime_lookup(values) -> bool:
    return bool(values) and all(
        kind == "lib" and where in RUNTIME_LOOKUPS for kind, where in values
    )


def watch_rule(path: str) -> str | None:
    """What to write instead of reaching the library path ``path``, where it is refused."""
    for prefix, advice in WATCH_PATHS.items():
        if path == prefix or path.startswith(prefix + "."):
            return advice
    return None


def _is_attribute_of(node: ast.Attribute, module) -> bool:
    """``node`` is the value of a longer attribute chain (judged as the whole chain)."""
    parent = module.parents.get(node)
    return isinstance(parent, ast.Attribute) and parent.value is node


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _any_lib(values) -> bool:
    return any(kind == "lib" for kind, _ in values)


def _all_own(values) -> bool:
    return bool(values) and all(kind == "own" for kind, _ in values)


def _const_str(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _is_builtin_call(node: ast.AST, name: str, module: _Module) -> bool:
    """A call of the builtin ``name`` (or ``builtins.<name>``), not a student's own function."""
    if not isinstance(node, ast.Call):
        return False
    values = module.resolve(node.func)
    return bool(values) and values <= {("builtin", name), ("lib", f"builtins.{name}")}


def _is_sys_modules(node: ast.AST, module: _Module) -> bool:
    return ("lib", "sys.modules") in module.resolve(node)


def _chain_length(node: ast.Attribute) -> int:
    length = 0
    while isinstance(node, ast.Attribute) and length <= MAX_CHAIN:
        node, length = node.value, length + 1
    return length


def _own_import(node: ast.ImportFrom) -> bool:
    """An import from the student's package: relative, by the package's name, or by a module's
    bare name (``from attention import x``, a script's fallback import, as ``_module_value``
    reads ``import attention``)."""
    return node.level > 0 or (node.module or "").split(".")[0] in (PACKAGE, *MODULES)


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
