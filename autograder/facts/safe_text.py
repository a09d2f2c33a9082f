"""Student-controlled text made inert for the place where it lands.

File and folder names, exception messages and printed output come from the student, and they
reach the gradebook, the feedback, ``results.json``, the class report and the instructor's
terminal. Each place has its own way of turning text into action: a CSV cell that begins with
``=`` is a spreadsheet formula, a new line that begins with ``#`` is a Markdown heading (a fake
``# Score: 100 of 100``), an ESC byte is a terminal command (clear the screen, retitle the
window), ``<`` is HTML. Every writer passes such text through one function here, chosen for its
destination, so an honest name reads as it is and a hostile one reads as what it is.

The grader's own sentences (a submission's problems, say) are Markdown in which every piece of
the student's text sits in a code span; ``md_inline``, ``md_html`` and ``md_plain`` turn such a
sentence into the Markdown, HTML or plain text of its destination. What the student controls is
also capped: ``capped`` cuts one name, ``name_list`` shows the first ``MAX_NAMES`` of many, and a
gradebook cell never exceeds ``MAX_CELL`` (a spreadsheet cell holds 32,767 characters), so a
thousand file names make one line of feedback, not a megabyte.
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


#: The most characters of one name the student chose (a file, a class, a folder) shown.
MAX_NAME = 100
#: The most names of one list shown; the rest are counted ("and 12 more").
MAX_NAMES = 20
#: The most characters (UTF-16 units, as spreadsheets count) of one gradebook cell.
MAX_CELL = 32_000


def capped(text: str, limit: int = MAX_NAME) -> str:
    """``text`` on one line (``one_line``) and cut to ``limit`` characters, an ellipsis
    marking the cut."""
    line = one_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def first_of(texts, count: int) -> str:
    """The first ``count`` of ``texts``, comma-separated, then how many more ("and 12 more")."""
    texts = list(texts)
    more = len(texts) - count
    return ", ".join(texts[:count]) + (f" and {more} more" if more > 0 else "")


def name_list(names, count: int = MAX_NAMES, length: int = MAX_NAME) -> str:
    """``names`` as comma-separated Markdown code spans, each cut to ``length``, the first
    ``count`` of them and then how many more."""
    names = list(names)
    spans = [md_code_span(capped(n, length)) for n in names[:count]]
    return first_of(spans + names[count:], count)


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A gradebook cell that a spreadsheet shows as text: one line, and a cell that would
    start a formula gets a leading single quote (OWASP's advice). Numbers pass unchanged."""
    if not isinstance(value, str):
        return value
    cell = one_line(value)
    cell = "'" + cell if value.startswith(_FORMULA_STARTS) else cell
    if _utf16_units(cell) <= MAX_CELL:
        return cell
    cut = cell[: MAX_CELL - 1]
    if _utf16_units(cut) > MAX_CELL - 1:  # characters beyond the BMP count twice
        cut = cell[: (MAX_CELL - 1) // 2]
    return cut + "\u2026"


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


_TICKS = re.compile(r"`+")


def _pieces(text: str) -> list[tuple[bool, str]]:
    """``(is_code, text)`` of each code span of the Markdown ``text`` and of the text between
    them, as CommonMark reads them: a run of backticks opens a span that the next run of the
    same length closes (one space on each side of its text is taken off); a run that nothing
    closes is text."""
    pieces: list[tuple[bool, str]] = []
    start = search = 0
    while opening := _TICKS.search(text, search):
        closing = next(
            (
                m
                for m in _TICKS.finditer(text, opening.end())
                if len(m[0]) == len(opening[0])
            ),
            None,
        )
        if closing is None:
            search = opening.end()
            continue
        body = text[opening.end() : closing.start()]
        if len(body) > 2 and body[0] == body[-1] == " " and body.strip(" "):
            body = body[1:-1]
        pieces += [(False, text[start : opening.start()]), (True, body)]
        start = search = closing.end()
    pieces.append((False, text[start:]))
    return [(code, piece) for code, piece in pieces if piece]


#: What starts Markdown's links, images, HTML, entities and emphasis, and a backslash.
_INLINE_ACTIVE = re.compile(r"[\\`*\[\]<>!&~|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
#: What makes a line a heading, a list item, a quote or a rule where it starts one.
_LINE_START = re.compile(r"^(\d*)([#=+\-.)])")


def md_inline(text: str) -> str:
    """The grader's sentence ``text`` (the student's text in code spans) as one line of
    Markdown that shows exactly it: each code span written again as ``md_code_span`` writes
    one, and every character outside them that Markdown would act on (a link, an image, HTML,
    emphasis, a heading where the line starts) escaped with a backslash."""
    out = []
    for code, piece in _pieces(one_line(text)):
        if code:
            out.append(md_code_span(piece))
        else:
            out.append(_INLINE_ACTIVE.sub(lambda m: "\\" + m[0], piece))
    line = "".join(out)
    return _LINE_START.sub(r"\1\\\2", line, count=1)


def md_plain(text: str) -> str:
    """The grader's sentence ``text`` as plain text on one line: code spans give their text
    without backticks (a gradebook cell, the terminal)."""
    return one_line("".join(piece for _, piece in _pieces(text)))


def md_html(text: str) -> str:
    """The grader's sentence ``text`` as HTML: code spans as ``<code>``, all text escaped."""
    return "".join(
        f"<code>{html_text(piece)}</code>" if code else html_text(piece)
        for code, piece in _pieces(one_line(text))
    )


def html_text(text: str) -> str:
    """Text for an HTML page: markup escaped, control characters shown."""
    return html.escape(plain(text))


def terminal_cell(text: str) -> str:
    """One line for a rich table or progress bar: control characters shown and rich markup
    escaped, so ``bob[2]`` or ``E[x^2]`` prints as written."""
    from rich.markup import escape

    return escape(one_line(text))
