"""What the four extension-point registries share (objectives, aligners, corpus sources,
benchmarks; docs/architecture.md "Extension points"). In each, the component is a pydantic
settings class, registered under a name taken once, and a config's table is validated as the
class its name selects: a `kind = "..."` in a `[[...]]` table (sources, benchmarks;
`validate_kind`), or the table's own name (`[train.objectives.<name>]`, `[align.<backend>]`;
`validate_named`). Each registry keeps its own checks of what a class must declare."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError
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


def literal_kind(cls: type, what: str) -> str:
    """The `kind = "..."` that selects a pydantic class: its `kind` field's one Literal value
    (a TypeError naming the class otherwise; `what` is "source", "benchmark", ...)."""
    field = cls.model_fields.get("kind")
    values = (
        typing.get_args(field.annotation) if field is not None and typing.get_origin(field.annotation) is typing.Literal else ()
    )
    if len(values) != 1 or not isinstance(values[0], str):
        raise TypeError(f'{what} {cls.__name__} must declare its kind as one string: kind: Literal["name"]')
    return values[0]


def validate_kind(value: Any, registry: Mapping[str, type], base: type, what: str, context: dict[str, Any] | None = None) -> Any:
    """One `[[...]]` table with a `kind` as the config of the registered class that kind names.
    Errors are pydantic errors naming the field inside the table (pydantic adds where the table is);
    `what` ("source", "benchmark") names the thing in them and in their error types."""
    if isinstance(value, base):
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError(f"{what}_type", f"a {what} must be a table with a kind")
    if "kind" not in value:
        known = ", ".join(repr(kind) for kind in registry)
        raise PydanticCustomError(f"{what}_kind_missing", f"a {what} needs kind = one of {{known}}", {"known": known})
    cls = lookup(registry, value["kind"])
    if cls is None:
        known = ", ".join(repr(kind) for kind in registry)
        raise PydanticCustomError(
            f"{what}_kind", f"unknown {what} kind {{kind}}; known: {{known}}", {"kind": repr(value["kind"]), "known": known}
        )
    return cls.model_validate(value, context=context)


def validate_named(
    value: Any, registry: Mapping[str, type], name: str, where: str, what: str, context: dict[str, Any] | None = None
) -> Any:
    """The table `value` at `where` (`[train.objectives.dueam]`) as the config of the class
    registered under `name`. Errors are one ValueError naming `where`, the unknown name (with the
    known ones) or the fields at fault; `what` ("objective", "align backend") names the thing."""
    cls = lookup(registry, name)
    if cls is None:
        raise ValueError(f"{where}: no such {what} (known: {', '.join(sorted(registry))})")
    if isinstance(value, cls):
        return value
    try:
        return cls.model_validate({} if value is None else value, context=context)
    except ValidationError as exc:  # its location would be lost in the enclosing model's error: name the table
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(table)'}: "
            + ("no such setting (extra inputs are not permitted)" if e["type"] == "extra_forbidden" else e["msg"])
            for e in exc.errors()
        )
        raise ValueError(f"{where}: {problems}") from None


# Plug-ins outside the package register when their module is imported. A process that did not
# import them (a Dask or Ray worker, `xlembed` itself) finds them through this entry-point group:
#     [project.entry-points."xlembed.plugins"]
#     my_source = "my_package.my_source"
PLUGIN_GROUP = "xlembed.plugins"
_plugins_loaded = False


class PluginError(ValueError):
    """A module named in the `xlembed.plugins` entry-point group failed to import (a ValueError, so
    that config validation reports it at the field that named the plug-in's kind)."""


def load_plugins() -> list[str]:
    """Import every module of the `xlembed.plugins` entry-point group, once per process; the
    names of the entry points loaded. Called by a registry lookup that misses, so a process
    that never meets an unknown name imports nothing."""
    global _plugins_loaded
    if _plugins_loaded:
        return []
    _plugins_loaded = True
    from importlib.metadata import entry_points

    loaded = []
    for point in entry_points(group=PLUGIN_GROUP):
        try:
            point.load()
        except Exception as exc:
            source = f" (distribution {point.dist.name})" if point.dist is not None else ""
            raise PluginError(
                f"xlembed plug-in {point.name!r} = {point.value!r}{source} failed to import: {type(exc).__name__}: {exc}"
            ) from exc
        loaded.append(point.name)
    return loaded


def lookup(registry: Mapping[str, Any], name: Any) -> Any:
    """`registry[name]`, or None; a miss first loads the entry-point plug-ins (`load_plugins`)."""
    if not isinstance(name, str):
        return None
    if name not in registry:
        load_plugins()
    return registry.get(name)
