"""Representation translation learning (RTL, DAP section 3.3.2): rebuild the pivot sentence from
the other sentence's token states.

A head made of copies of the encoder's last K layers (K=2, not tied) and a vocabulary head
reads the non-pivot sentence's last hidden states (its first token excluded, padding masked)
followed by one [MASK] embedding per pivot token, and predicts every pivot token at the
[MASK] positions (reconstruction ratio 1, direction always xx -> pivot). Loss: token
cross-entropy averaged over every pivot token of the batch. Fixed against the reference code:
the [MASK] embeddings go through the embedding module once (position embeddings and LayerNorm
once, not twice); label padding comes from the attention mask, before any vocabulary
remapping, so a real token is never blanked; labels are built with tensors, not Python loops.
`pivot_vocab_only` restricts the softmax to token ids that occur in pivot texts.

Inputs: rows whose view 1 translates the pivot view 0.

    head = RepresentationTranslationHead(encoder, layers=2, mask_id=tokenizer.mask_token_id)
    loss = RepresentationTranslationLoss(head)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tasks.train.data import StepBatch, TrainingData
from tasks.train.objectives.base import Chunk, TokenObjective, TrainContext


class RepresentationTranslationLoss(TokenObjective):
    def __init__(self, head: nn.Module, vocab: np.ndarray | None = None, vocab_size: int | None = None) -> None:
        super().__init__()
        self.head = head
        self.register_buffer("vocab", torch.from_numpy(vocab).long() if vocab is not None else None, persistent=False)
        if vocab is not None:
            lookup = torch.full((int(vocab_size),), -100, dtype=torch.long)
            lookup[torch.from_numpy(vocab).long()] = torch.arange(len(vocab))
            self.register_buffer("lookup", lookup, persistent=False)
        else:
            self.lookup = None

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        return float(data.lengths[batch.text_ids[:, 0]].sum())  # every pivot token of the whole batch

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        labels = chunk.tgt.input_ids.masked_fill(chunk.tgt.attention_mask == 0, -100)  # padding first
        if self.lookup is not None:
            labels = torch.where(labels >= 0, self.lookup[labels.clamp(min=0)], labels)
        with ctx.autocast():
            logits = self.head(chunk.src.hidden, chunk.src.attention_mask, chunk.tgt.attention_mask, self.vocab)
        loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
        return loss / chunk.normaliser
