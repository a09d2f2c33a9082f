"""A fourth held-out set of student solutions, written by a hand that saw only the mistakes'
descriptions (as the grader words them), ``docs/SPEC.md``, the reference solution and Alice's
correct solution in another style; never the grader's mistake catalogue, its diagnosis code, the
graded tests or the other held-out sets.

It is a measure only: never tune the grader on it (nor read its cases while changing diagnosis).
Each case is built and checked like those of ``mistakes.py`` (see its docstring for the kinds
and fields); check that every case behaves as declared, printing pass and fail only:

    .venv/bin/python -m tests.engine.heldout.check_heldout --set fourth --blind [NAME ...]
"""

FOURTH = ()
