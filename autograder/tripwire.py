"""Forbidden calls caught at run time, inside the sandboxed worker.

The watch sits in torch's operator dispatcher: every operator of a forbidden family
(``aten::_softmax``, ``aten::native_layer_norm``, ``aten::scaled_dot_product_attention``...)
gets a kernel of ours in front of torch's own (``torch.library``), for each device torch has
kernels for and for the operators torch composes from others. Every Python route ends in the
dispatcher: an alias, a computed ``getattr``, ``operator.methodcaller``, a method read off
``torch._C.TensorBase``, ``torch.ops.aten._softmax``, TorchScript, ``vmap``, a library class or
distribution calling one inside, another thread, ``torch.inference_mode``. Every other operator
runs as it did, at no cost: only the forbidden ones pass through Python. The few functions of
the families that torch writes in Python from other operators
(``torch.nn.functional.local_response_norm``) are wrapped where they are looked up.

A call is charged by walking outward from it to the nearest student frame whose file forbids
that family: library frames and student files that allow it pass through, so
``Categorical(logits=x)`` in attention.py costs part 1, and a masks.py helper called from
heads.py costs part 3. Operators that a watched operator runs inside (``aten::softmax`` running
``aten::_softmax``) are that operator's business unless they belong to another family. A call
with no frame of a forbidding file on the way (a library callable the student's code handed on,
which ``Module.__call__`` runs) is charged to the file whose request the worker is serving
(``serving``, told by the executor).

Each record leaves the worker as it is made (``watch``'s ``report``: a message on the worker's
socket) and again with every reply; a record emptied from the worker's memory later was
already sent. The grader also probes the watch (``probe``): forbidden calls made as if from
student files, in the worker's thread and in a new one, which must come back as violations.
What could take a kernel of ours out (``torch.library``, ``torch._C``, frames and closures) is
what the reader keeps out of student files.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
import threading
import warnings

import torch

from autograder.forbidden import FAMILY_WORDS, RULES
from autograder.points import MODULES, PACKAGE

#: What the probe calls, one per line from the probe's first line: (file, code). The last runs
#: in a thread of its own, which the watch must see too.
PROBE_CALLS = (
    ("attention.py", "torch.softmax(t, 0)"),
    ("attention.py", "t.log_softmax(0)"),
    ("norm.py", "torch.nn.functional.layer_norm(t, (1,))"),
    ("norm.py", "torch.nn.LayerNorm(1)(t)"),
    (
        "gqa.py",
        "threading.Thread(target=lambda: torch.special.logsumexp(t, 0)).start()",
    ),
)

#: (file, line, call) of each forbidden call seen, in order of first occurrence; the worker
#: sends it back with every reply.
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
)


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


def _make_watch(record_to: list):
    """The watch: its state lives in these closures and torch's dispatcher, nowhere else."""
    files: dict[str, frozenset[int]] = {}  # absolute student path -> families forbidden
    seen: set[tuple[str, int, str]] = set()
    reporter: list = [None]
    serving: list = [None]  # the student file whose request the worker is serving
    #: What a file without a list of its own (masks.py, rope.py) may not run for a request of
    #: its own (it passes calls made from it on to its callers).
    every_family = frozenset(range(len(_FAMILIES)))
    inside = _Inside()
    kept: list = []  # the libraries holding our kernels: torch drops a kernel with its library
    getframe, basename = sys._getframe, os.path.basename

    def record(key: tuple[str, int, str]) -> None:
        if key not in seen:
            seen.add(key)
            record_to.append(key)
            if reporter[0] is not None:
                reporter[0](key)

    def charge(label: str, found_in: frozenset[int]) -> None:
        try:
            frame = getframe(2)
        except ValueError:  # a thread of torch's own, with no Python frames
            frame = None
        while frame is not None:
            code = frame.f_code
            forbids = files.get(code.co_filename)
            if forbids is not None and not forbids.isdisjoint(found_in):
                record((basename(code.co_filename), frame.f_lineno or 0, label))
                return
            frame = frame.f_back
        # No file that forbids it made the call: a library callable the request's own file
        # handed on (a property that returns functools.partial(F.layer_norm, ...)) ran it.
        forbids = files.get(serving[0], every_family if serving[0] else None)
        if forbids is not None and not forbids.isdisjoint(found_in):
            record(
                (
                    basename(serving[0]),
                    0,
                    f"{label}, through a library function it handed on",
                )
            )

    def kernel(original, label: str, found_in: frozenset[int]):
        """Torch's kernel ``original`` with the charge in front."""

        def watched(keyset, *args, **kwargs):
            outer = inside.families
            if not files or found_in <= outer:
                return original.call_boxed(keyset, *args, **kwargs)
            charge(label, found_in)
            inside.families = outer | found_in
            try:
                return original.call_boxed(keyset, *args, **kwargs)
            finally:
                inside.families = outer

        return watched

    def function(original, label: str, found_in: frozenset[int]):
        """A function written in Python, with the charge in front."""

        def watched(*args, **kwargs):
            if files:
                charge(label, found_in)
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

    def watch(package_dir: str, report=None) -> None:
        if files:
            raise RuntimeError("the watch is set once per process")
        install()
        for filename, names in RULES.items():
            files[os.path.join(package_dir, filename)] = frozenset(
                i for i, family in enumerate(_FAMILIES) if family <= names
            )
        reporter[0] = report

    def serve(path: str | None) -> None:
        serving[0] = path

    return install, watch, serve


_install, _watch, _serve = _make_watch(found)


def install() -> None:
    """Put the watch's kernels in front of torch's (in the worker template, before any
    student import): they charge nothing until ``watch``."""
    _install()


def watch(package_dir: str, report=None) -> None:
    """Start charging calls to the student files under ``package_dir``, in every thread;
    ``report(record)`` sends each new record at once."""
    _watch(package_dir, report)


def serving(path: str | None) -> None:
    """The worker serves a request that runs the code of student file ``path`` (``None``:
    none): a forbidden call made with no student frame on the way is that file's."""
    _serve(path)


def probe(package_dir: str, line: int) -> None:
    """Make ``PROBE_CALLS`` as if from line ``line`` on of the watched student files.

    The student modules are imported first, so whatever they do on import has happened. Each
    call must come back among the violations; the grader checks that they do.
    """
    for module in MODULES:
        try:
            importlib.import_module(f"{PACKAGE}.{module}")
        except BaseException:  # noqa: BLE001, S110 - a broken module is graded elsewhere
            pass
    t = torch.zeros(1)
    for offset, (filename, code) in enumerate(PROBE_CALLS):
        tree = ast.parse(code)
        ast.increment_lineno(tree, line + offset - 1)
        compiled = compile(tree, os.path.join(package_dir, filename), "exec")
        namespace = {"torch": torch, "t": t, "threading": threading}
        exec(compiled, namespace)  # noqa: S102 - PROBE_CALLS
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(timeout=10)


def probe_lines(line: int) -> range:
    """The lines the probe's calls are made from."""
    return range(line, line + len(PROBE_CALLS))


def probe_failures(line: int, seen) -> list[str]:
    """The probe's calls missing from ``seen`` (violations as ``(file, line, call)``)."""
    got = {(f, n) for f, n, _ in seen}
    return [
        f"{code} from {file} went unrecorded"
        for offset, (file, code) in enumerate(PROBE_CALLS)
        if (file, line + offset) not in got
    ]
