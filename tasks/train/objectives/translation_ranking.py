"""Translation ranking (TR): in-batch softmax over cosine similarities of translation pairs.

Each non-pivot text must rank its own pivot translation above every other pivot text of the
batch (Guo et al. 2018; LaBSE; DAP; WACSE). Cosine similarity divided by a temperature (0.05 =
sentence-transformers' MultipleNegativesRankingLoss scale 20), optional additive margin on the
positive (LaBSE), one direction (non-pivot -> pivot, DAP's default) or both.

Inputs: rows whose view 1 (non-pivot) translates view 0 (pivot).

    loss = TranslationRankingConfig(temperature=0.05, symmetric=True).build(model, data, base_dir)
    value = loss(embeddings, valid, {})   # embeddings [B, views, dim], L2-normalised
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import Field
from torch import nn

from tasks.train.objectives.base import ObjectiveConfig, SentenceObjective, register_objective
from tasks.train.papers import DAP, WACSE
from tasks.train.training_data import TrainingData


@register_objective
class TranslationRankingConfig(ObjectiveConfig):
    """In-batch translation ranking (DAP, WACSE, LaBSE): cosine / temperature, labels on the diagonal."""

    name = "translation_ranking"
    description = "translation ranking (TR): in-batch softmax over cosine similarities of translation pairs"
    papers = (DAP, WACSE)

    weight: float = Field(default=1.0, ge=0.0, description="on by default: the objective a config trains unless told otherwise")
    temperature: float = Field(default=0.05, gt=0.0, description="0.05 = sentence-transformers' scale 20")
    symmetric: bool = Field(default=False, description="both directions; False = non-pivot -> pivot only (DAP default)")
    margin: float = Field(default=0.0, ge=0.0, description="additive margin on the positive's cosine (LaBSE); DAP uses 0")

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> TranslationRankingLoss:
        return TranslationRankingLoss(self)


class TranslationRankingLoss(SentenceObjective):
    Settings = TranslationRankingConfig
    settings: TranslationRankingConfig

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        settings = self.settings
        src, tgt = embeddings[:, 1].float(), embeddings[:, 0].float()
        sims = src @ tgt.t()
        if settings.margin:
            sims = sims - settings.margin * torch.eye(len(sims), device=sims.device, dtype=sims.dtype)
        logits = sims / settings.temperature
        labels = torch.arange(len(logits), device=logits.device)
        loss = nn.functional.cross_entropy(logits, labels)
        if settings.symmetric:
            loss = (loss + nn.functional.cross_entropy(logits.t(), labels)) / 2
        return loss
