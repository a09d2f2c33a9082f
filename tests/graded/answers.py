"""The oracles as the tests see them: computed here, read from a file in the student handout.

Test modules import every oracle from this module (``from tests.graded.answers import
rope_oracle``), never from ``tests.graded.oracles``, so one test body serves both places:

* in the repository each name is the oracle itself (``tests.graded.oracles``), which the
  release may record: every call's result, keyed by the oracle's name and a digest of its
  arguments, goes to ``answers.pt`` (``pytest tests/graded -m public --record-answers FILE``);
* in the handout, which has no oracles, each name looks its result up in ``answers.pt``, so a
  public test compares with the values the oracles produced at release, and no code that
  computes a graded quantity ships.

Keys digest the arguments, not the order of calls, so a property test's examples find their
values whatever order they run in. Results are stored on the CPU and moved to the device of
the call's tensors (or its ``device=``) when read.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import hashlib
import struct
from pathlib import Path

import pytest
import torch

STORE = Path(__file__).with_name("answers.pt")

if Path(__file__).with_name("oracles.py").is_file():
    from tests.graded import oracles as _oracles
else:  # the student handout: the values were stored at release
    _oracles = None

#: While the release records: key -> the value an oracle returned.
_recording: dict[str, object] | None = None
_stored: dict[str, object] | None = None


class AnswerMissing(RuntimeError):
    """The handout holds no stored value for this call: the suite's problem, not the student's."""


def __getattr__(name: str):
    """``from tests.graded.answers import <oracle>``: the oracle, or its stored values."""
    if name.startswith("__"):
        raise AttributeError(name)
    if _oracles is not None:
        if not hasattr(_oracles, name):
            raise AttributeError(
                f"no oracle {name} in tests/graded/oracles.py: every oracle lives there "
                "(README.md, Adding a part)"
            )
        return _recorded(name, getattr(_oracles, name))
    return _looked_up(name)


def record(into: dict[str, object] | None) -> None:
    """Start (a dict) or stop (None) recording what the oracles return."""
    global _recording
    _recording = into


def record_suspects(likely) -> None:
    """While the release records, evaluate the lazy suspects of a comparison's ``likely``
    (``tests.graded.compare``), so that the oracle calls they make are stored too: in the
    handout a failing public test can then name its likely mistake. A suspect that fails here
    only goes unstored."""
    if _recording is None:
        return
    for suspect in dict(likely).values():
        if callable(suspect):
            with contextlib.suppress(Exception):
                suspect()


def save(values: dict[str, object], path: Path) -> None:
    """Write what was recorded, with the names of the oracles nothing can be stored for."""
    marked = [
        name
        for name in dir(_oracles)
        if getattr(getattr(_oracles, name), "from_student_outputs", False)
    ]
    torch.save({**values, "__from_student_outputs__": marked}, path)


def key(name: str, args: tuple, kwargs: dict) -> str:
    """The oracle's name and a digest of its arguments (``device=`` left out)."""
    digest = hashlib.sha256()
    _feed(digest, (args, {k: v for k, v in kwargs.items() if k != "device"}))
    return f"{name}:{digest.hexdigest()[:32]}"


def _recorded(name: str, oracle):
    memo = {} if getattr(oracle, "memoized", False) else None

    @functools.wraps(oracle)
    def answer(*args, **kwargs):
        if memo is None:
            value = oracle(*args, **kwargs)
        else:  # the same arguments, the same value: computed once, each caller a copy
            memo_key = (key(name, args, kwargs), str(_device_of(args, kwargs)))
            if memo_key not in memo:
                memo[memo_key] = oracle(*args, **kwargs)
            value = copy.deepcopy(memo[memo_key])
        if _recording is not None:
            value = _materialize(value)
            _recording[key(name, args, kwargs)] = _materialize(value, cpu=True)
        return value

    return answer


def _looked_up(name: str):
    def answer(*args, **kwargs):
        global _stored
        if _stored is None:
            if not STORE.is_file():
                raise AnswerMissing(f"{STORE.name} is missing from tests/graded")
            _stored = torch.load(STORE, weights_only=True)
        found = _stored.get(key(name, args, kwargs), _MISSING)
        if found is _MISSING:
            if name in _stored.get("__from_student_outputs__", ()):
                pytest.skip(
                    "its expected values come from your own model's outputs, so only the "
                    "grader can compute them: it runs when you submit"
                )
            raise AnswerMissing(
                f"no stored expected value for {name} with these inputs: this handout's "
                "tests drew other inputs than at release (a different torch or hypothesis "
                "version?); install the versions named in README.md"
            )
        return _to_device(found, _device_of(args, kwargs))

    answer.__name__ = name
    return answer


_MISSING = object()


def _materialize(value, cpu: bool = False):
    """Lazy suspects evaluated, containers rebuilt; tensors detached (and moved to the CPU)."""
    if callable(value) and not isinstance(value, torch.Tensor):
        return _materialize(value(), cpu)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu() if cpu else value
    if isinstance(value, dict):
        return {k: _materialize(v, cpu) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_materialize(v, cpu) for v in value)
    return value


def _to_device(value, device):
    if device is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _device_of(args: tuple, kwargs: dict):
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def _feed(digest, value) -> None:
    """A canonical encoding of an oracle's arguments (devices left out: values move)."""
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous().clone()
        digest.update(f"T{data.dtype}{tuple(data.shape)}".encode())
        digest.update(_storage_bytes(data.untyped_storage()))
    elif isinstance(value, dict):
        digest.update(b"D%d" % len(value))
        for k in sorted(value, key=str):
            _feed(digest, k)
            _feed(digest, value[k])
    elif isinstance(value, (tuple, list)):
        digest.update(b"L%d" % len(value))
        for item in value:
            _feed(digest, item)
    elif isinstance(value, float):
        digest.update(b"f" + struct.pack("<d", value))
    elif isinstance(value, (bool, int, str, type(None))):
        digest.update(f"{type(value).__name__}:{value!r}".encode())
    elif isinstance(value, torch.device):
        digest.update(b"device")
    elif isinstance(value, torch.dtype):
        digest.update(str(value).encode())
    else:
        raise TypeError(f"an oracle argument of type {type(value).__name__} has no key")


def _storage_bytes(storage) -> bytes:
    """A storage's bytes, copied at once (``bytes(storage)`` reads them one at a time: seconds
    for a model's weights, on every oracle call whose arguments hold them)."""
    size = storage.nbytes()
    return ctypes.string_at(storage.data_ptr(), size) if size else b""
