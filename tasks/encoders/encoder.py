"""The one sentence-encoder interface used by the evaluate, align and train stages.

    spec = EncoderSpec(model="intfloat/multilingual-e5-small", prefix="query: ")
    enc = Encoder.load(spec)
    vectors = enc.encode(texts)            # float32 [n, dim], L2-normalised, input order
    vectors = enc.encode(texts, embedding_offset=v)   # v added to every token embedding (a language vector)
    tokens = enc.token_embeddings(texts)   # per text: float32 [tokens, hidden], no special tokens

`EncoderSpec.model` is a hub id or a local directory holding either a transformers model
(config + weights + tokenizer) or a sentence-transformers model (a `modules.json` naming a
Transformer module, a Pooling module and optionally Dense/Normalize/Dropout modules).
sentence-transformers itself is not needed: its directory layout is read here.

Pooling (`EncoderSpec.pooling`), named as in sentence-transformers (tasks/encoders/pooling.py):
  "mean"               attention-masked mean over all tokens, special tokens included
  "cls"                the first token's last hidden state
  "pooler"             the model's pooler output; loading a model without trained pooler
                       weights with it is an EncoderLoadError
  None (default)       "from the model": the sentence-transformers Pooling config when the
                       directory has one, else "mean"
An explicit pooling always wins over the model's own config. A sentence-transformers Dense
head is applied after pooling whatever the pooling. Every vector is L2-normalised at the end.
The old name "cls_before_pooler" is refused with its new name ("cls").

Inputs are tokenised with the model's fast tokenizer (required), truncated to `max_length`
tokens (capped at the tokenizer's `model_max_length`), sorted by tokenised length, padded
per batch and run under `torch.inference_mode()` in `EncoderSpec.precision`
(tasks/encoders/precision.py: fp32 with TF32 off by default, or bf16 autocast on any device);
outputs come back in input order. Batch size and device change speed, not results (up to
float noise), so `EncoderSpec.keyed()` leaves them out of cache keys; a precision other than
fp32 is keyed.

Importing this module does not import torch or transformers; `Encoder.load` does.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tasks.encoders.model_source import (
    EncoderLoadError,
    ModelSource,
    build_head,
    load_model,
    load_tokenizer,
    read_sentence_transformers,
)
from tasks.encoders.pooling import (
    Pooling,
    PoolingError,
    check_pooling,
    embed,
    require_pooler,
    warn_cls_with_pooler,
)
from tasks.encoders.precision import Precision, check_precision, compute_precision

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

# Texts tokenised, length-sorted and restored together; bounds memory for long inputs.
SORT_CHUNK = 32_768


@dataclass(frozen=True)
class EncoderSpec:
    """What a config holds to name an encoder. JSON-able: `to_dict()` / `from_dict()`.

    model              hub id or local directory (transformers or sentence-transformers layout)
    pooling            see the module docstring; None = from the model's config, else "mean"
    prefix             prepended to every text (e.g. "query: " for E5); end it with a separator
    max_length         truncation length in tokens, special tokens included
    batch_size         texts per forward pass
    device             None = "cuda" when available, else "cpu"
    trust_remote_code  passed to transformers as given; never turned on implicitly
    precision          "fp32" (default) or "bf16" (tasks/encoders/precision.py)
    """

    model: str
    pooling: Pooling | None = None
    prefix: str = ""
    max_length: int = 128
    batch_size: int = 64
    device: str | None = None
    trust_remote_code: bool = False
    precision: Precision = "fp32"

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"EncoderSpec.model must be a non-empty string, got {self.model!r}")
        if self.pooling is not None:
            check_pooling(self.pooling, "EncoderSpec.pooling")
        if not isinstance(self.prefix, str):
            raise ValueError(f"EncoderSpec.prefix must be a string, got {self.prefix!r}")
        for name in ("max_length", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"EncoderSpec.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.trust_remote_code, bool):
            raise ValueError(f"EncoderSpec.trust_remote_code must be a bool, got {self.trust_remote_code!r}")
        check_precision(self.precision, "EncoderSpec.precision")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderSpec:
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown EncoderSpec keys: {sorted(unknown)}")
        return cls(**data)

    def keyed(self) -> dict[str, Any]:
        """The fields that can change the vectors (for cache keys): all but batch_size and device,
        and precision at its default fp32 (keys made before it existed stay valid)."""
        data = self.to_dict()
        del data["batch_size"], data["device"]
        if data["precision"] == "fp32":
            del data["precision"]
        return data


class Encoder:
    """A loaded encoder. Build it with `Encoder.load(spec)`.

    Attributes: spec, tokenizer (a fast transformers tokenizer), model (the transformers
    model, in eval mode), device (torch.device), dim (size of `encode` vectors), hidden_size
    (size of `token_embeddings` vectors), pooling (the resolved mode), max_length (effective).
    """

    def __init__(
        self,
        spec: EncoderSpec,
        tokenizer: Any,
        model: Any,
        *,
        pooling: str,
        device: torch.device,
        head: Sequence[Callable[[torch.Tensor], torch.Tensor]] = (),
        dim: int | None = None,
        lowercase: bool = False,
    ) -> None:
        self.spec = spec
        self.tokenizer = tokenizer
        self.model = model
        self.pooling = pooling
        self.device = device
        self._head = list(head)
        self._lowercase = lowercase
        model_max = getattr(tokenizer, "model_max_length", None)
        self.max_length = (
            min(spec.max_length, model_max) if isinstance(model_max, int) and model_max < 1_000_000 else spec.max_length
        )
        self.hidden_size = _hidden_size(model)
        self.dim = dim if dim is not None else self.hidden_size
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._token_types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())

    def __repr__(self) -> str:
        return f"Encoder(model={self.spec.model!r}, pooling={self.pooling!r}, dim={self.dim}, device={str(self.device)!r})"

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, spec: EncoderSpec) -> Encoder:
        """Load tokenizer and model named by `spec`; raise EncoderLoadError/FileNotFoundError naming it."""
        import torch

        source = ModelSource.resolve(spec.model)
        transformer_path, pooling, lowercase, head_specs = "", spec.pooling, False, []
        if source.has("modules.json"):
            transformer_path, st_pooling, lowercase, head_specs = read_sentence_transformers(source, spec.pooling is None)
            pooling = pooling or st_pooling
        pooling = pooling or "mean"

        load_kwargs: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code}
        if source.local:
            model_dir = str(Path(source.path, transformer_path)) if transformer_path else source.path
            load_kwargs["local_files_only"] = True
        else:
            model_dir = source.path
            if transformer_path:
                load_kwargs["subfolder"] = transformer_path
        where = source.describe(transformer_path)

        tokenizer = load_tokenizer(source, transformer_path, model_dir, load_kwargs, where)
        model = load_model(model_dir, load_kwargs, where)
        try:
            require_pooler(pooling, model, where)
        except PoolingError as err:
            raise EncoderLoadError(str(err)) from None
        if spec.pooling is not None:  # asked for by a config, not read from a sentence-transformers folder
            warn_cls_with_pooler(pooling, model, where)

        device = torch.device(spec.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        model.to(device)
        model.eval()
        head, dim = build_head(source, head_specs, device)
        return cls(spec, tokenizer, model, pooling=pooling, device=device, head=head, dim=dim, lowercase=lowercase)

    # ------------------------------------------------------------------ encoding

    def encode(
        self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None, embedding_offset: np.ndarray | None = None
    ) -> np.ndarray:
        """float32 [len(texts), dim], each row L2-normalised, rows in input order.

        `progress`, if given, is called after each batch with the number of texts it held.
        `embedding_offset` (float [hidden_size]), if given, is added to every token's word
        embedding before the transformer, as the trainer adds a learned language vector
        (`train.language_embedding`, WACSE §6.1).
        """
        texts = _check_texts(texts)
        offset = self._offset(embedding_offset)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start, inverse, batches in self._sorted_chunks(texts, with_tokens=False):
            chunk = np.concatenate([self._pool(*self._forward(batch, offset)) for batch in _with_progress(batches, progress)])
            out[start : start + len(inverse)] = chunk[inverse]
        return out

    def token_embeddings(
        self,
        texts: Sequence[str],
        *,
        progress: Callable[[int], None] | None = None,
        return_offsets: bool = False,
    ) -> list[np.ndarray] | tuple[list[np.ndarray], list[np.ndarray]]:
        """Per text, float32 [tokens, hidden_size]: last-layer token vectors, not normalised.

        Special tokens and the tokens of `spec.prefix` are left out, so row i is the i-th
        subword of the (truncated) text itself. With `return_offsets=True` also returns, per
        text, int64 [tokens, 2] character spans (start, end) into the text, for mapping
        subwords to words. A text with no tokens (empty) gives a [0, hidden_size] array.
        """
        texts = _check_texts(texts)
        vectors: list[np.ndarray] = []
        offsets: list[np.ndarray] = []
        for _, inverse, batches in self._sorted_chunks(texts, with_tokens=True):
            chunk_vectors: list[np.ndarray] = []
            chunk_offsets: list[np.ndarray] = []
            for batch in _with_progress(batches, progress):
                hidden, _, _ = self._forward(batch)
                keep = torch_from(batch["keep"], hidden.device)
                counts = batch["keep"].sum(axis=1)
                split_at = np.cumsum(counts)[:-1]
                chunk_vectors.extend(np.split(hidden[keep].cpu().numpy(), split_at))
                chunk_offsets.extend(np.split(batch["offsets"][batch["keep"]], split_at))
            vectors.extend(chunk_vectors[i] for i in inverse)
            offsets.extend(chunk_offsets[i] for i in inverse)
        return (vectors, offsets) if return_offsets else vectors

    # ------------------------------------------------------------------ internals

    def _prepare(self, texts: Sequence[str]) -> tuple[list[str], int]:
        prefix = self.spec.prefix.lower() if self._lowercase else self.spec.prefix
        if self._lowercase:
            texts = [t.lower() for t in texts]
        return ([prefix + t for t in texts] if prefix else list(texts)), len(prefix)

    def _sorted_chunks(
        self, texts: list[str], *, with_tokens: bool
    ) -> Iterator[tuple[int, np.ndarray, Iterator[dict[str, Any]]]]:
        """Per chunk of SORT_CHUNK texts: (start, inverse permutation, padded batches in sorted order)."""
        for start in range(0, len(texts), SORT_CHUNK):
            inputs, prefix_len = self._prepare(texts[start : start + SORT_CHUNK])
            enc = self.tokenizer(
                inputs,
                add_special_tokens=True,
                truncation=True,
                max_length=self.max_length,
                padding=False,
                return_attention_mask=False,
                return_token_type_ids=self._token_types,
                return_special_tokens_mask=with_tokens,
                return_offsets_mapping=with_tokens,
            )
            ids = enc["input_ids"]
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            order = np.argsort(-lengths, kind="stable")
            inverse = np.empty_like(order)
            inverse[order] = np.arange(len(order))
            yield start, inverse, self._batches(enc, lengths, order, prefix_len, with_tokens)

    def _batches(
        self, enc: Any, lengths: np.ndarray, order: np.ndarray, prefix_len: int, with_tokens: bool
    ) -> Iterator[dict[str, Any]]:
        step = self.spec.batch_size
        for b in range(0, len(order), step):
            idx = order[b : b + step]
            lens = lengths[idx]
            width = int(lens.max()) if len(lens) else 0
            valid = np.arange(width)[None, :] < lens[:, None]
            batch: dict[str, Any] = {
                "input_ids": _pad([enc["input_ids"][i] for i in idx], valid, self._pad_id),
                "attention_mask": valid.astype(np.int64),
            }
            if self._token_types:
                batch["token_type_ids"] = _pad([enc["token_type_ids"][i] for i in idx], valid, 0)
            if with_tokens:
                special = _pad([enc["special_tokens_mask"][i] for i in idx], valid, 1).astype(bool)
                spans = np.zeros((len(idx), width, 2), dtype=np.int64)
                if width:
                    spans[valid] = np.concatenate(
                        [np.asarray(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2) for i in idx]
                    )
                # Drop special tokens, padding, and tokens that start inside the prefix.
                batch["keep"] = valid & ~special & (spans[..., 0] >= prefix_len)
                batch["offsets"] = spans - prefix_len
            yield batch

    def _offset(self, embedding_offset: np.ndarray | None) -> torch.Tensor | None:
        if embedding_offset is None:
            return None
        import torch

        offset = np.asarray(embedding_offset, dtype=np.float32)
        if offset.shape != (self.hidden_size,):
            raise ValueError(
                f"embedding_offset has shape {offset.shape}; this model's token embeddings have {self.hidden_size} values"
            )
        return torch.from_numpy(offset).to(self.device)

    def _forward(
        self, batch: dict[str, Any], offset: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(last hidden state float32 [b, t, h], attention mask [b, t], pooler output or None)."""
        import torch

        names = ("input_ids", "attention_mask", "token_type_ids")
        inputs = {k: torch_from(batch[k], self.device) for k in names if k in batch}
        with torch.inference_mode(), compute_precision(self.device.type, self.spec.precision):
            if offset is not None:  # the word embeddings plus the offset; positions and LayerNorm follow inside the model
                word_embeddings = self.model.get_input_embeddings()
                inputs["inputs_embeds"] = word_embeddings(inputs.pop("input_ids")) + offset.to(word_embeddings.weight.dtype)
            out = self.model(**inputs)
        hidden = getattr(out, "last_hidden_state", None)
        if hidden is None:
            hidden = out[0]
        pooled = getattr(out, "pooler_output", None)
        return hidden.float(), inputs["attention_mask"], (pooled.float() if pooled is not None else None)

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor, pooled: torch.Tensor | None) -> np.ndarray:
        import torch

        with torch.inference_mode():
            vectors = embed(self.pooling, hidden, mask, pooled, self._head)
        return vectors.cpu().numpy()


# ---------------------------------------------------------------------- helpers


def torch_from(array: np.ndarray, device: torch.device) -> torch.Tensor:
    import torch

    return torch.from_numpy(array).to(device, non_blocking=True)


def _pad(rows: list[list[int]], valid: np.ndarray, fill: int) -> np.ndarray:
    out = np.full(valid.shape, fill, dtype=np.int64)
    if valid.size:
        out[valid] = np.fromiter((v for row in rows for v in row), dtype=np.int64, count=int(valid.sum()))
    return out


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not a single string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
    return texts


def _with_progress(batches: Iterator[dict[str, Any]], progress: Callable[[int], None] | None) -> Iterator[dict[str, Any]]:
    for batch in batches:
        yield batch
        if progress is not None:
            progress(len(batch["input_ids"]))


def _hidden_size(model: Any) -> int:
    config = getattr(model, "config", None)
    for name in ("hidden_size", "d_model", "dim", "n_embd"):
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise EncoderLoadError(f"cannot tell the hidden size of {type(model).__name__}: its config has no hidden_size")
