"""Word translation ranking (WTR, WACSE section 3.2): contrast an aligned word against the
other words of its translation.

A word's representation is the mean of its subword tokens' last hidden states. For each
aligned pair (x_j, y_k), the cosine of x_j with y_k must exceed its cosine with every other
word of Y (softmax over the words of Y, optionally divided by a temperature; the paper uses
plain cosine), and the same from Y to X. Loss: summed over word pairs, divided by 2N (N
rows), as in the paper's equation 8; or, with `reduction="per_word"`, divided by the 2P aligned
pairs of the batch (a mean over words, so the loss does not grow with sentence length). Vectorised: words are pooled with one scatter, pairs
are gathered, no loop over tokens.

Inputs: rows with word alignments between view 1 and the pivot view 0.

    loss = WordTranslationRankingLoss(temperature=1.0)   # or WordTranslationRankingConfig(...).build(...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field
from torch import nn

from tasks.stage_config import KEYED_UNLESS_DEFAULT
from tasks.train.batching import StepBatch
from tasks.train.objectives.base import (
    Chunk,
    ObjectiveConfig,
    Side,
    TokenObjective,
    TrainContext,
    register_objective,
    zero_like_graph,
)
from tasks.train.papers import WACSE
from tasks.train.training_data import TrainingData


def word_vectors(side: Side, n_words: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean of each word's token states [b, W, H], word has tokens [b, W])."""
    b, _, h = side.hidden.shape
    wid = side.word_ids.long()
    ok = wid >= 0
    index = torch.where(ok, wid, torch.full_like(wid, n_words))  # a spill slot for tokens of no word
    sums = (
        side.hidden.float().new_zeros(b, n_words + 1, h).scatter_add(1, index[..., None].expand(-1, -1, h), side.hidden.float())
    )
    counts = side.hidden.new_zeros(b, n_words + 1, dtype=torch.float32).scatter_add(1, index, ok.float())
    vectors = sums[:, :n_words] / counts[:, :n_words, None].clamp(min=1.0)
    return nn.functional.normalize(vectors, dim=-1), counts[:, :n_words] > 0


@register_objective
class WordTranslationRankingConfig(ObjectiveConfig):
    """WACSE WTR: an aligned source word against every word of the target sentence, both directions."""

    name = "word_translation_ranking"
    description = "word translation ranking (WTR): rank the aligned word among the translation's words"
    papers = (WACSE,)
    needs_alignments = True
    needs_pivot = True

    temperature: float = Field(default=1.0, gt=0.0, description="the paper uses plain cosine (1.0)")
    reduction: Literal["per_row", "per_word"] = Field(
        default="per_row",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "per_row: summed over aligned word pairs, divided by 2N rows (WACSE eq. 8: ~16 nats per FLORES row with plain "
            "cosine); per_word: divided by the aligned pairs instead (comparable in size to TR)"
        ),
    )

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> WordTranslationRankingLoss:
        return WordTranslationRankingLoss(self)


class WordTranslationRankingLoss(TokenObjective):
    Settings = WordTranslationRankingConfig
    settings: WordTranslationRankingConfig

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        if self.settings.reduction == "per_row":
            return super().normaliser(data, batch)
        return max(2.0 * float((batch.pairs[..., 0] >= 0).sum()), 1.0)  # both directions of every aligned pair

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        pairs = torch.from_numpy(chunk.batch.pairs).to(ctx.device).long()  # [b, A, 2]
        valid = pairs[..., 0] >= 0
        if not valid.any():
            return zero_like_graph(chunk.src.hidden)
        n_words = int(max(chunk.src.word_ids.max(), chunk.tgt.word_ids.max())) + 1
        src_vec, src_ok = word_vectors(chunk.src, n_words)
        tgt_vec, tgt_ok = word_vectors(chunk.tgt, n_words)
        total = zero_like_graph(chunk.src.hidden)
        for a_vec, b_vec, b_ok, a_idx, b_idx in (
            (src_vec, tgt_vec, tgt_ok, pairs[..., 0], pairs[..., 1]),
            (tgt_vec, src_vec, src_ok, pairs[..., 1], pairs[..., 0]),
        ):
            anchor = torch.gather(a_vec, 1, a_idx.clamp(min=0)[..., None].expand(-1, -1, a_vec.shape[-1]))  # [b, A, H]
            logits = torch.einsum("bah,bwh->baw", anchor, b_vec) / self.settings.temperature
            logits = logits.masked_fill(~b_ok[:, None, :], float("-inf"))
            loss = nn.functional.cross_entropy(logits[valid], b_idx[valid], reduction="sum")
            total = total + loss
        return total / chunk.normaliser
