#!/usr/bin/env bash
# Builds the Gradescope image (runs once): system packages, a virtual environment with the
# grader's dependencies at the exact versions (and hashes) of the lock for this Python, torch
# pinned from the CPU wheel index, then a smoke grade of the stubs.
#
# Overrides, to run this away from Gradescope (how it is tested; see README):
#   AUTOGRADER_ROOT=DIR            instead of /autograder
#   AUTOGRADER_APT=0               skip apt-get (python3-venv, pip and bubblewrap are there)
#   AUTOGRADER_TORCH_WHEELS=DIR    torch from a folder of wheels instead of the CPU index
#   AUTOGRADER_SMOKE_ARGS="-k X"   a subset of the suite for the smoke grade
set -euo pipefail
ROOT="$(cd "${AUTOGRADER_ROOT:-/autograder}" && pwd)"  # absolute: the sandbox binds real paths
SOURCE="$ROOT/source"
TORCH_VERSION=2.13.0
TORCH_INDEX=https://download.pytorch.org/whl/cpu

if [ "${AUTOGRADER_APT:-1}" != 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # bubblewrap: the sandbox's boundary around student code
    apt-get install -y --no-install-recommends python3 python3-venv python3-pip bubblewrap
fi

version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
lock="$SOURCE/gradescope/requirements-py$version.txt"
if [ ! -f "$lock" ]; then
    echo "setup.sh: no lock file for Python $version; there are:" "$SOURCE"/gradescope/requirements-py*.txt >&2
    exit 1
fi
python3 -m venv "$ROOT/venv"
pip=("$ROOT/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --no-deps --require-hashes --only-binary :all: -r "$lock"
if [ -n "${AUTOGRADER_TORCH_WHEELS:-}" ]; then
    "${pip[@]}" install --no-deps --no-index --find-links "$AUTOGRADER_TORCH_WHEELS" "torch==$TORCH_VERSION"
else
    "${pip[@]}" install --no-deps --index-url "$TORCH_INDEX" "torch==$TORCH_VERSION"
fi
"${pip[@]}" check  # the lock covers everything torch and the grader need

# Smoke grade: the stubs must grade (to zero) into a well-formed results.json.
smoke=$(mktemp -d)
cd "$SOURCE"
# shellcheck disable=SC2086  # the smoke arguments are words
"$ROOT/venv/bin/python" -m autograder grade assignments --single stubs --out "$smoke/out" \
    --results "$smoke/results.json" ${AUTOGRADER_SMOKE_ARGS:-}
"$ROOT/venv/bin/python" -m autograder.outputs.gradescope "$smoke/results.json"
rm -rf "$smoke"
