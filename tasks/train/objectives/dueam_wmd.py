"""DuEAM (Goswami et al.): a frozen anchor's Word Mover's Distance teaches the learner.

The anchor (the frozen starting model) embeds both sentences' tokens; the Word Mover's
Distance between the two token clouds (uniform weights, Euclidean cost between L2-normalised
token vectors) is computed with a batched log-domain Sinkhorn in torch (entropic OT, so a
close upper estimate of exact WMD). The learner is trained so that exp(-||s' - t'||) of its
sentence vectors matches exp(-WMD): L_A = mean exp(|exp(-d_euc) - exp(-d_wmd)|); and it
maximises the cosine of translation pairs: L_B = mean cos(s', t'); loss = L_A - lambda * L_B
(lambda = 0.003 in the paper). Pairs need not be parallel. `pairs` chooses what is trained on:
  parallel             each row's (non-pivot, pivot) translation pair;
  parallel_and_random  plus a mismatched pair per row: its non-pivot text with the pivot text of
                       its neighbour row (rows 0-1, 2-3, ... of each process's batch, whose order
                       is random), which only L_A uses;
  random               the mismatched pairs only, for L_A and L_B: no translation pair is ever
                       seen, the paper's unsupervised DuEAM (random sentence pairs, section 5).

Inputs: pairs (view 1, view 0), parallel or not.

    loss = DuEAMLoss(cosine_weight=0.003)
    value = loss(embeddings, valid, loss.prepare(ctx, batch))
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tasks.train.objectives.base import SentenceObjective, TrainContext, zero_like_graph


def sinkhorn_distance(x: torch.Tensor, x_mask: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor, *, epsilon: float, iterations: int) -> torch.Tensor:
    """Entropic OT cost between point clouds, batched: x [n, a, h], y [n, b, h], masks bool; uniform weights."""
    cost = torch.cdist(x.float(), y.float())  # [n, a, b]
    big = torch.finfo(cost.dtype).max / 4
    log_a = torch.where(x_mask, -torch.log(x_mask.sum(1, keepdim=True).float()), torch.full_like(x_mask, -math.inf, dtype=cost.dtype))
    log_b = torch.where(y_mask, -torch.log(y_mask.sum(1, keepdim=True).float()), torch.full_like(y_mask, -math.inf, dtype=cost.dtype))
    pair_ok = x_mask[:, :, None] & y_mask[:, None, :]
    c = torch.where(pair_ok, cost, torch.full_like(cost, big))
    f = torch.zeros_like(log_a)
    g = torch.zeros_like(log_b)
    for _ in range(iterations):
        f = epsilon * (log_a - torch.logsumexp((g[:, None, :] - c) / epsilon, dim=2))
        f = torch.where(x_mask, f, torch.zeros_like(f))
        g = epsilon * (log_b - torch.logsumexp((f[:, :, None] - c) / epsilon, dim=1))
        g = torch.where(y_mask, g, torch.zeros_like(g))
    plan = torch.exp((f[:, :, None] + g[:, None, :] - c) / epsilon) * pair_ok
    return (plan * cost).sum((1, 2))


def neighbour_rows(n: int) -> np.ndarray:
    """Row i's partner for non-parallel pairs: 1<->0, 3<->2, ...; an odd last row has none (-1)."""
    partner = np.arange(n) ^ 1
    partner[partner >= n] = -1
    return partner


class DuEAMLoss(SentenceObjective):
    def __init__(self, cosine_weight: float = 0.003, pairs: str = "parallel_and_random", epsilon: float = 0.05, iterations: int = 50) -> None:
        super().__init__()
        if pairs not in ("parallel", "parallel_and_random", "random"):
            raise ValueError(f"pairs must be parallel, parallel_and_random or random, not {pairs!r}")
        self.cosine_weight, self.pairs = cosine_weight, pairs
        self.use_parallel, self.use_random = pairs != "random", pairs != "parallel"
        self.epsilon, self.iterations = epsilon, iterations

    def prepare(self, ctx: TrainContext, batch) -> dict[str, torch.Tensor]:
        from tasks.train.trainer import anchor_tokens

        with torch.no_grad():
            src, src_mask = anchor_tokens(ctx, batch.text_ids[:, 1], batch.lang_ids[:, 1])
            tgt, tgt_mask = anchor_tokens(ctx, batch.text_ids[:, 0], batch.lang_ids[:, 0])
            partner = torch.from_numpy(neighbour_rows(batch.size)).to(src.device)
            wmd = torch.full((batch.size,), float("nan"), device=src.device)
            if self.use_parallel:
                wmd = sinkhorn_distance(src, src_mask, tgt, tgt_mask, epsilon=self.epsilon, iterations=self.iterations)
            other = torch.full_like(wmd, float("nan"))
            if self.use_random and (partner >= 0).any():
                ok = partner >= 0
                p = partner[ok]
                other[ok] = sinkhorn_distance(src[ok], src_mask[ok], tgt[p], tgt_mask[p], epsilon=self.epsilon, iterations=self.iterations)
            partner_global = torch.where(partner >= 0, partner.float(), torch.full_like(wmd, float("nan")))
        return {"wmd": torch.stack([wmd, other, partner_global - torch.arange(batch.size, device=src.device)], dim=1)}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        src, tgt = embeddings[:, 1].float(), embeddings[:, 0].float()
        wmd = extras["wmd"]
        terms, cosines = [], []
        if self.use_parallel:
            d_par = (src - tgt).norm(dim=-1)
            terms.append(torch.exp((torch.exp(-d_par) - torch.exp(-wmd[:, 0])).abs()))
            cosines.append((src * tgt).sum(-1))
        ok = ~torch.isnan(wmd[:, 1])
        if self.use_random and ok.any():
            rows = torch.arange(len(src), device=src.device)[ok]
            partner = rows + wmd[ok, 2].long()  # the partner's row in the gathered batch
            d_np = (src[rows] - tgt[partner]).norm(dim=-1)
            terms.append(torch.exp((torch.exp(-d_np) - torch.exp(-wmd[ok, 1])).abs()))
            if not self.use_parallel:
                cosines.append((src[rows] * tgt[partner]).sum(-1))
        if not terms:  # random pairs only, and a batch of one row has no partner
            return zero_like_graph(embeddings)
        loss_a = torch.cat(terms).mean()
        loss_b = torch.cat(cosines).mean() if cosines else loss_a.new_zeros(())
        return loss_a - self.cosine_weight * loss_b
