"""Typed config of the align stage (the `[align]` section of a pipeline TOML).

    [align]
    backend = "wspalign"          # a registered backend: "wspalign", "simalign", "eflomal", ...
    pairs = "english_pivot"       # or "all_pairs"

    [align.wspalign]              # settings of the chosen backend (defaults when omitted)
    model = "qiyuw/WSPAlign-xlm-base"
    combine = "sum"
    threshold = 0.9

Only the chosen backend's table may be given; it alone enters the cache key. Each backend owns
its settings model (`tasks/align/backends/<backend>.py`, registered in `ALIGN_BACKENDS`):
validating `[align]` gives an `AlignConfig` whose field named after the backend holds them.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import Field, ValidationInfo, ValidatorFunctionWrapHandler, create_model, field_validator, model_validator

from tasks.align.backends import ALIGN_BACKENDS, AlignBackend
from tasks.languages import LangCodes
from tasks.registry import lookup
from tasks.stage import StageConfig

# The keys of align artifacts built before backends were registered hold a table for each of
# these three, null when not chosen; the key of every config keeps them, so those keys stay
# valid. A backend added later does not add to this list.
PRE_REGISTRY_TABLES = ("wspalign", "simalign", "eflomal")


class AlignConfig(StageConfig):
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

    def required_extras(self) -> list[tuple[str, str]]:
        """A backend whose package is an optional extra (eflomal) is checked when the config loads."""
        from tasks.extras import EXTRAS

        return [(self.backend, f'[align] backend = "{self.backend}"')] if self.backend in EXTRAS else []

    def __new__(cls, *args: Any, **data: Any) -> AlignConfig:
        # `AlignConfig(backend=..., ...)` gives the backend's config class, as model_validate does
        # (Python then runs that instance's __init__ with the same arguments: validated once more)
        if cls is AlignConfig and lookup(ALIGN_BACKENDS, data.get("backend")) is not None:
            return backend_config_class(ALIGN_BACKENDS[data["backend"]]).model_validate(data)
        return super().__new__(cls)

    @model_validator(mode="wrap")
    @classmethod
    def _backend_table(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """`AlignConfig.model_validate(section)` gives the chosen backend's config class
        (`backend_config_class`), with the backend's table validated by its settings model."""
        if not isinstance(data, dict) or data.get("backend") is None:
            return handler(data)
        backend = data["backend"]
        if lookup(ALIGN_BACKENDS, backend) is None:
            raise ValueError(f"unknown align backend {backend!r}; registered: {', '.join(sorted(ALIGN_BACKENDS))}")
        tables = set(ALIGN_BACKENDS) | set(PRE_REGISTRY_TABLES)
        others = [name for name in sorted(tables) if name != backend and data.get(name) is not None]
        if others:
            raise ValueError(f"[align.{others[0]}] is given but backend = {backend!r}; remove it or change the backend")
        data = {k: v for k, v in data.items() if k not in tables or k == backend}  # null tables (a dump of an older config)
        data[backend] = data.get(backend) or {}
        model = backend_config_class(ALIGN_BACKENDS[backend])
        if cls is model:
            return handler(data)
        return model.model_validate(data, context=info.context)

    @field_validator("pivot")
    @classmethod
    def _pivot(cls, pivot: str) -> str:
        from tasks.languages import to_flores

        return to_flores(pivot)

    @property
    def backend_class(self) -> type[AlignBackend]:
        """The chosen backend (its `load`, `fingerprint`, `uses_base_model`)."""
        return ALIGN_BACKENDS[self.backend]

    @property
    def settings(self) -> Any:
        """The chosen backend's settings (an instance of its `Settings` model)."""
        return getattr(self, self.backend)

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        return {**dict.fromkeys(PRE_REGISTRY_TABLES), **data}

    def flores_langs(self) -> list[str] | None:
        from tasks.languages import to_flores

        return None if self.langs is None else [to_flores(code) for code in self.langs]

    def __reduce__(self) -> tuple[Any, ...]:
        # the per-backend classes are built at run time: pickle the section, not the class
        return (AlignConfig.model_validate, (self.model_dump(mode="json"),))


@cache
def backend_config_class(backend: type[AlignBackend]) -> type[AlignConfig]:
    """`AlignConfig` with one more field, named after the backend, holding its settings."""
    if backend.name in AlignConfig.model_fields:
        raise ValueError(f"align backend name {backend.name!r} is a field of [align]; rename the backend")
    field = (backend.Settings, Field(description=f"settings of the {backend.name} backend ([align.{backend.name}])"))
    return create_model("AlignConfig", __base__=AlignConfig, __module__=__name__, **{backend.name: field})
