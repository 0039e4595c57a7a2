"""Checking stored files against their manifest: before a read parses them, before a copy
sends them on, and on demand (`xlembed artifacts verify`).

A reader never parses bytes that differ from the manifest: `verified_path` hands out a local
path only after the size and sha256 match (a local root's file is checked in place, once per
process while its size and mtime stay the same; a remote one is downloaded and checked).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from storage.backends import sha256_file
from storage.errors import CorruptArtifact, StoreError
from storage.manifest import FileEntry

if TYPE_CHECKING:
    from storage.store import ArtifactStore

# Local files already hashed against a manifest in this process: (path, size, mtime_ns, sha256).
_VERIFIED_LOCAL: set[tuple[str, int, int, str]] = set()


def rebuild_hint(stage: str) -> str:
    return (
        f"Rebuild it with `xlembed run CONFIG --force {stage}` (and `xlembed artifacts verify {stage}` "
        "lists what else is damaged)"
    )


def _missing(stage: str, key: str, entry: FileEntry) -> CorruptArtifact:
    return CorruptArtifact(f"{stage}/{key}/{entry.path} is missing; not read. {rebuild_hint(stage)}")


def check_file(stage: str, key: str, entry: FileEntry, local: str, lasting: bool) -> None:
    """Size and sha256 of a local file against its manifest entry; CorruptArtifact if it differs
    or is missing. `lasting`: the file is the stored one itself, so a match is remembered while
    its size and mtime stay the same (a temporary copy is hashed every time)."""
    try:
        stat = os.stat(local)
    except FileNotFoundError:
        raise _missing(stage, key, entry) from None
    seen = (local, stat.st_size, stat.st_mtime_ns, entry.sha256)
    if lasting and seen in _VERIFIED_LOCAL:
        return
    if stat.st_size != entry.bytes or sha256_file(local) != entry.sha256:
        raise CorruptArtifact(
            f"{stage}/{key}/{entry.path} does not match its manifest ({stat.st_size} bytes, manifest says {entry.bytes}; "
            f"or its sha256 differs): the artifact is corrupt and was not read. {rebuild_hint(stage)}"
        )
    if lasting:
        _VERIFIED_LOCAL.add(seen)


@contextlib.contextmanager
def verified_path(store: ArtifactStore, stage: str, key: str, entry: FileEntry) -> Iterator[str]:
    """A local path to the file's bytes, checked against the manifest before anyone parses them."""
    path = f"{store.artifact_dir(stage, key)}/{entry.path}"
    with contextlib.ExitStack() as stack:
        try:
            local = stack.enter_context(
                store.backend.verified_path(path, lambda local, lasting: check_file(stage, key, entry, local, lasting))
            )
        except FileNotFoundError:
            raise _missing(stage, key, entry) from None
        yield local


def fetch_verified(store: ArtifactStore, stage: str, key: str, entry: FileEntry, local: str) -> None:
    """Copy one file of a committed artifact to `local`, checked against its manifest entry."""
    try:
        store.backend.download(f"{store.artifact_dir(stage, key)}/{entry.path}", local)
    except FileNotFoundError:
        raise _missing(stage, key, entry) from None
    check_file(stage, key, entry, local, lasting=False)


def attached_dir(store: ArtifactStore, stage: str, key: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    """A local folder holding the artifact's attached files (`files/`), each checked against the
    manifest: the folder itself on a local root, else a download into `cache_dir/{stage}/{key}`
    (files already there and whole are kept)."""
    import tempfile

    manifest = store.manifest(stage, key)
    entries = {entry.path.removeprefix("files/"): entry for entry in manifest.attached_files}
    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "xlembed-artifacts") / stage / key

    def check(name: str, local: str, lasting: bool) -> None:
        check_file(stage, key, entries[name], local, lasting)

    return store.backend.local_folder(f"{store.artifact_dir(stage, key)}/files", sorted(entries), cache, check)


def size_problems(store: ArtifactStore, stage: str, key: str) -> list[str]:
    """A cheap check of a committed artifact: each file is there with its manifest's size
    (no hashing; one listing on object stores). Problems found, as `verify` words them."""
    try:
        manifest = store.manifest(stage, key)
    except StoreError as exc:
        return [str(exc)]
    sizes = store.file_sizes(stage, key, [entry.path for entry in manifest.files])
    problems = []
    for entry in manifest.files:
        size = sizes.get(entry.path)
        if size is None:
            problems.append(f"{entry.path}: missing")
        elif size != entry.bytes:
            problems.append(f"{entry.path}: {size} bytes, manifest says {entry.bytes}")
    return problems


def verify(store: ArtifactStore, stage: str, key: str) -> list[str]:
    """Re-hash every file against the manifest; return the problems found (empty = sound)."""
    manifest = store.manifest(stage, key)
    base = store.artifact_dir(stage, key)
    fs = store.backend.fs
    problems = []
    for entry in manifest.files:
        path = f"{base}/{entry.path}"
        try:
            size = store.backend.size(path)  # fresh: sizes from a cached listing would hide changes
            if size != entry.bytes:
                problems.append(f"{entry.path}: {size} bytes, manifest says {entry.bytes}")
                continue
            digest = sha256_file(path, fs)
        except FileNotFoundError:
            problems.append(f"{entry.path}: missing")
            continue
        if digest != entry.sha256:
            problems.append(f"{entry.path}: sha256 {digest[:16]}…, manifest says {entry.sha256[:16]}…")
            continue
        if entry.rows is None:  # an attached file: the checksum is all there is to check
            continue
        try:
            with fs.open(path, "rb") as f:
                rows = pq.ParquetFile(f).metadata.num_rows
        except Exception as exc:  # noqa: BLE001 - any parse failure is a finding, not a crash
            problems.append(f"{entry.path}: unreadable Parquet ({exc})")
            continue
        if rows != entry.rows:
            problems.append(f"{entry.path}: {rows} rows, manifest says {entry.rows}")
    return problems
