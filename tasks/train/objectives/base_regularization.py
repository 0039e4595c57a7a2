"""Stay near the start: lambda * mean ||z - z_orig||^2 against the frozen base model.

The multi-way paper (Fazili & Goswami) adds this term to its SupCon loss so that training on
a few languages does not drag the whole space away from what the pretrained encoder already
does well; here it is an objective of its own, so it can sit beside any other (TR, WTR, ...).
Its weight is lambda. Every valid text of the batch counts: z is the trained model's
L2-normalised sentence vector, z_orig the frozen starting model's vector of the same text
(computed without gradient before the step), so ||z - z_orig||^2 = 2 - 2 cos(z, z_orig).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tasks.train.objectives.base import ObjectiveConfig, SentenceObjective, TrainContext, register_objective, zero_like_graph
from tasks.train.papers import MULTIWAY
from tasks.train.training_data import TrainingData
from tasks.train.views import frozen_views


@register_objective
class BaseRegularizationConfig(ObjectiveConfig):
    """lambda * mean ||z - z_orig||^2 against the frozen starting model, for every text (multi-way
    paper's regulariser); its `weight` is lambda."""

    name = "base_regularization"
    description = "stay near the base model: mean squared distance to its sentence vectors"
    papers = (MULTIWAY,)
    needs_frozen_model = True
    trains_alone = False

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> BaseRegularizationLoss:
        return BaseRegularizationLoss(self)


class BaseRegularizationLoss(SentenceObjective):
    Settings = BaseRegularizationConfig

    def prepare(self, ctx: TrainContext, batch) -> dict[str, torch.Tensor]:
        return {"z_orig": frozen_views(ctx, batch, "base_regularization")}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        if not valid.any():
            return zero_like_graph(embeddings)
        z = embeddings[valid].float()
        z_orig = extras["z_orig"][valid].float()
        return ((z - z_orig) ** 2).sum(-1).mean()
