"""Dependencies per test: the table has no cycle, ``uses(...)`` is checked at collection, and
"fix part K first" points at the part that is broken, never back over the part-3/part-6 cycle."""

from __future__ import annotations

import json
import os
import sys

from autograder.facts.points import (
    GATED,
    PARTS,
    builds_on,
    check_uses,
    failed_earlier,
    fix_first,
    from_other_parts,
)
from autograder.grading.grade import Graded
from autograder.outputs.report import feedback_md
from autograder.sources import runner

from .conftest import REPO, Run


def result(part: int, passed: bool, uses: tuple[int, ...] = (), name: str = "t"):
    node = f"tests/graded/test_part{part}.py::{name}"
    return runner.TestResult(
        node, name, part, 1, False, passed, "" if passed else "x", uses=uses
    )


def suite(failing: dict[int, list[tuple[int, ...]]]) -> list:
    """A passing test per part, plus the failing ones given as part -> their uses markers."""
    tests = [result(k, True) for k in PARTS]
    for part, markers in failing.items():
        tests += [result(part, False, uses, f"f{i}") for i, uses in enumerate(markers)]
    return tests


def test_the_table_is_acyclic_and_only_tests_reach_later_parts():
    for k, part in PARTS.items():
        assert all(j < k for j in part.uses), k
        assert all(j > k for j in part.tests_also_use), k
    assert builds_on(3) == {1, 6}
    assert 4 not in builds_on(7)


def test_a_uses_marker_must_name_a_declared_later_part():
    assert check_uses(3, (6,)) is None
    assert check_uses(3, (4,))
    assert check_uses(6, (3,))
    assert check_uses(3, ())


def test_a_bug_in_part_3_is_not_sent_to_part_6():
    """split_heads is wrong: part 3 fails (its cache tests too), and so does part 6's GQA."""
    tests = suite({3: [(), (), (6,)], 5: [(), (6,)], 6: [(), ()], 7: [()]})
    first = fix_first(tests)
    assert first[3] == []
    assert first[5] == first[6] == first[7] == [3]


def test_a_bug_in_the_kv_cache_is_sent_to_part_6():
    """KVCache.append is wrong: only part 3's cache tests fail there, so fix part 6 first."""
    tests = suite({3: [(6,), (6,)], 5: [(6,)], 6: [(), ()], 7: [()]})
    first = fix_first(tests)
    assert first[3] == first[5] == first[7] == [6]
    assert first[6] == []


def failing(tests, part: int) -> set[str]:
    return {t.nodeid for t in tests if t.part == part and not t.passed}


def test_a_bug_in_part_3_keeps_its_names_in_part_3_and_none_after():
    """split_heads is wrong: part 6's failures come from part 3, so part 3's cache tests,
    which run part 6's cache, keep their likely mistake; parts 5, 6 and 7 keep none."""
    tests = suite({3: [(), (), (6,)], 5: [(), (6,)], 6: [(), ()], 7: [()]})
    later = failing(tests, 5) | failing(tests, 6) | failing(tests, 7)
    assert set(from_other_parts(tests)) == later


def test_a_bug_in_the_kv_cache_takes_the_names_of_part_3s_cache_tests():
    """KVCache.append is wrong: part 3 fails only in its cache tests, which may fail because
    of part 6; part 6's own failures keep their likely mistake."""
    tests = suite({3: [(6,), (6,)], 6: [(), ()]})
    assert set(from_other_parts(tests)) == failing(tests, 3)


def test_a_failure_that_runs_a_failed_earlier_part_keeps_no_name():
    """Part 1 fails in tests of its own: part 3's failures may come from there."""
    tests = suite({1: [()], 3: [(), (6,)]})
    assert set(from_other_parts(tests)) == failing(tests, 3)


def test_while_the_suite_runs_only_a_failed_part_that_does_not_build_on_this_one_blocks():
    """Part 6 builds on part 3: its failure may be part 3's doing, decided once the results
    are in. Part 1's is not, and part 6's blocks a part 3 test only where it runs the cache."""
    assert failed_earlier(3, (), {1}) == {1}
    assert failed_earlier(3, (), {6}) == set()
    assert failed_earlier(3, (6,), {6}) == set()
    assert failed_earlier(3, (), {2, 4, 5, 7}) == set()
    assert failed_earlier(6, (), {3}) == set()  # part 3's cache tests run part 6
    assert failed_earlier(6, (), {2, 3}) == {2}
    assert failed_earlier(7, (), {6}) == {6}


def test_a_part_3_cache_failure_is_never_said_to_build_on_rope():
    tests = suite({3: [(6,)], 4: [()], 6: [()]})
    assert 4 not in fix_first(tests)[3]


def test_a_part_gated_for_its_own_forbidden_call_is_not_sent_elsewhere():
    """Parts 1 and 7 both fail only on their own forbidden calls: part 7 is not told to fix
    part 1 first."""
    gated = [
        runner.TestResult(
            f"tests/graded/test_part{k}.py::g", "g", k, 1, False, False, GATED + "x"
        )
        for k in (1, 7)
    ]
    first = fix_first([*(result(k, True) for k in PARTS), *gated])
    assert first[1] == first[7] == []


def test_feedback_names_the_part_to_fix_first():
    tests = suite({3: [(), (6,)], 6: [()]})
    text = feedback_md(Graded("x", tests))
    part3 = text.split("## Part 3")[1].split("## Part 4")[0]
    part6 = text.split("## Part 6")[1].split("## Part 7")[0]
    assert "builds on" not in part3
    assert "builds on your part(s) 3, which lost points" in part6


def test_every_graded_test_declares_each_part_it_reaches(tmp_path):
    """A test that builds another part's object itself (part 3's cache tests build part 6's
    KVCache) says so with ``uses(...)``, and only then: otherwise a bug in that part sends the
    student to fix this one first. Each test's reach is recorded from the graded suite run on
    the reference (``tests/engine/reached_parts.py``)."""
    found = tmp_path / "reached.json"
    plugins = ["-p", "no:cacheprovider", "-p", "tests.engine.reached_parts"]
    command = [sys.executable, "-m", "pytest", "tests/graded", "-q", *plugins]
    env = {**os.environ, "REACHED_PARTS": str(found)}
    Run(command, REPO, tmp_path / "suite.log", env).output()
    tests = json.loads(found.read_text())
    assert len(tests) > 50
    wrong = []
    for name, test in tests.items():
        declared = {test["part"], *PARTS[test["part"]].uses, *test["uses"]}
        if undeclared := sorted(set(test["reached"]) - declared):
            wrong.append(f"{name} reaches part(s) {undeclared} without uses(...)")
        if unused := sorted(set(test["uses"]) - set(test["reached"])):
            wrong.append(f"{name} is marked uses{tuple(unused)} but never reaches it")
    assert not wrong, "\n".join(wrong)
