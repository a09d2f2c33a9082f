"""Part 6: grouped-query attention, RoPE at absolute positions, the KV cache (SPEC.md part 6).

The oracle is ``F.scaled_dot_product_attention(..., is_causal=True, enable_gqa=True)`` in float64
on the loaded projections, with RoPE applied by the direct interleaved formula. Shapes keep
``n_heads != n_kv_heads`` and batch 2 so that tiled kv heads, caches of ``h_q`` heads and
positions that restart at 0 in every cached step all show.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given

from autograder.facts.protocol import SECOND_DEVICE, StudentError
from tests.graded.answers import (
    gqa_oracle,
    gqa_suspects,
    kv_cache_numel_suspects,
    kv_cache_numels,
    project,
    repeat_kv,
    restarting_positions,
    rope_oracle,
)
from tests.graded.compare import LIKELY, SECOND_PRECISION, assert_close, assert_exact
from tests.graded.expect import raises_value_error
from tests.graded.inputs import checked, on_second_device
from tests.graded.mistakes import TRUE_DIVISION
from tests.graded.modules import build
from tests.graded.strategies import examples, randn, random_state, seeds, sizes

pytestmark = pytest.mark.part(6)

F64 = torch.float64
B, T, D, H, H_KV = 2, 5, 24, 4, 2  # d_h = 6, two query heads per kv head


# Oracles ------------------------------------------------------------------------------------
def gqa_state(seed, device, d_model=D, n_heads=H, n_kv=H_KV, dtype=F64):
    d_h = d_model // n_heads
    shapes = {
        "q_proj.weight": (n_heads * d_h, d_model),
        "k_proj.weight": (n_kv * d_h, d_model),
        "v_proj.weight": (n_kv * d_h, d_model),
        "out_proj.weight": (d_model, n_heads * d_h),
    }
    return random_state(shapes, seed, dtype, device)


NOT_OFFSET = (
    "RoPE positions not offset by the cache length: with a cache, q and k sit at "
    "cache.length + arange(T)"
)
AT_ZERO = (
    "every token rotated as position 0: RoPE positions not offset by the cache length "
    "(cache.length + arange(T)), or no RoPE at all"
)


def new_gqa(hw, sd, *args, dtype=F64):
    state = {k: v.to(dtype) for k, v in sd.items()}
    to = {"device": hw.device, "dtype": dtype}
    return build(hw, "gqa.GroupedQueryAttention", *args, to=to, state=state)


IGNORES_DTYPE = "the cache's dtype follows torch.get_default_dtype() instead of the dtype it is given"


def new_cache(hw, *sizes, dtype=F64):
    """A student ``KVCache(*sizes)`` on the device in ``dtype``, once its buffers are there:
    buffers in another dtype would meet the keys' first in the attention, as an error that
    says nothing of the cache."""
    cache = hw.new("gqa.KVCache", *sizes, device=hw.device, dtype=dtype)
    for name in ("k", "v"):
        with hw.unspecified_values():  # nothing written yet
            got = cache.attr(name).dtype
        if got != dtype:
            hint = f"\n{LIKELY} {IGNORES_DTYPE}" if got == torch.float32 else ""
            raise AssertionError(
                f"KVCache{sizes} made with dtype={dtype} holds {name} in {got}; SPEC.md: "
                f"the buffers are in the dtype given{hint}"
            )
    return cache


def decode(hw, gqa, x, chunks, n_cache_heads, d_h, max_len, dtype=F64):
    """Feed ``x`` chunk by chunk through ``gqa`` with a fresh cache; (outputs (B, T, D), cache)."""
    cache = new_cache(hw, x.shape[0], n_cache_heads, max_len, d_h, dtype=dtype)
    outs, start = [], 0
    for c in chunks:
        outs.append(gqa(x[:, start : start + c], cache=cache))  # (B, c, D)
        start += c
    return torch.cat(outs, dim=1), cache


def cached_decode(hw, gqa, x, chunks, n_heads, n_kv, d_h, max_len):
    """``decode`` with a cache of ``n_kv`` heads; if that fails but ``n_heads`` heads work,
    the module stores the repeated query heads: say so."""
    try:
        return decode(hw, gqa, x, chunks, n_kv, d_h, max_len)
    except StudentError as err:
        if n_heads != n_kv:
            try:
                decode(hw, gqa, x, chunks, n_heads, d_h, max_len)
            except StudentError:
                pass
            else:
                raise AssertionError(
                    f"cached decoding with a KVCache of n_kv_heads={n_kv} heads raised "
                    f"{err.type_name}: {err.message}\n{LIKELY} the cache receives n_heads "
                    "(repeated) key/value heads; append the n_kv_heads rotated keys and values, "
                    "and repeat them only for the attention"
                ) from None
        raise


def assert_one_pass(hw, got, x, sd, chunks, what, restarted):
    """``got``, ``x`` fed through a cache in ``chunks``, equals one full causal pass;
    ``restarted`` is the mistake that restarts RoPE positions at 0 in every chunk."""
    assert_close(
        got,
        gqa_oracle(x, sd),
        what,
        likely={
            restarted: lambda: gqa_oracle(
                x, sd, positions=restarting_positions(chunks, hw.device)
            ),
            **gqa_suspects(x, sd),
        },
    )


# kv_cache_numel and repeat_kv -----------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_kv_cache_numel(hw):
    """2 * B * L * T * h_kv * d_h elements (keys AND values), as a Python int."""
    cases = [(1, 1, 1, 1, 1), (2, 3, 5, 4, 8), (3, 2, 7, 1, 6), (4, 12, 1024, 8, 64)]
    got = []
    for args in cases:
        value = hw.call("gqa.kv_cache_numel", *args)
        if type(value) is not int:
            raise AssertionError(
                f"kv_cache_numel{args} should return an int, got {type(value).__name__}"
            )
        got.append(value)
    assert_exact(
        torch.tensor(got),
        kv_cache_numels(cases),
        f"kv_cache_numel on {cases}",
        likely=kv_cache_numel_suspects(cases),
    )


@pytest.mark.points(1)
@pytest.mark.public
def test_repeat_kv_interleaves(hw):
    """Query head j uses kv head j // n_rep: [k0, k0, k1, k1], never [k0, k1, k0, k1]; x
    may be a slice, and stays unchanged."""
    for shape, n_rep in (((2, 3, 4, 5), 2), ((1, 2, 3, 4), 3), ((2, 2, 3, 2), 1)):
        x = randn(*shape, seed=70 + n_rep, device=hw.device)  # (B, h_kv, T, d)
        what = f"repeat_kv(x {shape}, n_rep={n_rep})"
        assert_exact(
            checked(what, hw.checked_call, "gqa.repeat_kv", x, n_rep),
            repeat_kv(x, n_rep),
            what,
            likely={
                "kv heads tiled ([k0, k1, k0, k1]) instead of each repeated n_rep times in "
                "place ([k0, k0, k1, k1])": repeat_kv(x, n_rep, tiled=True)
            },
        )


# KVCache ------------------------------------------------------------------------------------
def int_length(cache, when: str) -> int:
    """The cache's ``length``, a Python int ``when`` read (SPEC.md: an int, not a tensor)."""
    length = cache.attr("length")
    assert type(length) is int, (
        f"KVCache.length should be a Python int {when}, got {type(length).__name__}\n"
        f"{LIKELY} length kept as a tensor: keep an int (add k_new.shape[2] to it)"
    )
    return length


@pytest.mark.points(1)
@pytest.mark.public
def test_kv_cache_append(hw):
    """Preallocated (B, h_kv, max_len, d_head), float32 unless told otherwise (whatever
    torch's default dtype); an int length; append writes at length, up to max_len exactly,
    returns the prefix and leaves its (non-contiguous) arguments unchanged."""
    cache = hw.new("gqa.KVCache", 2, 3, 6, 4, device=hw.device)
    with hw.unspecified_values():  # nothing written yet: its shape and dtype only
        k = cache.attr("k")
    if tuple(k.shape) != (2, 3, 6, 4) or k.dtype != torch.float32:
        raise AssertionError(
            f"KVCache(2, 3, 6, 4).k should be float32 of shape (2, 3, 6, 4) (B, h_kv, max_len, "
            f"d_head), got {k.dtype} {tuple(k.shape)}"
        )
    made = hw.call_with_default_dtype(F64, "gqa.KVCache", 2, 3, 6, 4, device=hw.device)
    with hw.unspecified_values():
        dtype = made.attr("k").dtype
    assert dtype == torch.float32, (
        f"KVCache(2, 3, 6, 4) made while torch's default dtype is float64 holds {dtype}\n"
        f"{LIKELY} the cache's dtype follows torch.get_default_dtype(); SPEC.md's signature "
        "defaults it to float32"
    )

    cache = new_cache(hw, 2, 3, 6, 4)
    for name in ("k", "v"):
        with hw.unspecified_values():
            tensor = cache.attr(name)
        if tuple(tensor.shape) != (2, 3, 6, 4) or tensor.dtype != F64:
            raise AssertionError(
                f"KVCache(..., dtype=float64).{name} should be float64 (2, 3, 6, 4), got "
                f"{tensor.dtype} {tuple(tensor.shape)}"
            )
        if tensor.device.type != hw.device.type:
            raise AssertionError(
                f"KVCache.{name} is on {tensor.device}, not {hw.device}"
            )
    length = int_length(cache, "when new")
    assert length == 0, "a new KVCache should have length 0"

    ks = [randn(2, 3, t, 4, seed=72 + t, device=hw.device) for t in (2, 3, 1)]
    vs = [randn(2, 3, t, 4, seed=82 + t, device=hw.device) for t in (2, 3, 1)]
    filled = 0
    for k_new, v_new in zip(ks, vs):
        before, filled = filled, filled + k_new.shape[2]
        what = f"KVCache.append at length {before} of max_len 6 ({k_new.shape[2]} new)"
        k_all, v_all = checked(
            what,
            cache.checked_call,
            "append",
            k_new,
            v_new,
            raises="append refuses to fill the cache up to max_len exactly (it overflows "
            "only when length + t > max_len)"
            if filled == 6
            else "",
        )
        length = int_length(cache, f"after {filled} positions")
        stuck = f"\n{LIKELY} append does not advance length" if length == before else ""
        assert length == filled, (
            f"KVCache.length is {length} after {filled} positions" + stuck
        )
        k_seen = torch.cat(ks, dim=2)[:, :, :filled]
        v_seen = torch.cat(vs, dim=2)[:, :, :filled]
        assert_exact(k_all, k_seen, f"the keys append returns after {filled} positions")
        assert_exact(
            v_all, v_seen, f"the values append returns after {filled} positions"
        )
    assert_exact(cache.attr("k"), torch.cat(ks, dim=2), "KVCache.k when full")
    assert_exact(cache.attr("v"), torch.cat(vs, dim=2), "KVCache.v when full")

    cache.call("reset")
    assert cache.attr("length") == 0, "KVCache.length should be 0 after reset()"
    k_all, v_all = cache.call("append", vs[0], ks[0])  # writes at 0 again
    assert_exact(k_all, vs[0], "the keys append returns after reset()")
    assert_exact(v_all, ks[0], "the values append returns after reset()")


@pytest.mark.points(1)
@pytest.mark.hidden
def test_kv_cache_errors(hw):
    """Overflow raises and writes nothing; another dtype, device or shape raises ValueError."""
    cache = new_cache(hw, 2, 2, 5, 4)
    k_new = randn(2, 2, 3, 4, seed=90, device=hw.device)  # (B, h_kv, t=3, d_head)
    v_new = randn(2, 2, 3, 4, seed=91, device=hw.device)
    cache.call("append", k_new, v_new)  # valid: length 3
    with hw.unspecified_values():  # positions 3 and 4 never written
        k_before = cache.attr("k").clone()
        v_before = cache.attr("v").clone()

    k_more = randn(2, 2, 3, 4, seed=92, device=hw.device)  # 3 + 3 > max_len = 5
    v_more = randn(2, 2, 3, 4, seed=93, device=hw.device)
    raises_value_error(
        "appending 3 positions to a KVCache(max_len=5) holding 3",
        ["max_len", "length", "k_new", "v_new"],
        cache.call,
        "append",
        k_more,
        v_more,
    )
    length = cache.attr("length")
    assert length == 3, f"an overflowing append changed length from 3 to {length}"
    for name, before, more in (("k", k_before, k_more), ("v", v_before, v_more)):
        partial = before.clone()
        partial[:, :, 3:] = more[:, :, :2]
        # Bits, not values: unwritten positions may hold any garbage (torch.empty), NaN too.
        with hw.unspecified_values():
            after = cache.attr(name)
        assert_exact(
            after.view(torch.int64),
            before.view(torch.int64),
            f"KVCache.{name} after an overflowing append (nothing may be written)",
            likely={
                "the overflowing append wrote the positions that fit": partial.view(
                    torch.int64
                )
            },
        )

    bad = {
        "float32 keys and values in a float64 cache": (
            k_more[:, :, :1].float(),
            v_more[:, :, :1].float(),
        ),
        "3 kv heads in a cache of 2": (
            randn(2, 3, 1, 4, seed=94, device=hw.device),
            randn(2, 3, 1, 4, seed=95, device=hw.device),
        ),
        "d_head 6 in a cache of d_head 4": (
            randn(2, 2, 1, 6, seed=96, device=hw.device),
            randn(2, 2, 1, 6, seed=97, device=hw.device),
        ),
        "batch 1 in a cache of batch 2": (k_more[:1, :, :1], v_more[:1, :, :1]),
    }
    for what, (k_bad, v_bad) in bad.items():
        raises_value_error(
            f"KVCache.append with {what}",
            ["k_new", "v_new", "dtype", "shape"],
            cache.call,
            "append",
            k_bad,
            v_bad,
        )

    raises_value_error(
        "KVCache.append with float64 keys but float32 values in a float64 cache",
        ["v_new", "dtype"],
        cache.call,
        "append",
        k_more[:, :, :1],
        v_more[:, :, :1].float(),
        hint="only k_new is checked; v_new needs the same dtype, device and shape checks",
    )
    raises_value_error(
        "KVCache.append with 2 positions of keys and 1 of values",
        ["k_new", "v_new", "shape"],
        cache.call,
        "append",
        k_more[:, :, :2],
        v_more[:, :, :1],
        hint="k_new and v_new are each checked, but not against each other (the values "
        "would be broadcast over the keys' positions)",
    )

    # another device: a cache elsewhere ("meta" when testing on the CPU)
    elsewhere = "cpu" if hw.device.type != "cpu" else "meta"
    other = hw.new("gqa.KVCache", 2, 2, 5, 4, device=elsewhere, dtype=F64)
    raises_value_error(
        f"KVCache.append of {hw.device.type} tensors to a cache on {elsewhere}",
        ["k_new", "v_new", "device"],
        other.call,
        "append",
        k_new,
        v_new,
    )


# GroupedQueryAttention ---------------------------------------------------------------------
@pytest.mark.points(2)
@pytest.mark.public
def test_gqa_matches_oracle(hw):
    """4 query heads on 2 kv heads, RoPE, causal, batch of 2: F.sdpa(enable_gqa=True)."""
    sd = gqa_state(100, hw.device)
    gqa = new_gqa(hw, sd, D, H, H_KV)
    for name, value in (("n_heads", H), ("n_kv_heads", H_KV), ("d_head", D // H)):
        got = gqa.attr(name)
        assert type(got) is int and got == value, (
            f"GroupedQueryAttention(24, 4, 2).{name} is {got!r}, not the int {value}"
            + (f"\n{LIKELY} {TRUE_DIVISION}" if isinstance(got, float) else "")
        )
    x = randn(B, T, D, seed=101, device=hw.device)  # (B, T, D)
    assert_close(
        gqa(x),
        gqa_oracle(x, sd),
        "GroupedQueryAttention(24, 4, 2)(x (2, 5, 24))",
        likely=gqa_suspects(x, sd),
    )


@pytest.mark.points(2)
@pytest.mark.public
def test_gqa_cached_decoding(hw):
    """One token at a time through a KVCache (longer than needed) equals one full causal pass."""
    sd = gqa_state(102, hw.device)
    gqa = new_gqa(hw, sd, D, H, H_KV)
    x = randn(B, T, D, seed=103, device=hw.device)  # (B, T, D)
    chunks = [1] * T
    got, cache = cached_decode(hw, gqa, x, chunks, H, H_KV, D // H, max_len=T + 2)
    what = "GroupedQueryAttention fed one token at a time with a KVCache"
    assert_one_pass(hw, got, x, sd, chunks, what, AT_ZERO)
    length = cache.attr("length")
    assert length == T, f"the cache's length is {length} after {T} tokens"
    with hw.unspecified_values():  # the last two positions never written
        shape = tuple(cache.attr("k").shape)
    assert shape == (B, H_KV, T + 2, D // H), (
        f"the cache's k has shape {shape}; it must keep (B, n_kv_heads, max_len, d_head)"
    )
    check_decoding_on_second_device(hw, gqa, sd)


def check_decoding_on_second_device(hw, gqa, sd):
    """The module, x and a ``KVCache(..., device=)`` on a second device: the cache's buffers
    and every output are there, and the outputs are right (SPEC.md: every module works on
    any device; part 6: ``KVCache``'s ``device``)."""
    on_second_device(
        "GroupedQueryAttention.to", gqa.on_second_device, "to", SECOND_DEVICE
    )
    what = f"KVCache({B}, {H_KV}, {T}, {D // H}, device={SECOND_DEVICE})"
    cache = on_second_device(
        what,
        hw.new_on_second_device,
        "gqa.KVCache",
        *(B, H_KV, T, D // H),
        device=SECOND_DEVICE,
        dtype=F64,
    )
    for buffer in ("k", "v"):
        on_second_device(f"{what}.{buffer}", cache.attr_on_second_device, buffer)
    x = randn(B, T, D, seed=103)  # (B, T, D)
    what = "GroupedQueryAttention fed one token at a time on a second device"
    steps = [
        on_second_device(
            what, gqa.on_second_device, "__call__", x[:, i : i + 1], cache=cache
        )
        for i in range(T)
    ]
    assert_close(
        torch.cat(steps, dim=1).to(hw.device),
        gqa_oracle(x.to(hw.device), sd),
        what,
        precision=SECOND_PRECISION,
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_gqa_cached_chunks(hw):
    """Chunks of 2, 1 and 3 tokens through a cache equal one full causal pass."""
    sd = gqa_state(104, hw.device)
    gqa = new_gqa(hw, sd, D, H, H_KV)
    x = randn(B, 6, D, seed=105, device=hw.device)  # (B, T=6, D)
    chunks = [2, 1, 3]
    got, _ = cached_decode(hw, gqa, x, chunks, H, H_KV, D // H, max_len=7)
    what = "GroupedQueryAttention fed chunks of 2, 1 and 3 tokens with a KVCache"
    assert_one_pass(hw, got, x, sd, chunks, what, NOT_OFFSET)


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(5)
@given(
    seed=seeds, batch=sizes(1, 2), t=sizes(1, 4), heads=sizes(1, 3), pairs=sizes(1, 2)
)
def test_gqa_equals_multi_head(hw, seed, batch, t, heads, pairs):
    """n_kv_heads == n_heads is plain multi-head attention with RoPE."""
    d_model = heads * 2 * pairs
    sd = gqa_state(seed, hw.device, d_model, heads, heads)
    gqa = new_gqa(hw, sd, d_model, heads, heads)
    x = randn(batch, t, d_model, seed=seed + 1, device=hw.device)
    q, k, v = project(x, sd, heads, heads, torch.arange(t, device=hw.device))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, d_h)
    expected = F.linear(
        out.transpose(1, 2).reshape(batch, t, d_model), sd["out_proj.weight"]
    )
    assert_close(
        gqa(x),
        expected,
        f"GroupedQueryAttention({d_model}, {heads}, {heads}) (multi-head) on x {tuple(x.shape)}",
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_gqa_multi_query_float32(hw):
    """n_kv_heads == 1 (multi-query attention), in float32."""
    sd = gqa_state(106, hw.device, d_model=12, n_heads=3, n_kv=1)
    gqa = new_gqa(hw, sd, 12, 3, 1, dtype=torch.float32)
    x = randn(2, 4, 12, seed=107, dtype=torch.float32, device=hw.device)  # (B, T, D)
    assert_close(
        gqa(x),
        gqa_oracle(x, sd, 3, 1).float(),
        "GroupedQueryAttention(12, 3, 1)(x float32 (2, 4, 12))",
        likely=gqa_suspects(x.double(), sd, 3, 1),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@examples(5)
@given(
    seed=seeds,
    batch=sizes(1, 2),
    n_kv=sizes(1, 2),
    n_rep=sizes(1, 3),
    t=sizes(1, 3),
    spare=sizes(0, 2),
)
def test_gqa_cache_holds_kv_heads(hw, seed, batch, n_kv, n_rep, t, spare):
    """The cache keeps n_kv_heads rotated keys and values; kv_cache_numel counts its elements."""
    n_heads, d_h = n_kv * n_rep, 2
    d_model = n_heads * d_h
    max_len = t + spare
    sd = gqa_state(seed, hw.device, d_model, n_heads, n_kv)
    gqa = new_gqa(hw, sd, d_model, n_heads, n_kv)
    x = randn(batch, t, d_model, seed=seed + 1, device=hw.device)  # (B, T, D)
    _, cache = cached_decode(hw, gqa, x, [t], n_heads, n_kv, d_h, max_len)
    with hw.unspecified_values():  # the spare positions never written
        k, v = cache.attr("k"), cache.attr("v")
    shape = (batch, n_kv, max_len, d_h)
    assert tuple(k.shape) == shape and tuple(v.shape) == shape, (
        f"the cache's k and v have shapes {tuple(k.shape)}, {tuple(v.shape)}; expected {shape}"
    )
    numel = hw.call("gqa.kv_cache_numel", batch, 1, max_len, n_kv, d_h)
    assert numel == k.numel() + v.numel(), (
        f"kv_cache_numel({batch}, 1, {max_len}, {n_kv}, {d_h}) = {numel}, but the cache holds "
        f"{k.numel() + v.numel()} elements"
    )
    _, k_rot, v_plain = project(x, sd, n_heads, n_kv, torch.arange(t, device=hw.device))
    _, k_plain, _ = project(x, sd, n_heads, n_kv, torch.zeros(t, device=hw.device))
    assert_close(
        k[:, :, :t],
        k_rot,
        "the keys in the cache (rotated by RoPE)",
        likely={
            "the cache holds the keys before RoPE; append the rotated keys": k_plain
        },
    )
    v_rot = rope_oracle(v_plain, torch.arange(t, device=hw.device))
    assert_close(
        v[:, :, :t],
        v_plain,
        "the values in the cache",
        likely={"RoPE rotates the values too; it rotates queries and keys only": v_rot},
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_gqa_constructor_errors(hw):
    """Heads that do not divide, or an odd d_h, raise ValueError naming the sizes."""
    hw.new("gqa.GroupedQueryAttention", 24, 4, 2)  # valid: must not raise
    for args, names in (
        ((24, 4, 3), ("n_heads", "n_kv_heads")),  # 4 % 3 != 0
        ((20, 3, 1), ("d_model", "n_heads")),  # 20 % 3 != 0
        ((12, 4, 2), ("d_h", "d_head", "d_model", "n_heads")),  # d_h = 3 is odd
    ):
        raises_value_error(
            f"GroupedQueryAttention{args}",
            names,
            hw.new,
            "gqa.GroupedQueryAttention",
            *args,
        )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_gqa_rope_base(hw):
    """rope_base reaches RoPE: GroupedQueryAttention(24, 4, 2, rope_base=100.0), the full pass
    on a slice of a tensor (left unchanged) and cached decoding, again after
    KVCache.reset()."""
    sd = gqa_state(108, hw.device)
    to = {"device": hw.device, "dtype": F64}
    gqa = build(
        hw, "gqa.GroupedQueryAttention", D, H, H_KV, rope_base=100.0, to=to, state=sd
    )
    x = randn(B, T, D, seed=109, device=hw.device)  # (B, T, D)
    positions = torch.arange(T, device=hw.device)
    want = gqa_oracle(x, sd, positions=positions, base=100.0)
    likely = {
        "rope_base ignored: RoPE used the default base 10000": lambda: gqa_oracle(x, sd)
    }
    what = "GroupedQueryAttention(24, 4, 2, rope_base=100.0)(x (2, 5, 24))"
    got = checked(what, gqa.checked_call, "__call__", x)
    assert_close(got, want, what + " on a slice", likely=likely)
    got, cache = cached_decode(hw, gqa, x, [2, 1, 2], H, H_KV, D // H, max_len=T)
    assert_close(got, want, what + " fed in chunks of 2, 1, 2", likely=likely)
    cache.call(
        "reset"
    )  # length 0: the same cache serves a new sequence from position 0
    again = torch.cat([gqa(x[:, :3], cache=cache), gqa(x[:, 3:], cache=cache)], dim=1)
    assert_close(
        again,
        want,
        what + " fed in chunks of 3, 2 through the same cache after reset()",
        likely={
            "positions continue from before reset(): RoPE positions must come from "
            "cache.length": lambda: gqa_oracle(
                x, sd, positions=positions + T, base=100.0
            ),
            **likely,
        },
    )
