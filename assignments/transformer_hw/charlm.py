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
        raise NotImplementedError("TODO: CharTokenizer.__init__")

    def encode(self, s: str) -> list[int]:
        """Ids of ``s``. Raises ``ValueError`` naming an unknown character."""
        # TODO: look up each character.
        raise NotImplementedError("TODO: CharTokenizer.encode")

    def decode(self, ids) -> str:
        """Text of ``ids`` (ints or a 1-D tensor), skipping ``PAD_ID``. Raises ``ValueError``
        for an unknown id."""
        # TODO: look up each id, skipping padding.
        raise NotImplementedError("TODO: CharTokenizer.decode")


def lm_batch(sequences, pad_id: int = PAD_ID):
    """Next-token pairs from 1-D LongTensors of length >= 2: ``inputs = s[:-1]``, ``targets = s[1:]``.

    Returns ``(inputs, targets)``, each ``(B, T)`` with ``T`` the longest ``len(s) - 1``, RIGHT
    padded: inputs with ``pad_id``, targets with ``IGNORE_INDEX``.

    Raises:
        ValueError: no sequences, or a sequence that is not 1-D with at least 2 ids.
    """
    # TODO: shift each sequence by one and right-pad into two (B, T) tensors.
    raise NotImplementedError("TODO: lm_batch")


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
        raise NotImplementedError("TODO: CharLM.__init__")

    def forward(self, idx: torch.Tensor, caches=None) -> torch.Tensor:
        """``idx (B, T)`` -> logits ``(B, T, V)``, causal.

        ``caches`` is a list with one ``KVCache`` per block; positions then continue from
        ``caches[0].length``.

        Raises:
            ValueError: more than ``max_len`` positions in all.
        """
        # TODO: embed tokens and positions, run the blocks with a causal mask, normalize, project.
        raise NotImplementedError("TODO: CharLM.forward")

    def make_caches(self, batch: int = 1) -> list[KVCache]:
        """One empty ``KVCache`` per block, sized ``max_len``, on the model's device and dtype."""
        # TODO: one cache per block with that block's heads and head width.
        raise NotImplementedError("TODO: CharLM.make_caches")


def lm_loss(
    logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of ``logits (B, T, V)`` against ``targets (B, T)``, skipping ``IGNORE_INDEX``.

    ``"mean"`` is the token-weighted mean over the real targets, ``"sum"`` their sum.

    Raises:
        ValueError: no real target at all; an unknown ``reduction``.
    """
    # TODO: flatten and use cross-entropy with ignore_index.
    raise NotImplementedError("TODO: lm_loss")


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
    raise NotImplementedError("TODO: evaluate")


def train(model: CharLM, train_batches, dev_batches, epochs: int = 1, lr: float = 1e-3):
    """Adam on each batch's mean ``lm_loss``; one dict per epoch.

    Each dict has ``epoch`` (from 1), ``train_loss`` (the epoch's token-weighted mean over all
    its batches, from the losses computed during the steps) and ``dev_loss`` (``evaluate``).
    """
    # TODO: the usual loop: zero_grad, loss, backward, step; keep token-weighted totals.
    raise NotImplementedError("TODO: train")


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
    raise NotImplementedError("TODO: generate")
