"""Multi-way supervised contrastive loss (Fazili & Goswami eq. 1-3; SupCon of Khosla et al. 2020).

Every text of a multi-way row is an anchor; the other texts of its row (its translations) are
its positives P(i); every other text of the batch is a negative. Two denominators:
  paper   the multi-way paper's eq. 1: the sum runs over A(i) = I minus ({i} and P(i)), the
          negatives only, so a positive never competes with itself;
  khosla  Khosla et al.'s L_sup^out: all texts but the anchor, positives included (the form of
          the SupCon reference code; bounded below by log |P(i)|).
and two reductions over anchors: `sum` (eq. 1, L_sup = sum_i L_i) or `mean`. The regulariser
is eq. 2-3: L = L_sup + lambda * R, R = mean over the batch's texts of ||z - z_orig||^2 against
the frozen starting model. With `sum` lambda is the paper's lambda; with `mean` L_sup is
divided by the anchor count n, so `regularization = lambda_paper / n` gives the paper's balance
(n = texts with a positive: rows x views, 512 for 128 rows x 4 views).

An anchor without a positive (a row with one valid text), or with no negative, is skipped
instead of dividing by zero. Optional positive boosting (the paper's appendix): each
positive's logit is scaled by exp(-z_i . z_p) (a constant factor, no gradient through it), so
that the loss keeps pulling at translations that are still far apart. With anchors="pivot"
only view 0's texts (the pivot, English) are anchors: the paper's en-anchor ablation; the
other texts still serve as positives and negatives.

Inputs: rows of `views` texts (view 0 the pivot), some views possibly missing.

    loss = MultiwaySupConLoss(temperature=0.05, positive_boost=True, regularization=0.1, denominator="paper", reduction="sum")
    value = loss(embeddings, valid, loss.prepare(ctx, batch))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field

from tasks.stage_config import KEYED_UNLESS_DEFAULT
from tasks.train.objectives.base import ObjectiveConfig, SentenceObjective, TrainContext, register_objective, zero_like_graph
from tasks.train.papers import MULTIWAY
from tasks.train.training_data import TrainingData
from tasks.train.views import frozen_views


@register_objective
class MultiwaySupConConfig(ObjectiveConfig):
    """Supervised contrastive loss over multi-way rows (Fazili & Goswami): every text is an anchor.

    The paper's own form (eq. 1-3) is `denominator = "paper"`, `reduction = "sum"`: then
    `regularization` is the paper's lambda. The defaults (Khosla's denominator, mean over anchors)
    are the form this project trained with before; with `reduction = "mean"` the paper's lambda
    corresponds to `regularization = lambda / n`, n the anchors of a batch (rows x views)."""

    name = "multiway_supcon"
    description = "supervised contrastive loss over multi-way parallel rows"
    papers = (MULTIWAY,)

    temperature: float = Field(default=0.05, gt=0.0)
    positive_boost: bool = Field(default=False, description="scale positive logits by exp(-z_i . z_p) (appendix)")
    regularization: float = Field(
        default=0.0,
        ge=0.0,
        description="lambda of L_sup + lambda * mean ||z - z_orig||^2 (the paper's lambda with reduction = 'sum')",
    )
    denominator: Literal["khosla", "paper"] = Field(
        default="khosla",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "paper: eq. 1's denominator sums over the negatives only, A(i) = I minus ({i} and P(i)); khosla: over every "
            "text but the anchor, positives included (Khosla et al.'s L_sup^out, the SupCon reference code)"
        ),
    )
    reduction: Literal["mean", "sum"] = Field(
        default="mean",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "sum: L_sup sums the anchors' losses (eq. 1; the paper's lambda and scale: n times the mean's gradient, "
            "against the same optimizer.max_grad_norm); mean: divided by the n anchors (comparable in size to TR)"
        ),
    )
    anchors: Literal["all", "pivot"] = Field(
        default="all", description="all: every text is an anchor (the paper); pivot: only view 0's text (the en-anchor ablation)"
    )

    def needs_frozen(self) -> bool:
        return self.regularization > 0  # the regulariser's z_orig

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> MultiwaySupConLoss:
        return MultiwaySupConLoss(self)


class MultiwaySupConLoss(SentenceObjective):
    Settings = MultiwaySupConConfig
    settings: MultiwaySupConConfig

    def prepare(self, ctx: TrainContext, batch) -> dict[str, torch.Tensor]:
        if not self.settings.regularization:
            return {}
        return {"z_orig": frozen_views(ctx, batch, "multiway_supcon's regularization")}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        settings = self.settings
        rows, views, _ = embeddings.shape
        flat_valid = valid.reshape(-1)
        z = embeddings.reshape(rows * views, -1)[flat_valid].float()
        group = torch.arange(rows, device=z.device).repeat_interleave(views)[flat_valid]
        sims = z @ z.t()
        logits = sims / settings.temperature
        n = len(z)
        self_mask = torch.eye(n, dtype=torch.bool, device=z.device)
        positive = (group[:, None] == group[None, :]) & ~self_mask
        if settings.positive_boost:
            logits = torch.where(positive, logits * torch.exp(-sims.detach()), logits)
        outside = self_mask | positive if settings.denominator == "paper" else self_mask  # not in the denominator
        has_other = (~outside).any(1)
        # a row with nothing in its denominator gets a finite dummy one (it is skipped below), so no NaN gradient
        denominator_logits = logits.masked_fill(outside, float("-inf")).masked_fill(~has_other[:, None], 0.0)
        log_prob = logits - torch.logsumexp(denominator_logits, dim=1, keepdim=True)
        n_pos = positive.sum(1)
        usable = (n_pos > 0) & has_other
        if settings.anchors == "pivot":
            usable &= torch.arange(views, device=z.device).repeat(rows)[flat_valid] == 0
        if not usable.any():
            loss = zero_like_graph(z)
        else:
            per_anchor = -(log_prob.masked_fill(~positive, 0.0)).sum(1) / n_pos.clamp(min=1)
            loss = per_anchor[usable].sum() if settings.reduction == "sum" else per_anchor[usable].mean()
        if settings.regularization and "z_orig" in extras:
            z_orig = extras["z_orig"].reshape(rows * views, -1)[flat_valid].float()
            loss = loss + settings.regularization * ((z - z_orig) ** 2).sum(1).mean()
        return loss
