"""Diagnosis by replay (``autograder/grading/diagnosis.py``): a failing test names the zoo mistake whose
answers on the test's own requests are the student's, only when exactly one description fits
and the reference does not; and the zoo grades each mutant on the parts that can reach it.

The rates on the whole held-apart set are ``autograder zoo``'s report; here the mechanism
itself, on cheap parts, with mistakes it was not built from (alice's style)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autograder.batches import zoo
from autograder.batches.zoo import rates, reach
from autograder.batches.zoo.restyled import ALICE, RESTYLED
from autograder.facts.points import PACKAGE, PARTS
from autograder.facts.protocol import ErrorInfo, Handle, HandleRef, StudentError
from autograder.grading import diagnosis
from autograder.sandbox.executor import InProcessSubmission
from autograder.sources import runner
from autograder.sources.release import SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, WORDING, Mutant, apply

RESTYLED_BY_NAME = {r.name: r for r in RESTYLED}
MUTANTS = {m.name: m for m in CATALOGUE}


def journal_of(folder: Path, requests) -> list[diagnosis.Entry]:
    """The journal ``requests(hw)`` leaves on the submission in ``folder``."""
    with InProcessSubmission(folder) as hw:
        hw.journal = diagnosis.Journal()
        requests(hw)
        return hw.journal.entries


def masks_of(hw) -> None:
    hw.call("masks.causal_mask", 3)
    hw.call("masks.causal_mask", 2, 5)


def submission(tmp_path: Path, name: str) -> Path:
    return RESTYLED_BY_NAME[name].write(tmp_path / name)


def test_a_restyled_mistake_gets_its_own_description(tmp_path):
    entries = journal_of(submission(tmp_path, "alice-causal-ignores-offset"), masks_of)
    found = diagnosis.diagnose(entries, 2, "cpu")
    assert found == MUTANTS["causal-ignores-offset"].description


def test_a_correct_style_gets_nothing_named(tmp_path):
    entries = journal_of(ALICE.parent, masks_of)
    assert diagnosis.diagnose(entries, 2, "cpu") is None


def test_behaviour_no_single_mistake_explains_names_nothing(tmp_path):
    """Both causal-mask mistakes at once (``triu(0)``): no mutant answers alike."""
    both = dataclasses.replace(
        RESTYLED_BY_NAME["alice-causal-hides-diagonal"].mutant,
        edits=(("triu(diagonal=shift + 1)", "triu(0)"),),
    )
    folder = dataclasses.replace(
        RESTYLED_BY_NAME["alice-causal-hides-diagonal"], mutant=both
    ).write(tmp_path / "both")
    assert diagnosis.diagnose(journal_of(folder, masks_of), 2, "cpu") is None


def test_two_descriptions_that_fit_name_nothing(tmp_path):
    """With d_v = 1, scaling by 1/sqrt(d_v) is no scaling at all: both mistakes answer
    alike, and naming either would be a guess."""
    q, k = torch.randn(1, 3, 4, dtype=torch.float64), torch.randn(1, 3, 4)
    v = torch.randn(1, 3, 1, dtype=torch.float64)

    def attend(hw):
        hw.call("attention.scaled_dot_product_attention", q, k.double(), v)

    folder = submission(tmp_path, "alice-scale-by-sqrt-d_v")
    assert diagnosis.diagnose(journal_of(folder, attend), 1, "cpu") is None
    wider = torch.randn(1, 3, 2, dtype=torch.float64)

    def attend_wider(hw):
        hw.call("attention.scaled_dot_product_attention", q, k.double(), wider)

    found = diagnosis.diagnose(journal_of(folder, attend_wider), 1, "cpu")
    assert found == MUTANTS["scale-by-sqrt-d_v"].description


def test_replays_leave_the_students_package_and_random_state(tmp_path):
    """In-process grading: after a diagnosis the student's own modules still answer, and
    torch's random numbers go on as if nothing had run."""
    folder = submission(tmp_path, "alice-causal-ignores-offset")
    with InProcessSubmission(folder) as hw:
        hw.journal = diagnosis.Journal()
        masks_of(hw)
        torch.manual_seed(5)
        diagnosis.diagnose(hw.journal.entries, 2, "cpu")
        drawn = torch.rand(3)
        wrong = hw.call("masks.causal_mask", 2, 5)
    torch.manual_seed(5)
    assert torch.equal(drawn, torch.rand(3))
    assert not torch.equal(wrong, torch.ones(2, 5, dtype=torch.bool).triu(4)), (
        "the reference's causal_mask answered for the student's"
    )


def test_only_the_failing_examples_requests_are_kept(monkeypatch):
    examples = iter([object(), object()])
    first, second = next(examples), next(examples)
    current = first
    monkeypatch.setattr(diagnosis, "_current_example", lambda: current)
    journal = diagnosis.Journal()
    journal("call", None, "masks.causal_mask", (2,), {}, torch.zeros(2))
    current = second
    journal("call", None, "masks.causal_mask", (3,), {}, torch.zeros(3))
    journal("call", None, "masks.causal_mask", (4,), {}, torch.zeros(4))
    assert [e.args for e in journal.entries] == [(3,), (4,)]


@pytest.mark.parametrize(
    ("dtype", "close", "far"),
    [(torch.float64, 1e-12, 1e-8), (torch.float32, 1e-7, 1e-3)],
)
def test_answers_agree_within_their_dtypes_tolerance(dtype, close, far):
    a = torch.ones(3, dtype=dtype)
    assert diagnosis.agrees(a, a + close, {})
    assert not diagnosis.agrees(a, a + far, {})
    assert not diagnosis.agrees(a, a.to(torch.float16), {})
    nan = torch.tensor([float("nan"), 1.0], dtype=dtype)
    assert diagnosis.agrees(nan, nan.clone(), {})
    assert not diagnosis.agrees([a, 1], [a, 2], {})


def test_a_handle_agrees_with_one_handle_only():
    class Owner:
        pass

    from autograder.facts.protocol import Handle

    mine = Handle(Owner(), HandleRef(1, "KVCache"))
    theirs, other = Handle(Owner(), HandleRef(7, "KVCache")), HandleRef(8, "KVCache")
    handles = {}
    assert diagnosis.agrees(mine, theirs, handles)
    assert handles == {1: theirs}
    assert not diagnosis.agrees(mine, Handle(Owner(), other), handles)


def test_an_edit_acts_where_its_function_runs():
    """A default in a signature (train's lr) acts only when its function is called."""
    for name, file, function in (
        ("train-default-lr-3e-4", "charlm.py", "def train"),
        ("causal-ignores-offset", "masks.py", "def causal_mask"),
    ):
        lines = diagnosis.edited_functions(MUTANTS[name])
        source = (SOLUTIONS / file).read_text().splitlines()
        assert [source[n - 1].split("(")[0] for n in lines] == [function]


def test_every_phrase_has_words_that_hold_it():
    unworded = sorted({m.diagnosis for m in CATALOGUE} - set(WORDING))
    assert not unworded, (
        f"add {unworded} to WORDING (autograder/sources/zoo/mutants.py)"
    )
    assert set(WORDING) == {m.diagnosis for m in CATALOGUE}, "WORDING for no mutant"
    for phrase, words in WORDING.items():
        assert phrase.lower() in words.lower()


def test_the_restyled_set_is_apart_from_the_catalogue(tmp_path):
    """Each makes a catalogue mistake in code that differs from that mutant's."""
    assert len(RESTYLED) >= 60
    for r in RESTYLED:
        mutant = MUTANTS[r.of]
        mine = (r.write(tmp_path / r.name) / PACKAGE / r.mutant.file).read_text()
        theirs = zoo.apply(mutant, SOLUTIONS, tmp_path / f"{r.name}-catalogue")
        assert mine != (theirs / PACKAGE / mutant.file).read_text(), r.name


def test_every_failing_test_of_a_restyled_mistake_names_it(tmp_path):
    """Graded on part 4 in this process: the suite's own suspects name the frequency mistake
    in some of its failing tests only; the replay names it in the others."""
    restyled = RESTYLED_BY_NAME["alice-rope-frequency-without-2"]
    settings = zoo.grade.Settings(isolate=False, keyword="test_part4_")
    (graded,) = zoo._graded([(restyled.name, restyled.write(tmp_path))], settings, 1)
    failing = [t for t in graded.tests if not t.passed]
    lines = tuple(
        tuple(line for line in t.message.splitlines() if diagnosis.LIKELY in line)
        for t in failing
    )
    named = rates.Named(restyled, lines)
    assert len(failing) >= 3
    assert named.right == len(failing), lines


def test_a_correct_style_diagnosed_on_every_test_gets_nothing_named():
    """The stronger check on correct code, on parts 2 and 4: every test's requests replayed
    as if it had failed."""
    named = rates.named_on_every_test(
        ALICE.parent, "cpu", ["-k", "test_part2_ or test_part4_"]
    )
    assert named == []


# Grading each mutant on the parts that can reach it ------------------------------------------


#: In a fresh interpreter: for each part, the reference's modules that importing the files of
#: the part and of the parts it builds on loads, as Python itself imports them.
LOADED_BY_PART = """
import importlib, json, sys
from autograder.facts.points import PACKAGE, PARTS, builds_on
sys.path.insert(0, sys.argv[1])
found = {}
for k in PARTS:
    for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
        del sys.modules[name]
    for j in {k} | builds_on(k):
        for file in PARTS[j].files:
            importlib.import_module(f"{PACKAGE}.{file.removesuffix('.py')}")
    prefix = PACKAGE + "."
    found[k] = [m.removeprefix(prefix) + ".py" for m in sys.modules if m.startswith(prefix)]
print(json.dumps(found))
"""


def test_a_file_reaches_the_parts_whose_code_imports_it(tmp_path):
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED_BY_PART, str(SOLUTIONS.parent)],
        capture_output=True,
        text=True,
        check=True,
    )
    modules = {int(k): set(v) for k, v in json.loads(loaded.stdout).items()}
    for file in sorted({f for part in PARTS.values() for f in part.files}):
        loading = {k for k, names in modules.items() if file in names}
        assert zoo.parts_reaching(SOLUTIONS, file) == loading, file
    package = tmp_path / PACKAGE
    package.mkdir()
    for name in ("attention.py", "masks.py", "rope.py"):
        (package / name).write_text("")
    (package / "attention.py").write_text(
        textwrap.dedent("""\
        def f():
            from . import rope
        """)
    )
    assert 1 in zoo.parts_reaching(package, "rope.py")
    (package / "__init__.py").write_text("from transformer_hw.masks import x\n")
    assert zoo.parts_reaching(package, "masks.py") == set(PARTS)


def test_a_mutant_graded_without_a_test_it_needs_is_refused():
    def result(part: int, name: str) -> runner.TestResult:
        return runner.TestResult(f"t{part}::{name}", name, part, 1, False, True, "")

    reference = zoo.grade.Graded("reference", [result(2, "a"), result(7, "b")])
    graded = zoo.grade.Graded("m", [result(7, "b")])
    merged = zoo.with_reference(graded, reference, frozenset({"t7::b"}))
    assert [t.nodeid for t in merged.tests] == ["t2::a", "t7::b"]
    with pytest.raises(RuntimeError, match="1 needed tests did not run"):
        zoo.with_reference(graded, reference, frozenset({"t2::a", "t7::b"}))
    unknown = zoo.grade.Graded("m", [result(7, "b"), result(7, "c")])
    with pytest.raises(RuntimeError, match="1 unknown ones did"):
        zoo.with_reference(unknown, reference, frozenset({"t7::b"}))


def test_the_tests_needed_are_selected_by_part_or_by_name():
    tests_of = {k: set() for k in PARTS}
    tests_of |= {2: {"t2::a"}, 7: {"t7::b[1]", "t7::b[2]", "t7::c"}}
    every = frozenset({"t2::a", "t7::b[1]", "t7::b[2]", "t7::c"})
    assert zoo.selecting(every, tests_of) == ""
    assert zoo.selecting(every - {"t2::a"}, tests_of) == "test_part7_"
    assert zoo.selecting(frozenset({"t7::b[2]", "t2::a"}), tests_of) == "a or b"


def test_a_mutant_is_graded_on_the_tests_that_run_its_edits():
    """``reach``: a mutant of ``generate`` needs the generation tests, not the loss's; an edit
    outside every function, or in one that runs at import, needs every test of its part."""
    found = reach.Reach("cpu")
    generation = found.tests_running(MUTANTS["generate-refeeds-prefix"])
    assert generation and all("model_generation.py" in test for test in generation)
    everything = {t for t, part in found.part.items() if part == 7}
    assert generation < everything
    outside = Mutant(
        "module", "charlm.py", (("import torch", "import torch\nX = 1"),), 7, "x"
    )
    assert found.tests_running(outside) == everything
    # A function that ran as its module was imported made what every later test uses.
    refeeds = MUTANTS["generate-refeeds-prefix"]
    found.at_import = {(refeeds.file, n) for n in diagnosis.edited_functions(refeeds)}
    assert found.tests_running(refeeds) == everything


def _raised_info(type_name: str, message: str, frames: list[tuple[str, str, str]]):
    """An ``ErrorInfo`` whose traceback holds ``frames``: ``(file, function, line)``."""
    text = "".join(
        f'  File "{f}", line 1, in {fn}\n    {line}\n' for f, fn, line in frames
    )
    return ErrorInfo(type_name, message, f"{text}{type_name}: {message}\n", ())


def test_an_error_means_the_clause_its_own_code_raised_for():
    """A ValueError of the package's own means the public function that raised it (through a
    private helper too), whatever its words; one raised elsewhere means something else."""
    helper = _raised_info(
        "ValueError",
        "lengths out of range",
        [
            ("transformer_hw/masks.py", "padding_mask", "_check(lengths, t)"),
            ("transformer_hw/masks.py", "_check", "raise ValueError('...')"),
        ],
    )
    direct = _raised_info(
        "ValueError",
        "a length of 0 is below 1",
        [("/tmp/x/transformer_hw/masks.py", "padding_mask", "raise ValueError(")],
    )
    elsewhere = _raised_info(
        "ValueError",
        "a length of 0 is below 1",
        [("/tmp/x/transformer_hw/gqa.py", "append", "raise ValueError(")],
    )
    meaning = diagnosis.error_meaning
    assert meaning(helper) == meaning(direct) != meaning(elsewhere)


def test_raises_are_alike_where_one_arose_on_the_others_way_in_one_file():
    """The dead row checked in the softmax the attention calls, or in the attention itself:
    one clause. A mask checked in the attention and a full cache in the cache: two."""
    attention = ("transformer_hw/attention.py", "scaled_dot_product_attention", "o(x)")
    in_softmax = _raised_info(
        "ValueError",
        "all -inf",
        [attention, ("transformer_hw/attention.py", "softmax", "raise ValueError(")],
    )
    in_attention = _raised_info(
        "ValueError", "dead row", [attention[:2] + ("raise X",)]
    )
    forward = ("transformer_hw/gqa.py", "forward", "f(x)")
    full = _raised_info(
        "ValueError", "full", [forward, ("transformer_hw/gqa.py", "append", "raise X")]
    )
    mask = _raised_info("ValueError", "mask", [forward, attention[:2] + ("raise X",)])
    meaning, alike = diagnosis.error_meaning, diagnosis.errors_alike
    assert alike(meaning(in_softmax), meaning(in_attention))
    assert not alike(meaning(full), meaning(mask))
    assert not alike(meaning(in_softmax), None)


def test_a_library_error_means_its_message_without_numbers_and_operation():
    call = ("transformer_hw/gqa.py", "forward", "scores = scores + mask")
    size = "The size of tensor a ({}) must match the size of tensor b ({}) at dim {}"
    mixed = "Expected all tensors to be on the same device, but found {} ({})"
    meaning = diagnosis.error_meaning
    assert meaning(_raised_info("RuntimeError", size.format(4, 6, 3), [call])) == (
        meaning(_raised_info("RuntimeError", size.format(2, 5, 1), [call]))
    )
    assert meaning(
        _raised_info("RuntimeError", mixed.format("meta", "aten.add.Tensor"), [call])
    ) == meaning(
        _raised_info("RuntimeError", mixed.format("meta", "aten.mm.default"), [call])
    )
    assert meaning(_raised_info("RuntimeError", size.format(4, 6, 3), [call])) != (
        meaning(_raised_info("RuntimeError", mixed.format("meta", "x"), [call]))
    )


def test_a_replay_matches_an_error_by_its_meaning_not_its_type():
    """The reference raises causal_mask's ValueError; a ValueError the student's code raised
    for another clause is another answer."""

    def too_short(hw):
        with contextlib.suppress(StudentError):
            hw.call("masks.causal_mask", 3, 2)

    entries = journal_of(SOLUTIONS.parent, too_short)
    where = ("masks.py", "causal_mask")
    assert entries[0].error == ("ValueError", "raised in", *where, (where,))
    assert diagnosis.replay(SOLUTIONS.parent, entries, "cpu") == []
    padding = ("masks.py", "padding_mask")
    other = dataclasses.replace(
        entries[0], error=("ValueError", "raised in", *padding, (padding,))
    )
    assert diagnosis.replay(SOLUTIONS.parent, [other], "cpu") is None


def test_a_failure_after_a_part_it_builds_on_failed_names_no_mistake(tmp_path):
    """Part 6 runs part 2's masks: once part 2 failed, part 6's failures may come from there,
    so neither the suite's likely mistake nor a replay's is named."""
    journal = diagnosis.Journal()
    journal.failed_parts.add(2)
    named = AssertionError(
        "GQA output wrong\nLikely mistake: RoPE not offset by the cache length"
    )
    amended = diagnosis.amended(named, journal, 6, tmp_path, "cpu", hidden=False)
    assert str(amended) == "GQA output wrong"
    assert diagnosis.LIKELY not in str(amended) and runner.diagnosis(amended) == ""
    journal.failed_parts = {7}  # a later part: part 6 does not build on it
    assert diagnosis.amended(named, journal, 6, tmp_path, "cpu", False) is named


def _reference_with(tmp_path: Path, file: str, old: str, new: str) -> Path:
    """The reference with one edit, as a submission's folder."""
    mutant = Mutant("edited", file, ((old, new),), 0, "")
    return apply(mutant, SOLUTIONS, tmp_path / "edited")


def test_a_mistake_made_in_fewer_places_than_its_mutant_is_named(tmp_path):
    """The offset ignored only where it exceeds 2: the mutant answers causal_mask(2, 3)
    otherwise, where the student's code answers as the reference does, and every answer the
    reference gives otherwise is the mutant's."""
    folder = _reference_with(
        tmp_path,
        "masks.py",
        "[:, None] + (t_k - t_q)",
        "[:, None] + (t_k - t_q if t_k - t_q <= 2 else 0)",
    )

    def offsets(hw):
        hw.call("masks.causal_mask", 2, 3)
        hw.call("masks.causal_mask", 2, 5)

    entries = journal_of(folder, offsets)
    found = diagnosis.diagnose(entries, 2, "cpu")
    assert found == MUTANTS["causal-ignores-offset"].description
    # Where a part the replay takes as the reference's may differ (a part named on top of
    # another with its failures all from there), only a mutant answering every request
    # alike counts: this one does not.
    stage = diagnosis._stage()
    alike, _, given = diagnosis._reference_replay(stage, entries, "cpu")
    candidates = [m for m in CATALOGUE if m.part == 2]
    loose = diagnosis._matching(candidates, stage, entries, "cpu", alike, given=given)
    assert found in loose
    exact = diagnosis._matching(
        candidates, stage, entries, "cpu", alike, given=given, exactly=True
    )
    assert found not in exact


def test_an_error_alike_from_outside_the_mutants_edits_names_no_mistake(tmp_path):
    """A chunk's mask built for the chunk alone (causal_mask(t) with a cache) makes the
    attention refuse the mask; positions restarting at 0 make it refuse the same mask. The
    error alike is a symptom both share, raised far from either edit: nothing is named."""
    folder = _reference_with(
        tmp_path,
        "charlm.py",
        "mask = causal_mask(t, start + t, device=idx.device)",
        "mask = causal_mask(t, device=idx.device)",
    )
    idx = torch.tensor([[3, 1, 4, 1, 5, 2, 6]])

    with InProcessSubmission(SOLUTIONS.parent) as hw:
        torch.manual_seed(0)
        built = hw.new("charlm.CharLM", 8, d_model=8, n_heads=2, n_layers=1, d_ff=8)
        state = built.call("state_dict")

    def chunks(hw):
        model = hw.new("charlm.CharLM", 8, d_model=8, n_heads=2, n_layers=1, d_ff=8)
        model.load_state(dict(state))
        caches = model.call("make_caches", 1)
        model(idx[:, :4], caches=caches)
        with contextlib.suppress(StudentError):
            model(idx[:, 4:], caches=caches)

    entries = journal_of(folder, chunks)
    assert entries[-1].error[:2] == ("ValueError", "raised in")
    positions = _reference_with(
        tmp_path / "positions",
        "charlm.py",
        *MUTANTS["cached-forward-wrong-positions"].edits[0],
    )
    assert diagnosis.replay(positions, entries, "cpu") == []  # the same answers
    assert diagnosis.diagnose(entries, 7, "cpu") is None


def test_a_part_building_on_one_that_failed_later_keeps_no_name():
    """Public tests run before hidden ones: part 2's hidden failure comes after part 6's
    public one, and takes part 6's likely mistake away once the results are in."""

    def result(part, passed, message="", hidden=False):
        return runner.TestResult(
            f"t{part}{hidden}", "t", part, 1, hidden, passed, message, diagnosis=message
        )

    named = f"GQA output wrong\n{diagnosis.LIKELY} positions restart at 0"
    results = {
        "a": result(6, False, named),
        "b": result(2, False, "causal_mask wrong", hidden=True),
        "c": result(1, False, f"softmax wrong\n{diagnosis.LIKELY} no max subtracted"),
    }
    by_part = {t.part: t for t in runner._sorted(results)}
    assert by_part[6].message == "GQA output wrong" and not by_part[6].diagnosis
    assert by_part[1].message == results["c"].message  # part 1 builds on no part


def test_an_earlier_parts_mistake_made_in_this_parts_code_is_named(tmp_path):
    """The heads undo the attention's scale (a mistake of part 1 made in part 3's code):
    no part 3 mutant answers so, part 1's unscaled attention does."""
    folder = _reference_with(
        tmp_path,
        "heads.py",
        "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)",
        "        q = split_heads(self.q_proj(x), self.n_heads) * self.d_head**0.5",
    )
    x = torch.randn(2, 3, 8, dtype=torch.float64)

    def attend(hw):
        torch.manual_seed(1)
        heads = hw.new("heads.MultiHeadAttention", 8, 2)
        heads.call("double")
        state = {k: torch.randn(s, dtype=torch.float64) for k, s in SHAPES.items()}
        heads.load_state(state)
        heads(x)

    entries = journal_of(folder, attend)
    assert diagnosis.diagnose(entries, 3, "cpu") is None
    found = diagnosis.diagnose(entries, 3, "cpu", frozenset({1, 2}))
    assert found == MUTANTS["no-scale"].description


SHAPES = {
    **{f"{p}_proj.weight": (8, 8) for p in ("q", "k", "v", "out")},
    **{f"{p}_proj.bias": (8,) for p in ("q", "k", "v", "out")},
}


def test_the_suites_name_stands_where_a_known_mistake_carries_it():
    """A hint of the suite's own that no mutant of the part carries (left padding, in the
    masks) names no known mistake, and is not named."""
    assert diagnosis.confirmed("a fully masked row gives NaN instead of raising", {1})
    assert not diagnosis.confirmed("left padding instead of right padding", {2})
    assert not diagnosis.confirmed(
        "a fully masked row gives NaN instead of raising", {2}
    )


def test_an_error_a_helper_of_the_edited_function_raises_in_its_file_names_the_mistake(
    tmp_path,
):
    """The softmax over the queries wherever a mask is given: a key every query prohibits
    makes the softmax (attention.py's helper) refuse an all -inf slice, on the way from the
    attention the mutant edits. The one request answered otherwise is that error: it shows
    the mistake, as a value would."""
    folder = _reference_with(
        tmp_path,
        "attention.py",
        "weights = softmax(scores, dim=-1)  # (..., Tq, Tk)",
        "weights = softmax(scores, dim=-1 if mask is None else -2)",
    )
    q, k, v = (torch.randn(3, 4, dtype=torch.float64) for _ in range(3))
    mask = torch.zeros(3, 3, dtype=torch.bool)
    mask[:, 2] = True  # no query sees key 2

    def attend(hw):
        with contextlib.suppress(StudentError):
            hw.call("attention.scaled_dot_product_attention", q, k[:3], v[:3], mask)

    entries = journal_of(folder, attend)
    assert entries[0].where == ("attention.py", "softmax")
    found = diagnosis.diagnose(entries, 1, "cpu")
    assert found == MUTANTS["softmax-wrong-axis"].description


def test_a_mistake_that_leaves_an_object_in_another_state_is_named_by_its_first_answer(
    tmp_path,
):
    """RoPE's offset skipped for chunks of one token only: the first chunk of one token
    after the cache holds two is the mutant's answer (positions from 0); the chunk after it
    is not, as the mutant offsets no chunk at all. Both answered otherwise from the cache's
    state, the first answer names the mistake; a journal of the later chunk alone names
    none."""
    folder = _reference_with(
        tmp_path,
        "gqa.py",
        "start = 0 if cache is None else cache.length",
        "start = 0 if cache is None or t == 1 else cache.length",
    )
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    state = {
        f"{p}_proj.weight": torch.randn(s, dtype=torch.float64)
        for p, s in (("q", (8, 8)), ("k", (4, 8)), ("v", (4, 8)), ("out", (8, 8)))
    }

    def chunks(hw):
        gqa = hw.new("gqa.GroupedQueryAttention", 8, 2, 1)
        gqa.call("double")
        gqa.load_state(dict(state))
        cache = hw.new("gqa.KVCache", 1, 1, 6, 4, dtype=torch.float64)
        for a, b in ((0, 2), (2, 3), (3, 6)):
            gqa(x[:, a:b], cache=cache)

    entries = journal_of(folder, chunks)
    found = diagnosis.diagnose(entries, 6, "cpu")
    assert found == MUTANTS["rope-positions-not-offset-by-cache"].description
    # The last chunk's answer alone is no mutant's.
    assert diagnosis.diagnose(entries[:-2] + entries[-1:], 6, "cpu") is None


def _reference_with_all(tmp_path: Path, edits) -> Path:
    """The reference with edits ``(file, old, new)`` in several files, as a submission."""
    source = SOLUTIONS
    for i, (file, old, new) in enumerate(edits):
        mutant = Mutant(f"edited{i}", file, ((old, new),), 0, "")
        source = apply(mutant, source, tmp_path / f"edited{i}") / PACKAGE
    return source.parent


NO_SCALE_EDIT = ("attention.py", " / math.sqrt(q.shape[-1])", "")
NORMALIZED_RESIDUAL = (
    "block.py",
    "        h = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n",
    (
        "        normed = self.ln1(x)\n"
        "        h = normed + self.attn(normed, mask=mask, cache=cache)\n"
    ),
)


def test_a_later_parts_mistake_is_named_on_top_of_an_earlier_parts_named_one(tmp_path):
    """Part 1's scale left out, named in each of part 1's failures, and part 5's residual
    adding the normalized tensor: part 5's block answers as the reference with both
    mistakes, not with part 1's alone, so part 5's own mistake is named, on top of part
    1's. The scale alone names nothing in part 5 (its failure comes from part 1); nor does
    a part 1 failure that named nothing."""
    with InProcessSubmission(SOLUTIONS.parent) as hw:
        torch.manual_seed(3)
        built = hw.new("block.PreNormBlock", 8, 2, 12)
        built.call("double")
        state = built.call("state_dict")
    x = torch.randn(2, 3, 8, dtype=torch.float64)

    def block(hw):
        blk = hw.new("block.PreNormBlock", 8, 2, 12)
        blk.call("double")
        blk.load_state(dict(state))
        blk(x)

    def amend(folder: Path, part1_named):
        journal = diagnosis.Journal()
        journal.entries = journal_of(folder, block)
        journal.failed(1)
        journal.named[1].append(part1_named)
        failure = AssertionError("PreNormBlock output wrong")
        return diagnosis.amended(failure, journal, 5, folder, "cpu", hidden=False)

    both = _reference_with_all(tmp_path / "both", [NO_SCALE_EDIT, NORMALIZED_RESIDUAL])
    no_scale = MUTANTS["no-scale"]
    amended = amend(both, no_scale.description)
    residual = MUTANTS["residual-adds-normalized"].description
    assert str(amended).endswith(f"{diagnosis.LIKELY} {residual}")
    assert amended.on_top == ((1, (no_scale.diagnosis,)),)
    assert diagnosis.LIKELY not in str(amend(both, None))
    scale_only = _reference_with_all(tmp_path / "scale", [NO_SCALE_EDIT])
    assert diagnosis.LIKELY not in str(amend(scale_only, no_scale.description))


def failed_test(name, part, message, on_top=(), error=""):
    """A failed test's result whose diagnosis is the "Likely mistake" its message names."""
    return runner.TestResult(
        f"t::{name}", name, part, 1, False, False, message, error=error,
        diagnosis=message.partition(f"{diagnosis.LIKELY} ")[2], on_top=on_top,
    )  # fmt: skip


def test_a_name_on_top_of_an_earlier_part_holds_only_while_its_every_failure_names_it():
    """Part 5's residual named on top of part 1's missing scale: kept while every failing
    test of part 1 names that scale, taken away once one of them (a hidden one, known only
    with the results) names nothing."""
    scale = MUTANTS["no-scale"]
    on_top = ((1, (scale.diagnosis,)),)

    named = f"block wrong\n{diagnosis.LIKELY} the residual adds the normalized tensor"
    results = {
        "a": failed_test(
            "a", 1, f"weights wrong\n{diagnosis.LIKELY} {scale.description}"
        ),
        "b": failed_test("b", 5, named, on_top),
        "c": failed_test("c", 5, named),
    }
    by_name = {t.name: t for t in runner._sorted(results)}
    assert by_name["b"].message == named
    assert diagnosis.LIKELY not in by_name["c"].message  # named without part 1's
    results["d"] = failed_test("d", 1, "hidden weights wrong")
    by_name = {t.name: t for t in runner._sorted(results)}
    assert diagnosis.LIKELY not in by_name["b"].message
    # One that named none of two that fit, decided by the part's other failures: it holds.
    among = ((scale.description, (scale.diagnosis,)), ("other", ("other",)))
    results["d"] = dataclasses.replace(
        failed_test("d", 1, f"hidden weights wrong\n{runner.NO_MATCH}"), among=among
    )
    by_name = {t.name: t for t in runner._sorted(results)}
    assert scale.description in by_name["d"].message
    assert by_name["b"].message == named


def test_an_earlier_part_is_named_by_its_failures_that_name_a_mistake():
    """While the suite runs, a part's failures name its mistake where those that name one
    name it alone: one that named none yet may be decided at the end, where every failure
    is checked (``runner._on_top_holds``)."""
    journal = diagnosis.Journal()
    for named in ("scale", None, "scale"):
        journal.failed(1)
        journal.named[1].append(named)
    assert journal.only_name(1) == "scale"
    journal.failed(1)
    journal.named[1].append("mask")
    assert journal.only_name(1) is None
    assert journal.only_name(2) is None
    # Part 3's failures all ran part 1's failed code and named nothing: they came from there.
    journal.failed(3)
    journal.named[3].append(None)
    assert journal.from_earlier(3)
    journal.own.add(3)  # a failure of its own, which ran no failed part's code
    assert not journal.from_earlier(3)
    assert not journal.from_earlier(1)  # its failures named mistakes


def test_a_failure_two_mistakes_explain_is_decided_by_the_parts_other_failures(
    tmp_path,
):
    """Scores left unscaled, and values of width 1: scaling by 1/sqrt(d_v) answers alike, so
    the replay finds two mistakes and names neither; once the results are in, the part's
    other failure naming one of them decides. A failure that may come from another part is
    not decided."""
    folder = _reference_with(
        tmp_path,
        "attention.py",
        "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
        "scores = torch.matmul(q, k.transpose(-2, -1))",
    )
    q, k = (torch.randn(3, 4, dtype=torch.float64) for _ in range(2))
    v = torch.randn(3, 1, dtype=torch.float64)

    def attend(hw):
        hw.call("attention.scaled_dot_product_attention", q, k, v)

    journal = diagnosis.Journal()
    journal.entries = journal_of(folder, attend)
    no_scale, by_d_v = MUTANTS["no-scale"], MUTANTS["scale-by-sqrt-d_v"]
    assert diagnosis.matching(journal.entries, 1, "cpu") == {
        no_scale.description,
        by_d_v.description,
    }
    failure = AssertionError("attention weights wrong")
    amended = diagnosis.amended(failure, journal, 1, folder, "cpu", hidden=False)
    assert str(amended).endswith(diagnosis.NO_MATCH)

    def result(name, part, message, among=()):
        return runner.TestResult(
            f"t::{name}", name, part, 1, False, False, message,
            diagnosis=message.partition(f"{diagnosis.LIKELY} ")[2], among=among,
        )  # fmt: skip

    tied = result("a", 1, str(amended), amended.among)
    other = result("b", 1, f"wrong\n{diagnosis.LIKELY} {no_scale.description}")
    decided = {t.name: t for t in runner._sorted({"a": tied, "b": other})}
    assert decided["a"].message.endswith(f"{diagnosis.LIKELY} {no_scale.description}")
    assert decided["a"].diagnosis == no_scale.description
    alone = {t.name: t for t in runner._sorted({"a": tied})}
    assert alone["a"].message.endswith(diagnosis.NO_MATCH)
    later = result("c", 3, str(amended), amended.among)
    both = {t.name: t for t in runner._sorted({"b": other, "c": later})}
    assert both["c"].message.endswith(diagnosis.NO_MATCH)  # may come from part 1


def test_a_suite_name_of_a_symptom_the_replay_contradicts_is_taken_out(tmp_path):
    """NaN at logits near +-1000: the suite names the missing max subtraction. A softmax
    that subtracts one maximum for the whole tensor shows the symptom too, but the mutant
    that subtracts none answers otherwise: the name is taken out. One that subtracts none,
    in other words, keeps it; so does a name on finite answers (not a symptom)."""
    logits = torch.tensor([[1000.0, 999.0, 998.0], [-1000.0, -999.0, -1001.0]])
    named = (
        f"softmax contains NaN\n{diagnosis.LIKELY} no max subtraction in the softmax: "
        "exp overflows at logits near 1000"
    )

    def amend(edit: str, tmp: Path, old="top = x.amax(dim=dim, keepdim=True)"):
        folder = _reference_with(tmp, "attention.py", old, edit)
        journal = diagnosis.Journal()
        journal.entries = journal_of(
            folder, lambda hw: hw.call("attention.softmax", logits, dim=-1)
        )
        failure = AssertionError(named)
        return diagnosis.amended(failure, journal, 1, folder, "cpu", hidden=False)

    one_max = amend(
        "top = x.amax().expand_as(x).amax(dim=dim, keepdim=True)", tmp_path / "a"
    )
    assert diagnosis.LIKELY not in str(one_max)
    assert str(one_max).endswith(diagnosis.NO_MATCH)
    none = amend(
        "top = torch.zeros_like(x.amax(dim=dim, keepdim=True))", tmp_path / "b"
    )
    assert str(none) == named
    halved = "exp = torch.exp((x - top) / 2)"  # wrong, finite answers
    finite = amend(halved, tmp_path / "c", old="exp = torch.exp(x - top)")
    assert str(finite) == named  # no symptom: the suite's own name stands


def test_a_likely_mistake_in_an_asserts_indented_message_is_the_suites_name(tmp_path):
    """pytest indents the lines of an ``assert``'s message after the first: the suite's name
    there stands (no replay's "no known mistake" beside it), and a failure that may come from
    an earlier part loses it like any other."""
    phrase = MUTANTS["cache-length-not-advanced"].diagnosis
    failure = AssertionError(
        f"KVCache.length is 0 after 2 positions\n  {diagnosis.LIKELY} {phrase}"
    )
    assert runner.diagnosis(failure) == phrase
    folder = _reference_with(tmp_path, "gqa.py", "self.length += t", "self.length += 0")
    journal = diagnosis.Journal()
    assert (
        diagnosis.amended(failure, journal, 6, folder, "cpu", hidden=False) is failure
    )
    journal.failed(2)
    unnamed = diagnosis.amended(failure, journal, 6, folder, "cpu", hidden=False)
    assert diagnosis.LIKELY not in str(unnamed)
    result = runner.TestResult("t::a", "a", 6, 1, False, False, str(failure))
    assert diagnosis.LIKELY not in runner._unnamed(result).message


def _entry(op: str, name: str, target=None) -> diagnosis.Entry:
    return diagnosis.Entry(op, target, name, (), {}, None, None, None)


def test_a_mutant_may_differ_where_the_student_is_right_only_on_the_same_question():
    """The mistake in fewer places: a mutant may answer otherwise a request the student's code
    answers right when it asks what a wrong one asks (the attention without a mask, where only
    the masked one is wrong), never another kind of question (the cache's length, where only
    what append returns is wrong): that mutant shows a mistake the student's code lacks."""
    cache = object()
    entries = [
        _entry("call", "attention.scaled_dot_product_attention"),
        _entry("call", "attention.scaled_dot_product_attention"),
        _entry("method", "append", cache),
        _entry("getattr", "length", cache),
        _entry("method", "append", cache),
    ]
    right = {0, 2, 3}  # the student's code answers these as the reference does
    tolerated = diagnosis._tolerated(entries, right)
    assert 0 in tolerated and 2 in tolerated  # the same question as a wrong one
    assert 3 not in tolerated  # the length: asked by no wrong request


def test_a_name_another_failure_of_the_part_refutes_is_taken_out():
    """A mistake whose every mutant answered one failure of a part otherwise than the
    student's code is not named in the part's other failures, whatever they share with it;
    a refutation from a failure that may come from another part counts for nothing."""
    stuck = "append does not advance length"
    phrases = (stuck, "does not advance length")

    def failing(name, part=6, diagnosis="", refuted=()):
        message = f"wrong\n{runner.LIKELY} {diagnosis}" if diagnosis else "wrong"
        return runner.TestResult(
            f"tests/graded/test_part{part}.py::{name}",
            name,
            part,
            1,
            False,
            False,
            message,
            diagnosis=diagnosis,
            refuted=refuted,
        )

    named = failing("test_gqa_cached_chunks", diagnosis=stuck)
    refuting = failing("test_kv_cache_append", refuted=((stuck, phrases),))
    other_part = failing("test_mha_cache", part=3, diagnosis=stuck)
    kept = runner._unrefuted([named, refuting, other_part], set())
    assert kept[0].diagnosis == "" and runner.LIKELY not in kept[0].message
    assert kept[2].diagnosis == stuck  # another part's failure is not refuted here
    unrefuted = runner._unrefuted([named, refuting], {refuting.nodeid})
    assert unrefuted[0].diagnosis == stuck


def test_a_request_run_any_way_asks_what_the_plain_run_asks():
    """A module called on non-contiguous copies, for its gradients or on the second device
    asks what the plain call asks (a mistake made only with a cache may differ from its
    mutant on the cacheless, non-contiguous call); another object's method, an attribute or
    a construction asks something else."""
    attention, cache = _handle(1, "GroupedQueryAttention"), _handle(2, "KVCache")
    entries = [
        _entry("method", "__call__", attention),
        _entry("checked", "__call__", attention),
        dataclasses.replace(
            _entry("elsewhere", "__call__", attention), args=("method", True)
        ),
        _entry("gradients", "__call__", attention),
        _entry("method", "__call__", cache),
        _entry("getattr", "__call__", attention),
        _entry("build", "gqa.KVCache"),
        _entry("new", "gqa.KVCache"),
    ]
    asks = [diagnosis._question(e) for e in entries]
    assert asks[0] == asks[1] == asks[2] == asks[3]
    assert len({asks[0], asks[4], asks[5], asks[6]}) == 4
    assert asks[6] == asks[7]
    tolerated = diagnosis._tolerated(entries, {1, 2, 3, 4, 5, 6, 7})
    assert {1, 2, 3} <= tolerated and not {4, 5, 6} & tolerated


def _handle(id_: int, type_name: str) -> Handle:
    return Handle(None, HandleRef(id_, type_name))


def test_answers_that_hang_on_the_random_numbers_neither_show_nor_rule_out_a_mistake(
    tmp_path,
):
    """A module's initial weights read back (its ``state_dict``) differ with the random
    numbers: a replay answers them otherwise whatever code it runs. They are taken as given,
    so the true division in split_heads is named from the error the call raises after."""
    folder = _reference_with(
        tmp_path,
        "heads.py",
        "x.reshape(batch, t, n_heads, d_model // n_heads)",
        "x.reshape(batch, t, n_heads, d_model / n_heads)",
    )

    def weights_then_call(hw):
        torch.manual_seed(1234)
        made = hw.new("heads.MultiHeadAttention", 8, 2)
        state = made.state_dict()
        copy = hw.build("heads.MultiHeadAttention", 8, 2, state=state)
        with contextlib.suppress(StudentError):
            copy(torch.randn(2, 3, 8, dtype=torch.float64).float())

    entries = journal_of(folder, weights_then_call)
    with diagnosis._grading_state_kept():
        torch.manual_seed(99)  # the replay's random numbers are not the test's
        _, reached, given = diagnosis._reference_replay(
            diagnosis._stage(), entries, "cpu"
        )
    assert given == {1}  # the state_dict
    assert reached is not None and ("heads.py", _first_line("split_heads")) in reached
    torch.manual_seed(99)
    found = diagnosis.diagnose(entries, 3, "cpu")
    assert found == MUTANTS["split-heads-true-division"].description


def _first_line(function: str) -> int:
    source = (SOLUTIONS / "heads.py").read_text().splitlines()
    return next(
        i for i, line in enumerate(source, 1) if line.startswith(f"def {function}(")
    )


def test_a_library_error_means_its_message_class_whatever_function_it_quotes():
    """``view`` and ``reshape`` refuse a float size in words of their own around one message:
    one answer; another message is another."""
    call = ("transformer_hw/heads.py", "split_heads", "x = x.view(b, t, h, d / h)")
    unpack = (
        "{}(): argument '{}' failed to unpack the object at pos 4 with error \"type must "
        'be tuple of ints,but got float"'
    )
    meaning = diagnosis.error_meaning
    viewed = meaning(_raised_info("TypeError", unpack.format("view", "size"), [call]))
    reshaped = meaning(
        _raised_info("TypeError", unpack.format("reshape", "shape"), [call])
    )
    assert viewed == reshaped
    other = "view(): argument 'size' (position 1) must be tuple of ints, not Tensor"
    assert viewed != meaning(_raised_info("TypeError", other, [call]))


F64 = torch.float64


def test_an_error_alike_shows_no_mistake_made_in_fewer_places(tmp_path):
    """A reset that zeroes the storage and keeps the length: the next chunk overflows, a
    ValueError raised in ``append``. A mutant storing the query heads raises one there too
    (its shape check), but answers the earlier chunks otherwise where the student's code is
    right: an error alike in one function is too coarse to stand for that mistake made in
    fewer places, so nothing is named."""
    folder = _reference_with(
        tmp_path,
        "gqa.py",
        "        ### BEGIN SOLUTION\n        self.length = 0\n        ### END SOLUTION\n\n\n"
        "class GroupedQueryAttention",
        "        ### BEGIN SOLUTION\n        self.k.zero_()\n        self.v.zero_()\n"
        "        ### END SOLUTION\n\n\nclass GroupedQueryAttention",
    )

    def chunks_reset_chunk(hw):
        torch.manual_seed(0)
        shapes = {"q_proj": (24, 24), "k_proj": (12, 24), "v_proj": (12, 24)}
        state = {
            f"{name}.weight": torch.randn(*shape, dtype=F64) / 5
            for name, shape in {**shapes, "out_proj": (24, 24)}.items()
        }
        layer = hw.build(
            "gqa.GroupedQueryAttention", 24, 4, 2, to={"dtype": F64}, state=state
        )
        cache = hw.new("gqa.KVCache", 2, 2, 5, 6, dtype=F64)
        for t in (2, 1, 2):
            layer(torch.randn(2, t, 24, dtype=F64), cache)
        cache.call("reset")
        with contextlib.suppress(StudentError):
            layer(torch.randn(2, 3, 24, dtype=F64), cache)

    entries = journal_of(folder, chunks_reset_chunk)
    assert entries[-1].error is not None and entries[-1].error[0] == "ValueError"
    assert diagnosis.diagnose(entries, 6, "cpu") is None


def test_an_error_the_students_code_stopped_at_refutes_no_mistake(tmp_path):
    """Weights masked after the softmax (the mistake), and a check of its own on them that
    raises where every weight of a row is 0 (a prohibited key's huge score takes the whole
    softmax). There the code stopped before its masking could show: the mutants that mask
    after the softmax answer otherwise, yet that refutes nothing, and the values name it."""
    from autograder.sources.zoo.mutants import MASKING

    folder = _reference_with(
        tmp_path,
        "attention.py",
        MASKING,
        "        keep = ~mask if mask.dtype == torch.bool else mask.exp()\n"
        "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
        "    if mask is not None:\n"
        "        weights = weights * keep\n"
        "        if (weights == 0).all(dim=-1).any():\n"
        '            raise ValueError("mask prohibits every key for a query row")\n',
    )
    after = MUTANTS["mask-after-softmax"].description
    mask = torch.tensor([[False, True], [False, False]])

    def large(hw):
        q = torch.ones(2, 1, dtype=F64)
        k = torch.tensor([[-800.0], [800.0]], dtype=F64)
        with contextlib.suppress(StudentError):
            hw.call("attention.scaled_dot_product_attention", q, k, k, mask)

    def plain(hw):
        torch.manual_seed(0)
        x = torch.randn(2, 2, dtype=F64)
        hw.call("attention.scaled_dot_product_attention", x, x, x, mask)

    entries = journal_of(folder, large)
    assert entries[0].error is not None and entries[0].error[0] == "ValueError"
    refuted: set[str] = set()
    assert after not in diagnosis.matching(entries, 1, "cpu", refuted=refuted)
    assert after not in refuted
    assert diagnosis.diagnose(journal_of(folder, plain), 1, "cpu") == after


def test_a_name_on_top_holds_beside_failures_that_stopped_or_come_from_the_named_part():
    """Part 5's residual named on top of part 1's missing scale holds beside a part 1 failure
    that stopped at an error of the student's own and names nothing, and beside part 3's
    failures that name nothing and may come only from part 1; not beside a part 3 failure
    that names a mistake of its own, nor a part 1 failure that names nothing without an
    error."""
    scale = MUTANTS["no-scale"]
    on_top = ((1, (scale.diagnosis,)),)

    named = f"block wrong\n{diagnosis.LIKELY} the residual adds the normalized tensor"
    results = {
        "a": failed_test(
            "a", 1, f"weights wrong\n{diagnosis.LIKELY} {scale.description}"
        ),
        "b": failed_test("b", 5, named, on_top),
        "stopped": failed_test(
            "stopped", 1, "Your code raised ValueError", error="ValueError"
        ),
        "heads": failed_test("heads", 3, "heads wrong"),
    }
    assert {1, 3} <= runner.from_other_parts(results.values())["t::b"]
    by_name = {t.name: t for t in runner._sorted(results)}
    assert by_name["b"].message == named
    merge = f"wrong\n{diagnosis.LIKELY} merge_heads"  # on top of part 1 too
    results["heads2"] = failed_test("heads2", 3, merge, on_top)
    assert diagnosis.LIKELY not in runner._sorted(results)[-1].message  # b, part 5
    del results["heads2"]
    results["d"] = failed_test("d", 1, "hidden weights wrong")
    assert (
        diagnosis.LIKELY
        not in {t.name: t for t in runner._sorted(results)}["b"].message
    )


def test_a_part_is_named_on_top_of_a_failed_part_that_builds_on_it_too(tmp_path):
    """Part 6's attention rotates the values too, and part 3's cross-attention takes its keys
    from x: part 6's tests run part 3's heads, and part 3 builds on part 6 (its cache), so
    which explains which is known only at the end. The name of part 6's mistake, found on
    top of part 3's, holds there."""
    from autograder.grading import grade

    cross, values = MUTANTS["cross-attention-from-x"], MUTANTS["rope-on-values"]
    folder = tmp_path / "student"
    apply(values, apply(cross, SOLUTIONS, tmp_path / "cross") / PACKAGE, folder)
    settings = grade.Settings(
        hidden_paths=(str(tmp_path),),
        isolate=False,
        keyword="test_MultiHeadAttention_cross_attention or test_gqa_matches_oracle",
    )
    [(_, graded)] = grade.grade_many([("student", folder)], settings, 1)
    failed = {t.part: t.message for t in graded.tests if not t.passed}
    assert set(failed) == {3, 6}
    assert f"{diagnosis.LIKELY} {cross.description}" in failed[3]
    assert f"{diagnosis.LIKELY} {values.description}" in failed[6]


def test_a_kind_of_operation_made_anywhere_is_never_refuted(tmp_path):
    """An in-place operation the suite saw itself (an argument changed, backpropagating
    through it refused) keeps its name, although the zoo's in-place mutants, made elsewhere,
    answer the part's other failures otherwise: a mistake the zoo makes in several modules
    may be made in any line, so no replay refutes it."""
    old = (
        "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased\n"
        "        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
    )
    new = (
        "        x.sub_(mean)\n"
        "        var = x.pow(2).mean(dim=-1, keepdim=True)\n"
        "        return x / torch.sqrt(var + self.eps) * self.weight + self.bias\n"
    )
    folder = _reference_with(tmp_path, "norm.py", old, new)
    results, _ = runner.run_suite(folder, ["-k", "test_part5"], [])
    seen = [r for r in results if "in place" in r.message and not r.passed]
    assert {r.name for r in seen} >= {
        "test_blocks_without_mask_attend_everywhere",
        "test_layer_norm_float32_and_gradients",
    }
    assert all("in-place operation on an argument" in r.diagnosis for r in seen)


def test_an_argument_changed_in_place_that_shows_as_wrong_values_is_named(tmp_path):
    """RoPE rotating its argument's pairs in place, the odd ones from the even ones already
    rotated: every test sees wrong values, and the zoo makes no such mutant of the rotation.
    The test's calls, made again on copies in the student's process, show the argument
    changed: the mistake is named in each of part 4's failures."""
    old = (
        "    rotated = torch.stack(\n        (a * cos - b * sin, a * sin + b * cos), dim=-1\n"
        "    )  # (..., T, d/2, 2)\n    return rotated.flatten(-2)  # (..., T, d_head)\n"
    )
    new = (
        "    a[...] = a * cos - b * sin\n    b[...] = a * sin + b * cos\n    return x\n"
    )
    folder = _reference_with(tmp_path, "rope.py", old, new)
    results, _ = runner.run_suite(folder, ["-k", "test_part4 and apply_rope"], [])
    failed = [r for r in results if not r.passed]
    assert len(failed) >= 4
    assert all(r.diagnosis == diagnosis.IN_PLACE for r in failed), [
        (r.name, r.diagnosis) for r in failed
    ]


#: A cache whose positions never written hold something else than the reference's zeros (as
#: ``torch.empty`` leaves them): correct, since SPEC.md leaves them open.
OTHER_UNWRITTEN = (
    "gqa.py",
    "        self.v = torch.zeros_like(self.k)\n",
    "        self.k = self.k.fill_(7.0)\n        self.v = torch.full_like(self.k, -3.0)\n",
)


def test_values_spec_leaves_open_neither_fail_nor_hide_a_mistake(tmp_path):
    """The cache's positions never written are read for their shape and dtype, and before
    an overflowing append: a cache that fills them otherwise passes part 6, and with its
    length never advanced its failures name that mistake (read as evidence, the first read
    answered otherwise would hide every later request, append's included)."""
    correct = _reference_with_all(tmp_path / "correct", [OTHER_UNWRITTEN])
    results, _ = runner.run_suite(correct, ["-k", "test_part6 and kv_cache"], [])
    assert results and all(r.passed for r in results), [
        (r.name, r.message) for r in results if not r.passed
    ]
    stuck = ("gqa.py", "        self.length += t\n", "")
    folder = _reference_with_all(tmp_path / "stuck", [OTHER_UNWRITTEN, stuck])
    results, _ = runner.run_suite(folder, ["-k", "test_kv_cache_errors"], [])
    (failed,) = [r for r in results if not r.passed]
    assert failed.diagnosis == "append does not advance length", failed.message


def test_a_mistake_whose_edit_does_not_act_on_a_failure_is_not_refuted_by_it(tmp_path):
    """``lr or 3e-4``: the default is not 1e-3, and an explicit lr=0 trains at 3e-4 too. The
    test that passes lr=0 fails otherwise than the zoo's default of 3e-4 answers (its edit, a
    default, never acts where lr is given), so that failure shows nothing against the
    mistake: the test of the defaults still names it."""
    folder = _reference_with_all(
        tmp_path,
        [
            ("charlm.py", "lr: float = 1e-3", "lr=None"),
            ("charlm.py", "lr=lr)", "lr=lr or 3e-4)"),
        ],
    )
    results, _ = runner.run_suite(folder, ["-k", "test_part7 and test_train"], [])
    failed = {r.name: r for r in results if not r.passed}
    assert "test_train_history_losses" in failed
    named = failed["test_train_records_its_steps_with_default_arguments"]
    assert "the default lr is not 1e-3" in named.diagnosis, named.message


def test_an_error_in_another_function_of_the_mistakes_file_names_it(tmp_path):
    """The head width worked out in ``forward`` with ``/``: the float fails the reshape there,
    in heads.py, where the zoo's mutant makes it in ``__init__`` and fails in ``split_heads``.
    An error from the file the mistake lies in shows it, whichever function raised it."""
    old = "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, Tq, d_h)\n"
    new = (
        "        b, t, d = x.shape\n"
        "        width = d / self.n_heads\n"
        "        q = self.q_proj(x).reshape(b, t, self.n_heads, width).transpose(1, 2)\n"
    )
    folder = _reference_with(tmp_path, "heads.py", old, new)
    results, _ = runner.run_suite(
        folder, ["-k", "test_part3 and MultiHeadAttention"], []
    )
    failed = [r for r in results if not r.passed]
    assert len(failed) >= 4
    assert all("gives a float" in r.diagnosis for r in failed), [
        (r.name, r.diagnosis) for r in failed
    ]
