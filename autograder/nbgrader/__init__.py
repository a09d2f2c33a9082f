"""The assignment as an nbgrader course, and the notebook it shares with the student handout.

``notebook`` builds the notebook from its one source and ``course`` writes the course; both need
nothing beyond the standard library. ``preprocessors`` runs inside ``nbgrader autograde`` and
needs the ``nbgrader`` extra.
"""

from __future__ import annotations

from pathlib import Path

from autograder.nbgrader.notebook import write_notebook


def write_handout_notebook(path: Path) -> Path:
    """Write the student handout's notebook to ``path`` (the handout builder calls this)."""
    return write_notebook(path, "handout")
