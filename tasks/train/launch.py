"""Launching data-parallel training: torchrun over `python -m tasks.train.launch SPEC.json`.

The stage writes the spec (config, input files, output and checkpoint folders) and calls
`launch`; every process runs `_worker`, which builds a `Trainer` with its rank. The collectives
the processes share are in tasks/train/distributed.py (see there for how gradients are summed).
A module of its own so that the collectives (which the trainer imports) do not import the trainer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch
import torch.distributed as dist

from storage import ArtifactStore
from storage.checkpoint_files import CheckpointFiles
from tasks.stop import Interrupted, own_process_group, register_child, stop_requested, unregister_child
from tasks.train.checkpoint import StoreCheckpoints
from tasks.train.config import TrainConfig
from tasks.train.trainer import Trainer, TrainInputs


def launch(spec_path: Path, *, nproc: int, timeout_s: int | None = None) -> None:
    """Run the distributed workers for a spec written by the stage; raise if any fails.

    torchrun runs in a process group of its own, so the terminal's Ctrl-C reaches only xlembed:
    on a stop request this writes `stop` beside the spec, the workers agree to stop after the
    step they are in, save a checkpoint and write `interrupted.txt`, and `Interrupted` is raised
    here with its message (a second Ctrl-C kills the group: tasks.stop.kill_children)."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        "-m", "tasks.train.launch", str(spec_path),
    ]  # fmt: skip
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    stop_file, interrupted = spec_path.parent / "stop", spec_path.parent / "interrupted.txt"
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    proc = subprocess.Popen(
        cmd, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=own_process_group
    )
    register_child(proc)
    try:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stop_requested() and not stop_file.exists():
                    stop_file.touch()
                if deadline is not None and time.monotonic() > deadline:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    raise subprocess.TimeoutExpired(cmd, timeout_s) from None
    finally:
        unregister_child(proc)
    if interrupted.exists():
        raise Interrupted(interrupted.read_text(encoding="utf-8").strip())
    if proc.returncode != 0:
        tail = (stdout[-4000:] + "\n" + stderr[-8000:]).strip()
        raise RuntimeError(f"distributed training failed (exit {proc.returncode}):\n{tail}")


def store_checkpoints(where: dict[str, str] | None, local: Path) -> Any:
    """Rank 0's store mirror of the checkpoints (tasks.train.checkpoint.StoreCheckpoints), or None."""
    if not where:
        return None
    return StoreCheckpoints(CheckpointFiles(ArtifactStore(where["root"], create=False), where["stage"], where["key"]), local)


def _worker(spec_path: str) -> None:
    spec: dict[str, Any] = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    config = TrainConfig.model_validate(spec["config"])
    backend = config.distributed.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=config.distributed.timeout_s))
    try:
        inputs = TrainInputs(
            corpus=pq.read_table(spec["corpus"]),
            alignments=pq.read_table(spec["alignments"]) if spec.get("alignments") else None,
            base_dir=Path(spec["base_dir"]),
        )
        stop_file = Path(spec_path).parent / "stop"
        trainer = Trainer(config, inputs, rank=rank, world=world, should_stop=stop_file.exists)
        mirror = store_checkpoints(spec.get("checkpoint_store"), Path(spec["checkpoint_dir"])) if rank == 0 else None
        try:
            metrics = trainer.run(
                Path(spec["out_dir"]), Path(spec["checkpoint_dir"]), on_checkpoint=mirror.upload if mirror is not None else None
            )
        except Interrupted as exc:
            if rank == 0:
                Path(spec_path).parent.joinpath("interrupted.txt").write_text(str(exc), encoding="utf-8")
            return
        finally:
            if mirror is not None:
                mirror.close()
        if rank == 0:
            Path(spec["out_dir"], "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True), encoding="utf-8")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    _worker(sys.argv[1])
