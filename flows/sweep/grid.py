"""Grid files: dotted config keys, variant names, and the variants a grid expands into."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flows.config import ConfigError
from storage.keys import NAME_PATTERN, canonical_json

GRID_TOP_KEYS = ("name", "description", "baseline", "seeds", "seed_keys", "common", "grid", "variants", "report")
# Sweep-wide settings: one root, one task runner for all variants; the name is set per variant.
FORBIDDEN_KEYS = ("pipeline.name", "pipeline.root", "pipeline.task_runner", "pipeline.dask_address", "pipeline.max_workers")
DEFAULT_GROUP = "base"
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

    def select(self, names: Sequence[str], baseline: str | None = None) -> Grid:
        """The grid cut to the variants named (a [[variants]] name or seed group keeps all its seeds;
        a full variant name keeps that run), plus the report's baseline (`baseline`, else the
        grid's), which a comparison cannot do without. The cut keeps every variant's overrides, so
        its runs have the same keys as in the whole grid and reuse what the whole grid built; its
        report is written under its own name (`{grid}-only-{names}`), beside the whole grid's."""
        if not names:
            return self
        if self.seeding == "pending":
            raise GridError(f"{self.path}: select variants after the pipeline config decided the seeds (resolve_seeds)")
        groups = list(dict.fromkeys(v.group for v in self.variants))
        runs = [v.name for v in self.variants]
        unknown = [n for n in names if n not in groups and n not in runs]
        if unknown:
            raise GridError(
                f"{self.path}: --only {', '.join(map(repr, unknown))}: no such variant; the grid has {', '.join(groups)}"
            )
        wanted = set(names)
        reference = self.check_baseline(baseline) or self.baseline
        if reference is not None:
            wanted.add(reference)
        kept = tuple(v for v in self.variants if v.name in wanted or v.group in wanted)
        label = "-".join(slug(n) for n in dict.fromkeys(names))
        if len(label) > 64:  # a long list: a short stable name instead
            label = "h" + _short_hash(sorted(wanted))
        return dataclasses.replace(self, name=f"{self.name}-only-{label}", variants=kept)

    def check_baseline(self, name: str | None) -> str | None:
        if name is None:
            return None
        known = [v.name for v in self.variants] + sorted({v.group for v in self.variants})
        if self.seeding == "pending":  # the names the seed default may add, until the config decides
            known += [f"{v.name}_seed-{s}" for v in self.variants for s in DEFAULT_SEEDS] + [f"seed-{s}" for s in DEFAULT_SEEDS]
        if name not in known:
            raise GridError(
                f"{self.path}: baseline {name!r} is neither a variant nor a seed group; known: {', '.join(dict.fromkeys(known))}"
            )
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


def read_raw_config(config_path: str | Path) -> dict[str, Any]:
    """The pipeline config as parsed TOML, after `load_config` has accepted it as it is."""
    return tomllib.loads(Path(config_path).read_text(encoding="utf-8-sig"))


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
        raise _grid_error(
            path,
            f"unknown key(s) {unknown}; a grid file has {', '.join(GRID_TOP_KEYS)} (override keys go under [grid], [common] or [[variants]])",
        )

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
                raise _grid_error(
                    path,
                    f"{where}: {key} is set by the sweep, not per variant (set it in the pipeline config or on the command line)",
                )
        return flat

    common = overrides(raw.get("common", {}), "[common]")

    axes = overrides(raw.get("grid", {}), "[grid]")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise _grid_error(
                path,
                f"[grid] {key}: expected a non-empty list of values to try, got {values!r} (a single list value is written [[...]])",
            )
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
        if (
            seeding == "default"
            and config is not None
            and _trains(config, settings)
            and not any(k in settings for k in seed_keys)
        ):
            return list(DEFAULT_SEEDS)
        return []

    named = raw.get("variants", [])
    if not isinstance(named, list) or not all(isinstance(v, Mapping) for v in named):
        raise _grid_error(path, 'variants must be an array of tables: [[variants]] with name = "..."')
    variant_sets: list[tuple[str | None, dict[str, Any]]] = []
    for index, table in enumerate(named):
        label = table.get("name")
        if not isinstance(label, str) or not label.strip():
            raise _grid_error(path, f'[[variants]] #{index + 1} needs name = "..."')
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
        raise _grid_error(
            path, f"[report] columns must be a list of 'benchmark/dataset/language/metric' strings, got {columns!r}"
        )
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _grid_error(path, f"description must be a string, got {description!r}")
    grid = Grid(
        path, name, tuple(variants), None, tuple(seed_keys), description, tuple(columns) if columns else None, seeding, raw
    )
    baseline = raw.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise _grid_error(path, f"baseline must be a variant name, got {baseline!r}")
    return dataclasses.replace(grid, baseline=grid.check_baseline(baseline))
