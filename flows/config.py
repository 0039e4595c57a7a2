"""Pipeline config: one TOML file, validated before anything runs.

`[pipeline]` holds the run settings; every other table is the config section of the stage
of that name, validated by the stage's own pydantic model. Errors name the file, the key,
the value and what was expected.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from storage.keys import check_name
from tasks.extras import MissingExtraError, missing_extras, require_extra
from tasks.stage import Stage
from tasks.stage_config import CONFIG_DIR, StageConfig, resolve_config_path
from tasks.strict_numbers import StrictScalars

ROOT_ENV = "XLEMBED_ROOT"


class ConfigError(ValueError):
    """A config file that cannot be used; the message is meant for the user as is."""


class PipelineSettings(StrictScalars):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="names the refs this pipeline moves: refs/{name}/{stage}")
    root: str = Field(default="artifacts", description="artifact root: a local folder or s3://bucket/prefix")
    stages: list[str] | None = Field(default=None, description="stages to run; default: every stage with a section")
    max_workers: int = Field(default=2, ge=1, le=1024, description="shards built at once by the flow's task runner")
    task_runner: Literal["threads", "dask", "ray"] = Field(
        default="threads",
        description="where shards run: threads here, a Dask cluster (prefect-dask) or a Ray cluster (prefect-ray)",
    )
    dask_address: str | None = Field(
        default=None, description="scheduler of an existing Dask cluster; unset: a local cluster of max_workers processes"
    )
    ray_address: str | None = Field(
        default=None,
        description="an existing Ray cluster (e.g. ray://head:10001 or auto); unset: a local Ray of max_workers CPUs",
    )
    ray_gpus_per_task: float = Field(
        default=0,
        ge=0,
        description="GPUs Ray reserves for each shard of a stage that runs a model (1: one GPU per shard); CPU stages reserve none",
    )
    write_index: bool = Field(
        default=True,
        description="after a run or sweep, rewrite {root}/index.html (xlembed artifacts index) and link it from the flow run's artifacts",
    )
    allow_empty: list[str] = Field(
        default_factory=list, description="stages whose output may have no rows; for any other, keeping 0 rows is an error"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_name(name, "pipeline name")

    @field_validator("task_runner")
    @classmethod
    def _runner_installed(cls, runner: str) -> str:
        if runner in ("dask", "ray"):
            try:
                require_extra(runner, f"task_runner = {runner!r}")
            except MissingExtraError as exc:
                raise ValueError(str(exc)) from None
        return runner


@dataclass(frozen=True)
class PipelineConfig:
    path: Path
    settings: PipelineSettings
    stage_configs: dict[str, StageConfig] = field(default_factory=dict)
    # the parsed TOML it was validated from (before `root` overrides): what a sweep varies
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def stages(self) -> list[str]:
        return list(self.stage_configs)


def _location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def format_validation_error(path: Path, section: str, error: ValidationError) -> str:
    lines = [f"{path}: invalid config"]
    for item in error.errors():
        where = _location((section, *item["loc"]))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        shown = item.get("input")
        value = "" if isinstance(shown, dict) or item["type"] == "missing" else f" (got {shown!r})"
        lines.append(f"  {where}: {message}{value}")
    return "\n".join(lines)


def load_config(
    path: str | os.PathLike[str],
    stages: dict[str, Stage[Any]] | None = None,
    root: str | None = None,
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> PipelineConfig:
    """Parse and validate a pipeline TOML; `root` (or $XLEMBED_ROOT) overrides the file's root.

    Relative paths in the file (`pipeline.root`, sources, benchmarks, model folders) resolve
    against the file's folder, or `base_dir`; `root` and $XLEMBED_ROOT resolve against the
    current directory, as command-line paths do."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # -sig: a BOM (Windows editors) is not TOML
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file (looked for {path.expanduser().absolute()})") from None
    except (IsADirectoryError, PermissionError) as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}, line {line})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: malformed TOML: {exc}") from None
    return load_config_dict(raw, path, stages, root, base_dir=base_dir)


def load_config_dict(
    raw: Mapping[str, Any],
    origin: str | os.PathLike[str],
    stages: dict[str, Stage[Any]] | None = None,
    root: str | None = None,
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> PipelineConfig:
    """Validate a pipeline config already parsed from TOML (a sweep's variants are built in
    memory), exactly as `load_config` validates a file. `origin` is the file it stands for: errors
    begin with it, and relative paths resolve against its folder unless `base_dir` is given."""
    from flows.stages import stage_registry  # lazy: every stage module (polars), not needed for --help

    registry = stages if stages is not None else stage_registry()
    path = Path(origin)
    config_dir = Path(base_dir if base_dir is not None else path.expanduser().absolute().parent)

    if "pipeline" not in raw:
        raise ConfigError(f'{path}: missing [pipeline] section (at least: name = "...")')
    unknown = [name for name in raw if name != "pipeline" and name not in registry]
    if unknown:
        raise ConfigError(
            f"{path}: unknown section(s) {', '.join(f'[{u}]' for u in unknown)}; known: [pipeline], {', '.join(f'[{s}]' for s in registry)}"
        )
    try:
        settings = PipelineSettings.model_validate(raw["pipeline"])
    except ValidationError as exc:
        raise ConfigError(format_validation_error(path, "pipeline", exc)) from None
    override = root or os.environ.get(ROOT_ENV)
    if override:
        settings = settings.model_copy(update={"root": override})
    else:
        settings = settings.model_copy(update={"root": resolve_config_path(settings.root, config_dir)})

    wanted = settings.stages if settings.stages is not None else [name for name in registry if name in raw]
    bad = [name for name in wanted if name not in registry]
    if bad:
        raise ConfigError(f"{path}: pipeline.stages names unknown stage(s) {bad}; known: {list(registry)}")
    if not wanted:
        raise ConfigError(f"{path}: no stages to run: add a section such as [corpus]")
    stray = [name for name in settings.allow_empty if name not in wanted]
    if stray:
        raise ConfigError(
            f"{path}: pipeline.allow_empty names stage(s) {stray} that this pipeline does not run; it runs {wanted}"
        )

    stage_configs: dict[str, StageConfig] = {}
    for name in registry:  # registry order is dependency order
        if name not in wanted:
            continue
        stage = registry[name]
        missing_inputs = [i for i in stage.inputs if i not in wanted]
        if missing_inputs:
            raise ConfigError(f"{path}: stage [{name}] reads {missing_inputs}, which the pipeline does not include")
        section = raw.get(name, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: [{name}] must be a table, got {section!r}")
        try:
            stage_configs[name] = stage.config_model.model_validate(section, context={CONFIG_DIR: str(config_dir)})
        except ValidationError as exc:
            raise ConfigError(format_validation_error(path, name, exc)) from None
        missing = missing_extras(stage_configs[name], name)
        if missing:  # refused now, not when the stage runs (hours later, after training)
            raise ConfigError(f"{path}: " + "; ".join(missing))
    return PipelineConfig(path=path, settings=settings, stage_configs=stage_configs, raw=copy.deepcopy(dict(raw)))
