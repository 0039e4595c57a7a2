"""Typed config of the corpus stage (the `[corpus]` section of a pipeline TOML). Each source's own
config (one `[[corpus.sources]]` table) is its class in tasks/corpus/sources/."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, SerializeAsAny, ValidationInfo, field_validator, model_validator

from storage.user_cache import xlembed_cache_dir
from tasks.corpus.sources import Source, validate_source
from tasks.languages import LangCodes
from tasks.stage_config import CONTENT_KEYED, KEYED_UNLESS_DEFAULT, NOT_KEYED, ConfigPath, StageConfig


def default_download_dir() -> str:
    """`$XDG_CACHE_HOME/xlembed/downloads` (~/.cache by default), read when a config is built."""
    return str(xlembed_cache_dir("downloads"))


def _source(value: Any, info: ValidationInfo) -> Source:
    return validate_source(value, info.context)


# One `[[corpus.sources]]` table: the config of the registered class its `kind` names
# (tasks/corpus/sources/). Looked up when a config is validated, so a source registered by a
# plug-in before then is accepted like a built-in one.
SourceConfig = Annotated[SerializeAsAny[Source], PlainValidator(_source)]


class LidFilter(StageConfig):
    """Language identification: drop rows that a LID model says are in another language, or
    whose language it cannot tell with `min_confidence` (see tasks/corpus/lid.py).

    Languages the backend cannot identify are never dropped (the manifest lists them).
    """

    backend: Literal["cld2", "fasttext"] = Field(
        default="cld2", description="cld2: offline, inside the pycld2 wheel; fasttext: a GlotLID / OpenLID .bin file (`model`)"
    )
    model: ConfigPath | None = Field(
        default=None, json_schema_extra=CONTENT_KEYED, description="the fastText model file (keyed by its sha256)"
    )
    min_confidence: float = Field(
        default=0.5, ge=0.0, le=1.0, description="rows whose top label is less sure than this are dropped"
    )
    min_chars: int = Field(default=20, ge=0, description="shorter rows are not checked (LID guesses on short phrases)")
    skip_langs: LangCodes = Field(default_factory=list, description="languages never checked")

    def required_extras(self) -> list[tuple[str, str]]:
        """fastText is an optional extra: a config that asks for it is checked when it loads."""
        return [("fasttext", 'lid backend = "fasttext"')] if self.backend == "fasttext" else []

    @model_validator(mode="after")
    def _model_fits_backend(self) -> LidFilter:
        if self.backend == "fasttext" and not self.model:
            raise ValueError("lid.model (a fastText .bin file such as GlotLID's model.bin) is required when backend = 'fasttext'")
        if self.backend != "fasttext" and self.model:
            raise ValueError(f"lid.model is only used when backend = 'fasttext' (backend = {self.backend!r} ships its own)")
        return self


class CorpusFilters(StageConfig):
    """Row filters; every dropped row is counted in the manifest under its reason.

    Empty or whitespace-only rows and rows that are not valid UTF-8 are always dropped.
    """

    min_words: int = Field(default=0, ge=0)
    max_words: int | None = Field(default=None, ge=1)
    word_filter_langs: LangCodes = Field(
        default_factory=list,
        description="languages the word limits apply to; empty = every language written with spaces",
    )
    max_chars: int = Field(default=5000, ge=1)
    max_length_ratio: float | None = Field(
        default=None, gt=1.0, description="max character-length ratio of a row to its group's first language"
    )
    min_langs_per_group: int | None = Field(
        default=None, ge=1, description="keep a group when this many of its rows pass; default: all of them"
    )
    dedupe: bool = True
    drop_copies: bool = Field(
        default=True,
        description=(
            "drop a row equal to its group's first language (the pivot) after NFKC, case folding and removing "
            "whitespace and punctuation (`copy_of_pivot`): an untranslated copy is not a translation"
        ),
    )
    near_dedupe: bool = Field(
        default=False,
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "drop a row whose text, normalised (case, punctuation, digits, whitespace; tasks/corpus/dedup.py), "
            "occurs in an earlier group of its source in the same language (`near_duplicate`; a group left "
            "incomplete is `group_incomplete`), and split train/dev by the pivot's normalised text, so no dev "
            "row is a near-duplicate of a train row of its source and no pivot text is on both sides anywhere"
        ),
    )
    lid: LidFilter | None = Field(
        default=None, json_schema_extra=KEYED_UNLESS_DEFAULT, description="language identification; off when unset"
    )

    @model_validator(mode="after")
    def _word_range(self) -> CorpusFilters:
        if self.max_words is not None and self.max_words < self.min_words:
            raise ValueError(f"max_words ({self.max_words}) is below min_words ({self.min_words})")
        return self


class CorpusConfig(StageConfig):
    sources: list[SourceConfig] = Field(min_length=1)
    filters: CorpusFilters = CorpusFilters()
    seed: int = 42
    dev_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    read_batch_lines: int = Field(default=65_536, ge=1, json_schema_extra=NOT_KEYED)
    download_dir: ConfigPath = Field(default_factory=default_download_dir, json_schema_extra=NOT_KEYED)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[Source]) -> list[Source]:
        names = [s.name for s in sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {dupes}")
        return sources
