"""A small store for the publishing tests: corpus -> base model -> train (-> evaluate), all real
stages on the tiny BERT of the encoder tests (seconds on a CPU)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage import ArtifactStore
from storage.refs import set_ref
from tasks.base_model import BASE_MODEL_STAGE
from tasks.base_model.config import BaseModelConfig
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.evaluate.config import EvaluateConfig
from tasks.evaluate.stage import EVALUATE_STAGE
from tasks.stage import run_stage
from tasks.tiny_models import LANGS, multiway_rows
from tasks.train import TRAIN_STAGE
from tasks.train.config import TrainConfig

PREFIX = "query: "


@dataclass
class PublishStore:
    store: ArtifactStore
    root: Path
    corpus: str
    base_model: str
    train: str
    evaluate: str | None = None


def build_store(
    tmp: Path, model_dir: Path, *, language_embedding: bool = False, evaluate: bool = True, **train: Any
) -> PublishStore:
    store = ArtifactStore(tmp / "artifacts")
    corpus_rows, _ = multiway_rows(60)
    texts = tmp / "texts"
    texts.mkdir(parents=True)
    for lang in LANGS:
        lines = [r["text"] for r in corpus_rows if r["lang"] == lang]
        (texts / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus_config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "synthetic", "kind": "text", "files": {lang: str(texts / f"{lang}.txt") for lang in LANGS}}],
            "dev_fraction": 0.25,
        }
    )
    corpus, _ = run_stage(store, CORPUS_STAGE, corpus_config, {})
    base, _ = run_stage(store, BASE_MODEL_STAGE, BaseModelConfig(source="local", model=str(model_dir)), {})
    config = TrainConfig.model_validate({
        "steps": 2, "batch_size": 8, "max_length": 24, "torch_threads": 1, "prefix": PREFIX, "pooling": "cls",
        "language_embedding": language_embedding, "checkpoint_dir": str(tmp / "checkpoints"),
        "objectives": {"translation_ranking": {"weight": 1.0}, "multiway_supcon": {"weight": 0.5}}, **train,
    })  # fmt: skip
    trained, _ = run_stage(store, TRAIN_STAGE, config, {"corpus": corpus.key, "base_model": base.key})
    set_ref(store, "toy", "corpus", corpus.key)
    set_ref(store, "toy", "train", trained.key)
    built = PublishStore(store, tmp / "artifacts", corpus.key, base.key, trained.key)
    if evaluate:
        built.evaluate = evaluate_model(built)
    return built


def evaluate_model(built: PublishStore, *, max_groups: int | None = None, max_length: int = 40) -> str:
    config = EvaluateConfig.model_validate({
        "encoder": {"prefix": PREFIX, "max_length": max_length, "device": "cpu"}, "groups": [], "word_map_concepts": 0,
        "benchmarks": [{"kind": "corpus_dev", "max_groups": max_groups}],
    })  # fmt: skip
    ref, _ = run_stage(
        built.store, EVALUATE_STAGE, config, {"corpus": built.corpus, "base_model": built.base_model, "train": built.train}
    )
    set_ref(built.store, "toy", "evaluate", ref.key)
    return ref.key
