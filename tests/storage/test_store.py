"""The artifact store, on a local folder and on S3 (moto): writes, commits, reads, refs, gc."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import threading
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem
from pydantic import ValidationError

import storage.refs as refs_module
from storage import (
    ArtifactNotFound,
    ArtifactStore,
    FileEntry,
    InvalidNameError,
    Manifest,
    Ref,
    SchemaMismatch,
    ShardRecord,
    StoreError,
    conform,
)
from storage.gc import delete_artifact, garbage, uncommitted_keys
from storage.refs import list_refs, read_ref, set_ref
from storage.verify import verify_artifact

STAGE = "embed"


def art_path(store: ArtifactStore, stage: str, key: str, rel: str = "") -> str:
    base = store.artifact_dir(stage, key)
    return f"{base}/{rel}" if rel else base


def overwrite(store: ArtifactStore, path: str, data: bytes, s3_server: Any = None) -> None:
    """Change a stored object behind the store's back (another process, a disk fault)."""
    if store.backend.is_local:
        Path(path).write_bytes(data)
    else:
        bucket, key = path.split("/", 1)
        s3_server.client().put_object(Bucket=bucket, Key=key, Body=data)


def remove(store: ArtifactStore, path: str, s3_server: Any = None) -> None:
    if store.backend.is_local:
        Path(path).unlink()
    else:
        bucket, key = path.split("/", 1)
        s3_server.client().delete_object(Bucket=bucket, Key=key)


@pytest.fixture
def outside(backend: str, request: pytest.FixtureRequest) -> Any:
    """The S3 server handle for out-of-band changes (None on the local backend)."""
    return request.getfixturevalue("s3_server") if backend == "s3" else None


# ---------------------------------------------------------------- root URIs
@pytest.mark.parametrize(
    "uri",
    [
        "s3://AKIAEXAMPLE:hunter2-secret@bucket/x",
        "s3://AKIAEXAMPLE@bucket/x",
        "s3://:hunter2-secret@bucket/x",
        "gs://user:hunter2-secret@bucket/x",
    ],
)
def test_root_with_credentials_is_refused_without_echoing_them(uri: str) -> None:
    with pytest.raises(StoreError, match="credentials") as info:
        ArtifactStore(uri)
    assert "hunter2-secret" not in str(info.value)
    assert "AKIAEXAMPLE" not in str(info.value)


@pytest.mark.parametrize("uri", ["s3://bucket/x?versionId=3", "s3://bucket/x?endpoint_url=http://evil", "s3://bucket/x#frag"])
def test_root_with_query_or_fragment_is_refused(uri: str) -> None:
    with pytest.raises(StoreError, match="query strings"):
        ArtifactStore(uri)


@pytest.mark.parametrize("name", ["run[1]", "run*", "run?x", "a/[ab]/c"])
def test_root_with_glob_characters_is_refused(tmp_path: Path, name: str) -> None:
    # fsspec would expand them: listings would come back empty and delete() would hit other folders
    with pytest.raises(StoreError, match="glob"):
        ArtifactStore(tmp_path / name)
    with pytest.raises(StoreError, match="glob"):
        ArtifactStore(f"s3://bucket/{name.replace('?', '')}*")
    assert not (tmp_path / name).exists()


def test_empty_root_is_refused() -> None:
    with pytest.raises(StoreError):
        ArtifactStore("")


def test_local_roots_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = ArtifactStore("rel/store")
    assert store.backend.is_local
    assert store.root_uri == str(tmp_path / "rel" / "store")
    assert (tmp_path / "rel" / "store").is_dir()
    assert ArtifactStore(f"file://{tmp_path}/other").root_uri == str(tmp_path / "other")
    assert ArtifactStore(tmp_path / "p").root_uri == str(tmp_path / "p")


def test_s3_root_keeps_its_uri(s3_root: str) -> None:
    store = ArtifactStore(s3_root + "/")
    assert store.root_uri == s3_root
    assert not store.backend.is_local
    assert store.uri(STAGE, "a" * 64) == f"{s3_root}/{STAGE}/{'a' * 64}"
    assert store.ref(STAGE, "a" * 64).uri == f"{s3_root}/{STAGE}/{'a' * 64}"


def test_s3_endpoint_comes_from_the_aws_environment(s3_root: str, s3_server: Any, kit: Any, scratch_tmp: Path) -> None:
    store = ArtifactStore(s3_root)
    manifest = kit.build(store, rows=3)
    # the object really is on the moto server: look with an independent client
    prefix = s3_root.split("/", 3)[3]
    listed = s3_server.client().list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix)
    names = {o["Key"] for o in listed.get("Contents", [])}
    assert f"{prefix}/{STAGE}/{manifest.key}/manifest.json" in names
    assert store.backend.fs.s3.meta.endpoint_url == s3_server.endpoint


def test_s3_service_specific_endpoint_wins(s3_server: Any, kit: Any, monkeypatch: pytest.MonkeyPatch, scratch_tmp: Path) -> None:
    import s3fs

    # the generic variable points at nothing; AWS_ENDPOINT_URL_S3 (which botocore prefers) at moto
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        store = ArtifactStore(f"s3://{s3_server.bucket}/specific")
        manifest = kit.build(store, rows=2)
        assert store.manifest(STAGE, manifest.key) == manifest
        assert store.backend.fs.s3.meta.endpoint_url == s3_server.endpoint
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


# ------------------------------------------------------------------ names
def test_paths_reject_traversal(store: ArtifactStore, kit: Any) -> None:
    key = "a" * 64
    for stage in ("../x", "a/b", "Embed", "", "refs"):
        with pytest.raises(InvalidNameError):
            store.artifact_dir(stage, key)
    for bad_key in ("../x", "a" * 63, "A" * 64):
        with pytest.raises(InvalidNameError):
            store.artifact_dir(STAGE, bad_key)
    with pytest.raises(InvalidNameError):
        store.write_shard_files(STAGE, key, "../s0", [kit.table(0, 1)], kit.schema)
    with pytest.raises(InvalidNameError):
        store.commit_shard(STAGE, key, ShardRecord(shard_id="../../x", files=[]))
    with pytest.raises(InvalidNameError):
        store.completed_shard(STAGE, key, "a/b")
    with pytest.raises(InvalidNameError):
        read_ref(store, "../p", STAGE)
    with pytest.raises(InvalidNameError):
        store.list_manifests("../..")
    with pytest.raises(InvalidNameError):
        store.list_manifests("refs")
    assert store.list_manifests() == []


# ------------------------------------------------------------ shard files
@pytest.mark.slow
def test_write_shard_files_splits_into_whole_part_files(store: ArtifactStore, kit: Any, scratch_tmp: Path) -> None:
    key = kit.key(STAGE, {"split": True})
    tables = [kit.table(0, 3), kit.table(3, 3).to_batches()[0], kit.table(6, 3), kit.table(9, 1), kit.table(10, 0)]
    files = store.write_shard_files(STAGE, key, "s0", tables, kit.schema, max_rows_per_file=4)
    assert [f.path for f in files] == ["data/s0-00000.parquet", "data/s0-00001.parquet", "data/s0-00002.parquet"]
    assert [f.rows for f in files] == [4, 4, 2]
    ids = []
    for entry in files:
        path = art_path(store, STAGE, key, entry.path)
        blob = store.backend.fs.cat_file(path)
        assert len(blob) == entry.bytes == store.backend.fs.size(path)
        assert hashlib.sha256(blob).hexdigest() == entry.sha256
        parquet = pq.ParquetFile(io.BytesIO(blob))
        assert parquet.schema_arrow.equals(kit.schema)  # nullability included
        assert parquet.metadata.num_rows == entry.rows
        assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
        ids += parquet.read().column("id").to_pylist()
    assert ids == [f"id-{i:05d}" for i in range(10)]
    # no staging files left behind, neither next to the data nor in the temp dir
    assert sorted(p.rsplit("/", 1)[-1] for p in store.backend.fs.ls(art_path(store, STAGE, key, "data"), detail=False)) == [
        "s0-00000.parquet",
        "s0-00001.parquet",
        "s0-00002.parquet",
    ]
    assert list(scratch_tmp.iterdir()) == []


def test_empty_shard_still_records_the_schema(store: ArtifactStore, kit: Any) -> None:
    key = kit.key(STAGE, {"empty": True})
    files = store.write_shard_files(STAGE, key, "s0", [], kit.schema)
    assert [(f.path, f.rows) for f in files] == [("data/s0-00000.parquet", 0)]
    blob = store.backend.fs.cat_file(art_path(store, STAGE, key, files[0].path))
    assert pq.ParquetFile(io.BytesIO(blob)).schema_arrow.equals(kit.schema)


def test_completed_shard(store: ArtifactStore, kit: Any, outside: Any) -> None:
    key = kit.key(STAGE, {"shards": 1})
    assert store.completed_shard(STAGE, key, "s0") is None
    files = store.write_shard_files(STAGE, key, "s0", [kit.table(0, 9)], kit.schema, max_rows_per_file=4)
    assert store.completed_shard(STAGE, key, "s0") is None  # files alone do not make a shard done
    record = ShardRecord(
        shard_id="s0", files=files, rows_in=12, rows_out=9, dropped={"dup": 3}, metrics={"m": 1.5}, wall_time_s=0.5
    )
    assert store.commit_shard(STAGE, key, record) == record
    assert store.completed_shard(STAGE, key, "s0") == record
    assert store.completed_shard(STAGE, key, "s1") is None

    # a part file of the wrong size: not done
    second = art_path(store, STAGE, key, files[1].path)
    original = store.backend.fs.cat_file(second)
    overwrite(store, second, original[:-7], outside)
    assert store.completed_shard(STAGE, key, "s0") is None
    overwrite(store, second, original, outside)
    assert store.completed_shard(STAGE, key, "s0") == record
    # a missing part file: not done
    remove(store, second, outside)
    assert store.completed_shard(STAGE, key, "s0") is None


# ---------------------------------------------------------------- commits
def test_commit_and_read_back(store: ArtifactStore, kit: Any) -> None:
    config = {"model": "labse", "batch": 8, "nested": {"b": [1, 2], "a": None}}
    manifest = kit.build(store, STAGE, config, rows=10, shards=("s0", "s1"), max_rows_per_file=3, dropped={"short": 2})
    assert store.is_committed(STAGE, manifest.key)
    stored = store.manifest(STAGE, manifest.key)
    assert stored == manifest
    assert stored.config == config
    assert stored.shards == ["s0", "s1"]
    assert [f.path for f in stored.files] == [
        "data/s0-00000.parquet",
        "data/s0-00001.parquet",
        "data/s1-00000.parquet",
        "data/s1-00001.parquet",
    ]
    assert stored.rows_out == 10 and stored.rows_in == 12
    assert stored.total_bytes == sum(f.bytes for f in stored.files) > 0
    assert [c.name for c in stored.columns] == ["id", "text", "n"]
    assert [c.nullable for c in stored.columns] == [False, False, True]
    assert store.files(STAGE, manifest.key) == [art_path(store, STAGE, manifest.key, f.path) for f in stored.files]
    assert store.list_manifests() == [manifest]
    assert store.list_manifests(STAGE) == [manifest]
    assert store.list_manifests("other") == []
    assert store.stages() == [STAGE]


@pytest.mark.slow
def test_read_table_and_iter_batches_round_trip(store: ArtifactStore, kit: Any) -> None:
    manifest = kit.build(store, rows=11, shards=("s0", "s1"), max_rows_per_file=4)
    expected = kit.table(0, 11)
    table = store.read_table(STAGE, manifest.key)
    assert table.schema.equals(kit.schema)
    assert table.to_pylist() == expected.to_pylist()
    assert store.read_table(STAGE, manifest.key, columns=["n"]).column("n").to_pylist() == [i * 10 for i in range(11)]

    batches = list(store.iter_batches(STAGE, manifest.key, batch_size=3))
    assert all(b.num_rows <= 3 for b in batches)
    assert pa.Table.from_batches(batches).to_pylist() == expected.to_pylist()
    only_ids = list(store.iter_batches(STAGE, manifest.key, columns=["id"]))
    assert all(b.schema.names == ["id"] for b in only_ids)
    assert sum(b.num_rows for b in only_ids) == 11


def test_artifact_without_manifest_is_invisible(store: ArtifactStore, kit: Any) -> None:
    manifest = kit.build(store, rows=5, commit=False)
    assert not store.is_committed(STAGE, manifest.key)
    assert store.list_manifests() == []
    assert store.list_manifests(STAGE) == []
    with pytest.raises(ArtifactNotFound):
        store.manifest(STAGE, manifest.key)
    with pytest.raises(ArtifactNotFound):
        store.read_table(STAGE, manifest.key)
    with pytest.raises(ArtifactNotFound):
        verify_artifact(store, STAGE, manifest.key)
    with pytest.raises(ArtifactNotFound):
        store.resolve(STAGE, manifest.key[:8])
    assert uncommitted_keys(store) == [(STAGE, manifest.key)]
    # ... until it is committed
    store.commit(manifest)
    assert store.is_committed(STAGE, manifest.key)
    assert store.list_manifests() == [manifest]
    assert uncommitted_keys(store) == []


def test_commit_refuses_when_a_listed_file_is_missing(store: ArtifactStore, kit: Any, outside: Any) -> None:
    manifest = kit.build(store, rows=10, commit=False)
    remove(store, art_path(store, STAGE, manifest.key, manifest.files[1].path), outside)
    with pytest.raises(StoreError, match=manifest.files[1].path):
        store.commit(manifest)
    assert not store.is_committed(STAGE, manifest.key)
    assert store.list_manifests() == []


def test_commit_refuses_a_file_it_never_wrote(store: ArtifactStore, kit: Any) -> None:
    manifest = kit.build(store, rows=3, commit=False)
    extra = FileEntry(path="data/ghost-00000.parquet", rows=1, bytes=10, sha256="0" * 64)
    with pytest.raises(StoreError, match="ghost"):
        store.commit(manifest.model_copy(update={"files": [*manifest.files, extra]}))
    assert not store.is_committed(STAGE, manifest.key)


def test_first_committer_wins(store: ArtifactStore, kit: Any) -> None:
    first = kit.build(store, rows=4, commit=False, created_at="2024-01-01T00:00:00+00:00")
    second = first.model_copy(update={"created_at": "2025-06-01T00:00:00+00:00", "wall_time_s": 9.0})
    assert store.commit(first) == first
    assert store.commit(second) == first
    assert store.manifest(STAGE, first.key) == first
    assert store.manifest(STAGE, first.key).created_at == "2024-01-01T00:00:00+00:00"
    assert store.list_manifests() == [first]


@pytest.mark.slow
def test_concurrent_commits_agree_on_one_manifest(store: ArtifactStore, kit: Any) -> None:
    base = kit.build(store, rows=4, commit=False)
    candidates = [base.model_copy(update={"created_at": f"2024-01-01T00:00:{i:02d}+00:00"}) for i in range(8)]
    results: list[Manifest | BaseException] = [None] * len(candidates)  # type: ignore[list-item]
    barrier = threading.Barrier(len(candidates))

    def commit(i: int) -> None:
        barrier.wait()
        try:
            results[i] = store.commit(candidates[i])
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[i] = exc

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(len(candidates))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    stored = store.manifest(STAGE, base.key)
    assert stored in candidates
    assert results == [stored] * len(candidates)


def test_manifest_at_the_wrong_place_is_rejected(store: ArtifactStore, kit: Any) -> None:
    manifest = kit.build(store, rows=2)
    other = "c" * 64
    store.backend.write_object(f"{art_path(store, STAGE, other)}/manifest.json", manifest.model_dump_json().encode())
    with pytest.raises(StoreError, match="claims to be"):
        store.manifest(STAGE, other)
    # listing agrees with manifest(): the copy is not a second artifact
    assert store.list_manifests() == [manifest]
    assert store.list_manifests(STAGE) == [manifest]


# ----------------------------------------------------------------- schemas
def test_conform_accepts_castable_and_reordered_tables(kit: Any) -> None:
    loose = pa.table({"n": pa.array([1, None], pa.int32()), "text": ["a", "b"], "id": ["x", "y"]})  # all nullable
    table = conform(loose, kit.schema)
    assert table.schema.equals(kit.schema)
    assert table.to_pylist() == [{"id": "x", "text": "a", "n": 1}, {"id": "y", "text": "b", "n": None}]
    batch = kit.table(0, 2).to_batches()[0]
    assert conform(batch, kit.schema).equals(kit.table(0, 2))


@pytest.mark.parametrize(
    ("table", "column"),
    [
        (pa.table({"id": ["x"], "n": [1]}), "text"),  # missing column
        (pa.table({"id": ["x"], "text": ["t"], "n": [1], "bogus": [0]}), "bogus"),  # unexpected column
        (pa.table({"id": ["x"], "text": ["t"], "n": ["not a number"]}), "n"),  # cannot cast
        (pa.table({"id": ["x"], "text": ["t"], "n": [1.5]}), "n"),  # would lose data
        (pa.table({"id": ["x"], "text": ["t"], "n": [[1, 2]]}), "n"),  # list to int
        (pa.table({"id": ["x", None], "text": ["t", "u"], "n": [1, 2]}), "id"),  # nulls in non-null
        (pa.table({"id": ["x"], "text": pa.array([None], pa.string()), "n": [1]}), "text"),
    ],
    ids=["missing", "extra", "uncastable", "lossy", "list", "null-id", "null-text"],
)
def test_schema_mismatch_names_the_column(
    store: ArtifactStore, kit: Any, table: pa.Table, column: str, scratch_tmp: Path
) -> None:
    with pytest.raises(SchemaMismatch, match=column):
        conform(table, kit.schema)
    key = kit.key(STAGE, {"bad": column})
    # a good table first, then the bad one: the half-written part must not survive
    with pytest.raises(SchemaMismatch, match=column):
        store.write_shard_files(STAGE, key, "s0", [kit.table(0, 2), table], kit.schema, max_rows_per_file=100)
    assert not store.backend.fs.exists(art_path(store, STAGE, key, "data/s0-00000.parquet"))
    if store.backend.is_local:
        data_dir = Path(art_path(store, STAGE, key, "data"))
        assert not data_dir.exists() or list(data_dir.iterdir()) == []
    assert list(scratch_tmp.iterdir()) == []
    assert store.completed_shard(STAGE, key, "s0") is None


def test_schema_mismatch_is_a_store_error() -> None:
    assert issubclass(SchemaMismatch, StoreError)
    assert issubclass(ArtifactNotFound, StoreError)


# ------------------------------------------------------------------ verify
def test_verify_sound_artifact(store: ArtifactStore, kit: Any) -> None:
    manifest = kit.build(store, rows=10)
    assert verify_artifact(store, STAGE, manifest.key) == []


@pytest.mark.slow
def test_verify_detects_a_flipped_byte(store: ArtifactStore, kit: Any, outside: Any) -> None:
    manifest = kit.build(store, rows=10)
    entry = manifest.files[1]
    path = art_path(store, STAGE, manifest.key, entry.path)
    blob = bytearray(store.backend.fs.cat_file(path))
    blob[len(blob) // 2] ^= 0xFF
    overwrite(store, path, bytes(blob), outside)
    problems = verify_artifact(store, STAGE, manifest.key)
    assert len(problems) == 1
    assert problems[0].startswith(entry.path) and "sha256" in problems[0]


@pytest.mark.slow
def test_verify_detects_a_truncated_file(store: ArtifactStore, kit: Any, outside: Any) -> None:
    manifest = kit.build(store, rows=10)
    entry = manifest.files[0]
    path = art_path(store, STAGE, manifest.key, entry.path)
    overwrite(store, path, store.backend.fs.cat_file(path)[:100], outside)
    assert verify_artifact(store, STAGE, manifest.key) == [f"{entry.path}: 100 bytes, manifest says {entry.bytes}"]


@pytest.mark.slow
def test_verify_detects_a_deleted_file(store: ArtifactStore, kit: Any, outside: Any) -> None:
    manifest = kit.build(store, rows=10)
    entries = manifest.files
    remove(store, art_path(store, STAGE, manifest.key, entries[2].path), outside)
    remove(store, art_path(store, STAGE, manifest.key, entries[0].path), outside)
    assert verify_artifact(store, STAGE, manifest.key) == [f"{entries[0].path}: missing", f"{entries[2].path}: missing"]


@pytest.mark.slow
def test_verify_detects_a_wrong_row_count(store: ArtifactStore, kit: Any) -> None:
    manifest = kit.build(store, rows=6, commit=False)
    lying = manifest.model_copy(update={"files": [manifest.files[0].model_copy(update={"rows": 99}), *manifest.files[1:]]})
    store.commit(lying)
    assert verify_artifact(store, STAGE, manifest.key) == [f"{manifest.files[0].path}: 4 rows, manifest says 99"]


@pytest.mark.slow
def test_verify_sees_changes_after_a_listing(store: ArtifactStore, kit: Any, outside: Any) -> None:
    """Directory listings cached by the S3 filesystem must not hide a change made elsewhere."""
    manifest = kit.build(store, rows=10)
    assert verify_artifact(store, STAGE, manifest.key) == []
    store.backend.fs.find(art_path(store, STAGE, manifest.key))  # lists (and caches) data/
    store.backend.fs.ls(art_path(store, STAGE, manifest.key, "data"))
    remove(store, art_path(store, STAGE, manifest.key, manifest.files[0].path), outside)
    assert verify_artifact(store, STAGE, manifest.key) == [f"{manifest.files[0].path}: missing"]


# -------------------------------------------------------------------- refs
@pytest.mark.slow
def test_refs_history_newest_first(store: ArtifactStore, kit: Any) -> None:
    a = kit.build(store, config={"v": 1}, rows=2)
    b = kit.build(store, config={"v": 2}, rows=3)
    assert read_ref(store, "demo", STAGE) is None

    ref = set_ref(store, "demo", STAGE, a.key, note="first")
    assert (ref.pipeline, ref.stage, ref.key) == ("demo", STAGE, a.key)
    assert [(h.key, h.note) for h in ref.history] == [(a.key, "first")]
    assert read_ref(store, "demo", STAGE) == ref

    set_ref(store, "demo", STAGE, b.key)
    again = set_ref(store, "demo", STAGE, b.key, note="no-op")  # same key: no new history entry
    assert [h.key for h in again.history] == [b.key, a.key]
    set_ref(store, "demo", STAGE, a.key, note="back")
    ref = read_ref(store, "demo", STAGE)
    assert ref is not None and ref.key == a.key
    assert [h.key for h in ref.history] == [a.key, b.key, a.key]
    assert ref.history[0].note == "back"
    assert ref.history[0].at >= ref.history[-1].at


@pytest.mark.slow
def test_set_ref_to_an_uncommitted_key_raises(store: ArtifactStore, kit: Any) -> None:
    committed = kit.build(store, config={"v": 1}, rows=2)
    pending = kit.build(store, config={"v": 2}, rows=2, commit=False)
    set_ref(store, "demo", STAGE, committed.key)
    with pytest.raises(ArtifactNotFound):
        set_ref(store, "demo", STAGE, pending.key)
    with pytest.raises(ArtifactNotFound):
        set_ref(store, "demo", STAGE, "d" * 64)
    with pytest.raises(ArtifactNotFound):
        set_ref(store, "demo", "other", committed.key)  # right key, wrong stage
    ref = read_ref(store, "demo", STAGE)
    assert ref is not None and ref.key == committed.key and len(ref.history) == 1
    with pytest.raises(InvalidNameError):
        set_ref(store, "../demo", STAGE, committed.key)
    with pytest.raises(InvalidNameError):
        set_ref(store, "demo", STAGE, "../" + committed.key[3:])


@pytest.mark.slow
def test_ref_history_is_bounded(store: ArtifactStore, kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refs_module, "REF_HISTORY_LIMIT", 3)
    a = kit.build(store, config={"v": 1}, rows=1)
    b = kit.build(store, config={"v": 2}, rows=1)
    for key in (a.key, b.key, a.key, b.key, a.key):
        set_ref(store, "demo", STAGE, key)
    ref = read_ref(store, "demo", STAGE)
    assert ref is not None and [h.key for h in ref.history] == [a.key, b.key, a.key]


@pytest.mark.slow
def test_list_refs(store: ArtifactStore, kit: Any) -> None:
    assert list_refs(store) == []
    embed = kit.build(store, STAGE, {"v": 1}, rows=1)
    corpus = kit.build(store, "corpus", {"v": 1}, rows=1)
    set_ref(store, "zeta", STAGE, embed.key)
    set_ref(store, "alpha", STAGE, embed.key)
    set_ref(store, "alpha", "corpus", corpus.key)
    refs = list_refs(store)
    assert [(r.pipeline, r.stage, r.key) for r in refs] == [
        ("alpha", "corpus", corpus.key),
        ("alpha", STAGE, embed.key),
        ("zeta", STAGE, embed.key),
    ]
    assert all(isinstance(r, Ref) for r in refs)
    assert store.stages() == ["corpus", STAGE]  # refs/ is not a stage


# ------------------------------------------------------------ maintenance
@pytest.mark.slow
def test_garbage_lists_unreferenced_artifacts_only(store: ArtifactStore, kit: Any) -> None:
    old = kit.build(store, config={"v": 1}, rows=1)
    current = kit.build(store, config={"v": 2}, rows=1)
    stray = kit.build(store, config={"v": 3}, rows=1)
    other_stage = kit.build(store, "corpus", {"v": 1}, rows=1)
    partial = kit.build(store, config={"v": 4}, rows=1, commit=False)
    set_ref(store, "demo", STAGE, old.key)
    set_ref(store, "demo", STAGE, current.key)
    set_ref(store, "demo", "corpus", other_stage.key)

    assert sorted(garbage(store)) == sorted([(STAGE, old.key), (STAGE, stray.key)])
    assert garbage(store, keep_history=True) == [(STAGE, stray.key)]
    assert sorted(garbage(store, keep_history=True, include_partial=True)) == sorted([(STAGE, stray.key), (STAGE, partial.key)])
    # garbage() only lists
    assert all(store.is_committed(STAGE, m.key) for m in (old, current, stray))
    assert store.backend.fs.exists(art_path(store, STAGE, partial.key, partial.files[0].path))


@pytest.mark.slow
def test_garbage_with_no_refs_is_everything(store: ArtifactStore, kit: Any) -> None:
    a = kit.build(store, config={"v": 1}, rows=1)
    assert garbage(store) == [(STAGE, a.key)]


class _RecordingFS(LocalFileSystem):
    """The real local filesystem, noting whether the manifest was still there at each removal."""

    def __init__(self, manifest: str, **kwargs: Any) -> None:
        super().__init__(skip_instance_cache=True, **kwargs)
        self.manifest = manifest
        self.events: list[tuple[str, bool]] = []

    def rm_file(self, path: Any) -> None:
        self.events.append(("rm_file", Path(self.manifest).exists()))
        super().rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Any = None) -> None:
        self.events.append(("rm", Path(self.manifest).exists()))
        super().rm(path, recursive=recursive, maxdepth=maxdepth)


def test_delete_removes_the_manifest_before_the_data(local_root: str, kit: Any) -> None:
    store = ArtifactStore(local_root)
    doomed = kit.build(store, config={"v": 1}, rows=9)
    keep = kit.build(store, config={"v": 2}, rows=9)
    manifest_path = art_path(store, STAGE, doomed.key, "manifest.json")
    store.backend.fs = _RecordingFS(manifest_path)
    delete_artifact(store, STAGE, doomed.key)
    # the first removal takes the manifest; when the data goes, the artifact is already uncommitted
    assert store.backend.fs.events[0] == ("rm_file", True)
    assert all(present is False for _, present in store.backend.fs.events[1:])
    assert not Path(art_path(store, STAGE, doomed.key)).exists()
    assert store.is_committed(STAGE, keep.key)
    assert store.read_table(STAGE, keep.key).num_rows == 9


@pytest.mark.slow
def test_delete(store: ArtifactStore, kit: Any, read_all: Any) -> None:
    doomed = kit.build(store, config={"v": 1}, rows=9)
    keep = kit.build(store, config={"v": 2}, rows=9)
    delete_artifact(store, STAGE, doomed.key)
    assert not store.is_committed(STAGE, doomed.key)
    assert [m.key for m in store.list_manifests()] == [keep.key]
    assert not any(path.startswith(f"{STAGE}/{doomed.key}") for path in read_all(store))
    assert verify_artifact(store, STAGE, keep.key) == []
    delete_artifact(store, STAGE, doomed.key)  # deleting twice is harmless
    delete_artifact(store, STAGE, "e" * 64)
    with pytest.raises(InvalidNameError):
        delete_artifact(store, "refs", "e" * 64)


def test_an_unreadable_manifest_is_an_error_not_an_absence(local_root: str, kit: Any) -> None:
    """If a manifest cannot be read, the artifact must not pass for uncommitted (gc would delete it)."""
    store = ArtifactStore(local_root)
    kit.build(store, config={"v": 1}, rows=2)
    odd = kit.build(store, config={"v": 2}, rows=2)
    manifest_path = Path(store.artifact_dir(STAGE, odd.key)) / "manifest.json"
    manifest_path.unlink()
    manifest_path.mkdir()  # exists, but reading it fails (as a permission or network error would)
    with pytest.raises(StoreError, match="cannot read"):
        store.list_manifests()
    with pytest.raises(StoreError, match="cannot read"):
        garbage(store, include_partial=True)
    assert (Path(store.artifact_dir(STAGE, odd.key)) / odd.files[0].path).exists()


@pytest.mark.slow
def test_resolve_prefixes(store: ArtifactStore, kit: Any) -> None:
    # find two configs whose keys share a first hex digit, and one whose key does not
    seen: dict[str, dict[str, int]] = {}
    pair = None
    for i in range(200):
        config = {"i": i}
        first = kit.key(STAGE, config)[0]
        if first in seen:
            pair = (seen[first], config)
            break
        seen[first] = config
    assert pair is not None
    a = kit.build(store, config=pair[0], rows=1)
    b = kit.build(store, config=pair[1], rows=1)
    lone = next(c for c in ({"j": j} for j in range(500)) if kit.key(STAGE, c)[0] != a.key[0])
    c = kit.build(store, config=lone, rows=1)

    common = 1
    while a.key[: common + 1] == b.key[: common + 1]:
        common += 1
    assert store.resolve(STAGE, a.key) == a.key
    assert store.resolve(STAGE, a.key[: common + 1]) == a.key
    assert store.resolve(STAGE, b.key[: common + 1]) == b.key
    assert store.resolve(STAGE, c.key[:1]) == c.key
    with pytest.raises(StoreError, match="ambiguous") as info:
        store.resolve(STAGE, a.key[:common])
    assert a.key[:12] in str(info.value) and b.key[:12] in str(info.value)
    with pytest.raises(ArtifactNotFound):
        store.resolve(STAGE, "zz")
    with pytest.raises(ArtifactNotFound):
        store.resolve("corpus", a.key[:8])  # other stage
    with pytest.raises(InvalidNameError):
        store.resolve(STAGE, "Z" * 64)


@pytest.mark.slow
def test_a_second_process_sees_new_commits(root: str, kit: Any) -> None:
    """A long-lived store (and its cached filesystem) must see what another writer committed."""
    reader = ArtifactStore(root)
    first = kit.build(reader, config={"v": 1}, rows=1)
    assert [m.key for m in reader.list_manifests()] == [first.key]
    uncommitted_keys(reader)
    reader.stages()

    fs_class = type(reader.backend.fs)
    writer = ArtifactStore(root)
    if not reader.backend.is_local:  # a separate S3 connection with its own listing cache
        writer.backend.fs = fs_class(skip_instance_cache=True)
        assert writer.backend.fs is not reader.backend.fs
    second = kit.build(writer, config={"v": 2}, rows=1)
    third = kit.build(writer, "corpus", {"v": 3}, rows=1)
    partial = kit.build(writer, config={"v": 4}, rows=1, commit=False)
    set_ref(writer, "demo", STAGE, second.key)

    assert {m.key for m in reader.list_manifests()} == {first.key, second.key, third.key}
    assert reader.stages() == ["corpus", STAGE]
    assert reader.resolve(STAGE, second.key[:10]) == second.key
    assert reader.is_committed(STAGE, second.key)
    assert set(uncommitted_keys(reader)) == {(STAGE, partial.key)}
    assert [r.key for r in list_refs(reader)] == [second.key]
    assert sorted(garbage(reader)) == sorted([(STAGE, first.key), ("corpus", third.key)])


# ------------------------------------------------------- hostile manifests
def _manifest_json(kit: Any, **file_overrides: Any) -> dict[str, Any]:
    data = kit.manifest(
        STAGE,
        "a" * 64,
        {"m": 1},
        [ShardRecord(shard_id="s0", files=[FileEntry(path="data/s0-00000.parquet", rows=1, bytes=1, sha256="0" * 64)])],
    ).model_dump(mode="json")
    data["files"][0].update(file_overrides)
    return data


@pytest.mark.parametrize(
    "path",
    ["../x", "data/../../x", "/etc/passwd", "a\\b", "..\\..\\x", "c:/windows", "s3://other-bucket/x", "", "..", "data/.."],
)
def test_manifest_paths_outside_the_artifact_are_rejected(kit: Any, path: str) -> None:
    data = _manifest_json(kit, path=path)
    with pytest.raises(ValidationError):
        Manifest.model_validate_json(json.dumps(data))
    with pytest.raises(ValidationError):
        ShardRecord.model_validate({"shard_id": "s0", "files": data["files"]})


def test_manifest_parsing_is_strict(kit: Any) -> None:
    good = _manifest_json(kit)
    assert Manifest.model_validate_json(json.dumps(good)).files[0].path == "data/s0-00000.parquet"
    for bad in (
        {**good, "extra": 1},
        {**good, "key": "../" + "a" * 61},
        {**good, "key": "A" * 64},
        {k: v for k, v in good.items() if k != "columns"},
    ):
        with pytest.raises(ValidationError):
            Manifest.model_validate_json(json.dumps(bad))
    for entry in ({"sha256": "xyz"}, {"rows": -1}, {"bytes": -5}, {"evil": True}):
        with pytest.raises(ValidationError):
            Manifest.model_validate_json(json.dumps(_manifest_json(kit, **entry)))
    with pytest.raises(ValidationError):
        Ref.model_validate_json(json.dumps({"pipeline": "p", "stage": "s", "key": "../x"}))


@pytest.mark.slow
def test_hostile_manifest_in_the_store_is_not_followed(store: ArtifactStore, kit: Any, read_all: Any) -> None:
    key = "a" * 64
    data = _manifest_json(kit, path="../../../../outside.parquet")
    store.backend.write_object(f"{art_path(store, STAGE, key)}/manifest.json", json.dumps(data).encode())
    before = read_all(store)
    for read in (store.manifest, store.read_table, functools.partial(verify_artifact, store)):
        with pytest.raises(StoreError, match=r"malformed manifest .*files\.0\.path"):
            read(STAGE, key)
    assert read_all(store) == before


@pytest.mark.slow
def test_no_credentials_are_written(s3_root: str, s3_server: Any, kit: Any, read_all: Any, scratch_tmp: Path) -> None:
    store = ArtifactStore(s3_root)
    a = kit.build(store, config={"v": 1}, rows=5)
    set_ref(store, "demo", STAGE, a.key)
    blobs = read_all(store)
    assert any(path.endswith("manifest.json") for path in blobs)
    assert any(path.startswith("refs/demo/") for path in blobs)
    for blob in blobs.values():
        assert s3_server.secret.encode() not in blob
        assert s3_server.key_id.encode() not in blob
    assert s3_server.endpoint.encode() not in b"".join(blobs.values())


def test_fsspec_url_to_fs_of_local_root_is_plain_local(local_root: str) -> None:
    store = ArtifactStore(local_root)
    assert isinstance(store.backend.fs, fsspec.implementations.local.LocalFileSystem)
    assert Path(local_root).is_dir()
