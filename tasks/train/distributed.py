"""Data parallelism: torchrun processes, embeddings all-gathered with gradient, summed gradients.

The stage launches `python -m torch.distributed.run --nproc_per_node N -m tasks.train.launch
SPEC.json` (tasks/train/launch.py) when `distributed.nproc_per_node > 1` (gloo on CPU, nccl on GPU). Every process
builds the same global batch of `batch_size` rows and takes its contiguous slice. Sentence
vectors are all-gathered so that in-batch negatives span the global batch; the process's own
slice is put back into the gathered tensor so that gradients flow through it. Every process
computes the same sentence-level loss on the gathered batch and backpropagates through its own
slice only; token-level losses are divided by global normalisers; summing the gradients over
processes (all_reduce SUM, no DDP wrapper, so GradCache needs no `no_sync` tricks) gives
exactly the gradient of the single-process loss on the same global batch.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


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
    parts = [
        p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=dtype, device=p.device) for p in parameters
    ]
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
