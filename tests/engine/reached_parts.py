"""A pytest plugin (``-p tests.engine.reached_parts``) for a run of the graded suite in process:
which parts' modules each test reaches by name (``hw.call("gqa.kv_cache_numel")``,
``hw.new("gqa.KVCache")``), beside its ``part`` and ``uses`` markers, written as JSON to the
file named by the environment variable ``REACHED_PARTS``."""

from __future__ import annotations

import json
import os

from autograder.facts.points import MODULES, part_of_file
from autograder.sandbox.executor import InProcessSubmission

_reached: dict[str, set[int]] = {}
_declared: dict[str, tuple[int, list[int]]] = {}
_send = InProcessSubmission._send


def _recording_send(self, op, target, name, args, kwargs):
    module = name.split(".")[0] if target is None and name else None
    if module in MODULES:
        test = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        _reached.setdefault(test, set()).add(part_of_file(f"{module}.py"))
    return _send(self, op, target, name, args, kwargs)


InProcessSubmission._send = _recording_send


def pytest_collection_modifyitems(items):
    for item in items:
        part, uses = item.get_closest_marker("part"), item.get_closest_marker("uses")
        _declared[item.nodeid] = (part.args[0], list(uses.args) if uses else [])


def pytest_sessionfinish(session):
    found = {
        test: {"part": part, "uses": uses, "reached": sorted(_reached.get(test, ()))}
        for test, (part, uses) in _declared.items()
    }
    with open(os.environ["REACHED_PARTS"], "w") as f:
        json.dump(found, f)
