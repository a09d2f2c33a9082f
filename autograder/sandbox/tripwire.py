"""Forbidden calls refused at run time, inside the sandboxed worker.

The watch sits in torch's operator dispatcher: every operator of a forbidden family
(``aten::_softmax``, ``aten::native_layer_norm``, ``aten::scaled_dot_product_attention``...)
gets a kernel of ours in front of torch's own (``torch.library``), for each device torch has
kernels for and for the operators torch composes from others. Every Python route ends in the
dispatcher: an alias, a computed ``getattr``, ``operator.methodcaller``, a method read off
``torch._C.TensorBase``, ``torch.ops.aten._softmax``, TorchScript, ``vmap``, a library class or
distribution calling one inside, another thread, a forked process, ``torch.inference_mode``.
Every other operator runs as it did, at no cost: only the forbidden ones pass through Python.
The few functions of the families that torch writes in Python from other operators
(``torch.nn.functional.local_response_norm``) are wrapped where they are looked up.

A call is judged by walking outward from it to the nearest student frame whose file forbids
that family: library frames and files without a list (masks.py, rope.py) pass through, so
``Categorical(logits=x)`` in attention.py is refused, and so is a masks.py helper called from
heads.py. A call with no file of a list on the way (a library callable the student's code
handed on, which ``Module.__call__`` runs) is judged by the file whose request the worker is
serving (``serving``, told by the executor), and with none served every family is refused.

A refused call raises ``ForbiddenCall`` where it is made, naming the rule, file and line, and
computes nothing: the test fails as on any error, whatever happens to the record of it
afterwards. The record (``found``) only feeds the part's gate and its message; a lost one gains
nothing. What the watch refuses is fixed by ``watch``, once, before any student import; what
could take a kernel of ours out (``torch.library``, ``torch._C``, frames and closures) is what
the reader keeps out of student files.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import types
import warnings

import torch

from autograder.facts.rules import (
    FAMILY_NAMES,
    FAMILY_WORDS,
    LOOKUPS,
    MAX_RECORDS,
    RULES,
)

#: (file, line, call) of each forbidden call refused, in order of first occurrence, at most
#: ``MAX_RECORDS``: the worker sends the new ones back with every reply.
found: list[tuple[str, int, str]] = []

_FAMILIES = tuple(FAMILY_WORDS)
#: The devices whose kernels are watched: those this build of torch has.
_DEVICE_KEYS = tuple(
    key
    for key, built in (
        ("CPU", True),
        ("CUDA", torch.backends.cuda.is_built()),
        ("MPS", torch.backends.mps.is_built()),
    )
    if built
)
#: Kinds of tensor with kernels of their own (sparse, nested, quantized): watched where an
#: operator has one. (MKL-DNN's have no key torch.library reads; their public operators are
#: watched where torch composes them.)
_LAYOUT_KEYS = tuple(
    f"{kind}{device}"
    for kind in ("Sparse", "SparseCsr", "NestedTensor", "Quantized")
    for device in ("CPU", "CUDA")
)
#: Kernels that stand for every device without one of its own.
_FOR_EVERY_DEVICE = (
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
)
#: Functions of the families that torch writes in Python from operators of no family (its
#: public modules' functions and classes named after a family, each tried: the others run an
#: operator of their family): (module, attribute, how the feedback names it).
_WRITTEN_IN_PYTHON = (
    (
        "torch.nn.functional",
        "local_response_norm",
        "torch.nn.functional.local_response_norm",
    ),
    (
        "torch.nn.modules.normalization",
        "CrossMapLRN2d.forward",
        "torch.nn.CrossMapLRN2d",
    ),
    (
        "torch.distributions.transforms",
        "SoftmaxTransform._call",
        "torch.distributions.transforms.SoftmaxTransform",
    ),
    ("torch.nn.functional", "normalize", "torch.nn.functional.normalize"),
    (
        "torch.nn.utils.fusion",
        "fuse_linear_bn_weights",
        "torch.nn.utils.fusion.fuse_linear_bn_weights",
    ),
    (
        "torch.nn.utils.fusion",
        "fuse_conv_bn_weights",
        "torch.nn.utils.fusion.fuse_conv_bn_weights",
    ),
)


#: The dunders a computed name may find on a library namespace a student file may search
#: (``rules.LOOKUPS``): what Python's import machinery and ``isinstance`` read. The others
#: (its own lookup, ``__getstate__`` and ``__dict__``, its builtins, ``__setattr__``) would
#: look further than its functions and classes.
_MODULE_FACTS = frozenset(
    {"__name__", "__doc__", "__file__", "__spec__", "__loader__", "__package__"}
    | {"__path__", "__all__", "__class__", "__cached__", "__version__"}
)


class _Namespace(types.ModuleType):
    """A library namespace that ``getattr(F, name)(x)`` may search (``rules.LOOKUPS``): a
    computed name finds its functions and classes, never a way to look further."""

    def __getattribute__(self, name: str):
        if name[:2] == name[-2:] == "__" and name not in _MODULE_FACTS:
            raise AttributeError(f"{name} is not looked up on a library namespace")
        return super().__getattribute__(name)

    def __setattr__(self, name: str, value) -> None:
        if name == "__class__":
            raise AttributeError("a library namespace keeps its class")
        super().__setattr__(name, value)


def _families_of(name: str) -> frozenset[int]:
    """Which forbidden families (indices into ``_FAMILIES``) an operator or function named
    ``name`` belongs to."""
    lower = name.lower()
    if "backward" in lower:  # the gradient of a forward already judged
        return frozenset()
    return frozenset(
        i
        for i, family in enumerate(_FAMILIES)
        if name in family or any(word in lower for word in FAMILY_WORDS[family])
    )


def _operators():
    """``(namespace, name.overload, families)`` of each dispatcher operator of a family."""
    for qualified in torch._C._dispatch_get_all_op_names():
        namespace, _, name = qualified.partition("::")
        families = _families_of(name.split(".")[0])
        if families:
            yield namespace, name, families


def _placements(qualified: str) -> list[tuple[str, str]]:
    """Where a kernel of ours goes for operator ``qualified``, and where torch's own is read:
    ``(key registered at, key the original is read at)``. A device's own kernel, or one for
    every device, is wrapped per device; an operator torch composes from others
    (``CompositeImplicitAutograd``: it runs above autograd, so its parts keep their
    gradients) is wrapped there, once for every device."""

    def has(key: str) -> bool:
        return torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)

    every_device = any(map(has, _FOR_EVERY_DEVICE))
    own = [(key, key) for key in _DEVICE_KEYS if has(key) or every_device]
    own += [(key, key) for key in _LAYOUT_KEYS if has(key)]
    if has("CompositeImplicitAutograd"):
        composed = [key for key in _DEVICE_KEYS if not has(key)]
        own += [("CompositeImplicitAutograd", composed[0])] if composed else []
    return own


class _Inside(threading.local):
    """The families of the watched operators this thread is inside of."""

    families: frozenset[int] = frozenset()


class ForbiddenCall(RuntimeError):
    """A forbidden library call, refused where it is made: it computes nothing."""


def _make_watch(record_to: list):
    """The watch: its state lives in these closures and torch's dispatcher, nowhere else."""
    files: dict[str, frozenset[int]] = {}  # absolute student path -> families forbidden
    seen: set[tuple[str, int, str]] = set()
    serving: list = [None]  # the student file whose request the worker is serving
    every_family = frozenset(range(len(_FAMILIES)))
    inside = _Inside()
    kept: list = []  # the libraries holding our kernels: torch drops a kernel with its library
    getframe, basename = sys._getframe, os.path.basename

    def refuse(file: str | None, line: int, label: str, families) -> None:
        """Keep the record (for the part's gate and its message) and raise."""
        if file is not None:
            key = (basename(file), line, label)
            if key not in seen and len(seen) < MAX_RECORDS:
                seen.add(key)
                record_to.append(key)
        where = f"{basename(file)}:{line}" if file and line else basename(file or "")
        rule = " and ".join(sorted(FAMILY_NAMES[_FAMILIES[i]] for i in families))
        raise ForbiddenCall(
            f"{label} is forbidden here ({where or 'code of yours'}: the {rule} family, "
            "SPEC.md); the call was refused and computed nothing: write it from tensor "
            "operations"
        )

    def judge(label: str, found_in: frozenset[int]) -> None:
        """Refuse the call when the nearest student file that forbids its family made it,
        or, with none on the way and no file of a list that allows it, the file whose
        request is being served forbids it (none served: every family is refused)."""
        try:
            frame = getframe(2)
        except ValueError:  # a thread of torch's own, with no Python frames
            frame = None
        allowed_on_the_way = False
        while frame is not None:
            code = frame.f_code
            forbids = files.get(code.co_filename)
            if forbids is not None:
                hit = forbids & found_in
                if hit:
                    refuse(code.co_filename, frame.f_lineno or 0, label, hit)
                allowed_on_the_way = True
            frame = frame.f_back
        if allowed_on_the_way:
            return
        # No file of a list made the call: a library callable handed on, a thread or a
        # process started from library code, or code run outside any request.
        forbids = files.get(serving[0], every_family)
        if hit := forbids & found_in:
            refuse(
                serving[0], 0, f"{label}, through a library function it handed on", hit
            )

    def kernel(original, label: str, found_in: frozenset[int]):
        """Torch's kernel ``original``, run only where its family is allowed."""

        def watched(keyset, *args, **kwargs):
            outer = inside.families
            if not files or found_in <= outer:
                return original.call_boxed(keyset, *args, **kwargs)
            judge(label, found_in)
            inside.families = outer | found_in
            try:
                return original.call_boxed(keyset, *args, **kwargs)
            finally:
                inside.families = outer

        return watched

    def function(original, label: str, found_in: frozenset[int]):
        """A function written in Python, run only where its family is allowed."""

        def watched(*args, **kwargs):
            if files:
                judge(label, found_in)
            return original(*args, **kwargs)

        return watched

    def install() -> None:
        if kept:
            return
        libraries: dict[str, torch.library.Library] = {}
        with warnings.catch_warnings():
            # torch warns once that it is "Overriding a previously registered kernel".
            warnings.simplefilter("ignore")
            for namespace, name, found_in in _operators():
                label = f"{namespace}::{name.split('.')[0]}"
                for key, read_at in _placements(f"{namespace}::{name}"):
                    original = torch.library.get_kernel(f"{namespace}::{name}", read_at)
                    if namespace not in libraries:
                        libraries[namespace] = torch.library.Library(namespace, "IMPL")
                    libraries[namespace].impl(
                        name, kernel(original, label, found_in), key, with_keyset=True
                    )
        for module_name, attribute, label in _WRITTEN_IN_PYTHON:
            owner = importlib.import_module(module_name)
            *path, last = attribute.split(".")
            for step in path:
                owner = getattr(owner, step)
            found_in = _families_of(label.rsplit(".", 1)[-1])
            setattr(owner, last, function(getattr(owner, last), label, found_in))
        kept.extend(libraries.values())
        for name in LOOKUPS:
            importlib.import_module(name).__class__ = _Namespace

    def watch(package_dir: str) -> None:
        if files:
            raise RuntimeError("the watch is set once per process")
        install()
        for filename, names in RULES.items():
            files[os.path.join(package_dir, filename)] = frozenset(
                i for i, family in enumerate(_FAMILIES) if family <= names
            )

    def serve(path: str | None) -> None:
        serving[0] = path

    return install, watch, serve


_install, _watch, _serve = _make_watch(found)


def install() -> None:
    """Put the watch's kernels in front of torch's (in the worker template, before any
    student import): they refuse nothing until ``watch``."""
    _install()


def watch(package_dir: str) -> None:
    """From now on, in every thread and every process forked from this one, refuse the
    families each student file under ``package_dir`` forbids (set once, before any student
    import)."""
    _watch(package_dir)


def serving(path: str | None) -> None:
    """The worker serves a request that runs the code of student file ``path`` (``None``:
    none): a forbidden call made with no student frame on the way is that file's."""
    _serve(path)
