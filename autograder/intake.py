"""Find submissions and stage each as a clean ``<staging>/transformer_hw/`` package.

Students upload in many shapes (a folder or a zip, the package at the top or one folder down, or
the bare module files as Gradescope stores them), and some uploads are broken. Staging copies
only the expected module files, after checking each one, so the grader never runs anything the
student did not mean as a module file and never follows a path out of the upload. A file that
cannot be used is replaced by a stand-in that raises ``ImportError`` with the problem in plain
words, so exactly the parts that import it fail and they say why.
"""

from __future__ import annotations

import importlib.util
import marshal
import re
import stat
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import CodeType

from autograder import rules, safe_text
from autograder.points import MODULES, PACKAGE

MAX_FILE = rules.MAX_MODULE  # bytes; the reference's largest module is a few KB
MAX_DEPTH = 3  # folders above the package when it is the only one in the upload
EXPECTED = tuple(f"{m}.py" for m in MODULES)
INIT = '"""Written by the autograder: imports nothing, so each module loads on its own."""\n'


@dataclass
class Staged:
    """One submission, ready to grade from ``root`` (which holds ``transformer_hw/``)."""

    name: str
    root: Path
    problems: list[str] = field(default_factory=list)


def find(paths: list[Path]) -> list[tuple[str, Path]]:
    """``(name, path)`` of every submission under ``paths``: each one, or each one in a batch.

    A folder is one submission when it holds the package or module files, or one package
    anywhere down to ``MAX_DEPTH`` folders (only a batch holds several), or holds nothing but
    one folder or one zip (``_only_entry`` says whose it is); otherwise each sub-folder or zip
    that holds a submission is one. A folder given here that holds none at all is one
    submission too, so its owner is told what to upload.
    """
    found: list[tuple[str, Path]] = []
    for path in map(Path, paths):
        if _is_zip(path):
            found.append((path.stem, path))
        elif path.is_dir() and _holds_modules(path):
            found.append((path.name, path))
        elif path.is_dir():
            entries = [
                c for c in sorted(path.iterdir()) if not c.name.startswith((".", "__"))
            ]
            inner = [c for c in entries if c.is_dir() or _is_zip(c)]
            with_package = [c for c in inner if _is_zip(c) or _package_dir(c)]
            if len(inner) == 1:
                found.append(_only_entry(path, inner[0]))
            elif not any(map(_is_zip, inner)) and len(_module_folders(path)) == 1:
                found.append((path.name, path))  # one package, deeper down
            elif with_package:
                found += [(c.stem if _is_zip(c) else c.name, c) for c in with_package]
            else:
                found.append((path.name, path))
    return unique_names(found)


def _only_entry(folder: Path, only: Path) -> tuple[str, Path]:
    """``(name, path)`` of the submission in ``folder``, whose one folder or zip is ``only``.

    A folder that holds the package or the module files at its top, or one zip alone, is one
    student's, and ``folder`` is a batch of one: the student's name is the inner folder's. A
    zip, or a folder deeper than that (``handout/assignments/transformer_hw``), is the upload's
    own shape: the name is the outer folder's, as Gradescope's ``submission/`` is.
    """
    if _is_zip(only):
        return folder.name, only
    if _holds_modules(only):
        return only.name, folder  # staged from the outer folder: the package one down
    entries = [c for c in only.iterdir() if not c.name.startswith((".", "__"))]
    if len(entries) == 1 and _is_zip(entries[0]):
        return only.name, entries[0]
    return folder.name, folder


def stage(name: str, source: Path, into: Path) -> Staged:
    """Copy the checked module files of ``source`` to ``into/transformer_hw``."""
    staged = Staged(name, Path(into))
    files, problems = _read_zip(source) if _is_zip(source) else _read_dir(source)
    staged.problems += problems
    package = staged.root / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(INIT)
    for filename in EXPECTED:
        data = files.get(filename)
        code, problem = _compile(filename, data)
        if problem:
            if data is not None or (files and not _mentioned(problems, filename)):
                staged.problems.append(problem)
            stand_in = f"raise ImportError({problem!r})\n"
            (package / filename).write_text(stand_in, encoding="utf-8")
        else:
            (package / filename).write_bytes(data)
            _write_bytecode(package / filename, data, code)
    return staged


#: The most bytes of compiled code kept for one file; beyond that the worker compiles it (a
#: module's code takes a few KB, but constant folding can make a small file's code huge).
MAX_BYTECODE = 2 * MAX_FILE


def bytecode_file(module_file: Path) -> Path | None:
    """Where Python looks for ``module_file``'s compiled code (no ``-O``, no pycache prefix:
    elsewhere it looks past this file and compiles the source); None where it keeps none."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    return module_file.parent / "__pycache__" / f"{module_file.stem}.{tag}.pyc"


def bytecode_header(data: bytes) -> bytes:
    """The header of a checked hash-based pyc (PEP 552) of the source ``data``: Python uses
    such a pyc only while its file holds exactly ``data``."""
    flags = (0b11).to_bytes(4, "little")  # hash-based, checked
    return importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(data)


def _write_bytecode(path: Path, data: bytes, code: CodeType) -> None:
    """Keep the code compiled by the check beside the staged file: the sandbox sends it to the
    worker with the source, so the worker imports it without compiling the file again (Python
    fixes its file names to the source file's on import)."""
    pyc = bytecode_file(path)
    compiled = bytecode_header(data) + marshal.dumps(code)
    if pyc is not None and len(compiled) <= MAX_BYTECODE:
        pyc.parent.mkdir(exist_ok=True)
        pyc.write_bytes(compiled)


def _mentioned(problems: list[str], filename: str) -> bool:
    return any(p.startswith(filename + " ") for p in problems)


def _compile(filename: str, data: bytes | None) -> tuple[CodeType | None, str | None]:
    """``(code, None)`` for a usable module file, ``(None, problem)`` in plain words. Whatever
    stops a file from compiling is that file's problem, never the grader's: the text is the
    only input (a parser stack overflow is a ``MemoryError``, deep nesting a ``RecursionError``,
    a coding line naming no text encoding a ``LookupError``)."""
    if data is None:
        return None, f"{filename} is missing from the submission"
    if len(data) > MAX_FILE:
        size = MAX_FILE // 1024
        return None, f"{filename} is larger than {size} KB, so it was not graded"
    text, problem = _decode(filename, data)
    if problem:
        return None, problem
    try:
        # As an import compiles it, without -O (``bytecode_file``).
        return compile(text, filename, "exec", dont_inherit=True, optimize=0), None
    except SyntaxError as exc:
        return None, f"{filename} has a syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # null bytes
        return None, f"{filename} cannot be compiled: {exc}"
    except (RecursionError, MemoryError):
        return None, (
            f"{filename} is nested too deeply or too complex for Python to compile: "
            "split long expressions and deep nesting into statements"
        )
    except Exception as exc:  # noqa: BLE001 - the text is the only input
        return None, f"{filename} cannot be compiled ({type(exc).__name__}: {exc})"


def _decode(filename: str, data: bytes) -> tuple[str | None, str | None]:
    """``(text, None)`` as an import reads the file (its BOM or coding line obeyed), or
    ``(None, problem)``."""
    try:
        return importlib.util.decode_source(data), None
    except UnicodeDecodeError as exc:
        undecodable = exc
    except LookupError as exc:  # a coding line naming a codec that is no text encoding
        return None, f"{filename} cannot be read: {exc}"
    except SyntaxError as exc:  # no UTF-8 in the first two lines, or an unknown coding
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as decoding:
            undecodable = decoding
        else:
            return None, f"{filename} cannot be read: {exc}"
    byte = f"byte 0x{data[undecodable.start]:02x} at offset {undecodable.start}"
    return None, f"{filename} is not {undecodable.encoding.upper()} text ({byte})"


# Where the module files are ------------------------------------------------------------------


def _is_zip(path: Path) -> bool:
    return path.is_file() and path.suffix == ".zip"


def _holds_modules(path: Path) -> bool:
    return (path / PACKAGE).is_dir() or any((path / f).is_file() for f in EXPECTED)


def _depth(folder: PurePosixPath) -> int:
    """Folders above the package (or above bare module files) in ``folder``."""
    return len(folder.parts) - (folder.name == PACKAGE)


def _choose(folders: set[PurePosixPath]) -> PurePosixPath | str:
    """The folder holding the module files, or why there is none.

    One candidate may sit up to ``MAX_DEPTH`` folders down; among several (a copy kept beside
    the real one, say) the shallowest wins, a package before bare files, at most one folder
    down: deeper than that, which one was meant is a guess.
    """
    if not folders:
        return ""
    ranked = sorted(folders, key=lambda f: (_depth(f), f.name != PACKAGE, str(f)))
    best = ranked[0]
    limit = MAX_DEPTH if len(folders) == 1 else 1
    if _depth(best) > limit:
        where = ", ".join(safe_text.md_code_span(f"{f}/") for f in ranked[:3])
        return (
            f"the module files are {_depth(best)} folders down ({where}); put "
            f"{PACKAGE}/ at most {limit} folder{'s' * (limit != 1)} down"
        )
    return best


def _package_dir(path: Path) -> Path | None:
    """The folder holding the module files under ``path`` (see ``_choose``), or None."""
    chosen = _choose(_module_folders(path))
    return path / chosen if isinstance(chosen, PurePosixPath) else None


def _module_folders(path: Path) -> set[PurePosixPath]:
    """Folders (relative to ``path``) that hold an expected module file, down to one level
    below ``MAX_DEPTH``; hidden folders and links are not entered."""
    found: set[PurePosixPath] = set()
    todo = [PurePosixPath()]
    while todo:
        rel = todo.pop()
        try:
            children = sorted((path / rel).iterdir())
        except OSError:
            continue
        for child in children:
            if child.name.startswith((".", "__")) or child.is_symlink():
                continue
            if child.is_dir() and len(rel.parts) <= MAX_DEPTH + 1:
                todo.append(rel / child.name)
            elif child.name in EXPECTED and child.is_file():
                found.add(rel)
    return found


def left_out(names) -> list[str]:
    """The problem of each Python file beside the module files: only those are graded. The
    name is the student's, so it is quoted as code (one line, nothing in it read)."""
    return [
        f"{safe_text.md_code_span(name)} is not one of the assignment's files "
        f"({', '.join(EXPECTED[:3])}, ...), so it was left out and code that imports it "
        "fails: keep helpers in the module files that use them"
        for name in sorted(set(names))
        if name.endswith(".py") and name not in EXPECTED and name != "__init__.py"
    ]


def nothing_to_grade(names: list[str]) -> str:
    """The problem of an upload without module files, and what to upload instead."""
    listed = ", ".join(map(safe_text.md_code_span, names[:5]))
    listed += ", ..." if len(names) > 5 else ""
    what = f"holds no module file (it has: {listed})" if names else "is empty"
    return (
        f"nothing to grade: the upload {what}. Upload a zip of your {PACKAGE}/ folder "
        f"(python -m zipfile -c submission.zip assignments/{PACKAGE}) or its module files "
        f"({', '.join(EXPECTED[:3])}, ...)"
    )


def _read_dir(source: Path) -> tuple[dict[str, bytes], list[str]]:
    files: dict[str, bytes] = {}
    problems: list[str] = []
    chosen = _choose(_module_folders(source))
    if not isinstance(chosen, PurePosixPath):
        names = sorted(
            str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()
        )
        return files, [chosen or nothing_to_grade(names)]
    package = source / chosen
    top = source.resolve()
    problems += left_out(p.name for p in package.glob("*.py"))
    for filename in EXPECTED:
        path = package / filename
        if not path.exists() and not path.is_symlink():
            continue
        real = path.resolve()
        if top not in real.parents or not real.is_file():
            problems.append(
                f"{filename} is a link out of the submission, so it was not graded"
            )
            continue
        with open(real, "rb") as f:
            files[filename] = f.read(MAX_FILE + 1)
    return files, problems


def _read_zip(source: Path) -> tuple[dict[str, bytes], list[str]]:
    problems: list[str] = []
    try:
        archive = zipfile.ZipFile(source)
    # Whatever makes an upload unreadable is that upload's problem, never the batch's.
    except Exception as exc:  # noqa: BLE001
        return {}, [f"the zip cannot be read: {exc}"]
    with archive:
        entries: dict[PurePosixPath, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            path = PurePosixPath(info.filename.replace("\\", "/"))
            if (
                path.is_absolute()
                or ".." in path.parts
                or re.match(r"^[A-Za-z]:", info.filename)
            ):
                problems.append(
                    f"zip entry {safe_text.md_code_span(info.filename)} points out of its "
                    "folder; ignored"
                )
            elif stat.S_ISLNK(info.external_attr >> 16):
                problems.append(
                    f"zip entry {safe_text.md_code_span(info.filename)} is a symbolic "
                    "link; ignored"
                )
            elif not info.is_dir() and not path.parts[0].startswith(("__MACOSX", ".")):
                entries[path] = info
        folder = _choose({p.parent for p in entries if p.name in EXPECTED})
        if not isinstance(folder, PurePosixPath):
            return {}, [
                *problems,
                folder or nothing_to_grade(sorted(map(str, entries))),
            ]
        problems += left_out(p.name for p in entries if p.parent == folder)
        files = {}
        for filename in EXPECTED:
            info = entries.get(folder / filename)
            if info is not None:
                try:
                    with archive.open(info) as f:
                        files[filename] = f.read(MAX_FILE + 1)
                # A bad CRC, a corrupt deflate stream, an unknown method, a truncated
                # member, encryption...: whatever the reason, this upload's problem.
                except Exception as exc:  # noqa: BLE001
                    problems.append(
                        f"{filename} cannot be decompressed from the zip "
                        f"({type(exc).__name__}: {exc}), so it was not graded"
                    )
    return files, problems


# Names and uploads ------------------------------------------------------------------------------

#: Names the output folder already uses for the batch's own files.
RESERVED = frozenset({"gradebook.csv", "report.html"})


def clean_name(name: str) -> str:
    """A name that is safe as one folder's name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "submission"


def unique_names(found: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Give every submission an output folder of its own: a name already taken (by any other
    submission of the batch, also one renamed earlier, ignoring case) gets the first free
    ``-2``, ``-3``, ... suffix."""
    taken = {name.casefold() for name, _ in found} | set(RESERVED)
    seen: set[str] = set()
    out = []
    for name, path in found:
        clean = clean_name(name)
        if clean.casefold() in seen or clean.casefold() in RESERVED:
            number = 2
            while f"{clean}-{number}".casefold() in taken | seen:
                number += 1
            clean = f"{clean}-{number}"
        seen.add(clean.casefold())
        out.append((clean, path))
    return out


UPLOAD_HINT = (
    f"upload your {PACKAGE}/ folder (or just its files: "
    + ", ".join(EXPECTED)
    + "), alone or in one zip"
)


def find_upload(path: Path, depth: int = 4) -> tuple[Path | None, str | None]:
    """The one package in an upload (Gradescope's ``submission/``), whatever its shape: the
    folder that holds the module files (the package up to three folders down, as AUTOGRADER.md
    allows: its files are at most ``depth`` down) or a zip. ``(None, problem)`` when there is
    none or more than one."""
    path = Path(path)
    if path.is_file():
        return (
            (path, None)
            if path.suffix == ".zip"
            else (None, f"nothing to grade: {UPLOAD_HINT}")
        )
    candidates = sorted(_candidates(path, depth))
    if not candidates:
        return None, f"nothing to grade was found in the upload: {UPLOAD_HINT}"
    if len(candidates) > 1:
        listed = ", ".join(str(c.relative_to(path)) or "." for c in candidates)
        return None, (
            f"the upload holds {len(candidates)} candidate packages ({listed}), so none was "
            f"graded: {UPLOAD_HINT}"
        )
    return candidates[0], None


def _candidates(folder: Path, depth: int) -> list[Path]:
    found = []
    if any((folder / f).is_file() for f in EXPECTED):
        found.append(folder)
    if depth == 0:
        return found
    for child in folder.iterdir():
        if child.name.startswith((".", "__")) or child.is_symlink():
            continue
        if child.is_dir():
            found += _candidates(child, depth - 1)
        elif child.suffix == ".zip" and child.is_file():
            found.append(child)
    return found
