"""The training objectives, one per file, each registered under its `[train.objectives.<name>]`
section (`register_objective`); `build_objectives` turns the config into modules.

A new objective is one file: an `ObjectiveConfig` subclass (its settings, `name`, `description`,
`papers`, needs and `build`) decorated with `@register_objective`, and the `SentenceObjective`
or `TokenObjective` its `build` returns; plus its import line below (docs/architecture.md,
"Extension points")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from tasks.registry import lookup
from tasks.train.objectives.base import (
    OBJECTIVES,
    Chunk,
    Objective,
    ObjectiveConfig,
    SentenceObjective,
    Side,
    TokenObjective,
    TrainContext,
    register_objective,
)
from tasks.train.training_data import TrainingData

# isort: split
# The built-in objectives: importing a module registers its settings class (in this order, which
# is the order of their sections in a config and of their losses in a step).
from tasks.train.objectives.translation_ranking import TranslationRankingLoss  # noqa: I001
from tasks.train.objectives.multiway_supcon import MultiwaySupConLoss
from tasks.train.objectives.aligned_word_prediction import AlignedWordPredictionLoss
from tasks.train.objectives.word_translation_ranking import WordTranslationRankingLoss
from tasks.train.objectives.representation_translation import RepresentationTranslationLoss
from tasks.train.objectives.dueam_wmd import DuEAMLoss
from tasks.train.objectives.base_regularization import BaseRegularizationLoss
from tasks.train.objectives.base_similarity import BaseSimilarityLoss


class ObjectiveSections(Protocol):
    """`[train.objectives]` as building the objectives reads it: tasks/train/config.py's
    `ObjectivesConfig`, which imports this package to validate its sections (so this package
    names only the shape it reads, and the import goes one way)."""

    def active(self) -> dict[str, ObjectiveConfig]: ...


class WithObjectives(Protocol):
    """A train config (`TrainConfig`) as `build_objectives` reads it: its objectives."""

    @property
    def objectives(self) -> ObjectiveSections: ...


BUILT_IN_OBJECTIVES: tuple[str, ...] = tuple(OBJECTIVES)
"""The objectives the package registers: their sections are in every validated config (off,
but for translation ranking, unless given); a plug-in's section only where a config has it."""


def objective_class(name: str) -> type[ObjectiveConfig]:
    """The objective registered under `name` (its settings class)."""
    cls = lookup(OBJECTIVES, name)
    if cls is None:
        raise ValueError(
            f"[train.objectives.{name}]: no objective is registered under this name (known: {', '.join(sorted(OBJECTIVES))})"
        )
    return cls


def needs_frozen_model(config: ObjectiveSections) -> bool:
    """Whether any objective that trains needs a frozen copy of the starting model."""
    return any(section.needs_frozen() for section in config.active().values())


def build_objectives(config: WithObjectives, model: Any, data: TrainingData, base_dir: Path) -> dict[str, Objective]:
    """The objectives with weight > 0, in config order, each built by its section."""
    built = {name: section.build(model, data, base_dir) for name, section in config.objectives.active().items()}
    for name, objective in built.items():
        if not isinstance(objective, (SentenceObjective, TokenObjective)):
            raise TypeError(
                f"[train.objectives.{name}]: build() returned {objective!r}, not a SentenceObjective or TokenObjective"
            )
    return built


__all__ = [
    "BUILT_IN_OBJECTIVES",
    "OBJECTIVES",
    "AlignedWordPredictionLoss",
    "BaseRegularizationLoss",
    "BaseSimilarityLoss",
    "Chunk",
    "DuEAMLoss",
    "MultiwaySupConLoss",
    "Objective",
    "ObjectiveConfig",
    "ObjectiveSections",
    "RepresentationTranslationLoss",
    "SentenceObjective",
    "Side",
    "TokenObjective",
    "TrainContext",
    "WithObjectives",
    "TranslationRankingLoss",
    "WordTranslationRankingLoss",
    "build_objectives",
    "needs_frozen_model",
    "objective_class",
    "register_objective",
]
