"""Checkpoints for exact resume: safetensors for tensors, JSON for everything else, no pickle.

A checkpoint is a folder `step-{n:08d}` holding
  model.safetensors       every trainable module's state (encoder, heads, language embedding)
  optimizer.safetensors   AdamW moments and step counters;  optimizer.json  its param groups
  scheduler.json          the LR scheduler's state
  rng.safetensors         torch CPU (and CUDA) generator states
  state.json              step, data position, best dev score, training curves so far
It is written into a temporary folder and renamed into place, then `latest.json` is replaced
atomically; older step folders are removed after that. A run killed at any moment leaves the
previous checkpoint whole. `best-model.safetensors` (the best dev weights so far) and
`tensorboard/` sit beside the step folders.

With `checkpoint_location = "store"` the folder is also mirrored under the artifact root
(StoreCheckpoints), in `{root}/_checkpoints/train/{artifact key}/`, with the same layout: each
new checkpoint's files are uploaded, then `latest.json`, then older step folders are removed
there too, so a machine that dies mid-upload leaves the previous remote checkpoint whole, and
another machine resumes from it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file, save_file

from storage.errors import explain
from tasks.train.reporters import TENSORBOARD_DIR

if TYPE_CHECKING:
    from storage.checkpoint_files import CheckpointFiles

LATEST = "latest.json"
BEST_MODEL = "best-model.safetensors"
UPLOAD_STAGING = ".upload"
log = logging.getLogger(__name__)


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


def _step_of(name: str) -> int:
    return int(name.removeprefix("step-"))


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (the trainer replaces or deletes files, never rewrites them in place), or a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


class StoreCheckpoints:
    """The local checkpoint folder, mirrored into the artifact store's checkpoint files.

    `restore()` (before training) downloads the store's checkpoint when it is later than the
    local one (none here: a fresh machine). `upload(step folder)` (the trainer's
    `on_checkpoint`) snapshots the checkpoint with hard links and uploads it on a background
    thread while training goes on: the step folder's files, `best-model.safetensors` and the
    TensorBoard files when they changed, `latest.json` last, then older remote step folders
    are removed. The next `upload` and `close()` wait for the one before. A failed upload is a
    warning (training goes on with its local checkpoints; the next checkpoint uploads whole).
    """

    def __init__(self, files: CheckpointFiles, local: Path, *, background: bool = True) -> None:
        self.files, self.local, self.background = files, local, background
        self._thread: threading.Thread | None = None
        self._uploaded: dict[str, tuple[int, int, int]] = {}  # local file -> stamp at its last upload
        self.upload_seconds: list[float] = []  # per checkpoint, on the uploading thread
        self.stall_seconds: list[float] = []  # per checkpoint, on the trainer's (waiting + snapshot)
        self.failures = 0

    @property
    def uri(self) -> str:
        return self.files.uri

    def restore(self) -> int | None:
        """Download the store's checkpoint when it is later than the local one; returns its step."""
        blob = self.files.read(LATEST)
        if blob is None:
            return None
        try:
            pointer = json.loads(blob)
            name, step = str(pointer["checkpoint"]), int(pointer["step"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{self.uri}/{LATEST}: not a checkpoint pointer ({exc}); delete the folder to start over") from None
        here = latest_checkpoint(self.local)
        if here is not None and _step_of(here.name) >= step:
            return None
        remote = self.files.names(name)
        if f"{name}/state.json" not in remote:
            log.warning("%s/%s names %s, which is incomplete there; not resuming from it", self.uri, LATEST, name)
            return None
        self.local.mkdir(parents=True, exist_ok=True)
        tmp = self.local / f".tmp-{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        for path in remote:
            self.files.get(path, tmp / path.removeprefix(f"{name}/"))
        final = self.local / name
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        extras = [n for n in self.files.names() if n == BEST_MODEL or n.startswith(f"{TENSORBOARD_DIR}/")]
        if BEST_MODEL not in extras:  # this machine's own best weights belong to another state
            (self.local / BEST_MODEL).unlink(missing_ok=True)
        for path in extras:
            self.files.get(path, self.local / path)
            self._uploaded[path] = _stamp(self.local / path)
        write_json_atomic(self.local / LATEST, {"checkpoint": name, "step": step})
        for old in self.local.glob("step-*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        log.info("restored the checkpoint at step %d from %s", step, self.uri)
        return step

    def upload(self, checkpoint: Path) -> None:
        started = time.perf_counter()
        self._wait()
        staging = self.local / UPLOAD_STAGING
        shutil.rmtree(staging, ignore_errors=True)
        items: list[tuple[Path, str]] = []
        for path in sorted(checkpoint.iterdir()):
            name = f"{checkpoint.name}/{path.name}"
            _link_or_copy(path, staging / name)
            items.append((staging / name, name))
        stamps: dict[str, tuple[int, int, int]] = {}
        best = self.local / BEST_MODEL
        if best.exists() and self._uploaded.get(BEST_MODEL) != (stamp := _stamp(best)):
            _link_or_copy(best, staging / BEST_MODEL)
            items.append((staging / BEST_MODEL, BEST_MODEL))
            stamps[BEST_MODEL] = stamp
        logs = self.local / TENSORBOARD_DIR
        for path in sorted(p for p in logs.rglob("*") if p.is_file()) if logs.is_dir() else []:
            name = path.relative_to(self.local).as_posix()
            if self._uploaded.get(name) != (stamp := _stamp(path)):
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, staging / name)  # event files grow in place: a copy, not a link
                items.append((staging / name, name))
                stamps[name] = stamp
        pointer = {"checkpoint": checkpoint.name, "step": _step_of(checkpoint.name)}
        if self.background:
            self._thread = threading.Thread(
                target=self._send, args=(items, pointer, stamps, staging), name="checkpoint-upload", daemon=True
            )
            self._thread.start()
        else:
            self._send(items, pointer, stamps, staging)
        self.stall_seconds.append(time.perf_counter() - started)

    def _send(
        self, items: list[tuple[Path, str]], pointer: dict[str, Any], stamps: dict[str, tuple[int, int, int]], staging: Path
    ) -> None:
        started = time.perf_counter()
        try:
            for path, name in items:
                self.files.put(path, name)
            self.files.write(LATEST, json.dumps(pointer, indent=1, sort_keys=True).encode("utf-8"))
            remote_steps = {n.split("/", 1)[0] for n in self.files.names() if n.startswith("step-")}
            for old in sorted(remote_steps - {pointer["checkpoint"]}):
                self.files.remove(old)
            self._uploaded.update(stamps)
            self.upload_seconds.append(time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - training goes on; the next checkpoint uploads whole
            self.failures += 1
            reason = explain(exc, self.files.store.root_uri) or f"{type(exc).__name__}: {exc}"
            log.warning(
                "could not upload the checkpoint at step %d to %s (%s); training goes on, the next checkpoint is uploaded whole",
                pointer["step"], self.uri, reason,
            )  # fmt: skip
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        """Wait for the upload under way (the last checkpoint is in the store when this returns,
        unless its upload failed, which was logged)."""
        self._wait()
