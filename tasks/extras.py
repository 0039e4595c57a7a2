"""Optional parts of xlembed, each installed by an extra of pyproject.toml's
`[project.optional-dependencies]` (`pip install 'xlembed[ray]'`).

The code that needs one calls `require_extra` before importing it, where the setting that asks
for it is read (as datatrove's steps check `_requires_dependencies` when a pipeline is built):
a missing package is an error naming that setting and the command that installs it, not a
`ModuleNotFoundError` from deep inside a run.

    >>> require_extra("ray", 'task_runner = "ray"')
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtraError", "require_extra"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "dask": ("prefect_dask",),  # task_runner = "dask"
    "ray": ("prefect_ray", "ray"),  # task_runner = "ray"
    "eflomal": ("eflomal",),  # [align] backend = "eflomal"
    "fasttext": ("fasttext",),  # [corpus.filters.lid] backend = "fasttext"
    "mteb": ("mteb",),  # the evaluate stage's "mteb" benchmark
}
"""Extra -> the modules of its packages that xlembed imports (pyproject.toml names the packages)."""


class MissingExtraError(ImportError):
    """An optional package is not installed; the message names the extra that installs it."""


def require_extra(extra: str, needed_by: str) -> None:
    """Raise MissingExtraError unless every module of `extra` can be imported; `needed_by` names
    the setting that needs it, in the user's words."""
    missing = [module for module in EXTRAS[extra] if importlib.util.find_spec(module) is None]
    if missing:
        raise MissingExtraError(f"{needed_by} needs {' and '.join(missing)}, which is not installed: pip install 'xlembed[{extra}]'")
