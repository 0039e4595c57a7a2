"""Session fixtures: one tiny random NLLB model, converted with real CTranslate2, and a small
English corpus, built once in a store that tests copy when they need their own."""

from __future__ import annotations

from pathlib import Path

import pytest
from translate_testing import SENTENCES, TINY, Setup

from storage import ArtifactStore
from tasks.corpus.config import CorpusConfig
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage
from tasks.translate import TRANSLATE_MODEL_STAGE
from tasks.translate.config import TranslateModelConfig


@pytest.fixture(scope="session")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    base = tmp_path_factory.mktemp("translate")
    (base / "en.txt").write_text("".join(s + "\n" for s in SENTENCES), encoding="utf-8")
    (base / "kk.txt").write_text("".join(f"{i} сөйлем\n" for i in range(len(SENTENCES))), encoding="utf-8")
    store = ArtifactStore(base / "store")
    corpus = CorpusConfig.model_validate(
        {
            "sources": [{"name": "mono", "kind": "text", "files": {"en": str(base / "en.txt"), "kk": str(base / "kk.txt")}}],
            "dev_fraction": 0.3,
        }
    )
    _, corpus_manifest = run_stage(store, CORPUS_STAGE, corpus, {})
    _, model_manifest = run_stage(store, TRANSLATE_MODEL_STAGE, TranslateModelConfig.model_validate(TINY), {})
    return Setup(base / "store", corpus_manifest.key, model_manifest.key)


@pytest.fixture(scope="session")
def model_dir(setup: Setup) -> Path:
    return ArtifactStore(setup.root).attached_dir("translate_model", setup.model_key)
