"""The assignment as an nbgrader course: the course builder and our autograde preprocessors.

``course`` writes the course (it needs nothing beyond the standard library); ``preprocessors``
runs inside ``nbgrader autograde`` and needs the ``nbgrader`` extra.
"""
