"""`kind = "parquet"`: a Parquet file or dataset in wide form, one text column per language."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from tasks.corpus.readers import GroupBatch, SourceError, check_text_columns, read_parquet
from tasks.corpus.sources.registry import Source, SourceIO, is_local, register_source
from tasks.languages import LangKeyed, to_flores
from tasks.stage import ShardSpec
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class ParquetSource(Source):
    """A Parquet file or dataset in wide form: one text column per language."""

    kind: Literal["parquet"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    columns: Annotated[dict[str, str], LangKeyed] = Field(min_length=1)

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.columns]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        return read_parquet(self.path, self.columns, io.batch_lines)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return io.fingerprint(self.path)

    def check(self) -> None:
        if not is_local(self.path):
            return
        import pyarrow.parquet as pq

        local = Path(self.path.removeprefix("file://")).expanduser()
        parts = sorted(local.rglob("*.parquet")) if local.is_dir() else [local]
        if not parts:
            raise SourceError(f"{local}: a directory without .parquet files")
        for part in parts:  # footers only: every part of a dataset, as each is read
            check_text_columns(str(part), pq.read_schema(part), self.columns)
