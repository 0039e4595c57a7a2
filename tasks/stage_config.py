"""A stage's config section, as the artifact key sees it: `StageConfig` (the base of every
stage's config and of every component a config holds, with what it needs of the machine:
`needs_gpu`), the markers that keep a field out of the key (NOT_KEYED, KEYED_UNLESS_DEFAULT,
CONTENT_KEYED), the keyed view of a config (`keyed_parts`), and how paths written in a config
file resolve against its folder (ConfigPath, HubIdOrPath)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, model_validator

from tasks.strict_numbers import StrictScalars

# Mark a config field with `Field(json_schema_extra=NOT_KEYED)` when changing it cannot
# change the output (worker counts, batch sizes for reading, timeouts): it stays out of the key.
NOT_KEYED = {"keyed": False}
# Mark a field added after artifacts existed with `Field(json_schema_extra=KEYED_UNLESS_DEFAULT)`:
# at its default (which reproduces the behaviour before it) it stays out of the key, so those
# artifacts keep their keys; any other value is keyed.
KEYED_UNLESS_DEFAULT = {"keyed": "unless_default"}
# Mark a field that names where an input lies (a local path, a URL) with
# `Field(json_schema_extra=CONTENT_KEYED)` when the stage's `fingerprint_sources` keys what is
# read there by content: the location stays out of the key (the same bytes elsewhere share the
# artifact) and is recorded in the manifest's `locations`, for lineage. A field that is a
# location only in some configs (a hub id or a local folder) is declared by overriding
# `StageConfig.located_fields` instead.
CONTENT_KEYED = {"keyed": "by_content"}


# Relative local paths in a config file resolve against the file's folder (load_config passes it
# as the validation context `config_dir`); absolute paths and URLs are kept as they are. Without
# a context (a config built in code) paths stay as given, relative to the current directory.
CONFIG_DIR = "config_dir"


def resolve_config_path(value: str, config_dir: str | os.PathLike[str] | None) -> str:
    """A path from a config file made absolute against `config_dir` (URLs, `~` and absolute paths kept)."""
    if config_dir is None or not value or "://" in value or value.startswith("~"):
        return value
    path = Path(value)
    return value if path.is_absolute() else os.path.normpath(Path(config_dir) / path)


def looks_like_path(value: str, config_dir: str | os.PathLike[str] | None) -> bool:
    """For fields that hold a hub id or a local folder: is `value` meant as a folder? Yes if it
    is written as a path (./ ../ / ~) or names a folder next to the config file."""
    if value.startswith((".", "/", "~")) or "\\" in value:
        return True
    return config_dir is not None and (Path(config_dir) / value).exists()


def _config_path(value: Any, info: ValidationInfo) -> Any:
    config_dir = (info.context or {}).get(CONFIG_DIR)
    if isinstance(value, str):
        return resolve_config_path(value, config_dir)
    if isinstance(value, dict):
        return {k: resolve_config_path(v, config_dir) if isinstance(v, str) else v for k, v in value.items()}
    return value


def _hub_id_or_path(value: Any, info: ValidationInfo) -> Any:
    config_dir = (info.context or {}).get(CONFIG_DIR)
    if isinstance(value, str) and looks_like_path(value, config_dir):
        return resolve_config_path(value, config_dir)
    return value


def local_source_paths(data: Any, info: ValidationInfo, fields: tuple[str, ...], sources: tuple[str, ...] = ("local",)) -> Any:
    """A `mode="before"` model validator's body: when `data["source"]` says the model is a local
    folder, its `fields` resolve as ConfigPath (written as a bare name or not)."""
    config_dir = (info.context or {}).get(CONFIG_DIR)
    if isinstance(data, dict) and data.get("source") in sources:
        data = {**data, **{f: resolve_config_path(data[f], config_dir) for f in fields if isinstance(data.get(f), str)}}
    return data


# A local path (or URL) in a config section: relative paths resolve against the config's folder.
ConfigPath = Annotated[str, AfterValidator(_config_path)]
# A model-hub id or a local folder: resolved like ConfigPath only when written as a path.
HubIdOrPath = Annotated[str, AfterValidator(_hub_id_or_path)]


class StageConfig(StrictScalars):
    """Base of every stage's config section: unknown keys are errors, and a string or a boolean
    where a number is wanted (or anything but a boolean where one is) is an error, not coerced."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # A component that runs only on the accelerator (it has no CPU path) says so here.
    requires_gpu: ClassVar[bool] = False

    def needs_gpu(self) -> bool:
        """Whether this config's work runs on the accelerator, as it declares it: `requires_gpu`,
        or its own `device` setting naming no CPU (unset or "auto": the accelerator when there is
        one), or a component it holds (a backend's table, an objective's section, a source, a
        benchmark) that needs it. What a stage's shards reserve (`Stage.resources`) is read here;
        a component whose need depends on other settings overrides this."""
        if self.requires_gpu:
            return True
        if "device" in type(self).model_fields and device_needs_gpu(getattr(self, "device")):
            return True
        return any(part.needs_gpu() for part in self.nested_configs())

    def gpu_only_parts(self) -> list[StageConfig]:
        """The components held here, at any depth, that run only on the accelerator and are on."""
        out: list[StageConfig] = []
        for part in self.nested_configs():
            if part.requires_gpu and part.needs_gpu():
                out.append(part)
            out.extend(part.gpu_only_parts())
        return out

    @model_validator(mode="after")
    def _no_gpu_only_part_on_a_cpu_device(self) -> StageConfig:
        # refused when the config loads, not after the trainer has started on the CPU
        device = getattr(self, "device", None) if "device" in type(self).model_fields else None
        if device is None or device_needs_gpu(device):
            return self
        gpu_only = self.gpu_only_parts()
        if gpu_only:
            names = ", ".join(sorted({str(getattr(part, "name", None) or type(part).__name__) for part in gpu_only}))
            raise ValueError(
                f"device = {device!r}, but {names} runs only on a GPU: leave device unset or name a GPU, or switch it off"
            )
        return self

    def nested_configs(self) -> list[StageConfig]:
        """The configs held in this one: fields and extra tables that are StageConfigs, or lists,
        tuples and dicts of them."""
        held = [getattr(self, name) for name in type(self).model_fields] + list((self.__pydantic_extra__ or {}).values())
        out: list[StageConfig] = []
        for value in held:
            values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else (value,)
            out.extend(v for v in values if isinstance(v, StageConfig))
        return out

    def keyed_view(self, data: dict[str, Any]) -> dict[str, Any]:
        """The keyed fields (`data`, NOT_KEYED ones already gone) that can change the output.

        Override to drop settings that are inert in this config, e.g. the options of a switched-off
        objective: variants that differ only there then share one cached artifact."""
        return data

    def located_fields(self) -> set[str]:
        """Fields that, in this config, name where an input lies whose content the stage's
        `fingerprint_sources` keys: left out of the key, recorded in the manifest's `locations`.
        Default: the fields marked CONTENT_KEYED."""
        return {name for name, info in type(self).model_fields.items() if _marker(info) == "by_content"}


def device_needs_gpu(device: Any) -> bool:
    """A `device` setting asks for the accelerator unless it names the CPU ("cpu", "cpu:N")."""
    return not str(device).startswith("cpu")


@dataclass(frozen=True)
class KeyedConfig:
    """A config as its artifact's key sees it, computed once per stage per run (by the plan, or
    by `run_stage`) and passed on to `stage_key` and `commit_stage`."""

    values: dict[str, Any]  # the config as JSON without NOT_KEYED fields and content-keyed locations
    locations: dict[str, Any]  # those locations (`sources[0].files` -> its value), for the manifest


def keyed_parts(config: BaseModel) -> KeyedConfig:
    """The keyed config and its content-keyed locations, in one pass over the config."""
    locations: dict[str, Any] = {}
    values = _drop_unkeyed(config, config.model_dump(mode="json"), "", locations)
    return KeyedConfig(values, locations)


def keyed_config(config: BaseModel) -> dict[str, Any]:
    """The config as JSON, without fields marked NOT_KEYED or located by content (recursively)."""
    return keyed_parts(config).values


def config_locations(config: BaseModel) -> dict[str, Any]:
    """The content-keyed locations of a config (`sources[0].files` -> its value): not in the key,
    kept in the manifest so that an artifact says where its inputs were read from."""
    return keyed_parts(config).locations


def _marker(info: Any) -> Any:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    return extra.get("keyed", True)


def _drop_unkeyed(model: Any, data: Any, where: str, locations: dict[str, Any]) -> Any:
    if isinstance(model, BaseModel) and isinstance(data, dict):
        located = model.located_fields() if isinstance(model, StageConfig) else set()
        out = {}
        for name, info in type(model).model_fields.items():
            marker = _marker(info)
            if marker is False:
                continue
            if marker == "unless_default" and getattr(model, name) == info.default:
                continue
            path = f"{where}.{name}" if where else name
            if name in located:
                if data[name] not in (None, "", {}, []):
                    locations[path] = data[name]
                continue
            out[name] = _drop_unkeyed(getattr(model, name), data[name], path, locations)
        # tables held under the name that selects them ([align.<backend>], [train.objectives.<name>])
        for name, value in (model.__pydantic_extra__ or {}).items():
            if isinstance(value, BaseModel):
                out[name] = _drop_unkeyed(value, data[name], f"{where}.{name}" if where else name, locations)
        return model.keyed_view(out) if isinstance(model, StageConfig) else out
    if isinstance(model, (list, tuple)) and isinstance(data, list):
        return [_drop_unkeyed(m, d, f"{where}[{i}]", locations) for i, (m, d) in enumerate(zip(model, data))]
    return data
