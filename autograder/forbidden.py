"""Forbidden library calls (SPEC.md), found statically in a submission's source.

A use is an attribute access or imported name that reaches the library function, whether it is
called at once or bound to a name first. Names that resolve to the student's own package
(``attention.softmax(...)``, ``from transformer_hw.attention import softmax``) and attributes of
``self`` are the student's own code and never count; neither do comments and strings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from autograder.points import part_of_file
from autograder.protocol import PACKAGE

SOFTMAX = frozenset(
    {
        "softmax", "_softmax", "Softmax", "Softmax2d", "softmin", "Softmin",
        "log_softmax", "_log_softmax", "LogSoftmax", "logsumexp", "special_softmax",
        "special_log_softmax", "special_logsumexp", "_safe_softmax", "_masked_softmax",
    }
)  # fmt: skip
ATTENTION = frozenset(
    {
        "scaled_dot_product_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention", "_fused_sdp_choice", "MultiheadAttention",
        "multi_head_attention_forward", "_native_multi_head_attention", "flex_attention",
        "Transformer", "TransformerEncoder", "TransformerEncoderLayer", "TransformerDecoder",
        "TransformerDecoderLayer",
    }
)  # fmt: skip
NORMALIZATION = frozenset(
    {
        "layer_norm", "native_layer_norm", "LayerNorm", "rms_norm", "_fused_rms_norm",
        "RMSNorm", "group_norm", "native_group_norm", "GroupNorm", "batch_norm",
        "native_batch_norm", "BatchNorm1d", "instance_norm", "InstanceNorm1d",
        "local_response_norm",
    }
)  # fmt: skip

#: file -> names forbidden in it (SPEC.md: parts 1, 3, 6 forbid part 1's list; 5 adds
#: normalization; the char-LM may use a softmax for sampling and the loss, not the layers).
RULES: dict[str, frozenset[str]] = {
    "attention.py": SOFTMAX | ATTENTION,
    "heads.py": SOFTMAX | ATTENTION,
    "gqa.py": SOFTMAX | ATTENTION,
    "norm.py": NORMALIZATION,
    "block.py": NORMALIZATION | SOFTMAX | ATTENTION,
    "charlm.py": NORMALIZATION | ATTENTION,
}


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    call: str  # the expression as written, e.g. "torch.softmax"
    evasion: bool = False  # a construct that hides which function it reaches

    @property
    def part(self) -> int:
        return part_of_file(self.file)

    def describe(self) -> str:
        if self.evasion:
            return (
                f"{self.file}:{self.line} uses `{self.call}`, which hides which library "
                "function it reaches; in this part every library call must be written out "
                "by name (SPEC.md's forbidden calls)"
            )
        return (
            f"{self.file}:{self.line} uses `{self.call}`, a library function this part forbids "
            "(SPEC.md); write it yourself from tensor operations"
        )


def scan_source(filename: str, source: str) -> list[Violation]:
    """Violations in one file's source (a file that does not parse has none to report)."""
    forbidden = RULES.get(filename)
    if not forbidden:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    own_names = _own_package_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in forbidden:
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and (
                root.id in own_names or root.id == "self"
            ):
                continue
            found.append(Violation(filename, node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and not _is_own(node):
            for alias in node.names:
                if alias.name in forbidden:
                    found.append(
                        Violation(filename, node.lineno, f"{node.module}.{alias.name}")
                    )
        elif isinstance(node, ast.Call) and _is_getattr_of_forbidden(node, forbidden):
            found.append(Violation(filename, node.lineno, ast.unparse(node)))
        if _is_evasion(node):
            found.append(Violation(filename, node.lineno, _snippet(node), evasion=True))
    return sorted(set(found), key=lambda v: (v.line, v.call))


#: Ways to reach a library function without naming it: internals that bypass torch's public
#: names, the wrapped originals, namespaces read as dicts, and code built from strings.
EVASION_ATTRIBUTES = frozenset(
    {"_C", "_VariableFunctions", "_VariableFunctionsClass", "__wrapped__", "__dict__",
     "__getattribute__", "_ops"}
)  # fmt: skip
EVASION_BUILTINS = frozenset({"eval", "exec", "compile", "vars", "__import__"})
EVASION_HELPERS = frozenset({"attrgetter", "methodcaller", "import_module"})
EVASION_MODULES = frozenset(
    {"importlib", "autograder", "tests", "ctypes", "gc", "inspect"}
)


def _is_evasion(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in EVASION_ATTRIBUTES or (
            node.attr == "modules"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in EVASION_HELPERS or (
            isinstance(func, ast.Name) and name in EVASION_BUILTINS
        ):
            return True
        # getattr(obj, <computed name>): fine on the student's own object, never on a library's
        return (
            name == "getattr"
            and len(node.args) >= 2
            and not isinstance(node.args[1], ast.Constant)
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
        )
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] in EVASION_MODULES for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] in EVASION_MODULES
    return False


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def by_part(violations) -> dict[int, list[str]]:
    """Descriptions of the violations, grouped by the part whose points they cost."""
    grouped: dict[int, list[str]] = {}
    for v in violations:
        grouped.setdefault(v.part, []).append(v.describe())
    return grouped


def scan_package(package_dir: Path) -> list[Violation]:
    """Violations in every file of a ``transformer_hw`` directory."""
    found = []
    for filename in sorted(RULES):
        path = Path(package_dir) / filename
        if path.is_file():
            found += scan_source(
                filename, path.read_text(encoding="utf-8", errors="replace")
            )
    return found


def _is_own(node: ast.ImportFrom) -> bool:
    return node.level > 0 or (node.module or "").split(".")[0] == PACKAGE


def _own_package_names(tree: ast.AST) -> set[str]:
    """Local names bound to the student's own modules or objects."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _is_own(node):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def _is_getattr_of_forbidden(node: ast.Call, forbidden: frozenset[str]) -> bool:
    """``getattr(torch, "softmax")`` spelled with a literal name."""
    return (
        isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value in forbidden
    )
