"""Multi-way supervised contrastive loss (Fazili & Goswami; SupCon of Khosla et al. 2020).

Every text of a multi-way row is an anchor; the other texts of its row (its translations) are
its positives; every other text of the batch is a negative; positives stay in the
denominator. An anchor without a positive (a row with one valid text) is skipped instead of
dividing by zero. Optional positive boosting (the paper's appendix): each positive's logit is
scaled by exp(-z_i . z_p) (a constant factor, no gradient through it), so that the loss keeps
pulling at translations that are still far apart. Optional regulariser lambda * mean ||z - z_orig||^2
against the frozen starting model, which keeps the space from drifting. With anchors="pivot"
only view 0's texts (the pivot, English) are anchors: the paper's en-anchor ablation; the
other texts still serve as positives and negatives.

Inputs: rows of `views` texts (view 0 the pivot), some views possibly missing.

    loss = MultiwaySupConLoss(temperature=0.05, positive_boost=True, regularization=0.1)
    value = loss(embeddings, valid, loss.prepare(ctx, batch))
"""

from __future__ import annotations

import torch

from tasks.train.objectives.base import SentenceObjective, TrainContext, zero_like_graph


class MultiwaySupConLoss(SentenceObjective):
    def __init__(self, temperature: float = 0.05, positive_boost: bool = False, regularization: float = 0.0, anchors: str = "all") -> None:
        super().__init__()
        if anchors not in ("all", "pivot"):
            raise ValueError(f"anchors must be 'all' or 'pivot', got {anchors!r}")
        self.temperature, self.positive_boost, self.regularization = temperature, positive_boost, regularization
        self.anchors = anchors

    def prepare(self, ctx: TrainContext, batch) -> dict[str, torch.Tensor]:
        if not self.regularization:
            return {}
        from tasks.train.trainer import encode_views

        with torch.no_grad():
            return {"z_orig": encode_views(ctx, ctx.frozen, batch)}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        rows, views, _ = embeddings.shape
        flat_valid = valid.reshape(-1)
        z = embeddings.reshape(rows * views, -1)[flat_valid].float()
        group = torch.arange(rows, device=z.device).repeat_interleave(views)[flat_valid]
        sims = z @ z.t()
        logits = sims / self.temperature
        n = len(z)
        self_mask = torch.eye(n, dtype=torch.bool, device=z.device)
        positive = (group[:, None] == group[None, :]) & ~self_mask
        if self.positive_boost:
            logits = torch.where(positive, logits * torch.exp(-sims.detach()), logits)
        logits = logits.masked_fill(self_mask, float("-inf"))
        log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        n_pos = positive.sum(1)
        has_pos = n_pos > 0
        if self.anchors == "pivot":
            has_pos &= torch.arange(views, device=z.device).repeat(rows)[flat_valid] == 0
        if not has_pos.any():
            loss = zero_like_graph(z)
        else:
            per_anchor = -(log_prob.masked_fill(~positive, 0.0)).sum(1) / n_pos.clamp(min=1)
            loss = per_anchor[has_pos].mean()
        if self.regularization and "z_orig" in extras:
            z_orig = extras["z_orig"].reshape(rows * views, -1)[flat_valid].float()
            loss = loss + self.regularization * ((z - z_orig) ** 2).sum(1).mean()
        return loss
