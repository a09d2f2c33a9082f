"""The autograder zip for Gradescope: ``setup.sh``, ``run_autograder``, the locks, the grader.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once to build the image,
then ``run_autograder`` per submission with the student's upload in ``/autograder/submission``;
it reads ``/autograder/results/results.json``. Both scripts live in ``gradescope/`` and take
``AUTOGRADER_ROOT`` instead of ``/autograder``, so the whole flow runs in any folder. The zip
carries no reference solution (grading compares against the graded suite's independent
oracles), only the stubs, for the smoke grade at the end of ``setup.sh``.

``python -m autograder.outputs.gradescope RESULTS`` checks the structure of a ``results.json`` (the
smoke grade's) and says which protections are in force.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = (
    "pyproject.toml",
    "README.md",
    "autograder",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/graded",
    "data",
    "assignments",
    "gradescope",
)
#: The bug zoo quotes reference code; the engine's own tests are no use to Gradescope. The
#: zoo's folders stay, empty: the sandbox's boundary mounts over it.
EXCLUDED = ("autograder/sources/zoo/", "autograder/batches/zoo/")
SCRIPTS = ("gradescope/setup.sh", "gradescope/run_autograder")
VISIBILITY_LINE = re.compile(r"^HIDDEN_VISIBILITY=\S+", re.MULTILINE)


def build_gradescope(
    zip_path: Path, repo: Path = REPO, hidden_visibility: str = "after_due_date"
) -> Path:
    """Write the Gradescope autograder zip (reproducible: sorted names, fixed timestamps)."""
    files: dict[str, tuple[bytes, int]] = {}
    for name in SOURCES:
        path = repo / name
        members = [path] if path.is_file() else sorted(path.rglob("*"))
        for member in members:
            name = member.relative_to(repo).as_posix()
            if (
                member.is_file()
                and "__pycache__" not in member.parts
                and not name.startswith(EXCLUDED)
            ):
                mode = 0o755 if name in SCRIPTS or name.endswith(".sh") else 0o644
                files[name] = (member.read_bytes(), mode)
    run = files["gradescope/run_autograder"][0].decode()
    run = VISIBILITY_LINE.sub(f"HIDDEN_VISIBILITY={hidden_visibility}", run, count=1)
    for script, text in (
        ("setup.sh", files["gradescope/setup.sh"][0].decode()),
        ("run_autograder", run),
    ):
        files[script] = (text.encode(), 0o755)  # Gradescope wants both at the top
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    files.update({folder: (b"", 0o40755) for folder in EXCLUDED})
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in sorted(files.items()):
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            archive.writestr(info, data, zipfile.ZIP_DEFLATED)
    return zip_path


TEST_FIELDS = {"name", "number", "score", "max_score", "status", "output", "visibility"}


def results_problems(results: dict) -> list[str]:
    """What is wrong with the structure of a ``results.json`` (empty when nothing is)."""
    problems = [
        f"no {key!r}"
        for key in ("score", "max_score", "output", "tests")
        if key not in results
    ]
    tests = results.get("tests") or []
    if not tests:
        problems.append("no tests were run")
    for test in tests:
        if set(test) != TEST_FIELDS:
            problems.append(f"test {test.get('name')!r} has fields {sorted(test)}")
            break
    if results.get("extra_data", {}).get("grader_failed"):
        problems.append("the grader failed: " + results.get("output", ""))
    if tests and results.get("score") != sum(t.get("score", 0) for t in tests):
        problems.append("the score is not the sum of the tests' scores")
    return problems


def main(argv: list[str]) -> int:
    from autograder import sandbox
    from autograder.facts import safe_text

    results = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    problems = results_problems(results)
    for problem in problems:
        print(f"smoke grade: {safe_text.plain(problem)}", file=sys.stderr)
    if problems:
        return 1
    print(f"smoke grade: {len(results['tests'])} tests, results.json well formed")
    print("protections in force:")
    for protection in sandbox.protections():
        print(f"  - {protection}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
