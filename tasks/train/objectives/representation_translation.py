"""Representation translation learning (RTL, DAP section 3.3.2): rebuild one sentence of a pair
from the other sentence's token states.

A head made of copies of the encoder's last K layers (K=2, not tied) and a vocabulary head
reads the source sentence's last hidden states (its first token excluded, padding masked)
followed by one [MASK] embedding per token of the sentence to rebuild, and predicts every
token of it but its CLS at the [MASK] positions (reconstruction ratio 1). Loss: token
cross-entropy averaged over every rebuilt token of the batch. The rebuilt sentence's first
special token is neither a label nor attended to, as in DAP's code (`cl_forward`: the label at
the target's first place is -100 and that place is masked out): the paper leaves the CLS out
of RTL because it "will make translation ranking objective hard to converge" (section 3.3.2).

Direction (DAP section 5.1, Table 5): `to_pivot` rebuilds the pivot (English) sentence from the
other language's tokens, the paper's method; `from_pivot` rebuilds the other sentence from the
pivot's; `both` sends half of the rows each way (a row's direction comes from its pivot text
id and the step, so every process and chunk agrees on it). The two latter add a language
embedding to the head's input, as the paper does.

Fixed against the reference code: the [MASK] embeddings go through the embedding module once
(position embeddings and LayerNorm once, not twice); label padding comes from the attention
mask, before any vocabulary remapping, so a real token is never blanked; labels are built with
tensors, not Python loops. `target_vocab_only` restricts the softmax to token ids that occur in
the texts the head rebuilds.

Inputs: rows whose view 1 translates the pivot view 0.

    head = RepresentationTranslationHead(encoder, layers=2, mask_id=tokenizer.mask_token_id)
    loss = RepresentationTranslationLoss(head)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from tasks.train.batching import StepBatch
from tasks.train.model import RepresentationTranslationHead
from tasks.train.objectives.base import (
    Chunk,
    ObjectiveConfig,
    Side,
    TokenObjective,
    TrainContext,
    register_objective,
    zero_like_graph,
)
from tasks.train.papers import DAP
from tasks.train.training_data import TrainingData


def rows_to_pivot(batch: StepBatch, direction: str) -> np.ndarray:
    """[b] bool: the rows whose pivot sentence is rebuilt (the others rebuild their view-1 sentence)."""
    if direction == "to_pivot":
        return np.ones(batch.size, dtype=bool)
    if direction == "from_pivot":
        return np.zeros(batch.size, dtype=bool)
    # both: about half each way, changing with the step; the same in every chunk and process
    return (batch.text_ids[:, 0] + batch.step) % 2 == 0


@register_objective
class RepresentationTranslationConfig(ObjectiveConfig):
    """DAP RTL: a copy of the last K layers + vocabulary head rebuilds one side of a pair from the other's tokens."""

    name = "representation_translation"
    description = "representation translation learning (RTL): rebuild the translation from token states"
    papers = (DAP,)
    needs_pivot = True

    layers: int = Field(default=2, ge=1, description="K: encoder layers copied into the RTL head")
    direction: Literal["to_pivot", "from_pivot", "both"] = Field(
        default="to_pivot",
        description=(
            "to_pivot: rebuild the pivot (English) sentence from the other's tokens (DAP's xx->en); from_pivot: the other "
            "sentence from the pivot's (en->xx); both: half of the rows each way (DAP Table 5). from_pivot and both add a "
            "learned language embedding to the head's input, as the paper does to name the language to rebuild"
        ),
    )
    target_vocab_only: bool = Field(
        default=False, description="softmax over the token ids seen in the texts the head rebuilds only"
    )

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> RepresentationTranslationLoss:
        if data.mask_id is None:
            raise ValueError("representation_translation needs a tokenizer with a mask token")
        n_langs = len(data.langs) if self.direction != "to_pivot" else 0
        head = RepresentationTranslationHead(model, self.layers, data.mask_id, n_langs=n_langs)
        head.head.load_pretrained(base_dir)
        vocab = None
        if self.target_vocab_only:
            rebuilt = {"to_pivot": data.groups[:, :1], "from_pivot": data.groups[:, 1:], "both": data.groups}[self.direction]
            texts = np.unique(rebuilt[rebuilt >= 0])
            vocab = np.unique(data.token_ids[texts][np.arange(data.token_ids.shape[1])[None, :] < data.lengths[texts][:, None]])
        return RepresentationTranslationLoss(head, self, vocab=vocab, vocab_size=model.word_embeddings().weight.shape[0])


class RepresentationTranslationLoss(TokenObjective):
    """`head` rebuilds the text; `vocab` (with the model's `vocab_size`) restricts its softmax to those
    token ids; the settings come as a `RepresentationTranslationConfig` or as its keywords."""

    Settings = RepresentationTranslationConfig
    settings: RepresentationTranslationConfig

    def __init__(
        self,
        head: nn.Module,
        settings: RepresentationTranslationConfig | None = None,
        /,
        vocab: np.ndarray | None = None,
        vocab_size: int | None = None,
        **values: Any,
    ) -> None:
        super().__init__(settings, **values)
        self.head = head
        self.register_buffer("vocab", torch.from_numpy(vocab).long() if vocab is not None else None, persistent=False)
        if vocab is not None:
            lookup = torch.full((int(vocab_size),), -100, dtype=torch.long)
            lookup[torch.from_numpy(vocab).long()] = torch.arange(len(vocab))
            self.register_buffer("lookup", lookup, persistent=False)
        else:
            self.lookup = None

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        rebuilt = np.where(rows_to_pivot(batch, self.settings.direction), batch.text_ids[:, 0], batch.text_ids[:, 1])
        return float((data.lengths[rebuilt] - 1).sum())  # every rebuilt token of the whole batch (its CLS is not one)

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        to_pivot = torch.from_numpy(rows_to_pivot(chunk.batch, self.settings.direction)).to(chunk.src.hidden.device)
        total = zero_like_graph(chunk.src.hidden)
        for source, target, rows in ((chunk.src, chunk.tgt, to_pivot), (chunk.tgt, chunk.src, ~to_pivot)):
            if bool(rows.any()):
                total = total + self._rebuild(ctx, _select(source, rows), _select(target, rows))
        return total / chunk.normaliser

    def _rebuild(self, ctx: TrainContext, source: Side, target: Side) -> torch.Tensor:
        """Summed token cross-entropy of rebuilding `target` from `source`'s token states."""
        labels = target.input_ids.masked_fill(target.attention_mask == 0, -100)  # padding first
        labels[:, 0] = -100  # the CLS is not rebuilt (DAP)
        if self.lookup is not None:
            labels = torch.where(labels >= 0, self.lookup[labels.clamp(min=0)], labels)
        with ctx.autocast():
            logits = self.head(
                source.hidden, source.attention_mask, target.attention_mask, self.vocab, source.lang_ids, target.lang_ids
            )
        return nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")


def _select(side: Side, rows: torch.Tensor) -> Side:
    if bool(rows.all()):
        return side
    return Side(side.hidden[rows], side.attention_mask[rows], side.input_ids[rows], side.word_ids[rows], side.lang_ids[rows])
