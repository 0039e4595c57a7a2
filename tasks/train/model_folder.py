"""The train artifact's files: a model directory, the training curves (Parquet + PNG), metrics.

`model/` loads with `transformers.AutoModel` and with `sentence_transformers.SentenceTransformer`
(Transformer -> Pooling with the training pooling -> Normalize), so the evaluate stage and any
user read it like the base model. When training used language-ID embeddings they are saved
beside it (`language_embedding.safetensors` + `languages.json`); transformers and
sentence-transformers do not apply them.

`save_sentence_transformer` writes the folder a user publishes (`xlembed export`, see
tasks/publish/model.py) with sentence-transformers' own saving, so the folder records the library
versions, `similarity_fn_name` and the training prefix as the default prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.encoders.language_vectors import write_language_vectors
from tasks.encoders.loading import quiet_transformers
from tasks.encoders.pooling import sentence_transformers_mode
from tasks.reporting.curves import training_curves_figure

CURVES_SCHEMA = pa.schema(
    [
        pa.field("step", pa.int64(), nullable=False),
        pa.field("metric", pa.string(), nullable=False),  # "loss", "loss/<objective>", "lr", "dev_accuracy", ...
        pa.field("value", pa.float64(), nullable=False),
    ]
)

_ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def save_model(
    encoder: Any, tokenizer: Any, out_dir: Path, *, pooling: str, max_length: int, langs: list[str], card: str
) -> Path:
    """Write `encoder` (a DualEncoder) as a transformers + sentence-transformers directory."""
    mode = sentence_transformers_mode(pooling)
    out_dir.mkdir(parents=True, exist_ok=True)

    with quiet_transformers():  # no "Writing model shards" bar in the run's output
        encoder.transformer.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(out_dir))
    for stray in out_dir.glob("*.bin"):
        stray.unlink()
    set_tokenizer_max_length(out_dir, max_length)
    write_placeholder_pooler(out_dir)
    dim = encoder.hidden_size
    _write_json(out_dir / "modules.json", _ST_MODULES)
    _write_json(out_dir / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    _write_json(
        out_dir / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": dim,
            "pooling_mode_cls_token": mode == "cls",
            "pooling_mode_mean_tokens": mode == "mean",
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    (out_dir / "2_Normalize").mkdir(exist_ok=True)
    _write_json(
        out_dir / "config_sentence_transformers.json",
        {"model_type": "SentenceTransformer", "prompts": {}, "default_prompt_name": None},
    )
    if encoder.lang_embedding is not None:
        write_language_vectors(out_dir, encoder.lang_embedding.weight, langs)
    (out_dir / "README.md").write_text(card, encoding="utf-8")
    return out_dir


# Names under which the training prefix is stored as a prompt: `encode` (default prompt),
# `encode_query` ("query") and `encode_document` ("document") all apply it, as training did.
PROMPT_NAMES = ("query", "document")


def _is_pooler_key(key: str) -> bool:
    return key.startswith("pooler.") or ".pooler." in key


def has_pooler_weights(model_dir: Path) -> bool:
    """Whether the transformers checkpoint in `model_dir` holds trained pooler weights (the all-zero
    placeholder of `write_placeholder_pooler` is none)."""
    from safetensors import safe_open

    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            if any(f.get_tensor(key).any() for key in filter(_is_pooler_key, f.keys())):
                return True
    return False


def set_tokenizer_max_length(model_dir: Path, max_length: int) -> None:
    """Make the saved tokenizer.json truncate at `max_length`, as the folder's encoder does.

    A fast tokenizer saves the truncation of its last call into tokenizer.json (in the train
    artifact: the training length), and plain `tokenizers` applies it on load. tokenizer_config's
    `model_max_length` is left as it is: sentence-transformers sets it in an exported folder, and
    in the train artifact it must not cap the evaluate stage's own max_length."""
    tokenizer_json = model_dir / "tokenizer.json"
    if tokenizer_json.is_file():
        spec = json.loads(tokenizer_json.read_text(encoding="utf-8"))
        truncation = spec.get("truncation") or {"direction": "Right", "strategy": "LongestFirst", "stride": 0}
        spec["truncation"] = {**truncation, "max_length": max_length}
        tokenizer_json.write_text(json.dumps(spec, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def write_placeholder_pooler(model_dir: Path) -> list[str]:
    """Add all-zero weights for a pooler that the model's class builds but the checkpoint lacks.

    E5 has no trained pooler; without its weights every `AutoModel.from_pretrained` of the folder
    prints transformers' "MISSING ... newly initialized" report and fills the pooler with random
    numbers. Zeros make `pooler_output` plainly empty (tanh(0) = 0) and the load silent; xlembed's
    loader treats an all-zero pooler as none, so "pooler" pooling stays refused. Returns the keys
    written (none when the checkpoint has a pooler or the class builds none)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(str(model_dir))
    with torch.device("meta"):
        skeleton = AutoModel.from_config(config)
    wanted = {k: v for k, v in skeleton.state_dict().items() if _is_pooler_key(k)}
    if not wanted:
        return []
    index_path = model_dir / "model.safetensors.index.json"
    if index_path.is_file():
        index = json.loads(index_path.read_text(encoding="utf-8"))
        present = set(index["weight_map"])
    else:
        from safetensors import safe_open

        with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
            present = set(f.keys())
    missing = {k: torch.zeros(v.shape, dtype=v.dtype) for k, v in wanted.items() if k not in present}
    if not missing:
        return []
    if index_path.is_file():
        save_file(missing, str(model_dir / "model-pooler.safetensors"), metadata={"format": "pt"})
        index["weight_map"].update({k: "model-pooler.safetensors" for k in missing})
        index_path.write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    else:
        weights = load_file(str(model_dir / "model.safetensors"))
        weights.update({k: v.to(next(iter(weights.values())).dtype) for k, v in missing.items()})
        save_file(weights, str(model_dir / "model.safetensors"), metadata={"format": "pt"})
    return sorted(missing)


def save_sentence_transformer(model_dir: Path, out_dir: Path, *, pooling: str, max_seq_length: int, prefix: str) -> Path:
    """Write the transformers model in `model_dir` as a sentence-transformers folder `out_dir`
    (Transformer -> Pooling -> Normalize), saved by sentence-transformers itself.

    `prefix` (what training prepended to every text) becomes the "query" and "document" prompts
    and the default prompt, so `SentenceTransformer(out_dir).encode(text)` encodes `prefix + text`
    as the project's encoder does; the Pooling module includes the prompt's tokens, as training
    did. The similarity function is cosine (the vectors are L2-normalised). No README is written.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    mode = sentence_transformers_mode(pooling)  # "pooler" is refused: a Pooling module cannot express it
    pooler = has_pooler_weights(model_dir)
    with quiet_transformers():
        transformer = Transformer(str(model_dir), max_seq_length=max_seq_length)
        if not pooler and getattr(transformer.model, "pooler", None) is not None:
            transformer.model.pooler = None  # randomly initialised on load: not saved as if trained
        dim = transformer.get_embedding_dimension()
        prompts = {name: prefix for name in PROMPT_NAMES} if prefix else None
        model = SentenceTransformer(
            modules=[transformer, Pooling(dim, pooling_mode=mode, include_prompt=True), Normalize()],
            prompts=prompts,
            default_prompt_name=PROMPT_NAMES[0] if prefix else None,
            similarity_fn_name="cosine",
            device="cpu",
        )
        model.save(str(out_dir), create_model_card=False)
    set_tokenizer_max_length(out_dir, max_seq_length)
    write_placeholder_pooler(out_dir)
    return out_dir


def curves_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"step": int(r["step"]), "metric": str(r["metric"]), "value": float(r["value"])} for r in rows], schema=CURVES_SCHEMA
    )


def write_curves(rows: list[dict[str, Any]], parquet_path: Path, png_path: Path, *, title: str = "training curves") -> None:
    table = curves_table(rows)
    pq.write_table(table, str(parquet_path))
    plot_curves(table, png_path, title=title)


def plot_curves(table: pa.Table, png_path: Path, *, title: str) -> None:

    png_path.write_bytes(training_curves_figure(table, title))
