"""The one way graded tests reach student code.

A test never holds a student object. It talks to a ``Submission`` (the ``hw`` fixture) in
requests whose arguments and results are *plain data*: tensors, Python scalars and strings,
``torch.dtype``/``torch.device``, ``None``, and lists, tuples and str-keyed dicts of those. An
object that is not plain data (a module, a ``KVCache``, a ``torch.Generator``) stays where the
student code runs and the test gets a ``Handle`` to it. The requests are:

==============  =================================================  ==========================
request         meaning                                            example
==============  =================================================  ==========================
``call``        call a function of the package                     ``hw.call("masks.causal_mask", 3)``
``new``         construct a class by name (keywords allowed)       ``hw.new("norm.LayerNorm", 8)``
``build``       ``new``, then ``to`` and ``load_state`` on it      ``hw.build(name, 8, to=.., state=sd)``
``method``      call a method of a handle                          ``h.call("append", k, v)``
``getattr``     read an attribute of a handle                      ``h.attr("length")``
``load_state``  load named parameters (all must exist)             ``h.load_state(sd)``
``state_dict``  read the parameters back                           ``h.state_dict()``
``seed``        seed the student process's RNGs                    ``hw.seed(0)``
``checked``     a call or method with non-contiguous tensor        ``hw.checked_call(name, x)``
                arguments; also names the arguments it modified
``forwards``    a call that records a module's forward passes      ``hw.forwards_during(m, name)``
``elsewhere``   a request with its tensors on a second device      ``hw.on_second_device(name, x)``
==============  =================================================  ==========================

Names are ``"<module>.<attribute>"`` inside ``transformer_hw``; ``new`` also accepts
``"torch.Generator"`` and ``"builtins.iter"`` (a one-shot iterator over a list). Handles may
appear anywhere inside arguments (``cache=h``, ``caches=[h1, h2]``). An exception raised by
student code arrives as ``StudentError``, the same in every implementation, so tests never
depend on where the code ran.

``autograder.sandbox.executor.InProcessSubmission`` runs the student code in the test process (for
debugging: tracebacks and ``pdb`` work); ``autograder.sandbox`` provides the isolated
implementation behind the very same interface.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass(frozen=True)
class HandleRef:
    """The plain-data form of a handle: what crosses a process boundary."""

    id: int
    type_name: str


@dataclass(frozen=True)
class ErrorInfo:
    """An exception described as plain data."""

    type_name: str
    message: str
    traceback: str
    bases: tuple[str, ...]  # names of the built-in exception classes it derives from


class StudentError(Exception):
    """Student code raised (or failed to import). ``is_a(ValueError)`` checks its kind."""

    def __init__(self, info: ErrorInfo):
        super().__init__(f"{info.type_name}: {info.message}")
        self.info = info

    @property
    def type_name(self) -> str:
        return self.info.type_name

    @property
    def message(self) -> str:
        return self.info.message

    def is_a(self, exc_type: type[BaseException]) -> bool:
        return exc_type.__name__ in self.info.bases


class Handle:
    """A reference to an object living with the student code; every action goes via the submission."""

    __slots__ = ("_submission", "ref")

    def __init__(self, submission: Submission, ref: HandleRef):
        self._submission = submission
        self.ref = ref

    def __repr__(self) -> str:
        return f"<handle {self.ref.id}: {self.ref.type_name}>"

    def __call__(self, *args, **kwargs):
        return self._submission.request("method", self, "__call__", *args, **kwargs)

    def call(self, method: str, *args, **kwargs):
        return self._submission.request("method", self, method, *args, **kwargs)

    def attr(self, name: str):
        return self._submission.request("getattr", self, name)

    def checked_call(self, method: str, *args, **kwargs):
        """``call`` with non-contiguous tensor arguments: ``(result, changed)`` (see
        ``Submission.checked_call``)."""
        return self._submission.request("checked", self, method, *args, **kwargs)

    def gradients(self, method: str, *args, upstream: torch.Tensor, **kwargs) -> dict:
        """The gradients of ``method``'s result with respect to its floating-point tensor
        arguments and this object's parameters (see ``Submission.gradients``)."""
        return self._submission.request(
            "gradients", self, method, upstream, *args, **kwargs
        )

    def on_second_device(self, method: str, *args, move: bool = True, **kwargs):
        """``call`` on the second device (see ``Submission.on_second_device``)."""
        return self._submission.elsewhere("method", self, method, move, args, kwargs)

    def attr_on_second_device(self, name: str):
        """``attr`` with the device of each tensor read: ``(value, devices)``."""
        return self._submission.elsewhere("getattr", self, name, False, (), {})

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self._submission.request("load_state", self, None, state)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self._submission.request("state_dict", self, None)


class Submission:
    """Base of every implementation: converts handles and errors around ``_send``."""

    #: Called with each request and its outcome (``autograder.grading.diagnosis.Journal``), or None.
    journal = None
    #: Whether the requests made now read values SPEC.md leaves open (``unspecified_values``).
    values_open = False

    def __init__(self, root: Path | str, device: torch.device | str = "cpu"):
        self.root = Path(root)
        self.device = torch.device(device)

    def __repr__(self) -> str:  # stable: it may appear in feedback
        return f"<{type(self).__name__} on {self.device.type}>"

    # The public surface used by tests -------------------------------------------------------
    def call(self, name: str, *args, **kwargs):
        return self.request("call", None, name, *args, **kwargs)

    def new(self, name: str, *args, **kwargs) -> Handle:
        return _constructed(name, self.request("new", None, name, *args, **kwargs))

    def build(
        self,
        name: str,
        *args,
        to: dict | None = None,
        state: dict[str, torch.Tensor] | None = None,
        **kwargs,
    ) -> Handle:
        """``new(name, *args, **kwargs)``, then ``.call("to", **to)`` and ``.load_state(state)``
        on it, in one request: a module a test sets up costs one round trip to a sandboxed
        worker instead of three."""
        built = self.request("build", None, name, args, kwargs, to or {}, state)
        return _constructed(name, built)

    def checked_call(self, name: str, *args, **kwargs):
        """``call(name, ...)`` where the student code receives every tensor argument as a
        non-contiguous copy (same values, gaps in memory, as a slice ``logits[:, :-1]``).

        Returns ``(result, changed)``: ``changed`` lists the arguments (``"args[0]"``,
        ``"mask"``) whose values the call modified in place.
        """
        return self.request("checked", None, name, *args, **kwargs)

    def gradients(self, name: str, *args, upstream: torch.Tensor, **kwargs) -> dict:
        """Call ``name`` and back-propagate ``upstream`` from its result (the first element
        of a tuple): ``{"inputs": {"args[0]": grad, ...}, "parameters": {}}``, a gradient per
        floating-point tensor argument (labelled as ``checked_call`` labels them), ``None``
        where none flowed. (A module's method adds its parameters by name.)"""
        return self.request("gradients", None, name, upstream, *args, **kwargs)

    def call_with_default_dtype(self, dtype: torch.dtype, name: str, *args, **kwargs):
        """``call(name, ...)`` while ``dtype`` is torch's default float dtype (put back after
        the call): what SPEC.md means by "default: the default float dtype" is only observable
        where that default is not float32."""
        return self.request("default_dtype", None, name, dtype, *args, **kwargs)

    def forwards_during(self, module: Handle, name: str, *args, **kwargs):
        """``call(name, ...)`` while recording each forward pass of ``module`` (a handle to an
        ``nn.Module``): ``(result, passes)``, a dict per pass with ``tokens`` (the input's
        last dimension), ``cached`` (whether caches came with it), ``grad``
        (``torch.is_grad_enabled()``) and ``training`` (the module's mode). What SPEC.md asks
        of how ``generate`` and ``evaluate`` run the model shows only here. A pass made through
        ``module.forward`` directly goes unrecorded."""
        return self.request("forwards", module, name, *args, **kwargs)

    def on_second_device(self, name: str, *args, move: bool = True, **kwargs):
        """``call(name, ...)`` with every tensor argument on a second device, where
        ``device=SECOND_DEVICE`` makes tensors too (``autograder.sandbox.second_device``: the ``meta``
        device, with values, so it runs on a machine without a GPU). Returns ``(result,
        devices)``: the result with its tensors' values (on this side's device), and
        ``(label, device type)`` of each of its tensors (``result``, ``result[0]``, ...).
        A tensor made on the CPU and mixed with the second device's raises, as on a GPU.
        ``move=False`` leaves the arguments where they are: a model moved there earlier
        (``handle.on_second_device("to", SECOND_DEVICE)``) given data on the CPU."""
        return self.elsewhere("call", None, name, move, args, kwargs)

    def new_on_second_device(self, name: str, *args, **kwargs):
        """``new(name, ...)`` as ``on_second_device`` runs a call: ``(handle, devices)``."""
        built, devices = self.elsewhere("new", None, name, True, args, kwargs)
        return _constructed(name, built), devices

    def elsewhere(self, kind: str, target, name: str, move: bool, args, kwargs):
        return self.request("elsewhere", target, name, kind, move, *args, **kwargs)

    def seed(self, seed: int) -> None:
        self.request("seed", None, None, seed)

    @contextlib.contextmanager
    def unspecified_values(self):
        """The requests made inside read values SPEC.md leaves open, where correct code may
        answer anything (a cache's positions never written: ``torch.empty`` or zeros); a test
        reads them for their shape and dtype, or compares them with the same code's own.
        The diagnosis takes their answers as given, never as a sign of a mistake."""
        previous, self.values_open = self.values_open, True
        try:
            yield
        finally:
            self.values_open = previous

    def request(
        self, op: str, target: Handle | None, name: str | None, *args, **kwargs
    ):
        """Carry out one request; an answer gathered next to the student code is checked
        (or judged) here, in the grading process (``_ANSWER_CHECKS``)."""
        try:
            answer = self._send(op, target, name, args, kwargs)
            check = _ANSWER_CHECKS.get(op)
            answer = answer if check is None else check(answer, args, kwargs)
        except StudentError as err:
            if self.journal is not None:
                self.journal(op, target, name, args, kwargs, err, self.values_open)
            raise
        if self.journal is not None:
            self.journal(op, target, name, args, kwargs, answer, self.values_open)
        return answer

    def close(self) -> None:
        """Release the student process's resources (nothing to do in-process)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Implementations ------------------------------------------------------------------------
    def _send(self, op, target, name, args, kwargs):
        """Carry out one request whose target and arguments may hold ``Handle``s; return plain
        data with ``Handle``s of this submission, or raise ``StudentError``. (Each implementation
        translates handles in its own single pass over the values.)"""
        raise NotImplementedError


def _constructed(name: str, value) -> Handle:
    if not isinstance(value, Handle):
        raise TypeError(
            f"constructing {name} gave {type(value).__name__}, not an object"
        )
    return value


def to_refs(value):
    return map_plain(value, lambda v: v.ref if isinstance(v, Handle) else v)


def map_plain(value, leaf):
    """``leaf`` applied to everything inside lists, tuples and dicts, keeping their shape."""
    if isinstance(value, (list, tuple)):
        return type(value)([map_plain(v, leaf) for v in value])
    if isinstance(value, dict):
        return {k: map_plain(v, leaf) for k, v in value.items()}
    return leaf(value)


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN included (an untouched NaN is not a change)."""
    if a.is_floating_point() or a.is_complex():
        return a.shape == b.shape and bool(
            torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all()
        )
    return torch.equal(a, b)


def tensors_in(args, kwargs) -> list[tuple[str, torch.Tensor]]:
    """``(label, tensor)`` for every tensor among a request's arguments, labelled as the
    caller wrote them: ``args[0]``, ``mask``, ``caches[1]``."""
    found = []

    def walk(value, label):
        if isinstance(value, torch.Tensor):
            found.append((label, value))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{label}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{label}[{k!r}]")

    for i, arg in enumerate(args):
        walk(arg, f"args[{i}]")
    for key, arg in kwargs.items():
        walk(arg, key)
    return found


def changed_arguments(args, kwargs, after) -> list[str]:
    """The labels of the tensor arguments that came back from a checked call with other
    values, or another shape (``x.transpose_(1, 2)``), than were sent: decided here, from
    plain data, never next to the student code.

    ``after`` must hold one tensor per tensor argument; anything else did not come from the
    executor, and the request fails as a broken protocol would.
    """
    sent = tensors_in(args, kwargs)
    if not (
        isinstance(after, list)
        and len(after) == len(sent)
        and all(isinstance(b, torch.Tensor) for b in after)
    ):
        raise _broken("inputs")
    return [
        label
        for (label, a), b in zip(sent, after)
        if b.shape != a.shape or not same(a, b.to(a.device))
    ]


def gradients_of(answer, args, kwargs) -> dict:
    """A ``gradients`` answer, checked for the form only the executor gives it: a gradient
    (or ``None``) of each floating-point tensor argument's shape, labelled as sent, and one
    per parameter name."""
    sent = {label: t for label, t in tensors_in(args, kwargs) if t.is_floating_point()}
    if not (
        isinstance(answer, dict)
        and set(answer) == {"inputs", "parameters"}
        and isinstance(answer["inputs"], dict)
        and set(answer["inputs"]) == set(sent)
        and all(
            g is None or (isinstance(g, torch.Tensor) and g.shape == sent[label].shape)
            for label, g in answer["inputs"].items()
        )
        and isinstance(answer["parameters"], dict)
        and all(
            g is None or isinstance(g, torch.Tensor)
            for g in answer["parameters"].values()
        )
    ):
        raise _broken("gradients")
    return answer


#: The device ``on_second_device`` puts tensors on (``autograder.sandbox.second_device.SECOND``).
SECOND_DEVICE = torch.device("meta")


def _typed_pair(pair) -> bool:
    return (
        isinstance(pair, tuple) and len(pair) == 2 and all(type(p) is str for p in pair)
    )


def _is_forward_pass(record) -> bool:
    return (
        isinstance(record, dict)
        and set(record) == {"tokens", "cached", "grad", "training"}
        and (record["tokens"] is None or type(record["tokens"]) is int)
        and all(type(record[k]) is bool for k in ("cached", "grad", "training"))
    )


def _broken(what: str) -> StudentError:
    """What a reply that the executor cannot have given fails with."""
    return StudentError(
        ErrorInfo(
            "ProcessExit",
            f"the submission's process sent back {what} that were not those of the call",
            "",
            ("Exception", "BaseException"),
        )
    )


def _checked_answer(answer, args, kwargs):
    value, after = answer
    return value, changed_arguments(args, kwargs, after)


def _gradients_answer(answer, args, kwargs):
    return gradients_of(answer, args[1:], kwargs)  # args[0] is the upstream gradient


def _forwards_answer(answer, args, kwargs):
    value, passes = answer
    if not (isinstance(passes, list) and all(map(_is_forward_pass, passes))):
        raise _broken("forward passes")
    return value, passes


def _elsewhere_answer(answer, args, kwargs):
    value, devices = answer
    if not (isinstance(devices, list) and all(_typed_pair(d) for d in devices)):
        raise _broken("devices")
    return value, devices


#: Requests whose answer the worker gathers next to the student code: what the grading
#: process makes of it, whichever way the request was made (a handle or the submission).
_ANSWER_CHECKS = {
    "checked": _checked_answer,
    "gradients": _gradients_answer,
    "forwards": _forwards_answer,
    "elsewhere": _elsewhere_answer,
}


@contextlib.contextmanager
def expect_student_error(exc_type: type[BaseException] = ValueError):
    """Context for tests: the block must raise ``StudentError`` of ``exc_type``; yields a box."""
    box: dict[str, StudentError] = {}
    try:
        yield box
    except StudentError as err:
        box["error"] = err
        if not err.is_a(exc_type):
            raise AssertionError(
                f"expected {exc_type.__name__}, but the code raised {err.type_name}: {err.message}"
            ) from None
    else:
        raise AssertionError(f"expected {exc_type.__name__}, but nothing was raised")
