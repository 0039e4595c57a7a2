"""Checkpoints for exact resume: safetensors for tensors, JSON for everything else, no pickle.

A checkpoint is a folder `step-{n:08d}` holding
  model.safetensors       every trainable module's state (encoder, heads, language embedding)
  optimizer.safetensors   AdamW moments and step counters;  optimizer.json  its param groups
  scheduler.json          the LR scheduler's state
  rng.safetensors         torch CPU (and CUDA) generator states
  state.json              step, data position, best dev score, training curves so far
It is written into a temporary folder and renamed into place, then `latest.json` is replaced
atomically; older step folders are removed after that. A run killed at any moment leaves the
previous checkpoint whole.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

LATEST = "latest.json"
BEST_MODEL = "best-model.safetensors"


def _tensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}


def write_json_atomic(path: Path, value: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def save_tensors_atomic(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(_tensors(tensors), str(tmp))
    os.replace(tmp, path)


def optimizer_to_files(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    sd = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    plain: dict[str, Any] = {"param_groups": sd["param_groups"], "state": {}}
    for idx, entry in sd["state"].items():
        plain["state"][str(idx)] = {}
        for name, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{idx}.{name}"] = value
            else:
                plain["state"][str(idx)][name] = value
    return tensors, plain


def optimizer_from_files(tensors: dict[str, torch.Tensor], plain: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {int(i): dict(v) for i, v in plain["state"].items()}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    return {"state": state, "param_groups": plain["param_groups"]}


def rng_state() -> dict[str, torch.Tensor]:
    out = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            out[f"cuda.{i}"] = s
    return out


def set_rng_state(state: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(state["torch"])
    cuda = [state[k] for k in sorted(k for k in state if k.startswith("cuda."))]
    if cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(cuda)


def save_checkpoint(
    directory: Path,
    *,
    step: int,
    module: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:08d}"
    tmp = directory / f".tmp-{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_file(_tensors(module.state_dict()), str(tmp / "model.safetensors"))
    opt_tensors, opt_plain = optimizer_to_files(optimizer)
    save_file(_tensors(opt_tensors), str(tmp / "optimizer.safetensors"))
    (tmp / "optimizer.json").write_text(json.dumps(opt_plain), encoding="utf-8")
    (tmp / "scheduler.json").write_text(json.dumps(scheduler.state_dict()), encoding="utf-8")
    save_file(_tensors(rng_state()), str(tmp / "rng.safetensors"))
    (tmp / "state.json").write_text(json.dumps({**state, "step": step}), encoding="utf-8")
    final = directory / name
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    write_json_atomic(directory / LATEST, {"checkpoint": name, "step": step})
    for old in directory.glob("step-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(directory: Path) -> Path | None:
    pointer = directory / LATEST
    if not pointer.exists():
        return None
    path = directory / json.loads(pointer.read_text(encoding="utf-8"))["checkpoint"]
    return path if (path / "state.json").exists() else None


def load_checkpoint(path: Path, *, module: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> dict[str, Any]:
    """Restore everything in place; returns state.json (step, data position, curves, best score)."""
    module.load_state_dict(load_file(str(path / "model.safetensors")), strict=True)
    plain = json.loads((path / "optimizer.json").read_text(encoding="utf-8"))
    optimizer.load_state_dict(optimizer_from_files(load_file(str(path / "optimizer.safetensors")), plain))
    scheduler.load_state_dict(json.loads((path / "scheduler.json").read_text(encoding="utf-8")))
    set_rng_state(load_file(str(path / "rng.safetensors")))
    return json.loads((path / "state.json").read_text(encoding="utf-8"))
