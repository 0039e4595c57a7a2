"""Typed config of the evaluate stage (the `[evaluate]` section)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from tasks.corpus.config import LangCodes, LangKeyed
from tasks.stage import CONTENT_KEYED, KEYED_UNLESS_DEFAULT, NOT_KEYED, ConfigPath, StageConfig


class EncoderSettings(StageConfig):
    """How sentences become vectors. The model itself is the `base_model` artifact."""

    pooling: Literal["cls", "cls_before_pooler", "mean"] | None = Field(
        default=None, description="default: the model's own (sentence-transformers) pooling, else mean"
    )
    prefix: str = Field(default="", description='prepended to every text, e.g. "query: " for E5 models')
    max_length: int = Field(default=128, ge=8, le=8192)
    batch_size: int = Field(default=64, ge=1, json_schema_extra=NOT_KEYED)
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED, description="default: cuda if available")


class DistractorSource(StageConfig):
    """A folder of line-aligned files, one per language (FLORES-200 `{code}.dev`; NTREX
    `newstest2019-ref.{code}.txt` with `files = {eng = "newstest2019-src.eng.txt"}`), whose rows
    join the Tatoeba candidate pools as distractors. Codes in file names are mapped to
    FLORES-200; a language with no file here gets no distractors from this folder."""

    name: str = Field(min_length=1, description="names the source in drop counts and fingerprints")
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    pattern: str = "{code}.dev"
    files: Annotated[dict[str, str], LangKeyed] = Field(
        default_factory=dict,
        description="file names for codes that do not follow `pattern`; they win over pattern matches",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, pattern: str) -> str:
        if pattern.count("{code}") != 1 or "/" in pattern:
            raise ValueError(f"pattern {pattern!r} must contain '{{code}}' once and no '/'")
        return pattern

    @field_validator("files")
    @classmethod
    def _plain_names(cls, files: dict[str, str]) -> dict[str, str]:
        bad = [name for name in files.values() if "/" in name or not name.strip()]
        if bad:
            raise ValueError(f"files: {bad} must be plain file names inside path (no '/')")
        return files


class TatoebaBenchmark(StageConfig):
    """XTREME/LASER Tatoeba layout: `tatoeba.{xx}-eng.{xx}` and `.eng` in `path`.

    With `distractors`, each language is also scored as dataset `tatoeba-distractors`: the
    candidates of each side are its Tatoeba sentences plus every distractor row of that
    language (rows equal to a Tatoeba sentence of the same side are removed and counted)."""

    kind: Literal["tatoeba"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="Tatoeba codes as in the file names, e.g. kaz, tel")
    distractors: list[DistractorSource] = Field(default_factory=list)
    max_pairs: int | None = Field(
        default=None,
        ge=2,
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description="the first N pairs of each language only (cheaper CPU sweeps, wider intervals); unset: all",
    )

    @field_validator("distractors")
    @classmethod
    def _unique_names(cls, sources: list[DistractorSource]) -> list[DistractorSource]:
        names = [source.name for source in sources]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"distractor source names must be unique, repeated: {repeated}")
        return sources


class BuccBenchmark(StageConfig):
    """BUCC 2018 layout: `{xx}-en.{split}.{xx|en}` (id TAB sentence) and `.gold`; threshold tuned on `tune_split`."""

    kind: Literal["bucc"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="codes as in the file names: de, fr, ru, zh")
    tune_split: Literal["sample", "training"] = "training"
    test_split: Literal["sample", "training", "test"] = "test"
    k: int = Field(default=4, ge=1)


class StsBenchmark(StageConfig):
    """STS: SemEval 2017 track files (`STS.input.track*.txt` + `STS.gs.track*.txt`) or `s1 TAB s2 TAB score` TSV."""

    kind: Literal["sts"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    layout: Literal["semeval2017", "tsv"] = "semeval2017"
    langs: list[str] | None = Field(default=None, description="for tsv: [src, tgt] language codes")


class MultiwayBenchmark(StageConfig):
    """Bitext retrieval between `pivot` and every other language of a line-aligned folder
    (FLORES-200 `{code}.dev`), on held-out rows [row_start, row_stop); with `pairs = "all"`
    also between every two other languages (and a `group:xx-yy` mean over those pairs)."""

    kind: Literal["multiway"]
    name: str = "flores200-dev"
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=2)
    pattern: str = "{code}.dev"
    pivot: str = "eng_Latn"
    row_start: int = Field(default=0, ge=0)
    row_stop: int | None = Field(default=None, ge=1)
    pairs: Literal["pivot", "all"] = Field(default="pivot", description="all: also every pair of two non-pivot languages")


class CorpusDevBenchmark(StageConfig):
    """Bitext retrieval on the corpus artifact's held-out `dev` split: pivot vs every other language
    and, with `pairs = "all"`, every two other languages on the rows that have both."""

    kind: Literal["corpus_dev"]
    pivot: str = "eng_Latn"
    max_groups: int | None = Field(default=None, ge=2)
    pairs: Literal["pivot", "all"] = Field(default="pivot", description="all: also every pair of two non-pivot languages")


class MtebBenchmark(StageConfig):
    """Named MTEB tasks through the `mteb` package (its datasets must already be cached)."""

    kind: Literal["mteb"]
    tasks: list[str] = Field(min_length=1)
    cache_dir: ConfigPath = Field(
        default="~/.cache/huggingface", json_schema_extra=NOT_KEYED, description="the Hugging Face cache that holds the MTEB datasets"
    )


XNLI_LANGUAGES = ("en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur")


class XnliBenchmark(StageConfig):
    """XNLI cross-lingual transfer (WACSE Table 7, DAP Table 4): fine-tune the encoder and a linear
    head on English NLI pairs, pick the learning rate on dev, report test accuracy per language.
    Defaults are the papers' settings; see tasks/evaluate/xnli.py."""

    kind: Literal["xnli"]
    path: ConfigPath | None = Field(default=None, json_schema_extra=CONTENT_KEYED, description="folder with xnli.dev.tsv and xnli.test.tsv (or .jsonl); unset: the datasets library")
    train_file: ConfigPath | None = Field(
        default=None, json_schema_extra=CONTENT_KEYED, description="English NLI training pairs: MultiNLI .jsonl/.txt or XNLI-MT .tsv; unset: XNLI's English train split (datasets)"
    )
    langs: list[str] = Field(default_factory=lambda: list(XNLI_LANGUAGES), min_length=1, description="XNLI language codes, as in the files")
    mode: Literal["cross_encoder", "bi_encoder"] = Field(
        default="cross_encoder", description="cross_encoder: the pair concatenated, as the papers; bi_encoder: head on [u, v, |u-v|, u*v]"
    )
    learning_rates: list[float] = Field(default_factory=lambda: [1e-5, 3e-5, 5e-5, 7e-5], min_length=1)
    batch_size: int = Field(default=256, ge=1)
    max_length: int = Field(default=128, ge=8, le=8192)
    epochs: int = Field(default=2, ge=1)
    weight_decay: float = Field(default=0.0, ge=0.0)
    warmup_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    select_on: Literal["all_dev", "english_dev"] = Field(default="all_dev", description="dev accuracy that picks the learning rate: mean over langs, or English only")
    max_train_pairs: int | None = Field(default=None, ge=1, description="a seeded sample of the training pairs (cpu-small runs)")
    max_eval_pairs: int | None = Field(default=None, ge=1, description="first N pairs per language of dev and of test")
    seed: int = 0
    micro_batch_size: int | None = Field(default=None, ge=1, json_schema_extra=NOT_KEYED, description="split each batch for memory (gradients accumulate)")
    eval_batch_size: int = Field(default=256, ge=1, json_schema_extra=NOT_KEYED)


Benchmark = Annotated[
    Union[TatoebaBenchmark, BuccBenchmark, StsBenchmark, MultiwayBenchmark, CorpusDevBenchmark, MtebBenchmark, XnliBenchmark],
    Field(discriminator="kind"),
]


class EvaluateConfig(StageConfig):
    encoder: EncoderSettings = EncoderSettings()
    benchmarks: list[Benchmark] = Field(min_length=1)
    groups: list[str] = Field(
        default_factory=lambda: ["wacse-4", "wacse-5", "wacse-8"],
        description="language groups to average (see tasks/evaluate/groups.py)",
    )
    baseline: str | None = Field(default=None, description="key (or unique prefix) of an earlier evaluate artifact to compare with")
    compare_with_base: bool = Field(
        default=True,
        description="when the pipeline trains a model, also score the untrained base model and show both side by side",
    )
    title: str = "xlembed evaluation"
    word_map_concepts: int = Field(default=12, ge=0, le=50, description="concepts in the 2-D word-embedding map (0 = none)")
    seed: int = 0

    @field_validator("baseline")
    @classmethod
    def _baseline(cls, value: str | None) -> str | None:
        if value is not None and not (4 <= len(value) <= 64 and all(c in "0123456789abcdef" for c in value)):
            raise ValueError(f"baseline must be an evaluate artifact key or a prefix of 4+ hex digits, got {value!r}")
        return value

    @model_validator(mode="after")
    def _groups_known(self) -> EvaluateConfig:
        from tasks.evaluate.groups import LANGUAGE_GROUPS

        unknown = [g for g in self.groups if g not in LANGUAGE_GROUPS]
        if unknown:
            raise ValueError(f"unknown language groups {unknown}; known: {sorted(LANGUAGE_GROUPS)}")
        return self
