"""What objectives are. An objective is its settings: a `[train.objectives.<name>]` section is
validated by the `ObjectiveConfig` subclass registered under `<name>` (`@register_objective`),
which declares, once, its settings (pydantic fields; `weight` comes from the base), its `name`,
a one-line `description` and the `papers` it comes from (the model card reads both), what it
needs (`needs_alignments`: word pairs from the align stage; `needs_pivot`: the pivot text in view
0 of every row; `needs_frozen_model`: a frozen copy of the starting model in `TrainContext.frozen`;
`trains_alone = False` for a regulariser) and `build()`, which returns the torch module that
computes its loss. The module keeps the settings (`self.settings`) and reads them from there.

Two kinds of module, so that GradCache and data parallelism work for all of them:

- `SentenceObjective`: a function of the sentence vectors of the WHOLE batch (in-batch
  negatives), `[rows, views, dim]` plus a validity mask, gathered over processes. It may ask for
  per-row extras computed without gradient (`prepare`), e.g. the frozen model's vectors.
- `TokenObjective`: a function of one chunk of rows at a time (token states of the pair's two
  sides); it returns its chunk's share of the loss, already divided by a normaliser computed from
  the whole batch, so that chunk losses add up to the batch loss.

The trainer knows no objective by name: it sums `objective.weight * objective(...)`. One that
draws something per step (AWP: which aligned words to mask) does it in `draw`, which the trainer
calls on every step's whole batch.
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
from tasks.stage_config import StageConfig
from tasks.train.batching import StepBatch
from tasks.train.papers import Paper
from tasks.train.training_data import TrainingData


class ObjectiveConfig(StageConfig):
    """Base of an objective: its `[train.objectives.<name>]` section and what the rest of xlembed
    needs to know about it. A subclass sets the class attributes below, declares its settings as
    pydantic fields and implements `build`; `@register_objective` registers it under `name`."""

    name: ClassVar[str] = ""  # its section, [train.objectives.<name>]
    description: ClassVar[str] = ""  # what it does, in one line (the model card's objectives table)
    papers: ClassVar[tuple[Paper, ...]] = ()  # where it comes from (the model card cites them)
    needs_alignments: ClassVar[bool] = False  # word pairs from the align stage (without them it contributes nothing)
    needs_pivot: ClassVar[bool] = False  # the pivot text in view 0 of every row
    needs_frozen_model: ClassVar[bool] = False  # a frozen copy of the starting model
    trains_alone: ClassVar[bool] = True  # False: a regulariser, which needs another objective on
    # requires_gpu (from StageConfig): True for one that runs only on the accelerator; the train
    # stage's shards then reserve a GPU while it is on (`needs_gpu`)

    weight: float = Field(default=0.0, ge=0.0, description="its loss's weight in the sum; 0 = off")

    def needs_frozen(self) -> bool:
        """Whether these settings need the frozen model (default: the class's `needs_frozen_model`)."""
        return self.needs_frozen_model

    def needs_gpu(self) -> bool:
        """An objective that is off (weight 0) needs nothing; one that is on, what it declares."""
        return self.weight > 0 and super().needs_gpu()

    def build(self, model: Any, data: TrainingData, base_dir: Path) -> Objective:
        """The module computing its loss, for these settings (the trained model, the training data
        and the base model's folder at hand, for heads that copy from them)."""
        raise NotImplementedError(f"objective {self.name!r} does not implement build()")


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
    """The torch module of an objective: it holds its settings (`settings`, which its `build`
    passes) and reads them there. `Loss(temperature=0.05)` builds the settings from keywords, for
    tests and notebooks: `Settings` names the class that validates them."""

    Settings: ClassVar[type[ObjectiveConfig]] = ObjectiveConfig
    level: ClassVar[str] = ""

    def __init__(self, settings: ObjectiveConfig | None = None, /, **values: Any) -> None:
        super().__init__()
        self.settings = settings if settings is not None else self.Settings(**values)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def weight(self) -> float:
        return float(self.settings.weight)

    def draw(self, batch: StepBatch, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """What it draws at random for a step, as arrays indexed by the batch's rows ([B, ...]);
        it finds them as `batch.drawn[self.name]` in every chunk of the batch. Called on the
        step's whole batch, before it is split over processes and chunks, with a generator seeded
        by (seed, step) that the objectives on draw from in config order, so that the batch of
        any step is rebuilt from its number alone (exact resume). Default: nothing."""
        return {}


ObjectiveT = TypeVar("ObjectiveT", bound=type[ObjectiveConfig])

OBJECTIVES: dict[str, type[ObjectiveConfig]] = {}
"""Section name under `[train.objectives]` -> the objective (filled by `register_objective`)."""


def register_objective(cls: ObjectiveT) -> ObjectiveT:
    """Class decorator: `cls` validates and builds `[train.objectives.<cls.name>]`. Register before
    a config naming it is validated (import its module)."""
    if not (isinstance(cls, type) and issubclass(cls, ObjectiveConfig)):
        raise TypeError(f"{getattr(cls, '__name__', cls)}: an objective is an ObjectiveConfig subclass")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name.isidentifier() or name != name.lower():
        raise ValueError(
            f"{cls.__qualname__}.name must be a lower-case identifier (it names [train.objectives.<name>]), got {name!r}"
        )
    if cls.build is ObjectiveConfig.build:
        raise TypeError(f"{cls.__qualname__} must implement build(), which returns its SentenceObjective or TokenObjective")
    return register_unique(OBJECTIVES, name, cls, "objective")


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
