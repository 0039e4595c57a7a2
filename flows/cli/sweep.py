"""`xlembed sweep` (and `plan --grid`): every variant of a grid over one pipeline config."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from flows.cli.common import ConfigArg, RootOpt, _load, app, fail, out, print_plan_notes, refresh_index, run_prefect_flow
from flows.config import ConfigError
from storage import ArtifactStore, StoreError


def _sweep_table(plan: Any) -> Table:
    """A row per variant, a column per stage: cached / compute (and shared when variants share it)."""
    users = plan.users()
    stages = list(dict.fromkeys(s.stage for v in plan.variants for s in v.steps if s.action != "skip"))
    table = Table(title=f"sweep {plan.grid.name}", title_justify="left")
    for column in ("variant", *stages, "cached", "compute"):
        table.add_column(column)
    counts = plan.counts()["variants"]
    for vplan in plan.variants:
        cells = {}
        for step in vplan.steps:
            if step.action == "skip":
                continue
            shared = len(users[(step.stage, step.key)]) > 1
            colour = "green" if step.action == "cached" else "yellow"
            cells[step.stage] = Text.assemble(
                (step.action, colour), f" {step.key[:8]}", (" (shared)", "dim") if shared and step.action == "compute" else ""
            )
        n = counts[vplan.variant.name]
        table.add_row(Text(vplan.variant.name), *(cells.get(s, "") for s in stages), str(n["cached"]), str(n["compute"]))
    return table


def _sweep(
    config: Path, grid_path: Path, baseline: str | None, root: str | None, *, dry_run: bool, only: list[str] | None = None
) -> None:
    from flows.server import TemporaryServer  # lazy: sockets, subprocess and urllib, not needed for --help
    from flows.stages import stage_registry  # lazy: every stage module (polars), not needed for --help
    from flows.sweep import (  # lazy: the sweep report's polars and matplotlib, not needed for --help
        load_grid,
        plan_sweep,
        run_variants,
        write_report,
    )

    cfg = _load(config, root)
    server = TemporaryServer() if dry_run else TemporaryServer.start_early()  # starts while the sweep plans
    try:
        grid = load_grid(grid_path, config=cfg.raw).select(only or [], baseline)
        grid.check_baseline(baseline)
        store = ArtifactStore(cfg.settings.root)
        sweep_plan = plan_sweep(config, grid, store, stage_registry(), root=root, base=cfg)
        counts = sweep_plan.counts()
        out.print(_sweep_table(sweep_plan))
        out.print(
            f"{len(sweep_plan.variants)} variants; {len(sweep_plan.distinct())} distinct stage runs: "
            f"{counts['distinct_cached']} cached, {counts['distinct_compute']} to compute "
            f"({counts['compute_without_sharing']} without sharing)",
            highlight=False,
        )
        print_plan_notes(sweep_plan)
        if dry_run:
            return
        if counts["distinct_compute"] == 0:  # nothing to build: refs and report only, no flow run
            report = write_report(sweep_plan, store, run_variants(sweep_plan, store, None), baseline=baseline)
            refresh_index(store, cfg)
            out.print("[green]Every variant is up to date; nothing to compute.[/green]")
            _print_sweep_report(report)
            server.stop()
            return
    except (ConfigError, ValueError, StoreError, FileNotFoundError) as exc:
        server.stop()
        raise fail(str(exc), 2) from None
    from flows.sweep import sweep_dir, sweep_flow  # lazy: prefect, only when variants run

    run_prefect_flow(
        server, cfg, "sweep", lambda: sweep_flow, lambda: f" (report, if any: {sweep_dir(store, grid.name)}/report.md)",
        config_path=str(config), grid_path=str(grid_path), baseline=baseline, root=root, only=only or None,
    )  # fmt: skip
    out.print(f"report: {store.root_uri}/sweeps/{grid.name}/report.html", highlight=False)


def _print_sweep_report(report: Any) -> None:
    from rich.markdown import Markdown

    out.print(Markdown(report.markdown))
    out.print(f"report: {report.uri.removesuffix('.md')}.html", highlight=False)


@app.command()
def sweep(
    config: ConfigArg,
    grid: Annotated[
        Path, typer.Option("--grid", help="grid TOML: overrides of dotted config keys (docs/experiments.md)", show_default=False)
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the variants and what would compute; compute nothing")] = False,
    baseline: Annotated[
        Optional[str], typer.Option("--baseline", help="variant (or seed group) the report compares with; default: the grid's")
    ] = None,
    only: Annotated[
        Optional[list[str]],
        typer.Option(
            "--only",
            metavar="VARIANT",
            help="run only these variants (repeat, or comma-separate; a [[variants]] name keeps all its seeds) and the baseline; report under <grid>-only-<names>",
        ),
    ] = None,
    root: RootOpt = None,
) -> None:
    """Run every variant of a grid over one pipeline config: shared artifacts are built once; one comparison report."""
    names = [n.strip() for item in only or [] for n in item.split(",") if n.strip()]
    _sweep(config, grid, baseline, root, dry_run=dry_run, only=names)
