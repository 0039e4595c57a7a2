"""Aligned word prediction (AWP, WACSE section 3.1): mask a word, predict its translation.

For an aligned word pair (x_j, y_k) of a translation pair, every token of x_j is replaced by
[MASK] in a copy of X and the model predicts the tokens of y_k at those positions with a
vocabulary head (a word spanning more tokens than its counterpart is clipped to the shorter
length, as the paper does). Both directions (X -> Y and Y -> X); a fraction of each sentence's
aligned words is masked per step (at least one), drawn from (seed, step). Loss: summed token
cross-entropy divided by 2N (N rows), as in the paper's equation 5, or with
`reduction="per_word"` by the number of masked words of the batch (both directions). Rows without alignments
contribute nothing (they still train on the sentence-level objectives).

The head is the base model's MLM head when its checkpoint has one; otherwise (the offline E5)
a fresh transform layer with the decoder tied to the input embeddings.

Inputs: rows with word alignments between view 1 and the pivot view 0.

    head = VocabularyHead(encoder); head.load_pretrained(base_dir)
    loss = AlignedWordPredictionLoss(head)
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tasks.train.data import IGNORE, StepBatch, TrainingData, masked_word_prediction
from tasks.train.objectives.base import Chunk, TokenObjective, TrainContext, zero_like_graph


class AlignedWordPredictionLoss(TokenObjective):
    def __init__(self, head: nn.Module, reduction: str = "per_row") -> None:
        super().__init__()
        if reduction not in ("per_row", "per_word"):
            raise ValueError(f"reduction must be 'per_row' or 'per_word', got {reduction!r}")
        self.head, self.reduction = head, reduction

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        if self.reduction == "per_row":
            return super().normaliser(data, batch)
        return max(float(batch.mask_src.sum() + batch.mask_tgt.sum()), 1.0)  # masked words, both directions

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        batch, data = chunk.batch, ctx.data
        if ctx.data.mask_id is None:
            raise ValueError("aligned_word_prediction needs a tokenizer with a mask token")
        src, tgt = batch.text_ids[:, 1], batch.text_ids[:, 0]
        # direction 1: mask view-1 words, predict pivot words; direction 2: the reverse
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
        with ctx.autocast():
            hidden, _ = ctx.model.token_states(ids, att, langs)
            logits = self.head(hidden[where])
        loss = nn.functional.cross_entropy(logits.float(), labels_t[where], reduction="sum")
        return loss / chunk.normaliser
