"""What a stage is, and how any stage is executed against the artifact store.

A stage declares a typed config, an explicit code version, an Arrow schema, the stages it
reads, and two pure functions: `plan_shards` (split the work) and `build_shard` (turn input
artifacts into the tables of one shard). The functions here run a stage shard by shard,
skipping shards that finished earlier, and commit the manifest last. Nothing here knows
about Prefect: flows call these functions from tasks, tests call them directly.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow as pa

from storage import (
    AlreadyCommitted,
    ArtifactRef,
    ArtifactStore,
    Manifest,
    ShardRecord,
    artifact_key,
    columns_of,
    utc_now,
)
from storage.build_locks import hold_build_lock
from storage.content_hash import file_sha256
from storage.keys import KEY_SCHEME, check_name
from storage.refs import current_version, next_attempt, read_ref, set_ref
from tasks.shard_context import ShardContext
from tasks.stage_config import KeyedConfig, StageConfig, keyed_config, keyed_parts
from tasks.stop import raise_if_stopping


def _installed_version() -> str:
    try:
        return importlib.metadata.version("xlembed")
    except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "0+unknown"


PACKAGE_VERSION = _installed_version()
"""xlembed's version, as installed: pyproject.toml's `[project] version` is its only definition."""


class DataError(ValueError):
    """Bad input data (a file, a line, a column): the message names it and is shown to the user as is."""


class EmptyOutputError(DataError):
    """A stage kept no rows at all (every input row was dropped)."""


@dataclass(frozen=True)
class ShardSpec:
    """One independently cached unit of a stage's work. `params` must be small and JSON-able."""

    shard_id: str
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


ConfigT = TypeVar("ConfigT", bound=StageConfig)
Inputs = Mapping[str, "InputArtifact"]


@dataclass(frozen=True)
class Stage(Generic[ConfigT]):
    name: str
    code_version: str
    config_model: type[ConfigT]
    schema: pa.Schema | None  # None: the stage writes only attached files (e.g. a model)
    plan_shards: Callable[[ConfigT, Inputs], list[ShardSpec]]
    build_shard: Callable[[ConfigT, Inputs, ShardSpec, ShardContext], Iterable[pa.Table]]
    inputs: tuple[str, ...] = ()
    # Stages read when the pipeline includes them (align reads `translate` when there is one,
    # else the corpus as it is); their keys join this stage's key only when present.
    optional_inputs: tuple[str, ...] = ()
    # Fingerprints of external sources (content hashes of input files, package versions), so
    # that a changed input file changes the key even though the config did not change.
    fingerprint_sources: Callable[[ConfigT], dict[str, Any]] | None = None
    # Checks the stage's own input files (line counts, columns, that they can be read) and
    # returns the problems found, each naming file and cause (empty: none); run at plan time
    # for every stage that will compute, before the first one starts. Must be quick next to
    # the stage itself.
    check_sources: Callable[[ConfigT], list[str]] | None = None
    description: str = ""
    # Builds the stage's own report from its finished shards (their records and the files they
    # attached, read from the store) just before the manifest is committed, and returns files to
    # attach (name -> local path written under the given scratch folder). An attached
    # `report.md` is shown in Prefect by the flow; `report.html` is linked from the store index.
    summarize: Callable[[ConfigT, ArtifactStore, str, list[ShardRecord], Path], Mapping[str, Path]] | None = None
    # Shards of such stages run one at a time within a process (several variants of a sweep on a
    # thread pool): each already uses every core or the GPU, and transformers' lazy imports and
    # matplotlib's font-pattern parser are not thread-safe (seen: ImportError of AutoTokenizer
    # and a pyparsing ParseException when two trainings started at once). Processes (Dask, Ray)
    # are not limited by it.
    one_at_a_time: bool = False
    # Whether a shard runs a model on the accelerator (stopes' `requirements()`), for a stage
    # whose config cannot say: True, False, or a function of the config; None (the default)
    # asks the config, which declares it (`StageConfig.needs_gpu`: its `device`, the components
    # it holds). `resources` is what a shard asks of the task runner; the flow's Ray runner
    # reserves it per shard, so CPU stages take no GPU.
    uses_gpu: bool | Callable[[ConfigT], bool] | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "stage")

    def resources(self, config: ConfigT, gpus_per_task: float) -> dict[str, float]:
        """What one shard of this stage asks of the task runner: `{"num_gpus": gpus_per_task}`
        when it runs on the accelerator (and GPUs are given), else nothing."""
        if self.uses_gpu is None:
            needs_gpu = config.needs_gpu()
        else:
            needs_gpu = self.uses_gpu(config) if callable(self.uses_gpu) else self.uses_gpu
        return {"num_gpus": gpus_per_task} if needs_gpu and gpus_per_task else {}

    def input_names(self, available: Iterable[str]) -> tuple[str, ...]:
        """The required inputs, then the optional ones among `available`."""
        present = set(available)
        return self.inputs + tuple(name for name in self.optional_inputs if name in present)


@dataclass(frozen=True)
class InputArtifact:
    """A committed upstream artifact, as a stage function sees it."""

    store: ArtifactStore
    stage: str
    key: str

    def manifest(self) -> Manifest:
        return self.store.manifest(self.stage, self.key)

    def read_table(self, columns: list[str] | None = None) -> pa.Table:
        return self.store.read_table(self.stage, self.key, columns)

    def iter_batches(self, columns: list[str] | None = None, batch_size: int = 65_536) -> Iterable[pa.RecordBatch]:
        return self.store.iter_batches(self.stage, self.key, columns, batch_size)

    def local_dir(self) -> Path:
        """The artifact's attached files as a local folder (downloaded once from remote stores)."""
        return self.store.attached_dir(self.stage, self.key)


def file_fingerprint(path: Path) -> dict[str, str]:
    """The content (sha256) of a local file: an edit changes the key, a `touch`, a copy or a
    fresh checkout of the same bytes does not. Hashes are remembered in the local index
    (storage/content_hash.py), so an unchanged file is not read again."""
    return {"sha256": file_sha256(path)}


def folder_fingerprint(root: Path, files: Iterable[Path]) -> dict[str, dict[str, str]]:
    """The contents of some files of a folder by their names relative to it (the folder's own
    path stays out: the same files elsewhere have the same fingerprint)."""
    return {path.relative_to(root).as_posix(): file_fingerprint(path) for path in sorted(files)}


def source_fingerprints(stage: Stage[Any], config: StageConfig) -> dict[str, Any]:
    return stage.fingerprint_sources(config) if stage.fingerprint_sources else {}


def stage_key(
    stage: Stage[Any],
    config: StageConfig,
    input_keys: Mapping[str, str],
    fingerprints: Mapping[str, Any],
    *,
    keyed: KeyedConfig | None = None,
) -> str:
    """The artifact key; `keyed`: `keyed_parts(config)` when the caller has it already."""
    values = keyed.values if keyed is not None else keyed_config(config)
    return artifact_key(stage.name, stage.code_version, values, input_keys, fingerprints)


def resolve_inputs(store: ArtifactStore, stage: Stage[Any], input_keys: Mapping[str, str]) -> dict[str, InputArtifact]:
    missing = [name for name in stage.inputs if name not in input_keys or not store.is_committed(name, input_keys[name])]
    if missing:
        raise RuntimeError(f"stage {stage.name!r} needs committed inputs {missing} that are not in {store.root_uri}")
    optional = [name for name in stage.optional_inputs if name in input_keys]
    gone = [name for name in optional if not store.is_committed(name, input_keys[name])]
    if gone:
        raise RuntimeError(f"stage {stage.name!r} needs committed inputs {gone} that are not in {store.root_uri}")
    return {name: InputArtifact(store, name, input_keys[name]) for name in (*stage.inputs, *optional)}


# Re-entrant: a shard may build another artifact of its stage first (an interpolated train
# artifact builds the trained one it derives from: tasks/train/stage.py).
_ONE_AT_A_TIME = threading.RLock()


def run_shard(
    store: ArtifactStore,
    stage: Stage[Any],
    key: str,
    config: StageConfig,
    input_keys: Mapping[str, str],
    shard: ShardSpec,
    progress: Callable[[int], None] | None = None,
) -> ShardRecord:
    """Build one shard unless an earlier run finished it; its record is written after its files.

    Another run building the same key may finish first: then nothing is written here (the
    store refuses writes into a committed artifact) and the committed shard is returned."""
    done = _finished_shard(store, stage.name, key, shard.shard_id)
    if done is not None:
        return done
    try:
        return _build_shard(store, stage, key, config, input_keys, shard, progress)
    except AlreadyCommitted:
        done = _finished_shard(store, stage.name, key, shard.shard_id)
        if done is None:
            raise
        return done


def _finished_shard(store: ArtifactStore, stage: str, key: str, shard_id: str) -> ShardRecord | None:
    """The shard's record if a run finished it (a committed artifact copied from another store
    has no records: its manifest stands for them)."""
    done = store.completed_shard(stage, key, shard_id)
    if done is not None or not store.is_committed(stage, key):
        return done
    manifest = store.manifest(stage, key)
    prefix = f"data/{shard_id}-"
    files = [f for f in manifest.files if f.path.startswith(prefix)]
    return ShardRecord(shard_id=shard_id, files=files, rows_out=sum(f.rows or 0 for f in files))


def _build_shard(
    store: ArtifactStore,
    stage: Stage[Any],
    key: str,
    config: StageConfig,
    input_keys: Mapping[str, str],
    shard: ShardSpec,
    progress: Callable[[int], None] | None,
) -> ShardRecord:
    with _ONE_AT_A_TIME if stage.one_at_a_time else contextlib.nullcontext():
        raise_if_stopping(f"{stage.name} shard {shard.shard_id}: not started")
        started = time.perf_counter()
        inputs = resolve_inputs(store, stage, input_keys)
        with tempfile.TemporaryDirectory(prefix=f"xlembed-{stage.name}-") as workdir:

            def built_elsewhere() -> bool:
                return store.is_committed(stage.name, key) or store.completed_shard(stage.name, key, shard.shard_id) is not None

            context = ShardContext(shard.shard_id, progress, Path(workdir), artifact_key=key, built_elsewhere=built_elsewhere)
            tables = stage.build_shard(config, inputs, shard, context)
            if stage.schema is None:
                if any(table.num_rows for table in tables):
                    raise TypeError(f"stage {stage.name!r} declares no schema but yielded rows")
                files = []
            else:
                files = store.write_shard_files(stage.name, key, shard.shard_id, tables, stage.schema)
            files += store.write_attached_files(stage.name, key, context.attachments)
        record = ShardRecord(
            shard_id=shard.shard_id,
            files=files,
            rows_in=context.rows_in,
            rows_out=sum(f.rows or 0 for f in files),
            dropped=dict(sorted(context.dropped.items())),
            metrics=context.metrics,
            wall_time_s=round(time.perf_counter() - started, 3),
        )
        return store.commit_shard(stage.name, key, record)


def merge_metrics(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum numeric metrics of shards key by key (nested dicts merge recursively)."""
    out: dict[str, Any] = {}
    for part in parts:
        for name, value in part.items():
            if isinstance(value, Mapping):
                out[name] = merge_metrics([out.get(name, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[name] = out.get(name, 0) + value
            else:
                out.setdefault(name, value)
    return out


def commit_stage(
    store: ArtifactStore,
    stage: Stage[Any],
    key: str,
    config: StageConfig,
    input_keys: Mapping[str, str],
    fingerprints: Mapping[str, Any],
    records: list[ShardRecord],
    wall_time_s: float,
    *,
    allow_empty: bool = False,
    keyed: KeyedConfig | None = None,
    rebuild_of: str | None = None,
    attempt: int = 0,
) -> Manifest:
    """Write the stage's manifest from its shard records. A table stage that kept no rows is an
    EmptyOutputError (nothing is committed, the ref stays) unless `allow_empty`. `keyed`:
    `keyed_parts(config)` as the key was computed from (computed here when not given).
    `rebuild_of`/`attempt`: for a forced rebuild, the config key it rebuilds and its number.
    If another run committed the key first, its manifest is returned and nothing is written."""
    if store.is_committed(stage.name, key):
        return store.manifest(stage.name, key)
    dropped: Counter[str] = Counter()
    for record in records:
        dropped.update(record.dropped)
    rows_out = sum(r.rows_out for r in records)
    if stage.schema is not None and rows_out == 0 and not allow_empty:
        raise EmptyOutputError(empty_output_message(stage.name, sum(r.rows_in for r in records), dropped))
    files = [f for record in records for f in record.files]
    if stage.summarize is not None:
        with tempfile.TemporaryDirectory(prefix=f"xlembed-{stage.name}-report-") as workdir:
            files += store.write_attached_files(stage.name, key, stage.summarize(config, store, key, records, Path(workdir)))
    if keyed is None:
        keyed = keyed_parts(config)
    manifest = Manifest(
        stage=stage.name,
        key=key,
        code_version=stage.code_version,
        config=keyed.values,
        locations=keyed.locations,
        input_keys=dict(input_keys),
        source_fingerprints=dict(fingerprints),
        key_scheme=KEY_SCHEME,
        files=files,
        shards=[r.shard_id for r in records],
        columns=columns_of(stage.schema) if stage.schema is not None else [],
        created_at=utc_now(),
        wall_time_s=round(wall_time_s, 3),
        rows_in=sum(r.rows_in for r in records),
        rows_out=sum(r.rows_out for r in records),
        dropped=dict(sorted(dropped.items())),
        metrics=merge_metrics(r.metrics for r in records),
        package_version=PACKAGE_VERSION,
        rebuild_of=rebuild_of,
        attempt=attempt,
    )
    try:
        return store.commit(manifest)
    except AlreadyCommitted:  # the report was being attached when another run committed
        return store.manifest(stage.name, key)


def empty_output_message(stage: str, rows_in: int, dropped: Mapping[str, int]) -> str:
    drops = ", ".join(f"{reason} {n:,}" for reason, n in sorted(dropped.items(), key=lambda item: -item[1]) if n) or "none"
    hint = ""
    if dropped.get("invalid_utf8"):
        hint = " Rows that are not UTF-8 are dropped: convert the file (e.g. iconv -f latin1 -t utf-8 IN > OUT)."
    return (
        f"{stage} kept 0 rows ({rows_in:,} read; dropped: {drops}); nothing was committed and the refs did not move.{hint} "
        f'Check the inputs and filters, or allow an empty output with [pipeline] allow_empty = ["{stage}"]'
    )


def run_stage(
    store: ArtifactStore,
    stage: Stage[Any],
    config: StageConfig,
    input_keys: Mapping[str, str],
    *,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
    allow_empty: bool = False,
    pipeline: str | None = None,
) -> tuple[ArtifactRef, Manifest]:
    """Run a whole stage in this process (the Prefect flow fans shards out instead).

    The version used is the one `pipeline`'s ref chose for this config (a forced rebuild), else
    the first build. `force` builds a new version beside it (storage.keys.attempt_key) and
    never deletes or rewrites the one it replaces; with `pipeline`, the ref then moves to it by
    compare-and-swap."""

    fingerprints = source_fingerprints(stage, config)
    keyed = keyed_parts(config)
    config_key = stage_key(stage, config, input_keys, fingerprints, keyed=keyed)
    ref = read_ref(store, pipeline, stage.name) if pipeline else None
    version = (
        current_version(store, pipeline, stage.name, config_key)
        if pipeline
        else (config_key if store.is_committed(stage.name, config_key) else None)
    )
    if version is not None and not force:
        if pipeline:
            with hold_build_lock(store, stage.name, version):
                set_ref(store, pipeline, stage.name, version, note="up to date", expected=ref.key if ref else None)
        return store.ref(stage.name, version), store.manifest(stage.name, version)
    key, attempt = (config_key, 0) if version is None else next_attempt(store, stage.name, config_key)
    # held from the first write until the ref has moved: gc keeps what a live build holds
    with hold_build_lock(store, stage.name, key):
        started = time.perf_counter()
        inputs = resolve_inputs(store, stage, input_keys)
        shards = stage.plan_shards(config, inputs)
        records = [run_shard(store, stage, key, config, input_keys, shard, progress) for shard in shards]
        manifest = commit_stage(
            store, stage, key, config, input_keys, fingerprints, records, time.perf_counter() - started,
            allow_empty=allow_empty, keyed=keyed, rebuild_of=config_key if attempt else None, attempt=attempt,
        )  # fmt: skip
        if pipeline:
            set_ref(
                store, pipeline, stage.name, key, note="forced (--force)" if force else "built", expected=ref.key if ref else None
            )
    return store.ref(stage.name, key), manifest
