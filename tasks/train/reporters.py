"""Where training progress and curves go while a run trains, besides curves.parquet: the
shard's progress (StepMonitor: the bar, or a line every `log_every` steps), TensorBoard
event files, and Weights & Biases or MLflow where installed (`report_to` in `[train]`).

Tags are `train/...` (losses, lr, grad norm, examples/s) and `eval/...` (dev accuracy, mean and per
language); the run's settings are written as hparams when it ends. TensorBoard files are written with tensorboardX's event writer (pure Python over protobuf,
which the tree has already; the `tensorboard` package, with its grpcio and web server, is only
needed to look at them) into `{checkpoint dir}/tensorboard/` while training, so
`tensorboard --logdir ${XDG_CACHE_HOME:-~/.cache}/xlembed/train-checkpoints` shows a run live, and are copied
into the train artifact (`files/tensorboard/`) with the model. A resumed run purges what the
killed run logged after its last checkpoint, so the curves have no doubled steps.

W&B and MLflow are optional: named in `report_to` but not installed, they are skipped with a
warning. They read their usual environment (WANDB_PROJECT, WANDB_MODE, MLFLOW_TRACKING_URI,
MLFLOW_EXPERIMENT_NAME).
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import time
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

TENSORBOARD_DIR = "tensorboard"


class Reporter(Protocol):
    def scalars(self, step: int, values: dict[str, float]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


_writers = itertools.count()


def tensorboard_tag(metric: str) -> str:
    """A curve's metric name as a TensorBoard tag: what the training loop measures on the training
    batches under `train/` (train/loss/translation_ranking, train/lr, train/examples_per_second),
    what it measures on the dev rows under `eval/` (eval/dev_accuracy, eval/dev_accuracy/kaz_Cyrl)."""
    return f"eval/{metric}" if metric.startswith("dev_") else f"train/{metric}"


class TensorBoardReporter:
    """Scalars as TensorBoard event files (tags: `tensorboard_tag`), and the run's settings as
    hparams (TensorBoard's HParams tab, with the final dev accuracy and loss as its metrics).

    Written synchronously (tensorboardX's EventsWriter, not its queue-and-thread SummaryWriter),
    so `flush()` at a checkpoint puts every step up to it on disk."""

    def __init__(self, logdir: Path, start_step: int) -> None:
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog

        logdir.mkdir(parents=True, exist_ok=True)
        # the name has the second it was made in; pid and a counter keep two writers of one second apart
        self.writer = EventsWriter(str(logdir / "events"), f".{os.getpid()}.{next(_writers)}")
        if start_step > 0:  # TensorBoard drops what a killed run logged after the checkpoint resumed from
            self.writer.write_event(
                Event(wall_time=time.time(), step=start_step + 1, session_log=SessionLog(status=SessionLog.START))
            )

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        summary = Summary(
            value=[Summary.Value(tag=tensorboard_tag(name), simple_value=float(value)) for name, value in values.items()]
        )
        self.writer.write_event(Event(wall_time=time.time(), step=step, summary=summary))

    def hparams(self, settings: dict[str, Any], results: dict[str, float]) -> None:
        """The run's settings (flattened, TensorBoard's types) against its final metrics (tags as in `scalars`)."""
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import hparams

        flat = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in _flat(settings).items()}
        metrics = {tensorboard_tag(k): float(v) for k, v in results.items()}
        for summary in hparams(flat, metrics):
            self.writer.write_event(Event(wall_time=time.time(), summary=summary))

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbReporter:
    def __init__(self, run_id: str, config: dict[str, Any]) -> None:
        import wandb

        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "xlembed"), id=run_id, resume="allow", config=config, job_type="train"
        )

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.run.finish()


class MLflowReporter:
    def __init__(self, run_id: str, config: dict[str, Any]) -> None:
        import mlflow

        self.mlflow = mlflow
        self.run = mlflow.start_run(run_name=f"xlembed-train-{run_id[:12]}")
        mlflow.log_params({k: str(v)[:250] for k, v in _flat(config).items()})

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self.mlflow.log_metrics({k.replace("/", "."): v for k, v in values.items()}, step=step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.mlflow.end_run()


OPTIONAL_PACKAGES = {"tensorboard": "tensorboardX", "wandb": "wandb", "mlflow": "mlflow"}


def open_reporters(
    names: list[str], checkpoint_dir: Path, start_step: int, run_id: str, config: dict[str, Any]
) -> list[Reporter]:
    reporters: list[Reporter] = []
    for name in names:
        package = OPTIONAL_PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            log.warning("report_to %r: %s is not installed (pip install %s); not reporting there", name, package, package)
            continue
        if name == "tensorboard":
            reporters.append(TensorBoardReporter(checkpoint_dir / TENSORBOARD_DIR, start_step))
        elif name == "wandb":
            reporters.append(WandbReporter(run_id, config))
        else:
            reporters.append(MLflowReporter(run_id, config))
    return reporters


class StepMonitor:
    """The trainer's rank 0 while it trains (a TrainConfig, `progress` a ShardContext or None): every step to the reporters (TensorBoard, W&B,
    MLflow) and the progress bar; every `log_every` steps (and the last) a line with the
    step, the losses per objective, the learning rate, examples/s and the ETA."""

    def __init__(self, config: Any, checkpoint_dir: Path, start: int, progress: Any, reported_curves: int) -> None:
        self.config, self.progress, self.start = config, progress, start
        self.checkpoint_dir = checkpoint_dir
        self.started = time.perf_counter()
        self.reported_curves = reported_curves  # a resumed run's curves are in the event files already
        self.reporters = open_reporters(
            list(self.config.report_to), checkpoint_dir, start, checkpoint_dir.name, self.config.model_dump(mode="json")
        )
        self.last_step_seconds = time.perf_counter()
        self.examples_per_second: dict[int, float] = {}  # steps ticked, not yet reported
        if progress is not None:
            progress.expect(self.config.steps, "steps", done=start)

    def _report_curves(self, curves: list[dict[str, Any]]) -> None:
        fresh = curves[self.reported_curves :]  # this step's values and any dev accuracy since
        self.reported_curves = len(curves)
        by_step: dict[int, dict[str, float]] = {}
        for point in fresh:
            by_step.setdefault(int(point["step"]), {})[point["metric"]] = float(point["value"])
        for reporter in self.reporters:
            for at, scalars in sorted(by_step.items()):
                reporter.scalars(at, scalars)

    def tick(self, done: int) -> None:
        """Every step as the host finishes queueing it: the bar moves, the step's wall-clock time is kept."""
        now = time.perf_counter()
        if now > self.last_step_seconds:  # wall-clock: to the reporters only, never into the artifact's curves
            self.examples_per_second[done] = self.config.batch_size / (now - self.last_step_seconds)
        self.last_step_seconds = now
        if self.progress is not None:
            self.progress.progress(1, check_stop=False)  # the trainer stops after the step, with a checkpoint

    def step(self, done: int, values: dict[str, float], curves: list[dict[str, Any]]) -> None:
        """A step's values once the trainer has read them (every `log_every` steps and before each
        evaluation and checkpoint, steps in order)."""
        self._report_curves(curves)
        if done in self.examples_per_second:
            for reporter in self.reporters:
                reporter.scalars(done, {"examples_per_second": self.examples_per_second.pop(done)})
        if done % self.config.checkpoint_every == 0:  # what a checkpoint keeps is on disk
            for reporter in self.reporters:
                reporter.flush()
        if done % self.config.log_every == 0 or done == self.config.steps or done == self.start + 1:
            line = self.line(done, values)
            if self.progress is not None:
                self.progress.report(line)
            else:
                log.info("%s", line)

    def line(self, done: int, values: dict[str, float]) -> str:
        steps, elapsed = self.config.steps, time.perf_counter() - self.started
        per_step = elapsed / max(1, done - self.start)
        parts = [f"train: step {done:,}/{steps:,} ({100 * done / steps:.0f}%)", f"loss {values['loss']:.4g}"]
        objectives = [f"{k.removeprefix('loss/')} {v:.4g}" for k, v in values.items() if k.startswith("loss/")]
        if objectives:
            parts[-1] += f" ({', '.join(objectives)})"
        parts += [f"lr {values['lr']:.3g}", f"{self.config.batch_size / per_step:.3g} examples/s" if per_step > 0 else "",
                  f"ETA {_duration(per_step * (steps - done))}"]  # fmt: skip
        return " · ".join(p for p in parts if p)

    def finish(self, out_dir: Path, curves: list[dict[str, Any]]) -> None:
        """Close the reporters; the TensorBoard files go into the artifact with the model."""
        import shutil

        self._report_curves(curves)
        final = {
            c["metric"]: float(c["value"]) for c in curves if c["metric"] == "loss" or c["metric"].startswith("dev_accuracy")
        }
        for reporter in self.reporters:
            if isinstance(reporter, TensorBoardReporter):
                reporter.hparams(self.config.model_dump(mode="json"), final)
            reporter.close()
        logs = self.checkpoint_dir / TENSORBOARD_DIR
        if logs.is_dir():
            shutil.copytree(logs, out_dir / TENSORBOARD_DIR, dirs_exist_ok=True)


def _duration(seconds: float) -> str:
    seconds = int(round(max(0.0, seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def read_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] from the event files under `logdir` (tests, quick checks);
    a later file's SessionLog START with a purge step drops earlier values from that step on."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    files = []
    for path in logdir.rglob("events.out.tfevents.*"):
        data, at, events = path.read_bytes(), 0, []
        while at + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            events.append(Event.FromString(data[at + 12 : at + 12 + length]))
            at += 12 + length + 4
        files.append(events)
    out: dict[str, list[tuple[int, float]]] = {}
    for events in sorted(files, key=lambda events: events[0].wall_time if events else 0.0):  # in the order they were begun
        for event in events:
            if event.HasField("session_log") and event.session_log.status == 1:  # START: purge
                out = {tag: [(s, v) for s, v in values if s < event.step] for tag, values in out.items()}
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        found: dict[str, Any] = {}
        for k, v in value.items():
            found.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return found
    return {prefix: value}
