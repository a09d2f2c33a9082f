"""Part 7: a character-level language model built from parts 1-6, its loss, training loop,
evaluation and (cached) generation.

``F.cross_entropy``, ``torch.softmax``, ``torch.log_softmax``, ``torch.logsumexp`` and
``torch.multinomial`` are fine here for the loss and for sampling; the model itself uses your own
attention and normalization (library attention and normalization are forbidden, as in parts 1
and 5).
"""

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
    """Characters to ids: the sorted unique characters of ``text`` get ids 1, 2, ...; 0 is padding.

    ``vocab_size`` counts the pad id.
    """

    def __init__(self, text: str):
        # TODO: build the vocabulary and both lookup tables.
        ### BEGIN SOLUTION
        chars = sorted(set(text))
        self.stoi = {c: i + 1 for i, c in enumerate(chars)}
        self.itos = {i: c for c, i in self.stoi.items()}
        self.vocab_size = len(chars) + 1
        ### END SOLUTION

    def encode(self, s: str) -> list[int]:
        """Ids of ``s``. Raises ``ValueError`` naming an unknown character."""
        # TODO: look up each character.
        ### BEGIN SOLUTION
        unknown = [c for c in s if c not in self.stoi]
        if unknown:
            raise ValueError(f"character {unknown[0]!r} is not in the vocabulary")
        return [self.stoi[c] for c in s]
        ### END SOLUTION

    def decode(self, ids) -> str:
        """Text of ``ids`` (ints or a 1-D tensor), skipping ``PAD_ID``. Raises ``ValueError``
        for an unknown id."""
        # TODO: look up each id, skipping padding.
        ### BEGIN SOLUTION
        ids = [int(i) for i in ids]
        unknown = [i for i in ids if i != PAD_ID and i not in self.itos]
        if unknown:
            raise ValueError(f"id {unknown[0]} is not in the vocabulary")
        return "".join(self.itos[i] for i in ids if i != PAD_ID)
        ### END SOLUTION


def lm_batch(sequences, pad_id: int = PAD_ID):
    """Next-token pairs from 1-D LongTensors of length >= 2: ``inputs = s[:-1]``, ``targets = s[1:]``.

    Returns ``(inputs, targets)``, each ``(B, T)`` with ``T`` the longest ``len(s) - 1``, RIGHT
    padded: inputs with ``pad_id``, targets with ``IGNORE_INDEX``.

    Raises:
        ValueError: no sequences, or a sequence that is not 1-D with at least 2 ids.
    """
    # TODO: shift each sequence by one and right-pad into two (B, T) tensors.
    ### BEGIN SOLUTION
    sequences = list(sequences)
    if not sequences:
        raise ValueError("sequences is empty")
    for s in sequences:
        if s.dim() != 1 or len(s) < 2:
            raise ValueError(
                f"sequences must be 1-D with >= 2 ids, got shape {tuple(s.shape)}"
            )
    t = max(len(s) for s in sequences) - 1
    device = sequences[0].device
    inputs = torch.full((len(sequences), t), pad_id, dtype=torch.long, device=device)
    targets = torch.full(
        (len(sequences), t), IGNORE_INDEX, dtype=torch.long, device=device
    )
    for row, s in enumerate(sequences):
        inputs[row, : len(s) - 1] = s[:-1]
        targets[row, : len(s) - 1] = s[1:]
    return inputs, targets  # (B, T), (B, T)
    ### END SOLUTION


class CharLM(nn.Module):
    """Token + learned position embeddings, ``n_layers`` ``PreNormBlock``s, ``ln_f``, ``head``.

    Submodules ``tok_emb`` (``Embedding(vocab_size, d_model)``), ``pos_emb``
    (``Embedding(max_len, d_model)``), ``blocks`` (``nn.ModuleList``), ``ln_f`` (your
    ``LayerNorm``), ``head`` (``Linear(d_model, vocab_size)``); attributes ``max_len`` and
    ``n_layers``. ``max_len`` must reach every part that needs it (no hard-coded 128).
    """

    def __init__(
        self, vocab_size, d_model=64, n_heads=2, n_layers=2, d_ff=64, max_len=128
    ):
        super().__init__()
        # TODO: store max_len and n_layers; create the submodules.
        ### BEGIN SOLUTION
        self.max_len, self.n_layers = max_len, n_layers
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            PreNormBlock(d_model, n_heads, d_ff) for _ in range(n_layers)
        )
        self.ln_f = LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        ### END SOLUTION

    def forward(self, idx: torch.Tensor, caches=None) -> torch.Tensor:
        """``idx (B, T)`` -> logits ``(B, T, V)``, causal.

        ``caches`` is a list with one ``KVCache`` per block; positions then continue from
        ``caches[0].length``.

        Raises:
            ValueError: more than ``max_len`` positions in all.
        """
        # TODO: embed tokens and positions, run the blocks with a causal mask, normalize, project.
        ### BEGIN SOLUTION
        t = idx.shape[1]
        start = 0 if caches is None else caches[0].length
        if start + t > self.max_len:
            raise ValueError(
                f"{start} cached + {t} new positions exceed max_len={self.max_len}"
            )
        positions = torch.arange(start, start + t, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(positions)  # (B, T, D)
        mask = causal_mask(t, start + t, device=idx.device)  # (T, start + T)
        for layer, block in enumerate(self.blocks):
            x = block(x, mask=mask, cache=None if caches is None else caches[layer])
        return self.head(self.ln_f(x))  # (B, T, V)
        ### END SOLUTION

    def make_caches(self, batch: int = 1) -> list[KVCache]:
        """One empty ``KVCache`` per block, sized ``max_len``, on the model's device and dtype."""
        # TODO: one cache per block with that block's heads and head width.
        ### BEGIN SOLUTION
        weight = self.tok_emb.weight
        return [
            KVCache(
                batch,
                block.attn.n_heads,
                self.max_len,
                block.attn.d_head,
                device=weight.device,
                dtype=weight.dtype,
            )
            for block in self.blocks
        ]
        ### END SOLUTION


def lm_loss(
    logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of ``logits (B, T, V)`` against ``targets (B, T)``, skipping ``IGNORE_INDEX``.

    ``"mean"`` is the token-weighted mean over the real targets, ``"sum"`` their sum.

    Raises:
        ValueError: no real target at all; an unknown ``reduction``.
    """
    # TODO: flatten and use cross-entropy with ignore_index.
    ### BEGIN SOLUTION
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction={reduction!r} must be 'mean' or 'sum'")
    if not (targets != IGNORE_INDEX).any():
        raise ValueError("targets has no real target (all are IGNORE_INDEX)")
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    )
    ### END SOLUTION


def evaluate(model: CharLM, batches) -> float:
    """Token-weighted mean loss over every real target of every batch (total loss / total
    tokens, NOT a mean of batch means), in eval mode without gradients.

    ``batches`` is any iterable of ``(inputs, targets)`` pairs, a generator too: go through
    it once. Batches are moved to the model's device; a batch without real targets adds
    nothing. The model's previous mode is restored, also when this raises.

    Raises:
        ValueError: no real target in any batch.
    """
    # TODO: sum the losses and count the real targets over all batches; restore the mode.
    ### BEGIN SOLUTION
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(device), targets.to(device)
                real = int((targets != IGNORE_INDEX).sum())
                if real:
                    total += lm_loss(model(inputs), targets, reduction="sum").item()
                    count += real
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("batches hold no real target")
    return total / count
    ### END SOLUTION


def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = 1e-3):
    """Adam on each batch's mean ``lm_loss``; one dict per epoch.

    Each dict has ``epoch`` (from 1), ``train_loss`` (the epoch's token-weighted mean over all
    its batches, from the losses computed during the steps) and ``dev_loss`` (``evaluate``).
    """
    # TODO: the usual loop: zero_grad, loss, backward, step; keep token-weighted totals.
    ### BEGIN SOLUTION
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        total, count = 0.0, 0
        for inputs, targets in train_batches:
            inputs, targets = inputs.to(device), targets.to(device)
            real = int((targets != IGNORE_INDEX).sum())
            if not real:
                continue
            loss = lm_loss(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * real
            count += real
        if count == 0:
            raise ValueError("train_batches hold no real target")
        history.append(
            {
                "epoch": epoch,
                "train_loss": total / count,
                "dev_loss": evaluate(model, dev_batches),
            }
        )
    return history
    ### END SOLUTION


def generate(
    model: CharLM,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """The prompt followed by ``max_new_tokens`` new ids, as a 1-D LongTensor on the model's device.

    ``max_new_tokens=0`` gives the prompt alone (as a LongTensor on the model's device).
    ``PAD_ID`` is never produced (its logit is excluded before sampling). ``greedy`` takes the
    argmax; otherwise sample from ``softmax(logits / temperature)`` with ``generator``. With
    ``use_cache`` the prompt goes through the model once and each later step feeds only the
    newest token through the caches of ``model.make_caches()``; greedy output is identical with
    and without the cache.

    Raises:
        ValueError: ``prompt`` is not a 1-D tensor of an integer dtype (int64 or int32)
            holding at least one id (a list, a float or bool tensor, another number of
            dimensions); ``temperature <= 0`` without ``greedy``; or
            ``len(prompt) + max_new_tokens > model.max_len`` (checked before any work).
    """
    # TODO: validate, then loop: logits of the last position, exclude PAD_ID, pick, append.
    ### BEGIN SOLUTION
    kind = getattr(prompt, "dtype", type(prompt).__name__)
    if (
        not isinstance(prompt, torch.Tensor)
        or prompt.dtype.is_floating_point
        or prompt.dtype.is_complex
        or prompt.dtype == torch.bool
    ):
        raise ValueError(f"prompt must be a tensor of integer ids, got {kind}")
    if prompt.dim() != 1 or len(prompt) < 1:
        raise ValueError(
            f"prompt must be 1-D with at least one id, got shape {tuple(prompt.shape)}"
        )
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must not be negative")
    if len(prompt) + max_new_tokens > model.max_len:
        raise ValueError(
            f"len(prompt)={len(prompt)} + max_new_tokens={max_new_tokens} exceeds "
            f"max_len={model.max_len}"
        )
    if not greedy and temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive")
    device = next(model.parameters()).device
    ids = prompt.to(device=device, dtype=torch.long)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            caches = model.make_caches() if use_cache else None
            feed = ids
            for _ in range(max_new_tokens):
                logits = model(feed[None], caches)[0, -1]  # (V,)
                logits[PAD_ID] = float("-inf")
                if greedy:
                    new = logits.argmax()[None]
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    new = torch.multinomial(probs, 1, generator=generator)
                ids = torch.cat((ids, new))
                feed = new if use_cache else ids
    finally:
        model.train(was_training)
    return ids
    ### END SOLUTION
