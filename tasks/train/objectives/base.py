"""What objectives see. Two kinds, so that GradCache and data parallelism work for all of them:

- `SentenceObjective`: a function of the sentence vectors of the WHOLE batch (in-batch
  negatives), `[rows, views, dim]` plus a validity mask, gathered over processes. It may ask for
  per-row extras computed without gradient (`prepare`), e.g. the frozen model's vectors.
- `TokenObjective`: a function of one chunk of rows at a time (token states of the pair's two
  sides); it returns its chunk's share of the loss, already divided by a normaliser computed from
  the whole batch, so that chunk losses add up to the batch loss.

The trainer knows no objective by name: it sums `objective.weight * objective(...)`. An
objective is one file: its class declares its `name` (the `[train.objectives.<name>]` section),
its `Settings` (that section's config model, beside it in the file), a one-line `description`
and the `papers` it comes from (the model card reads both), and is registered by
`@register_objective`. The settings declare what it needs: `needs_alignments` (word pairs from
the align stage), `needs_pivot` (the pivot text in view 0 of every row), `needs_frozen_model` (a
frozen copy of the starting model in `TrainContext.frozen`). Each builds itself from its
section with `build`; one that draws something per step (AWP: which aligned words to mask)
does it in `draw`, which the trainer calls on every step's whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
from pydantic import Field
from torch import nn

from tasks.registry import register_unique
from tasks.stage import StageConfig
from tasks.train.batching import StepBatch
from tasks.train.data import TrainingData
from tasks.train.papers import Paper


class ObjectiveConfig(StageConfig):
    """A `[train.objectives.<name>]` section: the base of an objective's `Settings`, which sits
    beside the objective in its file. It declares what the objective needs, so that validating a
    config checks them (`register_objective` mirrors them onto the objective class)."""

    needs_alignments: ClassVar[bool] = False  # word pairs from the align stage (without them it contributes nothing)
    needs_pivot: ClassVar[bool] = False  # the pivot text in view 0 of every row
    needs_frozen_model: ClassVar[bool] = False  # a frozen copy of the starting model
    trains_alone: ClassVar[bool] = True  # False: a regulariser, which needs another objective on

    weight: float = Field(default=0.0, ge=0.0)

    def needs_frozen(self) -> bool:
        """Whether these settings need the frozen model (default: the class's `needs_frozen_model`)."""
        return self.needs_frozen_model


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


class Objective(nn.Module):
    """What every objective declares; `weight` is its section's weight (set by `from_config`).
    The needs are declared on its `Settings` (so that validating a config checks them) and
    copied here by `register_objective`."""

    name: ClassVar[str] = ""  # its section, [train.objectives.<name>]
    Settings: ClassVar[type[ObjectiveConfig]] = ObjectiveConfig  # that section's config model
    description: ClassVar[str] = ""  # what it does, in one line (the model card's objectives table)
    papers: ClassVar[tuple[Paper, ...]] = ()  # where it comes from (the model card cites them)
    level: ClassVar[str] = ""
    needs_alignments: ClassVar[bool] = False
    needs_pivot: ClassVar[bool] = False
    needs_frozen_model: ClassVar[bool] = False
    weight: float = 1.0

    @classmethod
    def build(cls, config: Any, model: Any, data: TrainingData, base_dir: Path) -> Objective:
        """The objective for its config section (the trained model, the training data and the base
        model's folder at hand, for heads that copy from them); subclasses override."""
        return cls()

    @classmethod
    def from_config(cls, config: Any, model: Any, data: TrainingData, base_dir: Path) -> Objective:
        obj = cls.build(config, model, data, base_dir)
        obj.weight = float(config.weight)
        return obj

    def draw(self, batch: StepBatch, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """What it draws at random for a step, as arrays indexed by the batch's rows ([B, ...]);
        it finds them as `batch.drawn[self.name]` in every chunk of the batch. Called on the
        step's whole batch, before it is split over processes and chunks, with a generator seeded
        by (seed, step) that the objectives on draw from in config order, so that the batch of
        any step is rebuilt from its number alone (exact resume). Default: nothing."""
        return {}


ObjectiveClass = TypeVar("ObjectiveClass", bound=type[Objective])

OBJECTIVES: dict[str, type[Objective]] = {}
"""Section name under `[train.objectives]` -> the objective class (filled by `register_objective`)."""


def register_objective(cls: ObjectiveClass) -> ObjectiveClass:
    """Class decorator: the objective trains from `[train.objectives.<cls.name>]`, validated by
    `cls.Settings`. Register before a config naming it is validated (import its module)."""
    if not (isinstance(cls, type) and issubclass(cls, Objective)) or cls.level not in ("sentence", "token"):
        raise TypeError(f"{getattr(cls, '__name__', cls)}: an objective is a SentenceObjective or a TokenObjective")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(
            f"{cls.__qualname__}.name must be a lower-case identifier (it names [train.objectives.<name>]), got {name!r}"
        )
    settings = cls.__dict__.get("Settings")
    if not (isinstance(settings, type) and issubclass(settings, ObjectiveConfig)):
        raise TypeError(f"{cls.__qualname__}.Settings must be a tasks.train.config.ObjectiveConfig subclass, got {settings!r}")
    register_unique(OBJECTIVES, name, cls, "objective")
    cls.needs_alignments, cls.needs_pivot, cls.needs_frozen_model = (
        settings.needs_alignments,
        settings.needs_pivot,
        settings.needs_frozen_model,
    )
    return cls


class SentenceObjective(Objective):
    level = "sentence"

    def prepare(self, ctx: TrainContext, batch: StepBatch) -> dict[str, torch.Tensor]:
        """Per-row tensors [b, ...] computed without gradient before the step (gathered over processes)."""
        return {}

    def forward(self, embeddings: torch.Tensor, valid: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError


class TokenObjective(Objective):
    level = "token"

    def normaliser(self, data: TrainingData, batch: StepBatch) -> float:
        """What the summed chunk losses are divided by, from the whole batch (default: 2 x rows)."""
        return 2.0 * batch.size

    def forward(self, ctx: TrainContext, chunk: Chunk) -> torch.Tensor:
        raise NotImplementedError


def zero_like_graph(t: torch.Tensor) -> torch.Tensor:
    """A zero that keeps `t` in the graph (a batch without usable items still backpropagates)."""
    return t.sum() * 0.0
