"""Versioned, content-addressed artifact storage over fsspec (local disk or S3)."""

from storage.keys import InvalidNameError, artifact_key, canonical_json, check_key, check_name
from storage.manifest import ColumnSchema, FileEntry, Manifest, Ref, RefEntry, ShardRecord
from storage.refs import DamagedRef, utc_now
from storage.store import (
    AlreadyCommitted,
    ArtifactNotFound,
    ArtifactRef,
    ArtifactStore,
    CorruptArtifact,
    DamagedArtifact,
    RefConflict,
    RootNotFound,
    SchemaMismatch,
    StoreAccessError,
    StoreError,
    StoreWriteError,
    columns_of,
    conform,
)

__all__ = [
    "AlreadyCommitted",
    "ArtifactNotFound",
    "ArtifactRef",
    "ArtifactStore",
    "ColumnSchema",
    "CorruptArtifact",
    "DamagedArtifact",
    "DamagedRef",
    "FileEntry",
    "InvalidNameError",
    "Manifest",
    "Ref",
    "RefConflict",
    "RefEntry",
    "RootNotFound",
    "SchemaMismatch",
    "ShardRecord",
    "StoreAccessError",
    "StoreError",
    "StoreWriteError",
    "artifact_key",
    "canonical_json",
    "check_key",
    "check_name",
    "columns_of",
    "conform",
    "utc_now",
]
