"""A second device on a machine without a GPU, for SPEC.md's "works on any device".

Code that makes a tensor without the input's device (``torch.arange(t)``, a mask on the CPU,
batches never moved to the model) passes every test on the CPU, where every tensor is on the
one device there is. Here a tensor can be on a second one: an ``Elsewhere`` tensor reports the
``meta`` device and holds its values in a plain tensor beside it. Every operation that involves
one is carried out on those values, as a real device carries it out, and refused as torch
refuses it on a GPU when another tensor of the same operation lies on the CPU ("Expected all
tensors to be on the same device"). While ``active``, a tensor made with ``device=`` the second
device (``torch.arange(t, device=x.device)``, ``.to(x.device)``) is one too. So correct code in
any style runs there with the values it has on the CPU (``.item()``, validation, sampling
included), and code that forgets the device fails as it would on a GPU.

Only the executor uses this, next to the student code; what leaves it is plain data
(``brought_back``): the values, and the device each result tensor was on.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._mode_utils import no_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.facts.protocol import SECOND_DEVICE as SECOND
from autograder.facts.protocol import map_plain

#: Operations that move a tensor to another device (under ``torch.inference_mode()``
#: ``Tensor.to`` arrives as itself, not as ``_to_copy``): their destination decides where the
#: result is.
_MOVES = {
    torch.ops.aten._to_copy.default,
    torch.ops.aten.to.device,
    torch.ops.aten.to.dtype_layout,
    torch.ops.aten.to.other,
}
#: Operations torch carries out across devices: moves, copies, and reading a number out.
_ACROSS = _MOVES | {
    torch.ops.aten.copy_.default,
    torch.ops.aten._local_scalar_dense.default,
}
_INDEXING = {
    torch.ops.aten.index.Tensor,
    torch.ops.aten.index_put.default,
    torch.ops.aten.index_put_.default,
    torch.ops.aten._index_put_impl_.default,
}


#: The bookkeeping of the second device is torch calls of its own, which the function mode of
#: ``active`` would otherwise see, in Python, each one (half of an operation's time there).
_NO_FUNCTION_MODE = torch._C.DisableTorchFunction


class Elsewhere(torch.Tensor):
    """A tensor on the second device: it reports ``SECOND``; ``held`` holds its values."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, held: torch.Tensor):
        # An inference tensor exactly when its values are one: a view made under
        # ``torch.inference_mode()`` of a tensor made outside it is a normal tensor, and torch
        # refuses to give an inference tensor the view's version counter.
        with _NO_FUNCTION_MODE():
            inference = held.is_inference()
            if inference == torch.is_inference_mode_enabled():  # the mode it needs
                return cls._wrapping(held)
            with torch.inference_mode(inference):
                return cls._wrapping(held)

    @classmethod
    def _wrapping(cls, held: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls,
            held.shape,
            strides=held.stride(),
            storage_offset=held.storage_offset(),
            dtype=held.dtype,
            device=SECOND,
            requires_grad=held.requires_grad,
        )

    def __init__(self, held: torch.Tensor):
        self.held = held

    def __repr__(self) -> str:
        return f"tensor on {SECOND} of shape {tuple(self.shape)} and {self.dtype}"

    def tolist(self):  # torch refuses it to subclasses; a GPU's tensor has it
        return self.held.tolist()

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


class _MakesOnSecond(TorchDispatchMode):
    """Tensors made with ``device=SECOND`` are ``Elsewhere`` tensors."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Otherwise torch wraps ``__torch_dispatch__`` to keep its compiler out of it, and
        imports that compiler (a second of CPU) at the first call: nothing here is compiled.
        (Where torch has no such switch, this is never called.)"""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


#: Constructors from data, which copy the data to the device below the dispatch mode.
_FROM_DATA = (torch.tensor, torch.as_tensor, torch.asarray)


class _CopiesDataToSecond(TorchFunctionMode):
    """``torch.tensor(data, device=SECOND)`` and its kin (``x.new_tensor(data)`` of a tensor
    there): made on the CPU, then moved, so the values are kept."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.new_tensor and isinstance(args[0], Elsewhere):
            kwargs = {"dtype": args[0].dtype, "device": SECOND, **kwargs}
            func, args = torch.tensor, args[1:]
        if func in _FROM_DATA and _targets_second(kwargs.get("device")):
            return Elsewhere(func(*args, **{**kwargs, "device": "cpu"}))
        return func(*args, **kwargs)


_GENERATOR = torch.Generator


class _AnyGenerator(type(_GENERATOR)):
    """``isinstance`` and ``issubclass`` answer for every generator of torch's."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _GENERATOR)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _GENERATOR)


class _Generator(_GENERATOR, metaclass=_AnyGenerator):
    """``torch.Generator`` while ``active``: one made for the second device draws on the CPU,
    where that device's values are (``torch.Generator(device=x.device)``, as on a GPU)."""

    def __new__(cls, device="cpu"):
        return _GENERATOR("cpu" if _targets_second(device) else device)


@contextlib.contextmanager
def active():
    """While inside, ``device=SECOND`` (a string or ``torch.device``, with an index or not)
    makes the second device's tensors and generators, and modules move there with
    ``.to(SECOND)``."""
    torch.Generator = _Generator
    try:
        with _CopiesDataToSecond(), _MakesOnSecond():
            yield
    finally:
        torch.Generator = _GENERATOR


def _targets_second(device) -> bool:
    """Whether ``device`` names the second device, with an index or without (``meta:0``)."""
    return device is not None and torch.device(device).type == SECOND.type


def _on_cpu_instead(value):
    """``value`` with the CPU in place of the second device, where it is a device."""
    if isinstance(value, torch.device) and value.type == SECOND.type:
        return torch.device("cpu")
    return value


class _Kind(NamedTuple):
    """What ``_run`` needs to know of an operation, looked up once per operation."""

    #: torch defines it by other operations (and so breaks it up under autograd).
    composite: bool
    #: It moves a tensor to another device: its destination decides where the result is.
    moves: bool
    #: Its indices (the second argument) may lie on the CPU.
    indexing: bool
    #: torch carries it out across devices (moves, copies, reading a number out).
    across: bool
    #: It changes an argument in place (its schema writes to one): only such an operation
    #: can change a tensor's shape or strides (``_follow``).
    mutates: bool
    #: It reads a number out: the number leaves the device.
    reads_number: bool
    #: None of the above: an operation on tensors there that gives tensors there.
    plain: bool


#: Each operation's kind, by its id: an operation's own hash is a Python method, slow on a
#: path every operation of the second device takes (operations live as long as torch).
_KINDS: dict[int, _Kind] = {}


def _kind(func) -> _Kind:
    kind = _KINDS.get(id(func))
    if kind is None:
        flags = (
            torch._C._dispatch_has_kernel_for_dispatch_key(
                func.name(), "CompositeImplicitAutograd"
            ),
            func in _MOVES,
            func in _INDEXING,
            func in _ACROSS,
            func._schema.is_mutable,
            func is torch.ops.aten._local_scalar_dense.default,
        )
        kind = _KINDS[id(func)] = _Kind(*flags, plain=not any(flags))
    return kind


def _plain_arguments(values) -> bool:
    """Whether an operation's arguments take ``_run``'s short path: a tensor of the second
    device among them, every other tensor a CPU number (0-dim, which mixes with any device), no
    device named, no list holding a tensor or a device, no dict. Anything else takes the whole
    path, which refuses devices that mix."""
    found = False
    for value in values:
        if isinstance(value, Elsewhere):
            found = True
        elif isinstance(value, torch.Tensor):
            if value.dim() != 0:
                return False
        elif isinstance(value, (torch.device, dict)) or (
            isinstance(value, (list, tuple))
            and any(isinstance(v, (torch.Tensor, torch.device)) for v in value)
        ):
            return False
    return found


def _leaves(args, kwargs) -> list:
    """The values in an operation's arguments, lists and tuples opened (an operation's
    arguments nest no deeper: torch's own tree utilities cost more than the operation here)."""
    found = []

    def add(value):
        if type(value) is tuple or type(value) is list:
            for item in value:
                add(item)
        else:
            found.append(value)

    for value in args:
        add(value)
    for value in kwargs.values():
        add(value)
    return found


def _destination(func, args, kwargs) -> torch.device | None:
    """Where a move sends its tensor (None: where it is)."""
    if func is torch.ops.aten.to.other:
        other = args[1] if len(args) > 1 else kwargs["other"]
        return SECOND if isinstance(other, Elsewhere) else other.device
    devices = [v for v in _leaves(args, kwargs) if isinstance(v, torch.device)]
    return devices[0] if devices else None


def _run(func, args, kwargs):
    """``func`` on the held values, or torch's refusal when devices mix."""
    kind = _kind(func)
    if kind.plain and _plain_arguments((*args, *kwargs.values())):
        with _NO_FUNCTION_MODE():
            wrapper_of: dict[int, Elsewhere] = {}
            return _placed(_on_values(func, args, kwargs, wrapper_of), wrapper_of)
    leaves = _leaves(args, kwargs)
    made_here = any(
        isinstance(v, torch.device) and v.type == SECOND.type for v in leaves
    )
    if not made_here and not any(isinstance(v, Elsewhere) for v in leaves):
        # Nothing here is on the second device or made there.
        return func(*args, **kwargs)
    if kind.composite:
        # Under ``torch.inference_mode()`` an operation made of others (``type_as``,
        # ``view_as``, ``to``) arrives whole; outside it torch breaks it up before it gets
        # here. Broken up here too, its parts come back through this function.
        with _MakesOnSecond():
            out = func.decompose(*args, **kwargs)
        if out is not NotImplemented:
            return out
    with _NO_FUNCTION_MODE():
        return _on_held(func, kind, args, kwargs, leaves, made_here)


def _on_held(func, kind: _Kind, args, kwargs, leaves: list, made_here: bool):
    """``_run`` past the decomposition: ``func`` carried out on the held values."""
    moves = kind.moves
    made_here = made_here and not moves
    if kind.indexing:  # the indices may lie on the CPU
        leaves = _leaves(args[:1] + args[2:], kwargs)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    elsewhere = [t for t in tensors if isinstance(t, Elsewhere)]
    destination = _destination(func, args, kwargs) if moves else None
    to_second = moves and _targets_second(destination)
    if not elsewhere and not made_here and not to_second:
        return func(*args, **kwargs)
    # A 0-dim CPU tensor mixes with any device, as a Python number does.
    on_cpu = [t for t in tensors if not isinstance(t, Elsewhere) and t.dim() > 0]
    if elsewhere and on_cpu and not kind.across:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two "
            f"devices, {SECOND.type} and {on_cpu[0].device}! ({func})"
        )
    wrapper_of: dict[int, Elsewhere] = {}  # id of held values -> their wrapper
    out = _on_values(func, args, kwargs, wrapper_of)
    if kind.mutates:
        for wrapper in wrapper_of.values():
            _follow(wrapper)
    if (moves and not to_second and destination) or kind.reads_number:
        return out
    return _placed(out, wrapper_of)


def _on_values(func, args, kwargs, wrapper_of: dict):
    """``func`` called with the held values in place of the second device's tensors."""
    held = dict(zip(kwargs, _held(kwargs.values(), wrapper_of)))
    return func(*_held(args, wrapper_of), **held)


def _held(values, wrapper_of: dict) -> list:
    """``values`` with each ``Elsewhere`` tensor replaced by its values (noted in
    ``wrapper_of``) and the second device by the CPU, inside lists, tuples and dicts."""
    out = []
    for v in values:
        if isinstance(v, Elsewhere):
            wrapper_of[id(v.held)] = v
            out.append(v.held)
        elif isinstance(v, (list, tuple)):
            out.append(type(v)(_held(v, wrapper_of)))
        elif isinstance(v, dict):
            out.append(dict(zip(v, _held(v.values(), wrapper_of))))
        else:
            out.append(_on_cpu_instead(v))
    return out


def _placed(value, wrapper_of: dict):
    """An operation's result on the second device: each tensor the wrapper of the values it
    is (an operation in place returns its input), or a new one."""
    if isinstance(value, torch.Tensor):
        if isinstance(value, Elsewhere):
            return value
        wrapper = wrapper_of.get(id(value))
        return Elsewhere(value) if wrapper is None else wrapper
    if isinstance(value, (list, tuple)):
        return type(value)([_placed(v, wrapper_of) for v in value])
    if isinstance(value, dict):
        return {k: _placed(v, wrapper_of) for k, v in value.items()}
    return value


def _follow(wrapper: Elsewhere) -> None:
    """The wrapper's shape, strides and offset made its values' again, where an operation in
    place changed theirs (``x.transpose_(1, 2)``, ``x.unsqueeze_(0)``, ``x.resize_(n)``):
    its own are the ones every later operation reads. Set on the wrapper itself, below the
    dispatch, as the ``meta`` device sets them."""
    held = wrapper.held
    if (wrapper.shape, wrapper.stride(), wrapper.storage_offset()) == (
        held.shape,
        held.stride(),
        held.storage_offset(),
    ):
        return
    with no_dispatch():
        needed = held.untyped_storage().nbytes()
        if needed > wrapper.untyped_storage().nbytes():
            torch.ops.aten.resize_.default(wrapper, [needed // held.element_size()])
        torch.ops.aten.as_strided_.default(
            wrapper, held.shape, held.stride(), held.storage_offset()
        )


def moved(value):
    """Every tensor in plain data moved to the second device."""
    return map_plain(
        value, lambda v: Elsewhere(v) if isinstance(v, torch.Tensor) else v
    )


def brought_back(value) -> tuple[object, list[tuple[str, str]]]:
    """``(plain, devices)``: ``value`` with each tensor's values in place of the tensor, and
    ``(label, device type)`` of each tensor, labelled ``result``, ``result[0]``, ... ."""
    devices: list[tuple[str, str]] = []

    def walk(v, label):
        if isinstance(v, Elsewhere):
            devices.append((label, SECOND.type))
            return v.held.detach()
        if isinstance(v, torch.Tensor):
            devices.append((label, v.device.type))
            return v
        if isinstance(v, (list, tuple)):
            items = [walk(item, f"{label}[{i}]") for i, item in enumerate(v)]
            return items if isinstance(v, list) else tuple(items)
        if isinstance(v, dict):
            return {k: walk(item, f"{label}[{k!r}]") for k, item in v.items()}
        return v

    return walk(value, "result"), devices
