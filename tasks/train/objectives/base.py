"""What objectives see. Two kinds, so that GradCache and data parallelism work for all of them:

- `SentenceObjective`: a function of the sentence vectors of the WHOLE batch (in-batch
  negatives), `[rows, views, dim]` plus a validity mask, gathered over processes. It may ask for
  per-row extras computed without gradient (`prepare`), e.g. the frozen model's vectors.
- `TokenObjective`: a function of one chunk of rows at a time (token states of the pair's two
  sides); it returns its chunk's share of the loss, already divided by a normaliser computed from
  the whole batch, so that chunk losses add up to the batch loss.

The trainer knows no objective by name: it sums `objective.weight * objective(...)`. Objectives
register under their `[train.objectives.<name>]` section name (`register_objective`) and
declare what they need as class attributes: `needs_alignments` (word pairs from the align
stage), `needs_pivot` (the pivot text in view 0 of every row), `needs_frozen_model` (a frozen
copy of the starting model in `TrainContext.frozen`), and `level` ("sentence" or "token").
Each builds itself from its config section with `from_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from torch import nn

from tasks.registry import register_unique
from tasks.train.config import OBJECTIVE_SECTIONS, ObjectiveConfig, ObjectivesConfig
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


class Objective(nn.Module):
    """What every objective declares; `weight` is its config's weight (set by `from_config`).
    The needs are declared on the config class (`ObjectiveConfig`), torch-free so that config
    validation can check them, and copied here by `register_objective`."""

    name: ClassVar[str] = ""  # the config section, set by register_objective
    config_class: ClassVar[type[ObjectiveConfig]] = ObjectiveConfig
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


O = TypeVar("O", bound=type[Objective])

OBJECTIVES: dict[str, type[Objective]] = {}
"""Section name under `[train.objectives]` -> the objective class (filled by `register_objective`)."""


def register_objective(name: str, config: type[ObjectiveConfig]) -> Callable[[O], O]:
    """Class decorator: the objective trains from `[train.objectives.<name>]`, validated by `config`.

    A name the built-in `ObjectivesConfig` has no field for becomes a section of its own: register
    before the config is validated (import the module that registers)."""

    def deco(cls: O) -> O:
        if cls.level not in ("sentence", "token"):
            raise TypeError(f"{cls.__name__}: an objective is a SentenceObjective or a TokenObjective")
        field = ObjectivesConfig.model_fields.get(name)
        if field is not None and field.annotation is not config:
            raise ValueError(f"objective {name!r}: [train.objectives.{name}] is validated by {field.annotation.__name__}, not {config.__name__}")
        register_unique(OBJECTIVES, name, cls, "objective")
        cls.name, cls.config_class = name, config
        cls.needs_alignments, cls.needs_pivot, cls.needs_frozen_model = config.needs_alignments, config.needs_pivot, config.needs_frozen_model
        OBJECTIVE_SECTIONS[name] = config
        return cls

    return deco


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
