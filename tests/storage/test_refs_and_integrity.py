"""Committed artifacts are never modified, refs move by compare-and-swap, and refs copied between
stores fast-forward, keep what is ahead, refuse divergence and never drop history (local and S3)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import AlreadyCommitted, ArtifactStore, RefConflict
from storage.keys import attempt_key
from storage.refs import copy_refs, current_version, next_attempt, read_ref, relation, set_ref
from storage.verify import verify_artifact


def test_a_committed_artifact_refuses_every_write(store: ArtifactStore, kit: Any, tmp_path: Path) -> None:
    committed = kit.build(store, rows=5)
    before = {f.path: f.sha256 for f in committed.files}
    with pytest.raises(AlreadyCommitted):
        store.write_shard_files("embed", committed.key, "s0", [kit.table(100, 3)], kit.schema)
    attached = tmp_path / "metrics.json"
    attached.write_text("{}")
    with pytest.raises(AlreadyCommitted):
        store.write_attached_files("embed", committed.key, {"metrics.json": attached})
    with pytest.raises(AlreadyCommitted):
        store.commit_shard("embed", committed.key, store.completed_shard("embed", committed.key, "s0"))
    assert verify_artifact(store, "embed", committed.key) == []
    assert {f.path: f.sha256 for f in store.manifest("embed", committed.key).files} == before


@pytest.mark.slow
def test_set_ref_with_a_stale_expected_key_fails_and_leaves_the_ref(store: ArtifactStore, kit: Any) -> None:
    a, b, c = (kit.build(store, config={"v": i}) for i in range(3))
    set_ref(store, "demo", "embed", a.key, expected=None)
    set_ref(store, "demo", "embed", b.key, expected=a.key)
    with pytest.raises(RefConflict) as caught:
        set_ref(store, "demo", "embed", c.key, expected=a.key)  # it moved to b meanwhile
    assert a.key[:12] in str(caught.value) and b.key[:12] in str(caught.value) and c.key[:12] in str(caught.value)
    assert read_ref(store, "demo", "embed").key == b.key
    # asking for the value it already has is not a conflict (two runs of one config)
    assert set_ref(store, "demo", "embed", b.key, expected=a.key).key == b.key
    with pytest.raises(RefConflict):
        set_ref(store, "demo", "embed", c.key, expected=None)  # "create" when it exists


@pytest.mark.slow
def test_concurrent_ref_updates_lose_no_version(store: ArtifactStore, kit: Any) -> None:
    versions = [kit.build(store, config={"v": i}).key for i in range(6)]
    barrier = threading.Barrier(len(versions))
    errors: list[BaseException] = []

    def move(key: str) -> None:
        try:
            barrier.wait()
            set_ref(store, "demo", "embed", key)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=move, args=(key,)) for key in versions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    ref = read_ref(store, "demo", "embed")
    assert sorted(h.key for h in ref.history) == sorted(versions), "an update was lost: last writer silently won"
    assert ref.history[0].key == ref.key


@pytest.mark.slow
def test_rebuild_keys_and_the_version_a_ref_chose(store: ArtifactStore, kit: Any) -> None:
    first = kit.build(store, config={"v": 1})
    set_ref(store, "demo", "embed", first.key)
    key, attempt = next_attempt(store, "embed", first.key)
    assert (key, attempt) == (attempt_key(first.key, 1), 1) and key != first.key
    rebuild = kit.manifest("embed", key, {"v": 1}, kit.write(store, "embed", key, 4)).model_copy(
        update={"rebuild_of": first.key, "attempt": 1}
    )
    store.commit(rebuild)
    assert next_attempt(store, "embed", first.key)[1] == 2
    assert current_version(store, "demo", "embed", first.key) == first.key  # the ref has not moved
    set_ref(store, "demo", "embed", key, expected=first.key)
    assert read_ref(store, "demo", "embed").history[0].config_key == first.key
    assert current_version(store, "demo", "embed", first.key) == key
    assert current_version(store, "other", "embed", first.key) == first.key  # another pipeline keeps the first build
    set_ref(store, "demo", "embed", first.key, note="rollback")
    assert current_version(store, "demo", "embed", first.key) == first.key


def _refs(store: ArtifactStore, kit: Any, keys: list[str]) -> None:
    for key in keys:
        set_ref(store, "demo", "embed", key)


@pytest.mark.slow
def test_copy_refs_fast_forwards_keeps_what_is_ahead_and_refuses_divergence(local_root: str, s3_root: str, kit: Any) -> None:
    local, remote = ArtifactStore(local_root), ArtifactStore(s3_root)
    keys = [kit.build(local, config={"v": i}).key for i in range(4)]
    for key in keys:
        kit.build(remote, config={"v": keys.index(key)})
    _refs(local, kit, keys[:2])
    assert copy_refs(local, remote).written  # created
    behind = ArtifactStore(str(Path(local_root).parent / "behind"))  # a copy taken now, which local then leaves behind
    for i in range(4):
        kit.build(behind, config={"v": i})
    assert copy_refs(local, behind).written
    _refs(local, kit, keys[2:3])  # local moves ahead: a push fast-forwards
    result = copy_refs(local, remote)
    assert "fast-forward" in result.written[0]
    ref = read_ref(remote, "demo", "embed")
    assert ref.key == keys[2] and [h.key for h in ref.history] == [keys[2], keys[1], keys[0]]

    # the remote moves ahead: pulling it fast-forwards the local ref
    set_ref(remote, "demo", "embed", keys[3])
    pulled = copy_refs(remote, local)
    assert read_ref(local, "demo", "embed").key == keys[3] and "fast-forward" in pulled.written[0]
    # pulling the older copy into a root that is ahead keeps it, and its history
    kept = copy_refs(behind, local)
    assert kept.kept_ahead and read_ref(local, "demo", "embed").key == keys[3]
    assert {h.key for h in read_ref(local, "demo", "embed").history} == set(keys)

    # diverged: each side moved to something the other never had
    set_ref(remote, "demo", "embed", keys[0])  # remote: ... -> 3 -> 0
    set_ref(local, "demo", "embed", keys[1])  # local:  ... -> 3 -> 1
    assert relation(read_ref(local, "demo", "embed"), read_ref(remote, "demo", "embed")) == "diverged"
    refused = copy_refs(local, remote)
    assert len(refused.conflicts) == 1 and keys[0][:12] in refused.conflicts[0] and keys[1][:12] in refused.conflicts[0]
    assert read_ref(remote, "demo", "embed").key == keys[0]
    chosen = copy_refs(local, remote, prefer="source")
    merged = read_ref(remote, "demo", "embed")
    assert chosen.written and merged.key == keys[1]
    local_entries = {(h.key, h.at) for h in read_ref(local, "demo", "embed").history}
    assert local_entries <= {(h.key, h.at) for h in merged.history}, "the source's history was dropped"
    assert any(h.key == keys[0] for h in merged.history), "the remote's own head was dropped"


@pytest.mark.slow
def test_pull_into_a_root_whose_ref_is_newer_keeps_it_and_a_diverged_pull_is_refused(
    local_root: str, s3_root: str, kit: Any
) -> None:
    local, remote = ArtifactStore(local_root), ArtifactStore(s3_root)
    old, new = kit.build(remote, config={"v": 0}), kit.build(local, config={"v": 1})
    kit.build(local, config={"v": 0})
    set_ref(remote, "demo", "embed", old.key)
    runner = CliRunner()
    assert runner.invoke(app, ["artifacts", "pull", s3_root, "--root", local_root]).exit_code == 0
    set_ref(local, "demo", "embed", new.key)  # local moves on
    pulled = runner.invoke(app, ["artifacts", "pull", s3_root, "--root", local_root])
    assert pulled.exit_code == 0, pulled.output
    assert read_ref(local, "demo", "embed").key == new.key and "kept" in pulled.output
    pushed = runner.invoke(app, ["artifacts", "push", s3_root, "--root", local_root])
    assert pushed.exit_code == 0 and read_ref(remote, "demo", "embed").key == new.key

    other = kit.build(remote, config={"v": 2})
    set_ref(remote, "demo", "embed", other.key)  # remote moves elsewhere
    set_ref(local, "demo", "embed", old.key)  # and local too: diverged
    refused = runner.invoke(app, ["artifacts", "pull", s3_root, "--root", local_root])
    assert refused.exit_code == 1
    assert (
        "diverged" in refused.output
        and other.key[:12] in refused.output
        and old.key[:12] in refused.output
        and "--theirs" in refused.output
    )
    assert read_ref(local, "demo", "embed").key == old.key
    taken = runner.invoke(app, ["artifacts", "pull", s3_root, "--theirs", "--root", local_root])
    assert taken.exit_code == 0, taken.output
    ref = read_ref(local, "demo", "embed")
    assert ref.key == other.key and {old.key, new.key, other.key} <= {h.key for h in ref.history}


@pytest.mark.slow
def test_push_over_a_damaged_remote_copy_repairs_it(local_root: str, s3_root: str, kit: Any) -> None:
    local, remote = ArtifactStore(local_root), ArtifactStore(s3_root)
    built = kit.build(local, rows=9)
    runner = CliRunner()
    assert runner.invoke(app, ["artifacts", "push", s3_root, "--root", local_root]).exit_code == 0
    entry = built.table_files[0]
    path = f"{remote.artifact_dir('embed', built.key)}/{entry.path}"
    good = remote.backend.fs.cat_file(path)
    remote.backend.fs.pipe_file(path, bytes(b ^ 0xFF for b in good))  # same size, other bytes
    assert verify_artifact(remote, "embed", built.key)
    again = runner.invoke(app, ["artifacts", "push", s3_root, "--root", local_root])
    assert again.exit_code == 0, again.output
    assert "repaired" in again.output and entry.path in again.output
    assert verify_artifact(remote, "embed", built.key) == []


@pytest.mark.slow
def test_push_fails_naming_a_damaged_remote_file_it_cannot_restore(local_root: str, s3_root: str, kit: Any) -> None:
    local, remote = ArtifactStore(local_root), ArtifactStore(s3_root)
    built = kit.build(local, rows=9)
    # the remote holds another build of the same key (nondeterministic stage): same paths, other bytes
    records = kit.write(remote, "embed", built.key, 7)
    remote.commit(kit.manifest("embed", built.key, {"model": "labse"}, records))
    entry = remote.manifest("embed", built.key).table_files[-1]  # 3 rows here, 1 row locally
    path = f"{remote.artifact_dir('embed', built.key)}/{entry.path}"
    remote.backend.fs.pipe_file(path, b"x" * entry.bytes)
    result = CliRunner().invoke(app, ["artifacts", "push", s3_root, "--root", local_root])
    message = str(result.exception)  # the CLI's main() prints a StoreError as this one line
    assert result.exit_code == 1 and "\n" not in message
    assert entry.path in message and "different build" in message


@pytest.mark.slow
def test_a_malformed_ref_is_reported_and_skipped(store: ArtifactStore, kit: Any, root: str) -> None:
    kept = kit.build(store, config={"v": 1})
    loose = kit.build(store, config={"v": 2})
    other = kit.build(store, stage="other", config={"v": 3})
    set_ref(store, "demo", "embed", kept.key)
    store.backend.write_object(f"{store.root_path}/refs/demo/other.json", b'{"pipeline": "demo", "stage": "oth')
    runner = CliRunner()
    for command in (["ls"], ["refs"]):
        result = runner.invoke(app, ["artifacts", *command, "--root", root])
        assert result.exit_code == 0, result.output
        assert "refs/demo/other" in result.output and "Traceback" not in result.output
    listed = runner.invoke(app, ["artifacts", "ls", "--root", root])
    assert kept.key[:12] in listed.output and loose.key[:12] in listed.output
    verify = runner.invoke(app, ["artifacts", "verify", "--root", root])
    assert verify.exit_code == 1 and "DAMAGED REF refs/demo/other" in verify.output and "ok      embed" in verify.output
    gc = runner.invoke(app, ["artifacts", "gc", "--grace", "0", "--yes", "--root", root])
    assert gc.exit_code == 0, gc.output
    assert f"delete embed/{loose.key[:12]}" in gc.output, "gc refused everything for one malformed ref"
    assert "every other artifact kept" in gc.output
    assert store.is_committed("other", other.key), "gc deleted what a malformed ref may point to"
    assert store.is_committed("embed", kept.key) and not store.is_committed("embed", loose.key)


@pytest.mark.slow
def test_gc_collects_around_a_damaged_manifest(store: ArtifactStore, kit: Any, root: str) -> None:
    loose = kit.build(store, config={"v": 1})
    damaged = kit.build(store, config={"v": 2})
    store.backend.write_object(f"{store.artifact_dir('embed', damaged.key)}/manifest.json", b"{ not json")
    gc = CliRunner().invoke(app, ["artifacts", "gc", "--grace", "0", "--yes", "--include-partial", "--root", root])
    assert gc.exit_code == 0, gc.output
    assert f"delete embed/{loose.key[:12]}" in gc.output and f"{damaged.key[:12]} kept" in gc.output
    assert store.backend.fs.exists(f"{store.artifact_dir('embed', damaged.key)}/manifest.json")


@pytest.mark.slow
def test_refs_set_independently_to_the_same_key_agree(local_root: str, s3_root: str, kit: Any) -> None:
    """Two stores that built one config each point their ref at the same key: a push merges the
    histories and refuses nothing."""
    local, remote = ArtifactStore(local_root), ArtifactStore(s3_root)
    built = kit.build(local, config={"v": 1})
    kit.build(remote, config={"v": 1})
    set_ref(local, "demo", "embed", built.key, note="built here")
    set_ref(remote, "demo", "embed", built.key, note="built there")
    result = copy_refs(local, remote)
    assert result.conflicts == [] and read_ref(remote, "demo", "embed").key == built.key
    assert {h.note for h in read_ref(remote, "demo", "embed").history} == {"built here", "built there"}


@pytest.mark.slow
def test_a_ref_whose_content_disagrees_with_its_path_is_malformed_everywhere(store: ArtifactStore, kit: Any, root: str) -> None:
    """Issue 35: a ref at refs/demo/embed.json whose content says stage `other` was trusted:
    verify blamed another ref, plan and gc disagreed, and `gc --yes` deleted what the path names.
    Now it is malformed wherever refs are read, and gc keeps both stages' artifacts."""
    import json

    embed = kit.build(store, config={"v": 1})
    other = kit.build(store, stage="other", config={"v": 3})
    set_ref(store, "demo", "other", other.key)
    misplaced = {"pipeline": "demo", "stage": "other", "key": other.key, "history": []}
    store.backend.write_object(f"{store.root_path}/refs/demo/embed.json", json.dumps(misplaced).encode())
    runner = CliRunner()
    for command in (["ls"], ["refs"]):
        result = runner.invoke(app, ["artifacts", *command, "--root", root])
        assert result.exit_code == 0 and "refs/demo/embed" in result.output and "sits at refs/demo/embed.json" in result.output
    verify = runner.invoke(app, ["artifacts", "verify", "--root", root])
    assert verify.exit_code == 1 and "DAMAGED REF refs/demo/embed" in verify.output, verify.output
    gc = runner.invoke(app, ["artifacts", "gc", "--grace", "0", "--yes", "--root", root])
    assert gc.exit_code == 0 and "Traceback" not in gc.output, gc.output
    assert store.is_committed("embed", embed.key), "gc deleted the artifact a malformed ref's path names"
    assert store.is_committed("other", other.key)
    assert "every embed and other artifact kept" in gc.output, gc.output
    # a pipeline that is no valid name (`../..`) in the content: one line, no traceback
    invalid = {**misplaced, "pipeline": "../..", "stage": "embed", "key": embed.key}
    store.backend.write_object(f"{store.root_path}/refs/demo/embed.json", json.dumps(invalid).encode())
    for command in (["verify"], ["refs"], ["gc"]):
        result = runner.invoke(app, ["artifacts", *command, "--root", root])
        assert "Traceback" not in result.output and "is not a valid name" in result.output, result.output
