"""The graded suite's pytest plugin: options, grading markers, the ``hw`` fixture, and the
forbidden-call gate. ``tests/conftest.py`` loads it (``pytest_plugins``); a suite without that
conftest loads it with ``-p autograder.grading.plugin``.

Every graded test (in a folder named ``graded``, ``tests/graded`` here) carries ``@pytest.mark.points(n)``,
``@pytest.mark.part(k)`` and exactly one of ``@pytest.mark.public`` / ``@pytest.mark.hidden``;
collection fails otherwise, and also when a part's test points do not add up to its entry in
``autograder.facts.points.PARTS``. Tests reach student code only through ``hw`` (see
``autograder.facts.protocol``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, is_hypothesis_test, seed, settings
from hypothesis.internal.conjecture import providers
from hypothesis.internal.reflection import function_digest

from autograder.facts import stages
from autograder.facts.points import GATED, PACKAGE, PARTS, check_uses
from autograder.facts.protocol import StudentError
from autograder.facts.rules import by_part
from autograder.sandbox.executor import InProcessSubmission
from autograder.sources.reader import scan_package

REPO = Path(__file__).resolve().parents[2]
RECORDED = pytest.StashKey[dict]()
#: A collected test's ``grading_marks``, read once.
MARKS = pytest.StashKey[tuple[int, int, str] | None]()
DEFAULT_SUBMISSION = next(
    (REPO / name for name in ("solutions", "assignments") if (REPO / name).is_dir()),
    REPO,
)

# Hypothesis mixes constants found in every imported local module into the examples it draws,
# so the same test would draw other inputs under `pytest` than under `autograder grade`, and a
# submission's own modules would steer its inputs. A grade may depend on neither. No public
# setting turns the mixing off, so its private hook is emptied; pyproject.toml pins the release
# that hook belongs to (tests/engine/test_hypothesis.py shows why).
if not hasattr(providers, "_get_local_constants"):
    raise ImportError(
        "this hypothesis has no _get_local_constants: review autograder/grading/plugin.py"
    )
providers._get_local_constants = lambda: providers.Constants()

settings.register_profile(
    "grading",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
    # No shrinking or explaining: a failing example is reported as found, quickly, and its
    # report carries no source paths.
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
settings.load_profile("grading")


def pytest_addoption(parser):
    group = parser.getgroup("autograder")
    group.addoption(
        "--submission",
        default=str(DEFAULT_SUBMISSION),
        help="folder holding transformer_hw/ to grade (default: solutions/, in a student "
        "handout assignments/)",
    )
    group.addoption(
        "--device",
        default="cpu",
        help="cpu, cuda or auto (cuda when available); default cpu",
    )
    group.addoption(
        "--record-answers",
        metavar="FILE",
        help="write what the oracles return to FILE (the handout's stored expected values; "
        "`autograder release` runs this over the public tests)",
    )
    group.addoption(
        "--isolate",
        action="store_true",
        help="run the student code in the sandboxed worker, as `autograder grade` does",
    )
    group.addoption(
        "--call-timeout",
        type=float,
        metavar="SECONDS",
        help="with --isolate: seconds per call into student code (default: the sandbox's)",
    )
    group.addoption(
        "--hide",
        action="append",
        default=[],
        metavar="PATH",
        help="with --isolate: a path the student code must not see (repeatable)",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "points(n): points a graded test is worth")
    parts = ", ".join(map(str, PARTS))
    config.addinivalue_line(
        "markers", f"part(k): the SPEC.md part ({parts}) a graded test belongs to"
    )
    config.addinivalue_line("markers", "public: a graded test students see and run")
    config.addinivalue_line("markers", "hidden: a graded test only the grader runs")
    config.addinivalue_line(
        "markers",
        "uses(k, ...): later parts whose code a graded test also runs (autograder.facts.points)",
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def pytest_sessionstart(session):
    if session.config.getoption("--record-answers"):
        from tests.graded import answers

        session.config.stash[RECORDED] = {}
        answers.record(session.config.stash[RECORDED])


def pytest_sessionfinish(session):
    path = session.config.getoption("--record-answers")
    if path and RECORDED in session.config.stash:
        from tests.graded import answers

        answers.record(None)
        answers.save(session.config.stash[RECORDED], Path(path))


def grading_marks(item) -> tuple[int, int, str] | None:
    """(points, part, visibility) of a graded test, or None for the engine's own tests."""
    if graded_folder(Path(item.fspath)) is None:
        return None
    points, part = item.get_closest_marker("points"), item.get_closest_marker("part")
    visibility = [v for v in ("public", "hidden") if item.get_closest_marker(v)]
    if points is None or part is None or len(visibility) != 1:
        raise pytest.UsageError(
            f"{item.nodeid}: graded tests need points, part and one visibility"
        )
    if part.args[0] not in PARTS:
        raise pytest.UsageError(
            f"{item.nodeid}: part {part.args[0]} is not in autograder.facts.points.PARTS"
        )
    uses = item.get_closest_marker("uses")
    if uses is not None and (wrong := check_uses(part.args[0], uses.args)):
        raise pytest.UsageError(f"{item.nodeid}: {wrong}")
    return points.args[0], part.args[0], visibility[0]


def graded_folder(path: Path) -> Path | None:
    """The folder named ``graded`` that holds a test file directly, if one does."""
    folder = path.resolve().parent
    return folder if folder.name == "graded" else None


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        item.stash[MARKS] = grading_marks(item)
        if is_hypothesis_test(test := getattr(item, "obj", None)):
            _seed_once(test)
    totals = dict.fromkeys(PARTS, 0)
    graded = [marks for item in items if (marks := item.stash[MARKS])]
    for points, part, _ in graded:
        totals[part] += points
    # Only the full suite (hidden tests included, nothing deselected) must add up to the table;
    # a student handout carries the public tests alone.
    folders = {graded_folder(Path(i.fspath)) for i in items} - {None}
    whole_suite = {Path(i.fspath).name for i in items} >= {
        p.name for folder in folders for p in folder.glob("test_*.py")
    }
    has_hidden = any(visibility == "hidden" for *_, visibility in graded)
    selected = not config.option.keyword and not config.option.markexpr
    if graded and whole_suite and has_hidden and selected:
        wrong = {k: v for k, v in totals.items() if v != PARTS[k].points}
        if wrong:
            raise pytest.UsageError(
                f"test points per part {wrong} differ from autograder.facts.points"
            )
    # Every public test before every hidden one (the order within each kept): student code
    # sees the hidden tests' inputs in its process, and must not be able to carry them into
    # a public test's feedback, which the student reads before the hidden tests are shown.
    items.sort(key=lambda item: (item.stash[MARKS] or (0, 0, ""))[2] == "hidden")


def _seed_once(test) -> None:
    """Give a property test the seed ``derandomize`` would derive, once per collection.

    ``derandomize`` derives it from a digest of the test's source, read and tokenized again
    on every run of the test (and the database key once more): about 75 ms per
    submission in a grading process that runs the suite for submission after submission. The
    same seed, fixed up front, draws the very same examples.
    """
    if getattr(test, "_hypothesis_internal_use_seed", None) is None:
        digest = function_digest(test.hypothesis.inner_test)
        seed(int.from_bytes(digest, "big"))(test)
        test._hypothesis_internal_database_key = digest  # unused: no database


@pytest.fixture(scope="session")
def device(request) -> torch.device:
    name = request.config.getoption("--device")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("--device cuda, but torch sees no CUDA device")
    return torch.device(name)


@pytest.fixture(scope="session")
def hw(request, device):
    """The submission under test: the only way tests reach student code."""
    root = Path(request.config.getoption("--submission")).resolve()
    if not (root / PACKAGE).is_dir():
        raise pytest.UsageError(f"--submission {root}: no {PACKAGE}/ folder there")
    if request.config.getoption("--isolate"):
        from autograder.sandbox import IsolatedSubmission, limits_for

        option = request.config.getoption
        limits = limits_for(option("--call-timeout"), option("--hide"))
        submission = IsolatedSubmission(root, device, limits)
    else:
        submission = InProcessSubmission(root, device)
    with submission:
        gate = ForbiddenGate(submission)
        request.config.stash[GATE] = gate
        if DIAGNOSIS:  # the grader's side only (not in a handout)
            submission.journal = request.config.stash[JOURNAL] = _journal()
        yield submission
        gate.close(request.session)  # while the student's process still runs


class ForbiddenGate:
    """The one place forbidden calls cost points: a forbidden call gates every test of the part
    whose file made it (SPEC.md), and earns nothing on its own.

    Calls found by the static scan fail a part's tests before they run. A call made at run time
    (isolated runs) was refused where it was made (``autograder.sandbox.tripwire``), so its test failed
    already; its record gates the rest of the part as soon as it comes back, and at the end of
    the session every test of that part that had passed before is reported failed too. A record
    that never comes back gains nothing: the call computed nothing.
    """

    def __init__(self, hw):
        self.hw = hw
        with stages.timed("reading the rules", also=stages.children_cpu):
            self.static = scan_package(hw.root / PACKAGE)
        self.passed: set[str] = set()  # graded tests that passed so far
        # Each part's reasons, described once for the records known when they were made.
        self._described: tuple[int, dict[int, list[str]]] = (-1, {})

    def reasons(self, part: int) -> list[str]:
        """Why ``part`` is gated (empty when it is not)."""
        runtime = getattr(self.hw, "runtime_violations", list)()
        if self._described[0] != len(runtime):
            seen = {(v.file, v.line) for v in self.static}
            fresh = [v for v in runtime if (v.file, v.line) not in seen]
            self._described = (len(runtime), by_part([*self.static, *fresh]))
        return self._described[1].get(part, [])

    def check(self, part: int) -> None:
        if found := self.reasons(part):
            pytest.fail(GATED + "; ".join(found), pytrace=False)

    def close(self, session) -> None:
        """Fail the tests that passed in a part gated since."""
        for item in session.items:
            marks = item.stash.get(MARKS, None)
            if (
                marks
                and item.nodeid in self.passed
                and (found := self.reasons(marks[1]))
            ):
                message = GATED + "; ".join(found)
                call = pytest.CallInfo.from_call(
                    lambda message=message: pytest.fail(message, pytrace=False), "call"
                )
                report = item.ihook.pytest_runtest_makereport(item=item, call=call)
                item.ihook.pytest_runtest_logreport(report=report)


GATE = pytest.StashKey[ForbiddenGate]()
#: The journal of the graded test under way (``autograder.grading.diagnosis``), where it runs.
JOURNAL = pytest.StashKey[object]()
#: Diagnosis replays a failing test against the bug zoo: only where both ship (the handout and
#: the Gradescope zip hold neither the zoo nor, in the handout, the diagnosis).
DIAGNOSIS = (
    importlib.util.find_spec("autograder.grading.diagnosis") is not None
    and (Path(__file__).parents[1] / "sources" / "zoo" / "mutants.py").is_file()
)


def _journal():
    from autograder.grading.diagnosis import Journal

    return Journal()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A failing graded test names the known mistake whose behaviour matches, where the suite
    named none (``autograder.grading.diagnosis``)."""
    journal = item.config.stash.get(JOURNAL, None)
    marks = item.stash.get(MARKS, None)
    if journal is None or marks is None:
        return (yield)
    journal.entries = []
    try:
        return (yield)
    except (AssertionError, StudentError, pytest.fail.Exception) as exc:
        from autograder.grading.diagnosis import amended

        hw = item.config.stash[GATE].hw
        hidden = marks[2] == "hidden"
        uses = item.get_closest_marker("uses")
        with stages.timed("the diagnosis's replays"):
            better = amended(
                exc,
                journal,
                marks[1],
                hw.root,
                hw.device,
                hidden,
                tuple(uses.args) if uses else (),
                hw,
            )
        if better is exc:
            raise
        raise better from exc


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Note which graded tests passed, for ``ForbiddenGate.close``, and which parts failed,
    for the diagnosis of later parts (``autograder.grading.diagnosis.amended``)."""
    report = yield
    journal = item.config.stash.get(JOURNAL, None)
    marks = item.stash.get(MARKS, None)
    if journal is not None and marks is not None and report.failed:
        journal.failed(marks[1])
    gate = item.config.stash.get(GATE, None)
    if gate is not None and report.failed:
        gate.passed.discard(item.nodeid)
    elif gate is not None and call.when == "call" and report.passed:
        gate.passed.add(item.nodeid)
    return report


@pytest.fixture(autouse=True)
def _forbidden_calls_gate(request):
    """Every graded test: fail when its part is gated, before it runs and again after it
    (a call made at run time is only seen once it happens)."""
    marks = request.node.stash.get(MARKS, None)
    if marks is None:
        yield
        return
    request.getfixturevalue("hw")
    gate = request.config.stash[GATE]
    gate.check(marks[1])
    yield
    gate.check(marks[1])
