"""Typed config of the align stage (the `[align]` section of a pipeline TOML).

    [align]
    backend = "wspalign"          # a registered backend: "wspalign", "simalign", "eflomal", ...
    pairs = "english_pivot"       # or "all_pairs"

    [align.wspalign]              # settings of the chosen backend (defaults when omitted)
    model = "qiyuw/WSPAlign-xlm-base"
    combine = "sum"
    threshold = 0.9

Only the chosen backend's table may be given; it alone enters the cache key. Each backend is its
settings class (`tasks/align/backends/<backend>.py`, registered in `ALIGN_BACKENDS`), which
validates that table: `AlignConfig.settings` holds it, under the backend's name.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from tasks.align.backends import ALIGN_BACKENDS, AlignerSettings
from tasks.languages import LangCodes, to_flores
from tasks.registry import lookup, validate_named
from tasks.stage_config import StageConfig

# The keys of align artifacts built before backends were registered hold a table for each of
# these three, null when not chosen; the key of every config keeps them, so those keys stay
# valid. A backend added later does not add to this list.
PRE_REGISTRY_TABLES = ("wspalign", "simalign", "eflomal")


class AlignConfig(StageConfig):
    # the chosen backend's table is held under its name (`settings`), as the TOML writes it
    model_config = ConfigDict(extra="allow", frozen=True)

    backend: str = Field(description="which aligner: a name registered in tasks.align.backends.ALIGN_BACKENDS")
    pairs: Literal["english_pivot", "all_pairs"] = Field(
        default="english_pivot", description="pivot with every other language of a group (WACSE), or every pair once"
    )
    pivot: str = Field(default="eng_Latn", description="source side of english_pivot pairs")
    langs: LangCodes | None = Field(default=None, description="only these languages (default: all in the corpus)")
    splits: list[Literal["train", "dev"]] = Field(default=["train"], min_length=1, description="corpus splits to align")
    groups_per_shard: int = Field(default=2_000, ge=1, description="multi-way groups per cached shard")
    max_groups: int | None = Field(default=None, ge=1, description="align only the first N groups (stable order)")
    max_words: int = Field(default=128, ge=1, le=4096, description="sentences with more words are dropped")

    @model_validator(mode="before")
    @classmethod
    def _backend_table(cls, data: Any, info: ValidationInfo) -> Any:
        """The chosen backend's table, validated by its settings class; any other table is refused."""
        if not isinstance(data, dict) or not isinstance(data.get("backend"), str):
            return data
        backend = data["backend"]
        if lookup(ALIGN_BACKENDS, backend) is None:
            raise ValueError(f"unknown align backend {backend!r}; registered: {', '.join(sorted(ALIGN_BACKENDS))}")
        if backend in cls.model_fields:
            raise ValueError(f"align backend name {backend!r} is a field of [align]; rename the backend")
        tables = set(ALIGN_BACKENDS) | set(PRE_REGISTRY_TABLES)
        others = [name for name in sorted(tables) if name != backend and data.get(name) is not None]
        if others:
            raise ValueError(f"[align.{others[0]}] is given but backend = {backend!r}; remove it or change the backend")
        unknown = sorted(k for k in data if k not in cls.model_fields and k not in tables)
        if unknown:
            raise ValueError(f"[align] {unknown[0]}: no such setting (a backend's settings go in [align.{backend}])")
        table = validate_named(data.get(backend), ALIGN_BACKENDS, backend, f"[align.{backend}]", "align backend", info.context)
        data = {k: v for k, v in data.items() if k not in tables}  # null tables (a dump of an older config)
        return {**data, backend: table}

    @field_validator("pivot")
    @classmethod
    def _pivot(cls, pivot: str) -> str:
        return to_flores(pivot)

    @property
    def settings(self) -> AlignerSettings:
        """The chosen backend: its settings, `build`, `fingerprint`, `uses_base_model`."""
        return (self.__pydantic_extra__ or {})[self.backend]

    def required_extras(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The chosen backend's optional packages, checked when the config loads."""
        return self.settings.required_extras()

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**dict.fromkeys(PRE_REGISTRY_TABLES), **data}

    def flores_langs(self) -> list[str] | None:
        return None if self.langs is None else [to_flores(code) for code in self.langs]
