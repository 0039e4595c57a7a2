"""`kind = "cldr"`: human-translated CLDR phrases shipped in the Babel package."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from tasks.corpus.cldr import CLDR_CATEGORIES
from tasks.corpus.readers import GroupBatch, read_cldr
from tasks.corpus.sources.registry import DataSet, Licence, Source, SourceIO, register_source
from tasks.languages import LangCodes, to_flores
from tasks.stage import ShardSpec


@register_source
class CldrSource(Source):
    """Human-translated CLDR phrases shipped in the Babel package: multi-way parallel, offline."""

    data_set: ClassVar[DataSet | None] = DataSet(
        "cldr", "Unicode CLDR (via Babel)", Licence("Unicode License v3", "other", "https://www.unicode.org/license.txt")
    )

    kind: Literal["cldr"]
    langs: LangCodes = Field(min_length=2)
    categories: list[str] | None = Field(default=None, description="CLDR categories; all supported when unset")

    @field_validator("categories")
    @classmethod
    def _categories(cls, categories: list[str] | None) -> list[str] | None:
        if categories is not None:
            unknown = [c for c in categories if c not in CLDR_CATEGORIES]
            if unknown:
                raise ValueError(f"unknown CLDR categories {unknown}; known: {list(CLDR_CATEGORIES)}")
        return categories

    def languages(self, shard: ShardSpec | None = None) -> list[str]:
        return [to_flores(code) for code in self.langs]

    def read(self, shard: ShardSpec, io: SourceIO) -> Iterator[GroupBatch]:
        return read_cldr(self.langs, self.categories)

    def fingerprint(self, io: SourceIO) -> dict[str, Any]:
        import babel

        return {"babel": babel.__version__}
