"""A sweep's report: the variants' evaluations compared, saved under `{root}/sweeps/{grid name}/`."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.store_index import REPORTS_DIR
from flows.sweep.driver import VariantOutcome
from flows.sweep.grid import UNTRAINED_VARIANT, slug
from flows.sweep.plan import SweepPlan
from flows.sweep.toml_writer import toml_document
from storage import ArtifactStore
from tasks.evaluate.columns import VariantResult
from tasks.evaluate.compare import build_comparison
from tasks.evaluate.interval_figures import INTERVALS_FIGURE_FILE
from tasks.evaluate.schema import ITEM_KEY
from tasks.evaluate.stage import BASE_ITEMS_FILE, ITEMS_FILE, REPORT_DIR, STS_ITEMS_FILE
from tasks.evaluate.tradeoff import TRADEOFF_FIGURE_FILE

SWEEPS_DIR = REPORTS_DIR  # the store index lists the reports written here


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
        store.backend.copy_local_file(f.name, dest)
    finally:
        Path(f.name).unlink(missing_ok=True)


def _evaluation_extras(store: ArtifactStore, stage: str, key: str) -> dict[str, Any]:
    """What an evaluate artifact attaches besides its metrics, as tables (None where it has none):
    "items" and "base_items" (per-query outcomes of the scored model and of the untrained base
    scored beside it), "base_metrics" and "sts_items" (per-pair STS cosines). Evaluations older
    than the outcomes have no items."""
    import pyarrow.parquet as pq

    item_columns = [*ITEM_KEY, "correct"]  # margins are not compared
    wanted = {
        "items": (ITEMS_FILE, item_columns),
        "base_items": (BASE_ITEMS_FILE, item_columns),
        "base_metrics": (f"{REPORT_DIR}/base_metrics.parquet", None),
        "sts_items": (STS_ITEMS_FILE, None),  # the trade-off figure's similarity axis
    }
    attached = {entry.path.removeprefix("files/") for entry in store.manifest(stage, key).attached_files}
    if not attached & {file for file, _ in wanted.values()}:
        return dict.fromkeys(wanted)  # nothing to download
    folder = store.attached_dir(stage, key)
    return {
        name: pq.read_table(folder / file, columns=columns) if file in attached else None
        for name, (file, columns) in wanted.items()
    }


def write_report(
    plan: SweepPlan,
    store: ArtifactStore,
    outcomes: Mapping[str, VariantOutcome],
    *,
    baseline: str | None = None,
    metrics_stage: str = "evaluate",
) -> SweepReport:
    """Compare the variants' evaluations and save report.md, report.html (and intervals.png),
    sweep.json and the variant configs under `{root}/sweeps/{grid name}/`."""
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
                sts_items=extras.get("sts_items"),
                screening=tuple(store.manifest(metrics_stage, key).metrics.get("screening", ())) if key else (),
            )
        )
    untrained = next((r.name for r in results if r.name == UNTRAINED_VARIANT and not r.trained), None)
    title = f"Sweep {plan.grid.name}" + (f": {plan.grid.description}" if plan.grid.description else "")
    comparison = build_comparison(
        results,
        baseline=baseline,
        title=title,
        columns=plan.grid.columns,
        untrained_base=untrained,
        single_seed=plan.grid.seeding == "none",
    )
    folder = sweep_dir(store, plan.grid.name)
    _put_text(store, f"{folder}/report.md", comparison.markdown)
    _put_text(store, f"{folder}/report.html", comparison.html)
    if comparison.figure is not None:
        _put_bytes(store, f"{folder}/{INTERVALS_FIGURE_FILE}", comparison.figure)
    if comparison.tradeoff_figure is not None:
        _put_bytes(store, f"{folder}/{TRADEOFF_FIGURE_FILE}", comparison.tradeoff_figure)
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
        # each trained variant's change in retrieval against its change in monolingual STS (tasks/evaluate/tradeoff.py)
        "tradeoff": comparison.tradeoff,
    }
    _put_text(store, f"{folder}/sweep.json", json.dumps(summary, indent=2, ensure_ascii=False, default=str))
    for vplan in plan.variants:
        if vplan.config.raw:  # the variant's config, as a file `xlembed run` accepts
            header = f"# {vplan.config.path} with the overrides of variant {vplan.variant.name!r} of {plan.grid.path}\n"
            _put_text(store, f"{folder}/variants/{vplan.variant.name}.toml", header + toml_document(vplan.config.raw))
    return SweepReport(
        comparison.markdown, comparison.html, comparison.rows, f"{store.root_uri}/{SWEEPS_DIR}/{slug(plan.grid.name)}/report.md"
    )
