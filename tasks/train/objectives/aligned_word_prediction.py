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
    loss = AlignedWordPredictionLoss(head)                                            # the paper's loss
    loss = AlignedWordPredictionLoss(head, vocabulary="sampled", negatives=8192)      # sampled softmax
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from tasks.stage_config import KEYED_UNLESS_DEFAULT
from tasks.train.batching import StepBatch, texts_to_arrays
from tasks.train.model import VocabularyHead
from tasks.train.objectives.base import Chunk, ObjectiveConfig, TokenObjective, TrainContext, register_objective, zero_like_graph
from tasks.train.papers import WACSE
from tasks.train.training_data import TrainingData

log = logging.getLogger(__name__)

IGNORE = -100  # the label of a position that predicts nothing (cross_entropy's ignore_index)


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
    log_weight = torch.cat(
        [torch.zeros(len(targets), device=labels.device), torch.full((len(drawn),), weight, device=labels.device)]
    )
    return torch.cat([targets, drawn]), log_weight, torch.searchsorted(targets, labels)


@register_objective
class AlignedWordPredictionConfig(ObjectiveConfig):
    """WACSE AWP: mask an aligned source word, predict the aligned target word's tokens, both directions."""

    name = "aligned_word_prediction"
    description = "aligned word prediction (AWP): predict the aligned word of the translation"
    papers = (WACSE,)
    needs_alignments = True
    needs_pivot = True

    mask_fraction: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description=(
            "share of each sentence's aligned words masked per step, all in one masked copy (at least one word); 1.0 = every "
            "aligned word, as WACSE eq. 4 sums over them"
        ),
    )
    reduction: Literal["per_row", "per_word"] = Field(
        default="per_row",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "per_row: token losses summed over masked words, divided by 2N rows (WACSE eq. 5: grows with sentence "
            "length, ~17 nats per row on FLORES); per_word: divided by the masked words instead (comparable in size to TR)"
        ),
    )
    vocabulary: Literal["full", "sampled"] = Field(
        default="full",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "full: softmax over the whole vocabulary (the paper's loss; on e5-small's 250k tokens it costs about as much as "
            "the masked forward pass on CPU); sampled: over the batch's target tokens plus `negatives` tokens drawn "
            "uniformly, their exponentials scaled up to stand for the rest of the vocabulary (an estimate of the full "
            "loss; its effect on retrieval is not measured: see docs/train.md)"
        ),
    )
    negatives: int = Field(
        default=8192,
        ge=0,
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description="vocabulary = sampled: tokens drawn per step (without replacement) besides the targets; 0 = targets only",
    )

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> AlignedWordPredictionLoss:
        if data.mask_id is None:
            raise ValueError("aligned_word_prediction needs a tokenizer with a mask token")
        head = VocabularyHead(model, eps=getattr(model.transformer.config, "layer_norm_eps", 1e-12))
        if not head.load_pretrained(base_dir):
            log.info("base model has no MLM head: AWP uses a fresh transform tied to the input embeddings")
        return AlignedWordPredictionLoss(head, self)


class AlignedWordPredictionLoss(TokenObjective):
    """`head` scores the vocabulary; the settings come as an `AlignedWordPredictionConfig` or as its keywords."""

    Settings = AlignedWordPredictionConfig
    settings: AlignedWordPredictionConfig

    def __init__(self, head: nn.Module, settings: AlignedWordPredictionConfig | None = None, /, **values: Any) -> None:
        super().__init__(settings, **values)
        self.head = head
        # the number of drawn tokens of a sampled softmax; None: the full vocabulary
        self.negatives = self.settings.negatives if self.settings.vocabulary == "sampled" else None

    def draw(self, batch: StepBatch, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Which aligned pairs it masks, in each direction: `mask_src` (the view-1 word) and `mask_tgt` (the pivot word)."""
        mask_src, mask_tgt = choose_masked_pairs(batch.pairs, self.settings.mask_fraction, rng)
        return {"mask_src": mask_src, "mask_tgt": mask_tgt}

    def masks(self, batch: StepBatch) -> tuple[np.ndarray, np.ndarray]:
        """(mask_src, mask_tgt) drawn for `batch`'s step (`draw`), [B, A] bool each."""
        drawn = batch.drawn[self.name]
        return drawn["mask_src"], drawn["mask_tgt"]

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        if self.settings.reduction == "per_row":
            return super().normaliser(data, batch)
        mask_src, mask_tgt = self.masks(batch)
        return max(float(mask_src.sum() + mask_tgt.sum()), 1.0)  # masked words, both directions

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        batch, data = chunk.batch, ctx.data
        if ctx.data.mask_id is None:
            raise ValueError("aligned_word_prediction needs a tokenizer with a mask token")
        src, tgt = batch.text_ids[:, 1], batch.text_ids[:, 0]
        mask_src, mask_tgt = self.masks(batch)
        # direction 1: mask view-1 words, predict pivot words; direction 2: the reverse; one forward for both
        ids1, att1, lab1 = masked_word_prediction(data, src, tgt, batch.pairs, mask_src)
        ids2, att2, lab2 = masked_word_prediction(data, tgt, src, batch.pairs[..., ::-1], mask_tgt)
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


def choose_masked_pairs(pairs: np.ndarray, mask_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(mask_src, mask_tgt): which aligned pairs of `pairs` ([B, A, 2], -1 padded) are masked in
    each direction, [B, A] bool: `mask_fraction` of each sentence's aligned words (1.0: all), at
    least one; one draw of `rng` per direction."""
    valid = pairs[..., 0] >= 0
    masks = []
    for _ in range(2):
        keys = np.where(valid, rng.random(valid.shape), np.inf)  # random() < 1.0: a fraction of 1.0 takes every pair
        chosen = (keys < mask_fraction) | (keys == keys.min(axis=1, keepdims=True))
        masks.append(chosen & valid)
    return masks[0], masks[1]


def masked_word_prediction(
    data: TrainingData, src: np.ndarray, tgt: np.ndarray, pairs: np.ndarray, chosen: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AWP inputs for one direction: (masked src input ids, attention mask, labels), all [n, T].

    For each chosen pair (src word w, tgt word u) every token of w is masked; the j-th masked
    token of w predicts the j-th token of u, for j < min(tokens of w, tokens of u) (the longer
    word is clipped, as WACSE does); the other masked tokens carry no label. Vectorised.
    """
    arrays = texts_to_arrays(data, src)
    ids, wid = arrays["input_ids"].copy(), arrays["word_ids"]
    n, width = ids.shape
    n_words = int(max(wid.max(initial=-1), data.word_ids[tgt].max(initial=-1))) + 1
    labels = np.full((n, width), IGNORE, dtype=np.int64)
    if n_words == 0 or not chosen.any():
        return ids, arrays["attention_mask"], labels
    target_of = np.full((n, n_words), -1, dtype=np.int64)  # src word -> aligned tgt word, where masked
    b_idx, a_idx = np.nonzero(chosen)
    target_of[b_idx, pairs[b_idx, a_idx, 0]] = pairs[b_idx, a_idx, 1]
    tgt_wid = data.word_ids[tgt]  # [n, L]
    positions = np.arange(tgt_wid.shape[1])
    first_tgt = np.full((n, n_words), 10**9, dtype=np.int64)
    rows_t, cols_t = np.nonzero(tgt_wid >= 0)
    np.minimum.at(first_tgt, (rows_t, tgt_wid[rows_t, cols_t]), positions[cols_t])
    count_tgt = np.zeros((n, n_words), dtype=np.int64)
    np.add.at(count_tgt, (rows_t, tgt_wid[rows_t, cols_t]), 1)
    first_src = np.full((n, n_words), 10**9, dtype=np.int64)
    rows_s, cols_s = np.nonzero(wid >= 0)
    np.minimum.at(first_src, (rows_s, wid[rows_s, cols_s]), cols_s)

    safe_w = np.maximum(wid, 0)
    u = np.where(wid >= 0, np.take_along_axis(target_of, safe_w, axis=1), -1)
    masked = u >= 0
    ids[masked] = data.mask_id
    rank = np.arange(width)[None, :] - np.take_along_axis(first_src, safe_w, axis=1)
    safe_u = np.maximum(u, 0)
    labelled = masked & (rank < np.take_along_axis(count_tgt, safe_u, axis=1))
    r, c = np.nonzero(labelled)
    tgt_pos = first_tgt[r, safe_u[r, c]] + rank[r, c]
    labels[r, c] = data.token_ids[tgt[r], tgt_pos]
    return ids, arrays["attention_mask"], labels
