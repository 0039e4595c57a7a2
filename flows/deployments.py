"""Prefect deployments of the pipeline flow: a scheduled rebuild and an on-demand stage run.

Two deployments of `flows.pipeline.pipeline_flow` (flow name `xlembed-pipeline`):

- `xlembed-rebuild`: on a cron schedule, builds every stale stage of the config. The flow
  is incremental, so a scheduled run recomputes only what a config, code or data change
  made stale (source files are fingerprinted) and is a cheap no-op otherwise.
- `xlembed-stage`: no schedule; its parameters choose what to run: `only`, `from_stage`,
  `force` (and `config_path`, `root`), e.g.
  `prefect deployment run 'xlembed-pipeline/xlembed-stage' -p only=align -p 'force=["align"]'`.

`deploy` registers both on a Prefect server for workers of a work pool to run (`xlembed
deploy`); `serve` registers them and runs their flow runs from this process, no worker or
work pool needed (`xlembed serve`). Both need a real server (PREFECT_API_URL): schedules
do not exist in Prefect's ephemeral mode. This module only wires; the flow does the work.

The entrypoint is `deployment_flow` below: `pipeline_flow` itself (same flow, same name)
with a task runner that reads the run's config, so a deployed run fans its shards out as
`[pipeline] task_runner` says (threads, Dask or Ray), as `xlembed run` does; a flow's
task runner is otherwise fixed where the flow is defined. `xlembed deploy` registers it
by module path (`flows.deployments.deployment_flow`), so any machine where xlembed is
installed can load it whatever its working directory; `prefect.yaml` declares the same
deployments for `prefect deploy --all` with the file entrypoint
`flows/deployments.py:deployment_flow`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from prefect.task_runners import TaskRunner

from flows.config import load_config
from flows.pipeline import pipeline_flow
from flows.runners import make_task_runner

FLOW_NAME = "xlembed-pipeline"
REBUILD = "xlembed-rebuild"
STAGE = "xlembed-stage"
DEFAULT_CRON = "0 3 * * *"  # nightly, 03:00 in DEFAULT_TIMEZONE
DEFAULT_TIMEZONE = "UTC"
DEFAULT_POOL = "xlembed"
POOL_ENV = "XLEMBED_WORK_POOL"


ENTRYPOINT = "flows.deployments.deployment_flow"


class DeploymentError(RuntimeError):
    """Deployments cannot be registered as asked; the message is meant for the user as is."""


@dataclass(frozen=True)
class DeploymentSpec:
    config_path: str  # absolute: the path the worker (or served process) reads
    root: str | None = None  # artifact root overriding the config's, e.g. s3://bucket/prefix
    cron: str | None = DEFAULT_CRON  # None: the rebuild deployment gets no schedule
    timezone: str = DEFAULT_TIMEZONE
    interval_s: float | None = None  # instead of cron: every N seconds
    paused: bool = False  # register the schedule paused
    tags: tuple[str, ...] = ()

    def parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {"config_path": self.config_path}
        if self.root:
            params["root"] = self.root
        return params


class ConfiguredTaskRunner(TaskRunner):
    """The task runner the run's own config names: built, on the first task, from the flow
    run's `config_path` and `root` parameters (`flows.runners.make_task_runner`), then
    every task goes to it."""

    def __init__(self) -> None:
        super().__init__()
        self._inner: Any = None

    def duplicate(self) -> "ConfiguredTaskRunner":
        return type(self)()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def configured(self) -> Any:
        if self._inner is None:
            from prefect.context import FlowRunContext

            context = FlowRunContext.get()
            if context is None:
                raise RuntimeError("ConfiguredTaskRunner runs tasks of a flow run only")
            params = context.parameters
            settings = load_config(params["config_path"], root=params.get("root")).settings
            self._inner = make_task_runner(settings).__enter__()
        return self._inner

    def submit(self, task: Any, parameters: dict[str, Any], wait_for: Any = None, dependencies: Any = None) -> Any:
        return self.configured().submit(task, parameters, wait_for, dependencies)

    def map(self, task: Any, parameters: dict[str, Any], wait_for: Any = None) -> Any:
        return self.configured().map(task, parameters, wait_for)

    def __exit__(self, *exc_info: Any) -> None:
        inner, self._inner = self._inner, None
        try:
            if inner is not None:
                inner.__exit__(*exc_info)
        finally:
            super().__exit__(*exc_info)


def _deployment_flow() -> Any:
    return pipeline_flow.with_options(task_runner=ConfiguredTaskRunner())


deployment_flow = _deployment_flow()


def api_url() -> str | None:
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def require_server() -> str:
    url = api_url()
    if not url:
        raise DeploymentError(
            "no Prefect server: set PREFECT_API_URL (e.g. http://127.0.0.1:4200/api, after `prefect server start`); "
            "schedules and deployments need a running server"
        )
    return url


def _schedules(spec: DeploymentSpec) -> list[Any]:
    from prefect.schedules import Cron, Interval

    if spec.interval_s is not None:
        return [Interval(dt.timedelta(seconds=spec.interval_s), timezone=spec.timezone)]
    if spec.cron:
        return [Cron(spec.cron, timezone=spec.timezone)]
    return []


def build_deployments(spec: DeploymentSpec, work_pool_name: str | None = None) -> list[Any]:
    """The two RunnerDeployments (not yet registered)."""
    from prefect.deployments.runner import EntrypointType, RunnerDeployment

    common: dict[str, Any] = dict(
        parameters=spec.parameters(),
        entrypoint_type=EntrypointType.MODULE_PATH,
        work_pool_name=work_pool_name,
        concurrency_limit=1,  # two builds of one pipeline at once would only duplicate work
    )
    rebuild = RunnerDeployment.from_flow(
        deployment_flow,
        name=REBUILD,
        schedules=_schedules(spec),
        paused=spec.paused,
        description=f"Scheduled end-to-end rebuild of {spec.config_path}: every stale stage is recomputed, cached ones are reused.",
        tags=["xlembed", "rebuild", *spec.tags],
        **common,
    )
    stage = RunnerDeployment.from_flow(
        deployment_flow,
        name=STAGE,
        description=(
            f"Run part of {spec.config_path} on demand: set `only` (one stage, building missing inputs), "
            "`from_stage` (a stage and everything downstream) and/or `force` (stages to recompute although cached)."
        ),
        tags=["xlembed", "stage", *spec.tags],
        **common,
    )
    for deployment in (rebuild, stage):
        deployment.entrypoint = ENTRYPOINT  # from_flow would name flows.pipeline.pipeline_flow
    return [rebuild, stage]


def ensure_work_pool(name: str, pool_type: str = "process") -> bool:
    """Create the work pool if it does not exist; True if it was created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            pool = client.read_work_pool(name)
        except ObjectNotFound:
            pass
        else:
            if pool.type != pool_type:
                raise DeploymentError(f"work pool {name!r} exists with type {pool.type!r}, not {pool_type!r}")
            return False
        if pool_type != "process":
            raise DeploymentError(
                f"work pool {name!r} does not exist; create it first: prefect work-pool create {name} --type {pool_type}"
            )
        from prefect.workers.process import ProcessWorker

        template = ProcessWorker.get_default_base_job_template()
        client.create_work_pool(WorkPoolCreate(name=name, type=pool_type, base_job_template=template))
        return True


def deploy(spec: DeploymentSpec, work_pool_name: str, create_pool: bool = True) -> dict[str, UUID]:
    """Register (or update) both deployments on the server; returns name -> deployment id."""
    require_server()
    if create_pool:
        ensure_work_pool(work_pool_name)
    ids: dict[str, UUID] = {}
    for deployment in build_deployments(spec, work_pool_name):
        try:
            ids[deployment.name] = deployment.apply(work_pool_name=work_pool_name)
        except Exception as exc:  # noqa: BLE001 - the server's reason, on one line
            raise DeploymentError(f"could not register {FLOW_NAME}/{deployment.name}: {type(exc).__name__}: {exc}") from exc
    return ids


def serve(spec: DeploymentSpec, limit: int | None = None) -> None:
    """Register both deployments and run their flow runs from this process until interrupted."""
    require_server()
    from prefect import serve as prefect_serve

    prefect_serve(*build_deployments(spec), limit=limit, print_starting_message=True)
