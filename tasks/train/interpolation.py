"""WiSE-FT (Wortsman et al. 2022): exported weights alpha * trained + (1 - alpha) * base.

Interpolating is arithmetic on two sets of weights that already exist, so a train config
whose `interpolation` is below 1 does not train: the train stage builds (or finds cached) the
artifact of the same config at `interpolation = 1.0`, the trained weights, and derives this
artifact from it and the base model's weights (tasks/train/stage.py). A sweep over alphas
trains once and costs evaluations only; each alpha is still its own keyed artifact.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tasks.train.model import load_transformer

# The transformers checkpoint files of a model folder (one file, or shards of one); the
# language-ID vectors live in a file of their own, which the base has no counterpart of.
WEIGHT_FILES = "model*.safetensors"


def interpolate_tensor(trained: torch.Tensor, base: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * trained + (1 - alpha) * base, in the trained tensor's dtype (two products, one sum:
    the formula as written, so a reader can recompute it bit for bit)."""
    base = base.to(trained.dtype)
    return alpha * trained + (1.0 - alpha) * base


def interpolate_state(trained: dict[str, torch.Tensor], base: dict[str, torch.Tensor], alpha: float) -> dict[str, torch.Tensor]:
    """Every floating tensor the base has in the same shape is interpolated; the others keep
    their trained values (the language-ID embedding, integer buffers)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in trained.items():
        start = base.get(name)
        if start is not None and tensor.is_floating_point() and start.shape == tensor.shape:
            out[name] = interpolate_tensor(tensor, start, alpha).contiguous()
        else:
            out[name] = tensor
    return out


def interpolate_model_folder(model_dir: Path, base_state: dict[str, torch.Tensor], alpha: float) -> None:
    """Rewrite the checkpoint files of `model_dir` (a copy of the trained model folder) in place
    with the interpolated weights."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    files = sorted(model_dir.glob(WEIGHT_FILES))
    if not files:
        raise FileNotFoundError(f"{model_dir} holds no {WEIGHT_FILES} to interpolate")
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata()
            trained = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 - safe_open has no __iter__
        mixed = interpolate_state(trained, base_state, alpha)
        tmp = path.with_name(path.name + ".tmp")
        save_file(mixed, str(tmp), metadata=metadata)
        tmp.replace(path)


def base_weights(base_dir: Path) -> dict[str, torch.Tensor]:
    """The base model's weights by the names its transformers checkpoint uses (the model is
    loaded as training loads it, float32, so a quantised or sharded base reads the same)."""

    return load_transformer(base_dir).state_dict()
