"""Aligned word prediction (AWP, WACSE section 3.1): mask aligned words, predict their translations.

For an aligned word pair (x_j, y_k) of a translation pair, every token of x_j is replaced by
[MASK] and the model predicts the tokens of y_k at those positions with a vocabulary head (a
word spanning more tokens than its counterpart is clipped to the shorter length, as the paper's
section 4.3 does). Both directions (X -> Y and Y -> X).

Which words, and in how many copies: eq. 4 sums MLM(X_i, x_j; y_k) over EVERY aligned word x_j
of the sentence, and eq. 5 divides the batch's sum by 2N. The paper names no per-word copy and no
repeated forward pass; MLM, the term it borrows, predicts all masked positions of one corrupted
input in one pass, and the 2N normaliser counts sentences, not masked copies. So all aligned
words of a sentence are masked at once, in one copy per direction (`mask_fraction = 1.0`, the
default): one extra forward and backward over the batch, whatever the number of aligned words.
A copy per word would multiply that pass by the number of aligned words (about 7 per FLORES
row at 32 tokens in benchmarks/train_step.py). `mask_fraction` < 1 masks that share of each
sentence's aligned words instead (at least one), drawn from (seed, step); a share of 0.15 (BERT's
masking rate) shrinks AWP about 5x against TR and WTR (110 labelled tokens per batch of 32
FLORES rows instead of 550).

Loss: summed token cross-entropy divided by 2N (N rows; eq. 5), or with `reduction="per_word"`
by the number of masked words of the batch (both directions). Rows without alignments
contribute nothing (they still train on the sentence-level objectives). Logits are computed
for the labelled positions only.

Softmax: over the full vocabulary (the paper), or with `negatives` set, over the batch's target
tokens plus `negatives` tokens drawn uniformly without replacement from the rest; each drawn
token's exponential is scaled by (|V| - |targets|) / drawn, so the denominator is an unbiased
estimate of the full one and the loss estimates the full loss (slightly low, log being concave).
With every token drawn it IS the full loss. It cuts the head's cost from |V| = 250k columns to
~9k; its effect on retrieval is not measured, so it is off by default.

The head is the base model's MLM head when its checkpoint has one; otherwise (the offline E5)
a fresh transform layer with the decoder tied to the input embeddings.

Inputs: rows with word alignments between view 1 and the pivot view 0.

    head = VocabularyHead(encoder); head.load_pretrained(base_dir)
    loss = AlignedWordPredictionLoss(head)                       # the paper's loss
    loss = AlignedWordPredictionLoss(head, negatives=8192)       # sampled softmax
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tasks.train.config import AlignedWordPredictionConfig
from tasks.train.data import IGNORE, StepBatch, TrainingData, masked_word_prediction
from tasks.train.model import VocabularyHead
from tasks.train.objectives.base import Chunk, TokenObjective, TrainContext, register_objective, zero_like_graph


log = logging.getLogger(__name__)


def sampled_vocabulary(labels: torch.Tensor, vocab_size: int, negatives: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(candidate token ids: the targets, then the drawn others; log-weight of each candidate; each label's candidate index).

    `negatives` ids are drawn uniformly without replacement from the vocabulary (torch's RNG,
    which the trainer seeds per step); those that are targets are dropped. A drawn token's
    log-weight is log((vocab_size - targets) / drawn), the targets' 0.
    """
    targets = torch.unique(labels)  # sorted
    drawn = torch.randperm(vocab_size, device=labels.device)[: min(negatives, vocab_size)]
    drawn = drawn[~torch.isin(drawn, targets)]
    weight = math.log((vocab_size - len(targets)) / len(drawn)) if len(drawn) else 0.0
    log_weight = torch.cat([torch.zeros(len(targets), device=labels.device), torch.full((len(drawn),), weight, device=labels.device)])
    return torch.cat([targets, drawn]), log_weight, torch.searchsorted(targets, labels)


@register_objective("aligned_word_prediction", AlignedWordPredictionConfig)
class AlignedWordPredictionLoss(TokenObjective):
    @classmethod
    def build(cls, config: AlignedWordPredictionConfig, model: Any, data: TrainingData, base_dir: Path) -> AlignedWordPredictionLoss:
        if data.mask_id is None:
            raise ValueError("aligned_word_prediction needs a tokenizer with a mask token")
        head = VocabularyHead(model, eps=getattr(model.transformer.config, "layer_norm_eps", 1e-12))
        if not head.load_pretrained(base_dir):
            log.info("base model has no MLM head: AWP uses a fresh transform tied to the input embeddings")
        return cls(head, config.reduction, config.negatives if config.vocabulary == "sampled" else None)

    def __init__(self, head: nn.Module, reduction: str = "per_row", negatives: int | None = None) -> None:
        super().__init__()
        if reduction not in ("per_row", "per_word"):
            raise ValueError(f"reduction must be 'per_row' or 'per_word', got {reduction!r}")
        if negatives is not None and negatives < 0:
            raise ValueError(f"negatives must be >= 0 (or None for the full vocabulary), got {negatives}")
        self.head, self.reduction, self.negatives = head, reduction, negatives

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        if self.reduction == "per_row":
            return super().normaliser(data, batch)
        return max(float(batch.mask_src.sum() + batch.mask_tgt.sum()), 1.0)  # masked words, both directions

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        batch, data = chunk.batch, ctx.data
        if ctx.data.mask_id is None:
            raise ValueError("aligned_word_prediction needs a tokenizer with a mask token")
        src, tgt = batch.text_ids[:, 1], batch.text_ids[:, 0]
        # direction 1: mask view-1 words, predict pivot words; direction 2: the reverse; one forward for both
        ids1, att1, lab1 = masked_word_prediction(data, src, tgt, batch.pairs, batch.mask_src)
        ids2, att2, lab2 = masked_word_prediction(data, tgt, src, batch.pairs[..., ::-1], batch.mask_tgt)
        width = max(ids1.shape[1], ids2.shape[1])

        def pad(a: np.ndarray, fill: int) -> np.ndarray:
            return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=fill)

        labels = np.concatenate([pad(lab1, IGNORE), pad(lab2, IGNORE)])
        if not (labels != IGNORE).any():
            return zero_like_graph(chunk.src.hidden)
        ids = torch.from_numpy(np.concatenate([pad(ids1, data.pad_id), pad(ids2, data.pad_id)])).to(ctx.device)
        att = torch.from_numpy(np.concatenate([pad(att1, 0), pad(att2, 0)])).to(ctx.device)
        langs = torch.cat([chunk.src.lang_ids, chunk.tgt.lang_ids])
        labels_t = torch.from_numpy(labels).to(ctx.device)
        where = labels_t != IGNORE
        targets = labels_t[where]
        with ctx.autocast():
            hidden, _ = ctx.model.token_states(ids, att, langs)
            if self.negatives is None:
                logits = self.head(hidden[where])
            else:
                vocab_size = ctx.model.word_embeddings().weight.shape[0]
                vocab, log_weight, targets = sampled_vocabulary(targets, vocab_size, self.negatives)
                logits = self.head(hidden[where], vocab) + log_weight
        loss = nn.functional.cross_entropy(logits.float(), targets, reduction="sum")
        return loss / chunk.normaliser
