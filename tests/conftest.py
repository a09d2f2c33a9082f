"""The graded suite's folder. The rules that grade it (markers, points per part, the ``hw``
fixture, the forbidden-call gate, public tests before hidden ones) are the engine's own
pytest plugin, ``autograder.grading.plugin``: nothing here decides a grade."""

pytest_plugins = ["autograder.grading.plugin"]
