"""The train stage through the artifact store: corpus + base model (+ align) in, model dir out."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from storage import ArtifactStore
from tasks.base_model import BASE_MODEL_STAGE
from tasks.base_model.config import BaseModelConfig
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.stage import run_stage
from tasks.tiny_models import LANGS, multiway_rows
from tasks.train import TRAIN_STAGE
from tasks.train.config import TrainConfig
from tasks.train.stage import checkpoint_dir_for


def corpus_and_base_model(tmp_path, tiny_model_dir) -> tuple[ArtifactStore, dict[str, str]]:
    """A store holding a small multi-way corpus and the tiny base model: the train stage's inputs."""
    store = ArtifactStore(tmp_path / "artifacts")
    corpus_rows, _ = multiway_rows(80)
    texts = tmp_path / "texts"
    texts.mkdir()
    for lang in LANGS:
        lines = [r["text"] for r in corpus_rows if r["lang"] == lang]
        (texts / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus_config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "synthetic", "kind": "text", "files": {lang: str(texts / f"{lang}.txt") for lang in LANGS}}],
            "dev_fraction": 0.2,
        }
    )
    corpus_ref, _ = run_stage(store, CORPUS_STAGE, corpus_config, {})
    model_ref, _ = run_stage(store, BASE_MODEL_STAGE, BaseModelConfig(source="local", model=str(tiny_model_dir)), {})
    return store, {"corpus": corpus_ref.key, "base_model": model_ref.key}


def test_train_stage_writes_a_loadable_model_and_curves(tmp_path, tiny_model_dir, monkeypatch):
    store, inputs = corpus_and_base_model(tmp_path, tiny_model_dir)
    config = TrainConfig.model_validate({
        "steps": 3, "batch_size": 8, "max_length": 24, "eval_every": 1, "torch_threads": 1,
        "checkpoint_dir": str(tmp_path / "checkpoints"), "objectives": {"translation_ranking": {"weight": 1.0}},
    })  # fmt: skip
    keyed_views = []  # the keyed config is computed once per run (issue 16), also inside the shard
    original = TrainConfig.keyed_view
    monkeypatch.setattr(TrainConfig, "keyed_view", lambda self, data: keyed_views.append(1) or original(self, data))
    ref, manifest = run_stage(store, TRAIN_STAGE, config, inputs)
    assert len(keyed_views) == 1
    files = {f.path for f in manifest.files}
    assert {"files/model/config.json", "files/model/model.safetensors", "files/model/modules.json",
            "files/model/1_Pooling/config.json", "files/curves.parquet", "files/curves.png", "files/metrics.json"} <= files  # fmt: skip
    assert manifest.metrics["steps"] == 3 and manifest.metrics["dev"]["mean"] >= 0
    local = store.attached_dir("train", ref.key)
    assert pq.read_table(local / "curves.parquet").num_rows > 3
    assert json.loads((local / "metrics.json").read_text())["best_step"] in (1, 2, 3)
    from sentence_transformers import SentenceTransformer

    vectors = SentenceTransformer(str(local / "model"), device="cpu").encode(["the river city 1."])
    assert vectors.shape == (1, 32)
    # the durable checkpoint folder is removed once the artifact is written
    assert checkpoint_dir_for(config, ref.key) == tmp_path / "checkpoints" / ref.key[:24]
    assert not checkpoint_dir_for(config, ref.key).exists()


def test_a_finished_run_leaves_nothing_in_the_cache_it_checkpointed_under(tmp_path, tiny_model_dir, monkeypatch):
    """With no checkpoint_dir set, checkpoints go under $XDG_CACHE_HOME; once the model is
    committed neither the run's folder nor its lock file is left there (lock files used to pile
    up, one per run ever trained)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    store, inputs = corpus_and_base_model(tmp_path, tiny_model_dir)
    config = TrainConfig.model_validate({
        "steps": 2, "batch_size": 8, "max_length": 24, "eval_every": 1, "checkpoint_every": 1, "torch_threads": 1,
        "objectives": {"translation_ranking": {"weight": 1.0}},
    })  # fmt: skip
    ref, _ = run_stage(store, TRAIN_STAGE, config, inputs)
    folder = checkpoint_dir_for(config, ref.key)
    assert folder == cache / "xlembed" / "train-checkpoints" / ref.key[:24]
    assert list(folder.parent.iterdir()) == []  # it was made (iterdir would raise otherwise), and emptied


def test_config_rejects_no_objective_and_unknown_keys():
    with pytest.raises(ValueError, match="every training objective has weight 0"):
        TrainConfig.model_validate({"objectives": {"translation_ranking": {"weight": 0}}})
    with pytest.raises(ValueError, match="base_regularization, base_similarity cannot train alone"):
        TrainConfig.model_validate({"objectives": {"translation_ranking": {"weight": 0}, "base_regularization": {"weight": 1}}})
    with pytest.raises(ValueError, match="Extra inputs"):
        TrainConfig.model_validate({"objectivs": {}})
    with pytest.raises(ValueError, match="must divide"):
        TrainConfig.model_validate({"batch_size": 9, "distributed": {"nproc_per_node": 2}})


def test_distribution_settings_stay_out_of_the_key_at_dropout_zero():
    from tasks.stage_config import keyed_config

    a = TrainConfig.model_validate(
        {"dropout": 0.0, "grad_cache_chunk": 16, "distributed": {"nproc_per_node": 2}, "checkpoint_dir": "/x"}
    )
    b = TrainConfig.model_validate({"dropout": 0.0})
    assert keyed_config(a) == keyed_config(b)


@pytest.mark.parametrize("dropout", [None, 0.1])  # None keeps the model's dropout: 0.1 for BERT, XLM-R and E5
def test_with_dropout_on_the_chunks_and_processes_that_split_the_batch_are_keyed(dropout):
    """Every forward pass draws its own dropout masks, so how the batch is split changes the
    gradients (test_trainer.py measures it): the key holds the split wherever it splits."""
    from tasks.stage_config import keyed_config

    def key(**extra):
        return keyed_config(TrainConfig.model_validate({"dropout": dropout, "batch_size": 64, **extra}))

    plain = key()
    assert key(grad_cache_chunk=16) != plain and key(grad_cache_chunk=16) != key(grad_cache_chunk=8)
    assert key(grad_cache_chunk=16)["grad_cache_chunk"] == 16
    assert key(distributed={"nproc_per_node": 2}) != plain
    assert key(distributed={"nproc_per_node": 2})["distributed"] == {"nproc_per_node": 2}
    # no split, no key change: a chunk of a process's rows or more is one pass; threads, device, backend never matter
    assert key(grad_cache_chunk=64) == key(grad_cache_chunk=500) == plain
    assert key(distributed={"nproc_per_node": 2}, grad_cache_chunk=32) == key(distributed={"nproc_per_node": 2})
    assert key(torch_threads=3, device="cpu", distributed={"backend": "gloo", "timeout_s": 60}, checkpoint_dir="/x") == plain


def test_a_switched_off_objectives_options_stay_out_of_the_key():
    """Sweep variants that differ only in the options of a weight-0 objective share one train artifact."""
    from tasks.stage_config import keyed_config

    plain = TrainConfig.model_validate({})
    inert = TrainConfig.model_validate(
        {"objectives": {"representation_translation": {"weight": 0.0, "target_vocab_only": True, "layers": 4}}}
    )
    assert keyed_config(plain) == keyed_config(inert)
    assert set(keyed_config(plain)["objectives"]) == {"translation_ranking"}
    live = TrainConfig.model_validate({"objectives": {"representation_translation": {"weight": 0.1, "layers": 4}}})
    assert keyed_config(live)["objectives"]["representation_translation"]["layers"] == 4
    assert keyed_config(live) != keyed_config(plain)


def test_a_second_process_with_the_same_run_waits_for_the_checkpoint_folder(tmp_path):
    """Two runs of one config on one machine share `{checkpoint_dir}/{run id}`: the second
    (here another thread, with its own open file, as another process would have) may not enter
    while the first trains, and enters as soon as it is done. (Found when two CI clones ran the
    smoke profile at once: one resumed from a checkpoint the other was replacing.)"""
    import threading

    from tasks.train.stage import exclusive_checkpoints

    folder = tmp_path / "checkpoints" / "run"
    entered = threading.Event()

    def second() -> None:
        with exclusive_checkpoints(folder):
            entered.set()

    with exclusive_checkpoints(folder) as got:
        assert got == folder
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not entered.wait(0.5)  # the lock is held: it cannot be in
    waiter.join(30)
    assert entered.is_set() and not waiter.is_alive()


def test_base_similarity_trains_beside_tr_and_is_logged(tmp_path, tiny_model_dir):
    store, inputs = corpus_and_base_model(tmp_path, tiny_model_dir)
    config = TrainConfig.model_validate({
        "steps": 4, "batch_size": 8, "max_length": 24, "eval_every": 0, "torch_threads": 1, "optimizer": {"lr": 1e-3}, "dropout": 0.0,
        "objectives": {"translation_ranking": {"weight": 1.0}, "base_similarity": {"weight": 100.0}},
    })  # fmt: skip
    ref, _ = run_stage(store, TRAIN_STAGE, config, inputs)
    curves = pq.read_table(store.attached_dir("train", ref.key) / "curves.parquet").to_pylist()
    kept = [row["value"] for row in curves if row["metric"] == "loss/base_similarity"]
    assert len(kept) == 4
    assert kept[0] == pytest.approx(0.0, abs=1e-7)  # step 1 starts from the base (no dropout): nothing changed yet
    assert all(value > 0 for value in kept[1:])  # then TR moves the model and the term pulls back
