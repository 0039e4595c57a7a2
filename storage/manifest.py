"""The manifest: the commit record of one artifact, and the shard records before it.

`manifest.json` is written last; its presence is the only thing that makes an artifact
visible. Everything a reader needs to trust and interpret the files is in it. Manifests
are parsed with pydantic (never unpickled), and file paths in them are checked so that a
hostile manifest cannot point outside its artifact directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from storage.errors import StoreError

FORMAT_VERSION = 1


class FileEntry(BaseModel):
    """One file of an artifact, relative to the artifact directory.

    `rows` is set for Parquet data files and None for attached files (model weights,
    tokenizer, reports), which live under `files/`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    rows: int | None = Field(default=None, ge=0)
    bytes: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("path")
    @classmethod
    def _relative_inside(cls, path: str) -> str:
        parts = PurePosixPath(path).parts
        if not parts or path.startswith("/") or "\\" in path or ".." in parts or ":" in path:
            raise ValueError(f"file path {path!r} must be relative and stay inside the artifact")
        return path


class ShardRecord(BaseModel):
    """Written after a shard's files: the shard is done and need not be recomputed."""

    model_config = ConfigDict(extra="forbid")

    shard_id: str
    files: list[FileEntry]
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    wall_time_s: float = 0.0


class ColumnSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    type: str
    nullable: bool = True


class Manifest(BaseModel):
    """Commit record of one artifact at `{root}/{stage}/{key}/manifest.json`."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    stage: str
    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    code_version: str
    config: dict[str, Any]
    # where content-keyed inputs were read from (config field -> path or URL): lineage, not keyed
    locations: dict[str, Any] = Field(default_factory=dict)
    input_keys: dict[str, str] = Field(default_factory=dict)
    source_fingerprints: dict[str, Any] = Field(default_factory=dict)
    # storage.keys.KEY_SCHEME the key was computed under; manifests from before it have none: 1
    key_scheme: int = 1
    files: list[FileEntry]
    shards: list[str] = Field(default_factory=list)
    columns: list[ColumnSchema]
    created_at: str
    wall_time_s: float
    rows_in: int
    rows_out: int
    dropped: dict[str, int] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    package_version: str
    # A forced rebuild is committed beside the version it replaces, under
    # `storage.keys.attempt_key(rebuild_of, attempt)`; a first build has neither.
    rebuild_of: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    attempt: int = Field(default=0, ge=0)

    @property
    def config_key(self) -> str:
        """The key its config, code and inputs give (the same for every rebuild of them)."""
        return self.rebuild_of or self.key

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def table_files(self) -> list[FileEntry]:
        return [f for f in self.files if f.rows is not None]

    @property
    def attached_files(self) -> list[FileEntry]:
        return [f for f in self.files if f.rows is None]


@dataclass(frozen=True)
class DamagedArtifact:
    """An artifact whose manifest exists but cannot be parsed (truncated, edited by hand)."""

    stage: str
    key: str
    problem: str


class RefEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    at: str
    note: str = ""
    # the config key the version was built for, when it is a rebuild (`Manifest.rebuild_of`):
    # a later run of the same config finds the rebuild through the ref without reading manifests
    config_key: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @property
    def built_for(self) -> str:
        return self.config_key or self.key


class Ref(BaseModel):
    """A named pointer `refs/{pipeline}/{stage}` to an artifact key, with its history."""

    model_config = ConfigDict(extra="forbid")

    pipeline: str
    stage: str
    key: str = Field(pattern=r"^[0-9a-f]{64}$")
    history: list[RefEntry] = Field(default_factory=list)


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_record(model: type[ModelT], data: bytes, path: str) -> ModelT:
    """Parse a manifest, shard record or ref; a malformed one is a StoreError naming the file."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()[:5])
        raise StoreError(f"malformed {model.__name__.lower()} {path}: {problems}") from None
