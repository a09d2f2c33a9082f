"""The graded suite's pytest plugin: options, grading markers, the ``hw`` fixture.

Every graded test (under ``tests/graded``) carries ``@pytest.mark.points(n)``,
``@pytest.mark.part(k)`` and exactly one of ``@pytest.mark.public`` / ``@pytest.mark.hidden``;
collection fails otherwise, and also when a part's test points do not add up to its entry in
``autograder.points.PARTS``. Tests reach student code only through ``hw`` (see
``autograder.protocol``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.conjecture import providers

from autograder.forbidden import by_part, scan_package
from autograder.points import PARTS
from autograder.protocol import PACKAGE, InProcessSubmission

REPO = Path(__file__).resolve().parent.parent
GRADED_DIR = Path(__file__).resolve().parent / "graded"
RECORDED = pytest.StashKey[dict]()
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
        "this hypothesis has no _get_local_constants: review tests/conftest.py"
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


def pytest_configure(config):
    config.addinivalue_line("markers", "points(n): points a graded test is worth")
    parts = ", ".join(map(str, PARTS))
    config.addinivalue_line(
        "markers", f"part(k): the SPEC.md part ({parts}) a graded test belongs to"
    )
    config.addinivalue_line("markers", "public: a graded test students see and run")
    config.addinivalue_line("markers", "hidden: a graded test only the grader runs")
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
    if GRADED_DIR not in Path(item.fspath).resolve().parents:
        return None
    points, part = item.get_closest_marker("points"), item.get_closest_marker("part")
    visibility = [v for v in ("public", "hidden") if item.get_closest_marker(v)]
    if points is None or part is None or len(visibility) != 1:
        raise pytest.UsageError(
            f"{item.nodeid}: graded tests need points, part and one visibility"
        )
    if part.args[0] not in PARTS:
        raise pytest.UsageError(
            f"{item.nodeid}: part {part.args[0]} is not in autograder.points.PARTS"
        )
    return points.args[0], part.args[0], visibility[0]


def pytest_collection_modifyitems(session, config, items):
    totals = dict.fromkeys(PARTS, 0)
    graded = [marks for item in items if (marks := grading_marks(item))]
    for points, part, _ in graded:
        totals[part] += points
    # Only the full suite (hidden tests included, nothing deselected) must add up to the table;
    # a student handout carries the public tests alone.
    whole_suite = {Path(i.fspath).name for i in items} >= {
        p.name for p in GRADED_DIR.glob("test_*.py")
    }
    has_hidden = any(visibility == "hidden" for *_, visibility in graded)
    selected = not config.option.keyword and not config.option.markexpr
    if graded and whole_suite and has_hidden and selected:
        wrong = {k: v for k, v in totals.items() if v != PARTS[k].points}
        if wrong:
            raise pytest.UsageError(
                f"test points per part {wrong} differ from autograder.points"
            )


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
        from autograder.sandbox import LIMITS_KEY, IsolatedSubmission

        limits = request.config.stash.get(LIMITS_KEY, None)
        submission = IsolatedSubmission(root, device, limits)
    else:
        submission = InProcessSubmission(root, device)
    with submission:
        yield submission


@pytest.fixture(scope="session")
def static_violations(hw):
    """Forbidden calls the static scan finds in the submission's source."""
    return scan_package(hw.root / PACKAGE)


def forbidden_calls(hw, static) -> dict[int, list[str]]:
    """Forbidden calls by part: the static scan, plus (isolated runs) those seen at run time."""
    seen = {(v.file, v.line) for v in static}
    runtime = getattr(hw, "runtime_violations", list)()
    return by_part([*static, *(v for v in runtime if (v.file, v.line) not in seen)])


@pytest.fixture(autouse=True)
def _forbidden_calls_gate(request):
    """A forbidden call in a part's files fails every test of that part, naming the call.

    Checked again after the test: a call made at run time is only seen once it happens.
    """
    marks = grading_marks(request.node)
    if marks is None:
        yield
        return
    hw, static = (
        request.getfixturevalue("hw"),
        request.getfixturevalue("static_violations"),
    )
    _fail_on_forbidden(forbidden_calls(hw, static).get(marks[1]))
    yield
    _fail_on_forbidden(forbidden_calls(hw, static).get(marks[1]))


def _fail_on_forbidden(found: list[str] | None) -> None:
    if found:
        pytest.fail("forbidden call: " + "; ".join(found), pytrace=False)
