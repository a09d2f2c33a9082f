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

from autograder.facts import rules, safe_text
from autograder.facts.points import MODULES, PACKAGE
from autograder.sources.runner import UNUSABLE_FILE

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


def find(paths: list[Path], unpack: Path | None = None) -> list[tuple[str, Path]]:
    """``(name, path)`` of every submission under ``paths``: each one, or each one in a batch.

    A folder is one submission when it holds the package or module files, or one package
    anywhere down to ``MAX_DEPTH`` folders (only a batch holds several), or holds nothing but
    one folder or one zip (``_only_entry`` says whose it is). Otherwise, when one of its
    folders or zips is a student's (``_a_students``: a package, a zip, or a folder holding one
    upload, as course platforms export them), it is a batch and every folder and zip in it is
    one student's, named by it: one that holds nothing to grade is reported for that student,
    never dropped. A folder given here that holds none at all is one submission too, so its
    owner is told what to upload. A zip of student folders (``_zipped_batch``) is unpacked
    into ``unpack`` and read as that batch.
    """
    found: list[tuple[str, Path]] = []
    for path in map(Path, paths):
        if _is_zip(path) and unpack is not None and _zipped_batch(path):
            found += find([_unpack_batch(path, unpack / clean_name(path.stem))])
        elif _is_zip(path):
            found.append((path.stem, path))
        elif path.is_dir() and _holds_modules(path):
            found.append((path.name, path))
        elif path.is_dir():
            entries = [
                c for c in sorted(path.iterdir()) if not c.name.startswith((".", "__"))
            ]
            inner = [c for c in entries if c.is_dir() or _is_zip(c)]
            students = sum(map(_a_students, inner))
            if len(inner) == 1:
                found.append(_only_entry(path, inner[0]))
            elif (
                students < 2
                and not any(map(_is_zip, inner))
                and (len(_module_folders(path)) == 1)
            ):
                found.append((path.name, path))  # one package, deeper down
            elif students:
                found += [_student(c) for c in inner]
            else:
                found.append((path.name, path))
    return unique_names(found)


def _a_students(entry: Path) -> bool:
    """``entry`` of a folder is a student's upload: a zip, a folder with the package (up to
    ``MAX_DEPTH`` down), or a folder holding one zip (a course platform's folder per
    student)."""
    if _is_zip(entry) or _package_dir(entry) is not None:
        return True
    only = _one_upload(entry)
    return only is not None and _is_zip(only)


def _one_upload(folder: Path) -> Path | None:
    """The one zip or folder in ``folder``, when it holds nothing else but files that are
    neither (a platform's notes beside the upload)."""
    if not folder.is_dir():
        return None
    inner = [
        c
        for c in folder.iterdir()
        if not c.name.startswith((".", "__")) and (c.is_dir() or _is_zip(c))
    ]
    return inner[0] if len(inner) == 1 else None


def _student(entry: Path) -> tuple[str, Path]:
    """``(name, path)`` of one student's entry of a batch, named by the entry: a folder that
    holds one zip and no module files is graded from that zip."""
    if _is_zip(entry):
        return entry.stem, entry
    only = _one_upload(entry)
    if only is not None and _is_zip(only) and not _module_folders(entry):
        return entry.name, only
    return entry.name, entry


#: The most bytes of one member unpacked from a zipped batch (a student's own zip in it).
MAX_UNPACKED = 64 << 20


def _safe_members(
    archive: zipfile.ZipFile,
) -> list[tuple[PurePosixPath, zipfile.ZipInfo]]:
    """The regular, visible members of ``archive`` that stay inside its folder."""
    members = []
    for info in archive.infolist():
        path = PurePosixPath(info.filename.replace("\\", "/"))
        if (
            info.is_dir()
            or path.is_absolute()
            or ".." in path.parts
            or re.match(r"^[A-Za-z]:", info.filename)
            or stat.S_ISLNK(info.external_attr >> 16)
            or any(part.startswith((".", "__MACOSX")) for part in path.parts)
        ):
            continue
        members.append((path, info))
    return members


def _batch_root(paths: list[PurePosixPath]) -> int:
    """How many folders wrap the whole zip (``export/ada/submission.zip``: one), at most one."""
    tops = {p.parts[0] for p in paths}
    return 1 if len(tops) == 1 and all(len(p.parts) > 1 for p in paths) else 0


def _zipped_batch(path: Path) -> bool:
    """``path`` is a zip of student folders: no module file at its top, and two folders or
    more that each hold a zip or module files."""
    try:
        with zipfile.ZipFile(path) as archive:
            paths = [p for p, _ in _safe_members(archive)]
    except Exception:  # noqa: BLE001 - an unreadable zip is one submission's problem
        return False
    if not paths:
        return False
    skip = _batch_root(paths)
    paths = [PurePosixPath(*p.parts[skip:]) for p in paths]
    if any(p.name in EXPECTED and _depth(p.parent) == 0 for p in paths):
        return False
    students = {
        p.parts[0]
        for p in paths
        if len(p.parts) > 1 and (p.suffix == ".zip" or p.name in EXPECTED)
    }
    return len(students) >= 2


def _unpack_batch(path: Path, into: Path) -> Path:
    """Unpack the student folders of the zipped batch ``path`` into ``into``: only their zips
    and Python files (each cut to what intake reads of it), inside the folder; ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path) as archive:
        members = _safe_members(archive)
        skip = _batch_root([p for p, _ in members])
        for member, info in members:
            member = PurePosixPath(*member.parts[skip:])
            if member.suffix not in (".zip", ".py") or len(member.parts) < 2:
                continue
            limit = MAX_UNPACKED if member.suffix == ".zip" else MAX_FILE + 1
            target = into.joinpath(*member.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as f:
                    target.write_bytes(f.read(limit))
            # A member that cannot be read stays out; its student is told what is missing.
            except Exception:  # noqa: BLE001
                target.unlink(missing_ok=True)
    return into


def _only_entry(folder: Path, only: Path) -> tuple[str, Path]:
    """``(name, path)`` of the submission in ``folder``, whose one folder or zip is ``only``.

    A folder that holds the package or the module files at its top, or one zip (beside other
    files, a platform's notes), is one student's, and ``folder`` is a batch of one: the student's name is the inner folder's. A
    zip, or a folder deeper than that (``handout/assignments/transformer_hw``), is the upload's
    own shape: the name is the outer folder's, as Gradescope's ``submission/`` is.
    """
    if _is_zip(only):
        return folder.name, only
    if _holds_modules(only):
        return only.name, folder  # staged from the outer folder: the package one down
    name, source = _student(only)
    return (name, source) if source != only else (folder.name, folder)


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
            stand_in = (
                f"class {UNUSABLE_FILE}(ImportError):\n    pass\n\n\n"
                f"raise {UNUSABLE_FILE}({problem!r})\n"
            )
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


def keep_bytecode(package: Path, like: Path | None = None) -> None:
    """Compile each module of ``package`` (trusted code: the reference or a mutant) and keep
    its code beside it, as staging does: code imported again and again compiles once, whether
    or not Python may write bytecode itself (``PYTHONDONTWRITEBYTECODE``). A module that holds
    the same text as ``like``'s takes the code kept there (a mutant's unedited files)."""
    for path in package.glob("*.py"):
        data = path.read_bytes()
        same = like / path.name if like is not None else None
        kept = bytecode_file(same) if same is not None else None
        if kept is not None and kept.is_file() and same.read_bytes() == data:
            pyc = bytecode_file(path)
            pyc.parent.mkdir(exist_ok=True)
            pyc.write_bytes(kept.read_bytes())
        else:
            code = compile(data, str(path), "exec", dont_inherit=True)
            _write_bytecode(path, data, code)


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
        return None, (
            f"{filename} has a syntax error at line {exc.lineno}: "
            f"{safe_text.capped(exc.msg, 300)}"
        )
    except ValueError as exc:  # null bytes
        return None, f"{filename} cannot be compiled: {exc}"
    except (RecursionError, MemoryError):
        return None, (
            f"{filename} is nested too deeply or too complex for Python to compile: "
            "split long expressions and deep nesting into statements"
        )
    except Exception as exc:  # noqa: BLE001 - the text is the only input
        return None, f"{filename} cannot be compiled ({_said(exc)})"


def _said(exc: BaseException) -> str:
    """What ``exc`` says, capped: it may quote the student's text (each output escapes it)."""
    text = str(exc) if isinstance(exc, (LookupError, SyntaxError)) else ""
    return safe_text.capped(text or f"{type(exc).__name__}: {exc}", 300)


def _decode(filename: str, data: bytes) -> tuple[str | None, str | None]:
    """``(text, None)`` as an import reads the file (its BOM or coding line obeyed), or
    ``(None, problem)``."""
    try:
        return importlib.util.decode_source(data), None
    except UnicodeDecodeError as exc:
        undecodable = exc
    except LookupError as exc:  # a coding line naming a codec that is no text encoding
        return None, f"{filename} cannot be read: {_said(exc)}"
    except SyntaxError as exc:  # no UTF-8 in the first two lines, or an unknown coding
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as decoding:
            undecodable = decoding
        else:
            return None, f"{filename} cannot be read: {_said(exc)}"
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
        where = safe_text.name_list([f"{f}/" for f in ranked], count=3)
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
    """One problem for the Python files beside the module files (only those are graded), or
    none. The names are the student's: quoted as code, and capped in length and number
    (``safe_text.name_list``), however many files the upload holds."""
    extra = sorted(
        {
            name
            for name in names
            if name.endswith(".py") and name not in EXPECTED and name != "__init__.py"
        }
    )
    if not extra:
        return []
    one = len(extra) == 1
    problem = (
        f"{safe_text.name_list(extra)} "
        f"{'is not one of' if one else 'are not among'} the assignment's files "
        f"({', '.join(EXPECTED[:3])}, ...), so {'it was' if one else 'they were'} left out "
        f"and code that imports {'it' if one else 'them'} fails: keep helpers in the "
        "module files that use them"
    )
    return [problem]


def nothing_to_grade(names: list[str]) -> str:
    """The problem of an upload without module files, and what to upload instead."""
    listed = safe_text.name_list(names, count=5)
    what = f"holds no module file (it has: {listed})" if names else "is empty"
    return (
        f"nothing to grade: the upload {what}. Upload a zip of your {PACKAGE}/ folder "
        f"(`python -m zipfile -c submission.zip assignments/{PACKAGE}`) or its module files "
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


def _ignored(names: list[str], one: str, several: str) -> list[str]:
    """One problem for the zip entries ``names`` ignored for a reason (``one`` entry ...,
    ``several`` entries ...), or none."""
    if not names:
        return []
    if len(names) == 1:
        return [f"zip entry {safe_text.name_list(names)} {one}; ignored"]
    return [f"zip entries {safe_text.name_list(names)} {several}; ignored"]


def _read_zip(source: Path) -> tuple[dict[str, bytes], list[str]]:
    problems: list[str] = []
    try:
        archive = zipfile.ZipFile(source)
    # Whatever makes an upload unreadable is that upload's problem, never the batch's.
    except Exception as exc:  # noqa: BLE001
        return {}, [f"the zip cannot be read: {safe_text.capped(str(exc), 300)}"]
    with archive:
        entries: dict[PurePosixPath, zipfile.ZipInfo] = {}
        escaping, links = [], []
        for info in archive.infolist():
            path = PurePosixPath(info.filename.replace("\\", "/"))
            if (
                path.is_absolute()
                or ".." in path.parts
                or re.match(r"^[A-Za-z]:", info.filename)
            ):
                escaping.append(info.filename)
            elif stat.S_ISLNK(info.external_attr >> 16):
                links.append(info.filename)
            elif not info.is_dir() and not path.parts[0].startswith(("__MACOSX", ".")):
                entries[path] = info
        problems += _ignored(
            escaping, "points out of its folder", "point out of theirs"
        )
        problems += _ignored(links, "is a symbolic link", "are symbolic links")
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
                    why = safe_text.capped(f"{type(exc).__name__}: {exc}", 300)
                    problems.append(
                        f"{filename} cannot be decompressed from the zip ({why}), so it "
                        "was not graded"
                    )
    return files, problems


# Names and uploads ------------------------------------------------------------------------------

#: Names the output folder uses for its own files (``report``, ``classreport``, ``shards``
#: name them; tests/engine/test_safe_outputs.py holds the two lists together), and the names
#: of a submission's own files: no submission's folder may take one.
RESERVED = frozenset(
    {
        "gradebook.csv",
        "report.html",
        "shard.json",
        "results.json",
        "feedback.md",
        "instructor.md",
    }
)


def clean_name(name: str) -> str:
    """A name that is safe as one folder's name, at most ``safe_text.MAX_NAME`` long."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[: safe_text.MAX_NAME]
    return clean.strip("._") or "submission"


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
        listed = safe_text.name_list(
            [str(c.relative_to(path)) or "." for c in candidates], count=5
        )
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
