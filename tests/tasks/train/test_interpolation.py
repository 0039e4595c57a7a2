"""WiSE-FT without retraining (issue 39): a train config whose only change is `interpolation`
trains nothing, is its own keyed artifact, and exports exactly alpha * trained + (1 - alpha) * base."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from tasks.stage import run_stage
from tasks.train import TRAIN_STAGE
from tasks.train import trainer as trainer_module
from tasks.train.config import TrainConfig
from tasks.train.interpolation import base_weights
from tests.tasks.train.test_stage import corpus_and_base_model


def train_config(tmp_path, **overrides) -> TrainConfig:
    values = {
        "steps": 3, "batch_size": 8, "max_length": 24, "eval_every": 0, "torch_threads": 1, "dropout": 0.0,
        "optimizer": {"lr": 1e-3}, "checkpoint_dir": str(tmp_path / "checkpoints"),
        "objectives": {"translation_ranking": {"weight": 1.0}},
    }  # fmt: skip
    return TrainConfig.model_validate(values | overrides)


@pytest.fixture
def counted_trainings(monkeypatch):
    """How many times the trainer ran."""
    runs: list[float] = []
    original = trainer_module.Trainer.run

    def counting(self, *args, **kwargs):
        runs.append(self.config.interpolation)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(trainer_module.Trainer, "run", counting)
    return runs


def test_changing_only_alpha_trains_once_and_exports_the_formula_bit_for_bit(tmp_path, tiny_model_dir, counted_trainings):
    store, inputs = corpus_and_base_model(tmp_path, tiny_model_dir)
    trained_ref, _ = run_stage(store, TRAIN_STAGE, train_config(tmp_path), inputs)
    assert counted_trainings == [1.0]
    trained_dir = store.attached_dir("train", trained_ref.key)
    trained = load_file(str(trained_dir / "model" / "model.safetensors"))
    base = {name: tensor.numpy() for name, tensor in base_weights(store.attached_dir("base_model", inputs["base_model"])).items()}

    keys = {trained_ref.key}
    for alpha in (0.5, 0.25):
        ref, manifest = run_stage(store, TRAIN_STAGE, train_config(tmp_path, interpolation=alpha), inputs)
        assert counted_trainings == [1.0], "changing only alpha must not train again"
        assert ref.key not in keys  # each alpha is its own artifact
        keys.add(ref.key)
        assert manifest.metrics["trained_artifact"] == trained_ref.key and manifest.metrics["interpolation"] == alpha
        folder = store.attached_dir("train", ref.key)
        mixed = load_file(str(folder / "model" / "model.safetensors"))
        assert set(mixed) == set(trained)
        moved = 0
        for name, tensor in trained.items():
            expected = np.float32(alpha) * tensor + np.float32(1.0 - alpha) * base[name].astype(np.float32)
            assert mixed[name].dtype == tensor.dtype
            assert np.array_equal(mixed[name], expected), name  # bit for bit, not approximately
            moved += not np.array_equal(tensor, base[name])
        assert moved, "training moved no tensor: the test would prove nothing"
        assert json.loads((folder / "metrics.json").read_text())["trained_artifact"] == trained_ref.key
        assert (folder / "curves.parquet").is_file()


def test_an_alpha_first_trains_its_trained_weights_as_their_own_artifact(tmp_path, tiny_model_dir, counted_trainings):
    store, inputs = corpus_and_base_model(tmp_path, tiny_model_dir)
    ref, manifest = run_stage(store, TRAIN_STAGE, train_config(tmp_path, interpolation=0.5), inputs)
    assert counted_trainings == [1.0]  # the trainer ran on the alpha = 1.0 config only
    trained_ref, trained_manifest = run_stage(store, TRAIN_STAGE, train_config(tmp_path), inputs)
    assert counted_trainings == [1.0]  # cached: built on the way to the interpolated artifact
    assert manifest.metrics["trained_artifact"] == trained_ref.key
    assert "trained_artifact" not in trained_manifest.metrics
    from sentence_transformers import SentenceTransformer

    vectors = SentenceTransformer(str(store.attached_dir("train", ref.key) / "model"), device="cpu").encode(["the river city 1."])
    assert vectors.shape == (1, 32)


def test_alpha_stays_in_the_key_and_alpha_one_keeps_the_key_it_had():
    plain = TrainConfig.model_validate({"objectives": {"translation_ranking": {"weight": 1.0}}})
    explicit = TrainConfig.model_validate({"objectives": {"translation_ranking": {"weight": 1.0}}, "interpolation": 1.0})
    half = TrainConfig.model_validate({"objectives": {"translation_ranking": {"weight": 1.0}}, "interpolation": 0.5})
    from tasks.stage_config import keyed_config

    assert keyed_config(plain) == keyed_config(explicit) != keyed_config(half)
