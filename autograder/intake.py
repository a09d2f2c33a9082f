"""Find submissions and stage each as a clean ``<staging>/transformer_hw/`` package.

Students upload in many shapes (a folder or a zip, the package at the top or one folder down, or
the bare module files as Gradescope stores them), and some uploads are broken. Staging copies
only the expected module files, after checking each one, so the grader never runs anything the
student did not mean as a module file and never follows a path out of the upload. A file that
cannot be used is replaced by a stand-in that raises ``ImportError`` with the problem in plain
words, so exactly the parts that import it fail and they say why.
"""

from __future__ import annotations

import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.protocol import MODULES, PACKAGE

MAX_FILE = 512 * 1024  # bytes; the reference's largest module is a few KB
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

    A folder is one submission when it holds the package or module files, or holds nothing but
    one folder or one zip that does (the name is then the outer folder's, as Gradescope's
    ``submission/`` is); otherwise each sub-folder or zip that holds a submission is one.
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
            inner = [
                c for c in entries if _is_zip(c) or (c.is_dir() and _package_dir(c))
            ]
            if (
                len(inner) == 1
                and len([c for c in entries if c.is_dir() or _is_zip(c)]) == 1
            ):
                found.append((path.name, inner[0] if _is_zip(inner[0]) else path))
            else:
                found += [(c.stem if _is_zip(c) else c.name, c) for c in inner]
    return _unique_names(found)


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
        problem = _check(filename, data)
        if problem:
            if data is not None or (files and not _mentioned(problems, filename)):
                staged.problems.append(problem)
            text = f"raise ImportError({problem!r})\n"
        else:
            text = data.decode("utf-8")
        (package / filename).write_text(text, encoding="utf-8")
    return staged


def _mentioned(problems: list[str], filename: str) -> bool:
    return any(p.startswith(filename + " ") for p in problems)


def _check(filename: str, data: bytes | None) -> str | None:
    if data is None:
        return f"{filename} is missing from the submission"
    if len(data) > MAX_FILE:
        return f"{filename} is larger than {MAX_FILE // 1024} KB, so it was not graded"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"{filename} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
    try:
        compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{filename} has a syntax error at line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # null bytes
        return f"{filename} cannot be compiled: {exc}"
    return None


# Where the module files are ------------------------------------------------------------------


def _is_zip(path: Path) -> bool:
    return path.is_file() and path.suffix == ".zip"


def _holds_modules(path: Path) -> bool:
    return (path / PACKAGE).is_dir() or any((path / f).is_file() for f in EXPECTED)


def _package_dir(path: Path) -> Path | None:
    """The folder holding the module files: the package or bare files, at most one level down."""
    for candidate in (path, *_only_subfolder(path)):
        if _holds_modules(candidate):
            return candidate / PACKAGE if (candidate / PACKAGE).is_dir() else candidate
    return None


def _only_subfolder(path: Path) -> list[Path]:
    subs = [
        p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))
    ]
    return subs if len(subs) == 1 else []


def _read_dir(source: Path) -> tuple[dict[str, bytes], list[str]]:
    files: dict[str, bytes] = {}
    problems: list[str] = []
    package = _package_dir(source)
    if package is None:
        return files, [f"no {PACKAGE}/ folder or module files found"]
    top = source.resolve()
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
    except (zipfile.BadZipFile, OSError) as exc:
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
                    f"zip entry {info.filename!r} points out of its folder; ignored"
                )
            elif stat.S_ISLNK(info.external_attr >> 16):
                problems.append(
                    f"zip entry {info.filename!r} is a symbolic link; ignored"
                )
            elif not info.is_dir() and not path.parts[0].startswith(("__MACOSX", ".")):
                entries[path] = info
        folder = _zip_package(entries)
        if folder is None:
            return {}, [
                *problems,
                f"no {PACKAGE}/ folder or module files found in the zip",
            ]
        files = {}
        for filename in EXPECTED:
            info = entries.get(folder / filename)
            if info is not None:
                try:
                    with archive.open(info) as f:
                        files[filename] = f.read(MAX_FILE + 1)
                # Any failure (a corrupt deflate stream, a bad CRC, an unknown compression, a
                # password) is this submission's problem, never the batch's.
                except Exception as exc:  # noqa: BLE001
                    problems.append(f"{filename} cannot be read from the zip: {exc}")
    return files, problems


def _zip_package(entries: dict[PurePosixPath, zipfile.ZipInfo]) -> PurePosixPath | None:
    folders = {p.parent for p in entries if p.name in EXPECTED}
    for depth in (
        0,
        1,
        2,
    ):  # bare files, then package or bare one down, then package one down
        here = sorted(f for f in folders if len(f.parts) == depth)
        preferred = [f for f in here if f.name == PACKAGE] or here
        if preferred:
            return preferred[0]
    return None


def _unique_names(found: list[tuple[str, Path]]) -> list[tuple[str, Path]]:
    seen: dict[str, int] = {}
    out = []
    for name, path in found:
        clean = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "submission"
        seen[clean] = seen.get(clean, 0) + 1
        out.append((clean if seen[clean] == 1 else f"{clean}-{seen[clean]}", path))
    return out
