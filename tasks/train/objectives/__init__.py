"""The training objectives, one per file; `build_objectives` turns the config into modules."""

from __future__ import annotations

from tasks.train.objectives.aligned_word_prediction import AlignedWordPredictionLoss
from tasks.train.objectives.base_regularization import BaseRegularizationLoss
from tasks.train.objectives.base import Chunk, SentenceObjective, Side, TokenObjective, TrainContext
from tasks.train.objectives.dueam_wmd import DuEAMLoss
from tasks.train.objectives.multiway_supcon import MultiwaySupConLoss
from tasks.train.objectives.representation_translation import RepresentationTranslationLoss
from tasks.train.objectives.translation_ranking import TranslationRankingLoss
from tasks.train.objectives.word_translation_ranking import WordTranslationRankingLoss

__all__ = [
    "AlignedWordPredictionLoss",
    "BaseRegularizationLoss",
    "Chunk",
    "DuEAMLoss",
    "MultiwaySupConLoss",
    "RepresentationTranslationLoss",
    "SentenceObjective",
    "Side",
    "TokenObjective",
    "TrainContext",
    "TranslationRankingLoss",
    "WordTranslationRankingLoss",
]
