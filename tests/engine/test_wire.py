"""The wire format: plain data survives the trip, anything else is refused."""

from __future__ import annotations

import contextlib
import json
import math
import socket
import struct
import threading
import time

import pytest
import torch

from autograder.facts.protocol import ErrorInfo, Handle, HandleRef
from autograder.sandbox import wire

CPU = torch.device("cpu")


def round_trip(value):
    header, buffers = wire.encode(value)
    return wire.decode(header, memoryview(b"".join(bytes(b) for b in buffers)), CPU)


@pytest.mark.parametrize(
    "tensor",
    [
        torch.randn(3, 4, dtype=torch.float32),
        torch.randn(2, 1, 5, dtype=torch.float64),
        torch.arange(-5, 7, dtype=torch.int64).reshape(3, 4),
        torch.tensor([[True, False], [False, True]]),
        torch.tensor(2.5, dtype=torch.float64),
        torch.empty(0, 3),
        torch.randn(4, 6).t(),  # not contiguous
        torch.tensor([float("inf"), float("-inf"), float("nan")]),
        torch.randn(3, dtype=torch.bfloat16),
    ],
)
def test_tensors_round_trip_bitwise(tensor):
    back = round_trip(tensor)
    assert type(back) is torch.Tensor
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    assert torch.equal(back.nan_to_num(), tensor.nan_to_num())


def test_plain_values_round_trip():
    value = {
        "a": [1, 2.5, True, None, "text", (3, "x")],
        "inf": float("inf"),
        "dtype": torch.float64,
        "device": torch.device("cpu"),
        "handle": HandleRef(7, "KVCache"),
        "error": ErrorInfo("ValueError", "bad", "tb", ("ValueError", "Exception")),
        "nested": {"t": (torch.ones(2), [torch.zeros(1, dtype=torch.bool)])},
    }
    back = round_trip(value)
    assert back["a"] == [1, 2.5, True, None, "text", (3, "x")]
    assert type(back["a"][5]) is tuple and type(back["a"][2]) is bool
    assert back["inf"] == math.inf and math.isnan(round_trip(float("nan")))
    assert back["dtype"] is torch.float64 and back["device"] == torch.device("cpu")
    assert (
        back["handle"] == HandleRef(7, "KVCache")
        and back["error"].bases[0] == "ValueError"
    )
    assert torch.equal(back["nested"]["t"][0], torch.ones(2))


def test_handles_are_translated_and_bare_refs_refused_where_they_are():
    """The grading side sends each ``Handle`` as the name its translator gives; a bare
    ``HandleRef`` there would skip the translation (and the check that its worker still lives)."""

    def translate(h: Handle) -> HandleRef:
        return HandleRef(h.ref.id - 100, h.ref.type_name)

    header, buffers = wire.encode([Handle(None, HandleRef(107, "KVCache"))], translate)
    payload = memoryview(b"".join(buffers))
    assert wire.decode(header, payload, CPU) == [HandleRef(7, "KVCache")]
    with pytest.raises(wire.WireError):
        wire.encode([HandleRef(7, "KVCache")], translate)
    with pytest.raises(wire.WireError):
        wire.encode([Handle(None, HandleRef(7, "KVCache"))])


def test_a_tensor_subclass_arrives_as_a_plain_tensor():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return True

    liar = torch.zeros(3).as_subclass(Liar)
    back = round_trip(liar)
    assert type(back) is torch.Tensor and torch.equal(back, torch.zeros(3))


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {1: 2},
        torch.nn.Linear(2, 2),
        b"bytes",
        {1, 2},
        torch.randn(2).to_sparse(),
    ],
)
def test_objects_are_not_sent(value):
    with pytest.raises(wire.WireError):
        wire.encode(value)


def message(tree, payload=b""):
    return json.dumps(tree).encode(), memoryview(payload)


@pytest.mark.parametrize(
    "tree, payload",
    [
        ({"pickle": "cos\nsystem"}, b""),
        ({"T": ["float32", [2], "cpu"]}, b"\0" * 4),  # too few bytes
        ({"T": ["float32", [1], "cpu"]}, b"\0" * 8),  # bytes left over
        ({"T": ["object", [1], "cpu"]}, b"\0" * 8),
        ({"T": ["float32", [-1], "cpu"]}, b""),
        # empty, but with sizes torch cannot hold (an int64 overflow, a stride overflow)
        ({"T": ["float32", [0, 2**70], "cpu"]}, b""),
        ({"T": ["float32", [0, *[2**26] * 4], "cpu"]}, b""),
        ({"T": ["float32", [1], "meta"]}, b"\0" * 4),
        ({"T": ["float32", 1, "cpu"]}, b"\0" * 4),
        ({"dt": "torch.nn.Module"}, b""),
        ({"dv": "mps"}, b""),  # a device neither side works on
        ({"h": ["1", "x"]}, b""),
        ({"e": ["E", "m", "t", [1]]}, b""),
        ({"f": "1e999x"}, b""),
        ({"t": [1], "d": {}}, b""),
        # values of a type a lookup cannot take (unhashable) are refused the same way
        ({"T": [["float32"], [1], "cpu"]}, b"\0" * 4),
        ({"T": ["float32", [1], ["cpu"]]}, b"\0" * 4),
        ({"dt": ["float32"]}, b""),
        ({"f": ["inf"]}, b""),
    ],
)
def test_malformed_messages_are_refused(tree, payload):
    with pytest.raises(wire.WireError):
        wire.decode(*message(tree, payload), CPU)


def test_a_bool_tensor_is_true_wherever_its_byte_is_not_zero():
    """A sender may write any byte; a bool that is neither 0 nor 1 would break comparisons."""
    payload = bytearray([0, 1, 2, 255])
    back = wire.decode(*message({"T": ["bool", [2, 2], "cpu"]}, payload), CPU)
    payload[:] = b"\0" * 4  # the tensor is a copy of the bytes
    assert back.dtype == torch.bool
    assert back.tolist() == [[False, True], [True, True]]
    assert back.to(torch.uint8).tolist() == [[0, 1], [1, 1]]


def test_deep_nesting_and_bad_json_are_refused():
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(wire.WireError):
        wire.decode(deep.encode(), memoryview(b""), CPU)
    with pytest.raises(wire.WireError):
        wire.decode(b"{not json", memoryview(b""), CPU)
    with pytest.raises(wire.WireError):  # ``encode`` writes ASCII only
        wire.decode('"caf\u00e9"'.encode(), memoryview(b""), CPU)


def test_framing_over_a_socket_and_the_size_limit():
    a, b = socket.socketpair()
    with a, b:
        wire.send(a, {"x": torch.arange(5)})
        assert torch.equal(wire.recv(b, CPU)["x"], torch.arange(5))
        a.sendall(struct.pack("!QI", 1 << 40, 10))
        with pytest.raises(wire.WireError):
            wire.recv(b, CPU)
    a, b = socket.socketpair()
    with b:
        a.sendall(struct.pack("!QI", 100, 10))
        a.close()
        with pytest.raises(EOFError):
            wire.recv(b, CPU)


def test_a_header_too_large_or_too_many_values_are_refused_unparsed():
    with pytest.raises(wire.WireError, match="header"):
        wire.decode(b" " * (wire.MAX_HEADER + 1), memoryview(b""), CPU)
    many = json.dumps([0] * (wire.MAX_NODES + 1)).encode()
    with pytest.raises(wire.WireError, match="values"):
        wire.decode(many, memoryview(b""), CPU)
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("!QI", wire.MAX_HEADER * 2, wire.MAX_HEADER + 1))
        with pytest.raises(wire.WireError, match="refused"):
            wire.recv(b, CPU)


def test_a_trickled_message_ends_at_its_deadline():
    """The deadline covers the whole message, not each read: one byte now and then is no help."""
    a, b = socket.socketpair()
    stop = threading.Event()

    def trickle():
        a.sendall(struct.pack("!QI", 4096, 16))
        while not stop.is_set():
            with contextlib.suppress(OSError):
                a.sendall(b" ")
            time.sleep(0.05)

    sender = threading.Thread(target=trickle)
    sender.start()
    b.setblocking(False)
    start = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            wire.recv(b, CPU, deadline=start + 0.5)
        assert time.monotonic() - start < 30  # bounded (generously: a loaded machine)
    finally:
        stop.set()
        sender.join()
        a.close()
        b.close()


def test_a_send_to_a_peer_that_stopped_reading_ends_at_its_deadline():
    a, b = socket.socketpair()
    with a, b:
        a.setblocking(False)
        start = time.monotonic()
        with pytest.raises(TimeoutError):  # far more than the socket's buffers hold
            wire.send(a, {"x": torch.zeros(1 << 22)}, deadline=start + 0.5)
        assert time.monotonic() - start < 30  # bounded (generously: a loaded machine)


def test_a_deadline_is_refused_on_a_blocking_socket():
    """It could only be kept by a socket time-out, which this module does not set."""
    a, b = socket.socketpair()
    with a, b:
        with pytest.raises(ValueError, match="non-blocking"):
            wire.recv(b, CPU, deadline=time.monotonic() + 1)
        with pytest.raises(ValueError, match="non-blocking"):
            wire.send(a, {"x": 1}, deadline=time.monotonic() + 1)


def test_polling_sees_data_and_a_closed_peer_at_once_and_gives_up_when_told():
    a, b = socket.socketpair()
    with a, b:
        start = time.perf_counter()
        assert not wire.poll_readable(b, 0.05)
        assert time.perf_counter() - start >= 0.05
        a.sendall(b"x")
        assert wire.poll_readable(b, 60)
        assert b.recv(1) == b"x"  # polling left the data to be read
        a.close()
        assert wire.poll_readable(b, 60)
