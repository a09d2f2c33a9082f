"""Intake: every upload shape is found, every broken file is reported and stubbed out."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from autograder.facts.points import MODULES, PACKAGE
from autograder.facts.protocol import StudentError
from autograder.sandbox.executor import InProcessSubmission
from autograder.sources import intake
from autograder.sources.runner import UNUSABLE_FILE

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "solutions" / PACKAGE


def reference_files() -> dict[str, bytes]:
    return {f"{m}.py": (REFERENCE / f"{m}.py").read_bytes() for m in MODULES}


def write_tree(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def write_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def upload(tmp_path: Path, name: str, files: dict[str, bytes], as_zip: bool) -> Path:
    """``files`` uploaded as ``name.zip`` or as the folder ``name``."""
    if as_zip:
        return write_zip(tmp_path / f"{name}.zip", files)
    return write_tree(tmp_path / name, files)


def staged_text(staged: intake.Staged, module: str) -> str:
    return (staged.root / PACKAGE / f"{module}.py").read_text()


@pytest.mark.parametrize(
    "prefix", ["transformer_hw/", "", "alice/transformer_hw/", "alice/"]
)
@pytest.mark.parametrize("as_zip", [False, True])
def test_every_shape_is_found_and_staged(tmp_path, prefix, as_zip):
    files = {prefix + name: data for name, data in reference_files().items()}
    files["notes.txt"] = b"not a module"
    source = upload(tmp_path, "alice", files, as_zip)
    assert intake.find([source]) == [("alice", source)]
    staged = intake.stage("alice", source, tmp_path / "staged")
    assert staged.problems == []
    assert sorted(p.name for p in (staged.root / PACKAGE).iterdir()) == sorted(
        ["__init__.py", "__pycache__", *(f"{m}.py" for m in MODULES)]
    )
    assert staged_text(staged, "rope") == (REFERENCE / "rope.py").read_text()


@pytest.mark.parametrize("as_zip", [False, True])
def test_other_python_files_beside_the_modules_are_left_out_and_said_so(
    tmp_path, as_zip
):
    files = {f"transformer_hw/{n}": d for n, d in reference_files().items()}
    files["transformer_hw/_utils.py"] = b"def helper():\n    return 1\n"
    files["transformer_hw/__init__.py"] = (
        b""  # replaced by the grader's own: no problem
    )
    files["scratch.py"] = b"print('not beside the modules')\n"
    source = upload(tmp_path, "alice", files, as_zip)
    staged = intake.stage("alice", source, tmp_path / "staged")
    assert not (staged.root / PACKAGE / "_utils.py").exists()
    (problem,) = staged.problems
    assert problem.startswith("`_utils.py` is not one of the assignment's files")
    assert "left out" in problem


def test_in_process_a_helper_module_fails_as_it_will_when_graded(tmp_path):
    """``autograder check`` runs the student's own folder, helper files and all: the import
    is refused there too, with the reason, so the public score is the graded one."""
    package = write_tree(tmp_path / "sub" / PACKAGE, reference_files())
    (package / "_utils.py").write_text("def one():\n    return 1\n")
    masks = package / "masks.py"
    masks.write_text(masks.read_text() + "\nfrom ._utils import one  # noqa: E402\n")
    with InProcessSubmission(tmp_path / "sub") as hw:
        with pytest.raises(
            StudentError, match="only the assignment's files are graded"
        ):
            hw.call("masks.causal_mask", 3)
        assert hw.call("rope.rope_angles", torch.tensor([1]), 2).shape == (1, 1)


#: Imports two staged modules, the second changed since staging; prints what was compiled.
IMPORT_STAGED = """
import importlib.machinery, json, sys
compiled = []
loader = importlib.machinery.SourceFileLoader
to_code = loader.source_to_code
loader.source_to_code = lambda self, data, path, **kw: (
    compiled.append(path), to_code(self, data, path, **kw))[1]
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from transformer_hw import masks, rope
print(json.dumps([compiled, masks.f.__code__.co_filename, masks.f(), rope.f()]))
"""


def test_staged_modules_import_their_checked_code_unless_changed_since(tmp_path):
    """Staging keeps each module's compiled code beside it (``intake.bytecode_file``): Python
    imports it without compiling again, under the file's own name (which the run-time watch
    charges calls to), and compiles a file that changed since staging anew."""
    files = {f"{m}.py": b"def f():\n    return 1\n" for m in MODULES}
    source = write_tree(tmp_path / "sub" / PACKAGE, files).parent
    staged = intake.stage("sub", source, tmp_path / "staged")
    package = staged.root / PACKAGE
    (package / "rope.py").write_text("def f():\n    return 2\n")
    done = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT_STAGED, str(staged.root)],
        capture_output=True,
        text=True,
        check=True,
    )
    compiled, filename, masks_f, rope_f = json.loads(done.stdout)
    assert [Path(p).name for p in compiled] == ["__init__.py", "rope.py"]
    assert (filename, masks_f, rope_f) == (str(package / "masks.py"), 1, 2)


#: Files Python imports, each with the value its ``x`` has there.
IMPORTED_AS_IS = {
    "a byte-order mark": (b"\xef\xbb\xbfx = 'caf\xc3\xa9'\n", "caf\u00e9"),
    "a latin-1 coding line": (b"# coding: latin-1\nx = 'caf\xe9'\n", "caf\u00e9"),
    "Windows line ends": (b'y = 1\r\nx = """a\r\nb"""\r\n', "a\nb"),
    "1,500 terms": (b"x = " + b" + ".join([b"1"] * 1500) + b"\n", 1500),
}


@pytest.mark.parametrize("case", IMPORTED_AS_IS)
def test_files_python_imports_are_staged_and_compiled_as_it_reads_them(tmp_path, case):
    """Staging reads and compiles a file as Python's import does (BOM, coding line, line
    ends; nesting deeper than a syntax tree compiles), so its code gives what the file gives."""
    data, x = IMPORTED_AS_IS[case]
    source = write_tree(tmp_path / "sub" / PACKAGE, {"masks.py": data}).parent
    staged = intake.stage("sub", source, tmp_path / "staged")
    assert not any(p.startswith("masks.py") for p in staged.problems)
    path = staged.root / PACKAGE / "masks.py"
    assert path.read_bytes() == data and intake.bytecode_file(path).is_file()
    spec = importlib.util.spec_from_file_location(f"staged_{tmp_path.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.x == x


def test_a_file_with_an_unknown_coding_line_is_refused_in_plain_words(tmp_path):
    files = reference_files() | {"rope.py": b"# coding: klingon\nx = 1\n"}
    source = write_tree(tmp_path / "sub" / PACKAGE, files).parent
    staged = intake.stage("sub", source, tmp_path / "staged")
    assert staged.problems == ["rope.py cannot be read: unknown encoding: klingon"]


#: Files whose text alone makes Python's compiler fail otherwise than with a syntax error.
UNCOMPILABLE = {
    "a parser stack overflow (MemoryError)": (
        b"x = " + b"-" * 7000 + b"1\n",
        "rope.py is nested too deeply or too complex for Python to compile",
    ),
    "a codec that is no text encoding (LookupError)": (
        b"# coding: rot13\nx = 1\n",
        "rope.py cannot be read: 'rot13' is not a text encoding",
    ),
}


@pytest.mark.parametrize("case", UNCOMPILABLE)
def test_a_file_that_breaks_the_compiler_is_that_files_problem(tmp_path, case):
    data, problem = UNCOMPILABLE[case]
    files = reference_files() | {"rope.py": data}
    source = write_tree(tmp_path / "sub" / PACKAGE, files).parent
    staged = intake.stage("sub", source, tmp_path / "staged")
    assert len(staged.problems) == 1 and staged.problems[0].startswith(problem)
    assert f"\nraise {UNUSABLE_FILE}(" in staged_text(staged, "rope")


def test_a_batch_folder_lists_each_submission_once(tmp_path):
    batch = tmp_path / "batch"
    write_tree(batch / "bob", {"transformer_hw/attention.py": b"x = 1\n"})
    write_tree(batch / "carol", {"attention.py": b"x = 1\n"})
    write_zip(batch / "dave.zip", {"attention.py": b"x = 1\n"})
    write_tree(batch / "bob zip!", {"masks.py": b"x = 1\n"})
    (batch / "README.txt").write_text("not a submission")
    names = [name for name, _ in intake.find([batch])]
    assert names == ["bob", "bob_zip", "carol", "dave"]


def test_missing_and_broken_files_break_only_their_module(tmp_path):
    files = reference_files()
    del files["masks.py"]
    files["rope.py"] = b"def apply_rope(x:\n    pass\n"
    files["norm.py"] = "x = 'caf\u00e9'\n".encode("latin-1")
    files["gqa.py"] = b"# " + b"x" * (intake.MAX_FILE + 10) + b"\n"
    source = write_tree(tmp_path / "sub" / PACKAGE, files).parent
    staged = intake.stage("sub", source, tmp_path / "staged")
    assert staged.problems == [
        "masks.py is missing from the submission",
        "rope.py has a syntax error at line 1: '(' was never closed",
        "norm.py is not UTF-8 text (byte 0xe9 at offset 8)",
        "gqa.py is larger than 512 KB, so it was not graded",
    ]
    stand_in = staged_text(staged, "rope")
    assert (
        f"\nraise {UNUSABLE_FILE}(" in stand_in and "syntax error at line 1" in stand_in
    )
    assert staged_text(staged, "attention") == (REFERENCE / "attention.py").read_text()


def test_zip_entries_that_escape_or_link_are_ignored(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in reference_files().items():
            archive.writestr(f"{PACKAGE}/{name}", data)
        archive.writestr("../../escaped.py", b"x = 1\n")
        archive.writestr("/abs/attention.py", b"x = 1\n")
        link = zipfile.ZipInfo(f"{PACKAGE}/extra.py")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    staged = intake.stage("evil", path, tmp_path / "staged")
    assert staged.problems == [
        "zip entries `../../escaped.py`, `/abs/attention.py` point out of theirs; ignored",
        f"zip entry `{PACKAGE}/extra.py` is a symbolic link; ignored",
    ]
    assert not (tmp_path / "escaped.py").exists()
    assert staged_text(staged, "attention") == (REFERENCE / "attention.py").read_text()


def test_symlinks_out_of_the_submission_are_not_followed(tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("ANSWER = 42\n")
    source = write_tree(
        tmp_path / "sub", {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    )
    (source / PACKAGE / "rope.py").unlink()
    os.symlink(secret, source / PACKAGE / "rope.py")
    staged = intake.stage("sub", source, tmp_path / "staged")
    assert staged.problems == [
        "rope.py is a link out of the submission, so it was not graded"
    ]
    assert "ANSWER" not in staged_text(staged, "rope")


def test_an_unreadable_zip_is_one_problem(tmp_path):
    path = tmp_path / "broken.zip"
    path.write_bytes(b"PK\x03\x04 definitely not a zip")
    staged = intake.stage("broken", path, tmp_path / "staged")
    assert staged.problems[0].startswith("the zip cannot be read")
    assert "is missing" in staged_text(staged, "attention")


def test_the_example_broken_archive_is_reported(tmp_path):
    examples = REPO / "examples" / "submissions"
    if not examples.is_dir():
        pytest.skip("no examples/submissions")
    for name, source in intake.find([examples]):
        staged = intake.stage(name, source, tmp_path / name)
        assert (staged.root / PACKAGE / "__init__.py").is_file()
    shutil.rmtree(tmp_path)


@pytest.mark.parametrize(
    "files",
    [
        {f"{PACKAGE}/attention.py": b"x = 1\n"},
        {"attention.py": b"x = 1\n"},
    ],
)
def test_a_batch_folder_of_one_student_grades_that_student(tmp_path, files):
    batch = tmp_path / "batch"
    write_tree(batch / "bob", files)
    [(name, source)] = intake.find([batch])
    assert name == "bob"
    staged = intake.stage(name, source, tmp_path / "staged")
    assert staged_text(staged, "attention") == "x = 1\n"


def test_a_batch_folder_of_one_students_zip_grades_that_student(tmp_path):
    student = tmp_path / "batch" / "bob"
    student.mkdir(parents=True)
    write_zip(student / "hw.zip", {"attention.py": b"x = 1\n"})
    assert intake.find([tmp_path / "batch"]) == [("bob", student / "hw.zip")]


def test_a_folder_holding_one_zip_is_that_submission(tmp_path):
    upload = tmp_path / "submission"
    upload.mkdir()
    write_zip(
        upload / "hw.zip", {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    )
    assert intake.find([upload]) == [("submission", upload / "hw.zip")]


@pytest.mark.parametrize(
    "prefix",
    [
        "a/b/transformer_hw/",
        "a/b/c/transformer_hw/",
        "a/b/c/",
        "handout/assignments/transformer_hw/",
    ],
)
@pytest.mark.parametrize("as_zip", [False, True])
def test_a_single_package_is_found_up_to_three_folders_down(tmp_path, prefix, as_zip):
    """Depth counts the folders above transformer_hw/ (or above bare module files), the same
    in zips and folders; the handout's own layout is one of them."""
    files = {prefix + name: data for name, data in reference_files().items()}
    files["handout/tests/graded/test_part1_attention.py"] = b"x = 1\n"
    files["handout/README.md"] = b"# not a module\n"
    source = upload(tmp_path, "alice", files, as_zip)
    assert intake.find([source]) == [("alice", source)]
    staged = intake.stage("alice", source, tmp_path / "staged")
    assert staged.problems == []
    assert staged_text(staged, "rope") == (REFERENCE / "rope.py").read_text()


@pytest.mark.parametrize("as_zip", [False, True])
def test_a_package_four_folders_down_is_reported(tmp_path, as_zip):
    files = {f"a/b/c/d/{PACKAGE}/{n}": d for n, d in reference_files().items()}
    source = upload(tmp_path, "deep", files, as_zip)
    staged = intake.stage("deep", source, tmp_path / "staged")
    deep = f"the module files are 4 folders down (`a/b/c/d/{PACKAGE}/`); "
    assert staged.problems == [deep + f"put {PACKAGE}/ at most 3 folders down"]


def test_of_several_packages_the_shallowest_is_graded(tmp_path):
    files = {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    files |= {f"old/{PACKAGE}/{n}": b"raise SystemExit\n" for n in reference_files()}
    staged = intake.stage("two", write_zip(tmp_path / "two.zip", files), tmp_path / "s")
    assert staged.problems == []
    assert staged_text(staged, "rope") == (REFERENCE / "rope.py").read_text()


@pytest.mark.parametrize("content", [{}, {"notes.txt": b"my answers are below\n"}])
@pytest.mark.parametrize("as_zip", [False, True])
def test_an_upload_without_module_files_is_told_what_to_upload(
    tmp_path, content, as_zip
):
    upload = tmp_path / "submission"
    upload.mkdir()
    if as_zip:
        write_zip(upload / "hw.zip", content)
    else:
        write_tree(upload, content)
    [(name, source)] = intake.find([upload])
    staged = intake.stage(name, source, tmp_path / "staged")
    [problem] = staged.problems
    assert problem.startswith("nothing to grade: the upload ")
    assert ("notes.txt" in problem) == bool(content)
    assert "python -m zipfile -c submission.zip assignments/transformer_hw" in problem


def corrupt_member(path: Path, member: str, how: str) -> None:
    """Damage one member of a zip: its deflate stream, its stored bytes (a bad CRC), or its
    compression method (one no reader knows)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    if how == "deflate":
        data[start] = 0xFF  # a final block of the reserved type 3
    elif how == "crc":
        data[start] ^= 0x01
    else:  # the method field in the local header and in the central directory
        unknown = (99).to_bytes(2, "little")
        data[info.header_offset + 8 : info.header_offset + 10] = unknown
        entry = data.find(b"PK\x01\x02")
        while entry != -1:
            length = int.from_bytes(data[entry + 28 : entry + 30], "little")
            if data[entry + 46 : entry + 46 + length] == member.encode():
                data[entry + 10 : entry + 12] = unknown
            entry = data.find(b"PK\x01\x02", entry + 4)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["deflate", "crc", "method"])
def test_a_member_that_fails_to_decompress_is_that_files_problem(tmp_path, how):
    path = tmp_path / "bad.zip"
    method = zipfile.ZIP_STORED if how == "crc" else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in reference_files().items():
            archive.writestr(f"{PACKAGE}/{name}", data)
    corrupt_member(path, f"{PACKAGE}/rope.py", how)
    staged = intake.stage("bad", path, tmp_path / "staged")
    [problem] = staged.problems
    assert problem.startswith("rope.py cannot be decompressed from the zip (")
    assert "is missing" in staged_text(staged, "rope")
    assert staged_text(staged, "attention") == (REFERENCE / "attention.py").read_text()


# The shapes course platforms export ---------------------------------------------------------


def lms_export(folder: Path, students: dict[str, dict[str, bytes]]) -> Path:
    """A folder per student holding that student's ``submission.zip``, as an LMS exports."""
    for name, files in students.items():
        (folder / name).mkdir(parents=True)
        write_zip(folder / name / "submission.zip", files)
    return folder


def test_a_folder_per_student_holding_a_zip_is_one_student_each(tmp_path):
    package = {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    batch = lms_export(
        tmp_path / "class2", {"ada": package, "bo": package, "cy": {"notes.txt": b"hi"}}
    )
    (batch / "bo" / "comments.txt").write_text("late by a day")  # a platform's note
    write_tree(batch / "dee" / "unzipped", package)  # one folder, not a zip
    (batch / "eve").mkdir()  # an empty folder: a student, told what to upload
    found = dict(intake.find([batch]))
    assert found == {
        "ada": batch / "ada" / "submission.zip",
        "bo": batch / "bo" / "submission.zip",
        "cy": batch / "cy" / "submission.zip",
        "dee": batch / "dee",
        "eve": batch / "eve",
    }
    for name in ("ada", "bo", "dee"):
        assert intake.stage(name, found[name], tmp_path / name).problems == []
    for name in ("cy", "eve"):
        [problem] = intake.stage(name, found[name], tmp_path / name).problems
        assert problem.startswith("nothing to grade")


def test_a_batch_of_one_students_folder_with_notes_beside_the_zip(tmp_path):
    package = {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    batch = lms_export(tmp_path / "export", {"ada": package})
    (batch / "ada" / "comments.txt").write_text("submitted on time")
    assert intake.find([batch]) == [("ada", batch / "ada" / "submission.zip")]


def test_a_zip_of_student_folders_is_a_batch(tmp_path):
    package = {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    inner = write_zip(tmp_path / "inner.zip", package).read_bytes()
    export = {"export/ada/submission.zip": inner, "export/bo/submission.zip": inner}
    export |= {f"export/cy/{name}": data for name, data in package.items()}
    export["export/../../escaped.zip"] = inner
    export["export/readme.txt"] = b"graded by hand"
    zipped = write_zip(tmp_path / "class2.zip", export)
    found = dict(intake.find([zipped], unpack=tmp_path / "unpacked"))
    assert sorted(found) == ["ada", "bo", "cy"]
    assert not (tmp_path / "escaped.zip").exists()
    for name, source in found.items():
        assert tmp_path / "unpacked" in source.parents
        assert intake.stage(name, source, tmp_path / name).problems == []
    # A student's own zip with a copy kept beside the package is no batch.
    copy = package | {f"old/{n}": d for n, d in package.items()}
    one = write_zip(tmp_path / "one.zip", copy)
    assert intake.find([one], unpack=tmp_path / "unpacked") == [("one", one)]


def test_thousands_of_extra_files_make_one_capped_problem(tmp_path):
    files = {f"{PACKAGE}/{n}": d for n, d in reference_files().items()}
    files |= {f"{PACKAGE}/{'h' * 200}{i}.py": b"x = 1\n" for i in range(3000)}
    for as_zip in (False, True):
        source = upload(tmp_path, f"many{as_zip}", files, as_zip)
        [problem] = intake.stage("many", source, tmp_path / f"s{as_zip}").problems
        assert problem.count("`") == 2 * intake.safe_text.MAX_NAMES
        assert f"and {3000 - intake.safe_text.MAX_NAMES} more" in problem
        assert len(problem) < 3000


def test_no_submission_takes_the_name_of_an_output(tmp_path):
    outputs = ["gradebook.csv", "report.html", "shard.json", "results.json"]
    for name in outputs:
        write_tree(tmp_path / "batch" / name, {"attention.py": b"x = 1\n"})
    names = [name for name, _ in intake.find([tmp_path / "batch"])]
    assert len(names) == len(outputs) and not set(names) & intake.RESERVED
