"""The assignment as an nbgrader course, and the notebook it shares with the student handout.

``notebook`` builds the notebook from its one source and ``course`` writes the course; both need
nothing beyond the standard library. ``preprocessors`` runs inside ``nbgrader autograde`` and
needs the ``nbgrader`` extra.
"""
