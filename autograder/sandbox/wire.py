"""A safe encoding of the protocol's plain data, for the channel to the sandboxed worker.

The worker runs student code, so whatever it sends is untrusted: no pickle here. A message is a
JSON header that describes the value plus the raw bytes of its tensors. Decoding checks every
type, shape and size against the header and rebuilds tensors as plain ``torch.Tensor`` from a
copy of the bytes, so nothing the student built (a subclass, an object with odd methods) can
reach the grading process.

Frame layout: ``!Q`` total length, ``!I`` header length, the header, then the tensor buffers
back to back in header order.

Everything a receiver does is bounded, whatever the sender writes: a frame is refused above
``MAX_MESSAGE`` bytes or with a header above ``MAX_HEADER``, decoding stops after ``MAX_NODES``
values, and ``recv`` with a ``deadline`` gives up at that moment however slowly the bytes arrive.
So one reply costs the receiver at most about ``2 * MAX_MESSAGE + 50 * MAX_HEADER`` bytes of
memory (the frame, the tensors' copies, and Python objects of a parsed JSON header).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import socket
import struct
import time

import numpy
import torch

from autograder.facts.protocol import ErrorInfo, Handle, HandleRef

#: Largest frame either side accepts (tensors of the graded suite are tiny; a char-LM
#: state dict is a few MB).
MAX_MESSAGE = 64 << 20
#: Largest JSON header: a parsed header takes about fifty times its size in Python objects.
MAX_HEADER = 1 << 20
#: Most values (containers, numbers, tensors) one message may describe.
MAX_NODES = 100_000
MAX_DEPTH = 64

#: The dtypes a tensor in a message may have, by name.
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_COMPLEX = (torch.complex64, torch.complex128)
_INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (*_FLOATS, *_COMPLEX, *_INTEGERS, torch.bool)
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}
DEVICE_TYPES = ("cpu", "cuda")
#: A device as a value may also be the second device of ``autograder.sandbox.second_device``.
DEVICE_VALUE_TYPES = (*DEVICE_TYPES, "meta")
#: The NumPy dtype of each torch dtype with one of the same bytes. Tensors go through NumPy:
#: a NumPy call costs a fraction of a torch call, and every request and reply carries tensors.
#: bfloat16 (NumPy has none) goes through torch alone; bool is not a plain view of its bytes
#: (a byte other than 0 or 1 must not become a bool), it is compared with 0.
_NUMPY = {
    dtype: numpy.dtype(str(dtype).removeprefix("torch."))
    for dtype in (*_FLOATS, *_COMPLEX, *_INTEGERS)
    if dtype != torch.bfloat16
}

_FRAME = struct.Struct("!QI")


class WireError(ValueError):
    """A message that does not describe plain protocol data."""


#: Values that are their own JSON (``type`` exactly: a subclass is refused).
_SCALARS = frozenset({type(None), bool, int, str})
_STR = frozenset({str})
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=True)
_DECODER = json.JSONDecoder()


def encode(value, handle=None) -> tuple[bytes, list[memoryview]]:
    """Return ``(header, buffers)`` for ``value``; raise ``WireError`` on anything not plain.

    ``handle`` gives the ``HandleRef`` to send for each ``protocol.Handle`` in ``value``
    (without it a ``Handle`` is refused; with it a bare ``HandleRef``, which would name an
    object of the receiver's past without this side's translation).
    """
    buffers: list[memoryview] = []
    header = _ENCODER.encode(_encode(value, buffers, 0, handle)).encode()
    return header, buffers


# Encoding and decoding run twice per request on each side of the sandbox, between context
# switches that leave the caches cold, so they test the common cases first and hand scalars
# over without a call.


def _encode(value, buffers, depth, handle):
    kind = type(value)
    if kind in _SCALARS:
        return value
    if isinstance(value, torch.Tensor):
        return {"T": _encode_tensor(value, buffers)}
    if kind in (tuple, list, dict):
        if depth >= MAX_DEPTH:
            raise WireError("value nested too deeply")
        depth += 1
        if kind is dict:
            if not _STR.issuperset(map(type, value)):
                raise WireError("dict keys must be str")
            return {
                "d": {
                    k: v if type(v) in _SCALARS else _encode(v, buffers, depth, handle)
                    for k, v in value.items()
                }
            }
        items = [
            v if type(v) in _SCALARS else _encode(v, buffers, depth, handle)
            for v in value
        ]
        return items if kind is list else {"t": items}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is Handle and handle is not None:
        value, kind = handle(value), HandleRef
    elif kind is HandleRef and handle is not None:  # skips this side's translation
        raise WireError("cannot send a bare HandleRef where handles are translated")
    if kind is HandleRef:
        return {"h": [value.id, value.type_name]}
    if isinstance(value, torch.dtype):
        return {"dt": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"dv": str(value)}
    if kind is ErrorInfo:
        return {
            "e": [value.type_name, value.message, value.traceback, list(value.bases)]
        }
    raise WireError(f"cannot send a {kind.__name__}")


def _encode_tensor(t: torch.Tensor, buffers) -> list:
    name, device_type = _NAMES.get(t.dtype), "cuda" if t.is_cuda else "cpu"
    if name is None or t.layout != torch.strided or not (t.is_cpu or t.is_cuda):
        raise WireError(f"cannot send a tensor of {t.dtype} on {t.device} ({t.layout})")
    if t.dtype == torch.bfloat16:
        flat = torch.Tensor.contiguous(torch.Tensor.detach(t).cpu())
        raw = flat.reshape(-1).view(torch.uint8).numpy()
    else:  # detached, on the CPU, conjugation and negation applied: the values as they read
        raw = torch.Tensor.numpy(t, force=True)
        if not raw.flags.c_contiguous:
            raw = numpy.ascontiguousarray(raw)
    buffers.append(memoryview(raw).cast("B") if raw.size else memoryview(b""))
    return [name, list(t.shape), device_type]


def decode(header: bytes, payload: memoryview, device: torch.device, handle=None):
    """Rebuild a value from ``header`` and the tensor bytes in ``payload``.

    Tensors recorded on a CUDA device are placed on ``device`` (the receiver's own); the rest
    stay on the CPU. ``handle``, where given, turns each ``HandleRef`` into what it returns.
    """
    if len(header) > MAX_HEADER:
        raise WireError(f"header of {len(header)} bytes refused (limit {MAX_HEADER})")
    try:  # ``encode`` writes ASCII only, and no white space
        text = header.decode("ascii")
        tree, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"bad header: {exc}") from None
    if end != len(text):
        raise WireError("bad header: data after the value")
    cursor = [0, 1, handle]  # payload offset, values counted, what a HandleRef becomes
    value = (
        tree
        if type(tree) in _JSON_SCALARS
        else _decode(tree, payload, cursor, device, 0)
    )
    if cursor[0] != len(payload):
        raise WireError("unused bytes after the tensors")
    return value


#: JSON values that decode as themselves.
_JSON_SCALARS = frozenset({type(None), bool, int, float, str})


def _decode(node, payload, cursor, device, depth):
    """A list or a tagged dict (a scalar is kept as it is, without a call); every value is
    counted by the container that holds it."""
    if depth >= MAX_DEPTH:
        raise WireError("value nested too deeply")
    kind = type(node)
    if kind is list:
        return _decode_items(node, payload, cursor, device, depth)
    if kind is not dict or len(node) != 1:
        raise WireError("malformed value")
    ((tag, body),) = node.items()
    if tag == "T" and type(body) is list and len(body) == 3:
        return _decode_tensor(body, payload, cursor, device)
    if tag == "t" and type(body) is list:
        return tuple(_decode_items(body, payload, cursor, device, depth))
    if tag == "d" and type(body) is dict:
        _count(cursor, len(body))
        return {
            k: v
            if type(v) in _JSON_SCALARS
            else _decode(v, payload, cursor, device, depth + 1)
            for k, v in body.items()
        }
    if tag == "f" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag == "h" and _typed(body, (int, str)):
        ref = HandleRef(body[0], body[1])
        return ref if cursor[2] is None else cursor[2](ref)
    if tag == "dt" and type(body) is str and body in DTYPES:
        return DTYPES[body]
    if tag == "dv" and type(body) is str:
        try:
            dev = torch.device(body)
        except RuntimeError:
            raise WireError(f"bad device {body!r}") from None
        if dev.type not in DEVICE_VALUE_TYPES:
            raise WireError(f"bad device {body!r}")
        return dev
    if (
        tag == "e"
        and _typed(body, (str, str, str, list))
        and all(type(b) is str for b in body[3])
    ):
        return ErrorInfo(body[0], body[1], body[2], tuple(body[3]))
    raise WireError(f"malformed value tagged {tag!r}")


def _decode_items(items: list, payload, cursor, device, depth) -> list:
    _count(cursor, len(items))
    return [
        v
        if type(v) in _JSON_SCALARS
        else _decode(v, payload, cursor, device, depth + 1)
        for v in items
    ]


def _count(cursor, values: int) -> None:
    cursor[1] += values
    if cursor[1] > MAX_NODES:
        raise WireError(f"more than {MAX_NODES} values in one message")


def _typed(body, types) -> bool:
    return (
        type(body) is list
        and len(body) == len(types)
        and all(type(b) is t for b, t in zip(body, types, strict=True))
    )


def _decode_tensor(body, payload, cursor, device):
    dtype_name, shape, device_type = body
    if (
        type(dtype_name) is not str
        or dtype_name not in DTYPES
        or device_type not in DEVICE_TYPES
        or type(shape) is not list
        or len(shape) > MAX_DEPTH
    ):
        raise WireError("malformed tensor")
    numel = 1
    for n in shape:  # no size beyond the message (an empty tensor's too: (0, 2**70))
        if type(n) is not int or not 0 <= n <= MAX_MESSAGE:
            raise WireError("malformed tensor shape")
        numel *= n
    dtype = DTYPES[dtype_name]
    start = cursor[0]
    end = start + numel * dtype.itemsize
    if end > len(payload):
        raise WireError("tensor larger than the message")
    cursor[0] = end
    if numel == 0:
        try:  # sizes whose strides overflow
            tensor = torch.empty(shape, dtype=dtype)
        except RuntimeError:
            raise WireError("malformed tensor shape") from None
    elif dtype in _NUMPY:  # a copy of the bytes: nothing the sender holds is shared
        raw = numpy.frombuffer(bytearray(payload[start:end]), _NUMPY[dtype])
        tensor = torch.from_numpy(raw.reshape(shape))
    elif dtype == torch.bool:  # any byte other than 0 is True, as in torch's own casts
        raw = numpy.frombuffer(payload[start:end], numpy.uint8) != 0
        tensor = torch.from_numpy(raw.reshape(shape))
    else:
        raw = bytearray(payload[start:end])
        tensor = torch.frombuffer(raw, dtype=dtype).reshape(shape)
    if device_type == "cuda":
        if device.type != "cuda":  # never start CUDA in a process that was not asked to
            raise WireError("a CUDA tensor where the receiver works on the CPU")
        tensor = tensor.to(device)
    return tensor


# Framing over a stream socket ------------------------------------------------------------------


def send(sock: socket.socket, value, deadline: float | None = None) -> None:
    """Write one framed message."""
    send_encoded(sock, encode(value), deadline)


def send_encoded(
    sock: socket.socket,
    encoded: tuple[bytes, list[memoryview]],
    deadline: float | None = None,
) -> None:
    """Write one framed message already encoded by ``encode``; with a ``deadline`` (the socket
    must then be non-blocking) ``TimeoutError`` when a peer that stopped reading holds it up
    past that moment."""
    header, buffers = encoded
    total = _FRAME.size + len(header) + sum(map(len, buffers))  # bytes: cast("B")
    if total > MAX_MESSAGE:
        raise WireError(
            f"message of {total} bytes exceeds the {MAX_MESSAGE}-byte limit"
        )
    head = _FRAME.pack(total, len(header)) + header
    if deadline is not None:
        _check_nonblocking(sock)
    if total <= 1 << 20:  # one system call for the usual small message
        _send_all(sock, b"".join([head, *buffers]), deadline)
        return
    for chunk in (head, *buffers):
        _send_all(sock, chunk, deadline)


def _send_all(sock: socket.socket, data, deadline: float | None) -> None:
    if deadline is None:
        sock.sendall(data)
        return
    view = memoryview(data).cast("B")
    while view:
        try:
            view = view[sock.send(view) :]
        except BlockingIOError:  # the peer's buffer is full
            _wait(sock, deadline, write=True)


def recv(
    sock: socket.socket,
    device: torch.device,
    limit: int = MAX_MESSAGE,
    deadline: float | None = None,
):
    """Read one framed message (``recv_sized`` without its size)."""
    return recv_sized(sock, device, limit, deadline)[0]


def recv_sized(
    sock: socket.socket,
    device: torch.device,
    limit: int = MAX_MESSAGE,
    deadline: float | None = None,
    handle=None,
) -> tuple[object, int]:
    """Read one framed message: its value (``handle`` as in ``decode``) and its size in bytes.

    ``EOFError`` when the peer closed, ``WireError`` when malformed or larger than ``limit``,
    ``TimeoutError`` when the whole message has not arrived by ``deadline`` (``time.monotonic``;
    the socket must then be non-blocking).
    """
    if deadline is not None:
        _check_nonblocking(sock)
    head = _recv_exactly(sock, _FRAME.size, deadline)
    total, header_len = _FRAME.unpack(head)
    if total > limit or header_len > min(total - _FRAME.size, MAX_HEADER):
        raise WireError(f"message of {total} bytes refused (limit {limit})")
    body = memoryview(_recv_exactly(sock, total - _FRAME.size, deadline))
    value = decode(body[:header_len].tobytes(), body[header_len:], device, handle)
    return value, total


def _recv_exactly(sock: socket.socket, n: int, deadline: float | None) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:])
        except BlockingIOError:  # nothing more has arrived yet
            _wait(sock, deadline)
            continue
        if k == 0:
            raise EOFError("connection closed")
        got += k
    return buf


def poll_readable(sock: socket.socket, seconds: float) -> bool:
    """Whether ``sock`` has data (or was closed) within ``seconds``, trying without sleeping and
    yielding the CPU between tries (a worker, whose filter refuses the yield, spins): a CPU
    kept busy answers at once, where one that went idle must first be woken."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        try:
            sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            with contextlib.suppress(OSError):  # refused in a worker: it spins
                os.sched_yield()
            continue
        except OSError:
            pass  # the read that follows reports it
        return True
    return False


def _check_nonblocking(sock: socket.socket) -> None:
    """A deadline is kept by waiting in ``select``, never in a blocking call. (A socket time-out
    would do too, but costs system calls on every read and write of every request.)"""
    if sock.gettimeout() != 0.0:
        raise ValueError("a deadline needs a non-blocking socket")


def _wait(sock: socket.socket, deadline: float | None, write: bool = False) -> None:
    """Until ``sock`` is readable (writable), or ``TimeoutError`` at ``deadline``."""
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        raise TimeoutError("message not complete by its deadline")
    select.select([] if write else [sock], [sock] if write else [], [], left)
