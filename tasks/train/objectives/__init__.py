"""The training objectives, one per file, each registered under its `[train.objectives.<name>]`
section (`register_objective`); `build_objectives` turns the config into modules.

A new objective: subclass `SentenceObjective` or `TokenObjective`, give it a config class
(a subclass of `tasks.train.config.ObjectiveConfig`, which declares what it needs), a `build`
classmethod, and decorate it with `@register_objective("name", ConfigClass)` (see
docs/architecture.md, "How to add a training objective")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.registry import lookup
from tasks.train.config import ObjectivesConfig, TrainConfig
from tasks.train.data import TrainingData
from tasks.train.objectives.aligned_word_prediction import AlignedWordPredictionLoss
from tasks.train.objectives.base import (
    OBJECTIVES,
    Chunk,
    Objective,
    SentenceObjective,
    Side,
    TokenObjective,
    TrainContext,
    register_objective,
)
from tasks.train.objectives.base_regularization import BaseRegularizationLoss
from tasks.train.objectives.dueam_wmd import DuEAMLoss
from tasks.train.objectives.multiway_supcon import MultiwaySupConLoss
from tasks.train.objectives.representation_translation import RepresentationTranslationLoss
from tasks.train.objectives.translation_ranking import TranslationRankingLoss
from tasks.train.objectives.word_translation_ranking import WordTranslationRankingLoss


def objective_class(name: str) -> type[Objective]:
    cls = lookup(OBJECTIVES, name)
    if cls is None:
        raise ValueError(f"[train.objectives.{name}]: no objective is registered under this name (known: {', '.join(sorted(OBJECTIVES))})")
    return cls


def needs_frozen_model(config: ObjectivesConfig) -> bool:
    """Whether any objective that trains needs a frozen copy of the starting model."""
    return any(section.needs_frozen() for section in config.active().values())


def build_objectives(config: TrainConfig, model: Any, data: TrainingData, base_dir: Path) -> dict[str, Objective]:
    """The objectives with weight > 0, in config order, each built by its class from its section."""
    return {name: objective_class(name).from_config(section, model, data, base_dir) for name, section in config.objectives.active().items()}


__all__ = [
    "OBJECTIVES",
    "AlignedWordPredictionLoss",
    "BaseRegularizationLoss",
    "Chunk",
    "DuEAMLoss",
    "MultiwaySupConLoss",
    "Objective",
    "RepresentationTranslationLoss",
    "SentenceObjective",
    "Side",
    "TokenObjective",
    "TrainContext",
    "TranslationRankingLoss",
    "WordTranslationRankingLoss",
    "build_objectives",
    "needs_frozen_model",
    "objective_class",
    "register_objective",
]
