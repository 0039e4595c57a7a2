"""`kind = "tsv"`: a tab-separated file, one column per language."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from tasks.corpus.readers import GroupBatch, SourceError, open_binary, read_tsv
from tasks.corpus.sources.registry import Source, SourceIO, is_local, register_source
from tasks.languages import LangKeyed, to_flores
from tasks.stage import ShardSpec
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class TsvSource(Source):
    """A tab-separated file; `columns` maps a language to a column name (or 0-based index without header)."""

    kind: Literal["tsv"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    columns: Annotated[dict[str, str | int], LangKeyed] = Field(min_length=1)
    header: bool = True

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.columns]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        return read_tsv(self.path, self.columns, self.header, io.batch_lines, io.malformed)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return io.fingerprint(self.path)

    def check(self) -> None:
        if not is_local(self.path):
            return
        with open_binary(self.path) as stream:
            first = stream.readline().decode("utf-8-sig", errors="replace").rstrip("\r\n")
        fields = first.split("\t")
        for lang, column in self.columns.items():
            if isinstance(column, int):
                if column >= len(fields):
                    raise SourceError(
                        f"{self.path}: column {column} for {lang} does not exist; the first line has {len(fields)} columns"
                    )
            elif not self.header:
                raise SourceError(f"{self.path}: column {column!r} for {lang} is a name, but header = false")
            elif column not in fields:
                raise SourceError(f"{self.path}: no column {column!r} for {lang}; columns are {fields}")
