"""Typed config of the evaluate stage (the `[evaluate]` section). Each benchmark's own config
(one `[[evaluate.benchmarks]]` table) is its class in tasks/evaluate/benchmarks/."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainValidator, SerializeAsAny, ValidationInfo, field_validator, model_validator

from tasks.encoders.pooling import Pooling, check_pooling, keyed_pooling
from tasks.encoders.precision import Precision
from tasks.evaluate.benchmarks.registry import Benchmark, validate_benchmark
from tasks.evaluate.groups import LANGUAGE_GROUPS
from tasks.stage_config import KEYED_UNLESS_DEFAULT, NOT_KEYED, StageConfig


class EncoderSettings(StageConfig):
    """How sentences become vectors. The model itself is the `base_model` artifact."""

    pooling: Pooling | None = Field(
        default=None,
        description="'mean', 'cls' (the first token) or 'pooler' (tasks/encoders/pooling.py); default: the model's own "
        "(sentence-transformers) pooling, else mean",
    )
    prefix: str = Field(default="", description='prepended to every text, e.g. "query: " for E5 models')
    max_length: int = Field(default=128, ge=8, le=8192)
    batch_size: int = Field(default=64, ge=1, json_schema_extra=NOT_KEYED)
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED, description="default: cuda if available")
    precision: Precision = Field(
        default="fp32",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description="fp32 (TF32 off: a GPU scores as the CPU does) or bf16 (autocast, faster on GPUs, changes scores: keyed)",
    )

    @field_validator("pooling", mode="before")
    @classmethod
    def _pooling(cls, value: Any) -> Any:
        return value if value is None else check_pooling(value)  # the old name "cls_before_pooler" is refused with its new one

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "pooling": keyed_pooling(self.pooling)}  # "cls" keeps the key it had as "cls_before_pooler"


def _benchmark(value: Any, info: ValidationInfo) -> Benchmark:
    return validate_benchmark(value, info.context)


# One `[[evaluate.benchmarks]]` table: the config of the registered class its `kind` names
# (tasks/evaluate/benchmarks/). Looked up when a config is validated, so a benchmark registered
# by a plug-in before then is accepted like a built-in one.
BenchmarkConfig = Annotated[SerializeAsAny[Benchmark], PlainValidator(_benchmark)]


class EvaluateConfig(StageConfig):
    encoder: EncoderSettings = EncoderSettings()
    benchmarks: list[BenchmarkConfig] = Field(min_length=1)
    groups: list[str] = Field(
        default_factory=lambda: ["wacse-4", "wacse-5", "wacse-8"],
        description="language groups to average (see tasks/evaluate/groups.py)",
    )
    baseline: str | None = Field(
        default=None, description="key (or unique prefix) of an earlier evaluate artifact to compare with"
    )
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

    def screening_notes(self) -> list[str]:
        """One line per benchmark scored on a seeded subset (`subset`): such an evaluation is a screen."""
        return [note for bench in self.benchmarks if (note := bench.screening_note()) is not None]

    @model_validator(mode="after")
    def _groups_known(self) -> EvaluateConfig:

        unknown = [g for g in self.groups if g not in LANGUAGE_GROUPS]
        if unknown:
            raise ValueError(f"unknown language groups {unknown}; known: {sorted(LANGUAGE_GROUPS)}")
        return self
