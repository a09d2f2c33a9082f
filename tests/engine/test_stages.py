"""The stage tally behind ``benchmarks/grading.py --profile``: off by default, exclusive when
stages nest, one record per flush."""

from __future__ import annotations

import time

from autograder.facts import stages


def test_off_unless_a_folder_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(stages, "FOLDER", "")
    assert stages.timed("staging") is stages.timed("the requests")  # one shared no-op
    with stages.timed("staging"):
        pass
    stages.flush("x")
    assert stages.read(tmp_path) == []


def test_a_nested_stage_is_taken_out_of_the_outer_one(monkeypatch, tmp_path):
    monkeypatch.setattr(stages, "FOLDER", str(tmp_path))
    with stages.timed("outer"), stages.timed("inner", also=lambda: 0.0):
        time.sleep(0.2)
    stages.flush("alice")
    stages.flush("nobody")  # nothing since the last: no record
    [record] = stages.read(tmp_path)
    assert record["name"] == "alice"
    outer, inner = record["stages"]["outer"], record["stages"]["inner"]
    assert inner[0] >= 0.2 and inner[2] == 1
    assert outer[0] < 0.2  # its own time only: not the inner stage's sleep


def test_a_submission_s_record_holds_the_rest(monkeypatch, tmp_path):
    monkeypatch.setattr(stages, "FOLDER", str(tmp_path))
    with stages.submission("bob", also=lambda: 0.0):
        with stages.timed("the requests"):
            time.sleep(0.1)
        time.sleep(0.2)
    [record] = stages.read(tmp_path)
    assert record["name"] == "bob"
    assert record["stages"][stages.REST][0] >= 0.2
    assert record["stages"]["the requests"][0] < record["stages"][stages.REST][0]
