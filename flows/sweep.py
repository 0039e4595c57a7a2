"""Sweeps: one pipeline config, many variants of it, every shared artifact built once.

A grid file (TOML) names overrides of dotted config keys; each variant is the pipeline
config with its overrides applied, validated exactly as `xlembed run` validates a config
file (the variant is written out as TOML and read back by `load_config`). Because artifact
keys depend only on a stage's config, code version and input keys, variants that agree on
everything upstream of some stage share that stage's artifact: it is cached, or computed
once for all of them.

    name = "pooling"                      # default: the grid file's name
    baseline = "mean"                     # a variant (or seed group) the report compares with
    seed_keys = ["evaluate.seed"]         # keys whose values are seeds (default: keys named *seed)
    seeds = [0, 1, 2]                     # shorthand: every variant once per seed, for each seed key
                                          # (none given: variants that train run seeds 1, 2, 3 on
                                          # train.seed; seeds = [] opts out)

    [common]                              # applied to every variant first
    "evaluate.title" = "pooling sweep"

    [grid]                                # cartesian product of the lists
    "evaluate.encoder.pooling" = ["mean", "cls"]

    [[variants]]                          # named override sets; crossed with the grid and seeds
    name = "no-prefix"
    [[variants]]
    name = "query-prefix"
    "evaluate.encoder.prefix" = "query: "

    [report]
    columns = ["retrieval/corpus-dev/group:wacse-4/accuracy_mean"]   # default: headline metrics

Keys are dotted paths into the config (`corpus.sources[1].sample`, `train.loss_weights`);
nested TOML tables are flattened into dotted keys, so a table value merges into the config's
table. Every variant is run as pipeline `{pipeline name}--{variant}`, so its refs are its own.

Running: every variant gets a driver thread that walks its plan in dependency order; a step
(stage, key) that several variants need is computed by the first variant to reach it while
the others wait for it. Shards of all variants go through the flow's one task runner, which
bounds how much runs at once. The Prefect flow `xlembed-sweep` wires this together.
"""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import itertools
import json
import math
import re
import tempfile
import threading
import tomllib
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, time as clock_time
from pathlib import Path
from typing import Any

from flows.config import ConfigError, PipelineConfig, load_config
from flows.plan import Plan, StepPlan, make_plan, plan_notes
from storage import ArtifactStore
from storage.content_hash import HashStats
from storage.keys import NAME_PATTERN, canonical_json
from tasks.stop import Interrupted, raise_if_stopping

GRID_TOP_KEYS = ("name", "description", "baseline", "seeds", "seed_keys", "common", "grid", "variants", "report")
# Sweep-wide settings: one root, one task runner for all variants; the name is set per variant.
FORBIDDEN_KEYS = ("pipeline.name", "pipeline.root", "pipeline.task_runner", "pipeline.dask_address", "pipeline.max_workers")
SWEEPS_DIR = "sweeps"
DEFAULT_GROUP = "base"
MAX_DRIVERS = 32
# Quality claims need more than one training run: a grid that names no seeds runs every
# variant that trains once per default seed (`seeds = []` opts out).
DEFAULT_SEEDS = (1, 2, 3)
DEFAULT_SEED_KEYS = ("train.seed",)
UNTRAINED_VARIANT = "base"  # a variant of this name whose pipeline trains nothing is the report's untrained base

Key = tuple[str | int, ...]


class GridError(ConfigError):
    """A grid file that cannot be used; the message names the file, the variant and the key."""


# ----------------------------------------------------------------------------- keys


_PART = re.compile(r"^([^.\[\]]+)((?:\[\d+\])*)$")


def parse_key(dotted: str) -> Key:
    """`corpus.sources[1].sample` -> ("corpus", "sources", 1, "sample"); `a.0.b` indexes too."""
    if not isinstance(dotted, str) or not dotted.strip():
        raise ValueError(f"empty config key {dotted!r}")
    parts: list[str | int] = []
    for piece in dotted.split("."):
        match = _PART.match(piece.strip())
        if not match:
            raise ValueError(f"malformed config key {dotted!r} (near {piece!r})")
        name, indices = match.groups()
        parts.append(int(name) if name.isdigit() else name)
        parts += [int(i) for i in re.findall(r"\[(\d+)\]", indices)]
    if not isinstance(parts[0], str):
        raise ValueError(f"config key {dotted!r} must start with a section name")
    return tuple(parts)


def format_key(key: Key) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def flatten_overrides(table: Mapping[str, Any], prefix: Key = (), *, leaf: Callable[[Any], bool] | None = None) -> dict[str, Any]:
    """Nested tables -> {dotted key: value}; quoted dotted keys and nested tables mean the same."""
    out: dict[str, Any] = {}
    for name, value in table.items():
        key = prefix + parse_key(name)
        if isinstance(value, Mapping) and not (leaf and leaf(value)):
            out.update(flatten_overrides(value, key, leaf=leaf))
        else:
            out[format_key(key)] = value
    return out


def apply_override(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `dotted` in the raw config dict (tables are created as needed; list items must exist)."""
    key = parse_key(dotted)
    node: Any = raw
    for depth, part in enumerate(key):
        last = depth == len(key) - 1
        where = format_key(key[: depth + 1])
        if isinstance(part, int):
            if not isinstance(node, list):
                raise KeyError(f"{where}: {format_key(key[:depth])} is not a list in the config")
            if part >= len(node):
                raise KeyError(f"{where}: the config's {format_key(key[:depth])} has only {len(node)} items")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                node = node[part]
            continue
        if not isinstance(node, dict):
            raise KeyError(f"{where}: {format_key(key[:depth])} is a {type(node).__name__} in the config, not a table")
        if last:
            node[part] = copy.deepcopy(value)
        else:
            if part not in node:
                if isinstance(key[depth + 1], int):
                    raise KeyError(f"{where}: not set in the config, so it has no item {key[depth + 1]}")
                node[part] = {}
            node = node[part]


# ----------------------------------------------------------------------------- names


def slug(value: Any) -> str:
    """A value as part of a pipeline name: 0.8 -> 0p8, "query: " -> query, [1, 2] -> 1-2."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value).lower().replace("+", "").replace(".", "p")
    elif isinstance(value, (list, tuple)):
        text = "-".join(slug(v) for v in value) or "none"
    elif isinstance(value, Mapping):
        text = "h" + _short_hash(value)
    else:
        text = str(value).lower()
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return text or "empty"


def _short_hash(value: Any, n: int = 6) -> str:
    import hashlib

    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:n]


def axis_labels(keys: list[str]) -> dict[str, str]:
    """Shortest unique dotted suffix of each key, as a slug: evaluate.encoder.pooling -> pooling."""
    parsed = {k: [str(p) for p in parse_key(k)] for k in keys}
    labels = {}
    for key, parts in parsed.items():
        for n in range(1, len(parts) + 1):
            suffix = parts[-n:]
            if sum(1 for other in parsed.values() if other[-n:] == suffix) == 1 or n == len(parts):
                labels[key] = slug("-".join(suffix))
                break
    return labels


def is_seed_key(dotted: str) -> bool:
    last = str(parse_key(dotted)[-1])
    return last == "seed" or last.endswith("_seed")


def pipeline_name(base: str, variant: str) -> str:
    """`{base}--{variant}`, shortened with a hash when longer than a pipeline name may be."""
    name = f"{base}--{variant}"
    if NAME_PATTERN.fullmatch(name):
        return name
    tail = _short_hash(name)
    return f"{name[: 64 - len(tail) - 1].rstrip('-_')}-{tail}"


# ----------------------------------------------------------------------------- grid


@dataclass(frozen=True)
class Variant:
    """One point of a sweep: overrides (dotted key -> value, applied in order) and its names."""

    name: str
    overrides: dict[str, Any]
    group: str  # the name without its seed parts: the seeds of one setting share a group
    seeds: dict[str, Any] = field(default_factory=dict)  # seed key -> value


@dataclass(frozen=True)
class Grid:
    path: Path
    name: str
    variants: tuple[Variant, ...]
    baseline: str | None = None
    seed_keys: tuple[str, ...] = ()
    description: str = ""
    columns: tuple[str, ...] | None = None
    # Where the seeds come from: "grid" (seeds = [...] or a seed axis), "default" (DEFAULT_SEEDS
    # on the variants that train), "none" (seeds = []: one run each), or "pending" (the grid
    # names none and the pipeline config, which decides the default, was not read yet).
    seeding: str = "grid"
    source: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the parsed grid file

    def variant(self, name: str) -> Variant:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(name)

    def check_baseline(self, name: str | None) -> str | None:
        if name is None:
            return None
        known = [v.name for v in self.variants] + sorted({v.group for v in self.variants})
        if self.seeding == "pending":  # the names the seed default may add, until the config decides
            known += [f"{v.name}_seed-{s}" for v in self.variants for s in DEFAULT_SEEDS] + [f"seed-{s}" for s in DEFAULT_SEEDS]
        if name not in known:
            raise GridError(f"{self.path}: baseline {name!r} is neither a variant nor a seed group; known: {', '.join(dict.fromkeys(known))}")
        return name


def _grid_error(path: Path, message: str) -> GridError:
    return GridError(f"{path}: {message}")


def load_grid(path: str | Path, config: str | Path | Mapping[str, Any] | None = None) -> Grid:
    """Parse a grid file into its variants.

    `config`: the pipeline config (a path, or its parsed TOML), read only for the seed
    default: a grid that names no seeds and has no seed axis runs every variant that trains
    (the config has a [train] section and the variant's pipeline.stages keep it) once per
    DEFAULT_SEEDS on its seed keys (default `train.seed`), unless the variant sets a seed key
    itself. Without `config` that default is left pending (`resolve_seeds`, which
    `variant_configs` and `plan_sweep` apply)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GridError(f"{path}: no such grid file") from None
    except UnicodeDecodeError as exc:
        raise GridError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"{path}: malformed TOML: {exc}") from None
    return _grid_from_source(path, raw, _raw_config(config) if config is not None else None)


def resolve_seeds(grid: Grid, config: str | Path | Mapping[str, Any]) -> Grid:
    """The grid with its pending seed default decided by the pipeline config (see `load_grid`)."""
    if grid.seeding != "pending":
        return grid
    return _grid_from_source(grid.path, grid.source, _raw_config(config))


def _raw_config(config: str | Path | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(config, Mapping):
        return config
    try:
        return read_raw_config(config)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{config}: cannot read the pipeline config: {exc}") from None


def _trains(config: Mapping[str, Any], settings: Mapping[str, Any]) -> bool:
    """Whether a variant's pipeline runs the train stage: the config has [train] and pipeline.stages keep it."""
    if "train" not in config:
        return False
    pipeline = config.get("pipeline")
    stages = settings.get("pipeline.stages", pipeline.get("stages") if isinstance(pipeline, Mapping) else None)
    return stages is None or (isinstance(stages, list) and "train" in stages)


def _grid_from_source(path: Path, raw: Mapping[str, Any], config: Mapping[str, Any] | None) -> Grid:
    unknown = [k for k in raw if k not in GRID_TOP_KEYS]
    if unknown:
        raise _grid_error(path, f"unknown key(s) {unknown}; a grid file has {', '.join(GRID_TOP_KEYS)} (override keys go under [grid], [common] or [[variants]])")

    name = raw.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise _grid_error(path, f"name must be a non-empty string, got {name!r}")
    name = slug(name)[:48].strip("-")
    if not name[0].isalpha():
        name = f"sweep-{name}"

    def overrides(table: Any, where: str) -> dict[str, Any]:
        if not isinstance(table, Mapping):
            raise _grid_error(path, f"{where} must be a table of dotted config keys, got {table!r}")
        try:
            flat = flatten_overrides(table)
        except ValueError as exc:
            raise _grid_error(path, f"{where}: {exc}") from None
        for key in flat:
            if key in FORBIDDEN_KEYS:
                raise _grid_error(path, f"{where}: {key} is set by the sweep, not per variant (set it in the pipeline config or on the command line)")
        return flat

    common = overrides(raw.get("common", {}), "[common]")

    axes = overrides(raw.get("grid", {}), "[grid]")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise _grid_error(path, f"[grid] {key}: expected a non-empty list of values to try, got {values!r} (a single list value is written [[...]])")
        if len({canonical_json(v) for v in values}) != len(values):
            raise _grid_error(path, f"[grid] {key}: the list repeats a value: {values!r}")

    seed_keys = raw.get("seed_keys")
    if seed_keys is not None:
        if not isinstance(seed_keys, list) or not all(isinstance(k, str) for k in seed_keys) or not seed_keys:
            raise _grid_error(path, f"seed_keys must be a non-empty list of dotted config keys, got {seed_keys!r}")
        try:
            seed_keys = [format_key(parse_key(k)) for k in seed_keys]
        except ValueError as exc:
            raise _grid_error(path, f"seed_keys: {exc}") from None
    seeds = raw.get("seeds")
    if seeds is not None:
        if not isinstance(seeds, list):
            raise _grid_error(path, f"seeds must be a list (empty: one run per variant), got {seeds!r}")
        if seeds and seed_keys is None:
            raise _grid_error(path, 'seeds needs seed_keys: the config keys that take the seed, e.g. seed_keys = ["train.seed"]')
        clash = [k for k in seed_keys if k in axes] if seeds else []
        if clash:
            raise _grid_error(path, f"{clash} appear both in seed_keys (set by seeds = ...) and in [grid]")
    seed_axis = any(k in axes for k in seed_keys) if seed_keys is not None else any(is_seed_key(k) for k in axes)
    if seeds or seed_axis:
        seeding = "grid"
    elif seeds is not None:
        seeding = "none"
    else:
        seeding = "pending" if config is None else "default"
    if seed_keys is None:
        seed_keys = list(DEFAULT_SEED_KEYS) if seeding == "default" else [k for k in axes if is_seed_key(k)]

    def run_seeds(settings: Mapping[str, Any]) -> list[Any]:
        """The seeds one variant runs with; a variant that fixes a seed key itself keeps it."""
        if seeding == "grid":
            # a train seed means nothing to a variant that does not train (the untrained `base`): it runs once
            only_train_keys = all(k.startswith("train.") for k in seed_keys)
            if only_train_keys and config is not None and not _trains(config, settings):
                return []
            return list(seeds or [])
        if seeding == "default" and config is not None and _trains(config, settings) and not any(k in settings for k in seed_keys):
            return list(DEFAULT_SEEDS)
        return []

    named = raw.get("variants", [])
    if not isinstance(named, list) or not all(isinstance(v, Mapping) for v in named):
        raise _grid_error(path, "variants must be an array of tables: [[variants]] with name = \"...\"")
    variant_sets: list[tuple[str | None, dict[str, Any]]] = []
    for index, table in enumerate(named):
        label = table.get("name")
        if not isinstance(label, str) or not label.strip():
            raise _grid_error(path, f"[[variants]] #{index + 1} needs name = \"...\"")
        body = {k: v for k, v in table.items() if k != "name"}
        variant_sets.append((slug(label), overrides(body, f"variant {label!r}")))
    if not variant_sets:
        variant_sets = [(None, {})]

    seeded = bool(seeds) or (seeding == "default" and config is not None and "train" in config)
    labels = axis_labels(list(axes) + (["seed"] if seeded else []))
    axis_items = [[(key, value) for value in values] for key, values in axes.items()]

    variants: list[Variant] = []
    for (variant_name, variant_overrides), point in itertools.product(variant_sets, itertools.product(*axis_items)):
        parts, group_parts = [], []
        if variant_name:
            parts.append(variant_name)
            group_parts.append(variant_name)
        settings = dict(common)
        settings.update(variant_overrides)
        seed_values: dict[str, Any] = {}
        for key, value in point:
            settings[key] = value
            part = f"{labels[key]}-{slug(value)}"
            parts.append(part)
            if key in seed_keys:
                seed_values[key] = value
            else:
                group_parts.append(part)
        for seed in run_seeds(settings) or [None]:  # the seeds of one setting share its group
            run_settings, run_seed_values, run_parts = dict(settings), dict(seed_values), list(parts)
            if seed is not None:
                for seed_key in seed_keys:
                    run_settings[seed_key] = seed
                    run_seed_values[seed_key] = seed
                run_parts.append(f"seed-{slug(seed)}")
            variants.append(
                Variant(
                    name="_".join(run_parts) or DEFAULT_GROUP,
                    overrides=run_settings,
                    group="_".join(group_parts) or DEFAULT_GROUP,
                    seeds=run_seed_values,
                )
            )
    names = [v.name for v in variants]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _grid_error(path, f"variant names collide: {duplicates} (give [[variants]] distinct names)")

    report = raw.get("report", {})
    if not isinstance(report, Mapping) or set(report) - {"columns"}:
        raise _grid_error(path, f"[report] takes only columns = [...], got {report!r}")
    columns = report.get("columns")
    if columns is not None and (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)):
        raise _grid_error(path, f"[report] columns must be a list of 'benchmark/dataset/language/metric' strings, got {columns!r}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _grid_error(path, f"description must be a string, got {description!r}")
    grid = Grid(path, name, tuple(variants), None, tuple(seed_keys), description, tuple(columns) if columns else None, seeding, raw)
    baseline = raw.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise _grid_error(path, f"baseline must be a variant name, got {baseline!r}")
    return dataclasses.replace(grid, baseline=grid.check_baseline(baseline))


# ----------------------------------------------------------------------------- TOML out


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_string(text: str) -> str:
    # JSON escapes quotes, backslashes and C0 controls as TOML wants; TOML also forbids a raw DEL
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (datetime, date, clock_time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v, where)}" for k, v in value.items()) + "}"
    raise TypeError(f"{where}: {value!r} ({type(value).__name__}) has no TOML form")


def toml_document(raw: Mapping[str, Any]) -> str:
    """A TOML document equal to `raw` (tables as sections, everything below them inline)."""
    top = [f"{_toml_key(k)} = {_toml_value(v, k)}" for k, v in raw.items() if not isinstance(v, Mapping)]
    sections = []
    for name, table in raw.items():
        if isinstance(table, Mapping):
            body = [f"{_toml_key(str(k))} = {_toml_value(v, f'{name}.{k}')}" for k, v in table.items()]
            sections.append("\n".join([f"[{_toml_key(name)}]", *body]))
    text = "\n".join(top) + ("\n\n" if top and sections else "") + "\n\n".join(sections) + "\n"
    if tomllib.loads(text) != raw:  # a value TOML cannot hold exactly (never expected from a parsed TOML)
        raise ValueError("the config does not survive a TOML round trip")
    return text


# ----------------------------------------------------------------------------- configs


def read_raw_config(config_path: str | Path) -> dict[str, Any]:
    """The pipeline config as parsed TOML, after `load_config` has accepted it as it is."""
    path = Path(config_path)
    return tomllib.loads(path.read_text(encoding="utf-8"))


def variant_raw(base: Mapping[str, Any], variant: Variant, grid_path: Path) -> dict[str, Any]:
    raw = copy.deepcopy(dict(base))
    for key, value in variant.overrides.items():
        try:
            apply_override(raw, key, value)
        except KeyError as exc:
            raise GridError(f"{grid_path}: variant {variant.name!r}: {exc.args[0]}") from None
    return raw


def variant_configs(config_path: str | Path, grid: Grid, *, root: str | None = None, workdir: Path | None = None) -> dict[str, PipelineConfig]:
    """Variant name -> validated PipelineConfig (pipeline name `{name}--{variant}`).

    Each variant's config is written as TOML under `workdir` (a temporary folder by default)
    and read back by `load_config`, so a variant is validated exactly like a config file;
    errors name the grid file, the variant and the key. A grid whose seed default is pending
    gets it from this config first (`resolve_seeds`).
    """
    config_path = Path(config_path)
    base = load_config(config_path, root=root)  # the config itself must be valid
    raw_base = read_raw_config(config_path)
    grid = resolve_seeds(grid, raw_base)
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix=f"xlembed-sweep-{grid.name}-"))
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, PipelineConfig] = {}
    for variant in grid.variants:
        raw = variant_raw(raw_base, variant, grid.path)
        raw.setdefault("pipeline", {})["name"] = pipeline_name(base.name, variant.name)
        file = folder / f"{variant.name}.toml"
        header = f"# {base.path} with the overrides of variant {variant.name!r} of {grid.path}\n"
        file.write_text(header + toml_document(raw), encoding="utf-8")
        try:
            out[variant.name] = load_config(file, root=root, base_dir=config_path.expanduser().absolute().parent)
        except ConfigError as exc:
            message = str(exc).replace(str(file), f"{grid.path}: variant {variant.name!r} (overrides {', '.join(variant.overrides) or 'none'} on {config_path})")
            raise GridError(message) from None
    return out


# ----------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class VariantPlan:
    variant: Variant
    config: PipelineConfig
    steps: list[StepPlan]

    @property
    def pipeline(self) -> str:
        return self.config.name

    def keys(self) -> dict[str, str]:
        return {s.stage: s.key for s in self.steps if s.action != "skip"}


@dataclass(frozen=True)
class SweepPlan:
    grid: Grid
    variants: list[VariantPlan]

    def distinct(self) -> dict[tuple[str, str], StepPlan]:
        """Each (stage, key) once, in the order variants first need it."""
        out: dict[tuple[str, str], StepPlan] = {}
        for plan in self.variants:
            for step in plan.steps:
                if step.action != "skip":
                    out.setdefault((step.stage, step.key), step)
        return out

    def users(self) -> dict[tuple[str, str], list[str]]:
        out: dict[tuple[str, str], list[str]] = {}
        for plan in self.variants:
            for step in plan.steps:
                if step.action != "skip":
                    out.setdefault((step.stage, step.key), []).append(plan.variant.name)
        return out

    def notes(self) -> list[str]:
        """`xlembed plan`'s notes once for the whole sweep: artifacts of an older key scheme among
        the distinct stage runs to compute, and what hashing cost over every variant's planning."""
        rekeyed = {(s.stage, s.key) for v in self.variants for s in v.steps if s.rekeyed and s.action == "compute"}
        return plan_notes(len(rekeyed), HashStats.combined(v.steps.hashing for v in self.variants if isinstance(v.steps, Plan)))

    def counts(self) -> dict[str, Any]:
        """Per variant and in total: stage runs cached and to compute (deduplicated across variants)."""
        users = self.users()
        per_variant = {}
        for plan in self.variants:
            steps = [s for s in plan.steps if s.action != "skip"]
            compute = [s for s in steps if s.action == "compute"]
            per_variant[plan.variant.name] = {
                "cached": sum(1 for s in steps if s.action == "cached"),
                "compute": len(compute),
                "shared": sum(1 for s in compute if len(users[(s.stage, s.key)]) > 1),
            }
        distinct = self.distinct()
        return {
            "variants": per_variant,
            "distinct_cached": sum(1 for s in distinct.values() if s.action == "cached"),
            "distinct_compute": sum(1 for s in distinct.values() if s.action == "compute"),
            "stage_runs": sum(len([s for s in p.steps if s.action != "skip"]) for p in self.variants),
            "compute_without_sharing": sum(c["compute"] for c in per_variant.values()),
        }


def plan_sweep(config_path: str | Path, grid: Grid, store: ArtifactStore, stages: Mapping[str, Any], *, root: str | None = None, workdir: Path | None = None) -> SweepPlan:
    configs = variant_configs(config_path, grid, root=root, workdir=workdir)  # validates the config first
    grid = resolve_seeds(grid, config_path)
    plans = []
    for variant in grid.variants:
        config = configs[variant.name]
        plans.append(VariantPlan(variant, config, make_plan(config, store, stages)))
    return SweepPlan(grid, plans)


# ----------------------------------------------------------------------------- running


@dataclass
class VariantOutcome:
    variant: str
    pipeline: str
    keys: dict[str, str] = field(default_factory=dict)  # stage -> key of the steps that finished
    computed: list[str] = field(default_factory=list)  # stages this variant's driver computed itself
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _ComputeOnce:
    """(stage, key) -> the one computation of it; later callers wait for the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: dict[tuple[str, str], Future[None]] = {}

    def ensure(self, ident: tuple[str, str], compute: Callable[[], None]) -> bool:
        """Run `compute` unless another caller did or does; True when this caller ran it."""
        with self._lock:
            future = self._futures.get(ident)
            owner = future is None
            if owner:
                future = self._futures[ident] = Future()
        if not owner:
            future.result()  # re-raises the owner's failure
            return False
        try:
            compute()
        except BaseException as exc:
            future.set_exception(exc)
            raise
        future.set_result(None)
        return True


RunStep = Callable[[PipelineConfig, ArtifactStore, StepPlan], None]


def run_variants(plan: SweepPlan, store: ArtifactStore, run_step: RunStep | None, *, log: Callable[[str], None] = lambda _: None) -> dict[str, VariantOutcome]:
    """Bring every variant up to date, computing each distinct (stage, key) once; set the refs.

    `run_step` builds one stale step (flows.pipeline.run_step inside the flow); None means
    nothing may compute (every step must be cached). A failed variant does not stop the others.
    """
    once = _ComputeOnce()

    def drive(vplan: VariantPlan) -> VariantOutcome:
        outcome = VariantOutcome(vplan.variant.name, vplan.pipeline)
        try:
            for step in vplan.steps:
                if step.action == "skip":
                    continue
                if step.action == "compute":
                    raise_if_stopping(f"{vplan.variant.name}: stopped before {step.stage}")
                    if run_step is None:
                        raise RuntimeError(f"{step.stage} {step.key[:12]} is not cached and this run computes nothing")

                    def compute(step: StepPlan = step) -> None:
                        log(f"{vplan.variant.name}: computing {step.stage} {step.key[:12]} ({'; '.join(step.reasons)})")
                        run_step(vplan.config, store, step)

                    if once.ensure((step.stage, step.key), compute):
                        outcome.computed.append(step.stage)
                store.set_ref(vplan.pipeline, step.stage, step.key, note=f"sweep {plan.grid.name}: {'; '.join(step.reasons)}")
                outcome.keys[step.stage] = step.key
        except Interrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - reported per variant; the flow fails at the end
            outcome.error = f"{type(exc).__name__}: {exc}"
            log(f"{vplan.variant.name}: failed: {outcome.error}")
        return outcome

    workers = max(1, min(len(plan.variants), MAX_DRIVERS))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sweep-variant") as pool:
        # each driver runs in a copy of this context, so Prefect tasks it calls join this flow run
        futures = [pool.submit(contextvars.copy_context().run, drive, vplan) for vplan in plan.variants]
    stopped = [f.exception() for f in futures if isinstance(f.exception(), Interrupted)]
    if stopped:  # Ctrl-C: every driver stopped at its next safe point
        done = sum(1 for f in futures if f.exception() is None and f.result().ok)
        raise Interrupted(f"sweep {plan.grid.name}: stopped ({stopped[0]}); {done} of {len(futures)} variants up to date; rerun resumes")
    return {f.result().variant: f.result() for f in futures}


# ----------------------------------------------------------------------------- report


@dataclass(frozen=True)
class SweepReport:
    markdown: str
    html: str
    rows: list[dict[str, Any]]
    uri: str  # where report.md was written


def sweep_dir(store: ArtifactStore, name: str) -> str:
    """`{root}/sweeps/{name}` in the store's filesystem."""
    import fsspec

    _, root = fsspec.core.url_to_fs(store.root_uri)
    return f"{root.rstrip('/')}/{SWEEPS_DIR}/{slug(name)}"


def _put_text(store: ArtifactStore, dest: str, text: str) -> None:
    _put_bytes(store, dest, text.encode("utf-8"))


def _put_bytes(store: ArtifactStore, dest: str, data: bytes) -> None:
    with tempfile.NamedTemporaryFile("wb", suffix=".tmp", delete=False) as f:
        f.write(data)
    try:
        store.put_local_file(f.name, dest)
    finally:
        Path(f.name).unlink(missing_ok=True)


ITEM_COLUMNS = ["benchmark", "dataset", "src_lang", "tgt_lang", "direction", "item", "correct"]  # margins are not compared


def _evaluation_extras(store: ArtifactStore, stage: str, key: str) -> dict[str, Any]:
    """What an evaluate artifact attaches besides its metrics, as tables (None where it has none):
    "items" and "base_items" (per-query outcomes of the scored model and of the untrained base
    scored beside it) and "base_metrics". Evaluations older than the outcomes have no items."""
    import pyarrow.parquet as pq

    from tasks.evaluate.stage import BASE_ITEMS_FILE, ITEMS_FILE, REPORT_DIR

    wanted = {
        "items": (ITEMS_FILE, ITEM_COLUMNS),
        "base_items": (BASE_ITEMS_FILE, ITEM_COLUMNS),
        "base_metrics": (f"{REPORT_DIR}/base_metrics.parquet", None),
    }
    attached = {entry.path.removeprefix("files/") for entry in store.manifest(stage, key).attached_files}
    if not attached & {file for file, _ in wanted.values()}:
        return dict.fromkeys(wanted)  # nothing to download
    folder = store.attached_dir(stage, key)
    return {name: pq.read_table(folder / file, columns=columns) if file in attached else None for name, (file, columns) in wanted.items()}


def write_report(plan: SweepPlan, store: ArtifactStore, outcomes: Mapping[str, VariantOutcome], *, baseline: str | None = None, metrics_stage: str = "evaluate") -> SweepReport:
    """Compare the variants' evaluations and save report.md, report.html (and intervals.png),
    sweep.json and the variant configs under `{root}/sweeps/{grid name}/`."""
    from tasks.evaluate.compare import INTERVALS_FIGURE_FILE, VariantResult, build_comparison

    baseline = plan.grid.check_baseline(baseline) if baseline is not None else plan.grid.baseline
    results = []
    for vplan in plan.variants:
        outcome = outcomes.get(vplan.variant.name)
        key = outcome.keys.get(metrics_stage) if outcome else None
        table = store.read_table(metrics_stage, key) if key else None
        extras = _evaluation_extras(store, metrics_stage, key) if key else {}
        results.append(
            VariantResult(
                name=vplan.variant.name,
                group=vplan.variant.group,
                overrides=dict(vplan.variant.overrides),
                seeds=dict(vplan.variant.seeds),
                metrics=table,
                metrics_key=key,
                error=outcome.error if outcome else "not run",
                items=extras.get("items"),
                base_metrics=extras.get("base_metrics"),
                base_items=extras.get("base_items"),
                trained="train" in vplan.config.stages,
            )
        )
    untrained = next((r.name for r in results if r.name == UNTRAINED_VARIANT and not r.trained), None)
    title = f"Sweep {plan.grid.name}" + (f": {plan.grid.description}" if plan.grid.description else "")
    comparison = build_comparison(
        results, baseline=baseline, title=title, columns=plan.grid.columns, untrained_base=untrained, single_seed=plan.grid.seeding == "none"
    )
    folder = sweep_dir(store, plan.grid.name)
    _put_text(store, f"{folder}/report.md", comparison.markdown)
    _put_text(store, f"{folder}/report.html", comparison.html)
    if comparison.figure is not None:
        _put_bytes(store, f"{folder}/{INTERVALS_FIGURE_FILE}", comparison.figure)
    summary = {
        "sweep": plan.grid.name,
        "grid": str(plan.grid.path),
        "baseline": baseline,
        "seeding": plan.grid.seeding,
        "variants": [
            {
                "name": v.variant.name,
                "group": v.variant.group,
                "pipeline": v.pipeline,
                "overrides": v.variant.overrides,
                "seeds": v.variant.seeds,
                "keys": v.keys(),
                "computed": outcomes[v.variant.name].computed if v.variant.name in outcomes else [],
                "error": outcomes[v.variant.name].error if v.variant.name in outcomes else "not run",
            }
            for v in plan.variants
        ],
        "untrained_base": comparison.untrained,
        # paired bootstrap 95% intervals of each delta (display units), see tasks/evaluate/compare.py
        "intervals": comparison.intervals,
    }
    _put_text(store, f"{folder}/sweep.json", json.dumps(summary, indent=2, ensure_ascii=False, default=str))
    for vplan in plan.variants:
        if vplan.config.path.is_file():
            _put_text(store, f"{folder}/variants/{vplan.variant.name}.toml", vplan.config.path.read_text(encoding="utf-8"))
    return SweepReport(comparison.markdown, comparison.html, comparison.rows, f"{store.root_uri}/{SWEEPS_DIR}/{slug(plan.grid.name)}/report.md")


# ----------------------------------------------------------------------------- the flow


def _prefect_flow() -> Any:
    from prefect import flow, get_run_logger
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from flows.interrupts import take_signals
    from flows.pipeline import publish_store_index, run_step
    from flows.stages import stage_registry

    @flow(name="xlembed-sweep", log_prints=True)
    def sweep_flow(config_path: str, grid_path: str, baseline: str | None = None, root: str | None = None) -> dict[str, dict[str, str]]:
        """Run every variant of a grid over one pipeline config; returns variant -> stage -> key."""
        take_signals()
        base = load_config(config_path, root=root)
        grid = load_grid(grid_path, config=config_path)
        grid.check_baseline(baseline)
        store = ArtifactStore(base.settings.root)
        logger = get_run_logger()
        with tempfile.TemporaryDirectory(prefix="xlembed-sweep-") as workdir:
            plan = plan_sweep(config_path, grid, store, stage_registry(), root=root, workdir=Path(workdir))
            counts = plan.counts()
            logger.info(
                "sweep %s: %d variants, %d distinct stage runs: %d cached, %d to compute (%d without sharing)",
                grid.name, len(plan.variants), len(plan.distinct()), counts["distinct_cached"], counts["distinct_compute"], counts["compute_without_sharing"],
            )
            for line in plan.notes():
                logger.info("%s", line)
            outcomes = run_variants(plan, store, run_step, log=logger.info)
            report = write_report(plan, store, outcomes, baseline=baseline)
        artifact_key = f"{slug(grid.name)}-sweep".replace("_", "-")
        create_markdown_artifact(report.markdown, key=f"{artifact_key}-report", description=f"sweep {grid.name}: comparison of {len(plan.variants)} variants")
        create_table_artifact(report.rows or [{"variant": "(none)"}], key=artifact_key, description=f"sweep {grid.name}: one row per variant")
        logger.info("sweep report: %s", report.uri)
        if base.settings.write_index:  # also after failed variants: the report and the refs that moved are there
            publish_store_index(store, f"{artifact_key}-store-index", logger)
        failed = {name: o.error for name, o in outcomes.items() if not o.ok}
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(outcomes)} variants failed: " + "; ".join(f"{n}: {e}" for n, e in failed.items()))
        return {name: o.keys for name, o in outcomes.items()}

    return sweep_flow


_FLOW: Any = None


def __getattr__(name: str) -> Any:
    """`flows.sweep.sweep_flow` is built on first use, so that planning never imports Prefect."""
    global _FLOW
    if name == "sweep_flow":
        if _FLOW is None:
            _FLOW = _prefect_flow()
        return _FLOW
    raise AttributeError(name)
