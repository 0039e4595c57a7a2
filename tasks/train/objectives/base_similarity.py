"""Keep the base's similarities within a language: lambda * mean (cos(z_i, z_j) - cos(z0_i, z0_j))^2
over the pairs of texts of one language in the batch (different rows), z0 from the frozen base.

Why beside `base_regularization`: that one holds every vector where it was, so it also holds
back the move that cross-lingual training is for (a language's sentences moving, together, onto
their English translations). What a similarity ranking within one language (STS) needs is only
the angles between that language's sentences. This term constrains those angles and nothing
else: a shift or rotation of a language's sentences as a whole costs nothing. In a TR batch most
same-language pairs are the English side's; a language aligned to English by TR then inherits
English's preserved structure through its translations. Measured, it does not do what it is for
at λ 100 (docs/experiments.md, issue 39's screen): kept beside TR it loses more similarity
within a language than TR alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tasks.train.objectives.base import ObjectiveConfig, SentenceObjective, TrainContext, register_objective, zero_like_graph
from tasks.train.training_data import TrainingData
from tasks.train.views import frozen_views, to_device


@register_objective
class BaseSimilarityConfig(ObjectiveConfig):
    """lambda * mean squared change, against the frozen starting model, of the cosine similarity of
    every pair of same-language texts from different rows of the batch; its `weight` is lambda."""

    name = "base_similarity"
    description = "keep the base model's similarities between texts of one language"
    needs_frozen_model = True
    trains_alone = False

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> BaseSimilarityLoss:
        return BaseSimilarityLoss(self)


class BaseSimilarityLoss(SentenceObjective):
    Settings = BaseSimilarityConfig

    def prepare(self, ctx: TrainContext, batch) -> dict[str, torch.Tensor]:
        return {"z_orig": frozen_views(ctx, batch, "base_similarity"), "langs": to_device(ctx, batch.lang_ids)}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        rows = torch.arange(valid.shape[0], device=valid.device)[:, None].expand_as(valid)[valid]
        langs = extras["langs"].to(valid.device)[valid]
        pairs = (langs[:, None] == langs[None, :]) & (rows[:, None] != rows[None, :])
        if not pairs.any():
            return zero_like_graph(embeddings)
        z = embeddings[valid].float()
        z_orig = extras["z_orig"][valid].float()
        change = z @ z.T - z_orig @ z_orig.T
        return (change**2)[pairs].mean()
