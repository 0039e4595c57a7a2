"""What the four extension-point registries share (objectives, align backends, corpus sources,
benchmarks; docs/architecture.md "How to add"): a name taken once, and a `kind = "..."` table
validated as the config of the class its kind names. Each registry keeps its own checks of
what a class must declare; this module only holds the parts that were copies of each other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic_core import PydanticCustomError

T = TypeVar("T", bound=type)


def register_unique(registry: dict[str, Any], name: str, cls: T, what: str) -> T:
    """`registry[name] = cls`; another class under a taken name is an error naming the holder.
    The same class defined again (a module re-imported, as by `importlib.reload`) replaces it."""
    known = registry.get(name)
    if known is not None and known is not cls and (known.__module__, known.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"{what} {name!r} is already registered by {known.__module__}.{known.__qualname__}")
    registry[name] = cls
    return cls


def validate_kind(value: Any, registry: Mapping[str, type], base: type, what: str, context: dict[str, Any] | None = None) -> Any:
    """One `[[...]]` table with a `kind` as the config of the registered class that kind names.
    Errors are pydantic errors naming the field inside the table (pydantic adds where the table is);
    `what` ("source", "benchmark") names the thing in them and in their error types."""
    if isinstance(value, base):
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError(f"{what}_type", f"a {what} must be a table with a kind")
    known = ", ".join(repr(kind) for kind in registry)
    if "kind" not in value:
        raise PydanticCustomError(f"{what}_kind_missing", f"a {what} needs kind = one of {{known}}", {"known": known})
    cls = registry.get(value["kind"]) if isinstance(value["kind"], str) else None
    if cls is None:
        raise PydanticCustomError(f"{what}_kind", f"unknown {what} kind {{kind}}; known: {{known}}", {"kind": repr(value["kind"]), "known": known})
    return cls.model_validate(value, context=context)
