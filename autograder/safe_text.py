"""Student-controlled text made inert for the place where it lands.

File and folder names, exception messages and printed output come from the student, and they
reach the gradebook, the feedback, ``results.json``, the class report and the instructor's
terminal. Each place has its own way of turning text into action: a CSV cell that begins with
``=`` is a spreadsheet formula, a new line that begins with ``#`` is a Markdown heading (a fake
``# Score: 100 of 100``), an ESC byte is a terminal command (clear the screen, retitle the
window), ``<`` is HTML. Every writer passes such text through one function here, chosen for its
destination, so an honest name reads as it is and a hostile one reads as what it is.
"""

from __future__ import annotations

import html
import re

#: Characters a reader acts on rather than shows: the C0 and C1 controls and DEL (ESC starts a
#: terminal command, CR overwrites a line), the line and paragraph separators some viewers
#: break lines at, and the bidirectional controls that make text read in another order than it
#: runs.
_CONTROLS = [
    *range(0x20),
    *range(0x7F, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
]
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(code: int) -> str:
    char = chr(code)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_ONE_LINE = {code: _escape(code) for code in _CONTROLS}
_MULTI_LINE = {
    code: shown for code, shown in _ONE_LINE.items() if chr(code) not in "\n\t"
}


def one_line(text: str) -> str:
    """``text`` on one line, every control character (newline included) shown as its escape
    (``\\n``, ``\\x1b``): a name is one line wherever it is printed."""
    return text.translate(_ONE_LINE)


def plain(text: str) -> str:
    """A multi-line block for the terminal or a plain-text file: lines and tabs kept, every
    other control character shown as its escape, never sent."""
    return text.translate(_MULTI_LINE)


#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A gradebook cell that a spreadsheet shows as text: one line, and a cell that would
    start a formula gets a leading single quote (OWASP's advice). Numbers pass unchanged."""
    if not isinstance(value, str):
        return value
    cell = one_line(value)
    return "'" + cell if value.startswith(_FORMULA_STARTS) else cell


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def md_code_span(text: str) -> str:
    """``text`` as one Markdown code span: on one line, and delimited by more backticks than
    any run inside it, so nothing in it is read as Markdown or ends the span early."""
    body = one_line(text)
    ticks = "`" * (_longest_backtick_run(body) + 1)
    # A space on each side keeps a backtick at either end out of the delimiter; Markdown
    # strips one space from each side of a span that has both.
    if body.startswith(("`", " ")) or body.endswith(("`", " ")):
        body = f" {body} "
    return f"{ticks}{body}{ticks}"


def md_fence(text: str) -> str:
    """``text`` as a fenced Markdown code block: whatever its lines say (a ``# Score``
    heading, a fence of its own), they are shown as they are; the fence is longer than any
    backtick run inside, so only the closing fence closes it. The block is indented by two
    spaces, which Markdown takes off the fence and its lines alike: read as plain text too, no
    line of the student's starts a line."""
    body = plain(text)
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    lines = [fence, *body.split("\n"), fence]
    return "\n".join(f"  {line}" if line else "" for line in lines)


def html_text(text: str) -> str:
    """Text for an HTML page: markup escaped, control characters shown."""
    return html.escape(plain(text))


def terminal_cell(text: str) -> str:
    """One line for a rich table or progress bar: control characters shown and rich markup
    escaped, so ``bob[2]`` or ``E[x^2]`` prints as written."""
    from rich.markup import escape

    return escape(one_line(text))
