"""The Prefect flow: run the configured stages in dependency order.

Tasks pass only small references (root URI, stage name, key, shard spec), never data. The
artifact store decides what is cached, so every task uses NO_CACHE; a stage whose key is
committed is not run at all. Transient storage errors are retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import errno
import logging
import threading
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task, unmapped
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from flows.config import PipelineConfig, load_config
from flows.interrupts import take_signals
from flows.plan import StepPlan, make_plan
from flows.progress import progress_bar
from flows.stages import stage_registry
from flows.store_index import index_url, write_index
from flows.terminal import PLAN_NOTE
from storage import ArtifactStore, Manifest
from storage.build_locks import hold_build_lock
from storage.refs import set_ref
from tasks.reporting.narrow_tables import narrow_tables
from tasks.stage import ShardSpec, Stage, commit_stage, resolve_inputs, run_shard
from tasks.stage_config import KeyedConfig, StageConfig
from tasks.stop import STOP, Interrupted, raise_if_stopping

PERMANENT_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, ValueError, TypeError, KeyError)


# A full disk or a file-size limit does not go away by waiting a few seconds.
PERMANENT_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS}


def is_transient(exc: BaseException) -> bool:
    """Network and storage hiccups are worth a retry; bad data, full disks and bugs are not."""
    if isinstance(exc, PERMANENT_ERRORS):
        return False
    if isinstance(exc, OSError) and exc.errno in PERMANENT_ERRNOS:
        return False
    if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
        return True
    return type(exc).__module__.split(".")[0] in {"botocore", "aiobotocore", "aiohttp", "urllib3"}


def _retry_on_transient(task: Any, task_run: Any, state: Any) -> bool:
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001 - we only classify it
        return is_transient(exc)
    return False


RETRY = dict(retries=3, retry_delay_seconds=[1, 4, 16], retry_condition_fn=_retry_on_transient, cache_policy=NO_CACHE)


# A stage's config travels to its tasks as JSON (Dask and Ray workers are other processes). Each
# process validates a given config once: the flow's own process not at all (`run_step` leaves the
# model it validated when loading the config here), a worker once for all the shards it builds.
_VALIDATED: dict[tuple[type, str], StageConfig] = {}
_VALIDATED_LOCK = threading.Lock()
_VALIDATED_MAX = 256


def _config_text(config: dict[str, Any]) -> str:
    import json

    return json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)


def validated_config(stage: Stage[Any], config: dict[str, Any]) -> StageConfig:
    """The stage's config model for a task's JSON `config`, validated once per process."""
    ident = (stage.config_model, _config_text(config))
    with _VALIDATED_LOCK:
        found = _VALIDATED.get(ident)
    if found is None:
        found = stage.config_model.model_validate(config)
        remember_config(stage, config, found)
    return found


def remember_config(stage: Stage[Any], config: dict[str, Any], model: StageConfig) -> None:
    with _VALIDATED_LOCK:
        if len(_VALIDATED) >= _VALIDATED_MAX:
            _VALIDATED.clear()
        _VALIDATED[(stage.config_model, _config_text(config))] = model


@task(name="plan-shards", **RETRY)
def plan_shards_task(root: str, stage_name: str, config: dict[str, Any], input_keys: dict[str, str]) -> list[ShardSpec]:
    stage = stage_registry()[stage_name]
    store = ArtifactStore(root)
    return stage.plan_shards(validated_config(stage, config), resolve_inputs(store, stage, input_keys))


@task(name="build-shard", task_run_name="{stage_name}:{shard.shard_id}", **RETRY)
def build_shard_task(
    root: str, stage_name: str, key: str, config: dict[str, Any], input_keys: dict[str, str], shard: ShardSpec
) -> dict[str, Any]:
    stage = stage_registry()[stage_name]
    store = ArtifactStore(root)
    with progress_bar(f"{stage_name}:{shard.shard_id}") as advance:
        record = run_shard(store, stage, key, validated_config(stage, config), input_keys, shard, advance)
    get_run_logger().info(
        "%s shard %s: %d rows in, %d out, dropped %s",
        stage_name,
        shard.shard_id,
        record.rows_in,
        record.rows_out,
        record.dropped or "nothing",
    )
    return {"shard_id": record.shard_id, "rows_out": record.rows_out}


def artifact_report(manifest: Manifest, uri: str) -> str:
    dropped = "\n".join(f"| {reason} | {n:,} |" for reason, n in manifest.dropped.items()) or "| (none) | 0 |"
    return (
        f"# {manifest.stage} `{manifest.key[:12]}`\n\n"
        f"- URI: `{uri}`\n- code version: {manifest.code_version}\n"
        f"- rows in: {manifest.rows_in:,} — rows out: {manifest.rows_out:,}\n"
        f"- files: {len(manifest.files)} ({manifest.total_bytes:,} bytes), wall time {manifest.wall_time_s:.1f} s\n\n"
        f"| dropped because | rows |\n|---|---|\n{dropped}\n\n"
        f"```json\n{_json(manifest.metrics)}\n```\n"
    )


def _json(value: Any) -> str:
    import json

    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@task(name="commit-artifact", task_run_name="{stage_name}:commit", **RETRY)
def commit_task(
    root: str,
    stage_name: str,
    key: str,
    config: dict[str, Any],
    input_keys: dict[str, str],
    fingerprints: dict[str, Any],
    shard_ids: list[str],
    wall_time_s: float,
    allow_empty: bool = False,
    keyed: KeyedConfig | None = None,
    rebuild_of: str | None = None,
    attempt: int = 0,
) -> str:
    """Commit the stage's manifest; `keyed`: the keyed config its plan computed (StepPlan.keyed).
    A key another run committed meanwhile is used as it is (its manifest is not rewritten)."""
    stage = stage_registry()[stage_name]
    store = ArtifactStore(root)
    records = []
    for shard_id in shard_ids if not store.is_committed(stage_name, key) else ():
        record = store.completed_shard(stage_name, key, shard_id)
        if record is None:
            raise RuntimeError(f"shard {shard_id} of {stage_name}/{key[:12]} vanished before commit")
        records.append(record)
    manifest = commit_stage(
        store, stage, key, validated_config(stage, config), input_keys, fingerprints, records, wall_time_s,
        allow_empty=allow_empty, keyed=keyed, rebuild_of=rebuild_of, attempt=attempt,
    )  # fmt: skip
    uri = store.uri(stage_name, key)
    create_markdown_artifact(
        artifact_report(manifest, uri),
        key=f"{stage_name.replace('_', '-')}-artifact",
        description=f"{stage_name} artifact {key[:12]}",
    )
    attached = {entry.path: entry for entry in manifest.attached_files}

    def read_attached(path: str) -> bytes | None:
        """An attached file's bytes, checked against the manifest; None when the manifest lists no such file."""
        if path not in attached:
            return None
        with store.verified_path(stage_name, key, attached[path]) as local:
            return Path(local).read_bytes()

    for path in attached:  # a stage's own human report (evaluate) goes to the UI too
        if path.endswith("report.md"):
            from tasks.reporting.figures import inline_figures  # lazy: matplotlib, only for a commit with figures

            folder = path.rsplit("/", 1)[0]
            # the UI cannot follow links beside the report: the figures travel inside it; and it
            # scrolls a wide table sideways: the tables are cut to its column (the file keeps them whole)
            create_markdown_artifact(
                narrow_tables(
                    inline_figures(
                        read_attached(path).decode("utf-8"), lambda name, folder=folder: read_attached(f"{folder}/{name}")
                    )
                ),
                key=f"{stage_name.replace('_', '-')}-report",
                description=f"{stage_name} report {key[:12]}",
            )
    create_table_artifact(
        [{"reason": r, "rows": n} for r, n in manifest.dropped.items()] or [{"reason": "(none)", "rows": 0}],
        key=f"{stage_name.replace('_', '-')}-drops",
        description=f"rows dropped by {stage_name}, per reason",
    )
    return key


def publish_store_index(store: ArtifactStore, artifact_key: str, logger: Any) -> None:
    """Rewrite `{root}/index.html` and link it from this flow run's artifacts (`artifact_key`).
    The page is a view of the store, not part of a run's result: failing to write it is one
    warning line, never a failed run."""
    url = index_url(store)
    try:
        page = write_index(store)
        create_link_artifact(
            url,
            link_text=url,
            key=artifact_key,
            description=f"index of the artifact store: {page.artifacts} artifacts, refs, reports",
        )
    except Exception as exc:  # noqa: BLE001 - a convenience page; the run's own result stands
        logger.warning("store index %s not refreshed: %s: %s", url, type(exc).__name__, exc)
        return
    logger.info("store index: %s (%d artifacts)", url, page.artifacts)


class ShardCounter:
    """The stage-level line of a stage with several shards: `align: 3/15 shards (20%), 1.2
    shards/min, ETA 0:10:00`, in the flow run's log (each shard logs its own units too)."""

    def __init__(self, stage: str, total: int) -> None:
        self.stage, self.total, self.done, self.started = stage, total, 0, time.perf_counter()

    def one_done(self) -> str | None:
        self.done += 1
        if self.total < 2:
            return None
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        line = f"{self.stage}: {self.done}/{self.total} shards ({self.done / self.total:.0%}), {rate * 60:.1f} shards/min"
        if self.done < self.total and rate > 0:
            line += f", ETA {datetime.timedelta(seconds=round((self.total - self.done) / rate))}"
        run_logger().info("%s", line)
        return line


def run_logger() -> Any:
    """The flow run's logger (Prefect's), or this module's logger outside a flow run."""
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:  # called outside a flow run (tests, tools)
        return logging.getLogger(__name__)


def shard_results(
    futures: list[Any], stage: str, store: ArtifactStore, key: str, shards: list[ShardSpec]
) -> list[dict[str, Any]]:
    """Wait for every shard. On a stop request, cancel the shards (one not started never starts,
    a Dask or Ray shard is cancelled where it runs, a thread stops at its next safe point), wait
    for them, and raise `Interrupted` saying what was kept."""
    finished = threading.Semaphore(0)
    for future in futures:
        future.add_done_callback(lambda _: finished.release())
    cancelled = False
    counter = ShardCounter(stage, len(futures))
    for _ in futures:
        while not finished.acquire(timeout=0.5):
            if STOP.is_set() and not cancelled:
                cancelled = True
                for future in futures:
                    _cancel(future)
        counter.one_done()
    if not STOP.is_set():
        return [future.result() for future in futures]
    details = []
    for future in futures:
        try:
            future.result()
        except Interrupted as exc:
            details.append(str(exc))
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - cancelled or failed: not kept, counted below
            pass
    if len(shards) == 1 and details:
        raise Interrupted(details[0])
    kept = sum(store.completed_shard(stage, key, shard.shard_id) is not None for shard in shards)
    raise Interrupted(f"{stage}: stopped; {kept} of {len(shards)} shards kept; rerun resumes")


def _cancel(future: Any) -> None:
    wrapped = future.wrapped_future
    with contextlib.suppress(Exception):
        if hasattr(wrapped, "cancel"):  # concurrent.futures (threads), dask.distributed
            wrapped.cancel()
        else:  # a Ray ObjectRef: kill its worker (a shard commits by renaming, so nothing half-written
            # is kept); a polite cancel interrupts the task, and Prefect logs it from the worker
            # as "Crash detected! Execution was aborted by an interrupt signal"
            import ray

            ray.cancel(wrapped, force=True)


def run_step(config: PipelineConfig, store: ArtifactStore, step: StepPlan) -> None:
    stage_config = config.stage_configs[step.stage]
    as_json = stage_config.model_dump(mode="json")
    remember_config(stage_registry()[step.stage], as_json, stage_config)  # the tasks here need not validate it again
    started = time.perf_counter()
    shards = plan_shards_task(store.root_uri, step.stage, as_json, step.input_keys)
    futures = build_shard_task.map(
        unmapped(store.root_uri), unmapped(step.stage), unmapped(step.key), unmapped(as_json), unmapped(step.input_keys), shards
    )
    done = shard_results(futures, step.stage, store, step.key, shards)
    allow_empty = step.stage in config.settings.allow_empty
    commit_task(
        store.root_uri, step.stage, step.key, as_json, step.input_keys, step.fingerprints, [d["shard_id"] for d in done],
        time.perf_counter() - started, allow_empty, step.keyed, step.rebuild_of, step.attempt,
    )  # fmt: skip


@flow(name="xlembed-pipeline", log_prints=True)
def pipeline_flow(
    config_path: str,
    only: str | None = None,
    from_stage: str | None = None,
    force: list[str] | None = None,
    root: str | None = None,
) -> dict[str, str]:
    """Build every stale stage of a pipeline config; returns stage -> artifact key."""
    take_signals()
    config = load_config(config_path, root=root)
    store = ArtifactStore(config.settings.root)
    plan = make_plan(config, store, stage_registry(), only=only, from_stage=from_stage, force=force or [])
    logger = get_run_logger()
    for line in plan.notes():
        logger.info("%s", line, extra=PLAN_NOTE)
    keys: dict[str, str] = {}
    for step in plan:
        if step.action == "skip":
            continue
        # held from the first write (or the reuse of a cached version) until the ref has moved:
        # gc keeps what a live build holds
        with hold_build_lock(store, step.stage, step.key):
            if step.action == "compute":
                raise_if_stopping(f"{step.stage}: stopped before it started; every stage before it is kept; rerun resumes")
                logger.info("%s: computing %s (%s)", step.stage, step.key[:12], "; ".join(step.reasons))
                run_step(config, store, step)
            else:
                logger.info("%s: cached %s", step.stage, step.key[:12])
            set_ref(store, config.name, step.stage, step.key, note="; ".join(step.reasons), expected=step.ref_key)
        keys[step.stage] = step.key
    rows = [{"stage": s.stage, "action": s.action, "key": s.key[:12], "why": "; ".join(s.reasons)} for s in plan]
    create_table_artifact(rows, key=f"{config.name.replace('_', '-')}-run", description=f"what pipeline {config.name} did")
    if config.settings.write_index:
        publish_store_index(store, f"{config.name.replace('_', '-')}-store-index", logger)
    return keys
