"""`xlembed deploy` and `serve`: register the pipeline's Prefect deployments, or serve them here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from flows.cli.common import RootOpt, _load, app, fail, out

DeployConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="pipeline config TOML; runs read it at this (absolute) path", show_default=False)
]
CronOpt = Annotated[str, typer.Option("--cron", help="when the rebuild runs (cron; a 6th field means seconds)")]
TimezoneOpt = Annotated[str, typer.Option("--timezone", help="IANA timezone of the cron schedule")]
IntervalOpt = Annotated[Optional[float], typer.Option("--interval", min=1, help="rebuild every N seconds instead of --cron")]
NoScheduleOpt = Annotated[bool, typer.Option("--no-schedule", help="register the rebuild deployment without a schedule")]


def _deployment_spec(
    config: Path, root: str | None, cron: str, timezone: str, interval: float | None, no_schedule: bool, paused: bool = False
) -> Any:
    from flows import deployments  # lazy: prefect, not needed for --help

    _load(config, root)  # a bad config fails here, not at 3 a.m. on a worker
    if not no_schedule and interval is None:
        from prefect.schedules import Cron

        try:
            Cron(cron, timezone=timezone)
        except ValueError as exc:
            raise fail(f"--cron/--timezone: {exc}", 2) from None
    return deployments.DeploymentSpec(
        config_path=str(config.expanduser().resolve()),
        root=root,
        cron=None if no_schedule else cron,
        timezone=timezone,
        interval_s=None if no_schedule else interval,
        paused=paused,
    )


def _schedule_text(spec: Any) -> str:
    if spec.interval_s is not None:
        return f"every {spec.interval_s:g} s"
    return f"cron {spec.cron} ({spec.timezone})" if spec.cron else "none"


@app.command()
def deploy(
    config: DeployConfigOpt,
    pool: Annotated[
        str,
        typer.Option(
            "--pool",
            envvar="XLEMBED_WORK_POOL",
            help="work pool whose workers run the flows (created as a process pool if missing)",
        ),
    ] = "xlembed",
    cron: CronOpt = "0 3 * * *",
    timezone: TimezoneOpt = "UTC",
    interval: IntervalOpt = None,
    no_schedule: NoScheduleOpt = False,
    paused: Annotated[bool, typer.Option("--paused", help="register the schedule paused")] = False,
    create_pool: Annotated[bool, typer.Option(help="create the work pool (type process) if it does not exist")] = True,
    root: RootOpt = None,
) -> None:
    """Register the pipeline's deployments on the Prefect server (PREFECT_API_URL) for a work pool.

    xlembed-rebuild: the scheduled rebuild of every stale stage. xlembed-stage: on demand, with
    parameters only / from_stage / force, e.g.

    \b
      prefect deployment run 'xlembed-pipeline/xlembed-stage' -p only=align
    """
    from flows import deployments  # lazy: prefect, not needed for --help

    spec = _deployment_spec(config, root, cron, timezone, interval, no_schedule, paused)
    try:
        url = deployments.require_server()
    except deployments.DeploymentError as exc:
        raise fail(str(exc), 2) from None
    try:
        ids = deployments.deploy(spec, pool, create_pool=create_pool)
    except deployments.DeploymentError as exc:
        raise fail(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - an unreachable or failing server: one line
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        raise fail(f"Prefect server at {url}: {type(exc).__name__}: {exc}") from None
    table = Table(title=f"deployments on {url} (work pool {pool})", title_justify="left")
    for column in ("deployment", "schedule", "id"):
        table.add_column(column, no_wrap=column != "schedule")
    table.add_row(
        f"{deployments.FLOW_NAME}/{deployments.REBUILD}",
        Text(_schedule_text(spec) + (" [paused]" if paused else "")),
        str(ids[deployments.REBUILD]),
    )
    table.add_row(f"{deployments.FLOW_NAME}/{deployments.STAGE}", "on demand", str(ids[deployments.STAGE]))
    out.print(table)
    out.print(Text(f"config {spec.config_path}" + (f", artifact root {root}" if root else "")), highlight=False, soft_wrap=True)
    out.print(
        f"start a worker:  prefect worker start --pool {pool} --type process", highlight=False, markup=False, soft_wrap=True
    )
    out.print(
        f"run one stage:   prefect deployment run '{deployments.FLOW_NAME}/{deployments.STAGE}' -p only=STAGE",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@app.command()
def serve(
    config: DeployConfigOpt,
    cron: CronOpt = "0 3 * * *",
    timezone: TimezoneOpt = "UTC",
    interval: IntervalOpt = None,
    no_schedule: NoScheduleOpt = False,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="flow runs at once (default: no limit)")] = None,
    root: RootOpt = None,
) -> None:
    """Serve the pipeline's deployments from this process until Ctrl-C: no worker or work pool needed.

    Registers xlembed-rebuild (scheduled) and xlembed-stage (on demand) on the Prefect server
    (PREFECT_API_URL) and runs their flow runs here. Schedules are paused when it stops.
    """
    from flows import deployments  # lazy: prefect, not needed for --help

    spec = _deployment_spec(config, root, cron, timezone, interval, no_schedule)
    try:
        deployments.require_server()
    except deployments.DeploymentError as exc:
        raise fail(str(exc), 2) from None
    os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "tasks,storage")
    deployments.serve(spec, limit=limit)
