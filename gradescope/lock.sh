#!/usr/bin/env bash
# Regenerates the lock files setup.sh installs from, one per Python version of Gradescope's
# Ubuntu images (3.10: 22.04, 3.12: 24.04) and 3.11 (this repository's own machines). Needs uv
# (`pip install uv`) and the package index; commit the results.
set -euo pipefail
cd "$(dirname "$0")"
for version in 3.10 3.11 3.12; do
    uv pip compile requirements.in --python-version "$version" --python-platform x86_64-manylinux_2_28 \
        --generate-hashes --no-header --quiet --output-file "requirements-py$version.txt"
done
