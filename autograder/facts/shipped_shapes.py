"""The shapes of shipped test code that the leak check can follow, and nothing else.

``autograder.facts.shipped_tests`` follows values through functions: what a test computes, what it
compares. It can only vouch for code it reads, so what ships of ``tests/graded`` is held to the
shapes it reads (``refusals``), and anything else is refused with the way to write it:

* at module level: a docstring, imports of known modules (never the answer key), function
  definitions, and names bound to written-out values (literals, ``torch.tensor`` of literals,
  markers, hypothesis strategies); nothing that computes at import;
* decorators: the suite's markers (``points``, ``part``, ``uses``, ``public``, ``hidden``),
  ``parametrize`` with written-out values or stored answers, hypothesis's ``given``,
  ``settings`` and ``st.composite``, the suite's ``examples``, ``functools.cache``;
* no class (its methods would be tests the check never reads), no fixture (``hw`` is the one
  fixture, from ``autograder.grading.plugin``), no ``conftest.py`` beside the tests (``tests/conftest.py``
  only loads the plugin: ``conftest_refusals``);
* no default value computed at import, no ``global`` or ``nonlocal``, no code or name made from
  a string (``eval``, ``getattr``, ...), no ``import *``, and no library function held as a
  value (``make = torch.ones``): each hides a computation from the judge.
"""

from __future__ import annotations

import ast
from pathlib import Path

ANSWERS = "tests.graded.answers"
ORACLES_MODULE = "tests.graded.oracles"
#: Modules a shipped test may import (and ``tests.graded.*`` but the answer key).
KNOWN_MODULES = {
    "__future__", "torch", "torch.nn", "torch.nn.functional", "math", "pytest",
    "hypothesis", "hypothesis.strategies", "functools", "contextlib", "pathlib",
    "autograder.facts.protocol",
}  # fmt: skip
#: Builtins that make code or reach names from strings.
DYNAMIC = {
    "eval", "exec", "compile", "__import__", "getattr", "setattr", "delattr", "globals",
    "locals", "vars",
}  # fmt: skip
#: Libraries whose functions compute, and the names of theirs that are values.
LIBRARIES = {"torch", "numpy", "math"}
LIBRARY_VALUES = {
    "float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16",
    "int32", "int64", "uint8", "long", "int", "bool", "complex64", "complex128", "cfloat",
    "cdouble", "pi", "e", "tau", "inf", "nan", "Tensor", "Generator", "device", "dtype",
    "Size", "no_grad", "enable_grad", "inference_mode", "strided", "contiguous_format",
    "channels_last", "functional", "nn",
}  # fmt: skip
#: Markers with their arguments written out.
MARKERS = {"points", "part", "uses", "public", "hidden"}
HYPOTHESIS_DECORATORS = {"given", "settings", "composite"}
CACHES = {"cache", "lru_cache"}
KNOWN_DECORATORS = (
    MARKERS | HYPOTHESIS_DECORATORS | {"parametrize", "examples", "cache"}
)
#: Calls that write a value out: what comes out is its written arguments.
WRITING_CALLS = {"float", "int", "str", "bool", "tuple", "frozenset"}
#: What the refusals point to.
FIX_TEST = (
    "write each test as a module-level function test_<name>(hw, ...) with its markers"
)
FIX_VALUE = (
    "write the value out (literals, torch.tensor([...]) of literals), or compute it in a "
    f"function of tests/graded/oracles.py and import it from {ANSWERS}"
)


def refusals(path: str, source: str) -> list[str]:
    """Why the shipped module ``path`` holds code the leak check cannot follow."""
    try:
        tree = ast.parse(source, path)
    except SyntaxError as error:
        return [f"{path}:{error.lineno}: does not parse ({error.msg})"]
    if Path(path).name == "conftest.py":
        why = (
            "runs code the leak check does not follow (fixtures, hooks): the suite's rules "
            f"live in autograder/grading/plugin.py and its values in {ANSWERS}; {FIX_TEST}"
        )
        return [f"{path}:1: a conftest.py beside the graded tests {why}"]
    return _Shapes(path, tree).run()


def conftest_refusals(path: str, source: str) -> list[str]:
    """The suite's top ``conftest.py`` ships to load the engine's plugin, and does nothing
    else: a docstring and ``pytest_plugins`` written out."""
    try:
        tree = ast.parse(source, path)
    except SyntaxError as error:
        return [f"{path}:{error.lineno}: does not parse ({error.msg})"]
    return [
        f"{path}:{node.lineno}: `{short(node)}`: the handout's conftest.py only loads the "
        "engine's plugin (pytest_plugins = [...]); fixtures and hooks belong in "
        "autograder/grading/plugin.py"
        for node in tree.body
        if not _is_docstring(node)
        and not (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == ["pytest_plugins"]
            and is_literal(node.value)
        )
    ]


def is_literal(node: ast.expr) -> bool:
    """Whether ``node`` is a value written out (``ast.literal_eval`` reads it)."""
    try:
        ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


class _Shapes:
    def __init__(self, path: str, tree: ast.Module):
        self.path, self.tree = path, tree
        self.found: list[str] = []
        self.imports: dict[str, str] = {}  # local name -> module (or module:name)
        self.written: dict[str, str] = {}  # module constant -> "plain" or "tensor"
        self.composites: set[str] = set()

    def run(self) -> list[str]:
        for node in self.tree.body:
            self.top(node)
        held = self.library_functions_held()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                self.refuse(
                    node,
                    f"class {node.name}",
                    "the leak check does not follow a class (its methods may be tests "
                    f"that compute what they expect): {FIX_TEST}",
                )
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    self.decorator(node, decorator)
                self.defaults(node)
            elif isinstance(node, (ast.Attribute, ast.Name)) and id(node) in held:
                self.refuse(
                    node,
                    f"`{short(node)}` held as a value",
                    "a library function handed on or kept in a name is a call the leak "
                    "check does not see: call it where it stands",
                )
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.refuse(
                    node,
                    ", ".join(node.names),
                    "a name rebound from inside a function: the leak check reads each "
                    "function's names as its own; pass values as arguments and results",
                )
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in DYNAMIC
            ):
                self.refuse(
                    node,
                    f"{node.func.id}(...)",
                    "code or names made from strings at run time, which the leak check "
                    "does not follow: write the code and the names out",
                )
        return self.found

    def library_functions_held(self) -> set[int]:
        """The library functions (torch's, numpy's, math's) that are not called where they
        stand: named as a value, handed to a call, kept in a name. A dtype, a constant and a
        module named on the way to a call are values."""
        called, inner = set(), set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                called.add(id(node.func))
            elif isinstance(node, ast.Attribute):
                inner.add(id(node.value))
        held = set()
        for node in ast.walk(self.tree):
            if (
                not isinstance(node, (ast.Attribute, ast.Name))
                or id(node) in called | inner
                or isinstance(node.ctx, ast.Store)
            ):
                continue
            path = self.origin(node).replace(":", ".").split(".")
            if (
                path[0] in LIBRARIES
                and len(path) > 1
                and path[-1] not in LIBRARY_VALUES
            ):
                held.add(id(node))
        return held

    def defaults(self, function: ast.FunctionDef) -> None:
        """Default values are computed as the module is imported."""
        arguments = function.args
        for default in [*arguments.defaults, *arguments.kw_defaults]:
            if default is not None and self.written_out(default) is None:
                self.refuse(
                    default,
                    f"{function.name} (default `{short(default)}`)",
                    f"a default value computed at import: {FIX_VALUE}",
                )

    def refuse(self, node: ast.AST, what: str, why: str) -> None:
        self.found.append(f"{self.path}:{node.lineno}: {what}: {why}")

    # module level ----------------------------------------------------------------------------
    def top(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imported(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(self.marker(d) == "composite" for d in node.decorator_list):
                self.composites.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [
                n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)
            ]
            if not all(_bare_target(t) for t in targets):
                self.refuse(node, ", ".join(names) or "an assignment", "module-level "
                            f"code that changes a value: {FIX_VALUE}")  # fmt: skip
                return
            kind = self.written_out(node.value)
            if kind is None:
                self.refuse(
                    node,
                    ", ".join(names),
                    f"computed at import (`{short(node.value)}`), which the leak check "
                    f"does not follow: {FIX_VALUE}",
                )
                return
            for name in names:
                self.written[name] = kind
        elif not _is_docstring(node):  # a string written out computes nothing
            self.refuse(
                node,
                "module-level code",
                f"`{short(node)}` runs at import, which the leak check does not follow: "
                f"put it in a test or a helper function; {FIX_VALUE}",
            )

    def imported(self, node: ast.Import | ast.ImportFrom) -> None:
        modules = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
        for module in modules:
            if module == ORACLES_MODULE or (
                module == "tests.graded"
                and any(a.name == "oracles" for a in node.names)
            ):
                self.refuse(
                    node,
                    "import of the answer key",
                    f"the handout has no {ORACLES_MODULE}: import its functions from "
                    f"{ANSWERS}",
                )
            elif module not in KNOWN_MODULES and not module.startswith("tests.graded"):
                self.refuse(
                    node,
                    f"import of {module}",
                    "the leak check does not know what its functions compute: use torch, "
                    f"math and the suite's helpers, and expected values from {ANSWERS}",
                )
        if any(alias.name == "*" for alias in node.names):
            self.refuse(
                node,
                f"from {modules[0]} import *",
                "names the leak check cannot see: import each name",
            )
        for alias in node.names:
            if isinstance(node, ast.Import):
                self.imports[alias.asname or alias.name.split(".")[0]] = alias.name
            else:
                self.imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"

    def written_out(self, node: ast.expr, answers: bool = False) -> str | None:
        """``"plain"`` or ``"tensor"`` when ``node`` is a value written out; None otherwise.
        ``answers``: a stored answer of written-out arguments counts (``parametrize``)."""
        if isinstance(node, ast.Constant):
            return "plain"
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            kinds = [self.written_out(e, answers) for e in node.elts]
            return None if None in kinds else _joined(kinds)
        if isinstance(node, ast.Dict):
            kinds = [
                self.written_out(e, answers)
                for e in (*node.keys, *node.values)
                if e is not None
            ]
            return None if None in kinds or None in node.keys else _joined(kinds)
        if isinstance(node, (ast.UnaryOp, ast.BinOp)):
            operands = (
                [node.operand]
                if isinstance(node, ast.UnaryOp)
                else [node.left, node.right]
            )
            kinds = [self.written_out(o) for o in operands]  # numbers and strings only
            return "plain" if all(k == "plain" for k in kinds) else None
        if isinstance(node, ast.Name):
            return self.written.get(node.id)
        if isinstance(node, ast.Attribute):  # torch.float64, math.pi
            root = node
            while isinstance(root, ast.Attribute):
                root = root.value
            known = isinstance(root, ast.Name) and root.id in self.imports
            return "plain" if known and node.attr[:1].islower() else None
        if isinstance(node, ast.Call):
            return self.written_call(node, answers)
        return None

    def written_call(self, node: ast.Call, answers: bool) -> str | None:
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            return None
        name = self.dotted(node.func)
        stored = answers and self.origin(node.func).startswith(ANSWERS + ":")
        kinds = [self.written_out(a, answers) for a in arguments]
        if None in kinds:
            return None
        if stored:
            return "tensor"
        if name in WRITING_CALLS:
            return "plain" if all(k == "plain" for k in kinds) else None
        if name in ("torch.tensor", "torch.as_tensor"):
            return "tensor" if all(k == "plain" for k in kinds) else None
        if name.startswith(("pytest.mark.", "pytest.param")):
            return _joined(kinds)
        if self.strategy(node):
            return "plain"
        return None

    def strategy(self, node: ast.expr) -> bool:
        """A hypothesis strategy: it draws inputs (a composite's body is judged as code)."""
        if isinstance(node, ast.Name):
            origin = self.origin(node)
            return origin.startswith(("tests.graded.strategies:", "hypothesis"))
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.composites:
            made_by = "composite"
        else:
            origin = self.origin(func)
            made_by = origin if origin.startswith(
                ("hypothesis", "tests.graded.strategies:")
            ) else ""  # fmt: skip
        arguments = [*node.args, *(k.value for k in node.keywords)]
        return bool(made_by) and all(
            self.written_out(a) is not None or self.strategy(a) for a in arguments
        )

    def origin(self, node: ast.expr) -> str:
        """``module:name`` (or ``module.attr...``) an expression's root name comes from."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.imports:
            return ""
        return ".".join([self.imports[node.id], *reversed(parts)])

    def dotted(self, node: ast.expr) -> str:
        """``pytest.mark.points`` for that expression, with imported names resolved."""
        origin = self.origin(node)
        if origin:
            module, _, name = origin.partition(":")
            return f"{module}.{name}" if name else module
        return node.id if isinstance(node, ast.Name) else short(node)

    # decorators ------------------------------------------------------------------------------
    def marker(self, decorator: ast.expr) -> str | None:
        """What a known decorator is (``points``, ``parametrize``, ``given``, ...), else None."""
        func = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = self.dotted(func)
        if name.startswith("pytest.mark."):
            return name.removeprefix("pytest.mark.")
        last = name.rsplit(".", 1)[-1]
        if name.startswith("hypothesis") and last in HYPOTHESIS_DECORATORS:
            return last
        if name == "tests.graded.strategies.examples":
            return "examples"
        if name.startswith("functools.") and last in CACHES:
            return "cache"
        return None

    def decorator(self, function: ast.FunctionDef, decorator: ast.expr) -> None:
        marker = self.marker(decorator)
        what = f"{function.name} (@{short(decorator)})"
        arguments = (
            [*decorator.args, *(k.value for k in decorator.keywords)]
            if isinstance(decorator, ast.Call)
            else []
        )
        if marker not in KNOWN_DECORATORS:
            fixture = "fixture" in short(decorator)
            self.refuse(
                decorator,
                what,
                (
                    "a fixture computes values the leak check does not follow (and hw is "
                    "the one fixture, from autograder/grading/plugin.py): make inputs in the test, "
                    "take expected values from the stored answers, or pass written-out "
                    "values with @pytest.mark.parametrize"
                )
                if fixture
                else (
                    "a decorator the leak check does not know: a graded test carries only "
                    "pytest.mark.points/part/uses/public/hidden/parametrize, hypothesis's "
                    "given and settings, and tests.graded.strategies.examples"
                ),
            )
        elif marker == "given":
            if not all(self.strategy(a) for a in arguments):
                self.refuse(
                    decorator,
                    what,
                    "given's arguments must be strategies (hypothesis's, "
                    "tests/graded/strategies.py's or a st.composite of this module): "
                    "inputs only, never an expected value",
                )
        elif marker == "parametrize":
            values = decorator.args[1:] + [
                k.value for k in decorator.keywords if k.arg == "argvalues"
            ]
            names = decorator.args[:1] + [
                k.value for k in decorator.keywords if k.arg != "argvalues"
            ]
            if not all(self.written_out(v, answers=True) for v in values) or not all(
                self.written_out(n) == "plain" for n in names
            ):
                self.refuse(
                    decorator,
                    what,
                    "parametrize's values must be written out in the decorator or in a "
                    "module constant of literals, or be stored answers "
                    f"({ANSWERS}) of written-out arguments; the leak check does not follow "
                    f"values computed for it: {FIX_VALUE}",
                )
        elif not all(self.written_out(a) == "plain" for a in arguments):
            self.refuse(
                decorator, what, f"the marker's arguments must be literals: {FIX_VALUE}"
            )


def _bare_target(target: ast.expr) -> bool:
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_bare_target(t) for t in target.elts)
    return isinstance(target, ast.Name)


def _joined(kinds) -> str:
    return "tensor" if "tensor" in kinds else "plain"


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def short(node: ast.AST) -> str:
    """``node``'s source on one line, cut to 60 characters: how a refusal quotes it."""
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
