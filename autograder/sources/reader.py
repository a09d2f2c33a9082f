"""The reader: each student file checked against the rules (``autograder.facts.rules``) before any
test, read once, in time linear in its size, in a child process under a time and memory budget
(``scan_package``): a file it cannot read costs its own part.

It does not resolve aliases: names are judged as written, and a library object can only be
reached through names. Beside the allow-list it names a forbidden call written out
(``torch.softmax(x)``, ``x.softmax()``), so that ``autograder check``, which runs without the
watch, tells a student at once.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from autograder.facts import rules as rules_module
from autograder.facts.points import MODULES, PACKAGE
from autograder.facts.rules import (
    ALLOWED_PATHS,
    ANYWHERE,
    BUILTINS_OFF,
    DYNAMIC,
    EVERY_FORBIDDEN,
    FAMILY_WORDS,
    FRAMES,
    FROM_TEXT,
    HANDED_ON,
    IMPORTERS,
    IMPORTS,
    JUDGED_BY_ARGUMENTS,
    JUDGED_PATHS,
    LIMITED,
    LOOKUP_METHODS,
    LOOKUPS,
    MAX_MODULE,
    OFF_LIMITS,
    PICKLES,
    PRIVATE,
    READ_MEMORY,
    READ_SECONDS,
    ROOTS,
    RULES,
    TORCH_UTILS,
    Reason,
    Violation,
)


def scan_source(filename: str, source: str) -> list[Violation]:
    """Violations in one file's source, read on its own (other student files unknown), in this
    process: for tests and trusted text."""
    sources = {filename: source}
    return scan_reporting(sources, lambda filename: None, clashing_names(sources))


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
    clashes = clashing_names(sources)
    while sources:
        found, failed = _read_in_child(sources, clashes)
        if failed is None:
            violations += [Violation(**v) for v in found]
            break
        filename, why = failed
        violations.append(unreadable(filename, why))
        del sources[filename]
    return sorted(violations, key=lambda v: (v.file, v.line, v.call))


def unreadable(filename: str, why: str, line: int = 1, instead: str = "") -> Violation:
    """The violation of a file the reader could not read: only its own part, as a file that
    does not compile."""
    instead = instead or (
        "write ordinary code (statements rather than one vast expression, no deep nesting, "
        "no generated tables)"
    )
    advice = f"{why}, so it cannot be checked against the rules; {instead}"
    return Violation(filename, line, "", advice=advice)


#: A method a student's class defines under a private name (``def _device(self)``).
_PRIVATE_METHOD = re.compile(r"\bdef\s+(_[A-Za-z0-9]\w*)\s*\(")


def clashing_names(sources: dict[str, str]) -> frozenset[str]:
    """The private method names the sources define that library objects have too: read
    through a parameter (``model._device()``) they could reach the library's instead."""
    defined = {m for text in sources.values() for m in _PRIVATE_METHOD.findall(text)}
    return frozenset(defined & _library_private_names()) if defined else frozenset()


@functools.cache
def _library_private_names() -> frozenset[str]:
    """``library_private_names`` as a fresh Python finds it, importing only the libraries a
    student file may import: the answer never depends on what this process happens to have
    loaded (a grading process or a test run loads more of torch). Once per installation: kept
    in the user's cache folder (``_private_names_file``), found afresh where it is not there."""
    kept = _private_names_file()
    with contextlib.suppress(OSError, ValueError):
        names = json.loads(kept.read_text())
        if isinstance(names, list) and all(type(n) is str for n in names):
            return frozenset(names)
    code = (
        "import json; from autograder.sources.reader import library_private_names; "
        "print(json.dumps(sorted(library_private_names())))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=_ENGINE_ROOT,
    )
    names = json.loads(done.stdout)
    # A cache folder that cannot be written: found afresh next time.
    with contextlib.suppress(OSError):
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_name(f"{kept.name}.{os.getpid()}")
        partial.write_text(json.dumps(names))
        os.replace(partial, kept)
    return frozenset(names)


def _private_names_file() -> Path:
    """Where ``_library_private_names`` keeps its answer: a file named by a digest of all it
    depends on (this Python, the code that finds the names, and the installed files of each
    importable library), so that another version of any of them finds them afresh."""
    key = [sys.executable, sys.version]
    for code in (Path(__file__), Path(rules_module.__file__)):
        key.append(hashlib.sha256(code.read_bytes()).hexdigest())
    for root in sorted(ROOTS):
        origin = getattr(importlib.util.find_spec(root), "origin", None)  # not imported
        with contextlib.suppress(OSError, TypeError):
            found = os.stat(origin)
            origin = f"{origin} {found.st_size} {found.st_mtime_ns}"
        key.append(f"{root} {origin}")
    digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:32]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "autograder" / f"library-private-names-{digest}.json"


def library_private_names() -> frozenset[str]:
    """The private names that reach more than public names do, in the importable libraries
    once imported: a private name a module binds to an object no public name binds
    (``torch._C``; not ``torch.types._device``, which is ``torch.device``), and the private
    attributes of torch's tensors and modules."""
    for root in sorted(ROOTS):
        try:
            importlib.import_module(root)
        except ImportError:  # an allowed library that is not installed reaches nothing
            continue
    import torch

    public: set[int] = set()
    private: dict[str, list[int]] = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] not in ROOTS or module is None:
            continue
        for key, value in list(vars(module).items()):
            if _private(key):
                private.setdefault(key, []).append(id(value))
            else:
                public.add(id(value))
    names = {k for k, ids in private.items() if not public.issuperset(ids)}
    for holder in (torch.zeros(1), torch.nn.Parameter(), torch.nn.Linear(1, 1)):
        names.update(n for n in dir(holder) if _private(n))
    return frozenset(names)


def scan_reporting(
    sources: dict[str, str], progress, clashes: frozenset[str] = frozenset()
) -> list[Violation]:
    """``scan_package``'s reading, with ``progress(filename)`` called as each file's turn
    comes, so a reader stopped on the way names the file; ``clashes``: ``clashing_names``."""
    found = []
    for filename in sorted(sources):
        progress(filename)
        try:
            tree = ast.parse(sources[filename])
        except SyntaxError as exc:  # the import fails too, and says where
            why = f"it does not parse ({exc.msg})"
            found.append(unreadable(filename, why, exc.lineno or 1, "fix the syntax"))
            continue
        except ValueError as exc:  # a null byte
            found.append(unreadable(filename, f"it does not parse ({exc})"))
            continue
        found += _Reader(filename, sources[filename], tree, clashes).read()
    return found


# Reading under a budget ----------------------------------------------------------------------
#: The folder ``autograder`` is imported from, for the child.
_ENGINE_ROOT = str(Path(__file__).resolve().parents[2])
_CHILD = (
    "import sys; sys.path.append(sys.argv[1]); "
    "from autograder.sources.reader import child_main; child_main(int(sys.argv[2]), sys.argv[3])"
)


def _read_in_child(sources: dict[str, str], clashes: frozenset[str]):
    """``(violations as dicts, None)``, or ``([], (file, why))`` when reading stopped on that
    file: it raised, ran out of time or memory, or the child died reading it."""
    command = [sys.executable, "-I", "-S", "-c", _CHILD, _ENGINE_ROOT, str(READ_MEMORY)]
    command.append(json.dumps(sorted(clashes)))
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
        from autograder.sources.runner import (
            SuiteError,  # a grader's failure, never a zero
        )

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


def child_main(memory: int, clashes: str = "[]") -> None:
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
        found = scan_reporting(sources, progress, frozenset(json.loads(clashes)))
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


# The reader ------------------------------------------------------------------------------------
#: What a name is bound to, over the whole file: the student's own module, function, class,
#: object (``OWN``), anything else (``OTHER``), or a library object by its import path.
OWN, OTHER = "own", "other"
#: The longest attribute chain whose library path is followed (``torch.nn.functional.softmax``
#: is four names); beyond it, names are judged one by one.
MAX_PATH = 8


class _Reader:
    """One student file, read once: what each name is bound to anywhere in the file (no scopes:
    a name bound both ways is not the student's own), then each node judged on its own."""

    def __init__(
        self, filename: str, source: str, tree: ast.Module, clashes=frozenset()
    ):
        self.filename, self.tree = filename, tree
        self.lines = source.encode(errors="replace").splitlines()
        self.forbidden = RULES.get(filename, EVERY_FORBIDDEN)
        self.whole = filename not in RULES
        self.kinds: dict[str, set[str]] = {}
        self.found: list[Violation] = []
        self._roots: dict[ast.AST, ast.AST] = {}
        self.classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        #: Private methods the file's classes define that no library object has: read on
        #: any object, they name the student's own (``model._device()``).
        self.own_methods = {
            f.name
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef)
            for f in c.body
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and _private(f.name)
        } - clashes
        self._bind_all()

    # What names are bound to ---------------------------------------------------------------
    def _bind_all(self) -> None:
        assigned = {}  # a name's only target -> the value it is bound to
        for node in ast.walk(self.tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                assigned[node.targets[0]] = node.value
        later = []
        self.receiver_uses = _receiver_uses(self.tree)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    path = a.name if a.asname else a.name.split(".")[0]
                    self._bind(a.asname or path, self._module_kind(path))
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    own = _own_module(node)
                    kind = OWN if own else f"{node.module}.{a.name}"
                    self._bind(a.asname or a.name, kind)
            elif isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                self._bind(node.name, OWN)
            elif isinstance(node, ast.arg) and node.arg not in RECEIVERS:
                self._bind(node.arg, OTHER)  # a receiver's uses: ``receiver_uses``
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                if node in assigned:
                    later.append(node)
                else:
                    self._bind(node.id, OTHER)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                self._bind(node.name, OTHER)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self._bind(node.rest, OTHER)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._bind(node.name, OTHER)
        for target in later:  # after the imports and definitions they may name
            self._bind(target.id, self._value_kind(assigned[target]))

    def _bind(self, name: str, kind: str) -> None:
        self.kinds.setdefault(name, set()).add(kind)

    def _module_kind(self, path: str) -> str:
        root = path.split(".")[0]
        return OWN if root in (PACKAGE, *MODULES) else path

    def _value_kind(self, value: ast.AST) -> str:
        """``x = OwnClass(...)`` is the student's own; ``m = importlib.import_module("math")``
        and ``w = __import__("warnings")`` are that module; anything else is other."""
        if not isinstance(value, ast.Call):
            return OTHER
        if self._own(value):
            return OWN
        module = self._imported_by(value)
        if module is None:
            return OTHER
        if module.startswith("."):
            return OWN
        return self._module_kind(
            module
            if self._is(value.func, "importlib.import_module")
            else module.split(".")[0]
        )

    def _imported_by(self, node: ast.Call) -> str | None:
        """The constant module name a dynamic import call names, if it is one."""
        if not node.args:
            return None
        if self._builtin(node.func, "__import__") or self._is(
            node.func, "importlib.import_module"
        ):
            return _const(node.args[0])
        return None

    # Names and chains ------------------------------------------------------------------------
    def _root(self, node: ast.AST) -> ast.AST:
        chain = []
        while isinstance(node, ast.Attribute) and node not in self._roots:
            chain.append(node)
            node = node.value
        root = self._roots.get(node, node)
        for link in chain:
            self._roots[link] = root
        return root

    def _own(self, node: ast.AST, anywhere: bool = False) -> bool:
        """``node`` is the student's own module, function, class or object: a name bound to
        nothing else in the file, ``self``, ``super()``, ``type(self)``, an instance of a class
        defined here. ``anywhere``: hangs off a name bound to one of them, among other things."""
        if anywhere:
            node = self._root(node)
        if isinstance(node, ast.Call):
            if self._builtin(node.func, "super"):
                return True
            if self._builtin(node.func, "type") and len(node.args) == 1:
                return self._own(node.args[0], anywhere)
            func = node.func
            return (
                isinstance(func, ast.Name)
                and func.id in self.classes
                and self._own(func)
            )
        if not isinstance(node, ast.Name):
            return False
        if node in self.receiver_uses:
            return self.receiver_uses[node]
        kinds = self.kinds.get(node.id, {OWN} if node.id in RECEIVERS else set())
        return OWN in kinds if anywhere else kinds == {OWN}

    def _paths(self, node: ast.AST) -> set[str]:
        """The library paths ``node`` may name (``F.softmax``: ``torch.nn.functional.softmax``)."""
        attrs = []
        while isinstance(node, ast.Attribute) and len(attrs) < MAX_PATH:
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return set()
        tail = "".join(f".{a}" for a in reversed(attrs))
        return {k + tail for k in self.kinds.get(node.id, ()) if k not in (OWN, OTHER)}

    def _is(self, node: ast.AST, path: str) -> bool:
        return path in self._paths(node)

    def _builtin(self, node: ast.AST, name: str) -> bool:
        return isinstance(node, ast.Name) and node.id == name and name not in self.kinds

    # Judging -----------------------------------------------------------------------------------
    def read(self) -> list[Violation]:
        todo: list[tuple[ast.AST, ast.AST | None]] = [(self.tree, None)]
        while todo:
            node, parent = todo.pop()
            self._judge(node, parent)
            todo.extend((child, node) for child in self._children(node))
        return sorted(set(self.found), key=lambda v: (v.line, v.call))

    def _children(self, node: ast.AST) -> list[ast.AST]:
        """What is read of ``node``: not what is imported under ``typing.TYPE_CHECKING``, nor
        annotations that call nothing (names used only there are no uses)."""
        if isinstance(node, ast.If) and self._type_checking(node.test):
            return [node.test, *node.orelse]
        skip = None
        if isinstance(node, (ast.arg, ast.AnnAssign)):
            skip = node.annotation
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip = node.returns
        children = list(ast.iter_child_nodes(node))
        if skip is not None and not any(
            isinstance(n, ast.Call) for n in ast.walk(skip)
        ):
            children.remove(skip)
        return children

    def _type_checking(self, test: ast.AST) -> bool:
        if isinstance(test, ast.Name):
            return self.kinds.get(test.id) == {"typing.TYPE_CHECKING"}
        return self._paths(test) == {"typing.TYPE_CHECKING"}

    def _refuse(self, node: ast.AST, reason: Reason, what: str = "") -> None:
        advice = f"{reason.why}; {reason.instead}"
        what = what or self._snippet(node)
        self.found.append(
            Violation(self.filename, node.lineno, what, self.whole, advice)
        )

    def _snippet(self, node: ast.AST) -> str:
        """``node`` as written, at most 60 characters, cut from its line in constant time."""
        line, start = self.lines[node.lineno - 1], node.col_offset
        one_line = node.end_lineno == node.lineno
        end = min(node.end_col_offset if one_line else len(line), start + 240)
        text = line[start:end].decode(errors="replace")
        whole = one_line and end == node.end_col_offset and len(text) <= 60
        return text if whole else text[:57] + "..."

    def _judge(self, node: ast.AST, parent: ast.AST | None) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                self._judge_import(node, a.name, f"import {a.name}")
        elif isinstance(node, ast.ImportFrom) and not _own_module(node):
            for a in node.names:
                what = f"from {node.module} import {a.name}"
                if self._judge_import(node, node.module, what) and a.name != "*":
                    self._judge_name(node, a.name, f"{node.module}.{a.name}", what)
        elif isinstance(node, ast.Attribute):
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                self._judge_chain(node)  # at the chain's end, once
                self._judge_importer(node, parent)
        elif isinstance(node, ast.Name):
            self._judge_bare(node, parent)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in ANYWHERE:
                self._refuse(node, ANYWHERE[node.name], f"def {node.name}")
            if isinstance(node, ast.ClassDef):
                self._judge_class(node)
        elif isinstance(node, ast.Call):
            self._judge_call(node, parent)

    def _judge_import(self, node: ast.AST, module: str, what: str) -> bool:
        """An import of ``module`` (and of each package on its path): allowed or refused."""
        parts = module.split(".")
        if parts[0] in (PACKAGE, *MODULES):
            return True
        if parts[0] not in ROOTS:
            self._refuse(node, OFF_LIMITS.get(parts[0], IMPORTS), what)
            return False
        for i, name in enumerate(parts[1:], 1):
            if not self._judge_name(node, name, ".".join(parts[: i + 1]), what):
                return False
        return True

    def _judge_name(
        self, node: ast.AST, name: str, path: str, what: str, own: bool = False
    ) -> bool:
        """``name`` read off a library object at ``path`` (or off the student's own object,
        ``own``, or an unknown one, ``path`` empty): allowed, or refused once."""
        reason = ANYWHERE.get(name)
        root = path.split(".")[0]
        if reason is None and not own and path not in ALLOWED_PATHS:
            if root in LIMITED and path.count(".") == 1 and name not in LIMITED[root]:
                reason = FRAMES
            elif _private(name) and not (not path and name in self.own_methods):
                reason = PRIVATE
            else:
                reason = OFF_LIMITS.get(name)
            if path.startswith("torch.utils.") and path.count(".") == 2:
                reason = reason or (None if name in TORCH_UTILS else IMPORTS)
        if reason is not None:
            self._refuse(node, reason, what)
        return reason is None

    def _judge_chain(self, node: ast.Attribute) -> None:
        """An attribute chain, from its root outward, up to the first name it may not read
        (``torch._C._VariableFunctions`` is refused once, at ``torch._C``)."""
        links = []
        while isinstance(node, ast.Attribute):
            links.append(node)
            node = node.value
        for link in reversed(links):
            own = self._own(link.value)
            if not self._judge_name(link, link.attr, self._path(link), "", own):
                return

    def _judge_bare(self, node: ast.Name, parent: ast.AST | None) -> None:
        """A name read as a value: a refused builtin, a dynamic builtin handed on, a module
        used only by some of its names handed on whole, or a dunder that torch calls."""
        if node.id in ANYWHERE:
            self._refuse(node, ANYWHERE[node.id], node.id)
        if not isinstance(node.ctx, ast.Load):
            return
        called = isinstance(parent, ast.Call) and parent.func is node
        if node.id in BUILTINS_OFF and node.id not in self.kinds:
            self._refuse(parent if called else node, BUILTINS_OFF[node.id])
        elif node.id in HANDED_ON and node.id not in self.kinds and not called:
            self._refuse(
                node,
                DYNAMIC,
                self._snippet(parent if isinstance(parent, ast.expr) else node),
            )
        elif self.kinds.get(node.id, set()) & IMPORTERS:
            self._judge_importer(node, parent)
        elif any(k in LIMITED for k in self.kinds.get(node.id, ())) and not (
            isinstance(parent, ast.Attribute) and parent.value is node
        ):
            self._refuse(node, FRAMES, f"{node.id} (the whole module)")

    def _judge_importer(self, node: ast.expr, parent: ast.AST | None) -> None:
        """A library function that imports by a string, anywhere but called."""
        called = isinstance(parent, ast.Call) and parent.func is node
        if not called and self._paths(node) & IMPORTERS:
            self._refuse(node, DYNAMIC)

    def _hidden_arguments(self, node: ast.Call) -> bool:
        """A call judged by its arguments (``getattr``, ``import_module``...) whose arguments
        are starred or ``**`` keywords: what it looks up is computed."""
        func = node.func
        judged = (
            any(self._builtin(func, name) for name in JUDGED_BY_ARGUMENTS)
            or bool(self._paths(func) & JUDGED_PATHS)
            or (isinstance(func, ast.Attribute) and func.attr in LOOKUP_METHODS)
        )
        return judged and (
            any(isinstance(a, ast.Starred) for a in node.args)
            or any(k.arg is None for k in node.keywords)
        )

    def _judge_class(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            if self._builtin(base, "type"):
                self._refuse(node, FROM_TEXT, f"class {node.name}(type)")
            self._judge_forbidden(base, base)
        for keyword in node.keywords:
            if keyword.arg == "metaclass" and not self._paths(keyword.value):
                self._refuse(node, FROM_TEXT, f"class {node.name}(metaclass=...)")

    def _judge_call(self, node: ast.Call, parent: ast.AST | None = None) -> None:
        func, args = node.func, node.args
        called = isinstance(parent, ast.Call) and parent.func is node
        self._judge_forbidden(node, func)
        for keyword in node.keywords:
            if (
                keyword.arg in PICKLES
                and _constant(keyword.value) != PICKLES[keyword.arg]
            ):
                self._refuse(node, FROM_TEXT)
        name = _const(args[1]) if len(args) >= 2 else None
        if self._hidden_arguments(node):
            self._refuse(node, DYNAMIC)
        elif self._builtin(func, "getattr") and len(args) >= 2:
            self._judge_lookup(node, args[0], args[1], called)
        elif isinstance(func, ast.Attribute) and func.attr in LOOKUP_METHODS and args:
            # a bound method takes the name, an unbound one the object and the name
            base, key = (func.value, args[0]) if len(args) == 1 else args[:2]
            self._judge_lookup(node, base, key, called)
        elif self._builtin(func, "setattr") and len(args) >= 2:
            if name is not None:
                self._judge_name(node, name, "", "", self._own(args[0]))
            elif not (
                isinstance(args[0], ast.Name)
                and args[0].id == "self"
                and self._own(args[0])
            ):
                self._refuse(node, DYNAMIC)
        elif self._builtin(func, "vars") and not (args and self._own(args[0])):
            self._refuse(node, FRAMES)
        elif self._builtin(func, "type") and len(args) == 3:
            self._refuse(node, FROM_TEXT)
        elif self._builtin(func, "__import__") or self._is(
            func, "importlib.import_module"
        ):
            module = _const(args[0]) if args else None
            if module is None:
                self._refuse(node, DYNAMIC)
            elif self._relative_elsewhere(node):
                self._refuse(node, IMPORTS)
            elif not module.startswith("."):
                self._judge_import(node, module, self._snippet(node))
        elif self._is(func, "operator.attrgetter") or self._is(
            func, "operator.methodcaller"
        ):
            for arg in args if self._is(func, "operator.attrgetter") else args[:1]:
                text = _const(arg)
                if text is None:
                    self._refuse(node, DYNAMIC)
                for part in (text or "").split("."):
                    if part and not self._judge_name(
                        node, part, "", self._snippet(node)
                    ):
                        break

    def _relative_elsewhere(self, node: ast.Call) -> bool:
        """An import relative to a package other than the student's own:
        ``import_module(".util", "importlib")``, ``__import__("abc", g, l, f, 1)``."""
        keywords = {k.arg: k.value for k in node.keywords}
        if self._builtin(node.func, "__import__"):
            level = node.args[4] if len(node.args) > 4 else keywords.get("level")
            return level is not None and _constant(level) != 0
        if not (_const(node.args[0]) or "").startswith("."):
            return False
        anchor = node.args[1] if len(node.args) > 1 else keywords.get("package")
        return not (
            (isinstance(anchor, ast.Name) and anchor.id == "__package__")
            or (_const(anchor) or "").split(".")[0] == PACKAGE
        )

    def _judge_lookup(
        self, node: ast.Call, base: ast.AST, key: ast.AST, called: bool
    ) -> None:
        """``getattr(base, key)`` and its kin: a constant name judged as an attribute, a
        computed one allowed on the student's own objects, and on ``LOOKUPS`` where what it
        finds is called at once (a module found there, or its namespace, is never handed on:
        the watch judges the function found when it runs)."""
        own, name = self._own(base), _const(key)
        if name is None:
            if not (own or (called and self._paths(base) & LOOKUPS)):
                self._refuse(node, DYNAMIC)
            return
        path = f"{self._path(base)}.{name}" if self._path(base) else ""
        ok = self._judge_name(node, name, path, "", own)
        if ok and not own and _forbidden(name, self.forbidden, bool(path)):
            self._add_forbidden(node, self._snippet(node))

    def _path(self, node: ast.AST) -> str:
        """The library path ``node`` names, when it names exactly one (else empty)."""
        paths = self._paths(node)
        return next(iter(paths)) if len(paths) == 1 else ""

    def _judge_forbidden(self, node: ast.AST, func: ast.AST) -> None:
        """A forbidden library function called (or subclassed) by its name as written: an
        attribute of anything but the student's own objects (``torch.softmax``,
        ``x.softmax``), or a name imported from a library (by the name it has there)."""
        paths = self._paths(func)
        if isinstance(func, ast.Attribute) and not self._own(func.value, anywhere=True):
            names = {func.attr}
        elif isinstance(func, ast.Name):
            names = {path.rsplit(".", 1)[-1] for path in paths}
        else:
            return
        if any(_forbidden(name, self.forbidden, bool(paths)) for name in names):
            self._add_forbidden(node, self._snippet(func))

    def _add_forbidden(self, node: ast.AST, call: str) -> None:
        self.found.append(Violation(self.filename, node.lineno, call, self.whole))


def _forbidden(name: str, forbidden: frozenset[str], library: bool) -> bool:
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


#: The names a method's first parameter goes by.
RECEIVERS = ("self", "cls", "mcs")


def _receivers(tree: ast.Module) -> set[ast.arg]:
    """The first parameter of each method a class of the file defines (not a static one), also
    under an ``if`` or ``try`` of the class body."""
    found = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        todo = list(cls.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                static = any(
                    isinstance(d, ast.Name) and d.id == "staticmethod"
                    for d in node.decorator_list
                )
                positional = [*node.args.posonlyargs, *node.args.args]
                if positional and not static:
                    found.add(positional[0])
            elif not isinstance(node, ast.ClassDef):
                todo += [
                    child
                    for child in ast.iter_child_nodes(node)
                    if isinstance(child, ast.stmt)
                ]
    return found


def _receiver_uses(tree: ast.Module) -> dict[ast.Name, bool]:
    """Each use of ``self``, ``cls`` or ``mcs`` inside a function that takes it as a parameter
    -> whether it is the student's own object: that parameter is a method's receiver, or
    defaults to one (``def inner(self=self)``). A parameter named so elsewhere (``def
    peek(self, name)`` at module level) is anyone's."""
    receivers = _receivers(tree)
    uses: dict[ast.Name, bool] = {}
    todo: list[tuple[ast.AST, tuple[dict[str, bool], ...]]] = [(tree, ())]
    while todo:
        node, scopes = todo.pop()
        if isinstance(node, ast.Name) and node.id in RECEIVERS:
            found = [scope[node.id] for scope in scopes if node.id in scope]
            if found:
                uses[node] = found[-1]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            defaults = dict(
                zip(positional[len(positional) - len(args.defaults) :], args.defaults)
            )
            defaults |= {a: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d}
            params: dict[str, bool] = {}
            for arg in [*positional, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.arg in RECEIVERS:
                    default = defaults.get(arg)
                    params[arg.arg] = arg in receivers or (
                        isinstance(default, ast.Name)
                        and default.id in RECEIVERS
                        and [sc[default.id] for sc in scopes if default.id in sc][-1:]
                        == [True]
                    )
            inner = (*scopes, params)
            outer_parts = [*args.defaults, *filter(None, args.kw_defaults)]
            outer_parts += getattr(node, "decorator_list", [])
            body = node.body if isinstance(node.body, list) else [node.body]
            todo += [(child, scopes) for child in outer_parts]
            todo += [(child, inner) for child in body]
            todo += [(a.annotation, scopes) for a in positional if a.annotation]
            if getattr(node, "returns", None) is not None:
                todo.append((node.returns, scopes))
        else:
            todo += [(child, scopes) for child in ast.iter_child_nodes(node)]
    return uses


def _own_module(node: ast.ImportFrom) -> bool:
    """An import from the student's package: relative, by the package's name, or by a module's
    bare name (``from attention import x``, a script's fallback import)."""
    return node.level > 0 or (node.module or "").split(".")[0] in (PACKAGE, *MODULES)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _const(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _constant(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else ...
