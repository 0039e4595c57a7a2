"""Helpers of the translate tests: the tiny model spec, a small English corpus, config builders."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from storage import ArtifactStore
from tasks.stage import run_stage
from tasks.translate import TRANSLATE_STAGE
from tasks.translate.config import TranslateConfig

POOL = ["fra_Latn", "deu_Latn", "spa_Latn", "jpn_Jpan", "zho_Hans", "hin_Deva"]
TINY = {"source": "tiny_random", "tiny": {"seed": 3, "vocab_size": 600, "d_model": 32, "layers": 1, "heads": 2, "ffn_dim": 64}}
NO_FILTERS = {
    "drop_identical": False,
    "repetition_max_ngram": None,
    "min_length_ratio": None,
    "max_length_ratio": None,
    "min_script_share": None,
}

SENTENCES = [
    "The river flows slowly past the old town.",
    "She bought three apples at the market yesterday.",
    "Rain is expected in the mountains tonight.",
    "Our train leaves at seven in the morning.",
    "He has lived in this village for forty years.",
    "The library closes early on Sundays.",
    "Children were playing football in the park.",
    "Please write your name at the top of the page.",
    "The bridge was built more than a century ago.",
    "We watched the sun set over the sea.",
    "A small cat slept on the warm window sill.",
    "The museum opened a new exhibition about ships.",
    "Farmers harvest the rice at the end of summer.",
    "My grandmother tells stories about the war.",
    "The doctor said I should rest for a week.",
    "Fresh bread smells wonderful in the morning.",
    "They painted the kitchen a bright yellow.",
    "The concert was cancelled because of the storm.",
    "Every student needs a pencil and a notebook.",
    "The road to the airport is closed today.",
    "I forgot my umbrella on the bus.",
    "The company hired twenty new engineers.",
    "Birds build their nests in early spring.",
]


@dataclass
class Setup:
    root: Path
    corpus_key: str
    model_key: str

    def store(self, tmp_path: Path) -> ArtifactStore:
        """A private copy of the session store (the model is a few hundred KB)."""
        target = tmp_path / "store"
        shutil.copytree(self.root, target)
        return ArtifactStore(target)

    @property
    def input_keys(self) -> dict[str, str]:
        return {"corpus": self.corpus_key, "translate_model": self.model_key}


def translate_config(**overrides: Any) -> TranslateConfig:
    data: dict[str, Any] = {
        "targets": POOL,
        "shard_rows": 8,
        "max_batch_tokens": 256,
        "decoding": {"beam_size": 2, "max_length_ratio": 0.5, "max_length_extra": 4, "no_repeat_ngram_size": 2},
        "filters": NO_FILTERS,
    }
    data.update(overrides)
    return TranslateConfig.model_validate(data)


def run_translate(store: ArtifactStore, setup: Setup, config: TranslateConfig, allow_empty: bool = False) -> tuple[Any, pa.Table]:
    ref, manifest = run_stage(store, TRANSLATE_STAGE, config, setup.input_keys, allow_empty=allow_empty)
    return manifest, store.read_table("translate", manifest.key)
