"""Part 5: LayerNorm, RMSNorm, the feed-forward network, pre- and post-norm blocks (SPEC.md 5).

Oracles are torch's own ``F.layer_norm``, ``F.rms_norm``, ``F.linear`` and
``F.scaled_dot_product_attention`` in float64 with the same random weights loaded into the
student's modules, so a block that mixes up the residual or the order of the norms shows.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from autograder.facts.protocol import SECOND_DEVICE
from tests.graded.answers import (
    block_suspects,
    feed_forward,
    ffn_residual,
    future,
    gradients,
    layer_norm,
    layer_norm_by_moments,
    layer_norm_suspects,
    post_norm,
    pre_norm,
    rms_norm,
    rms_suspects,
)
from tests.graded.compare import (
    LIKELY,
    SECOND_PRECISION,
    assert_close,
    assert_exact,
    assert_gradients,
)
from tests.graded.inputs import checked, gradients_of, on_second_device
from tests.graded.modules import build, load, plain_tensor_hint
from tests.graded.strategies import randn, random_state

pytestmark = pytest.mark.part(5)

F64 = torch.float64
D, H, D_FF = 8, 2, 12  # model width, heads, feed-forward width (d_h = 4)


# Oracles ------------------------------------------------------------------------------------


def block_state(seed, device):
    """Random weights for every parameter SPEC.md names in a block; norms near 1."""
    shapes = {
        "ln1.weight": (D,),
        "ln1.bias": (D,),
        "ln2.weight": (D,),
        "ln2.bias": (D,),
        "ffn.fc1.weight": (D_FF, D),
        "ffn.fc1.bias": (D_FF,),
        "ffn.fc2.weight": (D, D_FF),
        "ffn.fc2.bias": (D,),
    }
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        shapes[f"attn.{proj}.weight"] = (D, D)
        shapes[f"attn.{proj}.bias"] = (D,)
    sd = random_state(shapes, seed, F64, device)
    for name in ("ln1.weight", "ln2.weight"):
        sd[name] = sd[name] + 1.0
    return sd


def new_module(hw, name, *args, dtype=F64, state=None, **kwargs):
    """Construct, move to the test's device and dtype, then load ``state`` (names fixed by SPEC)."""
    to = {"device": hw.device, "dtype": dtype}
    return build(hw, name, *args, to=to, state=state, **kwargs)


def check_parameters(module, expected, what):
    """The named parameters exist with these exact initial values."""
    state = module.state_dict()
    for name, value in expected.items():
        if name not in state:
            hint = plain_tensor_hint(module, [name])
            raise AssertionError(
                f"{what} has no parameter named {name!r}"
                + (f"\n{LIKELY} {hint}" if hint else "")
            )
        assert_exact(
            state[name].to(value.device), value, f"{what}.{name} at initialization"
        )


# LayerNorm -----------------------------------------------------------------------------------
@pytest.mark.points(2)
@pytest.mark.public
def test_layer_norm_matches_torch(hw):
    """Biased variance, eps inside the square root: nn.LayerNorm's numbers."""
    x = randn(2, 3, 6, seed=50, device=hw.device, scale=2.0) + 0.5  # (B, T, d)
    ones = torch.ones(6, dtype=F64, device=hw.device)
    init = {"ln.weight": ones, "ln.bias": torch.zeros_like(ones)}

    norm = new_module(hw, "norm.LayerNorm", 6)
    check_parameters(
        norm, {"weight": ones, "bias": torch.zeros_like(ones)}, "LayerNorm(6)"
    )
    assert_close(
        norm(x),
        layer_norm(x, init, "ln"),
        "LayerNorm(6) with the default eps=1e-5",
        likely={
            **layer_norm_suspects(x, init, 1e-5),
            "LayerNorm's default eps must be 1e-5": lambda: layer_norm(
                x, init, "ln", eps=1e-6
            ),
        },
    )

    # loaded weight and bias, a large eps so where it goes matters
    sd = random_state({"ln.weight": (6,), "ln.bias": (6,)}, 51, F64, hw.device)
    state = {"weight": sd["ln.weight"], "bias": sd["ln.bias"]}
    norm = new_module(hw, "norm.LayerNorm", 6, eps=0.1, state=state)
    assert_close(
        norm(x),
        layer_norm(x, sd, "ln", eps=0.1),
        "LayerNorm(6, eps=0.1) with loaded weight and bias",
        likely=layer_norm_suspects(x, sd, 0.1),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_layer_norm_float32_and_gradients(hw):
    """float32 in, float32 out, with loaded weight and bias, also on rows far from zero.
    Gradients with respect to the input and to both parameters are nn.LayerNorm's (float64)."""
    x = randn(3, 5, seed=52, dtype=torch.float32, device=hw.device) * 3 - 1  # (T, d)
    sd = random_state({"ln.weight": (5,), "ln.bias": (5,)}, 53, F64, hw.device)
    norm = new_module(hw, "norm.LayerNorm", 5, dtype=torch.float32)
    load(norm, {"weight": sd["ln.weight"].float(), "bias": sd["ln.bias"].float()})
    x64 = x.double()
    assert_close(
        norm(x),
        layer_norm(x64, sd, "ln").float(),
        "LayerNorm(5) on float32",
        likely=layer_norm_suspects(x64, sd, 1e-5),
    )
    # Rows far from zero (mean 40, spread 2): correct code in any style loses at most a few
    # float32 digits to the offset (under a fifth of the tolerance); a variance taken as
    # E[x^2] - E[x]^2 loses most of them (5x the tolerance on these rows).
    far = (randn(4, 16, seed=100) * 2 + 40).to(hw.device, torch.float32)
    sd16 = random_state({"ln.weight": (16,), "ln.bias": (16,)}, 53, F64, hw.device)
    state16 = {"weight": sd16["ln.weight"].float(), "bias": sd16["ln.bias"].float()}
    norm = new_module(hw, "norm.LayerNorm", 16, dtype=torch.float32, state=state16)
    assert_close(
        norm(far),
        layer_norm(far.double(), sd16, "ln").float(),
        "LayerNorm(16) on float32 rows far from zero (mean 40, standard deviation 2)",
        likely={
            "the variance as E[x^2] - E[x]^2: far from zero the two terms cancel and take "
            "the float32 digits with them; use the mean of (x - mean)^2": (
                lambda: layer_norm_by_moments(far, sd16, "ln")
            )
        },
    )
    state = {"weight": sd["ln.weight"], "bias": sd["ln.bias"]}
    norm = new_module(hw, "norm.LayerNorm", 5, state=state)
    upstream = randn(3, 5, seed=57, device=hw.device)
    got = gradients_of(
        "LayerNorm(5)", norm.gradients, "__call__", x64, upstream=upstream
    )
    inputs, parameters = gradients(
        lambda x, w, b: F.layer_norm(x, (5,), w, b, eps=1e-5),
        {"args[0]": x64},
        upstream,
        parameters=state,
    )
    assert_gradients(got["inputs"], inputs, "LayerNorm(5)")
    assert_gradients(got["parameters"], parameters, "LayerNorm(5)", of="parameter")


# RMSNorm ------------------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_rms_norm_matches_torch(hw):
    """x / sqrt(mean(x^2) + eps) * weight, eps 1e-6 by default, one parameter ``weight``."""
    x = randn(2, 3, 6, seed=54, device=hw.device) + 0.7  # (B, T, d), mean far from 0
    ones = torch.ones(6, dtype=F64, device=hw.device)
    norm = new_module(hw, "norm.RMSNorm", 6)
    check_parameters(norm, {"weight": ones}, "RMSNorm(6)")
    if "bias" in norm.state_dict():
        raise AssertionError("RMSNorm has a parameter 'bias'; it must have none")
    assert_close(
        norm(x),
        rms_norm(x, ones, 1e-6),
        "RMSNorm(6) with the default eps=1e-6",
        likely={
            **rms_suspects(x, ones, 1e-6),
            "RMSNorm's default eps must be 1e-6 (not 1e-5)": lambda: rms_norm(
                x, ones, 1e-5
            ),
            "RMSNorm's default eps must be 1e-6 (not 1e-8)": lambda: rms_norm(
                x, ones, 1e-8
            ),
        },
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_rms_norm_loaded_weight_and_gradients(hw):
    """A loaded weight and a large eps, in float64 and float32. Gradients with respect to
    the input and the weight are nn.RMSNorm's (float64)."""
    weight = randn(5, seed=55, device=hw.device) + 1.0
    for dtype in (F64, torch.float32):
        x = randn(4, 5, seed=56, dtype=dtype, device=hw.device) + 0.5  # (T, d)
        norm = new_module(
            hw,
            "norm.RMSNorm",
            5,
            eps=0.05,
            dtype=dtype,
            state={"weight": weight.to(dtype)},
        )
        x64 = x.double()
        assert_close(
            norm(x),
            rms_norm(x64, weight, 0.05).to(dtype),
            f"RMSNorm(5, eps=0.05) with a loaded weight on {dtype}",
            likely=rms_suspects(x64, weight, 0.05),
        )
    norm = new_module(hw, "norm.RMSNorm", 5, eps=0.05, state={"weight": weight})
    upstream = randn(4, 5, seed=58, device=hw.device)
    got = gradients_of("RMSNorm(5)", norm.gradients, "__call__", x64, upstream=upstream)
    inputs, parameters = gradients(
        lambda x, w: F.rms_norm(x, (5,), w, eps=0.05),
        {"args[0]": x64},
        upstream,
        parameters={"weight": weight},
    )
    assert_gradients(got["inputs"], inputs, "RMSNorm(5, eps=0.05)")
    assert_gradients(
        got["parameters"], parameters, "RMSNorm(5, eps=0.05)", of="parameter"
    )


# FeedForward ---------------------------------------------------------------------------------
@pytest.mark.points(1)
@pytest.mark.public
def test_feed_forward_matches_oracle(hw):
    """fc2(relu(fc1(x))), position by position."""
    shapes = {
        "fc1.weight": (7, 4),
        "fc1.bias": (7,),
        "fc2.weight": (4, 7),
        "fc2.bias": (4,),
    }
    sd = random_state(shapes, 57, F64, hw.device, scale=1.0)
    ffn = new_module(hw, "block.FeedForward", 4, 7, state=sd)
    x = randn(2, 3, 4, seed=58, device=hw.device)  # (B, T, D)
    assert_close(ffn(x), feed_forward(x, sd, prefix=""), "FeedForward(4, 7)(x)")


# Blocks -------------------------------------------------------------------------------------
@pytest.mark.points(2)
@pytest.mark.public
def test_pre_norm_block_matches_oracle(hw):
    """h = x + attn(ln1(x)); out = h + ffn(ln2(h)), causal, batch of 2; also moved to a
    second device with x and the mask there (SPEC.md: every module works on any device and
    returns tensors on the input's device)."""
    sd = block_state(60, hw.device)
    block = new_module(hw, "block.PreNormBlock", D, H, D_FF, state=sd)
    x = randn(2, 5, D, seed=61, device=hw.device)  # (B, T, D)
    mask = future(5, 5, device=hw.device)
    assert_close(
        block(x, mask),  # by position: forward(x, mask=None, cache=None)
        pre_norm(x, sd, mask),
        "PreNormBlock(8, 2, 12)(x, causal mask)",
        likely=block_suspects(x, sd, mask, "pre"),
    )
    on_second_device("PreNormBlock.to", block.on_second_device, "to", SECOND_DEVICE)
    x, mask = randn(2, 5, D, seed=61), future(5, 5)
    what = "PreNormBlock(8, 2, 12)(x, causal mask) on a second device"
    got = on_second_device(what, block.on_second_device, "__call__", x, mask)
    assert_close(
        got,
        pre_norm(x, block_state(60, "cpu"), mask),
        what,
        precision=SECOND_PRECISION,
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_post_norm_block_matches_oracle(hw):
    """h = ln1(x + attn(x)); out = ln2(h + ffn(h)), causal, batch of 2, float64 and float32."""
    sd = block_state(62, hw.device)
    mask = future(4, 4, device=hw.device)
    for dtype in (F64, torch.float32):
        block = new_module(
            hw,
            "block.PostNormBlock",
            D,
            H,
            D_FF,
            dtype=dtype,
            state={k: v.to(dtype) for k, v in sd.items()},
        )
        x = randn(2, 4, D, seed=63, dtype=dtype, device=hw.device)  # (B, T, D)
        x64 = x.double()
        assert_close(
            block(x, mask=mask),
            post_norm(x64, sd, mask).to(dtype),
            f"PostNormBlock(8, 2, 12)(x, causal mask) on {dtype}",
            likely=block_suspects(x64, sd, mask, "post"),
        )


@pytest.mark.points(2)
@pytest.mark.public
def test_pre_norm_block_zeroed_branch(hw):
    """Both branches zeroed: exactly x (the notebook's LN(x) is wrong); attention alone: x + ffn(ln2(x))."""
    sd = block_state(64, hw.device)
    fc2 = {name: sd[name] for name in ("ffn.fc2.weight", "ffn.fc2.bias")}
    for name in ("attn.out_proj.weight", "attn.out_proj.bias", *fc2):
        sd[name] = torch.zeros_like(sd[name])
    block = new_module(hw, "block.PreNormBlock", D, H, D_FF, state=sd)
    x = randn(2, 4, D, seed=65, device=hw.device)  # (B, T, D)
    mask = future(4, 4, device=hw.device)
    ln1 = layer_norm(x, sd, "ln1")
    assert_exact(
        block(x, mask=mask),
        x,
        "PreNormBlock with attn.out_proj and ffn.fc2 zeroed (should be exactly x)",
        likely={
            "the residual adds the normalized tensor: the block returns LN(x) instead of x": ln1,
            "the block returns ln2(ln1(x)) instead of x: the residuals add the normalized "
            "tensors, or the norms come after the additions (post-norm order)": lambda: (
                layer_norm(ln1, sd, "ln2")
            ),
        },
    )

    sd.update(fc2)  # the feed-forward branch back: x + ffn(ln2(x))
    load(block, fc2)
    assert_close(
        block(x, mask=mask),
        ffn_residual(x, sd),
        "PreNormBlock with attn.out_proj zeroed (should be x + ffn(ln2(x)))",
        likely=block_suspects(x, sd, mask, "pre"),
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_post_norm_block_zeroed_branch(hw):
    """Both branches zeroed, post-norm still normalizes: ln2(ln1(x)), unlike pre-norm's x."""
    sd = block_state(66, hw.device)
    for name in (
        "attn.out_proj.weight",
        "attn.out_proj.bias",
        "ffn.fc2.weight",
        "ffn.fc2.bias",
    ):
        sd[name] = torch.zeros_like(sd[name])
    block = new_module(hw, "block.PostNormBlock", D, H, D_FF, state=sd)
    x = randn(2, 4, D, seed=67, device=hw.device)  # (B, T, D)
    assert_close(
        block(x, mask=future(4, 4, device=hw.device)),
        layer_norm(layer_norm(x, sd, "ln1"), sd, "ln2"),
        "PostNormBlock with attn.out_proj and ffn.fc2 zeroed (should be ln2(ln1(x)))",
        likely={"pre- and post-norm swapped (this is the pre-norm order)": x},
    )


@pytest.mark.points(1)
@pytest.mark.hidden
@pytest.mark.uses(6)  # the KV cache
def test_pre_norm_block_with_cache(hw):
    """Token by token through a KVCache, and in chunks of two with their causal masks,
    gives the full causal pass (batch of 2): the block hands attn both mask and cache."""
    sd = block_state(68, hw.device)
    block = new_module(hw, "block.PreNormBlock", D, H, D_FF, state=sd)
    x = randn(2, 4, D, seed=69, device=hw.device)  # (B, T, D)
    full = pre_norm(x, sd, future(4, 4, device=hw.device))
    cache = hw.new("gqa.KVCache", 2, H, 4, D // H, device=hw.device, dtype=F64)
    steps = [block(x[:, t : t + 1], cache=cache) for t in range(4)]  # (B, 1, D) each
    assert_close(
        torch.cat(steps, dim=1),
        full,
        "PreNormBlock fed one token at a time with a KVCache",
    )
    cache = hw.new("gqa.KVCache", 2, H, 4, D // H, device=hw.device, dtype=F64)
    chunks = [  # t new tokens after t0 cached ones: mask causal_mask(t, t0 + t)
        block(x[:, t0 : t0 + 2], mask=future(2, t0 + 2, device=hw.device), cache=cache)
        for t0 in (0, 2)
    ]
    assert_close(
        torch.cat(chunks, dim=1),
        full,
        "PreNormBlock fed two chunks of 2 tokens with a KVCache and causal_mask(2, t0 + 2)",
        likely={
            "the mask is not passed on to attn when a cache is given": lambda: (
                torch.cat(
                    [pre_norm(x[:, :2], sd, None), pre_norm(x, sd, None)[:, 2:]], dim=1
                )
            )
        },
    )


@pytest.mark.points(1)
@pytest.mark.hidden
def test_blocks_without_mask_attend_everywhere(hw):
    """mask=None (the default) means no masking in both blocks, as in part 1; the blocks and
    the norms take a slice of a tensor and leave their input unchanged."""
    sd = block_state(70, hw.device)
    x = randn(2, 4, D, seed=71, device=hw.device)  # (B, T, D)
    everything = torch.zeros(4, 4, dtype=torch.bool, device=hw.device)
    causal_mask = future(4, 4, device=hw.device)
    for name, form, oracle in (
        ("PreNormBlock", "pre", pre_norm),
        ("PostNormBlock", "post", post_norm),
    ):
        block = new_module(hw, f"block.{name}", D, H, D_FF, state=sd)
        what = f"{name}(8, 2, 12)(x) without a mask"
        assert_close(
            checked(what, block.checked_call, "__call__", x),
            oracle(x, sd, everything),
            what + " (x a slice)",
            likely={
                "mask=None treated as a causal mask; None means no masking": oracle(
                    x, sd, causal_mask
                ),
                **block_suspects(x, sd, everything, form),
            },
        )
    ones = torch.ones(D, dtype=F64, device=hw.device)
    for name, want in (
        ("LayerNorm", layer_norm(x, {"ln.weight": ones, "ln.bias": 0 * ones}, "ln")),
        ("RMSNorm", rms_norm(x, ones, 1e-6)),
    ):
        norm = new_module(hw, f"norm.{name}", D)
        what = f"{name}({D})(x)"
        assert_close(checked(what, norm.checked_call, "__call__", x), want, what)
