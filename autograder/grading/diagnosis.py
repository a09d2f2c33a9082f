"""Name the known mistake behind a failing graded test: replay the test's requests against the
bug zoo and see whose answers are the student's.

While a graded test runs, its ``hw`` keeps a ``Journal``: every request the test made (plain data
and handles) and what came back, an answer or the kind of error raised. When the test fails, the
grading process replays the journal against the reference and against every zoo mutant of the
test's part (trusted code, run here in-process, never in the sandbox), in a staged copy of each.
A mistake is named only when the reference's answers differ from the student's, and the mutants
whose answers all agree with the student's (within the tolerance of each tensor's dtype) share
one description: two descriptions, or none, name nothing (of two, the part's other failures
may decide once all have run: ``runner``). A later part's mistake may be named on top of an
earlier part's named one, with the reference carrying both (``_on_top_of_earlier``).

Replays cost only where a test fails, and only for mutants that can differ from the reference
there: the reference's replay records which of its functions ran, and a mutant whose edits lie
inside functions that never ran gives the reference's answers, so it is not replayed.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import itertools
import random
import re
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from autograder.facts.points import (
    PACKAGE,
    PARTS,
    builds_on,
    failed_earlier,
    failed_reached,
)
from autograder.facts.protocol import (
    ErrorInfo,
    Handle,
    StudentError,
    map_plain,
    tensors_in,
)
from autograder.sandbox.executor import Executor, InProcessSubmission
from autograder.sources import intake, runner
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, Mutant, apply

LIKELY = "Likely mistake:"  # as the graded suite introduces a diagnosis (runner.LIKELY)
NO_MATCH = runner.NO_MATCH

#: How far apart two values of a dtype may lie and still be the same answer: the graded
#: suite's tolerances (tests/graded/compare.py), where rounding of a correct computation in
#: another style stays about 100 times below. Half precision carries about 3 decimal digits.
TOLERANCE = {
    torch.float64: 1e-10,
    torch.float32: 1e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
}
#: A Python float may come from a float32 computation (``loss.item()``).
FLOAT_TOLERANCE = TOLERANCE[torch.float32]
#: What came back from the second device agrees at float32's tolerance whatever its dtype: a
#: device may lack float64, and correct code may compute there at float32's precision, as the
#: graded suite allows (``tests/graded/compare.py``: ``SECOND_PRECISION``).
SECOND_DEVICE_TOLERANCE = TOLERANCE[torch.float32]


@dataclass(frozen=True)
class Entry:
    """One request of a test and its outcome: an answer, or what the error it raised means
    (``error_meaning``)."""

    op: str
    target: Handle | None
    name: str | None
    args: tuple
    kwargs: dict
    answer: object
    error: tuple[str, ...] | None
    example: (
        object  # the hypothesis example it belongs to (None outside property tests)
    )
    where: tuple[str, str] | None = None  # ``raised_where`` of its error
    way: tuple[tuple[str, str], ...] = ()  # the public functions on its error's way
    # Its answer reads values SPEC.md leaves open (``Submission.unspecified_values``).
    unspecified: bool = False


class Journal:
    """The requests of the test under way (``Submission.journal``): only those of its last
    hypothesis example are kept, the one that failed. ``failed_parts``: the parts with a
    failed test so far, in this submission; ``failures``: how many per part; ``named``: per
    part, the description each failure's diagnosis named (None where it named none);
    ``own``: the parts with a failure that ran no other failed part's code."""

    def __init__(self):
        self.entries: list[Entry] = []
        self.failed_parts: set[int] = set()
        self.failures: Counter[int] = Counter()
        self.named: dict[int, list[str | None]] = defaultdict(list)
        self.own: set[int] = set()

    def from_earlier(self, part: int) -> bool:
        """Whether every failure of ``part`` so far ran a failed earlier part's code and
        named no mistake: they show that part's mistake, not one of ``part``'s own."""
        return part not in self.own and not set(self.named.get(part, [])) - {None}

    def failed(self, part: int) -> None:
        """A test of ``part`` failed."""
        self.failed_parts.add(part)
        self.failures[part] += 1

    def only_name(self, part: int) -> str | None:
        """The one description the failures of ``part`` so far were named by, where they
        name one and no other. A failure that named none may name it once all have run (of
        two mistakes that fit, the one the part's other failures name: ``runner``), which
        checks then that every failure of the part names it (``runner._on_top_holds``)."""
        found = set(self.named.get(part, [])) - {None}
        return found.pop() if len(found) == 1 else None

    def __call__(
        self, op, target, name, args, kwargs, outcome, unspecified=False
    ) -> None:
        example = _current_example()
        if self.entries and self.entries[-1].example is not example:
            self.entries = []
        raised = isinstance(outcome, StudentError)
        error = error_meaning(outcome.info) if raised else None
        self.entries.append(
            Entry(
                op,
                target,
                name,
                _copied(args),
                _copied(kwargs),
                None if error else _copied(outcome),
                error,
                example,
                raised_where(outcome.info) if raised else None,
                _public_chain(outcome.info) if raised else (),
                unspecified,
            )
        )


def _current_example():
    from hypothesis.control import _current_build_context

    return _current_build_context.value


def _copied(value):
    """The tensors inside ``value`` copied: the test may change its own tensors later."""
    return map_plain(
        value, lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v
    )


# What an error means ---------------------------------------------------------------------------

_FRAME = re.compile(
    r'^  File "(?P<file>[^"]+)", line \d+, in (?P<function>\S+)\n(?P<line>    .*)?',
    re.MULTILINE,
)
_NUMBER = re.compile(r"-?\b\d+(\.\d+)?(e-?\d+)?\b")
#: What a message names besides its kind: the operation that failed (``(aten.add.Tensor)``,
#: ``(when checking argument ... in method wrapper_CUDA_mm)``), at its end.
_OPERATION = re.compile(r"\s*\((aten\.|when checking)[^()]*\)\s*$")
#: ... and the function and the argument it names (``view(): argument 'size' failed to unpack
#: ...`` is what ``reshape(): argument 'shape' ...`` is: a float where a size goes).
_CALLER = re.compile(r"^[\w.]+\(\): ")
_QUOTED = re.compile(r"'[^'\s]*'")


def error_meaning(info: ErrorInfo) -> tuple:
    """What an error means, beyond its type, so that two errors of one kind but of different
    causes never match (``errors_alike``). An error the package's own code raises (``raise``,
    ``assert``) is in words of its own, so it means the SPEC.md clause it enforces: that of
    the public function (or method) that raised it, directly or through a private helper,
    by file and name, with the public functions that called it (``(type, "raised in", file,
    function, callers)``). An error of the library means its message with the numbers and
    the operation, the function and the names it quotes left out ("The size of tensor a (#)
    must match ...", "Expected all tensors to be on the same device ...")."""
    frames = list(_FRAME.finditer(info.traceback))
    statement = (frames[-1]["line"] or "").strip() if frames else ""
    chain = _public_chain(info)
    own = bool(frames) and _in_package(frames[-1]["file"])
    if own and chain and statement.startswith(("raise", "assert")):
        return (info.type_name, "raised in", *chain[-1], chain)
    first = info.message.strip().splitlines()[0] if info.message.strip() else ""
    general = _QUOTED.sub("'#'", _CALLER.sub("", _OPERATION.sub("", first)))
    return (info.type_name, _NUMBER.sub("#", general))


def errors_alike(a: tuple | None, b: tuple | None) -> bool:
    """Whether two ``error_meaning``s are one answer. Two raises of the package's own are
    when of one type, in one file, and one arose in a function on the other's way (the check
    of a dead row in the attention or in the softmax it calls; never a mask's check in the
    attention and a full cache's in the cache, nor two files' checks)."""
    if a is None or b is None or a[1:2] != ("raised in",) or b[1:2] != ("raised in",):
        return a == b
    return (
        a[0] == b[0]
        and a[2] == b[2]
        and (tuple(a[2:4]) in b[4] or tuple(b[2:4]) in a[4])
    )


def raised_where(info: ErrorInfo) -> tuple[str, str] | None:
    """``(file, function)``: the package's public function (or method) in which the error
    arose, itself or through a private helper, or through the library it called; None when it
    arose outside the package."""
    chain = _public_chain(info)
    return chain[-1] if chain else None


def _public_chain(info: ErrorInfo) -> tuple[tuple[str, str], ...]:
    """``(file, function)`` of each of the package's public functions on the error's way,
    the outermost first (its innermost private helper where it has no public one)."""
    own = [f for f in _FRAME.finditer(info.traceback) if _in_package(f["file"])]
    public = [f for f in own if _public(f["function"])] or own[-1:]
    return tuple((Path(f["file"]).name, f["function"]) for f in public)


def _in_package(file: str) -> bool:
    """Whether a traceback's file is the package's (its path absolute in a replay, relative to
    the worker's folder in the sandbox)."""
    return PACKAGE in Path(file.replace("\\", "/")).parts[:-1]


def _public(function: str) -> bool:
    return not function.startswith("_") or (
        function.startswith("__") and function.endswith("__")
    )


# What agrees with what ------------------------------------------------------------------------


def agrees(
    student, candidate, handles: dict[int, Handle], loosest: float = 0.0
) -> bool:
    """The same answer up to rounding (a tensor's dtype's tolerance, or ``loosest`` where that
    is larger); a handle matches one of the same type, and the pair is noted in ``handles``
    (the student's handle id -> the candidate's handle)."""
    if isinstance(student, Handle):
        if not isinstance(candidate, Handle):
            return False
        if student.ref.type_name != candidate.ref.type_name:
            return False
        handles.setdefault(student.ref.id, candidate)
        return handles[student.ref.id].ref == candidate.ref
    if isinstance(student, torch.Tensor):
        return isinstance(candidate, torch.Tensor) and _tensors_agree(
            student, candidate, loosest
        )
    if isinstance(student, (list, tuple)):
        return (
            type(candidate) is type(student)
            and len(candidate) == len(student)
            and all(agrees(s, c, handles, loosest) for s, c in zip(student, candidate))
        )
    if isinstance(student, dict):
        return (
            isinstance(candidate, dict)
            and candidate.keys() == student.keys()
            and all(agrees(student[k], candidate[k], handles, loosest) for k in student)
        )
    if type(student) is float and type(candidate) is float:
        return _tensors_agree(
            torch.tensor(student, dtype=torch.float64),
            torch.tensor(candidate, dtype=torch.float64),
            max(FLOAT_TOLERANCE, loosest),
        )
    return type(student) is type(candidate) and student == candidate


def _tensors_agree(a: torch.Tensor, b: torch.Tensor, loosest: float = 0.0) -> bool:
    if (a.shape, a.dtype, a.device.type) != (b.shape, b.dtype, b.device.type):
        return False
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    tol = max(TOLERANCE.get(a.dtype, TOLERANCE[torch.float32]), loosest)
    return bool(torch.isclose(a, b, rtol=tol, atol=tol, equal_nan=True).all())


# Candidates -----------------------------------------------------------------------------------


class _Stage:
    """The reference and every mutant staged once per process, in a folder of their own."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="autograder-diagnosis-"))
        atexit.register(shutil.rmtree, self.root, True)
        self.reference = self.root / "reference"
        shutil.copytree(SOLUTIONS, self.reference / PACKAGE)
        intake.keep_bytecode(self.reference / PACKAGE)
        self._mutants: dict[str, Path] = {}
        self.reach = {m.name: edited_functions(m) for m in CATALOGUE}

    def mutant(self, mutant: Mutant, base: tuple[Mutant, ...] = ()) -> Path:
        """The reference with the edits of ``base`` (mutants of other files) and ``mutant``."""
        names = [m.name for m in (*base, mutant)]
        key = "+".join(names)
        if key not in self._mutants:
            source, kept = SOLUTIONS, self.reference / PACKAGE
            for i, m in enumerate((*base, mutant)):
                folder = self.root / "+".join(names[: i + 1])
                source = apply(m, source, folder) / PACKAGE
                # Each file edited earlier in the chain was compiled there already.
                intake.keep_bytecode(source, like=kept)
                kept = source
            self._mutants[key] = source.parent
        return self._mutants[key]


_STAGE: _Stage | None = None


def _stage() -> _Stage:
    global _STAGE
    if _STAGE is None:
        _STAGE = _Stage()
    return _STAGE


def edited_functions(mutant: Mutant) -> frozenset[int] | None:
    """The first lines (as ``co_firstlineno`` gives them) of the reference's functions that
    hold the mutant's edits (a default in a signature acts only when its function is called),
    or None when an edit lies outside every function, or in a decorator (a class or the module:
    it acts whatever runs)."""
    found = _edited_definitions(mutant)
    if found is None:
        return None
    return frozenset(
        min([f.lineno, *(d.lineno for d in f.decorator_list)]) for f in found
    )


def _edited_definitions(mutant: Mutant) -> list[ast.FunctionDef] | None:
    """The innermost function of the reference holding each of the mutant's edits; None when
    an edit lies outside every function."""
    source, functions = _reference_functions(mutant.file)
    found = []
    for old, _ in mutant.edits:
        # The lines the edit changes, without the line breaks around them.
        at = source.index(old) + len(old) - len(old.lstrip("\n"))
        start = source.count("\n", 0, at) + 1
        end = start + old.strip("\n").count("\n")
        inside = [
            f for f in functions if f.lineno <= start and end <= (f.end_lineno or 0)
        ]
        if not inside:
            return None
        found.append(max(inside, key=lambda f: f.lineno))
    return found


@functools.cache
def _reference_functions(file: str) -> tuple[str, list[ast.FunctionDef]]:
    """The reference's text of ``file`` and every function defined in it, read once: each
    mutant of the file asks for them (a fifth of a grading process's first diagnosis)."""
    source = (SOLUTIONS / file).read_text(encoding="utf-8")
    functions = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    return source, functions


@contextlib.contextmanager
def ran_functions(
    package: Path,
    ran: set[tuple[str, int]],
    at_import: set[tuple[str, int]] | None = None,
):
    """Note ``(file name, first line)`` of every function of ``package`` that runs; those run
    while a module of the package is being imported go to ``at_import``, where given. (A trace
    function, not a profile one: it is called as each Python frame starts, where a profile
    function is also called around every call into C, torch's operators included.)"""
    prefix = str(package) + "/"
    previous = sys.gettrace()

    def importing(frame) -> bool:
        while frame is not None:
            code = frame.f_code
            if code.co_name == "<module>" and code.co_filename.startswith(prefix):
                return True
            frame = frame.f_back
        return False

    def trace(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(prefix):
            where = (Path(code.co_filename).name, code.co_firstlineno)
            if at_import is not None and importing(frame.f_back):
                at_import.add(where)
            else:
                ran.add(where)
        # None: no tracing of the frame's lines

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)


@contextlib.contextmanager
def _grading_state_kept():
    """Replays leave this process as they found it: the package a run in-process imported
    (``Executor``), torch's and Python's random state, torch's default dtype."""
    path, roots = list(sys.path), Executor._roots
    modules = {
        k: v
        for k, v in sys.modules.items()
        if k == PACKAGE or k.startswith(PACKAGE + ".")
    }
    rng, py_rng, dtype = (
        torch.get_rng_state(),
        random.getstate(),
        torch.get_default_dtype(),
    )
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        for k in [
            k for k in sys.modules if k == PACKAGE or k.startswith(PACKAGE + ".")
        ]:
            del sys.modules[k]
        sys.modules.update(modules)
        sys.path[:] = path
        Executor._roots = roots
        torch.set_rng_state(rng)
        random.setstate(py_rng)
        torch.set_default_dtype(dtype)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _alike(root: Path, entries: list[Entry], device, outcomes: list | None = None):
    """Per request of ``entries``, in order, whether the submission at ``root`` answers it as
    the student's code did (a generator: closing it ends the replay); ``outcomes`` gets each
    ``(answer, error)``, copied."""
    handles: dict[int, Handle] = {}

    def theirs(value):
        if isinstance(value, Handle):
            return handles[value.ref.id]  # KeyError: a handle the candidate never gave
        return value

    with InProcessSubmission(root, device) as hw:
        for e in entries:
            try:
                target = theirs(e.target)
                args, kwargs = map_plain(e.args, theirs), map_plain(e.kwargs, theirs)
            except KeyError:
                if outcomes is not None:
                    outcomes.append((None, ("a handle never given",)))
                yield False
                continue
            try:
                answer, error = hw.request(e.op, target, e.name, *args, **kwargs), None
            except StudentError as err:
                answer, error = None, error_meaning(err.info)
            if outcomes is not None:
                outcomes.append((_copied(answer), error))
            loosest = SECOND_DEVICE_TOLERANCE if e.op == "elsewhere" else 0.0
            yield errors_alike(error, e.error) and bool(
                error or agrees(e.answer, answer, handles, loosest)
            )


#: The kind of error the sandbox gives a request whose process ended (``autograder.sandbox
#: .client``): no candidate replayed in this process answers so, so no mistake can match.
PROCESS_ENDED = "ProcessExit"


def replay(
    root: Path, entries: list[Entry], device, alike: frozenset[int] = frozenset()
) -> list[int] | None:
    """The requests of ``entries`` that the submission at ``root`` answers otherwise than the
    student's code did, where all of them are in ``alike``; None at the first one that is
    not (``replay(...) == []``: every one answered alike)."""
    differs, _ = _replay_until(root, entries, device, alike)
    return differs


def _replay_until(
    root: Path,
    entries: list[Entry],
    device,
    alike: frozenset[int],
    outcomes: list | None = None,
) -> tuple[list[int] | None, int | None]:
    """``replay``'s answer, and the request it stopped at (None where it ran to the end);
    ``outcomes`` gets each answer, as ``_alike`` gives them."""
    differs = []
    with contextlib.closing(_alike(root, entries, device, outcomes)) as answers:
        for i, same in enumerate(answers):
            if not same:
                if i not in alike:
                    return None, i
                differs.append(i)
    return differs, None


def diagnose(
    entries: list[Entry], part: int, device, earlier: frozenset[int] = frozenset()
) -> str | None:
    """The description of the one known mistake of ``part`` whose mutants answer ``entries``
    as the student did, where the reference does not; None when no single one does."""
    found = matching(entries, part, device, earlier)
    return next(iter(found)) if len(found) == 1 else None


def matching(
    entries: list[Entry],
    part: int,
    device,
    earlier: frozenset[int] = frozenset(),
    refuted: set[str] | None = None,
) -> frozenset[str]:
    """The descriptions of the known mistakes of ``part`` whose mutants answer ``entries``
    as the student did, where the reference does not (empty where none does). Where
    none of ``part`` does, one of the ``earlier`` parts' (parts it builds on whose tests have
    not failed), where a value shows it: their mistake made in this part's code, a scale left
    out in the heads and not in the attention.

    A mutant that answers every request alike is preferred; failing one, a mutant may answer
    otherwise where the student's code answers as the reference does (the mistake made in
    fewer places than the mutant makes it: in one branch of two, or beside code of its own),
    on requests that ask what a wrongly answered one asks (``_tolerated``).
    Either way it answers alike every request the reference answers otherwise, and one of
    those is a value, or an error that arose in a function its edits lie in: an error alike that
    comes from elsewhere shows a symptom several causes share (a mask of the wrong shape from
    a mask or from positions restarting at 0), never which of them it is. Where the student's
    process ended, at once: replaying every candidate would find none. ``refuted`` gets the
    descriptions of ``part`` whose every mutant could act here and answers otherwise than the
    student's code (``_matching``)."""
    if not entries or any(e.error and e.error[0] == PROCESS_ENDED for e in entries):
        return frozenset()
    stage = _stage()
    with _grading_state_kept():
        reference: list = []
        alike, reached, given = _reference_replay(
            stage, entries, device, None, reference
        )
        if reached is None:
            return frozenset()
        otherwise = [entries[i] for i in range(len(entries)) if i not in alike]
        # An earlier part's mutant is shown by values alone: an error that arises in the
        # earlier part's code, called from this part's, is its refusal of what this part's
        # code handed it (a mask of the wrong shape), a symptom of this part's mistake.
        values = any(e.error is None for e in otherwise)
        for parts in ({part}, set(earlier) - {part} if values else set()):
            candidates = [
                m
                for m in CATALOGUE
                if m.part in parts
                and _may_differ(m, stage, reached)
                and _shown_by(m, otherwise)
            ]
            own = refuted if parts == {part} else None
            found = _matching(
                candidates,
                stage,
                entries,
                device,
                alike,
                refuted=own,
                given=given,
                reference=reference,
            )
            if found:
                return found
    return frozenset()


def _reference_replay(
    stage: _Stage,
    entries: list[Entry],
    device,
    root: Path | None = None,
    outcomes: list | None = None,
):
    """``(alike, reached, given)``: the requests the reference (or the submission at ``root``)
    answers as the student's code did, or whose answers hang on the random numbers or read
    values SPEC.md leaves open (``given``); and the functions that ran up to the first other
    one it answers otherwise (None when there is none). A mutant whose edits did not run by
    then answers that one as the reference does, so it cannot be the student's mistake.
    ``outcomes`` gets its answers, as ``_alike`` gives them."""
    root = root or stage.reference
    ran: set[tuple[str, int]] = set()
    reached_at: dict[int, set[tuple[str, int]]] = {}
    alike: set[int] = set()
    outcomes = [] if outcomes is None else outcomes
    with (
        ran_functions(root / PACKAGE, ran),
        contextlib.closing(_alike(root, entries, device, outcomes)) as answers,
    ):
        for i, same in enumerate(answers):
            if same:
                alike.add(i)
            else:
                reached_at[i] = set(ran)
    # Values SPEC.md leaves open are given too, as the test marked them.
    given = {i for i in reached_at if entries[i].unspecified}
    if set(reached_at) - given:
        given |= _given(root, entries, device, outcomes, alike | given)
    first = min(set(reached_at) - given, default=None)
    return alike | given, None if first is None else reached_at[first], frozenset(given)


def _given(root: Path, entries, device, outcomes: list, alike) -> set[int]:
    """The requests the submission at ``root`` answers otherwise than the student's code did,
    and otherwise again under other random numbers: their answers hang on the random numbers
    (a module's initial weights read back), which the test takes as given, whatever code
    answers them (a mistake is never shown there, nor ruled out)."""
    torch.manual_seed(random.randrange(2**31))
    random.seed(random.randrange(2**31))
    again: list = []
    last = max(set(range(len(entries))) - set(alike))
    with contextlib.closing(_alike(root, entries, device, again)) as answers:
        for i, _ in enumerate(answers):
            if i == last:
                break
    return {
        i
        for i in range(last + 1)
        if i not in alike and not _same_outcome(outcomes[i], again[i])
    }


def _same_outcome(a: tuple, b: tuple) -> bool:
    """Whether two replays' ``(answer, error)`` are one answer."""
    return errors_alike(a[1], b[1]) and bool(a[1] or agrees(a[0], b[0], {}))


def confirmed(named: str, parts) -> bool:
    """Whether the suite's likely mistake ``named`` is a known mistake's: some mutant of
    ``parts`` carries its diagnosis phrase. A name none carries is not named: the feedback
    names known mistakes only."""
    named = named.lower()
    return any(m.part in parts and m.diagnosis.lower() in named for m in CATALOGUE)


def _matching(
    candidates,
    stage,
    entries,
    device,
    alike,
    base=(),
    refuted: set[str] | None = None,
    given: frozenset[int] = frozenset(),
    reference: list | None = None,
    exactly: bool = False,
) -> frozenset[str]:
    """The descriptions of the ``candidates`` that answer ``entries`` alike: exactly, else
    otherwise only where ``alike``, else up to the state the mistake left (``_after_first``);
    those of the best of these that any does. ``refuted`` gets the descriptions whose every
    candidate answered otherwise a request the student's code answered, where its mistake
    acts (not one where the code stopped at an error of its own: ``_refutes``): there the
    student's code does not make that mistake (``runner._unrefuted`` takes the name out of
    the part's other failures).
    The ``given`` requests' answers hang on the random numbers, or read values SPEC.md leaves
    open: no answer there counts.
    ``exactly``: only those that answer every request alike."""
    tolerated = _tolerated(entries, alike) | given
    # Where the mutant answers otherwise a request the student's code answers right, an
    # error alike is too coarse to show the mistake (two checks of one function, a full cache
    # and a shape, raise alike): a value answered otherwise by the reference must show it.
    values = any(e.error is None for i, e in enumerate(entries) if i not in alike)
    exact, partly, first = set(), set(), set()
    # description -> whether every mutant of it answered otherwise
    tried: dict[str, bool] = {}
    for mutant in candidates:
        if mutant.description in exact:
            continue
        otherwise = False
        with contextlib.suppress(Exception):  # a mutant that breaks matches nothing
            root = stage.mutant(mutant, base)
            mine: list = []
            differs, stop = _replay_until(root, entries, device, tolerated, mine)
            otherwise = stop is not None and _refutes(
                entries, stop, alike, mine, reference
            )
            if differs is not None:
                differs = [i for i in differs if i not in given]
            if differs == []:
                exact.add(mutant.description)
            elif differs is not None and set(differs) <= alike:
                if values:
                    partly.add(mutant.description)
            elif differs is not None:
                first.add(mutant.description)
        tried[mutant.description] = tried.get(mutant.description, True) and otherwise
    if refuted is not None:
        refuted.update(
            d for d, every in tried.items() if every and not _made_anywhere(d)
        )
    return frozenset(exact if exactly else exact or partly or first)


@functools.cache
def _made_anywhere(description: str) -> bool:
    """Whether the zoo makes the mistake in several modules: a kind of operation (in place,
    a tensor made on the CPU) that code may make in any of its lines, so a replay of the
    zoo's places answering otherwise never shows that the student's code lacks it."""
    return len({m.file for m in CATALOGUE if m.description == description}) > 1


def _refutes(entries: list[Entry], i: int, alike, mine: list, reference) -> bool:
    """Whether the mutant's answer to request ``i``, where it answered otherwise than the
    student's code (``mine`` and ``reference``: its answers and the reference's), shows that
    the code lacks the mistake. A value does where the mistake acts there (the mutant answers
    otherwise than the reference): where it does not (a default in a signature, the request
    passing that argument), the value shows another difference, which the code may have
    beside the mistake. An error of the student's own (one the reference does not raise)
    does where the mistake does not act: the error has a cause the mistake lacks; where it
    acts, the code after the error, where the mistake would act, never ran (a check of its
    own on the weights, after masking them as the mutant does)."""
    if reference is None:
        return True
    acts = i < min(len(mine), len(reference)) and not _same_outcome(
        mine[i], reference[i]
    )
    if entries[i].error is None:
        return acts
    return not acts or i in alike


def _tolerated(entries: list[Entry], alike) -> frozenset[int]:
    """The requests a mutant may answer otherwise than the student's code did: those the
    student's code answers as the reference does, where they ask what some request the
    reference answers otherwise asks (the same function or method, the same attribute), on
    other inputs: the mistake made in fewer places than the mutant makes it; and the state a
    mistake left (``_after_first``). A mutant that answers otherwise a question of another
    kind (the cache's length, where only what append returns is wrong) shows a mistake the
    student's code does not make."""
    wrong = {_question(e) for i, e in enumerate(entries) if i not in alike}
    same_kind = {i for i in alike if _question(entries[i]) in wrong}
    return frozenset(same_kind) | _after_first(entries, alike)


#: Requests that run a function or method (``name``): plainly, on non-contiguous copies of
#: its arguments, for its gradients, watching its forward passes, under another default dtype
#: (and on the second device, whose request names the kind it carries).
_RUNS = frozenset(
    {"call", "method", "checked", "gradients", "forwards", "default_dtype"}
)


def _question(entry: Entry) -> tuple[str, str | None, str | None]:
    """What a request asks, whatever way it asks it: ``("run", the target's type, name)``
    for a function or method run in any of the ``_RUNS`` ways or on the second device (an
    attention without a cache run on non-contiguous copies asks what the same attention with
    a cache does, on other inputs), else its kind of request (an attribute read, an object
    made) with the same target type and name."""
    op = entry.op
    if op == "elsewhere" and entry.args and isinstance(entry.args[0], str):
        op = entry.args[0]
    kind = "run" if op in _RUNS else "new" if op == "build" else op
    target = entry.target.ref.type_name if isinstance(entry.target, Handle) else None
    return kind, target, entry.name


def _after_first(entries: list[Entry], alike) -> frozenset[int]:
    """The requests a mutant may answer otherwise, once it answered as the student's code did
    the first request the reference answers otherwise, with a value: the later requests to an
    object (a method of a handle). That first answer is the mistake itself; it leaves the
    object in another state (a cache filled at other positions), and what the object answers
    after shows the mistake compounded with where it was made (a mistake made only for single
    tokens, the mutant's for every chunk)."""
    first = next((i for i in range(len(entries)) if i not in alike), None)
    if first is None or entries[first].error is not None:
        return frozenset()
    return frozenset(
        i
        for i in range(first + 1, len(entries))
        if i not in alike and entries[i].target is not None
    )


def _shown_by(mutant: Mutant, otherwise: list[Entry]) -> bool:
    """Whether the requests the reference answers otherwise can show the mutant's mistake: one
    is a value, or an error that arose in the file its edits lie in (a function of theirs;
    the softmax's check of an all -inf slice, on the way from the attention that gave it the
    wrong axis; the forward pass of a module whose ``__init__`` made its head width a float).
    An error raised in another file is that code's refusal of what it was handed: a symptom
    several causes share."""
    return any(
        e.error is None or (e.where is not None and e.where[0] == mutant.file)
        for e in otherwise
    )


def _unchanged(submission: Path, part: int) -> bool:
    """Whether the student's files of ``part`` are the reference's, byte for byte."""
    for name in PARTS[part].files:
        mine = submission / PACKAGE / name
        if not mine.is_file() or mine.read_bytes() != (SOLUTIONS / name).read_bytes():
            return False
    return True


def _may_differ(mutant: Mutant, stage: _Stage, ran: set[tuple[str, int]]) -> bool:
    """Whether the mutant's edits can act on these requests: its edited functions ran in the
    reference's replay (an edit outside every function always can)."""
    lines = stage.reach[mutant.name]
    return lines is None or any((mutant.file, line) in ran for line in lines)


# The failure's message ------------------------------------------------------------------------


def amended(
    exc: BaseException,
    journal: Journal,
    part: int,
    submission: Path,
    device,
    hidden: bool,
    uses: tuple[int, ...] = (),
    hw=None,
):
    """``exc`` with the diagnosis added to its message. A failure that may come from another
    part names no mistake: where a part the test runs (its part's, and its marker's ``uses``)
    has failed a test (``journal``'s ``failed_parts``) and does not build on this one,
    ``exc`` without the suite's own likely mistake (one that builds on this one may fail
    because of it: the results decide, ``runner._sorted``), unless this part's own mistake
    shows on top of theirs, each named (``_on_top_of_earlier``); where the part's own
    files are the reference's, ``exc`` itself (the summary names the part to fix first). So
    does a failure where the student's code stopped at a stub (``submission`` holds the
    student's ``transformer_hw/``), or where the suite named a known mistake (``confirmed``);
    a name of another is taken out, and the replay's diagnosis given instead. ``exc`` is an
    ``AssertionError``, a ``StudentError`` or pytest's failure. A file the grader could not use
    ran no code: there is nothing to diagnose. Where no mistake matches, ``hw`` (the student's
    submission) is asked whether a call of the test changes an argument in place
    (``_changes_in_place``)."""
    blocked = failed_earlier(part, uses, journal.failed_parts)
    if blocked:
        found, on_top = _on_top_of_earlier(journal, blocked, part, device)
        journal.named[part].append(found)
        if found is None:
            return _without_likely(exc, hidden)
        message = runner.explain(_without_likely(exc, hidden), hidden)
        better = _with_message(exc, f"{message}\n{LIKELY} {found}")
        better.on_top = on_top
        return better
    journal.own.add(part)
    if runner.student_error(exc) == "NotImplementedError":
        journal.named[part].append(None)
        return exc
    if runner.unusable_file(exc) or _unchanged(submission, part):
        journal.named[part].append(None)
        return exc
    earlier = frozenset(builds_on(part))
    # Not blocked: the failed parts it runs all build on this one too.
    mutual = failed_reached(part, uses, journal.failed_parts)
    named = runner.diagnosis(exc)
    if (
        named
        and confirmed(named, {part} | earlier)
        and not _contradicted(named, journal.entries, {part} | earlier, device)
    ):
        journal.named[part].append(_description_of(named, part))
        return _marked_on_top(exc, journal, mutual, part, device)
    message = runner.explain(_without_likely(exc, hidden), hidden)
    refuted: set[str] = set()
    found = matching(journal.entries, part, device, earlier, refuted)
    if not found and hw is not None and _changes_in_place(hw, journal.entries):
        found = frozenset({IN_PLACE})
    one = next(iter(found)) if len(found) == 1 else None
    journal.named[part].append(one)
    better = _with_message(
        exc, f"{message}\n{LIKELY} {one}" if one else f"{message}\n{NO_MATCH}"
    )
    if len(found) > 1:
        # Which of them the part's other failures name decides, once all have run.
        better.among = tuple(sorted((d, _phrases(d)) for d in found))
    better.refuted = tuple(sorted((d, _phrases(d)) for d in refuted))
    return _marked_on_top(better, journal, mutual, part, device)


#: The mistake of changing an argument in place, as the zoo describes it.
IN_PLACE = next(
    m.description
    for m in CATALOGUE
    if m.diagnosis == "in-place operation on an argument"
)
#: The most calls of one failing test ``_changes_in_place`` makes again.
MAX_IN_PLACE_CHECKS = 8


def _changes_in_place(hw, entries: list[Entry]) -> bool:
    """Whether a call of the test, made again in the student's process as a ``checked``
    request (its tensor arguments handed over as copies, compared with what was sent once it
    returns), changes one of its arguments in place. Such a mistake shows in most tests only
    as wrong values (a block whose norm centres the block's input, which its residual then
    adds), and the zoo makes it in a few places only, so no replay need answer alike. Made
    again, outside the test's journal: a function, or a module called, that answered without
    an error, whose arguments hold tensors and no handle. Nothing else: a call changes a cache,
    a model or an optimizer handed to it by design, and a later test may hold the same one."""
    calls = [
        e
        for e in entries
        if (e.op == "call" or (e.op == "method" and e.name in ("__call__", "forward")))
        and e.error is None
        and tensors_in(e.args, e.kwargs)
        and not _holds_handle((e.args, e.kwargs))
    ]
    journal, hw.journal = hw.journal, None
    try:
        for e in calls[:MAX_IN_PLACE_CHECKS]:
            with contextlib.suppress(Exception):
                _, changed = hw.request(
                    "checked", e.target, e.name, *e.args, **e.kwargs
                )
                if changed:
                    return True
    finally:
        hw.journal = journal
    return False


def _holds_handle(value) -> bool:
    found: list[bool] = []
    map_plain(value, lambda v: found.append(isinstance(v, Handle)))
    return any(found)


def _marked_on_top(exc, journal: Journal, mutual: set[int], part: int, device):
    """``exc``, whose name is marked as holding on top of ``mutual``, failed parts it runs
    that build on this one too (part 3's cache on part 6's, part 6's heads on part 3's),
    where the replay on top of their mistakes names the same: whether this failure may come
    from there is known only at the end (``runner._sorted``), where the mark keeps the name
    while those parts' failures name their mistakes (``runner._on_top_holds``)."""
    one = journal.named[part][-1]
    if not mutual or one is None:
        return exc
    found, on_top = _on_top_of_earlier(journal, mutual, part, device)
    if found == one:
        exc.on_top = on_top
    return exc


def _contradicted(named: str, entries: list[Entry], parts, device) -> bool:
    """Whether the replay contradicts a name the suite gave from a symptom: an answer of the
    student's code is not finite (a NaN never matches the suite's ``likely=`` suspects, so a
    name there is a hint: NaN at logits near 1000 for the missing max subtraction, which one
    maximum subtracted for the whole tensor shows too), the test's requests are replayable
    (the reference answers them alike under other random numbers), and no mutant carrying
    the name's phrase answers them as the student's code did, where the reference does not
    (in fewer places, or up to the state it left, as a replay's name goes)."""
    if not any(_not_finite(e.answer) for e in entries):
        return False
    named = named.lower()
    mutants = [m for m in CATALOGUE if m.part in parts and m.diagnosis.lower() in named]
    if not entries or not mutants:
        return False
    if any(e.error and e.error[0] == PROCESS_ENDED for e in entries):
        return False
    stage = _stage()
    with _grading_state_kept():
        alike, reached, given = _reference_replay(stage, entries, device)
        if reached is None or given:
            # Nothing answered otherwise, or answers that hang on the random numbers.
            return False
        tolerated = _tolerated(entries, alike)
        for mutant in mutants:
            with contextlib.suppress(Exception):  # a mutant that breaks matches nothing
                if replay(stage.mutant(mutant), entries, device, tolerated) is not None:
                    return False
    return True


def _not_finite(answer) -> bool:
    """Whether an answer holds a NaN or an infinity."""
    found = []
    map_plain(
        answer,
        lambda v: found.append(
            isinstance(v, torch.Tensor)
            and (v.is_floating_point() or v.is_complex())
            and not bool(torch.isfinite(v).all())
        ),
    )
    return any(found)


def _phrases(description: str) -> tuple[str, ...]:
    """The diagnosis phrases a description's mistake is named by (the suite's own names carry
    one, a replay's the description, which holds it)."""
    return tuple(
        sorted({m.diagnosis for m in CATALOGUE if m.description == description})
    )


def _description_of(named: str, part: int) -> str | None:
    """The description of ``part``'s mistake whose phrase the suite's name carries."""
    found = {
        m.description
        for m in CATALOGUE
        if m.part == part and m.diagnosis.lower() in named.lower()
    }
    return found.pop() if len(found) == 1 else None


def _on_top_of_earlier(journal: Journal, blocked: set[int], part: int, device):
    """``(description, on_top)``: the mistake of ``part`` a failure names where parts it runs
    failed (``blocked``), each of whose failures named one mistake: the reference with those
    mistakes (their mutants) and one of this part's answers as the student's code did,
    where those mistakes alone do not (the failure does not come from there). ``on_top``:
    ``(part, phrases)`` of each earlier mistake, for the results to check once all have run
    (``runner._sorted``). ``(None, ())`` where there is none."""
    # A blocked part whose failures all came from earlier ones needs no mistake of its own;
    # its code is the reference's in the replay, so only a mutant that answers every request
    # alike shows this part's mistake then.
    earlier = {
        k: journal.only_name(k) for k in sorted(blocked) if not journal.from_earlier(k)
    }
    exactly = len(earlier) < len(blocked)
    if not earlier or None in earlier.values() or not journal.entries:
        return None, ()
    entries = journal.entries
    if any(e.error and e.error[0] == PROCESS_ENDED for e in entries):
        return None, ()
    stage = _stage()
    each = [[m for m in CATALOGUE if m.description == d] for d in earlier.values()]
    found: set[str] = set()
    with _grading_state_kept():
        bases = []
        for base in itertools.product(*each):
            replayed = _replay_alike(stage, base, entries, device)
            if replayed is None or replayed[1] is None:
                # The earlier mistakes alone answer so: the failure comes from there (known
                # before any of this part's mutants is replayed on top of another base).
                return None, ()
            bases.append((base, replayed))
        for base, (alike, reached, given) in bases:
            otherwise = [entries[i] for i in range(len(entries)) if i not in alike]
            candidates = [
                m
                for m in CATALOGUE
                if m.part == part
                and _may_differ(m, stage, reached)
                and _shown_by(m, otherwise)
            ]
            found |= _matching(
                candidates,
                stage,
                entries,
                device,
                alike,
                base,
                given=given,
                exactly=exactly,
            )
            if len(found) > 1:  # more bases can only add names
                return None, ()
    if len(found) != 1:
        return None, ()
    on_top = tuple((k, _phrases(d)) for k, d in earlier.items())
    return found.pop(), on_top


def _replay_alike(stage: _Stage, base, entries, device):
    """``(alike, reached, given)`` of the reference with the mutants ``base``, as
    ``_reference_replay`` gives them; None where it breaks."""
    with contextlib.suppress(Exception):  # a mutant that breaks matches nothing
        root = stage.mutant(base[-1], base[:-1])
        return _reference_replay(stage, entries, device, root)
    return None


def _without_likely(exc: BaseException, hidden: bool):
    """``exc`` without the suite's "Likely mistake" lines (the student's own words kept)."""
    if not runner.diagnosis(exc):
        return exc
    message = runner.explain(exc, hidden)
    while named := runner.diagnosis(_with_message(exc, message)):
        lines = message.splitlines()
        at = max(
            (
                i
                for i, line in enumerate(lines)
                if line.lstrip().startswith(LIKELY) and named in line
            ),
            default=None,
        )
        if at is None:
            break
        message = "\n".join(lines[:at] + lines[at + 1 :])
    return _with_message(exc, message)


def _with_message(exc: BaseException, message: str):
    if isinstance(exc, pytest.fail.Exception):
        better = pytest.fail.Exception(message, pytrace=False)
    else:
        better = AssertionError(message)
    # What the student's code raised stays behind it: its words are never taken for ours.
    better.__cause__ = exc
    return better
