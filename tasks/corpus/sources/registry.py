"""What a corpus source is, and the one registry of them.

A source is a class: a pydantic config model (one `[[corpus.sources]]` table, `kind` naming
the class) that also knows its languages, how to read its groups, what content keys it and
what to check before anything runs. The corpus stage looks all of this up here; no module
branches on a source's kind. One class per input format, as datatrove's readers are.

    @register_source
    class JsonlSource(Source):
        kind: Literal["jsonl"]
        path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
        fields: Annotated[dict[str, str], LangKeyed] = Field(min_length=1)

        def languages(self, shard=None) -> list[str]:
            return [to_flores(code) for code in self.fields]

        def read(self, shard, io) -> Iterator[GroupBatch]:
            ...  # wide polars frames: `locator`, then one text column per FLORES code

        def fingerprint(self, io) -> dict[str, Any]:
            return io.fingerprint(self.path)

Registration only fills a dict, so a class registered from any module (a plug-in, a test)
before a config is validated is a source like the built-in ones (`tasks/corpus/sources/__init__.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import Field, field_validator

from storage.keys import check_name
from tasks.corpus.download import DownloadError, fetch
from tasks.corpus.readers import GroupBatch, SourceError, check_aligned_line_counts, open_binary
from tasks.registry import literal_kind, register_unique, validate_kind
from tasks.stage import ShardSpec, file_fingerprint, folder_fingerprint
from tasks.stage_config import StageConfig

__all__ = [
    "SOURCES",
    "DataSet",
    "Licence",
    "Source",
    "SourceIO",
    "check_line_aligned",
    "is_local",
    "register_source",
    "validate_source",
]


@dataclass(frozen=True)
class Licence:
    """A data set's licence as a reader names it, and as the hub's `license:` field does."""

    name: str
    hub_id: str  # an identifier from https://huggingface.co/docs/hub/repositories-licenses, or "other"
    url: str


@dataclass(frozen=True)
class DataSet:
    """The data set every source of a kind reads (Tatoeba, CLDR) and its licence, which the
    exported dataset's card states (tasks/publish/dataset_card.py)."""

    key: str  # a short name: "tatoeba"
    title: str  # as the card names it: "Tatoeba"
    licence: Licence


def is_local(path: str) -> bool:
    """A path on this machine (or a file:// URL), not a remote URL."""
    return "://" not in path or path.startswith("file://")


class SourceIO:
    """What a source gets to read and fingerprint its files: the download cache (remote files
    are fetched once, with retries and their sha256 checked), the read batch size, and the
    counters the stage reports (downloads; rows with the wrong number of fields)."""

    def __init__(self, source: str, download_dir: str | Path, batch_lines: int = 65_536) -> None:
        self.source = source
        self.download_dir = Path(download_dir).expanduser()
        self.batch_lines = batch_lines
        self.malformed = [0]  # rows skipped for a wrong number of fields (TSV); a list: readers add to it
        self.downloads: dict[str, Any] = {}  # URL -> {"sha256", "bytes"}, for the manifest

    def local_copy(self, url: str, sha256: str | None = None) -> str:
        """Remote files are fetched once into the download cache (checksum recorded); local ones are read in place."""
        if is_local(url):
            return url

        fetched = fetch(url, self.download_dir, expected_sha256=sha256)
        self.downloads[fetched.url] = {"sha256": fetched.sha256, "bytes": fetched.bytes}
        return str(fetched.path)

    def fingerprint(self, path: str, sha256: str | None = None) -> dict[str, Any]:
        """The content of what `path` names: a local file's sha256, a Parquet dataset's files by
        relative name, a remote file's sha256 (declared in the config, else that of its copy in the
        download cache, fetched now if it never was: the build reads that copy)."""
        if not is_local(path):
            if sha256:
                return {"sha256": sha256.strip().lower().removeprefix("sha256:")}

            try:
                fetched = fetch(path, self.download_dir)
            except DownloadError as exc:
                raise SourceError(f"source {self.source!r}: {exc}") from exc
            return {"sha256": fetched.sha256}
        local = Path(path.removeprefix("file://")).expanduser()
        if not local.exists():
            raise SourceError(f"source {self.source!r}: file not found: {local}")
        if local.is_dir():  # a Parquet dataset: its files, since a directory's mtime misses edits in place
            return folder_fingerprint(local, (part for part in local.rglob("*.parquet") if part.is_file()))
        return file_fingerprint(local)


def check_line_aligned(paths: Sequence[str]) -> None:
    """Local line-aligned files exist and have equal line counts (one file: that it opens);
    SourceError naming the files otherwise."""
    missing = [path for path in paths if not Path(path.removeprefix("file://")).expanduser().exists()]
    if missing:
        raise SourceError(f"file not found: {', '.join(str(Path(p).expanduser().absolute()) for p in missing)}")
    if len(paths) > 1:
        check_aligned_line_counts([(path, path) for path in paths])
    elif paths:
        with open_binary(paths[0]):
            pass


class Source(StageConfig):
    """Base of every corpus source. A subclass declares `kind: Literal["<name>"]` and its settings
    as pydantic fields (mark paths CONTENT_KEYED: `fingerprint` keys their content) and
    implements `languages`, `read` and `fingerprint`; `shards` and `check` have defaults.
    Each source becomes one or more shards, cached on their own."""

    # The data set its kind always reads, with its licence; None: it depends on the files it is
    # given (a FLORES or NTREX folder is recognised by its name or location, others are "unknown").
    data_set: ClassVar[DataSet | None] = None
    # A source that runs a model on the accelerator (a LID or filtering model with no CPU path)
    # sets `requires_gpu = True` (StageConfig); the corpus stage's shards reserve a GPU then.

    name: str = Field(description="names the shards and the `source` column")
    sample: int | None = Field(default=None, ge=1, description="groups to sample (seeded); all when unset")

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_name(name, "source name")

    @classmethod
    def kind_name(cls) -> str:
        """The `kind = "..."` that selects this class (its `kind` field's one Literal value)."""
        return literal_kind(cls, "source")

    def shards(self, index: int) -> list[ShardSpec]:
        """Its shards; `index` is its place in `sources` (the shard finds it by it). Default: one."""
        return [ShardSpec(self.name, {"source": index}, f"{self.name} ({self.kind_name()})")]

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        """FLORES codes of its text columns (of `shard`'s, when given), first = the group's pivot
        for the length ratio and the row order."""
        raise NotImplementedError(f"source {self.kind_name()!r} does not implement languages()")

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        """The groups of `shard`, in batches of about `io.batch_lines`: wide frames with a
        `locator` (unique in the source: a line or row number, a key) and one column per language
        of `languages(shard)`, null where the source has no valid text."""
        raise NotImplementedError(f"source {self.kind_name()!r} does not implement read()")

    def fingerprint(self, io: SourceIO) -> Any:
        """The content of what it reads (sha256 by `io.fingerprint`, a package version), keyed by
        language or file name but not by path: the same bytes elsewhere share the artifact."""
        raise NotImplementedError(f"source {self.kind_name()!r} does not implement fingerprint()")

    def check(self) -> None:
        """Problems found without reading its local files through (missing files, line counts that
        differ, columns that do not exist), as SourceError or OSError; remote files are checked
        when fetched. Default: nothing."""


# kind -> class, in registration order (the built-in ones first: tasks/corpus/sources/__init__.py)
SOURCES: dict[str, type[Source]] = {}

SourceT = TypeVar("SourceT", bound=type[Source])


def register_source(cls: SourceT) -> SourceT:
    """Class decorator: make `cls` the source of its kind; another class under a taken kind is an error."""
    if not (isinstance(cls, type) and issubclass(cls, Source)):
        raise TypeError(f"register_source: {cls!r} is not a subclass of Source")
    return register_unique(SOURCES, cls.kind_name(), cls, "source kind")


def validate_source(value: Any, context: dict[str, Any] | None = None) -> Source:
    """One `[[corpus.sources]]` table as the config of the class its `kind` names. Errors name
    the field inside the table (pydantic adds where the table is)."""
    return validate_kind(value, SOURCES, Source, "source", context)
