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
import functools

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


class Elsewhere(torch.Tensor):
    """A tensor on the second device: it reports ``SECOND``; ``held`` holds its values."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, held: torch.Tensor):
        # An inference tensor exactly when its values are one: a view made under
        # ``torch.inference_mode()`` of a tensor made outside it is a normal tensor, and torch
        # refuses to give an inference tensor the view's version counter.
        inference = held.is_inference()
        if inference == torch.is_inference_mode_enabled():  # already the mode it needs
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


@functools.cache
def _composite(func) -> bool:
    """Whether torch defines ``func`` by other operations (and so breaks it up under autograd)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd"
    )


@functools.cache
def _mutates(func) -> bool:
    """Whether ``func`` changes an argument in place (its schema writes to one): only such an
    operation can change a tensor's shape or strides (``_follow``)."""
    return func._schema.is_mutable


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
    leaves = _leaves(args, kwargs)
    if not any(
        isinstance(v, Elsewhere)
        or (isinstance(v, torch.device) and v.type == SECOND.type)
        for v in leaves
    ):  # nothing here is on the second device or made there
        return func(*args, **kwargs)
    if _composite(func):
        # Under ``torch.inference_mode()`` an operation made of others (``type_as``,
        # ``view_as``, ``to``) arrives whole; outside it torch breaks it up before it gets
        # here. Broken up here too, its parts come back through this function.
        with _MakesOnSecond():
            out = func.decompose(*args, **kwargs)
        if out is not NotImplemented:
            return out
    made_here = (
        any(isinstance(v, torch.device) and _targets_second(v) for v in leaves)
        and func not in _MOVES
    )
    checked = (args[:1] + args[2:], kwargs) if func in _INDEXING else (args, kwargs)
    tensors = [t for t in _leaves(*checked) if isinstance(t, torch.Tensor)]
    elsewhere = [t for t in tensors if isinstance(t, Elsewhere)]
    to_second = func in _MOVES and _targets_second(_destination(func, args, kwargs))
    if not elsewhere and not made_here and not to_second:
        return func(*args, **kwargs)
    # A 0-dim CPU tensor mixes with any device, as a Python number does.
    on_cpu = [t for t in tensors if not isinstance(t, Elsewhere) and t.dim() > 0]
    if elsewhere and on_cpu and func not in _ACROSS:
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two "
            f"devices, {SECOND.type} and {on_cpu[0].device}! ({func})"
        )
    leaving = func in _MOVES and not to_second and _destination(func, args, kwargs)
    wrapper_of = {}

    def held(value):
        if isinstance(value, Elsewhere):
            wrapper_of[id(value.held)] = value
            return value.held
        return _on_cpu_instead(value)

    out = func(*map_plain(args, held), **map_plain(kwargs, held))
    if _mutates(func):
        for wrapper in wrapper_of.values():
            _follow(wrapper)
    if leaving or func is torch.ops.aten._local_scalar_dense.default:
        return out

    def placed(value):
        if isinstance(value, torch.Tensor) and not isinstance(value, Elsewhere):
            wrapper = wrapper_of.get(
                id(value)
            )  # an in-place operation returns its input
            return Elsewhere(value) if wrapper is None else wrapper
        return value

    return map_plain(out, placed)


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
