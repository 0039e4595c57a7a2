"""A small pipeline driver for the fault tests: runs stages in order with `tasks.stage.run_stage`,
in its own process, and can SIGKILL itself at a chosen storage event.

    python -m tests.reliability.driver SPEC.json

SPEC: {"root": ..., "stages": [...names in order...], "configs": {name: section},
       "registry": "module:ATTR" (optional, else flows.stages),
       "kill": {"stage": name, "event": N} (optional),
       "pipeline": name (optional: use and move refs/{pipeline}/*, as `xlembed run` does),
       "force": [names] (optional: rebuild these beside their current version, as `--force`),
       "pause": {"stage": name, "release": PATH} (optional: after that stage committed, before its
                ref moves, print `PAUSED <stage> <key>` and wait until PATH exists),
       "transfer": {"source": ROOT, "destination": ROOT} (optional: instead of stages, copy every
                artifact of source to destination as `artifacts pull/push` does; its events
                count as stage "transfer")}

Events are the store's writes, counted per stage: a part file written to (its temporary
file growing), a part file closed, an object about to be put in place, one put in place, and
`fsync` of a temporary record (written whole but not yet renamed), and for `train` its
durable checkpoints outside the store (a checkpoint folder or the best model about to be
written, written and renamed, `latest.json` replaced): kills land mid-training. At the chosen event the
process sends itself SIGKILL: no `finally`, no atexit, exactly what a crash or an OOM kill leaves.
The driver prints `STAGE <name> START`, `STAGE <name> DONE <key>` and at the end
`EVENTS {json}` (events per stage), each flushed at once, for the parent to follow.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

_state: dict[str, Any] = {"stage": None, "counts": {}, "kill": None, "muted": False}


def event(kind: str) -> None:
    stage = _state["stage"]
    if stage is None:
        return
    counts = _state["counts"]
    counts[stage] = counts.get(stage, 0) + 1
    kill = _state["kill"]
    if kill and kill["stage"] == stage and counts[stage] == kill["event"]:
        print(f"KILL {stage} {counts[stage]} {kind}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def install_hooks(stages: list[str] | tuple[str, ...] = ()) -> None:
    """Wrap the store's write paths (and train's checkpoint writes) so that each one is a numbered event."""
    import storage.store as store_module
    from storage.backends import LocalFiles, ObjectStoreFiles

    part = store_module._PartWriter

    def around(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if _state["muted"]:
                return original(*args, **kwargs)
            event(f"before-{label}")
            result = original(*args, **kwargs)
            event(f"after-{label}")
            return result

        setattr(owner, name, wrapped)

    def muted(owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            _state["muted"] = True
            try:
                return original(*args, **kwargs)
            finally:
                _state["muted"] = False

        setattr(owner, name, wrapped)

    # the store writes every object through its backend (`store.backend`); a ref's compare-and-swap
    # writes through `write_object` inside `write_if_unchanged`, which is not one of the events
    for backend in (LocalFiles, ObjectStoreFiles):
        around(backend, "write_object", "write-record")
        around(backend, "copy_local_file", "put-file")
        around(backend, "move_local_file", "place-part")
        muted(backend, "write_if_unchanged")
    around(part, "write", "part-write")
    original_fsync = os.fsync

    def fsync(fd: int) -> None:  # a record's temp file is complete but not yet renamed
        original_fsync(fd)
        event("fsync-temp")

    os.fsync = fsync
    if "train" in stages:  # the trainer calls these through the module: `ckpt.save_checkpoint(...)`
        import tasks.train.checkpoint as checkpoint

        around(checkpoint, "save_checkpoint", "checkpoint")
        around(checkpoint, "save_tensors_atomic", "best-model")
        around(checkpoint, "write_json_atomic", "checkpoint-pointer")


def install_pause(pause: dict[str, Any]) -> None:
    """Hold the build between its commit and its ref move (where gc once raced it)."""
    import time

    import storage.refs as refs_module

    original = refs_module.set_ref

    def set_ref(store: Any, pipeline: str, stage: str, key: str, *args: Any, **kwargs: Any) -> Any:
        if stage == pause["stage"] and store.is_committed(stage, key):
            print(f"PAUSED {stage} {key}", flush=True)
            while not Path(pause["release"]).exists():
                time.sleep(0.05)
        return original(store, pipeline, stage, key, *args, **kwargs)

    # callers bind `set_ref` at import (`from storage.refs import set_ref`): replace it in the
    # module and in every module already imported that holds it
    refs_module.set_ref = set_ref
    for module in list(sys.modules.values()):
        if getattr(module, "set_ref", None) is original:
            module.set_ref = set_ref  # type: ignore[attr-defined]


def transfer(spec: dict[str, Any]) -> None:
    from storage import ArtifactStore
    from storage.transfer import copy_artifact

    source, destination = ArtifactStore(spec["source"]), ArtifactStore(spec["destination"])
    _state["stage"] = "transfer"
    for manifest in source.list_manifests():
        result = copy_artifact(source, destination, manifest.stage, manifest.key)
        print(f"COPIED {manifest.stage} {manifest.key} {result.files}", flush=True)
    _state["stage"] = None


def registry(spec: dict[str, Any]) -> dict[str, Any]:
    from flows.stages import stage_registry

    if spec.get("registry"):
        import importlib

        module, _, attr = spec["registry"].partition(":")
        return stage_registry(tuple(getattr(importlib.import_module(module), attr)))
    return stage_registry()


def run(spec: dict[str, Any]) -> dict[str, str]:
    from storage import ArtifactStore
    from tasks.stage import run_stage

    stages = registry(spec)
    store = ArtifactStore(spec["root"])
    keys: dict[str, str] = {}
    for name in spec["stages"]:
        stage = stages[name]
        config = stage.config_model.model_validate(spec["configs"].get(name, {}))
        input_keys = {n: keys[n] for n in stage.input_names(keys)}
        print(f"STAGE {name} START", flush=True)
        _state["stage"] = name
        ref, _ = run_stage(store, stage, config, input_keys, force=name in spec.get("force", ()), pipeline=spec.get("pipeline"))
        _state["stage"] = None
        keys[name] = ref.key
        print(f"STAGE {name} DONE {ref.key}", flush=True)
    return keys


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    _state["kill"] = spec.get("kill")
    install_hooks(spec["stages"])
    if spec.get("pause"):
        install_pause(spec["pause"])
    print("READY", flush=True)
    if spec.get("transfer"):
        transfer(spec["transfer"])
        print("EVENTS " + json.dumps(_state["counts"]), flush=True)
        return 0
    keys = run(spec)
    print("EVENTS " + json.dumps(_state["counts"]), flush=True)
    print("KEYS " + json.dumps(keys), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
