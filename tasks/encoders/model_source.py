"""Reading an encoder's model folder, local or on the hub (`ModelSource`): a transformers model
(config, weights, a fast tokenizer) or a sentence-transformers one, whose `modules.json` names
a Transformer module, a Pooling module and optionally Dense/Normalize/Dropout modules; the
layout is read here, sentence-transformers itself is not needed. torch and transformers are
imported only when a model is loaded."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.encoders.loading import load_auto_model
from tasks.encoders.pooling import ST_POOLING_MODES

if TYPE_CHECKING:
    import torch


class EncoderLoadError(ValueError):
    """The model named by an EncoderSpec cannot be loaded as an encoder; the message names it."""


# sentence-transformers pooling modes this module reproduces exactly, and their names here.
_ST_POOLING = {st: ours for ours, st in ST_POOLING_MODES.items()}
# Files of which a local directory must hold at least one to have a tokenizer at all:
# transformers otherwise builds an empty-vocabulary tokenizer from config.json alone.
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "sentencepiece.bpe.model",
    "spiece.model",
    "spm.model",
    "sentencepiece.model",
    "tokenizer.model",
)


@dataclass(frozen=True)
class ModelSource:
    """Where a model lives: a local directory, or a hub id read through the hub cache."""

    path: str
    local: bool

    @classmethod
    def resolve(cls, model: str) -> ModelSource:
        expanded = os.path.expanduser(model)
        if os.path.exists(expanded):
            if not os.path.isdir(expanded):
                raise EncoderLoadError(f"encoder model path {model!r} is a file, not a model directory")
            return cls(os.path.abspath(expanded), True)
        looks_local = os.path.isabs(expanded) or model.startswith((".", "~")) or model.count("/") > 1 or "\\" in model
        if looks_local:
            raise FileNotFoundError(f"encoder model directory does not exist: {model!r}")
        return cls(model, False)

    def describe(self, sub: str = "") -> str:
        where = str(Path(self.path, sub)) if (sub and self.local) else (f"{self.path}/{sub}" if sub else self.path)
        return f"{'directory' if self.local else 'hub model'} {where!r}"

    def file(self, relative: str) -> str | None:
        """Local path of a file of the model, or None when it has none."""
        if self.local:
            path = os.path.join(self.path, relative)
            return path if os.path.isfile(path) else None
        from transformers.utils import cached_file

        try:
            return cached_file(
                self.path,
                relative,
                _raise_exceptions_for_missing_entries=False,
                _raise_exceptions_for_connection_errors=False,
                _raise_exceptions_for_gated_repo=False,
            )
        except OSError:
            return None

    def has(self, relative: str) -> bool:
        return self.file(relative) is not None

    def read_json(self, relative: str) -> dict[str, Any]:
        path = self.file(relative)
        if path is None:
            raise EncoderLoadError(f"{self.describe()} lacks {relative}")
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, json.JSONDecodeError) as err:
            raise EncoderLoadError(f"cannot read {relative} of {self.describe()}: {err}") from err


def _module_kind(entry: dict[str, Any]) -> str:
    return str(entry.get("type", "")).rsplit(".", 1)[-1]


def read_sentence_transformers(source: ModelSource, read_pooling: bool) -> tuple[str, str | None, bool, list[tuple[str, str]]]:
    """From modules.json: (transformer subpath, pooling mode or None, lowercase, [(kind, subpath)] after pooling).

    The Pooling module's config is only read when `read_pooling` (the spec sets no pooling).
    """
    modules = source.read_json("modules.json")
    if not isinstance(modules, list) or not modules:
        raise EncoderLoadError(f"modules.json of {source.describe()} lists no modules")
    modules = sorted(modules, key=lambda m: m.get("idx", 0))
    if _module_kind(modules[0]) != "Transformer":
        raise EncoderLoadError(
            f"the first module of sentence-transformers {source.describe()} is {modules[0].get('type')!r}, not a Transformer"
        )
    transformer_path = str(modules[0].get("path", "")).strip("/")
    lowercase = False
    bert_config = source.file(_join(transformer_path, "sentence_bert_config.json"))
    if bert_config is not None:
        with open(bert_config, encoding="utf-8") as f:
            lowercase = bool(json.load(f).get("do_lower_case", False))

    pooling: str | None = None
    seen_pooling = False
    head: list[tuple[str, str]] = []
    for entry in modules[1:]:
        kind, path = _module_kind(entry), str(entry.get("path", "")).strip("/")
        if kind == "Pooling":
            if seen_pooling:
                raise EncoderLoadError(f"sentence-transformers {source.describe()} has two Pooling modules")
            seen_pooling = True
            if read_pooling:
                pooling = _st_pooling_mode(source, _join(path, "config.json"))
        elif kind in ("Dense", "Normalize"):
            if not seen_pooling:
                raise EncoderLoadError(f"sentence-transformers {source.describe()}: {kind} module before any Pooling module")
            head.append((kind, path))
        elif kind == "Dropout":
            continue  # identity at inference
        else:
            raise EncoderLoadError(
                f"sentence-transformers {source.describe()} has a {entry.get('type')!r} module; "
                "supported: Transformer, Pooling, Dense, Normalize, Dropout"
            )
    return transformer_path, pooling, lowercase, head


def _st_pooling_mode(source: ModelSource, config_path: str) -> str:
    config = source.read_json(config_path)
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        modes = [mode] if isinstance(mode, str) else list(mode)
    else:  # pre-v5 layout: one boolean per mode
        legacy = {
            "pooling_mode_cls_token": "cls",
            "pooling_mode_max_tokens": "max",
            "pooling_mode_mean_tokens": "mean",
            "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
            "pooling_mode_weightedmean_tokens": "weightedmean",
            "pooling_mode_lasttoken": "lasttoken",
        }
        modes = [mode for key, mode in legacy.items() if config.get(key)] or ["mean"]
    if len(modes) != 1 or modes[0] not in _ST_POOLING:
        raise EncoderLoadError(
            f"{config_path} of sentence-transformers {source.describe()} sets pooling {modes}; only one of "
            f"{sorted(_ST_POOLING)} is supported. Set EncoderSpec.pooling to override."
        )
    return _ST_POOLING[modes[0]]


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def load_tokenizer(source: ModelSource, sub: str, model_dir: str, kwargs: dict[str, Any], where: str) -> Any:
    import transformers

    if source.local and not any(os.path.isfile(os.path.join(model_dir, name)) for name in TOKENIZER_FILES):
        raise EncoderLoadError(
            f"{where} has no tokenizer files (one of {', '.join(TOKENIZER_FILES)}); a fast tokenizer is required"
        )
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, use_fast=True, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise EncoderLoadError(f"cannot load a fast tokenizer from {where}: {err}") from err
    if not getattr(tokenizer, "is_fast", False):
        raise EncoderLoadError(
            f"{where} has no fast tokenizer (got {type(tokenizer).__name__}); a fast tokenizer is required "
            "(save one with tokenizer.json, e.g. PreTrainedTokenizerFast.save_pretrained)"
        )
    return tokenizer


def load_model(model_dir: str, kwargs: dict[str, Any], where: str) -> Any:
    import torch

    # A checkpoint without pooler weights (E5, the offline base model) gets a randomly
    # initialised pooler from AutoModel: it is dropped, so "pooler" pooling is refused, not noise.
    try:
        return load_auto_model(model_dir, dtype=torch.float32, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise EncoderLoadError(f"cannot load a model from {where}: {err}") from err


def build_head(source: ModelSource, specs: list[tuple[str, str]], device: torch.device) -> tuple[list[Callable], int | None]:
    """Callables for sentence-transformers Dense/Normalize modules, and the output dim if a Dense sets it."""
    import torch

    head: list[Callable] = []
    dim: int | None = None
    for kind, path in specs:
        if kind == "Normalize":
            head.append(lambda v: torch.nn.functional.normalize(v, p=2, dim=-1))
            continue
        config = source.read_json(_join(path, "config.json"))
        if config.get("use_residual") or config.get("module_input_name", "sentence_embedding") != "sentence_embedding":
            raise EncoderLoadError(f"Dense module {path!r} of {source.describe()}: residual/custom-input Dense is not supported")
        activation = str(config.get("activation_function") or "torch.nn.modules.activation.Tanh").rsplit(".", 1)[-1]
        activations = {"Tanh": torch.tanh, "Identity": lambda x: x}
        if activation not in activations:
            raise EncoderLoadError(f"Dense module {path!r} of {source.describe()}: activation {activation!r} is not supported")
        linear = torch.nn.Linear(int(config["in_features"]), int(config["out_features"]), bias=bool(config.get("bias", True)))
        linear.load_state_dict(_load_dense_weights(source, path))
        linear.to(device).eval()
        act = activations[activation]
        head.append(lambda v, linear=linear, act=act: act(linear(v)))
        dim = int(config["out_features"])
    return head, dim


def _load_dense_weights(source: ModelSource, path: str) -> dict[str, Any]:
    import torch

    safetensors_file = source.file(_join(path, "model.safetensors"))
    if safetensors_file is not None:
        from safetensors.torch import load_file

        state = load_file(safetensors_file)
    else:
        bin_file = source.file(_join(path, "pytorch_model.bin"))
        if bin_file is None:
            raise EncoderLoadError(f"Dense module {path!r} of {source.describe()} has no model.safetensors or pytorch_model.bin")
        state = torch.load(bin_file, map_location="cpu", weights_only=True)
    return {k.removeprefix("linear."): v for k, v in state.items()}
