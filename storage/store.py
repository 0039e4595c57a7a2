"""The artifact store: versioned Parquet artifacts on any fsspec filesystem.

Layout under a root (a local folder or `s3://bucket/prefix`)::

    {root}/{stage}/{key}/data/{shard}-{part}.parquet   data files (zstd Parquet)
    {root}/{stage}/{key}/shards/{shard}.json           shard done markers (written after the data)
    {root}/{stage}/{key}/manifest.json                 commit marker (written last)
    {root}/refs/{pipeline}/{stage}.json                named pointers with history
    {root}/_checkpoints/{stage}/{key}/...              a build's resumable state until it commits
                                                       (storage/checkpoint_files.py)

Every object is written whole (local: temp file + rename; S3: one PUT), so a reader never
sees a half-written file; an artifact without `manifest.json` does not exist for readers.
This module knows nothing about what the tables mean.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from storage.checkpoint_files import CHECKPOINTS_DIR, CheckpointFiles
from storage.errors import (  # the store's errors live there, re-exported here
    AlreadyCommitted,
    ArtifactNotFound,
    CorruptArtifact,
    RefConflict,
    RootNotFound,
    SchemaMismatch,
    StoreAccessError,
    StoreError,
    StoreWriteError,
    explain,
    filesystem_for,
)
from storage.keys import KEY_PATTERN, InvalidNameError, check_key, check_name
from storage.manifest import ColumnSchema, FileEntry, Manifest, Ref, RefEntry, ShardRecord, parse_record
from storage.refs import update_ref

log = logging.getLogger(__name__)

DEFAULT_ROOT = "artifacts"
_ROOT_SOURCES = "XLEMBED_ROOT or the config's pipeline.root"
REFS_DIR = "refs"
MANIFEST = "manifest.json"
MAX_ROWS_PER_FILE = 1_000_000
REF_HISTORY_LIMIT = 200
_HASH_CHUNK = 1 << 20
_GLOB_CHARS = "*?["
# `set_ref(expected=ANY_VALUE)`: move the ref whatever it points to now
ANY_VALUE = object()


def _precondition_failed(exc: BaseException) -> bool:
    """A conditional S3 write that lost (412 PreconditionFailed, or 409 ConditionalRequestConflict
    when two conditional writes race); s3fs turns both into a plain OSError."""
    cause = exc.__cause__ or exc.__context__
    code = getattr(cause, "response", {}).get("Error", {}).get("Code", "") if cause is not None else ""
    text = f"{code} {exc}"
    return any(
        mark in text
        for mark in ("PreconditionFailed", "412", "ConditionalRequestConflict", "pre-conditions you specified did not hold")
    )


def _short(key: object) -> str:
    return key[:12] if isinstance(key, str) else "nothing"


@dataclass(frozen=True)
class DamagedArtifact:
    """An artifact whose manifest exists but cannot be parsed (truncated, edited by hand)."""

    stage: str
    key: str
    problem: str


@dataclass(frozen=True)
class DamagedRef:
    """A ref file that cannot be parsed: what it points to is unknown."""

    pipeline: str
    stage: str
    problem: str


def _write_error(exc: OSError, what: str) -> StoreWriteError:
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return StoreWriteError(exc.errno or 0, f"cannot write {what}: {reason}")


def _rebuild_hint(stage: str) -> str:
    return (
        f"Rebuild it with `xlembed run CONFIG --force {stage}` (and `xlembed artifacts verify {stage}` "
        "lists what else is damaged)"
    )


# Local files already hashed against a manifest in this process: (path, size, mtime_ns, sha256).
_VERIFIED_LOCAL: set[tuple[str, int, int, str]] = set()


def utc_now() -> str:
    # microseconds: "the newest version" (of a ref, of a model's evaluations) must not tie when
    # two are written within one second; ISO strings of either precision still sort by time
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")


def sha256_file(path: str | Path, fs: fsspec.AbstractFileSystem | None = None) -> str:
    digest = hashlib.sha256()
    opener = fs.open(path, "rb") if fs is not None else open(path, "rb")
    with opener as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def columns_of(schema: pa.Schema) -> list[ColumnSchema]:
    return [ColumnSchema(name=f.name, type=str(f.type), nullable=f.nullable) for f in schema]


def conform(table: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """Return `table` with exactly `schema`, or fail naming the offending column."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if table.schema.equals(schema):
        return table
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in schema.names]
    if missing or extra:
        raise SchemaMismatch(f"table columns differ from the stage schema: missing {missing}, unexpected {extra}")
    table = table.select(schema.names)
    for field in schema:
        column = table.column(field.name)
        if not field.nullable and column.null_count:
            raise SchemaMismatch(f"column {field.name!r} has {column.null_count} nulls but is declared non-null")
        if column.type != field.type:
            try:
                column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatch(f"column {field.name!r} of type {column.type} cannot become {field.type}: {exc}") from exc
    return table.cast(schema)


@dataclass(frozen=True)
class ArtifactRef:
    """A small, hashable pointer to a committed artifact (what flows pass around)."""

    root: str
    stage: str
    key: str

    @property
    def uri(self) -> str:
        return f"{self.root.rstrip('/')}/{self.stage}/{self.key}"


def _refuse_glob(root: str) -> str:
    # fsspec expands these in cat/rm/expand_path: a root "runs/[ab]" would list nothing and
    # delete under runs/a and runs/b instead.
    if any(c in root for c in _GLOB_CHARS):
        raise StoreError(f"the artifact root {root!r} contains a glob character ('*', '?' or '['), which fsspec would expand")
    return root


def normalize_root(root: str | os.PathLike[str] | None) -> str:
    """A root URI: local paths become absolute `file://`-less paths; credentials are refused."""
    root = os.fspath(root) if root is not None else DEFAULT_ROOT
    if not root:
        raise StoreError("empty artifact root")
    parts = urlsplit(root)
    if parts.scheme and len(parts.scheme) > 1 and parts.scheme != "file":
        if parts.username or parts.password:
            raise StoreError("credentials in the artifact root URI are not allowed; use the AWS environment or config files")
        if parts.query or parts.fragment:
            raise StoreError("query strings and fragments are not allowed in the artifact root URI")
        return _refuse_glob(root.rstrip("/"))
    path = parts.path if parts.scheme == "file" else root
    return _refuse_glob(str(Path(path).expanduser().resolve()))


class ArtifactStore:
    """Read and write versioned artifacts under one root URI.

    A local root folder is created unless `create=False` (commands that only read use that,
    and `check_root`, so that a mistyped root is an error, not an empty store)."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.root_uri = normalize_root(root)
        # `root_path`: the root as fsspec's `fs` names it (no protocol), the base of every object path
        self.fs, self.root_path = filesystem_for(self.root_uri)
        self.is_local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))
        if self.is_local and create:
            Path(self.root_path).mkdir(parents=True, exist_ok=True)

    def check_root(self, *, must_exist: bool) -> bool:
        """Reach the root once, turning the usual failures (no such bucket, bad or missing
        credentials, an unreachable endpoint) into one-line StoreErrors naming the root and the
        fix. A bucket must always exist; with `must_exist` the root itself must too (a local
        folder; a prefix with objects under it). Returns whether the root exists."""
        if self.is_local:
            exists = Path(self.root_path).is_dir()
            if must_exist and not exists:
                raise RootNotFound(f"artifact root {self.root_uri} does not exist (set by --root, {_ROOT_SOURCES})")
            return exists
        bucket = self.root_path.split("/", 1)[0]
        try:
            self.fs.invalidate_cache(bucket)
            self.fs.ls(bucket)  # the bucket itself: empty or not, it answers
            if self.root_path == bucket:
                return True
            self.fs.invalidate_cache(self.root_path)
            exists = bool(self.fs.ls(self.root_path))
        except FileNotFoundError as exc:
            message = explain(exc, self.root_uri)
            if message is not None and "bucket" in message:
                raise RootNotFound(message) from None
            exists = False
        except Exception as exc:  # noqa: BLE001 - classified below; anything unknown propagates
            message = explain(exc, self.root_uri)
            if message is None:
                raise
            raise StoreAccessError(message) from exc
        if must_exist and not exists:
            raise RootNotFound(
                f"artifact root {self.root_uri} does not exist: nothing is stored under it (set by --root, {_ROOT_SOURCES})"
            )
        return exists

    def __repr__(self) -> str:
        return f"ArtifactStore({self.root_uri!r})"

    # ----------------------------------------------------------------- paths
    @staticmethod
    def _check_stage(stage: str) -> str:
        check_name(stage, "stage")
        if stage == REFS_DIR:
            raise InvalidNameError(f"{REFS_DIR!r} is reserved and cannot name a stage")
        return stage

    def artifact_dir(self, stage: str, key: str) -> str:
        return f"{self.root_path}/{self._check_stage(stage)}/{check_key(key)}"

    def uri(self, stage: str, key: str) -> str:
        return f"{self.root_uri}/{stage}/{key}"

    def ref(self, stage: str, key: str) -> ArtifactRef:
        return ArtifactRef(self.root_uri, stage, key)

    def _manifest_path(self, stage: str, key: str) -> str:
        return f"{self.artifact_dir(stage, key)}/{MANIFEST}"

    def _shard_path(self, stage: str, key: str, shard_id: str) -> str:
        check_name(shard_id, "shard id")
        return f"{self.artifact_dir(stage, key)}/shards/{shard_id}.json"

    def _ref_path(self, pipeline: str, stage: str) -> str:
        return f"{self.root_path}/{REFS_DIR}/{check_name(pipeline, 'pipeline')}/{check_name(stage, 'stage')}.json"

    # ------------------------------------------------------------- low level
    def _ls_fresh(self, path: str, detail: bool = False) -> list[Any]:
        """List `path` itself, not a listing cached earlier: other processes write here too
        (s3fs keeps directory listings, and the instance, for the life of the process)."""
        self.fs.invalidate_cache(path)
        return self.fs.ls(path, detail=detail)

    def _cat_existing(self, paths: list[str]) -> dict[str, bytes]:
        """Fetch many small objects at once; absent ones are left out, any other failure raises.
        (Leaving out an object that could not be read would make a committed artifact look
        uncommitted, or a referenced one unreferenced, and `gc` would delete it.)"""
        if not paths:
            return {}
        blobs = self.fs.cat(paths, on_error="return")
        out = {}
        for path in paths:
            blob = blobs.get(path)
            if blob is None:  # fsspec spelled the path differently: read it on its own
                blob = self._read_bytes(path)
            if isinstance(blob, FileNotFoundError) or blob is None:
                continue
            if isinstance(blob, BaseException):
                raise StoreError(f"cannot read {path}: {type(blob).__name__}: {blob}") from blob
            out[path] = blob
        return out

    def _read_bytes(self, path: str) -> bytes | None:
        try:
            return self.fs.cat_file(path)
        except FileNotFoundError:
            return None

    def write_object(self, path: str, data: bytes, *, exclusive: bool = False) -> bool:
        """Write a whole object at `path` (under `root_path`) at once: a reader sees the old bytes or
        the new, never a part. With `exclusive`, return False if it already exists."""
        if self.is_local:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            try:
                try:
                    with open(tmp, "wb") as f:
                        f.write(data)
                        f.flush()
                        os.fsync(f.fileno())
                except OSError as exc:
                    raise _write_error(exc, path) from exc
                if exclusive:
                    try:
                        os.link(tmp, path)  # atomic create-if-absent
                    except FileExistsError:
                        return False
                else:
                    os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            return True
        self.fs.invalidate_cache(path)
        if exclusive:
            if self.fs.exists(path):
                return False
            try:
                self.fs.pipe_file(path, data, mode="create")  # S3 conditional PUT (If-None-Match: *)
            except FileExistsError:
                return False
            except OSError as exc:
                if _precondition_failed(exc):
                    return False
                raise
            return True
        self.fs.pipe_file(path, data)
        return True

    def write_root_file(self, name: str, data: bytes) -> str:
        """Write `{root}/{name}` whole (a page such as index.html beside the stage folders)."""
        check_name(name.replace(".", "-"), "file name")
        path = f"{self.root_path}/{name}"
        self.write_object(path, data)
        return f"{self.root_uri}/{name}"

    def put_local_file(self, local: str, dest: str) -> None:
        """Place a copy of a local file at `dest` whole (temp + rename locally, one upload on S3)."""
        if self.is_local:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            tmp = f"{Path(dest).parent}/.{Path(dest).name}.tmp-{uuid.uuid4().hex}"
            try:
                shutil.copyfile(local, tmp)
                os.replace(tmp, dest)
            except OSError as exc:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise _write_error(exc, dest) from exc
        else:
            self.fs.put_file(local, dest)

    def _put_local_file(self, local: str, dest: str) -> None:
        if self.is_local:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            os.replace(local, dest)
        else:
            self.fs.put_file(local, dest)
            os.unlink(local)

    # ------------------------------------------------------------- manifests
    def is_committed(self, stage: str, key: str) -> bool:
        path = self._manifest_path(stage, key)
        if not self.is_local:
            self.fs.invalidate_cache(path)
        return self.fs.exists(path)

    def refuse_committed(self, stage: str, key: str) -> None:
        """Raise AlreadyCommitted before writing into a committed artifact: every write into an
        artifact directory checks this first, so a second builder of the same key (a concurrent
        run that finished later) never replaces a file of the version the first one committed."""
        if self.is_committed(stage, key):
            raise AlreadyCommitted(
                f"{stage}/{key[:12]} is already committed (by another run); committed artifacts are never modified"
            )

    def manifest(self, stage: str, key: str) -> Manifest:
        data = self._read_bytes(self._manifest_path(stage, key))
        if data is None:
            raise ArtifactNotFound(f"no committed artifact {stage}/{key} under {self.root_uri}")
        manifest = parse_record(Manifest, data, self._manifest_path(stage, key))
        if manifest.stage != stage or manifest.key != key:
            raise StoreError(f"manifest at {stage}/{key} claims to be {manifest.stage}/{manifest.key}")
        return manifest

    def commit(self, manifest: Manifest) -> Manifest:
        """Write `manifest.json`, making the artifact visible. The first committer wins."""
        for entry in manifest.files:
            path = f"{self.artifact_dir(manifest.stage, manifest.key)}/{entry.path}"
            self.fs.invalidate_cache(path)
            if not self.fs.exists(path):
                raise StoreError(f"refusing to commit {manifest.stage}/{manifest.key}: {entry.path} is missing")
        data = manifest.model_dump_json(indent=2).encode("utf-8")
        first = self.write_object(self._manifest_path(manifest.stage, manifest.key), data, exclusive=True)
        self._remove_checkpoints(manifest.stage, manifest.key)
        if first:
            return manifest
        log.info("artifact %s/%s was committed concurrently; keeping the first commit", manifest.stage, manifest.key)
        return self.manifest(manifest.stage, manifest.key)

    def checkpoint_files(self, stage: str, key: str) -> CheckpointFiles:
        """`{root}/_checkpoints/{stage}/{key}/`: where a build keeps state to resume from elsewhere."""
        return CheckpointFiles(self, self._check_stage(stage), key)

    def _remove_checkpoints(self, stage: str, key: str) -> None:
        # the artifact is committed: nothing will resume from them (a failure only leaves files behind)
        files = self.checkpoint_files(stage, key)
        try:
            files.remove()
        except Exception as exc:  # noqa: BLE001 - the commit stands; say what is left
            log.warning("could not remove the checkpoints of %s/%s under %s (%s: %s); delete them by hand",
                        stage, key, files.uri, type(exc).__name__, exc)  # fmt: skip

    def list_manifests(self, stage: str | None = None, damaged: list[DamagedArtifact] | None = None) -> list[Manifest]:
        """All committed artifacts, listing by prefix and fetching manifests in one batch.

        A manifest that cannot be parsed raises, unless `damaged` is given: then it is
        reported there and the other artifacts are still listed. (A manifest that cannot be
        read at all always raises: `gc` must not take it for an absent one.)"""
        stages = [self._check_stage(stage)] if stage else self.stages()
        paths: dict[str, tuple[str, str]] = {}
        for name in stages:
            try:
                entries = self._ls_fresh(f"{self.root_path}/{name}")
            except FileNotFoundError:
                continue
            for entry in entries:
                key = entry.rstrip("/").rsplit("/", 1)[-1]
                if KEY_PATTERN.match(key):
                    paths[f"{self.root_path}/{name}/{key}/{MANIFEST}"] = (name, key)
        if not paths:
            return []
        blobs = self._cat_existing(list(paths))
        manifests = []
        for path, (name, key) in paths.items():
            blob = blobs.get(path)
            if blob is None:
                continue
            try:
                manifest = parse_record(Manifest, blob, path)
            except StoreError as exc:
                if damaged is None:
                    raise
                damaged.append(DamagedArtifact(name, key, str(exc)))
                continue
            if (manifest.stage, manifest.key) != (name, key):  # as manifest() refuses it
                log.warning("ignoring %s/%s: its manifest claims to be %s/%s", name, key, manifest.stage, manifest.key)
                continue
            manifests.append(manifest)
        return sorted(manifests, key=lambda m: (m.stage, m.created_at))

    def stages(self) -> list[str]:
        try:
            entries = self._ls_fresh(self.root_path, detail=True)
        except FileNotFoundError:
            return []
        names = [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"]
        return sorted(n for n in names if n not in (REFS_DIR, CHECKPOINTS_DIR) and not n.startswith("."))

    def resolve(self, stage: str, key_or_prefix: str) -> str:
        """A full key from a unique prefix (as git does with commit ids)."""
        if len(key_or_prefix) == 64:
            return check_key(key_or_prefix)
        matches = [m.key for m in self.list_manifests(stage) if m.key.startswith(key_or_prefix)]
        if not matches:
            raise ArtifactNotFound(f"no committed {stage} artifact with key starting {key_or_prefix!r}")
        if len(matches) > 1:
            raise StoreError(f"key prefix {key_or_prefix!r} is ambiguous: {', '.join(k[:12] for k in matches)}")
        return matches[0]

    # ----------------------------------------------------------------- shards
    def completed_shard(self, stage: str, key: str, shard_id: str) -> ShardRecord | None:
        """The shard's record if it finished earlier and all its files are present."""
        path = self._shard_path(stage, key, shard_id)
        if not self.is_local:
            self.fs.invalidate_cache(path)
        data = self._read_bytes(path)
        if data is None:
            return None
        record = parse_record(ShardRecord, data, path)
        base = self.artifact_dir(stage, key)
        for entry in record.files:
            self.fs.invalidate_cache(f"{base}/{entry.path}")
            try:
                size = self.fs.size(f"{base}/{entry.path}")
            except FileNotFoundError:
                return None
            if size != entry.bytes:
                return None
        return record

    def write_shard_files(
        self,
        stage: str,
        key: str,
        shard_id: str,
        tables: Iterable[pa.Table | pa.RecordBatch],
        schema: pa.Schema,
        *,
        max_rows_per_file: int = MAX_ROWS_PER_FILE,
    ) -> list[FileEntry]:
        """Stream tables into zstd Parquet part files; each file appears whole or not at all."""
        check_name(shard_id, "shard id")
        self.refuse_committed(stage, key)
        base = self.artifact_dir(stage, key)
        entries: list[FileEntry] = []
        writer: _PartWriter | None = None
        part = 0

        def open_part() -> _PartWriter:
            rel = f"data/{shard_id}-{part:05d}.parquet"
            return _PartWriter(self, f"{base}/{rel}", rel, schema, lambda: self.refuse_committed(stage, key))

        try:
            for table in tables:
                table = conform(table, schema)
                offset = 0
                while offset < table.num_rows:
                    if writer is None:
                        writer = open_part()
                    take = min(table.num_rows - offset, max_rows_per_file - writer.rows)
                    writer.write(table.slice(offset, take))
                    offset += take
                    if writer.rows >= max_rows_per_file:
                        entries.append(writer.close())
                        writer, part = None, part + 1
            if writer is not None and writer.rows:
                entries.append(writer.close())
                writer = None
            if not entries:  # an empty shard still records the schema
                writer = open_part()
                entries.append(writer.close())
                writer = None
        finally:
            if writer is not None:
                writer.abort()
        return entries

    def write_attached_files(self, stage: str, key: str, files: Mapping[str, str | os.PathLike[str]]) -> list[FileEntry]:
        """Upload local files (model weights, tokenizer, a report) as `files/{name}` of an artifact."""
        base = self.artifact_dir(stage, key)
        entries = []
        for name, local in sorted(files.items()):
            self.refuse_committed(stage, key)
            rel = f"files/{name}"
            FileEntry(path=rel, bytes=0, sha256="0" * 64)  # validates the name: relative, no '..'
            local = os.fspath(local)
            digest, size = sha256_file(local), os.path.getsize(local)
            self.put_local_file(local, f"{base}/{rel}")
            entries.append(FileEntry(path=rel, rows=None, bytes=size, sha256=digest))
        return entries

    def attached_dir(self, stage: str, key: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
        """A local folder holding an artifact's attached files (`files/`), for libraries that
        want a directory (transformers). Local stores return the folder itself; remote ones
        download it once into `cache_dir/{stage}/{key}`, verifying checksums."""
        manifest = self.manifest(stage, key)
        base = self.artifact_dir(stage, key)
        if self.is_local:
            for entry in manifest.attached_files:
                self._check_local(stage, key, entry, f"{base}/{entry.path}")
            return Path(base) / "files"
        target = Path(cache_dir or Path(tempfile.gettempdir()) / "xlembed-artifacts") / stage / key
        for entry in manifest.attached_files:
            local = target / entry.path.removeprefix("files/")
            if local.exists() and local.stat().st_size == entry.bytes and sha256_file(local) == entry.sha256:
                continue
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_name(f".{local.name}.tmp-{uuid.uuid4().hex}")
            self.fs.get_file(f"{base}/{entry.path}", str(tmp))
            if sha256_file(tmp) != entry.sha256:
                tmp.unlink()
                raise StoreError(f"{stage}/{key}/{entry.path}: checksum mismatch after download")
            os.replace(tmp, local)
        return target

    def commit_shard(self, stage: str, key: str, record: ShardRecord) -> ShardRecord:
        self.refuse_committed(stage, key)
        self.write_object(self._shard_path(stage, key, record.shard_id), record.model_dump_json().encode("utf-8"))
        return record

    # ------------------------------------------------------------------ reads
    def files(self, stage: str, key: str) -> list[str]:
        """Paths of the artifact's Parquet data files (attached files are not tables)."""
        manifest = self.manifest(stage, key)
        base = self.artifact_dir(stage, key)
        return [f"{base}/{f.path}" for f in manifest.table_files]

    def read_table(self, stage: str, key: str, columns: list[str] | None = None) -> pa.Table:
        """The artifact's rows; every file is checked against the manifest before it is parsed."""
        tables = []
        for entry, path in self._table_entries(stage, key):
            with self._verified_copy(stage, key, entry, path) as local:
                tables.append(pq.read_table(local, columns=columns))
        return pa.concat_tables(tables) if tables else pa.table({})

    def iter_batches(
        self, stage: str, key: str, columns: list[str] | None = None, batch_size: int = 65_536
    ) -> Iterator[pa.RecordBatch]:
        """Stream an artifact without loading it whole (one part file at a time, each checked first)."""
        for entry, path in self._table_entries(stage, key):
            with self._verified_copy(stage, key, entry, path) as local, open(local, "rb") as f:
                yield from pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=columns)

    def _table_entries(self, stage: str, key: str) -> list[tuple[FileEntry, str]]:
        manifest = self.manifest(stage, key)
        base = self.artifact_dir(stage, key)
        return [(f, f"{base}/{f.path}") for f in manifest.table_files]

    def _check_local(self, stage: str, key: str, entry: FileEntry, path: str) -> None:
        """Size and sha256 of a local file against its manifest entry (hashed once per process
        while its size and mtime stay the same); CorruptArtifact if it differs or is missing."""
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            raise CorruptArtifact(f"{stage}/{key}/{entry.path} is missing; not read. {_rebuild_hint(stage)}") from None
        seen = (path, stat.st_size, stat.st_mtime_ns, entry.sha256)
        if seen in _VERIFIED_LOCAL:
            return
        if stat.st_size != entry.bytes or sha256_file(path) != entry.sha256:
            raise CorruptArtifact(
                f"{stage}/{key}/{entry.path} does not match its manifest ({stat.st_size} bytes, manifest says {entry.bytes}; "
                f"or its sha256 differs): the artifact is corrupt and was not read. {_rebuild_hint(stage)}"
            )
        _VERIFIED_LOCAL.add(seen)

    @contextlib.contextmanager
    def _verified_copy(self, stage: str, key: str, entry: FileEntry, path: str) -> Iterator[str]:
        """A local path to the file's bytes, checked against the manifest before anyone parses them
        (remote files are downloaded once into a temporary file and checked there)."""
        if self.is_local:
            self._check_local(stage, key, entry, path)
            yield path
            return
        fd, tmp = tempfile.mkstemp(prefix=".read-", suffix=".parquet")
        os.close(fd)
        try:
            try:
                self.fs.get_file(path, tmp)
            except FileNotFoundError:
                raise CorruptArtifact(f"{stage}/{key}/{entry.path} is missing; not read. {_rebuild_hint(stage)}") from None
            size = os.path.getsize(tmp)
            if size != entry.bytes or sha256_file(tmp) != entry.sha256:
                raise CorruptArtifact(
                    f"{stage}/{key}/{entry.path} does not match its manifest ({size} bytes, manifest says {entry.bytes}; "
                    f"or its sha256 differs): the artifact is corrupt and was not read. {_rebuild_hint(stage)}"
                )
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def size_problems(self, stage: str, key: str) -> list[str]:
        """A cheap check of a committed artifact: each file is there with its manifest's size
        (no hashing; one listing on object stores). Problems found, as `verify` words them."""
        try:
            manifest = self.manifest(stage, key)
        except StoreError as exc:
            return [str(exc)]
        base = self.artifact_dir(stage, key)
        if self.is_local:
            sizes = {}
            for entry in manifest.files:
                with contextlib.suppress(FileNotFoundError):
                    sizes[entry.path] = os.stat(f"{base}/{entry.path}").st_size
        else:
            self.fs.invalidate_cache(base)
            listing = self.fs.find(base, detail=True)
            sizes = {path[len(base) + 1 :]: info.get("size") for path, info in listing.items()}
        problems = []
        for entry in manifest.files:
            size = sizes.get(entry.path)
            if size is None:
                problems.append(f"{entry.path}: missing")
            elif size != entry.bytes:
                problems.append(f"{entry.path}: {size} bytes, manifest says {entry.bytes}")
        return problems

    def verify(self, stage: str, key: str) -> list[str]:
        """Re-hash every file against the manifest; return the problems found (empty = sound)."""
        manifest = self.manifest(stage, key)
        base = self.artifact_dir(stage, key)
        problems = []
        for entry in manifest.files:
            path = f"{base}/{entry.path}"
            self.fs.invalidate_cache(path)  # sizes from a cached listing would hide changes
            try:
                size = self.fs.size(path)
                if size != entry.bytes:
                    problems.append(f"{entry.path}: {size} bytes, manifest says {entry.bytes}")
                    continue
                digest = sha256_file(path, self.fs)
            except FileNotFoundError:
                problems.append(f"{entry.path}: missing")
                continue
            if digest != entry.sha256:
                problems.append(f"{entry.path}: sha256 {digest[:16]}…, manifest says {entry.sha256[:16]}…")
                continue
            if entry.rows is None:  # an attached file: the checksum is all there is to check
                continue
            try:
                with self.fs.open(path, "rb") as f:
                    rows = pq.ParquetFile(f).metadata.num_rows
            except Exception as exc:  # noqa: BLE001 - any parse failure is a finding, not a crash
                problems.append(f"{entry.path}: unreadable Parquet ({exc})")
                continue
            if rows != entry.rows:
                problems.append(f"{entry.path}: {rows} rows, manifest says {entry.rows}")
        return problems

    # ------------------------------------------------------------------- refs
    def read_ref(self, pipeline: str, stage: str) -> Ref | None:
        path = self._ref_path(pipeline, stage)
        data = self._read_bytes(path)
        return parse_record(Ref, data, path) if data is not None else None

    def set_ref(self, pipeline: str, stage: str, key: str, note: str = "", *, expected: str | None | object = ANY_VALUE) -> Ref:
        """Point `refs/{pipeline}/{stage}` at a committed key; the old value stays in the history.

        `expected`: the key the caller read before (None: no ref yet). If the ref moved meanwhile
        to anything but `key`, nothing is written and RefConflict names both keys (a ref moves
        only by compare-and-swap, as git's `update-ref KEY OLD` does)."""
        if not self.is_committed(stage, key):
            raise ArtifactNotFound(f"cannot point {pipeline}/{stage} at uncommitted {stage}/{key}")
        rebuild_of = self.manifest(stage, key).rebuild_of

        def change(current: Ref | None) -> Ref | None:
            if current is not None and current.key == key:
                return None
            was = current.key if current is not None else None
            if expected is not ANY_VALUE and was != expected:
                raise RefConflict(
                    f"refs/{pipeline}/{stage} moved from {_short(expected)} to {_short(was)} while this run built {key[:12]}; "
                    f"the ref was left as it is and {stage}/{key[:12]} is kept: "
                    f"`xlembed artifacts rollback {pipeline} {stage} --to {key[:12]}` points it there"
                )
            entry = RefEntry(key=key, at=utc_now(), note=note, config_key=rebuild_of)
            history = [entry] + (current.history if current else [])
            return Ref(pipeline=pipeline, stage=stage, key=key, history=history[:REF_HISTORY_LIMIT])

        return update_ref(self, pipeline, stage, change)

    def write_ref(self, ref: Ref) -> Ref:
        """Store a ref as given (history included), unconditionally: for tests and repairs;
        copies between stores go through `storage.transfer.copy_refs`, which merges."""
        if not self.is_committed(ref.stage, ref.key):
            raise ArtifactNotFound(f"cannot write ref {ref.pipeline}/{ref.stage}: {ref.stage}/{ref.key} is not committed here")
        self.write_object(self._ref_path(ref.pipeline, ref.stage), ref.model_dump_json(indent=2).encode("utf-8"))
        return ref

    def list_refs(self, damaged: list[DamagedRef] | None = None) -> list[Ref]:
        """Every ref. A ref file that cannot be parsed raises, unless `damaged` is given: then it
        is reported there and the others are still listed."""
        base = f"{self.root_path}/{REFS_DIR}"
        self.fs.invalidate_cache(base)
        try:
            paths = [p for p in self.fs.find(base) if p.endswith(".json")]
        except FileNotFoundError:
            return []
        blobs = self._cat_existing(paths)
        refs = []
        for path, blob in blobs.items():
            try:
                refs.append(parse_record(Ref, blob, path))
            except StoreError as exc:
                if damaged is None:
                    raise
                pipeline, _, stage = path[len(base) + 1 :].removesuffix(".json").partition("/")
                damaged.append(DamagedRef(pipeline, stage, str(exc)))
        return sorted(refs, key=lambda r: (r.pipeline, r.stage))

    def read_versioned(self, path: str) -> tuple[bytes | None, Any]:
        """An object's bytes and a token for `write_if_unchanged` (local: the bytes; S3: the ETag)."""
        if self.is_local:
            data = self._read_bytes(path)
            return data, data
        self.fs.invalidate_cache(path)
        try:
            etag = self.fs.info(path)["ETag"]
        except FileNotFoundError:
            return None, None
        # read after the ETag: if the object changed in between, the conditional write fails
        return self._read_bytes(path), etag

    def write_if_unchanged(self, path: str, data: bytes, token: Any) -> bool:
        """Replace the object at `path` only if it is still what `read_versioned` returned with
        `token` (None: only if it does not exist). False when it changed. Local roots compare
        under an exclusive lock of `{root}/refs/.lock`; S3 uses conditional PUTs (If-Match /
        If-None-Match), so no lock is needed across machines."""
        if self.is_local:
            with self._refs_lock():
                if self._read_bytes(path) != token:
                    return False
                self.write_object(path, data)
                return True
        if token is None:
            return self.write_object(path, data, exclusive=True)
        bucket, key, _ = self.fs.split_path(path)
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfMatch=token)
        except (FileExistsError, FileNotFoundError):
            return False
        except OSError as exc:
            if _precondition_failed(exc):
                return False
            raise
        self.fs.invalidate_cache(path)
        return True

    @contextlib.contextmanager
    def _refs_lock(self) -> Iterator[None]:
        import fcntl

        folder = Path(self.root_path) / REFS_DIR
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # ------------------------------------------------------------ maintenance
    def delete(self, stage: str, key: str) -> None:
        """Uncommit first (remove the manifest), then the files, so readers never see a torso.
        Only `gc` calls this: no build deletes or rewrites a committed artifact."""
        base = self.artifact_dir(stage, key)
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(f"{base}/{MANIFEST}")
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(base, recursive=True)

    def uncommitted_keys(self, committed: set[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
        """Artifact directories without a manifest: interrupted or in-progress runs. `committed`:
        the (stage, key) pairs known to have a manifest, damaged ones included."""
        if committed is None:
            damaged: list[DamagedArtifact] = []
            committed = {(m.stage, m.key) for m in self.list_manifests(damaged=damaged)}
            committed |= {(d.stage, d.key) for d in damaged}
        found = []
        for stage in self.stages():
            try:
                entries = self._ls_fresh(f"{self.root_path}/{stage}")
            except FileNotFoundError:  # removed meanwhile
                continue
            for entry in entries:
                key = entry.rstrip("/").rsplit("/", 1)[-1]
                if KEY_PATTERN.match(key) and (stage, key) not in committed:
                    found.append((stage, key))
        return found

    def garbage(
        self, keep_history: bool = False, include_partial: bool = False, skipped: list[str] | None = None
    ) -> list[tuple[str, str]]:
        """Artifacts that no ref points to (nothing is deleted here).

        What cannot be judged is kept and said in `skipped` (one line each): an artifact whose
        manifest is damaged, and every artifact of a stage one of whose refs is malformed
        (what that ref points to is unknown)."""
        damaged_refs: list[DamagedRef] = []
        damaged: list[DamagedArtifact] = []
        referenced: set[tuple[str, str]] = set()
        for ref in self.list_refs(damaged=damaged_refs):
            referenced.add((ref.stage, ref.key))
            if keep_history:
                referenced.update((ref.stage, h.key) for h in ref.history)
        manifests = self.list_manifests(damaged=damaged)
        protected = {d.stage for d in damaged_refs}
        notes = [f"refs/{d.pipeline}/{d.stage} is malformed ({d.problem}): every {d.stage} artifact kept" for d in damaged_refs]
        notes += [f"{d.stage}/{d.key[:12]} kept: {d.problem}" for d in damaged]
        doomed = [(m.stage, m.key) for m in manifests if (m.stage, m.key) not in referenced and m.stage not in protected]
        if include_partial:
            committed = {(m.stage, m.key) for m in manifests} | {(d.stage, d.key) for d in damaged}
            doomed += [(stage, key) for stage, key in self.uncommitted_keys(committed) if stage not in protected]
        if skipped is not None:
            skipped.extend(notes)
        return doomed


class _PartWriter:
    """One Parquet part file written to a temporary file, then moved into place whole."""

    def __init__(self, store: ArtifactStore, dest: str, rel: str, schema: pa.Schema, guard: Callable[[], None]) -> None:
        # `guard` runs before the file is put in place: a long shard may finish after another
        # run committed the same artifact, and must not replace a file of that commit
        self.store, self.dest, self.rel, self.schema, self.guard = store, dest, rel, schema, guard
        if store.is_local:
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            directory = str(Path(dest).parent)
        else:
            directory = None
        fd, self.tmp = tempfile.mkstemp(prefix=".part-", suffix=".parquet.tmp", dir=directory)
        os.close(fd)
        self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        try:
            self.writer.write_table(table)
        except OSError as exc:
            raise _write_error(exc, f"{self.dest} (temporary file {self.tmp})") from exc
        self.rows += table.num_rows

    def close(self) -> FileEntry:
        try:
            self.writer.close()
        except OSError as exc:
            raise _write_error(exc, f"{self.dest} (temporary file {self.tmp})") from exc
        entry = FileEntry(path=self.rel, rows=self.rows, bytes=os.path.getsize(self.tmp), sha256=sha256_file(self.tmp))
        self.guard()
        self.store._put_local_file(self.tmp, self.dest)
        return entry

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)
