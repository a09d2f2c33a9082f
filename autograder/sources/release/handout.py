"""The student handout: the stubs, the public tests with the answers they need as stored
values, the contract, the notebook and a README made from the tables that grade; built only
when the leak check finds nothing in it."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import os
import string
import subprocess
import sys
import zipfile
from pathlib import Path

import autograder.sources.notebook as notebook_source
from autograder.facts import rules
from autograder.facts.points import PACKAGE, PARTS, TOTAL_POINTS
from autograder.sources.release.leaks import (
    ORACLES,
    find_leaks,
    refused_test_code,
    strip_hidden_tests,
)
from autograder.sources.release.stubs import REPO, ReleaseError, write_assignments

#: What the handout carries besides the stubs and ``tests/graded`` (its test files stripped of
#: hidden tests, its answer key replaced by the values it gives): the machinery the public tests
#: need to run in-process (``autograder check``). The sandbox, the reports and the bug zoo stay
#: home, and so does every command but ``check`` (the CLI offers what ships).
HANDOUT_FILES = (
    "pyproject.toml",
    "autograder/__init__.py",
    "autograder/__main__.py",
    *(f"autograder/{row}/__init__.py" for row in ("facts", "sources", "sandbox")),
    *(f"autograder/{row}/__init__.py" for row in ("grading", "commands")),
    "autograder/commands/cli.py",
    "autograder/commands/check.py",
    "autograder/sources/runner.py",
    "autograder/sandbox/executor.py",
    "autograder/sources/reader.py",
    "autograder/facts/rules.py",
    "autograder/grading/plugin.py",
    "autograder/facts/points.py",
    "autograder/facts/protocol.py",
    "autograder/facts/safe_text.py",
    "autograder/facts/stages.py",
    "autograder/sandbox/second_device.py",
    "tests/__init__.py",
    "tests/conftest.py",
)
HANDOUT_DIRS = ("data",)
#: The student contract. The handout carries it at its top level as ``SPEC.md``, the name the
#: feedback cites. It is the students' alone: notes for test writers are in docs/TESTING.md.
SPEC = "docs/SPEC.md"
README_TEMPLATE = Path(__file__).with_name("handout_readme.md")
NOTEBOOK = "transformer_hw.ipynb"
#: PyTorch's index of CPU builds (PyPI's Linux wheels are the CUDA build).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The public test that holds each of the README's worked examples.
EXAMPLE_TESTS = {
    "test_412_7": "test_scaled_dot_product_attention_example_412_7",
    "test_16_3": "test_scaled_dot_product_attention_example_16_3",
    "test_q0": "test_scaled_dot_product_attention_example_q0",
    "test_zeroed_branch": "test_pre_norm_block_zeroed_branch",
}


def build_handout(out: Path, repo: Path = REPO) -> Path:
    """Write the student handout to ``out`` and ``out.zip``; refuse if anything leaks."""
    if out.exists() and any(out.iterdir()):
        raise ReleaseError(f"{out} exists and is not empty")
    refused = refused_test_code(repo)
    if refused:
        raise ReleaseError("the handout would leak: " + "; ".join(refused))
    write_assignments(out / "assignments" / PACKAGE, repo / "solutions" / PACKAGE)
    for name in HANDOUT_FILES:
        _copy(repo / name, out / name)
    for folder in HANDOUT_DIRS:
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file():
                _copy(path, out / path.relative_to(repo))
    _write(out / "SPEC.md", student_spec(repo / SPEC))
    public = write_public_tests(out, repo)
    _refuse_leaks(out, repo)  # before the slow part
    record_answers(out / "tests" / "graded" / "answers.pt", repo)
    write_notebook(out / NOTEBOOK)
    _write(out / "README.md", student_readme(public, out / "tests" / "graded"))
    _refuse_leaks(out, repo)
    return _zip_folder(out, out.with_suffix(".zip"))


def write_public_tests(out: Path, repo: Path = REPO) -> set[str]:
    """Write ``tests/graded`` to ``out`` as students get it: without the hidden tests and the
    answer key (the stored answers come from ``record_answers``); the public tests' names."""
    public: set[str] = set()
    for path in sorted((repo / "tests" / "graded").glob("*.py")):
        if path.relative_to(repo).as_posix() == ORACLES:
            continue
        text = path.read_text(encoding="utf-8")
        if path.name.startswith("test_"):
            text = strip_hidden_tests(text, path.name)
            public |= _test_names(text)
        _write(out / "tests" / "graded" / path.name, text)
    return public


def _refuse_leaks(out: Path, repo: Path) -> None:
    leaks = find_leaks(out, repo / "solutions" / PACKAGE, repo / ORACLES)
    if leaks:
        raise ReleaseError("the handout would leak: " + "; ".join(leaks))


def record_answers(path: Path, repo: Path = REPO) -> None:
    """Run the public tests against the reference and store what the oracles gave them.

    Recording runs every public test and every known mistake a failure may name (about ten
    seconds), so the values are kept in ``build/answers/`` under a digest of all they depend
    on (the graded suite, the reference, the engine, torch's and hypothesis's versions): a
    release, a course or a test that needs them again with nothing changed copies them.
    Processes that need them at once record them once: the others wait for the first."""
    import fcntl  # Unix: the course's machines; a handout never records

    cached = _answers_cache(repo)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with open(cached.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        if cached.is_file():
            path.write_bytes(cached.read_bytes())
            return
        _record(path, repo)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}")
        partial.write_bytes(path.read_bytes())
        os.replace(partial, cached)  # whole or not at all


def _answers_cache(repo: Path) -> Path:
    digest = hashlib.sha256()
    versions = [importlib.metadata.version(n) for n in ("torch", "hypothesis")]
    digest.update(repr(versions).encode())
    sources = [repo / "tests" / "graded", repo / "solutions", repo / "autograder"]
    for path in sorted(p for folder in sources for p in folder.rglob("*.py")):
        digest.update(f"{path.relative_to(repo).as_posix()}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return repo / "build" / "answers" / f"{digest.hexdigest()[:32]}.pt"


def _record(path: Path, repo: Path) -> None:
    command = [sys.executable, "-m", "pytest", "tests/graded", "-m", "public", "-q"]
    command += ["-p", "no:cacheprovider", "--submission", str(repo / "solutions")]
    # The tests run in the repository: a handout folder given relative to here is made absolute.
    command += ["--record-answers", str(path.resolve())]
    done = subprocess.run(
        command, cwd=repo, capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not path.is_file():
        raise ReleaseError(
            "the public tests fail against the reference, so no expected values were "
            "stored:\n" + done.stdout[-3000:] + done.stderr[-2000:]
        )


def write_notebook(path: Path) -> None:
    """The walk-through notebook, built from the one source it shares with the nbgrader
    course."""
    notebook_source.write_notebook(path, "handout")


def student_spec(path: Path) -> str:
    """The student contract as the handout ships it: the repository's, as it is."""
    return path.read_text(encoding="utf-8")


def student_readme(public_tests: set[str], shipped_tests: Path) -> str:
    """The handout's README: the template, with the points, the forbidden calls and the tests
    that hold the worked examples filled in from the sources they live in."""
    missing = sorted(set(EXAMPLE_TESTS.values()) - public_tests)
    if missing:
        raise ReleaseError(f"the README names tests that are not public: {missing}")
    public = _public_points(shipped_tests)
    rows = []
    for part in PARTS.values():
        files = ", ".join(f"`{f}`" for f in part.files)
        got = public.get(part.number, 0)
        rows.append(
            f"| {part.number} | {part.title} | {files} | {got} | "
            f"{part.points - got} | {part.points} |"
        )
    public_total = sum(public.values())
    groups: dict[frozenset[str], list[str]] = {}
    for name, calls in rules.RULES.items():
        groups.setdefault(calls, []).append(f"`{name}`")
    forbidden_lines = [
        f"- {', '.join(files)}: "
        + ", ".join(f"`{call}`" for call in sorted(calls) if not call.startswith("_"))
        for calls, files in groups.items()
    ]
    intro = (
        f"The assignment is worth {TOTAL_POINTS} points in {len(PARTS)} parts. Public tests "
        "ship with this handout; hidden tests run when your submission is graded."
    )
    # "2.13.0+cpu": the build's label is the index's business, not the version's
    versions = {
        name: importlib.metadata.version(name).split("+")[0]
        for name in ("torch", "hypothesis")
    }
    pins = (
        f"pip install torch=={versions['torch']} --index-url {TORCH_CPU_INDEX}`, "
        f"then `pip install hypothesis=={versions['hypothesis']}"
    )
    return string.Template(README_TEMPLATE.read_text(encoding="utf-8")).substitute(
        parts="\n".join(
            f"{part.number}. {part.title} ({', '.join(f'`{f}`' for f in part.files)})"
            for part in PARTS.values()
        ),
        builds_on=_builds_on(),
        versions=" and ".join(
            f"{name} {version}" for name, version in versions.items()
        ),
        pins=pins,
        points_intro=intro,
        points_table="\n".join(rows),
        public_total=public_total,
        hidden_total=TOTAL_POINTS - public_total,
        forbidden="\n".join(forbidden_lines),
        rules="\n".join(f"- {rule}" for rule in rules.student_rules()),
        notebook=f"The notebook `{NOTEBOOK}` walks through the parts in order; its check "
        "cells run `autograder check --part N`.",
        **EXAMPLE_TESTS,
    )


def _builds_on() -> str:
    """Which parts each part's tests run, from ``PARTS``: "part 3 uses part 1; ..."."""
    uses = []
    for part in PARTS.values():
        if part.uses:
            named = [str(k) for k in part.uses]
            listed = (
                ", ".join(named[:-1]) + " and " + named[-1]
                if len(named) > 1
                else named[0]
            )
            uses.append(
                f"part {part.number} uses part{'s' * (len(named) > 1)} {listed}"
            )
    return "; ".join(uses) or "each stands alone"


def _public_points(folder: Path) -> dict[int, int]:
    """Part -> points of the public tests in ``folder`` (the shipped tests), from their own
    markers: a parametrized test earns its points once per case."""
    points: dict[int, int] = {}
    for path in folder.glob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_part = _marker_arg(tree.body, "part")
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            marks = [ast.unparse(d) for d in node.decorator_list]
            if "pytest.mark.public" in marks:
                part = _marker_arg([node], "part") or module_part
                cases = _cases(node, tree)
                points[part] = points.get(part, 0) + cases * _marker_arg(
                    [node], "points"
                )
    return points


def _cases(test: ast.FunctionDef, tree: ast.Module) -> int:
    """How many cases ``parametrize`` makes of a test (its values are written out: the leak
    check refuses any other)."""
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    cases = 1
    for decorator in test.decorator_list:
        if (
            isinstance(decorator, ast.Call)
            and ast.unparse(decorator.func) == "pytest.mark.parametrize"
        ):
            values = decorator.args[1] if len(decorator.args) > 1 else None
            values = next(
                (k.value for k in decorator.keywords if k.arg == "argvalues"), values
            )
            if isinstance(values, ast.Name):
                values = constants.get(values.id)
            if not isinstance(values, (ast.List, ast.Tuple)):
                raise ReleaseError(
                    f"{test.name}: parametrize's values are not written out, so its public "
                    "points cannot be counted"
                )
            cases *= len(values.elts)
    return cases


def _marker_arg(nodes, marker: str) -> int | None:
    """The argument of ``pytest.mark.<marker>(n)`` on these nodes (decorators or assignments)."""
    for node in nodes:
        calls = getattr(node, "decorator_list", []) or [getattr(node, "value", None)]
        for call in calls:
            if (
                isinstance(call, ast.Call)
                and ast.unparse(call.func) == f"pytest.mark.{marker}"
            ):
                return ast.literal_eval(call.args[0])
    return None


def _test_names(source: str) -> set[str]:
    return {
        node.name
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def _copy(src: Path, dst: Path) -> None:
    _write(dst, src.read_text(encoding="utf-8"))


def _write(dst: Path, text: str) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text, encoding="utf-8")


def _zip_folder(folder: Path, zip_path: Path) -> Path:
    """A reproducible zip (sorted names, fixed timestamps) of ``folder``."""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(
                str(path.relative_to(folder.parent)), (2020, 1, 1, 0, 0, 0)
            )
            info.external_attr = (path.stat().st_mode & 0o777) << 16
            archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return zip_path
