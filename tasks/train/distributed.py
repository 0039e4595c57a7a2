"""Data parallelism: torchrun processes, embeddings all-gathered with gradient, summed gradients.

The stage launches `python -m torch.distributed.run --nproc_per_node N -m tasks.train.distributed
SPEC.json` when `distributed.nproc_per_node > 1` (gloo on CPU, nccl on GPU). Every process
builds the same global batch of `batch_size` rows and takes its contiguous slice. Sentence
vectors are all-gathered so that in-batch negatives span the global batch; the process's own
slice is put back into the gathered tensor so that gradients flow through it. Every process
computes the same sentence-level loss on the gathered batch and backpropagates through its own
slice only; token-level losses are divided by global normalisers; summing the gradients over
processes (all_reduce SUM, no DDP wrapper, so GradCache needs no `no_sync` tricks) gives
exactly the gradient of the single-process loss on the same global batch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tasks.stop import Interrupted, own_process_group, register_child, stop_requested, unregister_child


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def gather_with_grad(local: torch.Tensor) -> torch.Tensor:
    """Concatenate every process's `local` along dim 0; gradients flow into this process's part."""
    if not is_distributed():
        return local
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local.detach().contiguous())
    parts[dist.get_rank()] = local
    return torch.cat(parts, dim=0)


def gather_no_grad(local: torch.Tensor) -> torch.Tensor:
    if not is_distributed():
        return local
    parts = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local.contiguous())
    return torch.cat(parts, dim=0)


def sum_over_processes(value: torch.Tensor) -> torch.Tensor:
    if is_distributed():
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def sum_gradients(parameters: list[torch.nn.Parameter]) -> None:
    """all_reduce SUM of every gradient, flattened into one buffer (one call, not one per tensor).

    A parameter this process's loss did not reach has `.grad` None (AWP's head on a slice with no
    aligned word): it contributes zeros, so that every process reduces a buffer of the same
    layout. One more element per parameter counts the processes that had a gradient; where none
    had one, `.grad` stays None, as in one process on the whole batch (AdamW then skips it)."""
    if not is_distributed() or not parameters:
        return
    dtype = next((p.grad.dtype for p in parameters if p.grad is not None), parameters[0].dtype)
    present = torch.tensor([float(p.grad is not None) for p in parameters], dtype=dtype, device=parameters[0].device)
    parts = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=dtype, device=p.device) for p in parameters]
    flat = torch.cat([*parts, present])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for p, reached in zip(parameters, flat[-len(parameters) :].tolist()):
        n = p.numel()
        if reached:
            summed = flat[offset : offset + n].view_as(p)
            if p.grad is None:
                p.grad = summed.clone()
            else:
                p.grad.copy_(summed)
        offset += n


def launch(spec_path: Path, *, nproc: int, timeout_s: int | None = None) -> None:
    """Run the distributed workers for a spec written by the stage; raise if any fails.

    torchrun runs in a process group of its own, so the terminal's Ctrl-C reaches only xlembed:
    on a stop request this writes `stop` beside the spec, the workers agree to stop after the
    step they are in, save a checkpoint and write `interrupted.txt`, and `Interrupted` is raised
    here with its message (a second Ctrl-C kills the group: tasks.stop.kill_children)."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
        "-m", "tasks.train.distributed", str(spec_path),
    ]  # fmt: skip
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    stop_file, interrupted = spec_path.parent / "stop", spec_path.parent / "interrupted.txt"
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=own_process_group)
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
    from storage import ArtifactStore
    from tasks.train.checkpoint import StoreCheckpoints

    return StoreCheckpoints(ArtifactStore(where["root"], create=False).checkpoint_files(where["stage"], where["key"]), local)


def _worker(spec_path: str) -> None:
    from datetime import timedelta

    import pyarrow.parquet as pq

    from tasks.train.config import TrainConfig
    from tasks.train.trainer import TrainInputs, Trainer

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
            metrics = trainer.run(Path(spec["out_dir"]), Path(spec["checkpoint_dir"]), on_checkpoint=mirror.upload if mirror is not None else None)
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
