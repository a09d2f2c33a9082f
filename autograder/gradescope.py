"""The autograder zip for Gradescope: ``setup.sh``, ``run_autograder`` and the grader itself.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once to build the image,
then ``run_autograder`` per submission with the student's files in ``/autograder/submission``;
it reads ``/autograder/results/results.json``. The zip carries no reference solution: grading
compares against the independent oracles of the graded suite.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = (
    "pyproject.toml",
    "README.md",
    "autograder",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/graded",
    "data",
)
#: The bug zoo quotes reference code; the engine's own tests are no use to Gradescope.
EXCLUDED = ("autograder/zoo/",)

SETUP_SH = """\
#!/usr/bin/env bash
# Runs once when Gradescope builds the image.
set -euo pipefail
cd /autograder/source
python3 -m pip install --upgrade pip
python3 -m pip install --index-url https://download.pytorch.org/whl/cpu "torch>=2.5"
python3 -m pip install .
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Runs per submission: grade it in the sandbox, hand Gradescope its results.json.
set -uo pipefail
cd /autograder/source
rm -rf /autograder/work
if python3 -m autograder grade /autograder/submission --out /autograder/work --device auto; then
    cp /autograder/work/submission/results.json /autograder/results/results.json
else
    cat > /autograder/results/results.json <<'JSON'
{"score": 0, "output": "The autograder could not grade this submission; please tell the course staff.", "tests": []}
JSON
fi
"""


def build_gradescope(zip_path: Path, repo: Path = REPO) -> Path:
    """Write the Gradescope autograder zip (reproducible: sorted names, fixed timestamps)."""
    files: dict[str, tuple[bytes, int]] = {
        "setup.sh": (SETUP_SH.encode(), 0o755),
        "run_autograder": (RUN_AUTOGRADER.encode(), 0o755),
    }
    for name in SOURCES:
        path = repo / name
        members = [path] if path.is_file() else sorted(path.rglob("*"))
        for member in members:
            name = str(member.relative_to(repo))
            if (
                member.is_file()
                and "__pycache__" not in member.parts
                and not name.startswith(EXCLUDED)
            ):
                files[name] = (member.read_bytes(), 0o644)
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, (data, mode) in sorted(files.items()):
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.external_attr = mode << 16
            archive.writestr(info, data, zipfile.ZIP_DEFLATED)
    return zip_path
