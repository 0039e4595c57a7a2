"""A build's checkpoint files under the root (`{root}/_checkpoints/{stage}/{key}/`), locally and on S3."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import ArtifactStore
from storage.checkpoint_files import CheckpointFiles


def test_files_round_trip_by_relative_name(store: ArtifactStore, tmp_path: Path):
    files = CheckpointFiles(store, "train", "b" * 64)
    assert files.uri == f"{store.root_uri}/_checkpoints/train/{'b' * 64}"
    assert files.read("latest.json") is None and files.names() == []
    local = tmp_path / "weights.bin"
    local.write_bytes(b"\x00\x01" * 1000)
    files.put(local, "step-00000002/model.safetensors")
    files.write("latest.json", b'{"step": 2}')
    assert files.names() == ["latest.json", "step-00000002/model.safetensors"]
    assert files.names("step-00000002") == ["step-00000002/model.safetensors"]
    files.get("step-00000002/model.safetensors", tmp_path / "back" / "model.safetensors")
    assert (tmp_path / "back" / "model.safetensors").read_bytes() == local.read_bytes()
    assert files.read("latest.json") == b'{"step": 2}'
    files.remove("step-00000002")
    assert files.names() == ["latest.json"]
    files.remove()
    assert files.names() == [] and files.read("latest.json") is None


@pytest.mark.slow
def test_commit_removes_the_artifacts_checkpoints_only(store: ArtifactStore, kit):
    manifest = kit.build(store, "train", {"steps": 4}, commit=False)
    mine, other = CheckpointFiles(store, "train", manifest.key), CheckpointFiles(store, "train", "c" * 64)
    mine.write("latest.json", b"{}")
    other.write("latest.json", b"{}")
    store.commit(manifest)
    assert mine.names() == [] and other.names() == ["latest.json"]
    assert store.stages() == ["train"]  # the checkpoints folder is no stage
    assert [m.key for m in store.list_manifests()] == [manifest.key]


@pytest.mark.parametrize("name", ["", "../x", "a/../../x", "/abs", "step-*/x", "a\\b", "./x", "a//b", "a/"])
def test_names_that_could_leave_the_folder_or_glob_are_refused(tmp_path: Path, name: str):
    files = CheckpointFiles(ArtifactStore(tmp_path / "root"), "train", "d" * 64)
    with pytest.raises(ValueError, match="checkpoint file name"):
        files.write(name, b"x")


def test_stage_and_key_are_checked(tmp_path: Path):
    from storage import InvalidNameError

    store = ArtifactStore(tmp_path / "root")
    with pytest.raises(InvalidNameError):
        CheckpointFiles(store, "train", "../" + "e" * 61)
    with pytest.raises(InvalidNameError):
        CheckpointFiles(store, "refs", "e" * 64)
