"""The language-ID vectors a model trained with `train.language_embedding = true` keeps beside its
weights: `language_embedding.safetensors` (one row per language) and `languages.json` (the FLORES
codes, in row order). transformers and sentence-transformers do not read them; the train stage
writes them (tasks/train/model_folder.py), the evaluate stage adds them as training did
(`Encoder.encode(..., embedding_offset=...)`), and export measures what dropping them costs.

One reader and one writer, so the three cannot disagree on the file names or the layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

LANGUAGE_EMBEDDING_FILE = "language_embedding.safetensors"
LANGUAGES_FILE = "languages.json"


class LanguageVectorsError(ValueError):
    """The language-vector files beside a model do not agree; the message names them."""


def has_language_vectors(model_dir: Path) -> bool:
    return (Path(model_dir) / LANGUAGE_EMBEDDING_FILE).is_file()


def write_language_vectors(model_dir: Path, weight: Any, langs: list[str]) -> None:
    """Save `weight` ([len(langs), hidden], a torch tensor or numpy array) and its language codes."""
    from safetensors.numpy import save_file

    array = weight.detach().cpu().numpy() if hasattr(weight, "detach") else np.asarray(weight)
    if array.ndim != 2 or array.shape[0] != len(langs):
        raise LanguageVectorsError(f"{array.shape[0] if array.ndim else 0} language vectors for {len(langs)} languages")
    save_file({"weight": np.ascontiguousarray(array, dtype=np.float32)}, str(Path(model_dir) / LANGUAGE_EMBEDDING_FILE))
    (Path(model_dir) / LANGUAGES_FILE).write_text(json.dumps(list(langs), indent=2) + "\n", encoding="utf-8")


def read_language_vectors(model_dir: Path) -> dict[str, np.ndarray]:
    """{FLORES code: float32 [hidden]} from a model folder, in training order; {} when it has none."""
    from safetensors.numpy import load_file

    path = Path(model_dir) / LANGUAGE_EMBEDDING_FILE
    if not path.is_file():
        return {}
    langs_path = Path(model_dir) / LANGUAGES_FILE
    langs = json.loads(langs_path.read_text(encoding="utf-8")) if langs_path.is_file() else None
    weight = load_file(str(path))["weight"]
    if not isinstance(langs, list) or len(langs) != weight.shape[0]:
        raise LanguageVectorsError(
            f"{path}: {weight.shape[0]} language vectors, but {langs_path} does not list that many languages"
        )
    return {str(lang): weight[i].astype(np.float32) for i, lang in enumerate(langs)}
