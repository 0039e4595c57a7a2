"""The Prefect flow `xlembed-sweep`: plan every variant, run them, write the report.

Imported only when a sweep runs (`flows.sweep.sweep_flow`), so that planning never imports Prefect.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from flows.config import load_config
from flows.interrupts import take_signals
from flows.pipeline import publish_store_index, run_step
from flows.stages import stage_registry
from flows.sweep.driver import run_variants
from flows.sweep.grid import load_grid, slug
from flows.sweep.plan import plan_sweep
from flows.sweep.report import write_report
from flows.terminal import PLAN_NOTE
from storage import ArtifactStore
from tasks.reporting.narrow_tables import narrow_tables


@flow(name="xlembed-sweep", log_prints=True)
def sweep_flow(
    config_path: str, grid_path: str, baseline: str | None = None, root: str | None = None, only: list[str] | None = None
) -> dict[str, dict[str, str]]:
    """Run every variant of a grid (or those in `only`, see `Grid.select`) over one pipeline config;
    returns variant -> stage -> key."""
    take_signals()
    base = load_config(config_path, root=root)
    grid = load_grid(grid_path, config=base.raw).select(only or [], baseline)
    grid.check_baseline(baseline)
    store = ArtifactStore(base.settings.root)
    logger = get_run_logger()
    plan = plan_sweep(config_path, grid, store, stage_registry(), root=root, base=base)
    counts = plan.counts()
    logger.info(
        "sweep %s: %d variants, %d distinct stage runs: %d cached, %d to compute (%d without sharing)",
        grid.name,
        len(plan.variants),
        len(plan.distinct()),
        counts["distinct_cached"],
        counts["distinct_compute"],
        counts["compute_without_sharing"],
    )
    for line in plan.notes():
        logger.info("%s", line, extra=PLAN_NOTE)
    outcomes = run_variants(plan, store, run_step, log=logger.info)
    report = write_report(plan, store, outcomes, baseline=baseline)
    artifact_key = f"{slug(grid.name)}-sweep".replace("_", "-")
    create_markdown_artifact(
        narrow_tables(report.markdown),  # the UI scrolls a wide table sideways: cut to its column
        key=f"{artifact_key}-report",
        description=f"sweep {grid.name}: comparison of {len(plan.variants)} variants",
    )
    create_table_artifact(
        report.rows or [{"variant": "(none)"}], key=artifact_key, description=f"sweep {grid.name}: one row per variant"
    )
    logger.info("sweep report: %s", report.uri)
    if base.settings.write_index:  # also after failed variants: the report and the refs that moved are there
        publish_store_index(store, f"{artifact_key}-store-index", logger)
    failed = {name: o.error for name, o in outcomes.items() if not o.ok}
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {len(outcomes)} variants failed: " + "; ".join(f"{n}: {e}" for n, e in failed.items())
        )
    return {name: o.keys for name, o in outcomes.items()}
