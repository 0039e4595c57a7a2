"""The flow's task runner, chosen in `[pipeline]`: threads here, or a Dask cluster.

Shards are independent tasks that read and write the artifact store directly, so any
runner whose workers can reach the store (a local folder they share, or S3) can build them.
"""

from __future__ import annotations

from typing import Any

from flows.config import PipelineSettings


def make_task_runner(settings: PipelineSettings) -> Any:
    if settings.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if settings.dask_address:
            return DaskTaskRunner(address=settings.dask_address)
        # one thread per worker process: the stages parallelise inside (polars, torch)
        return DaskTaskRunner(cluster_kwargs={"n_workers": settings.max_workers, "processes": True, "threads_per_worker": 1})
    from prefect.task_runners import ThreadPoolTaskRunner

    return ThreadPoolTaskRunner(max_workers=settings.max_workers)
