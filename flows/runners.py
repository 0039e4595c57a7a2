"""The flow's task runner, chosen in `[pipeline]`: threads here, a Dask cluster or a Ray cluster.

Shards are independent tasks that read and write the artifact store directly, so any
runner whose workers can reach the store (a local folder they share, or S3) can build them.
"""

from __future__ import annotations

from typing import Any

from flows.config import PipelineSettings


SHARD_TASK = "build-shard"


def _ray_task_runner_class() -> type:
    """RayTaskRunner that reserves resources for shard tasks (imported only when asked for)."""
    from prefect_ray import RayTaskRunner
    from prefect_ray.context import remote_options

    class ShardRayTaskRunner(RayTaskRunner):
        """Each `build-shard` task asks Ray for `shard_options` (e.g. num_gpus=1); the small
        planning and commit tasks take Ray's defaults, so they never wait for a GPU."""

        def __init__(self, address: str | None = None, init_kwargs: dict[str, Any] | None = None, shard_options: dict[str, Any] | None = None):
            super().__init__(address=address, init_kwargs=init_kwargs)
            self.shard_options = dict(shard_options or {})

        def duplicate(self) -> "ShardRayTaskRunner":
            return type(self)(address=self.address, init_kwargs=self.init_kwargs, shard_options=self.shard_options)

        def __eq__(self, other: object) -> bool:
            return super().__eq__(other) and getattr(other, "shard_options", None) == self.shard_options

        def __enter__(self) -> "ShardRayTaskRunner":
            from flows.interrupts import children_ignore_ctrl_c

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
                if task.name == SHARD_TASK and self.shard_options:
                    stack.enter_context(remote_options(**self.shard_options))
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
        shard_options = {"num_gpus": settings.ray_gpus_per_task} if settings.ray_gpus_per_task else {}
        init_kwargs: dict[str, Any] = {}
        if not settings.ray_address:  # a local Ray: max_workers shards at once, no dashboard
            init_kwargs = {"num_cpus": settings.max_workers, "include_dashboard": False}
        return _ray_task_runner_class()(address=settings.ray_address, init_kwargs=init_kwargs, shard_options=shard_options)
    if settings.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if settings.dask_address:
            return DaskTaskRunner(address=settings.dask_address)
        # one thread per worker process: the stages parallelise inside (polars, torch)
        cluster = {"n_workers": settings.max_workers, "processes": True, "threads_per_worker": 1, "preload": [__name__]}
        return DaskTaskRunner(cluster_kwargs=cluster)
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=settings.max_workers)
