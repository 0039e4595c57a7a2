"""The translate_model stage: an NLLB-200 model as a CTranslate2 directory, converted once.

The artifact holds attached files only:

- ``ctranslate2/``: the converted model (``model.bin``, ``config.json``, vocabulary), in the
  chosen quantisation;
- ``tokenizer/``: the model's tokenizer (``tokenizer.json`` is what the translate stage reads);
- ``model.json``: the model's name, source, quantisation and the NLLB language codes its
  vocabulary holds (the translate stage checks its targets against them before computing).

Converting the 3.3B model takes minutes and ~13 GB of memory; keying the artifact by model
and quantisation makes it happen once. Checkpoints stored as pickles (``pytorch_model.bin``)
are refused unless `allow_pickle_weights` is set (they are then read by torch's
``weights_only`` loader); the artifact itself never holds a pickle.
"""

from __future__ import annotations

import json
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage, folder_fingerprint
from tasks.tiny_models import build_tiny_nllb
from tasks.translate.config import DEFAULT_QUANTIZATION, TranslateModelConfig
from tasks.translate.languages import NLLB_LANGUAGE_CODES

CODE_VERSION = "1"
MODEL_INFO = "model.json"
CT2_DIR = "ctranslate2"
TOKENIZER_DIR = "tokenizer"
CHECKPOINT_SUFFIXES = (".json", ".safetensors", ".model", ".txt")
CT2_FILES = (
    "model.bin",
    "config.json",
    "shared_vocabulary.json",
    "shared_vocabulary.txt",
    "source_vocabulary.json",
    "target_vocabulary.json",
    "source_vocabulary.txt",
    "target_vocabulary.txt",
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "sentencepiece.bpe.model")


class TranslationModelError(ValueError):
    """A model that cannot be imported; the message names the path or id."""


def plan_translate_model_shards(config: TranslateModelConfig, inputs: Inputs) -> list[ShardSpec]:
    return [ShardSpec("model", {}, f"import and convert {config.display_name}")]


def _check_checkpoint(directory: Path, allow_pickle: bool) -> None:
    if not (directory / "config.json").is_file():
        raise TranslationModelError(f"{directory}: no config.json; not a transformers checkpoint")
    if (directory / "model.bin").is_file() and not any(directory.glob("*.safetensors")):
        raise TranslationModelError(f"{directory}: looks like a CTranslate2 model (model.bin); use source = 'ctranslate2'")
    if not any(directory.glob("*.safetensors")):
        pickles = sorted(p.name for p in directory.glob("*.bin"))
        if not pickles:
            raise TranslationModelError(f"{directory}: no model weights (*.safetensors)")
        if not allow_pickle:
            raise TranslationModelError(
                f"{directory}: only pickled weights ({', '.join(pickles)}); set allow_pickle_weights = true to "
                "convert them (read by torch's weights_only loader), or use a revision with safetensors"
            )


def _hub_snapshot(config: TranslateModelConfig) -> Path:
    from huggingface_hub import snapshot_download

    patterns = [f"*{suffix}" for suffix in CHECKPOINT_SUFFIXES]
    snapshot = Path(snapshot_download(repo_id=config.model or "", revision=config.revision, allow_patterns=patterns))
    if not any(snapshot.glob("*.safetensors")) and config.allow_pickle_weights:
        snapshot = Path(
            snapshot_download(repo_id=config.model or "", revision=config.revision, allow_patterns=[*patterns, "*.bin"])
        )
    return snapshot


def convert_checkpoint(checkpoint: Path, ct2_dir: Path, quantization: str, low_cpu_mem_usage: bool = True) -> None:
    """Convert a transformers NLLB checkpoint to CTranslate2 (weights in `quantization`)."""
    from ctranslate2.converters import TransformersConverter

    converter = TransformersConverter(str(checkpoint), low_cpu_mem_usage=low_cpu_mem_usage)
    converter.convert(str(ct2_dir), quantization=quantization, force=True)


def save_tokenizer(source: str | Path, target: Path) -> None:
    """Save the tokenizer of a checkpoint (hub id or directory) with its tokenizer.json."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(source))
    tokenizer.save_pretrained(str(target))
    if not (target / "tokenizer.json").is_file():
        raise TranslationModelError(f"{source}: the tokenizer has no fast (tokenizers) form; tokenizer.json is needed")


def _copy_files(source: Path, target: Path, names: tuple[str, ...]) -> list[str]:
    target.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in names:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
            copied.append(name)
    return copied


def model_vocabulary(ct2_dir: Path) -> list[str]:
    """The tokens of a CTranslate2 model's (shared or target) vocabulary."""
    for name in ("shared_vocabulary.json", "target_vocabulary.json"):
        if (ct2_dir / name).is_file():
            return json.loads((ct2_dir / name).read_text(encoding="utf-8"))
    for name in ("shared_vocabulary.txt", "target_vocabulary.txt"):
        if (ct2_dir / name).is_file():
            return (ct2_dir / name).read_text(encoding="utf-8").split("\n")
    raise TranslationModelError(f"{ct2_dir}: no vocabulary file")


def build_translate_model_shard(
    config: TranslateModelConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext
) -> list[Any]:
    out = context.workdir / "out"
    ct2_dir, tokenizer_dir = out / CT2_DIR, out / TOKENIZER_DIR
    quantization = config.quantization or DEFAULT_QUANTIZATION
    if config.source == "ctranslate2":
        source = Path(config.model or "").expanduser()
        if not (source / "model.bin").is_file():
            raise TranslationModelError(f"{source}: no model.bin; not a CTranslate2 model directory")
        _copy_files(source, ct2_dir, CT2_FILES)
        if config.tokenizer:
            save_tokenizer(
                Path(config.tokenizer).expanduser() if Path(config.tokenizer).expanduser().is_dir() else config.tokenizer,
                tokenizer_dir,
            )
        elif (source / "tokenizer.json").is_file():
            _copy_files(source, tokenizer_dir, TOKENIZER_FILES)
        else:
            raise TranslationModelError(
                f"{source}: no tokenizer.json; set translate_model.tokenizer to the model's hub id or directory"
            )
        ct2_config = (
            json.loads((ct2_dir / "config.json").read_text(encoding="utf-8")) if (ct2_dir / "config.json").is_file() else {}
        )
        quantization = ct2_config.get("quantization", "unknown")
    else:
        if config.source == "tiny_random":
            checkpoint = build_tiny_nllb(context.workdir / "checkpoint", config.tiny_spec)
        elif config.source == "local":
            checkpoint = Path(config.model or "").expanduser()
            if not checkpoint.is_dir():
                raise TranslationModelError(f"model directory not found: {checkpoint}")
        else:
            checkpoint = _hub_snapshot(config)
        _check_checkpoint(checkpoint, config.allow_pickle_weights)
        convert_checkpoint(checkpoint, ct2_dir, quantization, config.low_cpu_mem_usage)
        save_tokenizer(checkpoint, tokenizer_dir)

    vocabulary = set(model_vocabulary(ct2_dir))
    languages = [code for code in NLLB_LANGUAGE_CODES if code in vocabulary]
    if not languages:
        raise TranslationModelError(
            f"{config.model or config.source}: the vocabulary holds no NLLB language code; not an NLLB model"
        )
    info = {
        "name": config.display_name,
        "source": config.source,
        "model": config.model,
        "revision": config.revision,
        "quantization": quantization,
        "languages": languages,
        "vocabulary_size": len(vocabulary),
        "ctranslate2": version("ctranslate2"),
    }
    (out / MODEL_INFO).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    context.metrics = {
        "name": config.display_name,
        "quantization": quantization,
        "languages": len(languages),
        "model_bytes": (ct2_dir / "model.bin").stat().st_size,
    }
    context.attach_dir(out)
    return []


def fingerprint_translate_model(config: TranslateModelConfig) -> dict[str, Any]:
    prints: dict[str, Any] = {"ctranslate2": version("ctranslate2")}
    if config.source != "ctranslate2":
        prints["transformers"] = version("transformers")
    if config.source == "tiny_random":
        prints.update(tokenizers=version("tokenizers"), babel=version("babel"), torch=version("torch"))
    elif config.source == "hub":
        prints["hub"] = {"model": config.model, "revision": config.revision}
    else:
        root = Path(config.model or "").expanduser()
        if not root.is_dir():
            raise TranslationModelError(f"model directory not found: {root}")
        prints["files"] = folder_fingerprint(root, (p for p in root.iterdir() if p.is_file()))
        if config.tokenizer:
            tok = Path(config.tokenizer).expanduser()
            prints["tokenizer"] = (
                folder_fingerprint(tok, (p for p in tok.iterdir() if p.is_file())) if tok.is_dir() else config.tokenizer
            )
    return prints


TRANSLATE_MODEL_STAGE: Stage[TranslateModelConfig] = Stage(
    name="translate_model",
    code_version=CODE_VERSION,
    config_model=TranslateModelConfig,
    schema=None,
    plan_shards=plan_translate_model_shards,
    build_shard=build_translate_model_shard,
    fingerprint_sources=fingerprint_translate_model,
    description="import an NLLB-200 model and convert it to CTranslate2 once per model and quantisation",
)
