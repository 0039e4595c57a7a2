"""What objectives see. Two kinds, so that GradCache and data parallelism work for all of them:

- `SentenceObjective`: a function of the sentence vectors of the WHOLE batch (in-batch
  negatives), `[rows, views, dim]` plus a validity mask, gathered over processes. It may ask for
  per-row extras computed without gradient (`prepare`), e.g. the frozen model's vectors.
- `TokenObjective`: a function of one chunk of rows at a time (token states of the pair's two
  sides); it returns its chunk's share of the loss, already divided by a normaliser computed from
  the whole batch, so that chunk losses add up to the batch loss.

The trainer knows no objective by name: it sums `weight * objective(...)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tasks.train.data import StepBatch, TrainingData


@dataclass
class Side:
    """One side of the chunk's pairs after the forward pass (row-aligned with the chunk)."""

    hidden: torch.Tensor  # [b, T, H]
    attention_mask: torch.Tensor  # [b, T]
    input_ids: torch.Tensor  # [b, T]
    word_ids: torch.Tensor  # [b, T], -1 for tokens of no aligned word
    lang_ids: torch.Tensor  # [b]


@dataclass
class Chunk:
    batch: StepBatch  # the chunk's rows
    src: Side  # view 1: the non-pivot text
    tgt: Side  # view 0: the pivot text
    batch_rows: int  # rows in the whole (global) batch
    normaliser: float  # the objective's normaliser over the whole batch (see TokenObjective.normaliser)


@dataclass
class TrainContext:
    """Shared, read-only things objectives may need."""

    data: TrainingData
    model: Any  # DualEncoder
    frozen: Any | None  # frozen starting model (SupCon regulariser, DuEAM anchor)
    device: torch.device
    autocast: Any  # a context manager factory


class SentenceObjective(nn.Module):
    level = "sentence"

    def prepare(self, ctx: TrainContext, batch: StepBatch) -> dict[str, torch.Tensor]:
        """Per-row tensors [b, ...] computed without gradient before the step (gathered over processes)."""
        return {}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError


class TokenObjective(nn.Module):
    level = "token"

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        """What the summed chunk losses are divided by, from the whole batch (default: 2 x rows)."""
        return 2.0 * batch.size

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        raise NotImplementedError


def zero_like_graph(t: torch.Tensor) -> torch.Tensor:
    """A zero that keeps `t` in the graph (a batch without usable items still backpropagates)."""
    return t.sum() * 0.0
