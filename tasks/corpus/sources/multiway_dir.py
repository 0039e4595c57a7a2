"""`kind = "multiway_dir"`: a directory of line-aligned files, one per language."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tasks.corpus.readers import GroupBatch, read_multiway_dir
from tasks.corpus.sources.registry import Source, SourceIO, check_line_aligned, is_local, register_source
from tasks.languages import LangCodes, to_flores
from tasks.stage import ShardSpec
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class MultiwayDirSource(Source):
    """A directory of line-aligned files, one per language (FLORES-200 `{code}.dev`, NTREX, ...)."""

    kind: Literal["multiway_dir"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="codes as they appear in the file names")
    pattern: str = "{code}.dev"
    files: dict[str, str] = Field(
        default_factory=dict,
        description="file names for codes that do not follow `pattern` (NTREX's English: {eng = 'newstest2019-src.eng.txt'})",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, pattern: str) -> str:
        if "{code}" not in pattern or "/" in pattern:
            raise ValueError(f"pattern {pattern!r} must contain '{{code}}' and no '/'")
        return pattern

    @model_validator(mode="after")
    def _files_named_langs(self) -> MultiwayDirSource:
        unknown = sorted(set(self.files) - set(self.langs))
        if unknown:
            raise ValueError(f"files names codes {unknown} that are not in langs {self.langs}")
        bad = [name for name in self.files.values() if "/" in name or not name.strip()]
        if bad:
            raise ValueError(f"files: {bad} must be plain file names inside path (no '/')")
        return self

    def file_name(self, code: str) -> str:
        return self.files.get(code) or self.pattern.format(code=code)

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.langs]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        return read_multiway_dir(self.path, self.langs, self.pattern, io.batch_lines, self.files)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return {lang: io.fingerprint(os.path.join(self.path, self.file_name(lang))) for lang in self.langs}

    def check(self) -> None:
        if is_local(self.path):
            check_line_aligned([os.path.join(self.path, self.file_name(lang)) for lang in self.langs])
