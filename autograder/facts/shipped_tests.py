"""What the test code that ships in the student handout may do.

A shipped test reaches student code only through ``hw`` (and the handles it hands back), and
expected values only through the stored answers (``tests.graded.answers``). Besides, it may make
inputs, call the comparison helpers and use plain Python for control flow. An oracle written
anywhere else would ship with the handout, so the release refuses it by this rule, whatever
calls it makes (``refusals``).

The rule, as the release applies it to every shipped module of ``tests/graded`` but the answer
store, the comparison helpers and the input makers (``TRUSTED``):

* a *computation* is an operator (an elementwise comparison too), a torch or numpy call other than the input makers and the
  comparisons, or a tensor method other than a conversion, applied to a tensor that is neither
  the student's nor a written-out constant (``torch.tensor([...])`` of literals);
* a computed value may only be an input: an argument of student code, of a stored answer, of an
  input maker or of a shipped helper (whose parameter it then becomes), or a name, an operand or a
  message built from it. Compared with the student's result, asserted, or handed to a comparison
  helper, it is an expected value that the shipped code computed, and refused;
* a helper that returns a computed value and that no shipped test calls serves the hidden tests
  only: refused too.

A refusal names the function that computed the value and its ``file:line``. The judge follows
functions only: ``autograder.facts.shipped_shapes`` refuses every other shape first.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.facts import shipped_shapes

ANSWERS = "tests.graded.answers"
ORACLES = "tests/graded/oracles.py"
#: Modules not judged: the answer store, the comparison helpers, the seeded input makers.
TRUSTED = {
    "answers.py": "the answer store",
    "compare.py": "comparison helpers",
    "expect.py": "comparison helpers",
    "inputs.py": "comparison helpers",
    "strategies.py": "input makers",
}
COMPARISON_MODULES = {
    "tests.graded.compare",
    "tests.graded.expect",
    "tests.graded.inputs",
}
INPUT_MODULES = {"tests.graded.strategies"}

#: torch calls that make inputs.
INPUT_CALLS = {
    "tensor", "as_tensor", "zeros", "ones", "full", "empty", "eye", "arange",
    "zeros_like", "ones_like", "full_like", "empty_like",
    "randn", "rand", "randint", "randperm", "randn_like", "rand_like", "randint_like",
    "cat", "stack",
}  # fmt: skip
#: torch calls that compare or describe, never compute a value to compare with.
COMPARISON_CALLS = {
    "isnan", "isinf", "isfinite", "equal", "isclose", "allclose", "assert_close",
}  # fmt: skip
NEUTRAL_CALLS = {
    "device", "dtype", "Generator", "manual_seed", "get_default_dtype", "is_tensor",
    "no_grad", "inference_mode", "enable_grad", "Size", "finfo", "iinfo",
}  # fmt: skip
#: Tensor methods that convert or copy: what comes out is what went in.
CONVERSIONS = {
    "to", "double", "float", "half", "long", "int", "bool", "cpu", "cuda", "clone",
    "detach", "contiguous", "tolist", "item", "requires_grad_",
    "items", "keys", "values", "get", "copy", "pop", "setdefault",
}  # fmt: skip
SCALARS = {"item", "tolist"}
DESCRIPTIONS = {"dim", "numel", "size", "is_floating_point", "element_size", "__len__"}
PLAIN_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad"}
#: Methods that put their arguments into the object they are called on.
MUTATORS = {"append", "extend", "update", "insert", "add", "setdefault"}
PLAIN_BUILTINS = {
    "len",
    "isinstance",
    "type",
    "callable",
    "hasattr",
    "id",
    "repr",
    "str",
}
CONTAINER_BUILTINS = {
    "list", "tuple", "dict", "set", "zip", "enumerate", "sorted", "reversed", "iter",
    "next", "range", "map", "filter",
}  # fmt: skip
PLAIN_ANNOTATIONS = {"int", "float", "str", "bool", "None"}
#: Comparisons that give one bool whatever the operands.
IDENTITY = (ast.Is, ast.IsNot, ast.In, ast.NotIn)


@dataclass(frozen=True)
class Computation:
    """Where shipped code computed on a tensor."""

    function: str
    path: str
    def_line: int
    line: int
    code: str

    def named(self) -> str:
        return f"{self.path}:{self.def_line}: {self.function}"


@dataclass(frozen=True)
class Kind:
    """What a value may be: the student's, a tensor, computed by shipped code."""

    student: bool = False
    tensor: bool = False
    computed: Computation | None = None
    parts: tuple[Kind, ...] | None = None  # a tuple's elements, where they are known

    def __or__(self, other: Kind) -> Kind:
        parts = None
        if self.parts and other.parts and len(self.parts) == len(other.parts):
            parts = tuple(a | b for a, b in zip(self.parts, other.parts, strict=True))
        elif self == PLAIN:
            parts = other.parts
        elif other == PLAIN:
            parts = self.parts
        return Kind(
            self.student or other.student,
            self.tensor or other.tensor,
            self.computed or other.computed,
            parts,
        )

    def part(self, index: int) -> Kind:
        return self.parts[index] if self.parts and index < len(self.parts) else self


PLAIN = Kind()
TENSOR, STUDENT = Kind(tensor=True), Kind(student=True, tensor=True)


@dataclass
class Function:
    """A shipped function, its parameters' kinds (from its calls) and its result's."""

    node: ast.AST
    name: str
    module: Module
    closure: dict[str, Kind]
    declared: dict[str, Kind]  # before any call is seen
    passed: dict[str, Kind] = field(default_factory=dict)  # by its calls, this pass
    seen: dict[str, Kind] = field(default_factory=dict)  # by its calls, the pass before
    result: Kind = PLAIN
    called: bool = False
    parent: Function | None = None
    nested: dict[str, Function] = field(default_factory=dict)


@dataclass
class Module:
    path: str
    tree: ast.Module
    imports: dict[str, str]  # local name -> "module" or "module:name"
    functions: dict[str, Function]
    names: dict[str, Kind]


def refusals(files: dict[str, str]) -> list[str]:
    """``{path: source}`` of the shipped test modules -> why each refused function may not
    ship."""
    modules, shapes = {}, []
    for path, source in files.items():
        if Path(path).name in TRUSTED:
            continue
        shapes += shipped_shapes.refusals(path, source)
        try:
            modules[path] = _module(path, ast.parse(source))
        except SyntaxError:
            continue  # refused as a shape
    judge = _Judge(modules)
    return shapes + judge.run()


def _module(path: str, tree: ast.Module) -> Module:
    imports = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    module = Module(path, tree, imports, {}, {})
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module.functions[node.name] = _function(node, node.name, module, {})
    return module


def _function(node, name: str, module: Module, closure: dict[str, Kind]) -> Function:
    arguments = node.args
    positional = arguments.posonlyargs + arguments.args
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(
        arguments.defaults
    )
    pairs = list(zip(positional, defaults)) + list(
        zip(arguments.kwonlyargs, arguments.kw_defaults)
    )
    declared = {}
    for argument, default in pairs:
        declared[argument.arg] = _declared(argument, default, name)
    for argument in (arguments.vararg, arguments.kwarg):
        if argument is not None:
            declared[argument.arg] = _declared(argument, None, name)
    return Function(node, name, module, closure, declared)


def _declared(argument: ast.arg, default, function: str) -> Kind:
    """A parameter's kind before its calls are seen: a test's parameters are fixtures and drawn
    numbers (``hw`` the student's code); a helper's may be tensors unless declared plain."""
    if argument.arg == "hw":
        return STUDENT
    if function.startswith("test_"):
        return PLAIN
    annotation = argument.annotation
    if annotation is not None and ast.unparse(annotation) in PLAIN_ANNOTATIONS:
        return PLAIN
    if isinstance(default, ast.Constant) and default.value is not None:
        return PLAIN
    return TENSOR


class _Judge:
    """Kinds of every shipped function's values, to a fixed point; then the refusals."""

    def __init__(self, modules: dict[str, Module]):
        self.modules = modules
        self.by_module = {_dotted(path): m for path, m in modules.items()}
        self.found: dict[Computation, str] = {}
        self.reporting = False

    def run(self) -> list[str]:
        for _ in range(20):
            before = self._state()
            self._pass()
            if self._state() == before:
                break
        self.reporting = True
        self._pass()
        for function in self._all_functions():
            computed = function.result.computed
            if (
                computed
                and not function.called
                and not function.name.startswith("test_")
            ):
                self._refuse(
                    computed,
                    "and no shipped test calls it: it serves the hidden tests",
                )
        return sorted(set(self.found.values()))

    def _state(self):
        return [
            (f.result, tuple(f.seen.items()), f.called, tuple(f.closure.items()))
            for f in self._all_functions()
        ] + [tuple(m.names.items()) for m in self.modules.values()]

    def _all_functions(self) -> list[Function]:
        found = []
        for module in self.modules.values():
            stack = list(module.functions.values())
            while stack:
                function = stack.pop()
                found.append(function)
                stack += function.nested.values()
        return found

    def _pass(self) -> None:
        for function in self._all_functions():
            function.seen, function.passed = function.passed, {}
        for module in self.modules.values():
            top = _Scope(self, module, None, module.names)
            top.statements(module.tree.body)
            for function in list(module.functions.values()):
                self.analyze(function)

    def analyze(self, function: Function) -> Kind:
        """A test's parameters are as declared; a helper's are what its calls pass, or may be
        tensors while no call is seen."""
        parameters = dict(function.declared)
        if function.seen and not function.name.startswith("test_"):
            parameters = {
                name: kind if name == "hw" else function.seen.get(name, PLAIN)
                for name, kind in parameters.items()
            }
        function.result = PLAIN
        scope = _Scope(
            self, function.module, function, {**function.closure, **parameters}
        )
        body = function.node.body
        if isinstance(body, list):
            scope.statements(body)
        else:  # a lambda
            scope.returned(scope.value(body))
        return function.result

    def _refuse(self, computed: Computation, why: str) -> None:
        if not self.reporting or computed in self.found:
            return
        self.found[computed] = (
            f"{computed.named()} computes on tensors (line {computed.line}: "
            f"`{computed.code}`) {why}; a shipped test reaches expected values only through "
            f"the stored answers: move {computed.function} into {ORACLES} and import it "
            f"from {ANSWERS}"
        )

    def refuse(self, kind: Kind, why: str) -> None:
        if kind.computed is not None:
            self._refuse(kind.computed, why)

    def imported_function(self, target: str) -> Function | None:
        module, _, name = target.partition(":")
        found = self.by_module.get(module)
        return found.functions.get(name) if found else None


def _dotted(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


class _Scope:
    """One function's (or the module's) names, evaluated flow-insensitively."""

    def __init__(self, judge: _Judge, module: Module, function, names: dict[str, Kind]):
        self.judge, self.module, self.function = judge, module, function
        self.names = names

    # statements ------------------------------------------------------------------------------
    def statements(self, body: list[ast.stmt]) -> None:
        for node in body:
            self.statement(node)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Decorators run at import: what they are handed (parametrize's values, given's
            # strategies) is judged as a call's arguments.
            for decorator in node.decorator_list:
                self.value(decorator)
            if self.function is not None:
                self.nested_function(node, node.name)
            return
        if isinstance(node, ast.ClassDef):
            return
        if isinstance(node, ast.Assign):
            kind = self.value(node.value)
            for target in node.targets:
                self.bind(target, kind)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            if node.value is not None:
                kind = self.value(node.value)
                if isinstance(node, ast.AugAssign):
                    kind = self.operation(node, [self.value(node.target), kind])
                self.bind(node.target, kind)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.bind(node.target, self.value(node.iter))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                kind = self.value(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, kind)
        elif isinstance(node, ast.Return) and node.value is not None:
            self.returned(self.value(node.value))
        elif isinstance(node, ast.Assert):
            self.judge.refuse(
                self.value(node.test),
                f"and {self.module.path}:{node.lineno} asserts on the result",
            )
        elif isinstance(node, ast.Expr):
            self.value(node.value)
        else:
            for field in ("test", "exc", "cause", "subject"):
                if isinstance(getattr(node, field, None), ast.expr):
                    self.value(getattr(node, field))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, []):
                if isinstance(child, ast.stmt):
                    self.statement(child)
                elif hasattr(child, "body"):
                    self.statements(child.body)

    def returned(self, kind: Kind) -> None:
        if self.function is not None:
            self.function.result = self.function.result | kind

    def bind(self, target: ast.expr, kind: Kind) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = self.names.get(target.id, PLAIN) | kind
        elif isinstance(target, (ast.Tuple, ast.List)):
            for index, element in enumerate(target.elts):
                self.bind(element, kind.part(index))
        elif isinstance(target, ast.Starred):
            self.bind(target.value, kind)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            self.value(target)
            self.bind(target.value, kind)

    def nested_function(self, node, name: str) -> Function:
        nested = self.function.nested
        if name not in nested:
            nested[name] = _function(node, name, self.module, self.names)
            nested[name].parent = self.function
        function = nested[name]
        function.closure = dict(self.names)
        self.judge.analyze(function)
        return function

    # expressions -----------------------------------------------------------------------------
    def value(self, node: ast.expr) -> Kind:
        if isinstance(node, ast.Constant):
            return PLAIN
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.JoinedStr):  # a message
            for part in node.values:
                self.value(part)
            return PLAIN
        if isinstance(node, ast.FormattedValue):
            self.value(node.value)
            return PLAIN
        if isinstance(node, ast.Lambda):
            lambda_ = self.nested_function(node, f"<lambda:{node.lineno}>")
            lambda_.called = True  # a lambda is a value where it stands
            return lambda_.result
        if isinstance(node, ast.BinOp):
            kinds = [self.value(node.left), self.value(node.right)]
            return self.operation(node, kinds)
        if isinstance(node, ast.Compare):
            # On tensors, elementwise (a mask, a table of verdicts): a computation. Else a
            # verdict, computed only if an operand was.
            kinds = [self.value(o) for o in (node.left, *node.comparators)]
            elementwise = not all(isinstance(o, IDENTITY) for o in node.ops)
            if any(k.student for k in kinds) or (
                elementwise and any(k.tensor for k in kinds)
            ):
                return self.operation(node, kinds)
            return Kind(computed=_merged(kinds).computed)
        if isinstance(node, ast.UnaryOp):
            kind = self.value(node.operand)
            return (
                PLAIN if isinstance(node.op, ast.Not) else self.operation(node, [kind])
            )
        if isinstance(node, (ast.BoolOp, ast.IfExp)):
            if isinstance(node, ast.IfExp):
                self.value(node.test)
                parts = [node.body, node.orelse]
            else:
                parts = node.values
            return _merged(self.value(p) for p in parts)
        if isinstance(node, ast.Tuple) and not any(
            isinstance(e, ast.Starred) for e in node.elts
        ):
            parts = tuple(self.value(e) for e in node.elts)
            return replace(_merged(parts), parts=parts)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return _merged(self.value(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    self.value(key)
            return _merged(self.value(v) for v in node.values)
        if isinstance(node, ast.Starred):
            return self.value(node.value)
        if isinstance(node, ast.NamedExpr):
            kind = self.value(node.value)
            self.bind(node.target, kind)
            return kind
        if isinstance(
            node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
        ):
            for generator in node.generators:
                self.bind(generator.target, self.value(generator.iter))
                for condition in generator.ifs:
                    self.value(condition)
            if isinstance(node, ast.DictComp):
                self.value(node.key)
                return self.value(node.value)
            return self.value(node.elt)
        if isinstance(node, ast.Subscript):
            kind = self.value(node.value)
            index = self.value(node.slice)
            if isinstance(node.slice, ast.Constant) and isinstance(
                node.slice.value, int
            ):
                kind = kind.part(node.slice.value)
            return kind | Kind(computed=index.computed) if not kind.student else kind
        if isinstance(node, ast.Slice):
            return _merged(
                self.value(p) for p in (node.lower, node.upper, node.step) if p
            )
        if isinstance(node, ast.Attribute):
            if self.torch_path(node) is not None or self.module_path(node) is not None:
                return PLAIN
            kind = self.value(node.value)
            return PLAIN if node.attr in PLAIN_ATTRIBUTES else kind
        if isinstance(node, ast.Call):
            return self.call(node)
        return PLAIN

    def name(self, node: ast.Name) -> Kind:
        if node.id in self.names:
            return self.names[node.id]
        function = self.local_function(node.id)
        if function is not None:  # a function handed on as a value: what it returns
            function.called = True
            return function.result
        if node.id in self.module.names:
            return self.module.names[node.id]
        target = self.module.imports.get(node.id, "")
        imported = self.judge.imported_function(target)
        if imported is not None:
            imported.called = True
            return imported.result
        return PLAIN

    def local_function(self, name: str) -> Function | None:
        scope_function = self.function
        while scope_function is not None:
            if name in scope_function.nested:
                return scope_function.nested[name]
            scope_function = scope_function.parent
        return self.module.functions.get(name)

    def operation(self, node: ast.AST, kinds: list[Kind]) -> Kind:
        """An operator (or a computing call) on these operands."""
        if any(k.student for k in kinds):
            for kind in kinds:
                if not kind.student:
                    self.judge.refuse(
                        kind,
                        f"and {self.module.path}:{node.lineno} computes with the "
                        f"student's result on it (`{shipped_shapes.short(node)}`)",
                    )
            return STUDENT
        merged = _merged(kinds)
        if not merged.tensor:
            return merged
        if merged.computed is None:
            merged = replace(merged, computed=self.computation(node))
        return merged

    def computation(self, node: ast.AST) -> Computation:
        function = self.function
        name = function.name if function is not None else "<module>"
        def_line = function.node.lineno if function is not None else 1
        while function is not None and name.startswith("<lambda"):
            function = function.parent
            if function is not None:
                name, def_line = function.name, function.node.lineno
        return Computation(
            name, self.module.path, def_line, node.lineno, shipped_shapes.short(node)
        )

    def torch_path(self, node: ast.expr) -> str | None:
        """``torch.nn.functional.relu`` for ``F.relu``; None when not torch's (or numpy's)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id in self.names:
            return None
        root = self.module.imports.get(node.id, "").replace(":", ".")
        if root.split(".")[0] not in ("torch", "numpy"):
            return None
        return ".".join([root, *reversed(parts)])

    def module_path(self, node: ast.expr) -> str | None:
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name) and node.id not in self.names:
            target = self.module.imports.get(node.id)
            if target is not None and ":" not in target:
                return target
        return None

    def call(self, node: ast.Call) -> Kind:
        arguments = [*node.args, *(k.value for k in node.keywords)]
        kinds = [self.value(a) for a in arguments]
        func = node.func
        what = (
            f"`{shipped_shapes.short(func)}(...)` at {self.module.path}:{node.lineno}"
        )
        # Student code, reached through hw, a handle, or a helper handed a student callable.
        callee = self.value(func) if not isinstance(func, ast.Name) else None
        if callee is not None and callee.student:
            return self.student_call(func, kinds)
        if any(
            k.student and isinstance(a, ast.Attribute)
            for a, k in zip(arguments, kinds, strict=True)
        ):
            return STUDENT
        torch_name = self.torch_path(func)
        if torch_name is not None:
            return self.torch_call(node, torch_name, kinds, what)
        if isinstance(func, ast.Name):
            return self.named_call(node, func.id, kinds, what)
        if self.module_path(func) is not None:  # math, pytest, hypothesis, ...
            if self.module_path(func) == "math":
                return self.math_call(node, kinds)
            return self.compared(kinds, what)
        # A method of a value that is not the student's.
        method = func.attr if isinstance(func, ast.Attribute) else ""
        receiver = callee or PLAIN
        if method in MUTATORS and isinstance(func, ast.Attribute):
            self.bind(func.value, _merged(kinds))
            return PLAIN
        if method in DESCRIPTIONS:
            return PLAIN
        if method in CONVERSIONS or not receiver.tensor:
            if method in SCALARS:  # Python numbers: compared, they give one verdict
                receiver = replace(receiver, tensor=False)
            return receiver | Kind(computed=_merged(kinds).computed)
        return self.operation(node, [receiver, *kinds])

    def math_call(self, node: ast.Call, kinds: list[Kind]) -> Kind:
        """``math.exp(x)`` and its kind compute, on Python numbers too: an expected value
        worked out in floats is still worked out here."""
        kind = self.operation(node, kinds)
        if kind.student or kind.computed is not None:
            return kind
        return replace(kind, computed=self.computation(node))

    def student_call(self, func: ast.expr, kinds: list[Kind]) -> Kind:
        return STUDENT

    def torch_call(self, node, name: str, kinds: list[Kind], what: str) -> Kind:
        last = name.rsplit(".", 1)[-1]
        if any(k.student for k in kinds) and last not in COMPARISON_CALLS:
            return self.operation(node, kinds)
        if name.startswith("torch") and last in INPUT_CALLS:
            if (
                last in ("tensor", "as_tensor")
                and node.args
                and shipped_shapes.is_literal(node.args[0])
            ):
                return (
                    TENSOR  # written out, as a stored answer is: what it gives computes
                )
            return TENSOR | Kind(computed=_merged(kinds).computed)
        if name.startswith("torch") and last in COMPARISON_CALLS:
            return self.compared(kinds, what)
        if name.startswith("torch") and last in NEUTRAL_CALLS:
            return PLAIN
        return self.operation(node, [TENSOR, *kinds])

    def named_call(self, node, name: str, kinds: list[Kind], what: str) -> Kind:
        if name in self.names:  # a callable held in a variable
            held = self.names[name]
            return STUDENT if held.student else held | _merged(kinds)
        function = self.local_function(name)
        target = self.module.imports.get(name, "")
        if function is None:
            function = self.judge.imported_function(target)
        if function is not None:
            function.called = True
            self.pass_arguments(function, node, kinds)
            return function.result
        module = target.partition(":")[0]
        if module == "math":
            return self.math_call(node, kinds)
        if module == ANSWERS:
            return TENSOR
        if module in INPUT_MODULES:
            return TENSOR | Kind(computed=_merged(kinds).computed)
        if module in COMPARISON_MODULES or target:
            return self.compared(kinds, what)
        if name in PLAIN_BUILTINS:
            return PLAIN
        if name in CONTAINER_BUILTINS:
            return _merged(kinds)
        return self.operation(node, kinds)

    def pass_arguments(self, function: Function, node: ast.Call, kinds) -> None:
        names = list(function.declared)
        passed = function.passed
        for name in names:
            passed.setdefault(name, PLAIN)
        for index, argument in enumerate(node.args):
            if isinstance(argument, ast.Starred) or index >= len(names):
                for parameter in names[index:]:
                    passed[parameter] |= kinds[index]
            else:
                passed[names[index]] |= kinds[index]
        rest = function.node.args.kwarg
        for keyword, kind in zip(node.keywords, kinds[len(node.args) :], strict=True):
            if keyword.arg in passed:
                passed[keyword.arg] |= kind
            elif rest is not None:
                passed[rest.arg] |= kind

    def compared(self, kinds: list[Kind], what: str) -> Kind:
        """A call that compares (or any call outside the shipped suite): no computed value in."""
        for kind in kinds:
            self.judge.refuse(kind, f"and its result is handed to {what}")
        return PLAIN


def _merged(kinds) -> Kind:
    merged = PLAIN
    for kind in kinds:
        merged = merged | kind
    return merged
