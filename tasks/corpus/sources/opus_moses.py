"""`kind = "opus_moses"`: an OPUS Moses-format parallel zip."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from tasks.corpus.readers import GroupBatch, read_moses_zip
from tasks.corpus.sources.registry import Source, SourceIO, register_source
from tasks.languages import LangCodes, to_flores
from tasks.stage import ShardSpec
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class OpusMosesSource(Source):
    """An OPUS Moses-format parallel zip (`{corpus}.{l1}-{l2}.{l1}` and `.{l2}` inside)."""

    kind: Literal["opus_moses"]
    url: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=2, max_length=2, description="the two OPUS codes as in the file names")
    sha256: str | None = Field(default=None, json_schema_extra=CONTENT_KEYED)

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.langs]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        return read_moses_zip(Path(io.local_copy(self.url, self.sha256)), self.langs, io.batch_lines)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return io.fingerprint(self.url, self.sha256)
