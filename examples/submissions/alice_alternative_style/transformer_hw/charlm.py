"""Part 7: a character-level language model built from parts 1-6."""

import warnings

import torch
import torch.nn.functional as F
from torch import nn

from transformer_hw.block import PreNormBlock
from transformer_hw.gqa import KVCache
from transformer_hw.masks import causal_mask
from transformer_hw.norm import LayerNorm

PAD_ID = 0
IGNORE_INDEX = -100


class CharTokenizer:
    """Sorted unique characters get ids 1..n; 0 is padding."""

    def __init__(self, text):
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        self.chars = sorted(set(text))
        self.stoi = {ch: n for n, ch in enumerate(self.chars, start=1)}
        self.itos = {n: ch for ch, n in self.stoi.items()}
        self.vocab_size = len(self.chars) + 1

    def encode(self, s):
        out = []
        for ch in s:
            code = self.stoi.get(ch)
            if code is None:
                raise ValueError(f"encode: unknown character {ch!r} in s (not in the vocabulary)")
            out.append(code)
        return out

    def decode(self, ids):
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        pieces = []
        for code in ids:
            code = int(code)
            if code == PAD_ID:
                continue
            if code not in self.itos:
                raise ValueError(
                    f"decode: unknown id {code} in ids (valid ids are 0..{self.vocab_size - 1})"
                )
            pieces.append(self.itos[code])
        return "".join(pieces)


def lm_batch(sequences, pad_id=PAD_ID):
    """inputs s[:-1], targets s[1:], right-padded (pad_id / IGNORE_INDEX) to the longest."""
    seqs = list(sequences)
    if not seqs:
        raise ValueError("sequences is empty; need at least one sequence")
    for n, s in enumerate(seqs):
        if not isinstance(s, torch.Tensor) or s.dim() != 1 or s.shape[0] < 2:
            raise ValueError(
                f"sequences[{n}] must be a 1-D LongTensor of length >= 2, got "
                f"shape {tuple(getattr(s, 'shape', ()))}"
            )
    width = max(s.shape[0] for s in seqs) - 1
    device = seqs[0].device
    inputs = torch.full((len(seqs), width), pad_id, dtype=torch.long, device=device)
    targets = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long, device=device)
    for row, s in enumerate(seqs):
        s = s.to(device=device, dtype=torch.long)
        span = s.shape[0] - 1
        inputs[row, :span] = s[:-1]
        targets[row, :span] = s[1:]
    return inputs, targets


class CharLM(nn.Module):
    """Token + learned position embeddings, pre-norm blocks, final LayerNorm, linear head."""

    def __init__(self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("d_model", d_model), ("n_heads", n_heads),
                            ("n_layers", n_layers), ("d_ff", d_ff), ("max_len", max_len)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {name}={value!r}")
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(PreNormBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        print(f"[alice] CharLM with {sum(p.numel() for p in self.parameters())} parameters")

    def _probe(self):
        weight = self.head.weight
        return weight.device, weight.dtype

    def make_caches(self, batch=1):
        device, dtype = self._probe()
        return [
            KVCache(batch, self.n_heads, self.max_len, self.d_model // self.n_heads,
                    device=device, dtype=dtype)
            for _ in self.blocks
        ]

    def forward(self, idx, caches=None):
        if not isinstance(idx, torch.Tensor) or idx.dim() != 2:
            raise ValueError(f"idx must be a (B, T) LongTensor, got shape {tuple(getattr(idx, 'shape', ()))}")
        steps = idx.shape[1]
        if steps < 1:
            raise ValueError(f"idx must hold at least one position, got shape {tuple(idx.shape)}")
        start = 0
        if caches is not None:
            caches = list(caches)
            if len(caches) != len(self.blocks):
                raise ValueError(f"caches must hold {len(self.blocks)} KVCache(s), got {len(caches)}")
            start = caches[0].length
        if start + steps > self.max_len:
            raise ValueError(
                f"{start} cached + {steps} new positions (idx shape {tuple(idx.shape)}) exceed "
                f"max_len={self.max_len}"
            )
        device = self.tok_emb.weight.device
        idx = idx.to(device)
        spots = torch.arange(start, start + steps, device=device)
        hidden = self.tok_emb(idx) + self.pos_emb(spots).unsqueeze(0)  # (B, T, D)
        blocked = causal_mask(steps, start + steps, device=device)  # (T, start + T)
        for n, block in enumerate(self.blocks):
            hidden = block(hidden, mask=blocked, cache=None if caches is None else caches[n])
        return self.head(self.ln_f(hidden))  # (B, T, V)


def lm_loss(logits, targets, reduction="mean"):
    """Cross-entropy over targets != IGNORE_INDEX; token-weighted "mean" or "sum"."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum', got reduction={reduction!r}")
    if not isinstance(logits, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise ValueError("logits and targets must be tensors")
    if logits.dim() < 2 or tuple(logits.shape[:-1]) != tuple(targets.shape):
        raise ValueError(
            f"logits {tuple(logits.shape)} must be targets {tuple(targets.shape)} plus a vocab axis"
        )
    vocab = logits.shape[-1]
    targets = targets.to(logits.device)
    real = targets != IGNORE_INDEX
    count = int(real.sum())
    if count == 0:
        raise ValueError(f"targets (shape {tuple(targets.shape)}) hold no real target")
    picked = targets[real]
    if bool(((picked < 0) | (picked >= vocab)).any()):
        raise ValueError(f"targets hold ids outside [0, {vocab}) other than IGNORE_INDEX")
    log_probs = F.log_softmax(logits.reshape(-1, vocab), dim=-1)  # (N, V)
    total = F.nll_loss(log_probs, targets.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum")
    return total if reduction == "sum" else total / count


def _model_device(model):
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _remember_modes(model):
    return [(m, m.training) for m in model.modules()]


def _restore_modes(saved):
    for m, flag in saved:
        m.training = flag


def evaluate(model, batches):
    """Token-weighted mean loss over every real target of every batch, in eval mode, no grad."""
    saved = _remember_modes(model)
    device = _model_device(model)
    total, tokens = 0.0, 0
    try:
        model.eval()
        with torch.no_grad():
            for inputs, targets in batches:
                targets = targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real == 0:
                    continue
                logits = model(inputs.to(device))
                total += float(lm_loss(logits, targets, reduction="sum"))
                tokens += real
    finally:
        _restore_modes(saved)
    if tokens == 0:
        raise ValueError("batches hold no real target at all; nothing to evaluate")
    return total / tokens


def _step(model, optimizer, inputs, targets):
    """One Adam step on a batch's mean loss: (loss, real targets); (0.0, 0) for an all-padding batch."""
    real = int((targets != IGNORE_INDEX).sum())
    if real == 0:
        return 0.0, 0
    optimizer.zero_grad()
    loss = lm_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return float(loss.detach()), real


def train(model, train_batches, dev_batches, epochs=1, lr=1e-3):
    """Adam on each batch's mean lm_loss; one history dict per epoch."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be a non-negative int, got epochs={epochs!r}")
    device = _model_device(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        steps = [_step(model, optimizer, x.to(device), y.to(device)) for x, y in train_batches]
        running = sum(loss * real for loss, real in steps)
        tokens = sum(real for _, real in steps)
        if tokens == 0:
            raise ValueError("train_batches hold no real target; nothing to train on")
        record = {"epoch": epoch, "train_loss": running / tokens, "dev_loss": evaluate(model, dev_batches)}
        print(f"[alice] epoch {epoch}: train {record['train_loss']:.4f}  dev {record['dev_loss']:.4f}")
        history.append(record)
    return history


def _pick(logits, temperature, greedy, generator):
    """One next id from (V,) logits; PAD_ID can never win."""
    logits = logits.double().clone()
    logits[PAD_ID] = float("-inf")
    if greedy:
        return int(torch.argmax(logits))
    # Gumbel-max: argmax(logits / T + G) with G ~ Gumbel(0, 1) samples softmax(logits / T).
    noise_device = generator.device if generator is not None else logits.device
    uniform = torch.rand(logits.shape, generator=generator, device=noise_device, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(uniform)).to(logits.device)
    return int(torch.argmax(logits / temperature + gumbel))


def generate(model, prompt, max_new_tokens, temperature=1.0, greedy=False, generator=None,
             use_cache=True):
    """The prompt followed by ``max_new_tokens`` sampled (or greedy) ids, never PAD_ID."""
    if (not isinstance(prompt, torch.Tensor) or prompt.dim() != 1 or prompt.numel() < 1
            or prompt.is_floating_point() or prompt.is_complex() or prompt.dtype == torch.bool):
        raise ValueError(
            f"prompt must be a 1-D LongTensor of at least one id, got "
            f"{type(prompt).__name__} {tuple(getattr(prompt, 'shape', ()))}"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    if len(prompt) + max_new_tokens > model.max_len:
        raise ValueError(
            f"len(prompt)={len(prompt)} + max_new_tokens={max_new_tokens} exceeds "
            f"max_len={model.max_len}"
        )
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 when sampling, got temperature={temperature!r}")
    if greedy and temperature != 1.0:
        warnings.warn("alice: greedy decoding ignores temperature")
    device = _model_device(model)
    ids = prompt.to(device=device, dtype=torch.long).tolist()
    saved = _remember_modes(model)
    try:
        model.eval()
        with torch.no_grad():
            if max_new_tokens > 0:
                caches = model.make_caches(1) if use_cache else None
                last = model(torch.tensor([ids], device=device), caches)[0, -1]
                for step in range(max_new_tokens):
                    ids.append(_pick(last, temperature, greedy, generator))
                    if step + 1 == max_new_tokens:
                        break
                    if use_cache:
                        last = model(torch.tensor([[ids[-1]]], device=device), caches)[0, -1]
                    else:
                        last = model(torch.tensor([ids], device=device))[0, -1]
    finally:
        _restore_modes(saved)
    return torch.tensor(ids, dtype=torch.long, device=device)
