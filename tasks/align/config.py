"""Typed config of the align stage (the `[align]` section of a pipeline TOML).

    [align]
    backend = "wspalign"          # or "simalign", "eflomal"
    pairs = "english_pivot"       # or "all_pairs"

    [align.wspalign]              # settings of the chosen backend (defaults when omitted)
    model = "qiyuw/WSPAlign-xlm-base"
    combine = "sum"
    threshold = 0.9

Only the chosen backend's table may be given; it alone enters the cache key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tasks.corpus.config import LangCodes
from tasks.stage import NOT_KEYED, HubIdOrPath, StageConfig, local_source_paths

BACKENDS = ("wspalign", "simalign", "eflomal")


def _is_local_dir(path: str) -> bool:
    return Path(path).expanduser().is_dir()
Precision = Literal["auto", "float32", "bfloat16", "float16"]


class WspalignSettings(StageConfig):
    """Span-prediction alignment with a WSPAlign question-answering checkpoint.

    For each word of sentence A the question is A with the word between ` ¶ ` markers and
    the context is sentence B; the predicted span of B (or the null answer) gives the aligned
    words with score P(start)·P(end). Both directions are run and combined:

      sum           the authors' inference script: for pairs found A→B, each direction's
                    score divided by its span width (in words), summed; pairs found only
                    B→A are dropped; kept when the sum > threshold. WACSE uses this with
                    threshold 0.9. The stored score is the sum / 2 (so it stays in [0, 1]).
      average       the authors' evaluation: (P_ab + P_ba^T) / 2 > threshold (they use 0.4)
      intersection  both directions > threshold; score = their mean
      union         either direction > threshold; score = the larger
    """

    source: Literal["hub", "local", "tiny_random"] = Field(
        default="hub", description="hub id, local directory, or a seeded tiny random model built on the spot (mechanics tests)"
    )
    model: HubIdOrPath = Field(default="qiyuw/WSPAlign-xlm-base", description="hub id or local directory (safetensors weights only)")

    @model_validator(mode="before")
    @classmethod
    def _local_model_path(cls, data: Any, info: ValidationInfo) -> Any:
        return local_source_paths(data, info, ("model",))
    revision: str | None = Field(default=None, description="hub revision (commit) to pin")
    seed: int = Field(default=0, description="seed of the tiny_random model")
    combine: Literal["sum", "average", "intersection", "union"] = "sum"
    threshold: float = Field(default=0.9, ge=0.0, le=2.0, description="WACSE: 0.9 with combine = 'sum'")
    max_seq_length: int = Field(default=384, ge=16, le=4096, description="pairs whose question+context is longer are dropped")
    max_answer_tokens: int = Field(default=15, ge=1, le=128, description="longest predicted span, in tokens")
    batch_tokens: int = Field(default=16_384, ge=256, json_schema_extra=NOT_KEYED, description="padded tokens per forward batch")
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED, description="default: cuda if available")
    precision: Precision = Field(default="auto", json_schema_extra=NOT_KEYED, description="auto: bfloat16 on CUDA, float32 on CPU")

    def located_fields(self) -> set[str]:
        # a local model folder is keyed by its files' contents (align's fingerprint), not its path
        return {"model"} if self.source == "local" and _is_local_dir(self.model) else set()

    @model_validator(mode="after")
    def _model_named(self) -> WspalignSettings:
        if self.source != "tiny_random" and not self.model.strip():
            raise ValueError("wspalign.model must name a hub id or a local directory")
        return self


class SimalignSettings(StageConfig):
    """SimAlign: word vectors (mean of subword vectors) of an encoder, cosine similarity, then
    `argmax` (mutual best), `itermax` (argmax, then again among unaligned words, SimAlign's
    default) or `match` (maximum-weight one-to-one matching). Score = (cos + 1) / 2."""

    model: HubIdOrPath | None = Field(
        default=None, description="encoder directory or hub id; default: the pipeline's base_model artifact"
    )
    method: Literal["argmax", "itermax", "match"] = "itermax"
    max_count: int = Field(default=2, ge=1, le=10, description="itermax: rounds (SimAlign: 2)")
    alpha: float = Field(default=0.9, ge=0.0, le=1.0, description="itermax: weight of already aligned rows/columns (SimAlign: 0.9)")
    prefix: str = Field(default="", description='prepended to every sentence, e.g. "query: "')
    max_length: int = Field(default=256, ge=8, le=8192, description="tokens; longer sentences are dropped")
    batch_size: int = Field(default=64, ge=1, json_schema_extra=NOT_KEYED)
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED)

    def located_fields(self) -> set[str]:
        # a local encoder folder is keyed by its files' contents (align's fingerprint), not its path
        return {"model"} if self.model and _is_local_dir(self.model) else set()


class EflomalSettings(StageConfig):
    """eflomal (Östling & Tiedemann 2016): Bayesian IBM-style alignment by Gibbs sampling, per
    language pair, over the pairs of a shard (larger shards give better statistics).
    Directional links are symmetrised; score 1.0 for links found in both directions, else 0.5.
    eflomal seeds its sampler from /dev/urandom: results are not bit-for-bit reproducible."""

    model: Literal[1, 2, 3] = Field(default=3, description="1: IBM1, 2: +HMM, 3: +fertility")
    symmetrize: Literal["grow_diag_final_and", "intersection", "union"] = "grow_diag_final_and"
    n_samplers: int = Field(default=3, ge=1, le=64)
    null_prior: float = Field(default=0.2, gt=0.0, lt=1.0)
    iterations_scale: float = Field(default=1.0, gt=0.0, le=100.0, description="eflomal's rel_iterations")


class AlignConfig(StageConfig):
    backend: Literal["wspalign", "simalign", "eflomal"] = Field(description="which aligner")
    pairs: Literal["english_pivot", "all_pairs"] = Field(
        default="english_pivot", description="pivot with every other language of a group (WACSE), or every pair once"
    )
    pivot: str = Field(default="eng_Latn", description="source side of english_pivot pairs")
    langs: LangCodes | None = Field(default=None, description="only these languages (default: all in the corpus)")
    splits: list[Literal["train", "dev"]] = Field(default=["train"], min_length=1, description="corpus splits to align")
    groups_per_shard: int = Field(default=2_000, ge=1, description="multi-way groups per cached shard")
    max_groups: int | None = Field(default=None, ge=1, description="align only the first N groups (stable order)")
    max_words: int = Field(default=128, ge=1, le=4096, description="sentences with more words are dropped")
    wspalign: WspalignSettings | None = None
    simalign: SimalignSettings | None = None
    eflomal: EflomalSettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _backend_table(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        backend = data.get("backend")
        others = [name for name in BACKENDS if name != backend and data.get(name) is not None]
        if backend in BACKENDS and others:
            raise ValueError(f"[align.{others[0]}] is given but backend = {backend!r}; remove it or change the backend")
        if backend in BACKENDS and data.get(backend) is None:
            data = {**data, backend: {}}
        return data

    @field_validator("pivot")
    @classmethod
    def _pivot(cls, pivot: str) -> str:
        from tasks.corpus.languages import to_flores

        return to_flores(pivot)

    @property
    def settings(self) -> WspalignSettings | SimalignSettings | EflomalSettings:
        """The chosen backend's settings."""
        return getattr(self, self.backend)

    def flores_langs(self) -> list[str] | None:
        from tasks.corpus.languages import to_flores

        return None if self.langs is None else [to_flores(code) for code in self.langs]
