"""A sweep's plan: every variant's plan, and which stage runs they share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.config import PipelineConfig, load_config
from flows.plan import Plan, StepPlan, make_plan, plan_notes
from flows.sweep.grid import Grid, Variant, resolve_seeds
from flows.sweep.variants import variant_configs
from storage import ArtifactStore
from storage.content_hash import HashStats


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


def plan_sweep(
    config_path: str | Path,
    grid: Grid,
    store: ArtifactStore,
    stages: Mapping[str, Any],
    *,
    root: str | None = None,
    base: PipelineConfig | None = None,
) -> SweepPlan:
    """Plan every variant of `grid` over the config at `config_path` (`base`: that config, when
    the caller has validated it already)."""
    if base is None:
        base = load_config(config_path, root=root)  # the config itself must be valid
    configs = variant_configs(config_path, grid, root=root, base=base)
    grid = resolve_seeds(grid, base.raw)
    plans = []
    for variant in grid.variants:
        config = configs[variant.name]
        plans.append(VariantPlan(variant, config, make_plan(config, store, stages)))
    return SweepPlan(grid, plans)
