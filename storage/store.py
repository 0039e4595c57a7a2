"""The artifact store: versioned Parquet artifacts on any fsspec filesystem.

Layout under a root (a local folder or `s3://bucket/prefix`)::

    {root}/{stage}/{key}/data/{shard}-{part}.parquet   data files (zstd Parquet)
    {root}/{stage}/{key}/shards/{shard}.json           shard done markers (written after the data)
    {root}/{stage}/{key}/manifest.json                 commit marker (written last)
    {root}/refs/{pipeline}/{stage}.json                named pointers with history
    {root}/_checkpoints/{stage}/{key}/...              a build's resumable state until it commits
                                                       (storage/checkpoint_files.py)
    {root}/_locks/{stage}/{key}/{holder}.json          a running build's hold on a key: gc keeps it
                                                       (storage/build_locks.py)
    {root}/_scratch/{pid}-{host}-{nonce}/...           a pull's scratch copies (storage/transfer.py)

Every object is written whole (local: temp file + rename; S3: one PUT), so a reader never
sees a half-written file; an artifact without `manifest.json` does not exist for readers.
This module knows nothing about what the tables mean.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from storage.backends import StorageBackend, backend_for, sha256_file, write_error
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
    filesystem_for,
)
from storage.file_checks import check_file, missing_file
from storage.keys import KEY_PATTERN, check_key, check_name
from storage.layout import CHECKPOINTS_DIR, MANIFEST, NOT_STAGES, REFS_DIR, REFS_LOCK_FILE, check_stage
from storage.manifest import ColumnSchema, DamagedArtifact, FileEntry, Manifest, ShardRecord, parse_record

__all__ = [  # re-exported: callers import them from here
    "AlreadyCommitted",
    "ArtifactNotFound",
    "CorruptArtifact",
    "DamagedArtifact",
    "RefConflict",
    "RootNotFound",
    "SchemaMismatch",
    "StoreAccessError",
    "StoreError",
    "StoreWriteError",
    "sha256_file",
]

log = logging.getLogger(__name__)

DEFAULT_ROOT = "artifacts"
MAX_ROWS_PER_FILE = 1_000_000
_GLOB_CHARS = "*?["


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
    and `check_root`, so that a mistyped root is an error, not an empty store). How bytes reach
    the root (local disk or an object store) is the backend's business (storage/backends.py):
    objects by path are read and written through `store.backend` (paths under `root_path`;
    every write lands whole, every read and listing goes to the root, not to a cache).
    The store writes, commits and reads artifacts (every read checked against the manifest);
    the operations built on it take it as their first argument where they are defined: refs
    (storage/refs.py), build locks (storage/build_locks.py), checkpoint files
    (storage/checkpoint_files.py), audits (storage/verify.py) and garbage collection
    (storage/gc.py). None of them is imported here."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.root_uri = normalize_root(root)
        # `root_path`: the root as fsspec's `fs` names it (no protocol), the base of every object path
        fs, self.root_path = filesystem_for(self.root_uri)
        self.backend: StorageBackend = backend_for(fs, self.root_path, f"{self.root_path}/{REFS_DIR}/{REFS_LOCK_FILE}")
        if create:
            self.backend.prepare_root()

    def check_root(self, *, must_exist: bool) -> bool:
        """Reach the root once, turning the usual failures (no such bucket, bad or missing
        credentials, an unreachable endpoint) into one-line StoreErrors naming the root and the
        fix. A bucket must always exist; with `must_exist` the root itself must too (a local
        folder; a prefix with objects under it). Returns whether the root exists."""
        return self.backend.check_root(self.root_uri, must_exist=must_exist)

    def __repr__(self) -> str:
        return f"ArtifactStore({self.root_uri!r})"

    # ----------------------------------------------------------------- paths
    def artifact_dir(self, stage: str, key: str) -> str:
        return f"{self.root_path}/{check_stage(stage)}/{check_key(key)}"

    def uri(self, stage: str, key: str) -> str:
        return f"{self.root_uri}/{stage}/{key}"

    def ref(self, stage: str, key: str) -> ArtifactRef:
        return ArtifactRef(self.root_uri, stage, key)

    def url(self, name: str) -> str:
        """A link to `{root}/{name}`: a file:// URI for a local root, s3://... for a bucket."""
        return self.backend.url(self.root_uri, name)

    def manifest_path(self, stage: str, key: str) -> str:
        return f"{self.artifact_dir(stage, key)}/{MANIFEST}"

    def _shard_path(self, stage: str, key: str, shard_id: str) -> str:
        check_name(shard_id, "shard id")
        return f"{self.artifact_dir(stage, key)}/shards/{shard_id}.json"

    def write_root_file(self, name: str, data: bytes) -> str:
        """Write `{root}/{name}` whole (a page such as index.html beside the stage folders)."""
        check_name(name.replace(".", "-"), "file name")
        path = f"{self.root_path}/{name}"
        self.backend.write_object(path, data)
        return f"{self.root_uri}/{name}"

    # ------------------------------------------------------------- manifests
    def is_committed(self, stage: str, key: str) -> bool:
        return self.backend.exists(self.manifest_path(stage, key))

    def refuse_committed(self, stage: str, key: str) -> None:
        """Raise AlreadyCommitted before writing into a committed artifact: every write into an
        artifact directory checks this first, so a second builder of the same key (a concurrent
        run that finished later) never replaces a file of the version the first one committed."""
        if self.is_committed(stage, key):
            raise AlreadyCommitted(
                f"{stage}/{key[:12]} is already committed (by another run); committed artifacts are never modified"
            )

    def manifest(self, stage: str, key: str) -> Manifest:
        path = self.manifest_path(stage, key)
        data = self.backend.read_bytes(path)
        if data is None:
            raise ArtifactNotFound(f"no committed artifact {stage}/{key} under {self.root_uri}")
        manifest = parse_record(Manifest, data, path)
        if manifest.stage != stage or manifest.key != key:
            raise StoreError(f"manifest at {stage}/{key} claims to be {manifest.stage}/{manifest.key}")
        return manifest

    def commit(self, manifest: Manifest) -> Manifest:
        """Write `manifest.json`, making the artifact visible. The first committer wins."""
        for entry in manifest.files:
            if not self.backend.exists(f"{self.artifact_dir(manifest.stage, manifest.key)}/{entry.path}"):
                raise StoreError(f"refusing to commit {manifest.stage}/{manifest.key}: {entry.path} is missing")
        data = manifest.model_dump_json(indent=2).encode("utf-8")
        first = self.backend.write_object(self.manifest_path(manifest.stage, manifest.key), data, exclusive=True)
        self._remove_checkpoints(manifest.stage, manifest.key)
        if first:
            return manifest
        log.info("artifact %s/%s was committed concurrently; keeping the first commit", manifest.stage, manifest.key)
        return self.manifest(manifest.stage, manifest.key)

    def _remove_checkpoints(self, stage: str, key: str) -> None:
        # the artifact is committed: nothing will resume from its checkpoint files
        # (storage/checkpoint_files.py); a failure only leaves files behind
        folder = f"{CHECKPOINTS_DIR}/{check_stage(stage)}/{check_key(key)}"
        try:
            self.backend.remove(f"{self.root_path}/{folder}")
        except Exception as exc:  # noqa: BLE001 - the commit stands; say what is left
            log.warning("could not remove the checkpoints of %s/%s under %s/%s (%s: %s); delete them by hand",
                        stage, key, self.root_uri, folder, type(exc).__name__, exc)  # fmt: skip

    def list_manifests(self, stage: str | None = None, damaged: list[DamagedArtifact] | None = None) -> list[Manifest]:
        """All committed artifacts, listing by prefix and fetching manifests in one batch.

        A manifest that cannot be parsed raises, unless `damaged` is given: then it is
        reported there and the other artifacts are still listed. (A manifest that cannot be
        read at all always raises: `gc` must not take it for an absent one.)"""
        stages = [check_stage(stage)] if stage else self.stages()
        paths: dict[str, tuple[str, str]] = {}
        for name in stages:
            try:
                entries = self.backend.ls(f"{self.root_path}/{name}")
            except FileNotFoundError:
                continue
            for entry in entries:
                key = entry.rstrip("/").rsplit("/", 1)[-1]
                if KEY_PATTERN.match(key):
                    paths[f"{self.root_path}/{name}/{key}/{MANIFEST}"] = (name, key)
        if not paths:
            return []
        blobs = self.backend.read_many(list(paths))
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
            entries = self.backend.ls(self.root_path, detail=True)
        except FileNotFoundError:
            return []
        names = [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"]
        return sorted(n for n in names if n not in NOT_STAGES and not n.startswith("."))

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
        data = self.backend.read_bytes(path)
        if data is None:
            return None
        record = parse_record(ShardRecord, data, path)
        base = self.artifact_dir(stage, key)
        for entry in record.files:
            try:
                size = self.backend.size(f"{base}/{entry.path}")
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
            self.backend.copy_local_file(local, f"{base}/{rel}")
            entries.append(FileEntry(path=rel, rows=None, bytes=size, sha256=digest))
        return entries

    def attached_dir(self, stage: str, key: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
        """A local folder holding an artifact's attached files (`files/`), for libraries that
        want a directory (transformers), each checked against the manifest. Local stores return
        the folder itself; remote ones download it once into `cache_dir/{stage}/{key}` (files
        already there and whole are kept)."""
        manifest = self.manifest(stage, key)
        entries = {entry.path.removeprefix("files/"): entry for entry in manifest.attached_files}
        cache = Path(cache_dir or Path(tempfile.gettempdir()) / "xlembed-artifacts") / stage / key

        def check(name: str, local: str, lasting: bool) -> None:
            check_file(stage, key, entries[name], local, lasting)

        return self.backend.local_folder(f"{self.artifact_dir(stage, key)}/files", sorted(entries), cache, check)

    def commit_shard(self, stage: str, key: str, record: ShardRecord) -> ShardRecord:
        self.refuse_committed(stage, key)
        self.backend.write_object(self._shard_path(stage, key, record.shard_id), record.model_dump_json().encode("utf-8"))
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
        for entry in self.manifest(stage, key).table_files:
            with self.verified_path(stage, key, entry) as local:
                tables.append(pq.read_table(local, columns=columns))
        return pa.concat_tables(tables) if tables else pa.table({})

    def iter_batches(
        self, stage: str, key: str, columns: list[str] | None = None, batch_size: int = 65_536
    ) -> Iterator[pa.RecordBatch]:
        """Stream an artifact without loading it whole (one part file at a time, each checked first)."""
        for entry in self.manifest(stage, key).table_files:
            with self.verified_path(stage, key, entry) as local, open(local, "rb") as f:
                yield from pq.ParquetFile(f).iter_batches(batch_size=batch_size, columns=columns)

    @contextlib.contextmanager
    def verified_path(self, stage: str, key: str, entry: FileEntry) -> Iterator[str]:
        """A local path to a committed file's bytes, checked against its manifest entry before
        anyone parses them (CorruptArtifact if it differs or is missing)."""
        path = f"{self.artifact_dir(stage, key)}/{entry.path}"
        with contextlib.ExitStack() as stack:
            try:
                local = stack.enter_context(
                    self.backend.verified_path(path, lambda local, lasting: check_file(stage, key, entry, local, lasting))
                )
            except FileNotFoundError:
                raise missing_file(stage, key, entry) from None
            yield local

    def fetch_verified(self, stage: str, key: str, entry: FileEntry, local: str) -> None:
        """Copy a committed file to `local`, checked against its manifest entry."""
        try:
            self.backend.download(f"{self.artifact_dir(stage, key)}/{entry.path}", local)
        except FileNotFoundError:
            raise missing_file(stage, key, entry) from None
        check_file(stage, key, entry, local, lasting=False)

    def file_sizes(self, stage: str, key: str, names: Iterable[str]) -> dict[str, int]:
        """The sizes of the named files of an artifact (paths relative to it), as stored now;
        a missing file is left out (one listing on object stores, no hashing)."""
        return self.backend.sizes(self.artifact_dir(stage, key), names)

    def relative(self, path: str) -> str:
        """A path under the root as the user reads it: relative to the root."""
        return path[len(self.root_path) :].lstrip("/") if path.startswith(self.root_path) else path


class _PartWriter:
    """One Parquet part file written to a temporary file, then moved into place whole."""

    def __init__(self, store: ArtifactStore, dest: str, rel: str, schema: pa.Schema, guard: Callable[[], None]) -> None:
        # `guard` runs before the file is put in place: a long shard may finish after another
        # run committed the same artifact, and must not replace a file of that commit
        self.store, self.dest, self.rel, self.schema, self.guard = store, dest, rel, schema, guard
        fd, self.tmp = tempfile.mkstemp(prefix=".part-", suffix=".parquet.tmp", dir=store.backend.part_file_dir(dest))
        os.close(fd)
        self.writer = pq.ParquetWriter(self.tmp, schema, compression="zstd")
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        try:
            self.writer.write_table(table)
        except OSError as exc:
            raise write_error(exc, f"{self.dest} (temporary file {self.tmp})") from exc
        self.rows += table.num_rows

    def close(self) -> FileEntry:
        try:
            self.writer.close()
        except OSError as exc:
            raise write_error(exc, f"{self.dest} (temporary file {self.tmp})") from exc
        entry = FileEntry(path=self.rel, rows=self.rows, bytes=os.path.getsize(self.tmp), sha256=sha256_file(self.tmp))
        self.guard()
        self.store.backend.move_local_file(self.tmp, self.dest)
        return entry

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)
