"""Checking a committed artifact on demand (`xlembed artifacts verify`): cheaply, each file
there with its manifest's size (`size_problems`), or fully, every file re-hashed and every
Parquet file's rows counted (`verify`). Reads check each file before they parse it on their own
(storage/file_checks.py, `ArtifactStore.verified_path`).
"""

from __future__ import annotations

import pyarrow.parquet as pq

from storage.backends import sha256_file
from storage.errors import StoreError
from storage.store import ArtifactStore


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


def verify_artifact(store: ArtifactStore, stage: str, key: str) -> list[str]:
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
