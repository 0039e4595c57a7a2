"""Versioned, content-addressed artifact storage over fsspec (local disk or S3)."""

from storage.keys import InvalidNameError, artifact_key, canonical_json, check_key, check_name
from storage.manifest import ColumnSchema, FileEntry, Manifest, Ref, RefEntry, ShardRecord
from storage.store import (
    ArtifactNotFound,
    ArtifactRef,
    ArtifactStore,
    CorruptArtifact,
    DamagedArtifact,
    RootNotFound,
    SchemaMismatch,
    StoreAccessError,
    StoreError,
    StoreWriteError,
    columns_of,
    conform,
    utc_now,
)

__all__ = [
    "ArtifactNotFound",
    "ArtifactRef",
    "ArtifactStore",
    "ColumnSchema",
    "CorruptArtifact",
    "DamagedArtifact",
    "FileEntry",
    "InvalidNameError",
    "Manifest",
    "Ref",
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
