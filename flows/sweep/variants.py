"""Variant configs: the pipeline config with a variant's overrides applied, validated in memory
exactly as `xlembed run` validates a config file."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flows.config import ConfigError, PipelineConfig, load_config, load_config_dict
from flows.sweep.grid import Grid, GridError, Variant, apply_override, pipeline_name, resolve_seeds


def variant_raw(base: Mapping[str, Any], variant: Variant, grid_path: Path) -> dict[str, Any]:
    raw = copy.deepcopy(dict(base))
    for key, value in variant.overrides.items():
        try:
            apply_override(raw, key, value)
        except KeyError as exc:
            raise GridError(f"{grid_path}: variant {variant.name!r}: {exc.args[0]}") from None
    return raw


def variant_configs(
    config_path: str | Path, grid: Grid, *, root: str | None = None, base: PipelineConfig | None = None
) -> dict[str, PipelineConfig]:
    """Variant name -> validated PipelineConfig (pipeline name `{name}--{variant}`).

    Each variant's config (`raw`: the base config's TOML with the overrides) is validated by
    `load_config_dict` as if it were the base config file: relative paths resolve against the
    base config's folder, and errors name the grid file, the variant and the key. `base`: the
    base config, when the caller has validated it already. A grid whose seed default is pending
    gets it from this config first (`resolve_seeds`).
    """
    config_path = Path(config_path)
    if base is None:
        base = load_config(config_path, root=root)  # the config itself must be valid
    grid = resolve_seeds(grid, base.raw)
    folder = config_path.expanduser().absolute().parent
    out: dict[str, PipelineConfig] = {}
    for variant in grid.variants:
        raw = variant_raw(base.raw, variant, grid.path)
        raw.setdefault("pipeline", {})["name"] = pipeline_name(base.name, variant.name)
        try:
            out[variant.name] = load_config_dict(raw, config_path, root=root, base_dir=folder)
        except ConfigError as exc:
            where = f"{grid.path}: variant {variant.name!r} (overrides {', '.join(variant.overrides) or 'none'} on {config_path})"
            message = str(exc)
            raise GridError(
                where + message.removeprefix(str(config_path)) if message.startswith(str(config_path)) else f"{where}: {message}"
            ) from None
    return out
