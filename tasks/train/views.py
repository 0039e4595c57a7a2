"""Forward passes over a step's texts that both the trainer and objectives use: every view's
sentence vectors (`encode_views`) and the frozen model's token vectors (`anchor_tokens`).

A module of its own so that objectives need not import the trainer (which imports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from tasks.train.batching import StepBatch, texts_to_arrays

if TYPE_CHECKING:
    from tasks.train.objectives.base import TrainContext


def to_device(ctx: TrainContext, array: np.ndarray) -> torch.Tensor:
    """A host array on the step's device. To a GPU through pinned memory, without waiting: a
    copy from pageable memory makes the host wait until the GPU has run all the work queued
    before it, every copy of every step."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if ctx.device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(ctx.device, non_blocking=True)


def encode_views(ctx: TrainContext, model: Any, batch: StepBatch) -> torch.Tensor:
    """Sentence vectors [b, V, H] of every view (zeros where a row has no view)."""
    emb, _, _ = forward_views(ctx, model, batch)
    return emb


def frozen_views(ctx: TrainContext, batch: StepBatch, needed_by: str) -> torch.Tensor:
    """`encode_views` of the frozen starting model, without gradient: the z_orig of the
    objectives that hold the trained model near where it started."""
    if ctx.frozen is None:
        raise ValueError(f"{needed_by} needs the frozen starting model, and the trainer built none")
    with torch.no_grad():
        return encode_views(ctx, ctx.frozen, batch)


def forward_views(ctx: TrainContext, model: Any, batch: StepBatch) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """`encode_views` plus the flat (view-major) token tensors and language ids of the texts."""
    valid = batch.text_ids >= 0
    vm = valid.T  # view-major order: all view-0 texts, then view 1, ...
    flat_ids = batch.text_ids.T[vm]
    flat_langs = batch.lang_ids.T[vm]
    arrays = texts_to_arrays(ctx.data, flat_ids)
    tensors = {k: to_device(ctx, v) for k, v in arrays.items()}
    langs = to_device(ctx, flat_langs)
    with ctx.autocast():
        emb, hidden = model(tensors["input_ids"], tensors["attention_mask"], langs)
    out = emb.new_zeros(vm.shape[0], vm.shape[1], emb.shape[-1])
    # row numbers from the host: a boolean mask index would make the host wait for the GPU
    out.view(-1, emb.shape[-1])[to_device(ctx, np.flatnonzero(vm))] = emb
    tensors["hidden"] = hidden
    return out.transpose(0, 1), tensors, langs


def anchor_tokens(ctx: TrainContext, text_ids: np.ndarray, lang_ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """The frozen model's L2-normalised token vectors [n, T, H] and a mask of real, non-special tokens."""
    arrays = texts_to_arrays(ctx.data, text_ids)
    ids, att = to_device(ctx, arrays["input_ids"]), to_device(ctx, arrays["attention_mask"])
    with ctx.autocast():
        hidden, _ = ctx.frozen.token_states(ids, att, to_device(ctx, lang_ids))
    mask = att.bool().clone()
    lengths = att.sum(1)
    mask[:, 0] = False  # first special token
    mask[torch.arange(len(ids), device=ids.device), (lengths - 1).clamp(min=0)] = False  # last special token
    mask |= att.bool() & ~mask.any(1, keepdim=True)  # a text of specials only keeps them
    return nn.functional.normalize(hidden.float(), dim=-1), mask
