"""`kind = "text"`: plain text, one sentence per line; several files are line-aligned translations."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import Field

from tasks.corpus.readers import GroupBatch, read_text_files
from tasks.corpus.sources.registry import Source, SourceIO, check_line_aligned, is_local, register_source
from tasks.languages import LangKeyed, to_flores
from tasks.stage import ShardSpec
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class TextSource(Source):
    """Plain text, one sentence per line; several files are line-aligned translations.

    `files` maps a language code to a local path or any fsspec URL (`.gz`/`.bz2`/`.xz` are
    decompressed; remote files are downloaded once into the cache with retries).
    """

    kind: Literal["text"]
    files: Annotated[dict[str, ConfigPath], LangKeyed] = Field(min_length=1, json_schema_extra=CONTENT_KEYED)
    sha256: dict[str, str] = Field(
        default_factory=dict, json_schema_extra=CONTENT_KEYED, description="expected sha256 per language, for URLs"
    )

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        # the files are keyed by content, per language; their order stays in the key (the first
        # language is the group's pivot for the length ratio, and orders the rows)
        return {**data, "langs": list(self.files)}

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.files]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        files = {lang: io.local_copy(url, self.sha256.get(lang)) for lang, url in self.files.items()}
        return read_text_files(files, io.batch_lines)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return {lang: io.fingerprint(path, self.sha256.get(lang)) for lang, path in self.files.items()}

    def check(self) -> None:
        local = [path for path in self.files.values() if is_local(path)]
        if len(local) == len(self.files):  # mixed with URLs: counted after the download
            check_line_aligned(local)
