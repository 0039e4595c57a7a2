"""The flow's task runner, chosen in `[pipeline]`: threads here, a Dask cluster or a Ray cluster.

Shards are independent tasks that read and write the artifact store directly, so any
runner whose workers can reach the store (a local folder they share, or S3) can build them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from flows.config import PipelineSettings
from flows.interrupts import children_ignore_ctrl_c

SHARD_TASK = "build-shard"


def shard_resources(task_name: str, parameters: dict[str, Any], gpus_per_task: float) -> dict[str, Any]:
    """What a task asks of the cluster: a `build-shard` task what its stage needs for its config
    (`Stage.resources`: `ray_gpus_per_task` GPUs for a stage that runs a model, none for a CPU
    stage such as corpus); every other task (planning, commit) nothing."""
    if task_name != SHARD_TASK or not gpus_per_task:
        return {}
    from flows.pipeline import validated_config  # lazy: prefect; the CLI imports this module to pick a runner
    from flows.stages import stage_registry  # lazy: every stage module (polars), only on a Ray cluster with GPUs

    stage = stage_registry()[parameters["stage_name"]]
    config = parameters["config"]
    if not isinstance(config, BaseModel):  # the config as the task gets it, JSON: the model run_step validated
        config = validated_config(stage, config)
    return stage.resources(config, gpus_per_task)


def _ray_task_runner_class() -> type:
    """RayTaskRunner that reserves resources for shard tasks (imported only when asked for)."""
    from prefect_ray import RayTaskRunner
    from prefect_ray.context import remote_options

    class ShardRayTaskRunner(RayTaskRunner):
        """Each `build-shard` task asks Ray for what its stage needs (`Stage.resources`: e.g.
        num_gpus=1 for a stage that runs a model, nothing for corpus shards); the small planning
        and commit tasks take Ray's defaults, so they never wait for a GPU."""

        def __init__(self, address: str | None = None, init_kwargs: dict[str, Any] | None = None, gpus_per_task: float = 0):
            super().__init__(address=address, init_kwargs=init_kwargs)
            self.gpus_per_task = gpus_per_task

        def duplicate(self) -> "ShardRayTaskRunner":
            return type(self)(address=self.address, init_kwargs=self.init_kwargs, gpus_per_task=self.gpus_per_task)

        def __eq__(self, other: object) -> bool:
            return super().__eq__(other) and getattr(other, "gpus_per_task", None) == self.gpus_per_task

        def shard_options(self, task_name: str, parameters: dict[str, Any]) -> dict[str, Any]:
            """The Ray options of one task: its stage's resources for a shard, none for the rest."""
            return shard_resources(task_name, parameters, self.gpus_per_task)

        def __enter__(self) -> "ShardRayTaskRunner":
            with children_ignore_ctrl_c():  # a local Ray's processes start here
                return super().__enter__()

        def submit(self, task: Any, parameters: dict[str, Any], wait_for: Any = None, dependencies: Any = None) -> Any:
            from contextlib import ExitStack

            from prefect.context import FlowRunContext
            from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

            with ExitStack() as stack:
                # Each task carries the flow's settings to its Ray worker. When the flow talks
                # to a temporary server (`xlembed run` without PREFECT_API_URL) they hold no API
                # URL, and every worker would start a temporary server of its own (slow, and
                # its task runs would never reach the flow's): hand them the flow's.
                client = getattr(FlowRunContext.get(), "client", None)
                if client is not None and not get_current_settings().api.url:
                    stack.enter_context(temporary_settings(updates={PREFECT_API_URL: str(client.api_url).rstrip("/")}))
                options = self.shard_options(task.name, parameters)
                if options:
                    stack.enter_context(remote_options(**options))
                return super().submit(task, parameters, wait_for, dependencies)

    return ShardRayTaskRunner


def dask_setup(worker: Any) -> None:
    """Run in each worker process of the local Dask cluster as it starts (its `preload`): the
    terminal's Ctrl-C reaches the whole process group, and a worker that took it died mid-shard
    with pages of `KeyboardInterrupt` tracebacks. Workers ignore SIGINT; xlembed handles it
    (tasks/stop.py) and shuts the cluster down."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def make_task_runner(settings: PipelineSettings) -> Any:
    if settings.task_runner == "ray":
        init_kwargs: dict[str, Any] = {}
        if not settings.ray_address:  # a local Ray: max_workers shards at once, no dashboard
            init_kwargs = {"num_cpus": settings.max_workers, "include_dashboard": False}
        return _ray_task_runner_class()(
            address=settings.ray_address, init_kwargs=init_kwargs, gpus_per_task=settings.ray_gpus_per_task
        )
    if settings.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if settings.dask_address:
            return DaskTaskRunner(address=settings.dask_address)
        # one thread per worker process: the stages parallelise inside (polars, torch)
        cluster = {"n_workers": settings.max_workers, "processes": True, "threads_per_worker": 1, "preload": [__name__]}
        return DaskTaskRunner(cluster_kwargs=cluster)
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=settings.max_workers)
