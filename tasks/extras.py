"""Optional parts of xlembed, each installed by an extra of pyproject.toml's
`[project.optional-dependencies]` (`pip install 'xlembed[ray]'`).

A config part that needs one says so in `required_extras()` (a benchmark of `kind = "mteb"`; an
align backend from its `extras`, which also name the modules, as a plug-in's extra is no entry here),
and `missing_extras` finds them all when the config is loaded, so `xlembed plan` refuses the
config before anything runs. The code that needs one also calls `require_extra` before importing it, where the setting that asks
for it is read (as datatrove's steps check `_requires_dependencies` when a pipeline is built):
a missing package is an error naming that setting and the command that installs it, not a
`ModuleNotFoundError` from deep inside a run.

    >>> require_extra("ray", 'task_runner = "ray"')
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["EXTRAS", "MissingExtraError", "missing_extras", "require_extra"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "dask": ("prefect_dask",),  # task_runner = "dask"
    "ray": ("prefect_ray", "ray"),  # task_runner = "ray"
    "fasttext": ("fasttext",),  # [corpus.filters.lid] backend = "fasttext"
    "mteb": ("mteb",),  # the evaluate stage's "mteb" benchmark
}
"""Extra -> the modules of its packages that xlembed imports (pyproject.toml names the packages),
for the settings that are no registered component; an align backend declares its own (`extras`)."""


class MissingExtraError(ImportError):
    """An optional package is not installed; the message names the extra that installs it."""


def require_extra(extra: str, needed_by: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise MissingExtraError unless every module of `extra` (`modules`, default its EXTRAS entry)
    can be imported; `needed_by` names the setting that needs it, in the user's words."""
    missing = [module for module in (EXTRAS[extra] if modules is None else modules) if importlib.util.find_spec(module) is None]
    if missing:
        raise MissingExtraError(
            f"{needed_by} needs {' and '.join(missing)}, which is not installed: pip install 'xlembed[{extra}]'"
        )


def missing_extras(config: Any, where: str) -> list[str]:
    """What `config` (a validated stage config, walked through its nested models and lists) needs
    and is not installed: one message per part, starting with its place (`evaluate.benchmarks[1]`).
    A part declares its needs with a `required_extras()` method returning (extra, setting) pairs,
    or (extra, setting, modules) where the extra is no EXTRAS entry."""
    from pydantic import BaseModel

    problems: list[str] = []
    declared = getattr(config, "required_extras", None)
    if callable(declared):
        for extra, setting, *modules in declared():
            try:
                require_extra(extra, setting, *modules)
            except MissingExtraError as exc:
                problems.append(f"{where}: {exc}")
    if isinstance(config, BaseModel):
        for name in type(config).model_fields:
            problems += missing_extras(getattr(config, name), f"{where}.{name}")
    elif isinstance(config, (list, tuple)):
        for index, item in enumerate(config):
            problems += missing_extras(item, f"{where}[{index}]")
    return problems
