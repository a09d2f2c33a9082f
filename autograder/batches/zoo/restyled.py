"""Held-apart mistakes: the zoo's mistakes written differently, to measure diagnosis honestly.

A catalogue mutant getting its own description back proves nothing: its replay is itself. Each
entry here makes one catalogue mistake (``of``) in other code: alice's submission (another
style throughout), or the reference in other words or beside a harmless change. None of them
is replayed by ``autograder.grading.diagnosis``; a right diagnosis is the catalogue's mutant answering
as this code does. ``CORRECT`` are correct solutions in other styles: they must never get a
mistake named. ``autograder zoo`` grades both and reports the rates (``autograder.batches.zoo``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.facts.points import PACKAGE
from autograder.sources.release import REPO, SOLUTIONS
from autograder.sources.zoo.mutants import CATALOGUE, Mutant, apply

#: alice's correct submission in another style (einsum, complex RoPE, Gumbel sampling, ...).
ALICE = REPO / "examples" / "submissions" / "alice_alternative_style" / PACKAGE


@dataclass(frozen=True)
class Restyled:
    mutant: Mutant  # its own name and edits; part and diagnosis those of ``of``
    of: str  # the catalogue mutant whose mistake it makes
    base: Path  # the package its edits apply to

    @property
    def name(self) -> str:
        return self.mutant.name

    def write(self, out: Path) -> Path:
        """This submission in ``out/transformer_hw``; ``out``."""
        return apply(self.mutant, self.base, out)


_BY_NAME = {m.name: m for m in CATALOGUE}


def _restyled(name: str, base: Path, of: str, file: str, *edits) -> Restyled:
    original = _BY_NAME[of]
    mutant = Mutant(name, file, edits, original.part, original.diagnosis)
    return Restyled(mutant, of, base)


def alice(of: str, file: str, *edits, suffix: str = "") -> Restyled:
    """``of``'s mistake made in alice's code."""
    return _restyled(f"alice-{of}{suffix}", ALICE, of, file, *edits)


def reworded(of: str, file: str, *edits, suffix: str = "") -> Restyled:
    """``of``'s mistake made in the reference in other words, or beside a harmless change."""
    return _restyled(f"reworded-{of}{suffix}", SOLUTIONS, of, file, *edits)


_ALICE_SCORES = (
    'torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)  # (..., Tq, Tk)'
)
_ALICE_MASKING = """        scores = _as_additive(mask, scores)
        blocked = (scores == _NEG_INF).all(dim=-1)"""
_ALICE_MASKED_LATE = """        masked = _as_additive(mask, scores)
        blocked = (masked == _NEG_INF).all(dim=-1)"""
_ALICE_WEIGHTS = "    weights = softmax(scores, dim=-1)  # (..., Tq, Tk)\n"
_ALICE_STEP = """    optimizer.zero_grad()
    loss = lm_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
"""
_ALICE_EPOCH = """        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]
"""

RESTYLED: tuple[Restyled, ...] = (
    # Part 1 -----------------------------------------------------------------------------------
    alice(
        "no-scale",
        "attention.py",
        (_ALICE_SCORES, 'torch.einsum("...id,...jd->...ij", q, k)'),
    ),
    alice(
        "scale-by-d_k", "attention.py", (" / math.sqrt(d_k)  # (..., Tq, Tk)", " / d_k")
    ),
    alice(
        "scale-by-sqrt-d_v",
        "attention.py",
        (" / math.sqrt(d_k)  # (..., Tq, Tk)", " / math.sqrt(v.shape[-1])"),
    ),
    alice(
        "softmax-wrong-axis",
        "attention.py",
        (_ALICE_WEIGHTS, "    weights = softmax(scores, dim=scores.dim() - 2)\n"),
    ),
    alice(
        "inverted-bool-mask",
        "attention.py",
        (
            "torch.where(mask, torch.full_like(scores, _NEG_INF), scores)",
            "torch.where(mask, scores, torch.full_like(scores, _NEG_INF))",
        ),
    ),
    alice(
        "softmax-no-max",
        "attention.py",
        ("torch.exp(x - peak))", "torch.exp(x))"),
    ),
    alice(
        "mask-after-softmax",
        "attention.py",
        (_ALICE_MASKING, _ALICE_MASKED_LATE),
        (
            _ALICE_WEIGHTS,
            _ALICE_WEIGHTS
            + "    if mask is not None:\n"
            + "        weights = torch.where(masked == _NEG_INF, 0.0, weights)\n",
        ),
    ),
    alice(
        "mask-after-softmax-renormalized",
        "attention.py",
        (_ALICE_MASKING, _ALICE_MASKED_LATE),
        (
            _ALICE_WEIGHTS,
            _ALICE_WEIGHTS
            + "    if mask is not None:\n"
            + "        weights = weights * (masked != _NEG_INF)\n"
            + "        weights = weights / weights.sum(-1, keepdim=True)\n",
        ),
    ),
    alice(
        "fully-masked-row-nan",
        "attention.py",
        ("    if bool(dead.any()):\n", "    if False:\n"),
        ("        if bool(blocked.any()):\n", "        if False:\n"),
    ),
    alice(
        "softmax-subtracts-in-place",
        "attention.py",
        (
            "    expo = torch.where(banned, torch.zeros_like(x), torch.exp(x - peak))",
            "    x.sub_(peak)\n    expo = torch.where(banned, torch.zeros_like(x), x.exp())",
        ),
    ),
    alice(
        "attention-detaches-weights",
        "attention.py",
        (
            'out = torch.einsum("...ij,...jd->...id", weights, v)',
            'out = torch.einsum("...ij,...jd->...id", weights.detach(), v)',
        ),
    ),
    reworded(
        "no-scale",
        "attention.py",
        (
            "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
            'scores = torch.einsum("...qd,...kd->...qk", q, k)',
        ),
    ),
    reworded(
        "inverted-bool-mask",
        "attention.py",
        (
            'scores = scores.masked_fill(mask, float("-inf"))',
            "scores = torch.where(mask, scores, torch.full_like(scores, -math.inf))",
        ),
    ),
    # Part 2 -----------------------------------------------------------------------------------
    alice(
        "causal-hides-diagonal", "masks.py", ("triu(diagonal=shift + 1)", "triu(shift)")
    ),
    alice("causal-ignores-offset", "masks.py", ("triu(diagonal=shift + 1)", "triu(1)")),
    alice(
        "padding-off-by-one",
        "masks.py",
        ("return where >= limit", "return where > limit"),
    ),
    alice(
        "causal-mask-ignores-device",
        "masks.py",
        (
            "torch.ones(t_q, t_k, dtype=torch.bool, device=device)",
            "torch.ones(t_q, t_k, dtype=torch.bool)",
        ),
    ),
    alice(
        "padding-mask-arange-on-cpu",
        "masks.py",
        ("torch.arange(t, device=lengths.device)", "torch.arange(t)"),
    ),
    reworded(
        "causal-hides-diagonal",
        "masks.py",
        ("return key_pos > query_pos", "return ~(key_pos < query_pos)"),
    ),
    reworded(
        "padding-off-by-one",
        "masks.py",
        ("return positions >= lengths[:, None]", "return lengths[:, None] < positions"),
    ),
    # Part 3 -----------------------------------------------------------------------------------
    alice(
        "split-heads-no-transpose",
        "heads.py",
        (
            (
                "    grid = x.contiguous().view(batch, steps, n_heads, per_head)  # (B, T, h, d_h)\n"
                "    return grid.permute(0, 2, 1, 3)  # (B, h, T, d_h)"
            ),
            "    return x.reshape(batch, n_heads, steps, per_head)",
        ),
    ),
    alice(
        "merge-heads-no-transpose",
        "heads.py",
        (
            "x.permute(0, 2, 1, 3).contiguous().view(batch, steps, heads * per_head)",
            "x.reshape(batch, steps, heads * per_head)",
        ),
    ),
    alice(
        "cross-attention-from-x",
        "heads.py",
        ("source = x if context is None else context", "source = x"),
    ),
    alice(
        "d-head-true-division",
        "heads.py",
        ("self.d_head = d_model // n_heads", "self.d_head = d_model / n_heads"),
    ),
    alice(
        "mha-float-mask-as-bool",
        "heads.py",
        (
            "scaled_dot_product_attention(q, k, v, mask)",
            "scaled_dot_product_attention(q, k, v, None if mask is None else mask.bool())",
        ),
    ),
    # Part 4 -----------------------------------------------------------------------------------
    alice(
        "rope-wrong-direction",
        "rope.py",
        (
            "torch.polar(torch.ones_like(theta), theta)",
            "torch.polar(torch.ones_like(theta), -theta)",
        ),
    ),
    alice(
        "rope-frequency-without-2",
        "rope.py",
        ("-(pair / d_head)", "-(pair / 2 / d_head)"),
    ),
    alice(
        "rope-ignores-positions",
        "rope.py",
        (
            "    positions = positions.to(x.device)\n",
            "    positions = torch.arange(steps, device=x.device)\n",
        ),
    ),
    alice(
        "rope-angles-default-float32",
        "rope.py",
        ("        dtype = torch.get_default_dtype()", "        dtype = torch.float32"),
    ),
    alice(
        "rope-half-split",
        "rope.py",
        (
            "x.to(real).reshape(*x.shape[:-1], width // 2, 2).contiguous()",
            "torch.stack(x.to(real).chunk(2, dim=-1), dim=-1).contiguous()",
        ),
        (
            "torch.view_as_real(turned).flatten(-2).to(x.dtype)",
            "torch.view_as_real(turned).transpose(-1, -2).flatten(-2).to(x.dtype)",
        ),
    ),
    reworded(
        "rope-wrong-direction",
        "rope.py",
        (
            "(a * cos - b * sin, a * sin + b * cos)",
            "(a * cos + b * sin, b * cos - a * sin)",
        ),
    ),
    # Part 5 -----------------------------------------------------------------------------------
    alice(
        "layernorm-unbiased-variance",
        "norm.py",
        ("unbiased=False", "unbiased=True"),
    ),
    alice(
        "layernorm-eps-outside-sqrt",
        "norm.py",
        (
            "(x - centre) * torch.rsqrt(spread + self.eps)",
            "(x - centre) / (spread.sqrt() + self.eps)",
        ),
    ),
    alice(
        "layernorm-variance-by-moments",
        "norm.py",
        (
            "torch.var(x, dim=-1, unbiased=False, keepdim=True)",
            "(x**2).mean(dim=-1, keepdim=True) - centre**2",
        ),
    ),
    alice(
        "rmsnorm-subtracts-mean",
        "norm.py",
        (
            "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)",
            (
                "        x = x - x.mean(-1, keepdim=True)\n"
                "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)"
            ),
        ),
    ),
    alice(
        "layernorm-bias-buffer",
        "norm.py",
        (
            "self.bias = nn.Parameter(torch.zeros(d))",
            'self.register_buffer("bias", torch.zeros(d))',
        ),
    ),
    alice(
        "residual-adds-normalized",
        "block.py",
        (
            "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)",
            (
                "        normed = self.ln1(x)\n"
                "        mixed = normed + self.attn(normed, mask=mask, cache=cache)"
            ),
        ),
    ),
    alice(
        "pre-post-norm-swapped",
        "block.py",
        (
            (
                "        mixed = x + self.attn(self.ln1(x), mask=mask, cache=cache)\n"
                "        return mixed + self.ffn(self.ln2(mixed))"
            ),
            (
                "        mixed = self.ln1(x + self.attn(x, mask=mask, cache=cache))\n"
                "        return self.ln2(mixed + self.ffn(mixed))"
            ),
        ),
    ),
    reworded(
        "layernorm-eps-outside-sqrt",
        "norm.py",
        (
            "(x - mean) / torch.sqrt(var + self.eps)",
            "(x - mean) / (var.sqrt() + self.eps)",
        ),
    ),
    # Part 6 -----------------------------------------------------------------------------------
    alice(
        "repeat-kv-tiled",
        "gqa.py",
        ("torch.repeat_interleave(x, n_rep, dim=1)", "x.repeat(1, n_rep, 1, 1)"),
    ),
    alice("kv-numel-without-2", "gqa.py", ("    total = 2\n", "    total = 1\n")),
    alice(
        "kv-numel-counts-bytes",
        "gqa.py",
        ("    return int(total)\n", "    return int(total) * 4\n"),
    ),
    alice(
        "cache-length-not-advanced",
        "gqa.py",
        ("        self.length = end\n        return", "        return"),
    ),
    alice(
        "kv-length-a-tensor",
        "gqa.py",
        (
            "        self.device = self.k.device\n        self.length = 0\n",
            "        self.device = self.k.device\n        self.length = torch.tensor(0)\n",
        ),
    ),
    alice(
        "kv-append-checks-keys-only",
        "gqa.py",
        ('        self._check(v_new, "v_new")\n', ""),
    ),
    alice(
        "kv-full-cache-overflows",
        "gqa.py",
        ("        if end > self.max_len:", "        if end >= self.max_len:"),
    ),
    alice(
        "rope-on-values",
        "gqa.py",
        (
            "        k = apply_rope(k, where, self.rope_base)\n",
            (
                "        k = apply_rope(k, where, self.rope_base)\n"
                "        v = apply_rope(v, where, self.rope_base)\n"
            ),
        ),
    ),
    alice(
        "rope-positions-not-offset-by-cache",
        "gqa.py",
        (
            "where = torch.arange(start, start + steps, device=x.device)",
            "where = torch.arange(steps, device=x.device)",
        ),
    ),
    alice(
        "gqa-ignores-rope-base",
        "gqa.py",
        (
            (
                "        q = apply_rope(q, where, self.rope_base)\n"
                "        k = apply_rope(k, where, self.rope_base)\n"
            ),
            "        q = apply_rope(q, where)\n        k = apply_rope(k, where)\n",
        ),
    ),
    # Part 7 -----------------------------------------------------------------------------------
    alice(
        "tokenizer-uses-id-0",
        "charlm.py",
        ("enumerate(self.chars, start=1)", "enumerate(self.chars)"),
    ),
    alice(
        "tokenizer-lowercases",
        "charlm.py",
        ("self.chars = sorted(set(text))", "self.chars = sorted(set(text.lower()))"),
    ),
    alice(
        "decode-skips-ignore-index",
        "charlm.py",
        (
            "            if code == PAD_ID:\n",
            "            if code in (PAD_ID, IGNORE_INDEX):\n",
        ),
    ),
    alice(
        "lm-batch-left-padding",
        "charlm.py",
        (
            "        inputs[row, :span] = s[:-1]\n        targets[row, :span] = s[1:]\n",
            (
                "        inputs[row, width - span :] = s[:-1]\n"
                "        targets[row, width - span :] = s[1:]\n"
            ),
        ),
    ),
    alice(
        "lm-batch-unshifted-targets",
        "charlm.py",
        (
            "        targets[row, :span] = s[1:]\n",
            "        targets[row, :span] = s[:-1]\n",
        ),
    ),
    alice(
        "lm-batch-on-cpu",
        "charlm.py",
        ("    device = seqs[0].device\n", '    device = torch.device("cpu")\n'),
    ),
    alice(
        "lm-loss-log-of-softmax",
        "charlm.py",
        (
            "F.log_softmax(logits.reshape(-1, vocab), dim=-1)",
            "torch.softmax(logits.reshape(-1, vocab), dim=-1).log()",
        ),
    ),
    alice(
        "evaluate-mean-of-batch-means",
        "charlm.py",
        (
            (
                '                total += float(lm_loss(logits, targets, reduction="sum"))\n'
                "                tokens += real\n"
            ),
            (
                "                total += float(lm_loss(logits, targets))\n"
                "                tokens += 1\n"
            ),
        ),
    ),
    alice(
        "evaluate-in-train-mode",
        "charlm.py",
        (
            "        model.eval()\n        with torch.no_grad():\n            for inputs",
            "        with torch.no_grad():\n            for inputs",
        ),
    ),
    alice(
        "evaluate-keeps-grad",
        "charlm.py",
        (
            "        with torch.no_grad():\n            for inputs",
            "        with torch.enable_grad():\n            for inputs",
        ),
    ),
    alice(
        "evaluate-leaves-eval-mode",
        "charlm.py",
        (
            "        _restore_modes(saved)\n    if tokens == 0:",
            "        pass\n    if tokens == 0:",
        ),
    ),
    reworded(
        "evaluate-batches-not-moved",
        "charlm.py",
        (
            (
                "                inputs, targets = inputs.to(device), targets.to(device)\n"
                "                real = int((targets != IGNORE_INDEX).sum())\n"
                "                if real:\n"
                '                    total += lm_loss(model(inputs), targets, reduction="sum").item()\n'
                "                    count += real\n"
            ),
            (
                "                real = (targets != IGNORE_INDEX).sum().item()\n"
                "                if real > 0:\n"
                "                    logits = model(inputs)\n"
                '                    total += float(lm_loss(logits, targets, reduction="sum"))\n'
                "                    count += real\n"
            ),
        ),
    ),
    alice(
        "train-zero-grad-once-per-epoch",
        "charlm.py",
        (_ALICE_STEP, _ALICE_STEP.replace("    optimizer.zero_grad()\n", "")),
        (_ALICE_EPOCH, "        optimizer.zero_grad()\n" + _ALICE_EPOCH),
    ),
    alice(
        "train-steps-after-the-loop",
        "charlm.py",
        (_ALICE_STEP, _ALICE_STEP.replace("    optimizer.step()\n", "")),
        (_ALICE_EPOCH, _ALICE_EPOCH + "        optimizer.step()\n"),
    ),
    alice(
        "train-one-step-per-epoch",
        "charlm.py",
        (
            _ALICE_STEP,
            "    loss = lm_loss(model(inputs), targets)\n    loss.backward()\n",
        ),
        (
            _ALICE_EPOCH,
            "        optimizer.zero_grad()\n"
            + _ALICE_EPOCH
            + "        optimizer.step()\n",
        ),
    ),
    alice(
        "train-loss-after-the-epoch",
        "charlm.py",
        (
            '"train_loss": running / tokens',
            '"train_loss": evaluate(model, train_batches)',
        ),
    ),
    alice(
        "train-default-lr-3e-4",
        "charlm.py",
        ("epochs=1, lr=1e-3):", "epochs=1, lr=3e-4):"),
    ),
    alice(
        "generate-can-emit-pad",
        "charlm.py",
        ('    logits[PAD_ID] = float("-inf")\n', ""),
    ),
    alice(
        "generate-default-temperature-0.8",
        "charlm.py",
        ("max_new_tokens, temperature=1.0,", "max_new_tokens, temperature=0.8,"),
    ),
    alice(
        "generate-greedy-refuses-zero-temperature",
        "charlm.py",
        ("    if not greedy and not temperature > 0:", "    if not temperature > 0:"),
    ),
    alice(
        "generate-casts-float-prompt",
        "charlm.py",
        (
            "            or prompt.is_floating_point() or prompt.is_complex()",
            "            or prompt.is_complex()",
        ),
    ),
    alice(
        "make-caches-shares-one",
        "charlm.py",
        (
            (
                "        return [\n"
                "            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,\n"
                "                    device=device, dtype=dtype)\n"
                "            for _ in self.blocks\n"
                "        ]"
            ),
            (
                "        shared = KVCache(batch, self.n_heads, self.max_len,\n"
                "                         self.d_model // self.n_heads, device=device, dtype=dtype)\n"
                "        return [shared for _ in self.blocks]"
            ),
        ),
    ),
    alice(
        "cached-forward-wrong-positions",
        "charlm.py",
        (
            "spots = torch.arange(start, start + steps, device=device)",
            "spots = torch.arange(steps, device=device)",
        ),
    ),
    alice(
        "generate-ignores-cache",
        "charlm.py",
        (
            "    device = _model_device(model)\n    ids = prompt",
            "    use_cache = False\n    device = _model_device(model)\n    ids = prompt",
        ),
    ),
)

#: Correct code that a CPU and a CUDA GPU both grade at full marks, in the styles code written
#: for other devices takes: ``(file, (old, new), ...)`` edits of the reference.
DEVICE_STYLES = {
    # float64 only where the device is known to have it (as code written for Apple's MPS
    # does): the second device computes RoPE at float32's precision, which a device may.
    "device-type-branch": (
        "rope.py",
        (
            "    angles = rope_angles(positions, x.shape[-1], base, dtype=x.dtype)",
            (
                '    wide = x.device.type in ("cpu", "cuda") and x.dtype == torch.float64\n'
                "    precision = torch.float64 if wide else torch.float32\n"
                "    angles = rope_angles(positions, x.shape[-1], base, dtype=precision)"
            ),
        ),
        (
            "    return rotated.flatten(-2)  # (..., T, d_head)",
            "    return rotated.flatten(-2).to(x.dtype)  # (..., T, d_head)",
        ),
    ),
    # Evaluation and generation under torch.inference_mode() in place of torch.no_grad().
    "inference-mode": (
        "charlm.py",
        (
            "        with torch.no_grad():\n            for inputs",
            "        with torch.inference_mode():\n            for inputs",
        ),
        (
            "        with torch.no_grad():\n            caches",
            "        with torch.inference_mode():\n            caches",
        ),
    ),
}

#: Correct solutions, by name: their packages, or the reference with a device style's edits
#: (``write_correct``).
CORRECT_STYLES = {"solutions": SOLUTIONS, "alice": ALICE, **DEVICE_STYLES}


def write_correct(out: Path, styles=CORRECT_STYLES) -> list[tuple[str, Path]]:
    """Each correct style as a submission in ``out/<name>``: ``(name, folder)``."""
    written = []
    for name, style in styles.items():
        if isinstance(style, Path):
            shutil.copytree(style, out / name / PACKAGE)
        else:
            file, *edits = style
            apply(Mutant(name, file, tuple(edits), 0, ""), SOLUTIONS, out / name)
        written.append((name, out / name))
    return written
