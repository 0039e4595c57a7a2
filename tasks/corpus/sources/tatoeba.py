"""`kind = "tatoeba"`: the XTREME/LASER Tatoeba layout, one shard per language pair."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from tasks.corpus.readers import GroupBatch, check_aligned_line_counts, read_tatoeba_pair
from tasks.corpus.sources.registry import DataSet, Licence, Source, SourceIO, is_local, register_source
from tasks.languages import LangCodes, to_flores
from tasks.stage import ShardSpec
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_source
class TatoebaSource(Source):
    """The XTREME/LASER Tatoeba layout: `tatoeba.{xx}-eng.{xx}` and `tatoeba.{xx}-eng.eng`.

    Each language pair is its own shard; `sample` applies per pair.
    """

    data_set: ClassVar[DataSet | None] = DataSet(
        "tatoeba", "Tatoeba", Licence("CC-BY 2.0 FR", "cc-by-2.0", "https://creativecommons.org/licenses/by/2.0/fr/")
    )

    kind: Literal["tatoeba"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="Tatoeba codes as in the file names, e.g. kaz, tel, cmn")

    @field_validator("langs")
    @classmethod
    def _no_english(cls, langs: list[str]) -> list[str]:
        english = [code for code in langs if to_flores(code) == "eng_Latn"]
        if english:  # every pair already has an English side
            raise ValueError(f"Tatoeba langs pair with English; do not list English itself: {english}")
        return langs

    def shards(self, index: int) -> list[ShardSpec]:
        return [
            ShardSpec(f"{self.name}-{lang.lower().replace('_', '-')}", {"source": index, "lang": lang}, f"{self.name} {lang}-eng")
            for lang in self.langs
        ]

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        raw = ["eng", shard.params["lang"]] if shard else ["eng", *self.langs]
        return [to_flores(code) for code in raw]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        return read_tatoeba_pair(self.path, shard.params["lang"], io.batch_lines)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        return {
            f"{lang}-{side}": io.fingerprint(os.path.join(self.path, f"tatoeba.{lang}-eng.{side}"))
            for lang in self.langs
            for side in (lang, "eng")
        }

    def check(self) -> None:
        if is_local(self.path):
            for lang in self.langs:
                base = os.path.join(self.path, f"tatoeba.{lang}-eng")
                check_aligned_line_counts([(f"{base}.{lang}", f"{base}.{lang}"), (f"{base}.eng", f"{base}.eng")])
