"""The errors SPEC.md names: a ``ValueError`` whose message names the argument.

SPEC.md: "Bad input gets a ValueError whose message names the argument"; when several
arguments are involved, naming any of them is enough. A test first makes a valid call, so a
stub's ``NotImplementedError`` never passes an error test.
"""

from __future__ import annotations

import re

from autograder.facts.protocol import expect_student_error
from tests.graded.compare import LIKELY


def names_argument(message: str, *names: str) -> bool:
    """The message mentions one of ``names`` as a word (long names may start a word: mask-ed)."""
    for name in names:
        tail = r"(?![A-Za-z0-9_])" if len(name) <= 2 else ""
        if re.search(
            rf"(?<![A-Za-z0-9_]){re.escape(name)}{tail}", message, re.IGNORECASE
        ):
            return True
    return False


def assert_names(box, *names: str) -> None:
    """The ``StudentError`` caught by ``expect_student_error`` names one of ``names``."""
    message = box["error"].message
    assert names_argument(message, *names), (
        f"the ValueError message should name the argument ({' or '.join(names)}); "
        f"it says: {message!r}"
    )


def raises_value_error(what: str, names, fn, *args, hint: str = "", **kwargs) -> str:
    """``fn(*args, **kwargs)`` raises ``ValueError`` naming one of ``names``; its message.

    ``hint`` is the likely mistake when it raises nothing or something else.
    """
    try:
        with expect_student_error(ValueError) as box:
            fn(*args, **kwargs)
    except AssertionError as err:
        named = f"\n{LIKELY} {hint}" if hint else ""
        raise AssertionError(f"{what}: {err}{named}") from None
    try:
        assert_names(box, *names)
    except AssertionError as err:
        raise AssertionError(f"{what}: {err}") from None
    return box["error"].message
