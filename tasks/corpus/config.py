"""Typed config of the corpus stage (the `[corpus]` section of a pipeline TOML)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, Field, field_validator, model_validator

from storage.keys import check_name
from tasks.stage import CONTENT_KEYED, KEYED_UNLESS_DEFAULT, NOT_KEYED, ConfigPath, StageConfig

DEFAULT_DOWNLOAD_DIR = Path("~/.cache/xlembed/downloads")


def _check_lang_codes(codes: list[str]) -> list[str]:
    from tasks.corpus.languages import to_flores

    flores = [to_flores(code) for code in codes]  # raises naming the unknown code
    dupes = sorted({c for c in flores if flores.count(c) > 1})
    if dupes:
        raise ValueError(f"languages listed twice (after mapping to FLORES-200): {dupes}")
    return codes


def _check_lang_keys(mapping: dict[str, Any]) -> dict[str, Any]:
    _check_lang_codes(list(mapping))
    return mapping


# Language codes as users write them (ISO 639-1/3, BCP-47, FLORES-200); each must map to FLORES-200.
LangCodes = Annotated[list[str], AfterValidator(_check_lang_codes)]
# A mapping keyed by such language codes.
LangKeyed = AfterValidator(_check_lang_keys)


class SourceBase(StageConfig):
    """Fields every source has. Each source becomes one or more shards, cached on their own."""

    name: str = Field(description="names the shards and the `source` column")
    sample: int | None = Field(default=None, ge=1, description="groups to sample (seeded); all when unset")

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_name(name, "source name")


class TextSource(SourceBase):
    """Plain text, one sentence per line; several files are line-aligned translations.

    `files` maps a language code to a local path or any fsspec URL (`.gz`/`.bz2`/`.xz` are
    decompressed; remote files are downloaded once into the cache with retries).
    """

    kind: Literal["text"]
    files: Annotated[dict[str, ConfigPath], LangKeyed] = Field(min_length=1, json_schema_extra=CONTENT_KEYED)
    sha256: dict[str, str] = Field(default_factory=dict, json_schema_extra=CONTENT_KEYED, description="expected sha256 per language, for URLs")

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        # the files are keyed by content, per language; their order stays in the key (the first
        # language is the group's pivot for the length ratio, and orders the rows)
        return {**data, "langs": list(self.files)}


class TsvSource(SourceBase):
    """A tab-separated file; `columns` maps a language to a column name (or 0-based index without header)."""

    kind: Literal["tsv"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    columns: Annotated[dict[str, str | int], LangKeyed] = Field(min_length=1)
    header: bool = True


class ParquetSource(SourceBase):
    """A Parquet file or dataset in wide form: one text column per language."""

    kind: Literal["parquet"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    columns: Annotated[dict[str, str], LangKeyed] = Field(min_length=1)


class OpusMosesSource(SourceBase):
    """An OPUS Moses-format parallel zip (`{corpus}.{l1}-{l2}.{l1}` and `.{l2}` inside)."""

    kind: Literal["opus_moses"]
    url: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=2, max_length=2, description="the two OPUS codes as in the file names")
    sha256: str | None = Field(default=None, json_schema_extra=CONTENT_KEYED)


class MultiwayDirSource(SourceBase):
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
    def _files_named_langs(self) -> "MultiwayDirSource":
        unknown = sorted(set(self.files) - set(self.langs))
        if unknown:
            raise ValueError(f"files names codes {unknown} that are not in langs {self.langs}")
        bad = [name for name in self.files.values() if "/" in name or not name.strip()]
        if bad:
            raise ValueError(f"files: {bad} must be plain file names inside path (no '/')")
        return self

    def file_name(self, code: str) -> str:
        return self.files.get(code) or self.pattern.format(code=code)


class TatoebaSource(SourceBase):
    """The XTREME/LASER Tatoeba layout: `tatoeba.{xx}-eng.{xx}` and `tatoeba.{xx}-eng.eng`.

    Each language pair is its own shard; `sample` applies per pair.
    """

    kind: Literal["tatoeba"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="Tatoeba codes as in the file names, e.g. kaz, tel, cmn")

    @field_validator("langs")
    @classmethod
    def _no_english(cls, langs: list[str]) -> list[str]:
        from tasks.corpus.languages import to_flores

        english = [code for code in langs if to_flores(code) == "eng_Latn"]
        if english:  # every pair already has an English side
            raise ValueError(f"Tatoeba langs pair with English; do not list English itself: {english}")
        return langs


class CldrSource(SourceBase):
    """Human-translated CLDR phrases shipped in the Babel package: multi-way parallel, offline."""

    kind: Literal["cldr"]
    langs: LangCodes = Field(min_length=2)
    categories: list[str] | None = Field(default=None, description="CLDR categories; all supported when unset")

    @field_validator("categories")
    @classmethod
    def _categories(cls, categories: list[str] | None) -> list[str] | None:
        if categories is not None:
            from tasks.corpus.cldr import CLDR_CATEGORIES

            unknown = [c for c in categories if c not in CLDR_CATEGORIES]
            if unknown:
                raise ValueError(f"unknown CLDR categories {unknown}; known: {list(CLDR_CATEGORIES)}")
        return categories


Source = Annotated[
    Union[TextSource, TsvSource, ParquetSource, OpusMosesSource, MultiwayDirSource, TatoebaSource, CldrSource],
    Field(discriminator="kind"),
]


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
    min_confidence: float = Field(default=0.5, ge=0.0, le=1.0, description="rows whose top label is less sure than this are dropped")
    min_chars: int = Field(default=20, ge=0, description="shorter rows are not checked (LID guesses on short phrases)")
    skip_langs: LangCodes = Field(default_factory=list, description="languages never checked")

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
    sources: list[Source] = Field(min_length=1)
    filters: CorpusFilters = CorpusFilters()
    seed: int = 42
    dev_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    read_batch_lines: int = Field(default=65_536, ge=1, json_schema_extra=NOT_KEYED)
    download_dir: ConfigPath = Field(default=str(DEFAULT_DOWNLOAD_DIR), json_schema_extra=NOT_KEYED)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: list[SourceBase]) -> list[SourceBase]:
        names = [s.name for s in sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {dupes}")
        return sources
