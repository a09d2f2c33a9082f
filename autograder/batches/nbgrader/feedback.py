"""The feedback page, readable offline and showing nothing of the grader's machine.

nbgrader's feedback page (``nbgrader generate_feedback``) typesets TeX with MathJax, which it
loads from a CDN: offline, a student would read raw TeX. ``MathAsImages``, one of nbgrader's
``GenerateFeedback.preprocessors``, replaces each formula of the markdown cells with an SVG
image drawn by matplotlib's mathtext, embedded in the page, its TeX kept as the image's alt
text. Code, inline or fenced, is left as it is.

The page also shows what the student's cells printed when they ran at ``nbgrader autograde``:
on the instructor's machine, so a traceback names its folders (the course, the student's
folder in it, the Python environment). ``HideMachinePaths`` keeps only each path's file name.
"""

from __future__ import annotations

import base64
import html
import io
import re

from nbconvert.preprocessors import Preprocessor
from nbgrader.converters import GenerateFeedback
from traitlets import Bool

#: Code spans and fenced blocks (kept), then display and inline formulas (drawn).
PIECES = re.compile(
    r"(?P<code>```.*?```|`[^`\n]*`)"
    r"|\$\$(?P<display>.+?)\$\$"
    r"|\$(?P<inline>[^$\n]+?)\$",
    re.DOTALL,
)


def formula_svg(tex: str) -> bytes:
    """One formula drawn by matplotlib's mathtext (TeX's math subset), as SVG."""
    from matplotlib import mathtext  # only when feedback is made: it takes a while

    out = io.BytesIO()
    mathtext.math_to_image(f"${tex}$", out, format="svg")
    return out.getvalue()


def formula_img(tex: str, display: bool) -> str:
    """An ``<img>`` holding the drawn formula; the TeX itself where mathtext cannot draw it."""
    try:
        svg = formula_svg(" ".join(tex.split()))
    except ValueError:  # TeX beyond mathtext's subset: shown as written
        return f"<code>{html.escape(tex)}</code>"
    source = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
    style = "display:block;margin:0.5em auto" if display else "vertical-align:middle"
    return f'<img src="{source}" alt="{html.escape(tex)}" style="{style}">'


def draw_formulas(markdown: str) -> str:
    """Markdown with each ``$...$`` and ``$$...$$`` formula replaced by its image."""

    def replace(match: re.Match) -> str:
        if match["code"]:
            return match["code"]
        if match["display"] is not None:
            return formula_img(match["display"], display=True)
        return formula_img(match["inline"], display=False)

    return PIECES.sub(replace, markdown)


class MathAsImages(Preprocessor):
    """Draw the formulas of every markdown cell (see the module's docstring)."""

    enabled = Bool(True, help="nbconvert's preprocessors are off unless enabled").tag(
        config=True
    )

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown" and "$" in cell.source:
            cell.source = draw_formulas(cell.source)
        return cell, resources


#: The folders of an absolute path (``/...`` or ``~/...``) after a line's start, a space, a
#: quote, a bracket or a terminal colour code (IPython colours its tracebacks); the file's name
#: after them is kept. A relative path (``transformer_hw/attention.py``) is not touched.
MACHINE_PATH = re.compile(
    r"(?P<lead>^|[\s\"'(\[=]|\x1b\[[0-9;]*m)(?P<folders>~?/(?:[^\s/\"'():\x1b]+/)+)",
    re.MULTILINE,
)


def without_paths(text: str) -> str:
    """``text`` with the folders of each absolute path left out."""
    return MACHINE_PATH.sub(lambda match: match["lead"], text)


class HideMachinePaths(Preprocessor):
    """Leave the grader's folders out of every output of the code cells (see the module's
    docstring): streams, errors and their tracebacks, plain text and HTML."""

    enabled = Bool(True, help="nbconvert's preprocessors are off unless enabled").tag(
        config=True
    )

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if "text" in output:
                output.text = without_paths(output.text)
            if "evalue" in output:
                output.evalue = without_paths(output.evalue)
            if "traceback" in output:
                output.traceback = [without_paths(line) for line in output.traceback]
            for kind in ("text/plain", "text/html"):
                if kind in output.get("data", {}):
                    output.data[kind] = without_paths(output.data[kind])
        return cell, resources


def feedback_preprocessors() -> list:
    """nbgrader's feedback steps, then ours."""
    steps = list(GenerateFeedback.class_traits()["preprocessors"].default())
    return [*steps, MathAsImages, HideMachinePaths]
