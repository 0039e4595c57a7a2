"""`--force` through the plan: a rebuild is a new version beside the current one; a forced rebuild
that fails (a corrupt input) leaves the current version, its ref, `plan` and `verify` as they were."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore, CorruptArtifact
from storage.refs import read_ref
from storage.verify import verify_artifact
from tests.flows.toy_pipeline import actions, build, plan_for


def _files(folder: Path) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_a_forced_rebuild_plans_a_new_version_and_a_rollback_returns_to_the_first(toy_pipeline: dict, toy_stages: dict) -> None:
    config, root = toy_pipeline["config"], toy_pipeline["root"]
    first = build(config, toy_stages)
    store = ArtifactStore(root)
    forced = plan_for(config, toy_stages, force=["lengths"])
    assert forced["lengths"].key != first["lengths"].key and forced["lengths"].rebuild_of == first["lengths"].key
    assert forced["lengths"].attempt == 1 and forced["histogram"].action == "compute"  # its input is the new version
    rebuilt = build(config, toy_stages, force=["lengths"])
    assert rebuilt["lengths"].key == forced["lengths"].key  # the plan's key is the one built (numbered, not random)
    assert store.is_committed("lengths", first["lengths"].key) and verify_artifact(store, "lengths", first["lengths"].key) == []
    assert actions(plan_for(config, toy_stages)) == {"corpus": "cached", "lengths": "cached", "histogram": "cached"}
    assert plan_for(config, toy_stages)["lengths"].key == rebuilt["lengths"].key
    result = CliRunner().invoke(app, ["artifacts", "rollback", "toy", "lengths", "--root", str(root)])
    assert result.exit_code == 0, result.output
    back = plan_for(config, toy_stages)
    assert back["lengths"].key == first["lengths"].key and back["lengths"].action == "cached"
    assert back["histogram"].key == first["histogram"].key


def test_a_forced_rebuild_that_fails_on_a_corrupt_input_keeps_the_current_version(toy_pipeline: dict, toy_stages: dict) -> None:
    config, root = toy_pipeline["config"], toy_pipeline["root"]
    first = build(config, toy_stages)
    store = ArtifactStore(root)
    histogram = Path(store.artifact_dir("histogram", first["histogram"].key))
    before = _files(histogram)
    ref_before = read_ref(store, "toy", "histogram")
    part = (
        Path(store.artifact_dir("lengths", first["lengths"].key))
        / store.manifest("lengths", first["lengths"].key).table_files[0].path
    )
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes: only a hash finds it
    part.write_bytes(bytes(data))
    with pytest.raises(CorruptArtifact):
        build(config, toy_stages, only="histogram", force=["histogram"])
    assert _files(histogram) == before, "the committed histogram was deleted or rewritten before the failure"
    assert read_ref(store, "toy", "histogram") == ref_before
    assert verify_artifact(store, "histogram", first["histogram"].key) == []
    assert plan_for(config, toy_stages, only="histogram")["histogram"].action == "cached"
