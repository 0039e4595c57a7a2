"""Sweeps: one pipeline config, many variants of it, every shared artifact built once.

A grid file (TOML) names overrides of dotted config keys; each variant is the pipeline
config with its overrides applied, validated exactly as `xlembed run` validates a config
file (in memory, by `flows.config.load_config_dict`; relative paths resolve against the base
config's folder). Because artifact keys depend only on a stage's config, code version and
input keys, variants that agree on everything upstream of some stage share that stage's
artifact: it is cached, or computed once for all of them.

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

Keys are dotted paths into the config (`corpus.sources[1].sample`, `train.objectives.dueam.weight`);
nested TOML tables are flattened into dotted keys, so a table value merges into the config's
table. Every variant is run as pipeline `{pipeline name}--{variant}`, so its refs are its own.

Running: every variant gets a driver thread that walks its plan in dependency order; a step
(stage, key) that several variants need is computed by the first variant to reach it while
the others wait for it. Shards of all variants go through the flow's one task runner, which
bounds how much runs at once. The Prefect flow `xlembed-sweep` wires this together.

The modules, by job: `grid` (grid files, dotted keys, variant names), `variants` (variant
configs), `plan` (every variant's plan, what they share), `driver` (the threads that run them),
`report` (the comparison), `toml_writer` (configs back to TOML) and `flow` (the Prefect flow,
imported only when `sweep_flow` is asked for, so that planning never imports Prefect).
"""

from __future__ import annotations

from typing import Any

from flows.sweep.driver import MAX_DRIVERS, RunStep, VariantOutcome, run_variants
from flows.sweep.grid import (
    DEFAULT_GROUP,
    DEFAULT_SEED_KEYS,
    DEFAULT_SEEDS,
    FORBIDDEN_KEYS,
    GRID_TOP_KEYS,
    UNTRAINED_VARIANT,
    Grid,
    GridError,
    Key,
    Variant,
    apply_override,
    axis_labels,
    flatten_overrides,
    format_key,
    is_seed_key,
    load_grid,
    parse_key,
    pipeline_name,
    read_raw_config,
    resolve_seeds,
    slug,
)
from flows.sweep.plan import SweepPlan, VariantPlan, plan_sweep
from flows.sweep.report import SWEEPS_DIR, SweepReport, sweep_dir, write_report
from flows.sweep.toml_writer import toml_document
from flows.sweep.variants import variant_configs, variant_raw

__all__ = [
    "DEFAULT_GROUP", "DEFAULT_SEED_KEYS", "DEFAULT_SEEDS", "FORBIDDEN_KEYS", "GRID_TOP_KEYS", "MAX_DRIVERS",
    "SWEEPS_DIR", "UNTRAINED_VARIANT", "Grid", "GridError", "Key", "RunStep", "SweepPlan", "SweepReport", "Variant",
    "VariantOutcome", "VariantPlan", "apply_override", "axis_labels", "flatten_overrides", "format_key", "is_seed_key",
    "load_grid", "parse_key", "pipeline_name", "plan_sweep", "read_raw_config", "resolve_seeds", "run_variants", "slug",
    "sweep_dir", "sweep_flow", "toml_document", "variant_configs", "variant_raw", "write_report",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """`flows.sweep.sweep_flow` imports the Prefect flow on first use (flows/sweep/flow.py)."""
    if name == "sweep_flow":
        from flows.sweep.flow import sweep_flow  # lazy: prefect, only when the flow is asked for

        return sweep_flow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
