"""Part 7, model and generation: ``CharLM`` against a float64 oracle built of torch
functions with the same weights loaded, and (cached) generation."""

import functools
import math

import pytest
import torch
import torch.nn.functional as F

from autograder.facts.protocol import SECOND_DEVICE
from tests.graded.answers import (
    batch_oracle,
    encode,
    oracle_greedy,
    oracle_logits,
)
from tests.graded.compare import LIKELY, SECOND_PRECISION, assert_close, assert_exact
from tests.graded.expect import raises_value_error
from tests.graded.inputs import checked, data_left_on_the_cpu, on_second_device
from tests.graded.mistakes import HARD_128
from tests.graded.modules import load
from tests.graded.part7_setup import (
    AT_MAX_LEN,
    CHUNK_UNMASKED,
    FF,
    GENERATE,
    LAYERS,
    MASK_NO_OFFSET,
    NO_CAUSAL,
    NO_CHECK,
    NO_LN_F,
    NO_POS,
    PAD,
    POS_RESTART,
    REFEED,
    D,
    H,
    V,
    attempt,
    corpus_chars,
    corpus_names,
    lm_shapes,
    new_lm,
)
from tests.graded.strategies import randint

pytestmark = pytest.mark.part(7)


# The model ----------------------------------------------------------------------------
#: The likely mistake where a default of the model is not SPEC.md's.
DEFAULT_DIFFERS = (
    "a default of CharLM.__init__ differs from SPEC.md's (d_model=64, n_heads=2, "
    "n_layers=2, d_ff=64, max_len=128)"
)


@pytest.mark.public
@pytest.mark.points(1)
def test_charlm_structure(hw):
    """Attributes max_len and n_layers, the parameter names and shapes of SPEC.md, and
    the defaults."""
    m = hw.new(
        "charlm.CharLM", V, d_model=D, n_heads=H, n_layers=LAYERS, d_ff=FF, max_len=24
    )
    assert m.attr("max_len") == 24, "CharLM.max_len should be the max_len passed in"
    assert m.attr("n_layers") == LAYERS, (
        "CharLM.n_layers should be the n_layers passed in"
    )
    state = m.state_dict()
    for name, shape in lm_shapes(V, D, LAYERS, FF, 24).items():
        assert name in state, (
            f"CharLM has no parameter {name} (SPEC.md fixes the names)"
        )
        got = tuple(state[name].shape)
        hint = f"\n{LIKELY} {HARD_128}" if 128 in got else ""
        assert got == shape, f"CharLM's {name} has shape {got}, expected {shape}{hint}"
    assert "blocks.2.ln1.weight" not in state, "CharLM has more blocks than n_layers"
    default = hw.new("charlm.CharLM", V)
    hint = f"\n{LIKELY} {DEFAULT_DIFFERS}"
    assert default.attr("max_len") == 128 and default.attr("n_layers") == 2, (
        f"CharLM's defaults should be max_len=128, n_layers=2{hint}"
    )
    shapes = {k: tuple(v.shape) for k, v in default.state_dict().items()}
    assert shapes.get("tok_emb.weight") == (V, 64), (
        f"CharLM's default d_model is 64{hint}"
    )
    assert shapes.get("blocks.1.ffn.fc1.weight") == (64, 64), (
        f"CharLM's default d_ff is 64{hint}"
    )


def check_forward_on_second_device(hw):
    """The model moved to a second device: its logits, with and without the caches of
    ``make_caches``, whose buffers are there too (SPEC.md: every module works on any device;
    part 7: ``make_caches`` on the model's device)."""
    m, state = new_lm(hw, seed=720, max_len=10)
    on_second_device("CharLM.to", m.on_second_device, "to", SECOND_DEVICE)
    idx = randint(0, V, 2, 7, seed=721)  # (B, T)
    want = oracle_logits(state, idx.to(hw.device), H)
    what = "CharLM forward on a second device"
    got = on_second_device(what, m.on_second_device, "__call__", idx)
    assert_close(got.to(hw.device), want, what, precision=SECOND_PRECISION)
    what = "CharLM.make_caches(2) on a second device"
    caches = on_second_device(what, m.on_second_device, "make_caches", 2)
    for i, cache in enumerate(caches):
        on_second_device(f"{what}[{i}].k", cache.attr_on_second_device, "k")
    what = "CharLM forward with caches on a second device, 4 tokens then 3"
    first = on_second_device(
        what, m.on_second_device, "__call__", idx[:, :4], caches=caches
    )
    rest = on_second_device(
        what, m.on_second_device, "__call__", idx[:, 4:], caches=caches
    )
    assert_close(
        torch.cat([first, rest], dim=1).to(hw.device),
        want,
        what,
        precision=SECOND_PRECISION,
    )


def check_forward(hw, dtype):
    m, state = new_lm(hw, seed=720, dtype=dtype, max_len=10)
    idx = randint(0, V, 2, 7, seed=721, device=hw.device)  # (B, T), PAD among the ids
    t = idx.shape[1]
    assert_close(
        m(idx),
        oracle_logits(state, idx, H).to(dtype),
        f"CharLM forward in {dtype}",
        likely={
            NO_CAUSAL: lambda: oracle_logits(
                state, idx, H, allowed=torch.ones(t, t) > 0
            ),
            NO_POS: lambda: oracle_logits(
                state, idx, H, positions=torch.zeros(t).long()
            ),
            NO_LN_F: lambda: oracle_logits(state, idx, H, final_norm=False),
        },
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_charlm_forward_matches_oracle(hw):
    """Logits of a causal pre-norm model with loaded weights equal a float64 oracle, on a
    second device too."""
    check_forward(hw, torch.float64)
    check_forward(hw, torch.float32)
    check_forward_on_second_device(hw)


@pytest.mark.hidden
@pytest.mark.points(1)
def test_charlm_defaults(hw):
    """A CharLM built from its vocabulary size alone predicts: finite logits of shape
    (B, T, V). Its defaults n_heads=2 and make_caches(batch=1) hold.

    How it initializes its weights is the student's choice (SPEC.md fixes names and shapes
    only), so its starting loss is not graded: with Xavier's init it starts about 1 above
    log V, with PyTorch's default about 0.2 above, and both train as they should.
    """
    vocab = len(corpus_chars()) + 1
    hw.seed(0)
    m = hw.build("charlm.CharLM", vocab, to={"device": hw.device})
    inputs, _ = batch_oracle([encode(f"\n{n}\n") for n in corpus_names()[:8]], PAD)
    logits = m(inputs.to(hw.device))
    assert tuple(logits.shape) == (*inputs.shape, vocab), (
        f"a fresh CharLM({vocab}) gave logits of shape {tuple(logits.shape)} for inputs "
        f"of shape {tuple(inputs.shape)}, expected {(*inputs.shape, vocab)}"
    )
    assert torch.isfinite(logits).all(), (
        f"a fresh CharLM({vocab}) gave non-finite logits for 8 names"
    )
    # The defaults the state dict cannot show: n_heads=2, make_caches(batch=1).
    heads = m.attr("blocks").call("__getitem__", 1).attr("attn").attr("n_heads")
    assert heads == 2, (
        f"CharLM's blocks have {heads} heads by default, expected 2\n{LIKELY} "
        f"{DEFAULT_DIFFERS}"
    )
    with hw.unspecified_values():  # an empty cache: its shape only
        k = m.call("make_caches")[0].attr("k")
    assert tuple(k.shape) == (1, 2, 128, 32), (
        f"make_caches() of a default CharLM gave a cache k of shape {tuple(k.shape)}, "
        "expected (batch=1, n_heads=2, max_len=128, d_head=32)"
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_charlm_cached_forward_matches_full(hw):
    """Chunks (slices, left unchanged) fed through make_caches() give one full forward's
    logits; positions past max_len in all are refused."""
    m, state = new_lm(hw, seed=730, max_len=8)
    idx = randint(1, V, 2, 6, seed=731, device=hw.device)  # (B, T)
    spans = ((0, 3), (3, 4), (4, 6))
    caches = m.call("make_caches", batch=2)
    assert len({cache.ref.id for cache in caches}) == len(caches), (
        f"make_caches(batch=2) returned {len(caches)} caches that are one object\n"
        f"{LIKELY} one KVCache shared by every block ([KVCache(...)] * n_layers); each "
        "block needs its own"
    )
    chunks = [
        checked(
            f"CharLM forward of idx[:, {a}:{b}] through the caches",
            m.checked_call,
            "__call__",
            idx[:, a:b],
            caches=caches,
        )
        for a, b in spans
    ]
    unmasked = torch.ones(6, 6, dtype=torch.bool).tril()
    for a, b in spans:
        unmasked[a:b, a:b] = True  # a chunk that sees all of itself
    restarted = torch.tensor([0, 1, 2, 0, 0, 1])
    assert_close(
        torch.cat(chunks, dim=1),
        oracle_logits(state, idx, H),
        "CharLM forward in chunks of 3, 1, 2 through the caches",
        likely={
            POS_RESTART: lambda: oracle_logits(state, idx, H, positions=restarted),
            CHUNK_UNMASKED: lambda: oracle_logits(state, idx, H, allowed=unmasked),
        },
    )
    length = caches[0].attr("length")
    assert length == 6, f"after 6 positions the caches hold length {length}, expected 6"
    raises_value_error(
        "CharLM(max_len=8) forward of 3 positions after 6 cached",
        ("max_len", "idx", "cache", "position", "8", "9"),
        m,
        idx[:, :3],
        caches=caches,
        hint="positions cached + new not checked against max_len",
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_charlm_max_len_honoured(hw):
    """max_len=40 runs 40 positions and refuses 41; max_len=200 runs 150 positions;
    make_caches sizes its caches by max_len."""
    m, state = new_lm(hw, seed=740, max_len=40, n_layers=1)
    idx = randint(1, V, 1, 41, seed=741, device=hw.device)
    causal_only = torch.ones(40, 40) > 0
    assert_close(
        m(idx[:, :40]),
        oracle_logits(state, idx[:, :40], H),
        "CharLM(max_len=40) forward on 40 positions",
        likely={
            NO_CAUSAL: lambda: oracle_logits(state, idx[:, :40], H, allowed=causal_only)
        },
    )
    raises_value_error(
        "CharLM(max_len=40) forward on 41 positions",
        ("max_len", "idx", "position", "40", "41"),
        m,
        idx,
        hint=NO_CHECK,
    )

    m, state = new_lm(hw, seed=742, max_len=200, n_layers=1)
    idx = randint(1, V, 1, 150, seed=743, device=hw.device)
    what = "CharLM(max_len=200) forward on 150 positions"
    assert_close(attempt(what, HARD_128, m, idx), oracle_logits(state, idx, H), what)

    caches = m.call("make_caches", batch=2)
    assert isinstance(caches, list) and len(caches) == 1, (
        "make_caches should return a list with one KVCache per block"
    )
    with hw.unspecified_values():  # an empty cache: its shape only
        k = caches[0].attr("k")
    hint = f"\n{LIKELY} {HARD_128}" if 128 in k.shape else ""
    assert tuple(k.shape) == (2, H, 200, D // H), (
        "make_caches(batch=2) of CharLM(max_len=200) gave a cache whose k has shape "
        f"{tuple(k.shape)}, expected (batch, heads, max_len, d_head) = "
        f"(2, {H}, 200, {D // H}){hint}"
    )
    assert k.dtype == torch.float64 and k.device.type == hw.device.type, (
        f"make_caches should follow the model's dtype and device, got {k.dtype} on "
        f"{k.device}"
    )
    assert caches[0].attr("length") == 0, "make_caches should return empty caches"


# Generation ---------------------------------------------------------------------------
def model_greedy(hw, m, prompt, n_new) -> torch.Tensor:
    """Greedy ids (prompt first) by the student's own full forward (no cache): each new
    id is the argmax of the last position's logits without PAD_ID. A forward bug then
    costs the forward tests, not the generate tests that use this."""
    ids = prompt.tolist()
    for _ in range(n_new):
        idx = torch.tensor([ids], device=hw.device)
        logits = m(idx)[0, -1].detach().double().clone()  # (V,)
        logits[PAD] = -math.inf
        ids.append(int(logits.argmax()))
    return torch.tensor(ids, device=hw.device)


def check_greedy(hw, m, state, out, prompt, n_new, what):
    """``out`` is what greedy decoding with the student's forward gives; cache bugs named.

    The bugs are replayed on the oracle, so they are named only when the student's forward
    gives the oracle's ids without the cache: with a wrong model a match would be chance."""
    on_device = prompt.to(hw.device)
    expected = model_greedy(hw, m, on_device, n_new)

    @functools.cache  # once, however many bugs are tried
    def model_is_right() -> bool:
        return torch.equal(expected, oracle_greedy(state, on_device, n_new, H))

    feeds = {POS_RESTART: "restart", MASK_NO_OFFSET: "mask-without-offset"}
    refed = sum(range(len(prompt), len(prompt) + n_new))  # positions a re-feed uses
    if refed <= state["pos_emb.weight"].shape[0]:
        feeds[REFEED] = "refeed"

    @functools.cache
    def replayed(feed: str):
        return oracle_greedy(state, on_device, n_new, H, feed=feed)

    def cache_bug(feed: str):
        def ids():
            if not model_is_right():
                return None
            # Two bugs that give the same ids here: naming either could mislead.
            others = [replayed(f) for f in feeds.values() if f != feed]
            if any(torch.equal(replayed(feed), other) for other in others):
                return None
            return replayed(feed)

        return ids

    likely = {mistake: cache_bug(feed) for mistake, feed in feeds.items()}
    assert_exact(
        out,
        expected,
        f"{what}: the new ids (each the argmax of the model's logits, PAD_ID excluded)",
        likely=likely,
    )


def check_ids(out, prompt, n_new, hw, what, pad_by_chance=False):
    """A 1-D LongTensor on the model's device: the prompt, n_new ids, never PAD_ID.

    ``pad_by_chance``: ids sampled from a model in which PAD_ID is unlikely. Whether an
    unexcluded PAD_ID is drawn then depends on the generator's stream, which differs between
    devices, so it is not checked (test_generate_output_contract makes it the likeliest id).
    """
    assert type(out) is torch.Tensor, f"{what} should return a Tensor, got {type(out)}"
    assert out.dim() == 1 and out.dtype == torch.long, (
        f"{what} should return a 1-D LongTensor, got {out.dtype} of shape "
        f"{tuple(out.shape)}"
    )
    assert out.device.type == hw.device.type, (
        f"{what} is on {out.device}, not the model's device"
    )
    assert len(out) == len(prompt) + n_new, (
        f"{what} has {len(out)} ids, expected len(prompt) + max_new_tokens = "
        f"{len(prompt) + n_new}"
    )
    assert_exact(out[: len(prompt)], prompt.to(out.device), f"{what}[:len(prompt)]")
    assert pad_by_chance or not (out == PAD).any(), (
        f"{what} produced PAD_ID (0).\n{LIKELY} PAD_ID's logit is not excluded before "
        "sampling or argmax (set it to -inf)"
    )


def check_cache_use(passes: list[dict], prompt_len: int, what: str) -> None:
    """SPEC.md: with the cache the prompt goes through the model once and each later step
    feeds only the newest token through the caches. (Passes the model's ``forward`` made
    without its ``__call__`` go unseen: nothing to judge then.)"""
    if not passes:
        return
    assert all(p["cached"] for p in passes), (
        f"{what} ran the model without caches.\n{LIKELY} use_cache is ignored (or "
        "defaults to False): with it, make model.make_caches() and pass them to every step"
    )
    assert passes[0]["tokens"] == prompt_len, (
        f"{what} first fed the model {passes[0]['tokens']} token(s) of a "
        f"{prompt_len}-token prompt.\n{LIKELY} the prompt is fed token by token: it goes "
        "through the model once, whole"
    )
    later = [p["tokens"] for p in passes[1:]]
    assert all(t == 1 for t in later), (
        f"{what} fed the model {later} tokens at its later steps.\n{LIKELY} each step "
        "after the prompt feeds only the newest token through the caches"
    )


@pytest.mark.public
@pytest.mark.points(1)
def test_generate_greedy_cache_matches_no_cache(hw):
    """Greedy ids are the oracle's argmax ids, identical with and without the cache; the
    cache is used as SPEC.md says (the prompt once, then one token per step) and only when
    asked for."""
    m, state = new_lm(hw, seed=760, max_len=32)
    prompt = torch.tensor([3, 1, 4], device=hw.device)
    expected = oracle_greedy(state, prompt, 5, H)
    plain, passes = hw.forwards_during(
        m, GENERATE, m, prompt, 5, greedy=True, use_cache=False
    )
    check_ids(plain, prompt, 5, hw, "generate(greedy=True, use_cache=False)")
    assert_exact(plain, expected, "generate(greedy=True, use_cache=False)")
    assert not any(p["cached"] for p in passes), (
        "generate(use_cache=False) passed caches to the model.\n"
        f"{LIKELY} use_cache is ignored: without the cache no caches are made and each "
        "step feeds the whole sequence"
    )
    cached, passes = hw.forwards_during(m, GENERATE, m, prompt, 5, greedy=True)
    check_ids(cached, prompt, 5, hw, "generate(greedy=True, use_cache=True)")
    assert_exact(
        cached,
        expected,
        "generate(greedy=True, use_cache=True)",
        likely={
            REFEED: lambda: oracle_greedy(state, prompt, 5, H, feed="refeed"),
            POS_RESTART: lambda: oracle_greedy(state, prompt, 5, H, feed="restart"),
        },
    )
    check_cache_use(passes, len(prompt), "generate(greedy=True) (use_cache=True)")
    # SPEC.md part 7: the prompt "is moved to the model's device"; the ids come back there
    on_second_device("CharLM.to", m.on_second_device, "to", SECOND_DEVICE)
    for use_cache in (False, True):
        what = (
            f"generate(greedy=True, use_cache={use_cache}) with the model on a second "
            "device and the prompt on the CPU"
        )
        got = data_left_on_the_cpu(
            what,
            hw.on_second_device,
            GENERATE,
            m,
            torch.tensor([3, 1, 4]),
            5,
            greedy=True,
            use_cache=use_cache,
            data="the prompt",
        )
        assert_exact(got.to(hw.device), expected, what)


@pytest.mark.public
@pytest.mark.points(1)
def test_generate_output_contract(hw):
    """The prompt then new ids, 1-D Long on the model's device, never PAD_ID even when
    its logit is the largest; the same generator seed gives the same ids; no new ids
    (max_new_tokens=0) is the prompt alone."""
    m, state = new_lm(hw, seed=770)
    bias = state["head.bias"].clone()
    bias[PAD] = 30.0  # PAD's logit is by far the largest
    load(m, {"head.bias": bias})
    prompt = torch.tensor([5, 2])  # on the CPU: generate moves it to the model's device

    def sample():
        gen = hw.new("torch.Generator", device=hw.device)
        gen.call("manual_seed", 1234)
        return hw.call(GENERATE, m, prompt, 6, temperature=0.8, generator=gen)

    first = sample()
    check_ids(first, prompt, 6, hw, "generate (sampling)")
    assert_exact(sample(), first, "generate with the same generator seed")
    greedy = hw.call(GENERATE, m, prompt, 6, greedy=True)
    check_ids(greedy, prompt, 6, hw, "generate(greedy=True)")
    for options in ({"greedy": True}, {}):
        what = f"generate(prompt, max_new_tokens=0{', greedy=True' * bool(options)})"
        alone = attempt(
            what,
            "max_new_tokens=0 is refused: the prompt followed by 0 new ids is the prompt",
            hw.call,
            GENERATE,
            m,
            prompt,
            0,
            **options,
        )
        assert not (
            type(alone) is torch.Tensor
            and alone.dim() == 1
            and len(alone) > len(prompt)
        ), (
            f"{what} returned {len(alone)} ids, not the prompt alone\n{LIKELY} the loop "
            "makes at least one step: max_new_tokens=0 adds no id"
        )
        check_ids(alone, prompt, 0, hw, what)
    # The contract alone admits any ids (a constant): the argmax of the model's logits.
    state = state | {"head.bias": bias}
    check_greedy(hw, m, state, greedy, prompt, 6, "generate(greedy=True)")


# One sampling step. In this model head.weight is zero, so the logits are exactly
# head.bias at every step and one generate call gives N_DRAWS independent draws from
# softmax(head.bias / TAU) without PAD. TARGET_P is a long tail of distinct probabilities
# (ids 1..15, most likely first): top-p 0.9 drops its last 0.095 or 0.125 (whether or not it
# keeps the id that crosses 0.9), top-k with k <= 10 at least 0.07. The false-failure budget
# of a correct sampler: likelihood-ratio tests (ALPHA_LR each, 4 of them), two-sided Chernoff
# bounds per id (BETA_ID each side, 30 in all) and lower Chernoff bounds on the tail sets
# (BETA_TAIL each, 14 of them): 4e-7 + 4.5e-7 + 1.4e-7 < 1e-6.
TAU, N_DRAWS = 4.0, 256
TARGET_P = torch.tensor(
    [0.28, 0.16, 0.12, 0.09, 0.07, 0.06, 0.05, 0.045]
    + [0.03, 0.025, 0.02, 0.018, 0.015, 0.012, 0.005],
    dtype=torch.float64,
)
ALPHA_LR, BETA_ID, BETA_TAIL = 1e-7, 1.5e-8, 1e-8
#: Draws compared between the default and an explicit temperature=1.0 (same seed): a
#: default of 0.8 changes one of them for all but about 0.2 % of seeds.
N_DEFAULT = 64


def kl_bernoulli(a: float, p: float) -> float:
    return sum(x * math.log(x / y) for x, y in ((a, p), (1 - a, 1 - p)) if x > 0)


def chernoff_interval(p: float, n: int, beta: float) -> tuple[float, float]:
    """(lo, hi): a Binomial(n, p) frequency reaches either with probability <= beta.

    P(freq >= a) <= exp(-n KL(a || p)) for a > p, and the same below p, so each bound
    solves n KL(bound || p) = log(1 / beta) (bisection, keeping the conservative side).
    """
    need = math.log(1 / beta) / n

    def solve(inside: float, outside: float) -> float:  # KL grows towards outside
        for _ in range(60):
            mid = (inside + outside) / 2
            if kl_bernoulli(mid, p) < need:
                inside = mid
            else:
                outside = mid
        return outside

    hi = solve(p, 1.0) if kl_bernoulli(1.0, p) >= need else math.inf
    lo = solve(p, 0.0) if kl_bernoulli(0.0, p) >= need else -math.inf
    return lo, hi


@pytest.mark.hidden
@pytest.mark.points(1)
def test_generate_sampling_distribution(hw):
    """The ids of one sampling step follow softmax(logits / temperature) without PAD, the
    whole of it (no top-k or top-p truncation); the default temperature is 1.0.

    A correct sampler of any kind (multinomial, Gumbel-max, inverse CDF) passes with
    probability > 1 - 1e-6: for a fixed wrong distribution q the likelihood ratio
    prod q(x)/p(x) has mean 1 under the right p, so it exceeds 1/ALPHA_LR with
    probability <= ALPHA_LR (Markov); each id's frequency leaves its Chernoff interval
    with probability <= 2 BETA_ID, and each tail set's falls below its lower bound with
    probability <= BETA_TAIL. Each listed mistake is >= 0.5 nats per draw away from p, so
    256 draws expose it; a truncation that drops >= 0.07 of the probability leaves a tail
    set undrawn, which its bound flags.
    """
    vocab = len(TARGET_P) + 1
    # The logits are the head's bias alone (its weight zeroed below): the smallest model.
    tiny = {"d_model": 4, "n_heads": 1, "n_layers": 1, "d_ff": 4}
    m, state = new_lm(hw, seed=780, vocab=vocab, max_len=N_DRAWS + 1, **tiny)
    logits = TAU * TARGET_P.log()  # softmax(logits / TAU) = TARGET_P
    bias = torch.cat([torch.tensor([40.0], dtype=torch.float64), logits])  # huge PAD
    load(
        m,
        {
            "head.weight": torch.zeros_like(state["head.weight"]),
            "head.bias": bias.to(hw.device),
        },
    )
    gen = hw.new("torch.Generator", device=hw.device)
    gen.call("manual_seed", 2029)
    prompt = torch.tensor([3], device=hw.device)
    what = f"generate(temperature={TAU})"
    out = hw.call(GENERATE, m, prompt, N_DRAWS, temperature=TAU, generator=gen)
    check_ids(out, prompt, N_DRAWS, hw, what)
    assert int(out.max()) < vocab, f"{what} produced ids outside the vocabulary"
    counts = torch.bincount(out[1:].cpu(), minlength=vocab)[1:].double()  # ids 1..15

    alternatives = {
        "temperature ignored (softmax(logits), not softmax(logits / temperature))": (
            torch.softmax(logits, -1)
        ),
        "logits multiplied by the temperature instead of divided": (
            torch.softmax(logits * TAU, -1)
        ),
        "uniform sampling over the ids": torch.full_like(TARGET_P, 1 / len(TARGET_P)),
        "argmax instead of sampling": F.one_hot(
            TARGET_P.argmax(), len(TARGET_P)
        ).double(),
    }
    llr = {
        mistake: float(
            (counts * (q / TARGET_P).log()).nan_to_num(neginf=-math.inf).sum()
        )
        for mistake, q in alternatives.items()
    }
    freq = (counts / N_DRAWS).tolist()
    seen = ", ".join(f"id {i + 1}: {f:.2f}" for i, f in enumerate(freq))
    best = max(llr.values())
    if best >= math.log(1 / ALPHA_LR):
        fits = " or ".join(k for k, v in llr.items() if v >= best - 1.0)
        raise AssertionError(
            f"{what}: the frequencies of {N_DRAWS} sampled ids ({seen}) do not follow "
            f"softmax(logits / temperature).\n{LIKELY} {fits}"
        )
    for i, (f, p) in enumerate(zip(freq, TARGET_P.tolist())):
        lo, hi = chernoff_interval(p, N_DRAWS, BETA_ID)
        assert lo < f < hi, (
            f"{what}: id {i + 1} was drawn with frequency {f:.3f} in {N_DRAWS} draws, "
            f"but softmax(logits / temperature) gives it {p:.3f} (a correct sampler "
            f"stays within ({max(lo, 0):.3f}, {min(hi, 1):.3f}))"
        )
    # The least likely ids, as a truncation drops them.
    for size in range(1, len(TARGET_P)):
        mass = float(TARGET_P[-size:].sum())
        f = float(counts[-size:].sum()) / N_DRAWS
        lo, _ = chernoff_interval(mass, N_DRAWS, BETA_TAIL)
        assert f > lo, (
            f"{what}: the {size} least likely ids (probability {mass:.3f} in all) were "
            f"drawn with frequency {f:.3f} in {N_DRAWS} draws; a sampler of "
            f"softmax(logits / temperature) stays above {max(lo, 0):.3f}.\n{LIKELY} the "
            "distribution is truncated (top-k or top-p sampling): sample from the whole "
            "softmax"
        )
    # The default temperature is 1.0: the same draws as temperature=1.0 given explicitly
    # (logits log p, so a temperature of 0.8 or 0.7 moves the probabilities).
    tau_one = torch.cat([torch.tensor([40.0], dtype=torch.float64), TARGET_P.log()])
    load(m, {"head.bias": tau_one.to(hw.device)})

    def draws(**temperature):
        gen = hw.new("torch.Generator", device=hw.device)
        gen.call("manual_seed", 2030)
        return hw.call(GENERATE, m, prompt, N_DEFAULT, generator=gen, **temperature)

    assert_exact(
        draws(),
        draws(temperature=1.0),
        "generate without temperature (the same generator seed as with temperature=1.0)",
        likely={"the default temperature is not 1.0": lambda: draws(temperature=0.8)},
    )


@pytest.mark.hidden
@pytest.mark.points(1)
def test_generate_errors(hw):
    """A prompt that is not a 1-D integer tensor of at least one id (2-D, 0-D, float,
    bool, a list, empty), temperature <= 0 when sampling, or more than max_len ids in all,
    is refused, the last before any work (no random numbers drawn). An int32 prompt and
    greedy decoding with temperature 0 are fine."""
    m, state = new_lm(hw, seed=790, max_len=8)
    prompt = torch.tensor([4, 2], device=hw.device)
    gen = hw.new("torch.Generator", device=hw.device)
    gen.call("manual_seed", 5)
    out = hw.call(GENERATE, m, prompt, 5, generator=gen)  # one below max_len
    what = "generate with len(prompt) + max_new_tokens < max_len"
    check_ids(out, prompt, 5, hw, what, pad_by_chance=True)
    # Valid calls are checked by their output, not only by not raising: greedy ids.
    what = "generate(greedy=True) with len(prompt) + max_new_tokens == max_len"
    out = attempt(what, AT_MAX_LEN, hw.call, GENERATE, m, prompt, 6, greedy=True)
    check_ids(out, prompt, 6, hw, what)
    check_greedy(hw, m, state, out, prompt, 6, what)
    what = "generate with len(prompt) + max_new_tokens == max_len"
    out = attempt(what, AT_MAX_LEN, hw.call, GENERATE, m, prompt, 6, generator=gen)
    check_ids(out, prompt, 6, hw, what, pad_by_chance=True)
    for what, bad in (
        ("a 2-D prompt", prompt[None]),
        ("a 0-D prompt", prompt[0]),
        ("a float prompt", prompt.double()),
        ("a bool prompt", prompt > 0),
        ("a list prompt", [4, 2]),
    ):
        raises_value_error(
            f"generate with {what}",
            ("prompt",),
            hw.call,
            GENERATE,
            m,
            bad,
            2,
            hint="SPEC.md: a prompt that is not a 1-D tensor of an integer dtype raises "
            "ValueError; never cast it",
        )
    for temperature in (0.0, -1.0):
        raises_value_error(
            f"generate(temperature={temperature}) when sampling",
            ("temperature",),
            hw.call,
            GENERATE,
            m,
            prompt,
            2,
            temperature=temperature,
            generator=gen,
        )
    what = "generate(greedy=True, temperature=0.0, use_cache=True), an int32 prompt"
    hint = "temperature <= 0 is only an error when sampling (greedy ignores it)"
    out = attempt(
        what,
        hint,
        hw.call,
        GENERATE,
        m,
        prompt.int(),
        3,
        temperature=0.0,
        greedy=True,
        use_cache=True,
    )
    check_ids(out, prompt, 3, hw, what)
    check_greedy(hw, m, state, out, prompt, 3, what)
    what = "generate(greedy=True) with a prompt that is a slice (every other id)"
    out = checked(what, hw.checked_call, GENERATE, m, prompt, 3, greedy=True)
    check_ids(out, prompt, 3, hw, what)
    check_greedy(hw, m, state, out, prompt, 3, what)
    raises_value_error(
        "generate with an empty prompt",
        ("prompt",),
        hw.call,
        GENERATE,
        m,
        prompt[:0],
        2,
    )
    before = gen.call("get_state")
    raises_value_error(
        "generate with len(prompt) + max_new_tokens > max_len",
        ("max_len", "max_new_tokens", "prompt"),
        hw.call,
        GENERATE,
        m,
        prompt,
        7,
        generator=gen,
    )
    assert torch.equal(gen.call("get_state"), before), (
        "generate drew random numbers before refusing len(prompt) + max_new_tokens > "
        "max_len: check the length before generating anything"
    )
