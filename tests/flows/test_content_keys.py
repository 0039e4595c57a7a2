"""Content keys (key scheme 2): local inputs are keyed by their bytes, not their paths or mtimes.

On the toy pipeline (corpus -> lengths -> histogram): touching the sources, copying them
elsewhere, a second clone of the project with its own copy of the data, and a second root
pulled from S3 on "another machine" all plan as cached; a one-byte edit plans as compute and
names the file; artifacts from before the scheme are announced once as rebuilt; the nightly
rebuild (the `xlembed-rebuild` deployment's flow, on a real Prefect server) computes nothing
after the sources are re-copied.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.config import load_config
from flows.plan import make_plan
from storage import ArtifactStore
from storage.keys import KEY_SCHEME
from storage.refs import set_ref
from tests.flows.toy_pipeline import actions, build, plan_for, write_config, write_corpus_text


def copy_data(source: dict[str, Path], folder: Path) -> dict[str, Path]:
    """A fresh copy (new inodes and mtimes, as a checkout or an rsync without -t makes)."""
    folder.mkdir(parents=True, exist_ok=True)
    copies = {}
    for lang, path in source.items():
        copies[lang] = folder / path.name
        shutil.copyfile(path, copies[lang])
    return copies


def test_touch_keeps_every_stage_cached(toy_pipeline: dict, toy_stages: dict) -> None:
    first = build(toy_pipeline["config"], toy_stages)
    later = time.time() + 60
    for path in toy_pipeline["text"].values():
        os.utime(path, (later, later))
    plan = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(plan) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}
    assert {s.key for s in plan.values()} == {s.key for s in first.values()}


def test_same_bytes_at_another_path_share_the_artifact(toy_pipeline: dict, toy_stages: dict) -> None:
    first = build(toy_pipeline["config"], toy_stages)
    moved = copy_data(toy_pipeline["text"], toy_pipeline["tmp"] / "elsewhere" / "deeper")
    other = write_config(toy_pipeline["tmp"] / "other.toml", toy_pipeline["root"], moved)
    plan = plan_for(other, toy_stages)
    assert actions(plan) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}
    assert plan["corpus"].key == first["corpus"].key
    # the manifest keeps where the first build read its sources (lineage), outside the key
    manifest = ArtifactStore(toy_pipeline["root"]).manifest("corpus", first["corpus"].key)
    assert manifest.key_scheme == KEY_SCHEME
    assert manifest.locations == {"sources[0].files": {lang: str(p) for lang, p in toy_pipeline["text"].items()}}
    assert "files" not in json.dumps(manifest.config)
    assert set(manifest.source_fingerprints["pairs"]) == {"en", "kk"}


def test_another_clone_of_the_project_on_the_same_data(tmp_path: Path, toy_stages: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two checkouts, each with its own copy of the data under a relative path, one artifact root."""
    root = tmp_path / "artifacts"
    clone_a, clone_b = tmp_path / "clone-a", tmp_path / "clone-b"
    text = write_corpus_text(clone_a / "data")
    relative = {lang: Path("data") / p.name for lang, p in text.items()}
    write_config(clone_a / "toy.toml", root, relative)
    monkeypatch.chdir(clone_a)
    first = build(clone_a / "toy.toml", toy_stages)
    copy_data(text, clone_b / "data")
    shutil.copyfile(clone_a / "toy.toml", clone_b / "toy.toml")
    monkeypatch.chdir(clone_b)
    plan = plan_for(clone_b / "toy.toml", toy_stages)
    assert actions(plan) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}
    assert {s.key for s in plan.values()} == {s.key for s in first.values()}


def test_one_byte_edit_recomputes_and_names_the_file(toy_pipeline: dict, toy_stages: dict) -> None:
    build(toy_pipeline["config"], toy_stages)
    kk = toy_pipeline["text"]["kk"]
    data = bytearray(kk.read_bytes())
    data[0] = ord("7") if data[0] != ord("7") else ord("8")  # same size
    stat = kk.stat()
    kk.write_bytes(bytes(data))
    os.utime(kk, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old mtime
    plan = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(plan) == {"corpus": "compute", "lengths": "compute", "histogram": "compute"}
    assert plan["corpus"].reasons == [f"source pairs.kk: {kk.resolve()} changed"]


def test_old_scheme_artifacts_are_announced_once(toy_pipeline: dict, toy_stages: dict) -> None:
    """Artifacts whose manifests predate key scheme 2 are rebuilt, and the plan says so once."""
    first = build(toy_pipeline["config"], toy_stages)
    store = ArtifactStore(toy_pipeline["root"])
    for name, step in first.items():  # what a pipeline built before content keys looks like
        path = Path(store.artifact_dir(name, step.key)) / "manifest.json"
        manifest = json.loads(path.read_text())
        del manifest["key_scheme"], manifest["locations"]
        old_key = "0" * 63 + str(len(name) % 10)
        manifest["key"] = old_key
        target = Path(store.artifact_dir(name, old_key))
        shutil.copytree(Path(store.artifact_dir(name, step.key)), target)
        (target / "manifest.json").write_text(json.dumps(manifest))
        shutil.rmtree(Path(store.artifact_dir(name, step.key)))
        set_ref(store, "toy", name, old_key)
    plan = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(plan) == {"corpus": "compute", "lengths": "compute", "histogram": "compute"}
    assert plan["corpus"].reasons == ["key scheme v1 -> v2 (content keys)"]
    notes = make_plan(load_config(toy_pipeline["config"]), store, toy_stages).notes()
    assert (
        notes[0]
        == "key scheme v2 (content keys): 3 artifacts built under the old scheme will be rebuilt (once; see docs/operations.md, 'Content keys')"
    )
    build(toy_pipeline["config"], toy_stages)
    again = plan_for(toy_pipeline["config"], toy_stages)
    assert actions(again) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}


def test_plan_reports_what_hashing_cost(toy_pipeline: dict, toy_stages: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from storage import content_hash

    monkeypatch.setattr(content_hash, "RACY_NS", 0)  # files written a moment ago count as settled
    config = load_config(toy_pipeline["config"])
    store = ArtifactStore(config.settings.root)
    first = make_plan(config, store, toy_stages)
    assert first.hashing.hashed_files == 2 and first.hashing.from_index == 0
    assert first.notes()[-1].startswith("hashed 2 files (0.0 MB) in ")
    second = make_plan(config, store, toy_stages)
    assert second.hashing.hashed_files == 0 and second.hashing.from_index == 2
    assert second.notes() == ["hashed 0 files (0.0 MB) in 0.00 s; 2 unchanged from the index"]


# ------------------------------------------------------------------ another machine, via S3


@pytest.fixture
def s3_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An S3 prefix on moto's server (127.0.0.1), found through the standard AWS variables."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    s3fs.S3FileSystem.clear_instance_cache()
    boto3.client("s3").create_bucket(Bucket="xlembed-keys")
    try:
        yield f"s3://xlembed-keys/{uuid.uuid4().hex}"
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()


@pytest.mark.slow
def test_a_root_pulled_from_s3_on_another_machine_is_cached(
    toy_pipeline: dict, toy_stages: dict, s3_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from storage.transfer import copy_artifact, copy_refs

    first = build(toy_pipeline["config"], toy_stages)
    here = ArtifactStore(toy_pipeline["root"])
    remote = ArtifactStore(s3_root)
    for manifest in here.list_manifests():  # xlembed artifacts push
        copy_artifact(here, remote, manifest.stage, manifest.key)
    copy_refs(here, remote)

    # the other machine: its own copy of the data at another path, its own hash index and root
    machine = toy_pipeline["tmp"] / "machine-b"
    monkeypatch.setenv("XLEMBED_HASH_INDEX", str(machine / "cache" / "hash-index.sqlite"))
    text = copy_data(toy_pipeline["text"], machine / "home" / "data")
    config = write_config(machine / "toy.toml", machine / "artifacts", text)
    there = ArtifactStore(machine / "artifacts")
    for manifest in remote.list_manifests():  # xlembed artifacts pull
        copy_artifact(remote, there, manifest.stage, manifest.key)
    copy_refs(remote, there)
    plan = plan_for(config, toy_stages)
    assert actions(plan) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}
    assert {s.key for s in plan.values()} == {s.key for s in first.values()}
    assert (machine / "cache" / "hash-index.sqlite").exists()


# ------------------------------------------------------------------ the scheduled rebuild


@pytest.mark.slow
def test_scheduled_rebuild_on_recopied_sources_computes_nothing(toy_pipeline: dict, prefect_server: None) -> None:
    """The `xlembed-rebuild` deployment's flow, run twice on a real Prefect server with the
    sources copied afresh in between: the second run builds no shard and commits nothing."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.deployments import DeploymentSpec, deployment_flow

    params = DeploymentSpec(config_path=str(toy_pipeline["config"].resolve())).parameters()

    def task_names(state) -> set[str]:
        run_id = state.state_details.flow_run_id
        with get_client(sync_client=True) as client:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
        return {run.name for run in runs}

    first = deployment_flow(**params, return_state=True)
    keys = first.result()
    assert sorted(keys) == ["corpus", "histogram", "lengths"]
    assert any(name.startswith("corpus:") for name in task_names(first))
    store = ArtifactStore(toy_pipeline["root"])
    created = {stage: store.manifest(stage, key).created_at for stage, key in keys.items()}

    for path in toy_pipeline["text"].values():  # re-copied: new inode and mtime, same bytes
        copy = path.with_name(path.name + ".new")
        shutil.copyfile(path, copy)
        os.replace(copy, path)
    second = deployment_flow(**params, return_state=True)
    assert second.result() == keys
    assert task_names(second) == set(), "the rebuild ran tasks on unchanged data"
    assert {stage: store.manifest(stage, key).created_at for stage, key in keys.items()} == created
