"""Typed configs of the two translate stages: `[translate_model]` and `[translate]`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tasks.corpus.config import LidFilter
from tasks.languages import to_flores
from tasks.stage_config import KEYED_UNLESS_DEFAULT, NOT_KEYED, HubIdOrPath, StageConfig, local_source_paths
from tasks.tiny_models import TinyModelSpec
from tasks.translate.cuda_check import resolve_translate_device
from tasks.translate.languages import nllb_code

Quantization = Literal["int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"]
ComputeType = Literal[
    "auto", "default", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32"
]
DEFAULT_QUANTIZATION = "int8"


class TranslateModelConfig(StageConfig):
    """Where the NLLB-200 model comes from; it is converted to CTranslate2 once and cached.

    - `hub`: a model-hub id (facebook/nllb-200-distilled-600M, -1.3B, -3.3B), downloaded once.
    - `local`: a local transformers checkpoint directory.
    - `ctranslate2`: an already converted CTranslate2 directory, copied as it is (its
      tokenizer files are taken from `tokenizer` when the directory has none).
    - `tiny_random`: a tiny random model built here (see TinyModelSpec); mechanics only.
    """

    source: Literal["hub", "local", "ctranslate2", "tiny_random"]
    model: HubIdOrPath | None = Field(default=None, description="hub id or local directory")
    revision: str | None = Field(default=None, description="hub revision (commit, tag, branch or refs/pr/N)")
    name: str | None = Field(default=None, description="the model's name in the `source` column (nllb:{name})")
    quantization: Quantization | None = Field(
        default=None, description="weights of the CTranslate2 model; default int8 (int8 on CPU, float16 or int8_float16 on GPU)"
    )
    tokenizer: HubIdOrPath | None = Field(default=None, description="hub id or directory of the tokenizer (source = ctranslate2)")

    @model_validator(mode="before")
    @classmethod
    def _local_model_path(cls, data: Any, info: ValidationInfo) -> Any:
        return local_source_paths(data, info, ("model",), ("local", "ctranslate2"))

    allow_pickle_weights: bool = Field(
        default=False,
        description="convert checkpoints that ship only pytorch_model.bin (read by torch's weights_only loader); "
        "the artifact itself never holds pickles",
    )
    low_cpu_mem_usage: bool = Field(default=True, json_schema_extra=NOT_KEYED)
    tiny: TinyModelSpec | None = None

    def located_fields(self) -> set[str]:
        # local folders are keyed by their files' contents (the stage's fingerprint), not their paths
        if self.source not in ("local", "ctranslate2"):
            return set()
        tokenizer = self.tokenizer is not None and Path(self.tokenizer).expanduser().is_dir()
        return {"model", "tokenizer"} if tokenizer else {"model"}

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        # a local folder's name is the model's default name in the output (nllb:{name})
        return {**data, "display_name": self.display_name} if "model" in self.located_fields() else data

    @model_validator(mode="after")
    def _fields_fit_source(self) -> TranslateModelConfig:
        if self.source == "tiny_random":
            if self.model or self.revision or self.tokenizer:
                raise ValueError("translate_model.model, revision and tokenizer are not used when source = 'tiny_random'")
        elif not self.model:
            raise ValueError(f"translate_model.model is required when source = {self.source!r}")
        if self.tiny is not None and self.source != "tiny_random":
            raise ValueError("translate_model.tiny is only used when source = 'tiny_random'")
        if self.source == "ctranslate2" and self.quantization is not None:
            raise ValueError("a converted CTranslate2 model keeps its quantisation; set [translate] compute_type instead")
        if self.tokenizer and self.source != "ctranslate2":
            raise ValueError("translate_model.tokenizer is only used when source = 'ctranslate2'")
        if self.revision and self.source != "hub":
            raise ValueError("translate_model.revision is only used when source = 'hub'")
        return self

    @property
    def tiny_spec(self) -> TinyModelSpec:
        return self.tiny or TinyModelSpec()

    @property
    def display_name(self) -> str:
        if self.name:
            return self.name
        if self.source == "tiny_random":
            spec = self.tiny_spec
            return f"tiny-random-d{spec.d_model}-l{spec.layers}-s{spec.seed}"
        model = (self.model or "").rstrip("/")
        return model if self.source == "hub" else model.rsplit("/", 1)[-1]


class DecodingConfig(StageConfig):
    """Beam search options (sampling is always off, so a translation is a function of its input).

    The output length limit is relative to the input: at most
    `ceil(max_length_ratio * input_tokens + max_length_extra)` tokens (computed per batch of
    inputs of similar length) and never more than `max_decoding_length`.
    """

    beam_size: int = Field(default=4, ge=1)
    length_penalty: float = 1.0
    repetition_penalty: float = Field(default=1.0, gt=0)
    no_repeat_ngram_size: int = Field(default=0, ge=0)
    max_length_ratio: float = Field(default=2.0, ge=0)
    max_length_extra: int = Field(default=10, ge=0)
    max_decoding_length: int = Field(default=512, ge=1)
    max_input_length: int = Field(
        default=512, ge=3, description="longer inputs are truncated (tokens, with the language code and </s>)"
    )


class QualityFilters(StageConfig):
    """Translations dropped, each counted in the manifest under its reason (first that applies).

    Empty translations are always dropped. A threshold of 0 (or null in JSON) switches its
    filter off (TOML has no null).
    """

    drop_identical: bool = Field(
        default=True,
        description="drop translations equal to the source after NFKC, case folding and removing whitespace and punctuation (tasks/corpus/dedup.py copy_normalized_text)",
    )
    repetition_max_ngram: int | None = Field(default=4, ge=0, description="longest looping n-gram looked for (tokens); 0: off")
    repetition_min_repeats: int = Field(default=4, ge=2, description="an n-gram this many times in a row is a loop")
    min_length_ratio: float | None = Field(default=0.25, ge=0, description="output/input tokens below this: dropped; 0: off")
    max_length_ratio: float | None = Field(default=3.0, ge=0, description="output/input tokens above this: dropped; 0: off")
    min_script_share: float | None = Field(
        default=0.5,
        ge=0,
        le=1,
        description="share of letters in the target's script (from its FLORES code) below this: dropped; 0: off",
    )
    lid: LidFilter | None = Field(
        default=None,
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description="language identification of the outputs (off-target translations); off when unset",
    )

    @model_validator(mode="after")
    def _ratio_order(self) -> QualityFilters:
        if self.min_length_ratio and self.max_length_ratio and self.min_length_ratio >= self.max_length_ratio:
            raise ValueError(
                f"min_length_ratio ({self.min_length_ratio}) must be below max_length_ratio ({self.max_length_ratio})"
            )
        return self


def _resolve_device(device: str) -> str:

    return resolve_translate_device(device)


def _resolve_compute_type(compute_type: str, device: str) -> str:
    if compute_type != "auto":
        return compute_type
    import ctranslate2

    supported = ctranslate2.get_supported_compute_types(device)
    preferred = ("int8_float16", "float16", "float32") if device == "cuda" else ("int8", "float32")
    return next((t for t in preferred if t in supported), "default")


class TranslateConfig(StageConfig):
    """Multi-way translation of one language's rows (English) of a corpus artifact.

    Every source row is translated into all `targets`, or into `k` of them drawn per row
    (seeded by the row's group id, so a row's languages do not depend on sharding or order).
    `include_source = false` is the multi-way paper's "en-ablate" variant: `k + 1` languages
    are drawn from the targets plus the source language, and the source row is kept only
    when its language is drawn.

    `device` and `compute_type` "auto" are resolved when the config is validated (CUDA when
    a GPU is visible; int8 on CPU, int8_float16 on GPU), and the resolved values are part of
    the artifact key, since they change the translations. On a machine with a GPU, "auto" and
    "cuda" are refused there when CTranslate2 cannot use it (tasks/translate/cuda_check.py).
    """

    source_lang: str = Field(default="eng_Latn", description="the language of the rows that are translated")
    targets: list[str] = Field(min_length=1, description="FLORES-200 codes of the target pool")
    k: int | None = Field(default=None, ge=1, description="languages drawn per row; all targets when unset")
    include_source: bool = Field(
        default=True, description="false: the en-ablate variant (draw k+1 including the source language)"
    )
    seed: int = 42
    shard_rows: int = Field(default=2048, ge=1, description="source rows per shard (each shard is cached on its own)")
    max_batch_tokens: int = Field(default=4096, ge=16, description="source tokens per CTranslate2 batch (batch_type='tokens')")
    min_rows_per_group: int = Field(default=2, ge=1, description="groups left with fewer rows (source included) are dropped")
    decoding: DecodingConfig = DecodingConfig()
    filters: QualityFilters = QualityFilters()
    device: Literal["auto", "cpu", "cuda"] = "auto"
    compute_type: ComputeType = "auto"
    device_index: int = Field(default=0, ge=0, json_schema_extra=NOT_KEYED)
    inter_threads: int = Field(default=1, ge=1, json_schema_extra=NOT_KEYED)
    intra_threads: int = Field(default=0, ge=0, json_schema_extra=NOT_KEYED, description="0: CTranslate2's default")

    @model_validator(mode="before")
    @classmethod
    def _resolve_auto(cls, data: Any) -> Any:
        if isinstance(data, dict) and (
            data.get("device", "auto") in ("auto", "cuda") or data.get("compute_type", "auto") == "auto"
        ):
            data = dict(data)
            device = data.get("device", "auto")
            if device in ("auto", "cpu", "cuda"):
                data["device"] = device = _resolve_device(device)
                data["compute_type"] = _resolve_compute_type(data.get("compute_type", "auto"), device)
        return data

    @field_validator("source_lang")
    @classmethod
    def _source_lang(cls, code: str) -> str:
        nllb_code(code)  # raises naming the code

        return to_flores(code)

    @field_validator("targets")
    @classmethod
    def _targets(cls, codes: list[str]) -> list[str]:

        for code in codes:
            nllb_code(code)  # raises naming the code
        flores = [to_flores(code) for code in codes]
        dupes = sorted({c for c in flores if flores.count(c) > 1})
        if dupes:
            raise ValueError(f"target languages listed twice (after mapping to FLORES-200): {dupes}")
        return flores

    @model_validator(mode="after")
    def _layout(self) -> TranslateConfig:
        if self.source_lang in self.targets:
            raise ValueError(f"the source language {self.source_lang} is also a target")
        if self.k is not None and self.k > len(self.targets):
            raise ValueError(f"k = {self.k} but the pool has only {len(self.targets)} target languages")
        if not self.include_source and self.k is None:
            raise ValueError("include_source = false (en-ablate) draws k + 1 languages per row: set k")
        per_row = (self.k or len(self.targets)) + 1  # the source row and k translations, or k + 1 drawn rows
        if self.min_rows_per_group > per_row:
            raise ValueError(f"min_rows_per_group = {self.min_rows_per_group} but a group has at most {per_row} rows")
        return self
