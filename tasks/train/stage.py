"""The train stage: corpus (+ translate, + align) and a base model in, a trained encoder out.

Output: no table (schema None); the artifact's attached files are
  model/            transformers + sentence-transformers directory (safetensors, pooling config)
  curves.parquet    training curves, long format (step, metric, value): losses per objective,
                    learning rate, gradient norm, dev retrieval accuracy
  curves.png        the same as a plot
  metrics.json      the chosen checkpoint's dev metrics and run statistics (also the manifest's metrics)
  model/README.md   the model card (tasks/reporting/model_card.py) without evaluation results; the
                    evaluate stage stores the card with its results, which `xlembed export` uses

Training text comes from the `translate` artifact when the pipeline has one (NLLB multi-way
rows, corpus layout), else from the corpus; the dev split of the corpus selects the checkpoint.
Word alignments come from the `align` artifact when present (AWP/WTR need them; without them
those objectives contribute nothing and pairs still train on TR).

In-progress checkpoints live outside the shard's scratch folder, in
`{checkpoint_dir}/{run id}` where the run id hashes the stage's code version, keyed config and
input keys (the artifact key minus source fingerprints, which this stage has none of): a run
that dies resumes from there when started again with the same config; the folder is removed
once the artifact is written. Two processes on one machine that build the same run (two
schedules firing together, a rerun while a run is still going) would share that folder, so
the second waits on a lock file beside it until the first is done, then trains on its own
(the store keeps one of the two identical artifacts).

With `checkpoint_location = "store"` the checkpoints are also kept under the artifact root, in
`{root}/_checkpoints/train/{artifact key}/` (tasks.train.checkpoint.StoreCheckpoints): a run
started on a machine without local checkpoints (the first machine was preempted) downloads
the latest one from there and resumes from it. The store removes that folder when it commits
the train artifact, so a machine lost while the model is being uploaded still leaves it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from storage.checkpoint_files import CheckpointFiles
from tasks.reporting.card_facts import CURVES_FILE, CardFacts
from tasks.reporting.model_card import render_model_card
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage, run_stage, stage_key
from tasks.train.card import TRAIN_CARD
from tasks.train.checkpoint import StoreCheckpoints
from tasks.train.config import TrainConfig
from tasks.train.interpolation import base_weights, interpolate_model_folder
from tasks.train.launch import launch
from tasks.train.trainer import Trainer, TrainInputs

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks; one run at a time is on the user
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from tasks.train.checkpoint import StoreCheckpoints

CODE_VERSION = "3"  # raised whenever the same inputs would train another model; CHANGELOG.md says what each changed
log = logging.getLogger(__name__)


def plan_train_shards(config: TrainConfig, inputs: Inputs) -> list[ShardSpec]:
    return [ShardSpec("model", {}, f"train {config.steps} steps on {', '.join(config.objectives.active())}")]


def artifact_key(config: TrainConfig, inputs: Inputs, context: ShardContext | None = None) -> str:
    """The train artifact's key: the one `run_shard` hands the shard, computed only without it."""
    if context is not None and context.artifact_key is not None:
        return context.artifact_key
    return stage_key(TRAIN_STAGE, config, {name: art.key for name, art in inputs.items()}, {})


def checkpoint_dir_for(config: TrainConfig, key: str) -> Path:
    """The durable checkpoint folder, named by the artifact's key: same config and inputs, same
    folder (so a rerun resumes)."""
    return Path(config.checkpoint_dir).expanduser() / key[:24]


def store_checkpoints_for(config: TrainConfig, key: str, store: Any, local: Path) -> StoreCheckpoints | None:
    """The store mirror of the local checkpoint folder, under the train artifact's key (None: local only)."""

    if config.checkpoint_location != "store":
        return None
    return StoreCheckpoints(CheckpointFiles(store, TRAIN_STAGE.name, key), local)


def training_table(inputs: Inputs) -> pa.Table:
    """The corpus's train rows, or the translate artifact's rows (corpus layout) when present."""
    corpus = inputs["corpus"].read_table(["group_id", "lang", "text", "split"])
    if "translate" not in inputs:
        return corpus
    translated = inputs["translate"]
    names = {c.name for c in translated.manifest().columns}
    if not {"group_id", "lang", "text"} <= names:
        raise ValueError(f"the translate artifact has columns {sorted(names)}; the train stage needs group_id, lang, text")
    table = translated.read_table(sorted({"group_id", "lang", "text", "split"} & names))
    if "split" not in table.column_names:
        table = table.append_column("split", pa.array(["train"] * table.num_rows))
    # dev rows always come from the corpus (held out from translation and training)
    dev = corpus.filter(pc.equal(corpus["split"], "dev"))
    train = table.filter(pc.equal(table["split"], "train")).select(["group_id", "lang", "text", "split"])
    return pa.concat_tables([train, dev.select(["group_id", "lang", "text", "split"])])


def build_train_shard(
    config: TrainConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext, checkpoints: Path
) -> list[Any]:

    corpus = training_table(inputs)
    alignments = inputs["align"].read_table() if "align" in inputs else None
    base_dir = inputs["base_model"].local_dir()
    context.read(corpus.num_rows)
    out_dir = context.workdir / "out"
    checkpoints.mkdir(parents=True, exist_ok=True)
    mirror = store_checkpoints_for(config, artifact_key(config, inputs, context), inputs["corpus"].store, checkpoints)
    if mirror is not None:
        mirror.restore()
    if config.distributed.nproc_per_node > 1:
        spec_dir = context.workdir / "spec"
        spec_dir.mkdir()
        pq.write_table(corpus, spec_dir / "corpus.parquet")
        if alignments is not None:
            pq.write_table(alignments, spec_dir / "alignments.parquet")
        spec = {
            "config": config.model_dump(mode="json"),
            "corpus": str(spec_dir / "corpus.parquet"),
            "alignments": str(spec_dir / "alignments.parquet") if alignments is not None else None,
            "base_dir": str(base_dir),
            "out_dir": str(out_dir),
            "checkpoint_dir": str(checkpoints),
            "checkpoint_store": {"root": mirror.files.store.root_uri, "stage": mirror.files.stage, "key": mirror.files.key}
            if mirror is not None
            else None,
        }
        (spec_dir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        launch(spec_dir / "spec.json", nproc=config.distributed.nproc_per_node)
        metrics = json.loads((out_dir / "metrics.json").read_text(encoding="utf-8"))
    else:
        trainer = Trainer(config, TrainInputs(corpus, alignments, base_dir))
        try:
            metrics = trainer.run(
                out_dir, checkpoints, progress=context, on_checkpoint=mirror.upload if mirror is not None else None
            )
        finally:
            if mirror is not None:
                mirror.close()  # the last checkpoint is in the store before this returns or raises
    write_model_card(config, inputs, metrics, out_dir / "model" / "README.md")
    for reason, count in metrics.get("dropped", {}).items():
        context.drop(reason, count)
    context.metrics = {k: v for k, v in metrics.items() if k not in ("dropped", "languages")}
    context.attach_dir(out_dir)
    return []


def write_model_card(config: TrainConfig, inputs: Inputs, metrics: dict[str, Any], path: Path) -> None:
    """The model's card from its config, metrics and input artifacts (no evaluation yet)."""

    curves = path.parent.parent / CURVES_FILE  # out_dir/curves.parquet, beside model/
    facts = CardFacts.from_manifests(
        None, config.model_dump(mode="json"), metrics, {name: art.manifest() for name, art in inputs.items()},
        pq.read_table(curves) if curves.is_file() else None, TRAIN_CARD,
    )  # fmt: skip
    path.write_text(render_model_card(facts, train_folder=True), encoding="utf-8")


@contextlib.contextmanager
def exclusive_checkpoints(directory: Path) -> Iterator[Path]:
    """Hold `{directory}.lock` (flock) for as long as this process trains into `directory`.

    A second process with the same run id waits here instead of resuming from, overwriting or
    deleting checkpoints the first one is still writing."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    if fcntl is None:  # pragma: no cover
        yield directory
        return
    lock_path = directory.parent / f"{directory.name}.lock"
    while True:
        handle = open(lock_path, "a+b")  # noqa: SIM115 - held open until the run ends, below
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another process is training run %s on this machine; waiting for it to finish", directory.name)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        # The holder before us unlinks the file when its run ends: a lock on that unlinked file
        # guards nothing (a newcomer creates and locks a new one), so start over on the file now there.
        try:
            current = os.stat(lock_path).st_ino == os.fstat(handle.fileno()).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        handle.close()
    try:
        yield directory
    finally:
        lock_path.unlink(missing_ok=True)  # while still held: waiters see the inode change and retry
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


def build_interpolated_shard(config: TrainConfig, inputs: Inputs, context: ShardContext) -> list[Any]:
    """WiSE-FT without training: the weights of this config at `interpolation = 1.0` (its own
    train artifact, found cached or built here first) mixed with the base model's.

    The artifact holds the trained artifact's files (curves, dev metrics: measured before
    interpolation) with the model's weights replaced by alpha * trained + (1 - alpha) * base;
    `metrics.json` names the trained artifact it was derived from."""

    alpha = config.interpolation
    trained_config = config.model_copy(update={"interpolation": 1.0})
    store = inputs["corpus"].store
    input_keys = {name: artifact.key for name, artifact in inputs.items()}
    trained_ref, _ = run_stage(store, TRAIN_STAGE, trained_config, input_keys)
    log.info("train: interpolation %g of the trained weights %s with the base; nothing is trained", alpha, trained_ref.key[:12])
    trained_dir = store.attached_dir(TRAIN_STAGE.name, trained_ref.key)
    out_dir = context.workdir / "out"
    shutil.copytree(trained_dir, out_dir)
    interpolate_model_folder(out_dir / "model", base_weights(inputs["base_model"].local_dir()), alpha)
    metrics = json.loads((out_dir / "metrics.json").read_text(encoding="utf-8"))
    metrics.update(interpolation=alpha, trained_artifact=trained_ref.key)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True), encoding="utf-8")
    write_model_card(config, inputs, metrics, out_dir / "model" / "README.md")
    context.metrics = {k: v for k, v in metrics.items() if k not in ("dropped", "languages")}
    context.attach_dir(out_dir)
    return []


def _build_and_cleanup(config: TrainConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> list[Any]:
    if config.interpolation < 1.0:
        return build_interpolated_shard(config, inputs, context)
    with exclusive_checkpoints(checkpoint_dir_for(config, artifact_key(config, inputs, context))) as checkpoints:
        context.raise_if_built_elsewhere()  # a concurrent run of this key may have finished while we waited
        result = build_train_shard(config, inputs, shard, context, checkpoints)
        # The attached files are copied by the store after this returns; the checkpoints are no
        # longer needed for resume once the model is exported (a failed upload reruns training).
        shutil.rmtree(checkpoints, ignore_errors=True)
    return result


TRAIN_STAGE: Stage[TrainConfig] = Stage(
    name="train",
    code_version=CODE_VERSION,
    config_model=TrainConfig,
    schema=None,
    plan_shards=plan_train_shards,
    build_shard=_build_and_cleanup,
    inputs=("corpus", "base_model"),
    optional_inputs=("translate", "align"),
    # the objectives are not listed: their registry imports torch, which planning does not need
    description="train a cross-lingual sentence encoder on the objectives of [train.objectives] (tasks/train/objectives)",
    one_at_a_time=True,
)
