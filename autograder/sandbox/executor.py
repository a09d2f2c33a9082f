"""Carry out protocol requests against a submission's ``transformer_hw`` package.

This is the only code that touches student objects. It runs wherever the student code runs: in
the test process for ``pytest tests`` (debugging) and inside the sandboxed worker for graded runs.
Everything it returns is plain data (see ``autograder.facts.protocol``); any other object stays here in
the object table and leaves only as a ``HandleRef``.
"""

from __future__ import annotations

import importlib
import numbers
import random
import sys
import traceback
from pathlib import Path

import numpy
import torch

from autograder.facts.points import MODULES, PACKAGE
from autograder.facts.protocol import (
    ErrorInfo,
    Handle,
    HandleRef,
    StudentError,
    Submission,
    map_plain,
    tensors_in,
    to_refs,
)

#: Objects a test may construct that are not part of the student package: a random
#: generator, and a one-shot iterator (over a list it is given) for what takes any iterable.
LIBRARY_CLASSES = {"torch.Generator": torch.Generator, "builtins.iter": iter}


class OnlyAssignmentModules:
    """An import hook: the package's modules are the assignment's files and nothing else.

    Grading stages only those files (``autograder.sources.intake``), so a helper module imported from
    them fails there; refusing it here too, with the reason, makes a run in-process (``autograder
    check``) fail where the graded run will."""

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.partition(".")
        if package == PACKAGE and name and name.split(".")[0] not in MODULES:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: only the assignment's files are graded "
                f"({', '.join(f'{m}.py' for m in MODULES)}); keep helpers in the module "
                "files that use them",
                name=fullname,
            )


class Executor:
    """Holds the objects a test works with and applies one request at a time."""

    #: The submission folder the latest executor of this process added to ``sys.path``.
    _roots: tuple[str, ...] = ()

    def __init__(
        self, root: Path | str, arguments_are_copies: bool = False, serving=None
    ):
        """``arguments_are_copies``: every tensor of a request is the executor's alone (decoded
        from the wire in a sandboxed worker), so the student may have it without a copy; a
        test's own tensors (in-process) are copied first. ``serving(path)`` is told the student
        file each request runs the code of (``autograder.sandbox.tripwire.serving``), and ``None``
        after it."""
        self.root = Path(root)
        self.serving = serving or (lambda path: None)
        self._copy_tensors = not arguments_are_copies
        # Full float32 precision on GPUs: TF32 matmuls would miss the float32 tolerances.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self._objects: dict[int, object] = {}
        #: handle id -> the student file of the request that returned the object
        self._files: dict[int, str | None] = {}
        self._served_by_new: str | None = None
        self._ids: dict[
            int, int
        ] = {}  # id(object) -> handle id, so one object has one handle
        # First on the path, and the only submission there: one run earlier in this process
        # would otherwise still lend its modules (to a package without __init__.py, say).
        root = str(self.root)
        for earlier in Executor._roots:
            while earlier in sys.path:
                sys.path.remove(earlier)
        Executor._roots = (root,)
        if root in sys.path:  # put there by others: theirs to keep
            sys.path.remove(root)
            Executor._roots = ()
        sys.path.insert(0, root)
        # A fresh worker has none to forget, and walking all of sys.modules there would copy
        # the pages it shares with the template (milliseconds per worker).
        if PACKAGE in sys.modules:
            inside = PACKAGE + "."
            for name in [
                m for m in sys.modules if m == PACKAGE or m.startswith(inside)
            ]:
                del sys.modules[name]
        if not any(isinstance(f, OnlyAssignmentModules) for f in sys.meta_path):
            sys.meta_path.insert(0, OnlyAssignmentModules())

    def run(
        self,
        op: str,
        target: HandleRef | None,
        name: str | None,
        args: tuple,
        kwargs: dict,
    ):
        """Return ``("ok", value)`` or ``("error", ErrorInfo, exception)``."""
        try:
            served = self._file_served(None if op == "forwards" else target, name)
            self._served_by_new = served
            self.serving(served)
            try:  # the result's conversion too: a student object's own methods may run there
                value = self._dispatch(
                    op, target, name, self._inward(args), self._inward(kwargs)
                )
                return ("ok", self._outward(value))
            finally:
                self.serving(None)
        except (
            BaseException
        ) as exc:  # student code may raise anything, SystemExit included
            if isinstance(exc, KeyboardInterrupt):
                raise
            return ("error", error_info(exc), exc)

    def _file_served(self, target: HandleRef | None, name: str | None) -> str | None:
        """The student file whose code a request runs, from what the grader named: the module
        its name starts with, or for a request on an object, the file of the request that
        returned the object (never an attribute student code could set; an object reached
        through another's attributes counts as that one's file)."""
        if target is not None:
            return self._files.get(target.id)
        module = (name or "").split(".")[0]
        return str(self.root / PACKAGE / f"{module}.py") if module in MODULES else None

    def _dispatch(self, op, target, name, args, kwargs):
        if op == "call":
            return self._resolve(name)(*args, **kwargs)
        if op == "new":
            return (LIBRARY_CLASSES.get(name) or self._resolve(name))(*args, **kwargs)
        if op == "build":
            new_args, new_kwargs, to, state = args
            built = self._dispatch("new", None, name, new_args, new_kwargs)
            if to:
                built.to(**to)
            if state is not None:
                load_state(built, state)
            return built
        if op == "seed":
            (seed,) = args
            torch.manual_seed(seed)
            random.seed(seed)
            return None
        if op == "checked":
            return self._checked(target, name, args, kwargs)
        if op == "gradients":
            return self._gradients(target, name, args, kwargs)
        if op == "elsewhere":
            return self._elsewhere(target, name, args, kwargs)
        if op == "default_dtype":
            dtype, *args = args
            saved = torch.get_default_dtype()
            torch.set_default_dtype(dtype)
            try:
                return self._dispatch("call", None, name, args, kwargs)
            finally:
                torch.set_default_dtype(saved)
        obj = self._objects[target.id]
        if op == "method":
            return getattr(obj, name)(*args, **kwargs)
        if op == "getattr":
            return getattr(obj, name)
        if op == "load_state":
            return load_state(obj, *args)
        if op == "state_dict":
            return dict(obj.state_dict())
        if op == "forwards":
            return self._forwards(obj, name, args, kwargs)
        raise ValueError(f"unknown request {op!r}")

    def _forwards(self, module, name, args, kwargs):
        """The call's result and a record of each forward pass of ``module`` during it."""
        passes = []

        def record(mod, f_args, f_kwargs):
            idx = f_args[0] if f_args else f_kwargs.get("idx")
            caches = f_args[1] if len(f_args) > 1 else f_kwargs.get("caches")
            shaped = isinstance(idx, torch.Tensor) and idx.dim() > 0
            passes.append(
                {
                    "tokens": int(idx.shape[-1]) if shaped else None,
                    "cached": caches is not None,
                    "grad": torch.is_grad_enabled(),
                    "training": bool(mod.training),
                }
            )

        hook = module.register_forward_pre_hook(record, with_kwargs=True)
        try:
            return self._dispatch("call", None, name, args, kwargs), passes
        finally:
            hook.remove()

    def _checked(self, target, name, args, kwargs):
        """``call`` (``method`` with a target) handing every tensor over as a non-contiguous
        copy; ``(result, after)``, where ``after`` holds those copies as the call left them,
        for the grading process to compare with what it sent (``changed_arguments``).

        SPEC.md: inputs are never modified in place and any tensor of the stated shape is
        accepted, contiguous or not. The copies are made here, next to the student code; the
        verdict is not, so no function that student code could reach decides it.
        """
        given_args, given_kwargs = map_plain((args, kwargs), noncontiguous)
        value = self._dispatch(
            "call" if target is None else "method",
            target,
            name,
            given_args,
            given_kwargs,
        )
        return value, [t for _, t in tensors_in(given_args, given_kwargs)]

    def _elsewhere(self, target, name, args, kwargs):
        """A request (its kind the first argument: ``call``, ``new``, ``method`` or
        ``getattr``) with every tensor argument on a second device (unless the second argument
        is false: a model there, its data on the CPU) (``autograder.sandbox.second_device``:
        ``meta``, with values), and ``device=`` that device making tensors there;
        ``(result, devices)``, the device type of each tensor of the result by label.

        SPEC.md: every function works on any device and returns tensors on the input's device
        (the model's). On a machine without a GPU only this shows a tensor made on the CPU.
        """
        from autograder.sandbox import second_device

        kind, move, *args = args
        if kind not in ("call", "new", "method", "getattr"):
            raise ValueError(f"unknown request {kind!r} on the second device")
        if move:
            args, kwargs = second_device.moved(args), second_device.moved(kwargs)
        with second_device.active():
            value = self._dispatch(kind, target, name, args, kwargs)
        return second_device.brought_back(value)

    def _gradients(self, target, name, args, kwargs):
        """Call (``method`` with a target) with every floating-point tensor argument made a
        leaf that requires grad, and back-propagate ``upstream`` (the first argument) from the
        result (its first element when a tuple). ``{"inputs": {label: grad}, "parameters":
        {name: grad}}``, the target's parameters by name, ``None`` where nothing flowed.

        SPEC.md's layers are differentiable functions of their inputs and parameters: only
        a gradient taken next to the student code shows a ``detach`` or a buffer in their
        place.
        """
        upstream, *args = args
        inputs = [
            (label, t.requires_grad_())
            for label, t in tensors_in(args, kwargs)
            if t.is_floating_point() and t.is_leaf
        ]
        parameters = (
            dict(self._objects[target.id].named_parameters())
            if target is not None
            else {}
        )
        with torch.enable_grad():
            value = self._dispatch(
                "call" if target is None else "method", target, name, args, kwargs
            )
            out = value[0] if isinstance(value, tuple) else value
            if not isinstance(out, torch.Tensor):
                raise TypeError(f"{name} returned {type(out).__name__}, not a tensor")
            wrt = [t for _, t in inputs] + list(parameters.values())
            grads = [None] * len(wrt)
            if out.requires_grad and wrt:
                grads = torch.autograd.grad(
                    out, wrt, upstream.to(out), allow_unused=True
                )
        return {
            "inputs": {label: g for (label, _), g in zip(inputs, grads)},
            "parameters": dict(zip(parameters, grads[len(inputs) :])),
        }

    def _resolve(self, name: str):
        module_name, _, attr = name.rpartition(".")
        module = importlib.import_module(f"{PACKAGE}.{module_name}")
        return getattr(module, attr)

    def _inward(self, value):
        """Arguments: resolve handles to their objects and give the student copies of tensors."""
        return map_plain(value, self._inward_one)

    def _inward_one(self, value):
        if isinstance(value, HandleRef):
            return self._objects[value.id]
        if isinstance(value, torch.Tensor) and self._copy_tensors:
            return value.detach().clone()
        return value

    def _outward(self, value):
        """Results as plain data, anything else behind a handle.

        Tensors are detached; numbers, strings and containers become the built-in types, so a
        NumPy float, a namedtuple or an ``OrderedDict`` is as good as a float, tuple or dict.
        """
        if isinstance(value, torch.Tensor):  # torch's own methods, not a subclass's
            return torch.Tensor.as_subclass(torch.Tensor.detach(value), torch.Tensor)
        if value is None or isinstance(value, (torch.dtype, torch.device)):
            return value
        for kind in (bool, str):
            if isinstance(value, kind):
                return kind(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
        if isinstance(value, numpy.bool_):
            return bool(value)
        # Containers read with the built-in types' own methods, not a subclass's.
        if isinstance(value, list):
            return [self._outward(v) for v in list.copy(value)]
        if isinstance(value, tuple):
            return tuple(
                self._outward(v) for v in tuple.__getitem__(value, slice(None))
            )
        if isinstance(value, dict):
            items = list(dict.items(value))
            if all(isinstance(k, str) for k, _ in items):
                return {str(k): self._outward(v) for k, v in items}
        key = id(value)
        if key not in self._ids:
            self._ids[key] = len(self._objects) + 1
            self._objects[self._ids[key]] = value
            self._files[self._ids[key]] = self._served_by_new
        return HandleRef(self._ids[key], type(value).__name__)


class InProcessSubmission(Submission):
    """Student code in this very process: for debugging, never for grades."""

    def __init__(self, root: Path | str, device: torch.device | str = "cpu"):
        super().__init__(root, device)
        self._executor = Executor(self.root)

    def _send(self, op, target, name, args, kwargs):
        ref = target.ref if target is not None else None
        outcome = self._executor.run(op, ref, name, to_refs(args), to_refs(kwargs))
        if outcome[0] == "error":
            raise StudentError(outcome[1]) from outcome[2]
        return map_plain(
            outcome[1], lambda v: Handle(self, v) if isinstance(v, HandleRef) else v
        )


def noncontiguous(value):
    """A copy of a tensor whose memory is not contiguous: every axis steps over a gap, as in
    a slice ``big[:2, :3]``; a 1-D tensor takes every other element. Anything else as is."""
    if not isinstance(value, torch.Tensor) or value.dim() == 0:
        return value
    if value.dim() == 1:
        room = value.new_zeros(value.shape[0], 2)[:, 0]
    else:
        room = value.new_zeros([n + 1 for n in value.shape])
        room = room[tuple(slice(0, n) for n in value.shape)]
    return room.copy_(value)


def load_state(module: torch.nn.Module, state: dict) -> None:
    """Load parameters by the names SPEC.md fixes; every one of them must land somewhere.

    ``strict=False`` because a student may keep extra buffers (a cached mask, say).
    """
    missing_here = sorted(set(state) - set(module.state_dict()))
    if missing_here:
        raise AttributeError(
            f"{type(module).__name__} has no parameter named {', '.join(missing_here)} "
            "(SPEC.md fixes these names)"
        )
    module.load_state_dict(state, strict=False)


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe an exception as plain data, with the traceback trimmed to the frames a student
    can use: not the engine's, nor Python's import system's (a module that fails as it is
    imported, on its first call, would start with them)."""
    frames = traceback.extract_tb(exc.__traceback__)
    student = [f for f in frames if not _machinery(f.filename)]
    text = "".join(traceback.format_list(student)) + "".join(
        traceback.format_exception_only(type(exc), exc)
    )
    bases = tuple(
        c.__name__
        for c in type(exc).__mro__
        if c.__module__ == "builtins" and c is not object
    )
    return ErrorInfo(type(exc).__name__, str(exc), text, bases)


def _machinery(filename: str) -> bool:
    name = filename.replace("\\", "/")
    return (
        "/autograder/" in name
        or name.startswith("<frozen importlib.")
        or name.endswith("/importlib/__init__.py")
    )
