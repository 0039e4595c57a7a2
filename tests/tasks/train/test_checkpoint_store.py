"""Checkpoints under the artifact root (`checkpoint_location = "store"`): a train run killed on one
machine resumes on another from the store's checkpoint (moto's S3 server), exactly; uploads
write `latest.json` last, so a kill mid-upload leaves the previous checkpoint whole."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from storage import ArtifactStore
from storage.checkpoint_files import CheckpointFiles
from tasks.base_model import BASE_MODEL_STAGE
from tasks.base_model.config import BaseModelConfig
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.stage import run_stage, stage_key
from tasks.stage_config import keyed_config
from tasks.tiny_models import LANGS, multiway_rows
from tasks.train import TRAIN_STAGE
from tasks.train import checkpoint as ckpt
from tasks.train.config import TrainConfig
from tasks.train.trainer import Trainer, TrainingStopped, TrainInputs
from tests.storage.conftest import S3Server, s3_server  # noqa: F401 - the moto fixture, shared


def train_config(checkpoint_dir: Path, **overrides) -> TrainConfig:
    base = {"steps": 4, "batch_size": 8, "max_length": 24, "eval_every": 2, "checkpoint_every": 2, "dropout": 0.1,
            "optimizer": {"lr": 1e-3}, "seed": 5, "torch_threads": 1, "checkpoint_dir": str(checkpoint_dir),
            "objectives": {"translation_ranking": {"weight": 1.0}, "word_translation_ranking": {"weight": 0.5}}}  # fmt: skip
    base.update(overrides)
    return TrainConfig.model_validate(base)


def upstream(store: ArtifactStore, tmp_path: Path, tiny_model_dir: Path) -> dict[str, str]:
    """The corpus and base model artifacts the train stage reads; their keys."""
    corpus_rows, _ = multiway_rows(60)
    texts = tmp_path / "texts"
    texts.mkdir(exist_ok=True)
    for lang in LANGS:
        (texts / f"{lang}.txt").write_text(
            "\n".join(r["text"] for r in corpus_rows if r["lang"] == lang) + "\n", encoding="utf-8"
        )
    corpus = CorpusConfig.model_validate(
        {
            "sources": [{"name": "synthetic", "kind": "text", "files": {lang: str(texts / f"{lang}.txt") for lang in LANGS}}],
            "dev_fraction": 0.2,
        }
    )
    corpus_ref, _ = run_stage(store, CORPUS_STAGE, corpus, {})
    model_ref, _ = run_stage(store, BASE_MODEL_STAGE, BaseModelConfig(source="local", model=str(tiny_model_dir)), {})
    return {"corpus": corpus_ref.key, "base_model": model_ref.key}


def model_tensors(store: ArtifactStore, key: str) -> dict[str, torch.Tensor]:
    return load_file(str(store.attached_dir("train", key) / "model" / "model.safetensors"))


def test_the_location_stays_out_of_the_key():
    assert keyed_config(TrainConfig.model_validate({"checkpoint_location": "store"})) == keyed_config(TrainConfig())
    with pytest.raises(ValueError, match="checkpoint_location"):
        TrainConfig.model_validate({"checkpoint_location": "s3"})


@pytest.mark.slow
def test_a_run_killed_on_one_machine_resumes_on_another_from_s3_exactly(
    s3_server: S3Server,  # noqa: F811 - the fixture imported above, by name
    tmp_path,
    tiny_model_dir,
    caplog,
    monkeypatch,
):
    """Machine A trains to step 3 of 4 and dies (its checkpoint at step 2 is in S3); machine B,
    with no local checkpoints, resumes from S3 and commits the same weights as a run that was
    never killed; the store's checkpoints are gone once the artifact is committed."""
    import s3fs

    monkeypatch.setenv("TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    s3fs.S3FileSystem.clear_instance_cache()
    store = ArtifactStore(f"s3://{s3_server.bucket}/ckpt-{time.time_ns()}")
    inputs = upstream(store, tmp_path, tiny_model_dir)
    machine_a, machine_b = tmp_path / "machine-a", tmp_path / "machine-b"
    config = train_config(machine_a, checkpoint_location="store")
    key = stage_key(TRAIN_STAGE, config, inputs, {})
    remote = CheckpointFiles(store, "train", key)

    with pytest.raises(TrainingStopped):
        run_stage(store, TRAIN_STAGE, config.model_copy(update={"stop_after": 3}), inputs)
    assert json.loads(remote.read("latest.json")) == {"checkpoint": "step-00000002", "step": 2}
    assert {"step-00000002/model.safetensors", "step-00000002/optimizer.safetensors", "step-00000002/state.json",
            "best-model.safetensors"} <= set(remote.names())  # fmt: skip
    assert not store.is_committed("train", key)
    assert not [
        n for n in remote.names() if s3_server.secret.encode() in remote.read(n) or s3_server.key_id.encode() in remote.read(n)
    ]
    shutil.rmtree(machine_a)  # the machine is gone, and its disk with it

    caplog.set_level(logging.INFO, logger="tasks.train")
    resumed_config = train_config(machine_b, checkpoint_location="store")
    ref, manifest = run_stage(store, TRAIN_STAGE, resumed_config, inputs)
    assert ref.key == key
    assert "restored the checkpoint at step 2 from s3://" in caplog.text
    assert "resuming from" in caplog.text and "(step 2)" in caplog.text
    assert remote.names() == [] and store.stages() == ["base_model", "corpus", "train"]
    assert s3_server.secret not in caplog.text and s3_server.key_id not in caplog.text

    never_killed = ArtifactStore(tmp_path / "local-root")
    local_inputs = upstream(never_killed, tmp_path, tiny_model_dir)
    assert local_inputs == inputs  # content keys: the same artifacts on another root
    full_ref, full_manifest = run_stage(never_killed, TRAIN_STAGE, train_config(tmp_path / "machine-c"), local_inputs)
    a, b = model_tensors(store, ref.key), model_tensors(never_killed, full_ref.key)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert manifest.metrics["final_losses"] == full_manifest.metrics["final_losses"]
    assert manifest.metrics["best_step"] == full_manifest.metrics["best_step"]


@pytest.fixture(scope="module")
def train_inputs(tiny_model_dir, corpus_table, alignment_table) -> TrainInputs:
    return TrainInputs(corpus_table, alignment_table, tiny_model_dir)


def remote_files(root: Path, key: str = "a" * 64) -> ckpt.StoreCheckpoints:
    return CheckpointFiles(ArtifactStore(root), "train", key)


@pytest.mark.slow
def test_a_kill_mid_upload_leaves_the_previous_store_checkpoint_whole(train_inputs, tmp_path, caplog):
    """The upload of step 4 fails after its first file: `latest.json` still names step 2, whose
    folder is whole, and a fresh machine resumes from it; training went on with a warning."""
    files = remote_files(tmp_path / "root")
    put = files.put
    calls: list[str] = []

    def put_failing_at_step_4(local: Path, name: str) -> None:
        calls.append(name)
        if name.startswith("step-00000004/") and len([c for c in calls if c.startswith("step-00000004/")]) > 1:
            raise ConnectionError("the machine was preempted")
        put(local, name)

    files.put = put_failing_at_step_4  # type: ignore[method-assign]
    cfg = train_config(tmp_path / "a", steps=6)
    mirror = ckpt.StoreCheckpoints(files, tmp_path / "a")
    with caplog.at_level(logging.WARNING, logger="tasks.train.checkpoint"), pytest.raises(TrainingStopped):
        try:
            Trainer(cfg.model_copy(update={"stop_after": 5}), train_inputs).run(
                tmp_path / "a-out", tmp_path / "a", on_checkpoint=mirror.upload
            )
        finally:
            mirror.close()
    assert (
        "could not upload the checkpoint at step 4" in caplog.text and "ConnectionError: the machine was preempted" in caplog.text
    )
    assert json.loads(files.read("latest.json"))["step"] == 2
    assert {n.split("/")[0] for n in files.names() if n.startswith("step-")} == {"step-00000002", "step-00000004"}
    assert json.loads((tmp_path / "a" / "latest.json").read_text())["step"] == 4  # the local one went on

    fresh = ckpt.StoreCheckpoints(remote_files(tmp_path / "root"), tmp_path / "b")
    assert fresh.restore() == 2
    state = json.loads((tmp_path / "b" / "step-00000002" / "state.json").read_text())
    assert state["step"] == 2 and ckpt.latest_checkpoint(tmp_path / "b") == tmp_path / "b" / "step-00000002"

    resumed = Trainer(cfg, train_inputs)
    resumed.run(tmp_path / "b-out", tmp_path / "b")
    full = Trainer(cfg, train_inputs)
    full.run(tmp_path / "c-out", tmp_path / "c")
    a, b = resumed.module.state_dict(), full.module.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_background_uploads_send_each_checkpoint_whole_while_the_trainer_deletes_old_ones(train_inputs, tmp_path):
    """checkpoint_every = 1 with a slow store: the trainer removes step n's local folder while
    step n's upload is still going; the upload sends the files of step n (hard links), and the
    store ends with the last checkpoint only, byte for byte the local one."""
    files = remote_files(tmp_path / "root")
    put = files.put

    def slow_put(local: Path, name: str) -> None:
        time.sleep(0.05)
        put(local, name)

    files.put = slow_put  # type: ignore[method-assign]
    mirror = ckpt.StoreCheckpoints(files, tmp_path / "ckpt")
    local = tmp_path / "ckpt"
    try:
        Trainer(train_config(local, checkpoint_every=1, eval_every=1), train_inputs).run(
            tmp_path / "out", local, on_checkpoint=mirror.upload
        )
    finally:
        mirror.close()
    assert len(mirror.upload_seconds) == 4 and mirror.failures == 0
    assert json.loads(files.read("latest.json")) == {"checkpoint": "step-00000004", "step": 4}
    names = files.names()
    assert {n.split("/")[0] for n in names if n.startswith("step-")} == {"step-00000004"}
    for path in sorted((local / "step-00000004").iterdir()):
        assert files.read(f"step-00000004/{path.name}") == path.read_bytes(), path.name
    assert files.read("best-model.safetensors") == (local / "best-model.safetensors").read_bytes()
    assert any(n.startswith("tensorboard/events.out.tfevents.") for n in names)
    assert not (local / ckpt.UPLOAD_STAGING).exists()


@pytest.mark.slow
def test_restore_takes_the_later_of_the_local_and_the_store_checkpoint(train_inputs, tmp_path):
    cfg = train_config(tmp_path / "x", steps=4, eval_every=0)
    files = remote_files(tmp_path / "root")
    mirror = ckpt.StoreCheckpoints(files, tmp_path / "ahead", background=False)
    assert mirror.restore() is None  # nothing in the store yet
    Trainer(cfg, train_inputs).run(tmp_path / "o1", tmp_path / "ahead", on_checkpoint=mirror.upload)
    assert json.loads(files.read("latest.json"))["step"] == 4

    behind = tmp_path / "behind"  # a machine whose own checkpoint (step 2) is older than the store's
    with pytest.raises(TrainingStopped):
        Trainer(cfg.model_copy(update={"stop_after": 2}), train_inputs).run(tmp_path / "o2", behind)
    assert ckpt.StoreCheckpoints(files, behind).restore() == 4
    assert ckpt.latest_checkpoint(behind) == behind / "step-00000004" and not (behind / "step-00000002").exists()
    assert (behind / ckpt.BEST_MODEL).read_bytes() == files.read(ckpt.BEST_MODEL)

    stale = tmp_path / "stale"  # best weights of its own, but the store has none: they go
    stale.mkdir()
    (stale / ckpt.BEST_MODEL).write_bytes(b"not these")
    files.remove(ckpt.BEST_MODEL)
    assert ckpt.StoreCheckpoints(files, stale).restore() == 4
    assert not (stale / ckpt.BEST_MODEL).exists()

    assert ckpt.StoreCheckpoints(files, tmp_path / "ahead").restore() is None  # local is as far: nothing downloaded


def test_a_store_pointer_to_an_incomplete_folder_is_not_resumed_from(tmp_path, caplog):
    files = remote_files(tmp_path / "root")
    files.write("step-00000008/model.safetensors", b"x")
    files.write("latest.json", json.dumps({"checkpoint": "step-00000008", "step": 8}).encode())
    with caplog.at_level(logging.WARNING, logger="tasks.train.checkpoint"):
        assert ckpt.StoreCheckpoints(files, tmp_path / "local").restore() is None
    assert "step-00000008, which is incomplete there" in caplog.text
    files.write("latest.json", b"{not json")
    with pytest.raises(ValueError, match=r"_checkpoints/train/a{64}/latest\.json: not a checkpoint pointer"):
        ckpt.StoreCheckpoints(files, tmp_path / "local").restore()


@pytest.mark.slow
def test_torchrun_workers_upload_from_rank_0(tmp_path, tiny_model_dir, corpus_table, alignment_table):
    """With several processes the checkpoints are written by rank 0 inside torchrun: the spec
    names the store and key, and rank 0 uploads each one before it exits."""
    import pyarrow.parquet as pq

    from tasks.train.launch import launch

    cfg = train_config(
        tmp_path / "ckpt", steps=2, eval_every=0, checkpoint_every=1, distributed={"nproc_per_node": 2, "backend": "gloo"}
    )
    pq.write_table(corpus_table, tmp_path / "corpus.parquet")
    spec = {"config": cfg.model_dump(mode="json"), "corpus": str(tmp_path / "corpus.parquet"), "alignments": None,
            "base_dir": str(tiny_model_dir), "out_dir": str(tmp_path / "out"), "checkpoint_dir": str(tmp_path / "ckpt"),
            "checkpoint_store": {"root": str(tmp_path / "root"), "stage": "train", "key": "f" * 64}}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    launch(tmp_path / "spec.json", nproc=2, timeout_s=300)
    files = remote_files(tmp_path / "root", "f" * 64)
    assert json.loads(files.read("latest.json")) == {"checkpoint": "step-00000002", "step": 2}
    local = tmp_path / "ckpt" / "step-00000002"
    assert files.read("step-00000002/model.safetensors") == (local / "model.safetensors").read_bytes()
    assert files.read("step-00000002/state.json") == (local / "state.json").read_bytes()
