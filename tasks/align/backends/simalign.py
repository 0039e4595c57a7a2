"""SimAlign (Jalili Sabet et al., 2020): word alignment from contextual embeddings, no training.

Each sentence goes through the encoder once (`Encoder.token_embeddings` on `" ".join(words)`);
a word's vector is the mean of its subword vectors. Per pair, the similarity matrix is
(cos + 1) / 2 of the word vectors (batched matmul over padded pairs), then:

  argmax   links that are the best in their row and in their column (mutual argmax)
  itermax  argmax, then `max_count - 1` more rounds of argmax among words still unaligned,
           rows/columns already aligned down-weighted by `alpha` (SimAlign's default method)
  match    a maximum-weight one-to-one matching (scipy's linear_sum_assignment)

argmax and itermax run on all pairs of a batch at once: padding holds similarity 0, which
never beats a real word (similarities are >= 0 and ties go to the lower index), so the
result equals SimAlign's per-pair computation. Link score = the similarity.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from tasks.align.backends.base import AlignBackend, AlignerSettings, Progress, is_local_dir, register_backend, word_of_tokens
from tasks.align.combine import Links, empty_links, split_by_pair
from tasks.encoders import Encoder, EncoderSpec
from tasks.encoders.precision import Precision
from tasks.stage import folder_fingerprint
from tasks.stage_config import KEYED_UNLESS_DEFAULT, NOT_KEYED, HubIdOrPath

PAIRS_PER_BATCH = 256


@register_backend
class SimalignSettings(AlignerSettings):
    """SimAlign (`[align.simalign]`): word vectors (mean of subword vectors) of an encoder, cosine
    similarity, then `argmax` (mutual best), `itermax` (argmax, then again among unaligned words,
    SimAlign's default) or `match` (maximum-weight one-to-one matching). Score = (cos + 1) / 2."""

    name = "simalign"
    description = "SimAlign: mutual best matches of an encoder's word vectors, no training (Jalili Sabet et al. 2020)"

    model: HubIdOrPath | None = Field(
        default=None, description="encoder directory or hub id; default: the pipeline's base_model artifact"
    )
    method: Literal["argmax", "itermax", "match"] = "itermax"
    max_count: int = Field(default=2, ge=1, le=10, description="itermax: rounds (SimAlign: 2)")
    alpha: float = Field(
        default=0.9, ge=0.0, le=1.0, description="itermax: weight of already aligned rows/columns (SimAlign: 0.9)"
    )
    prefix: str = Field(default="", description='prepended to every sentence, e.g. "query: "')
    max_length: int = Field(default=256, ge=8, le=8192, description="tokens; longer sentences are dropped")
    batch_size: int = Field(default=64, ge=1, json_schema_extra=NOT_KEYED)
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED)
    precision: Precision = Field(
        default="fp32", json_schema_extra=KEYED_UNLESS_DEFAULT, description="fp32 (TF32 off) or bf16 autocast"
    )

    def located_fields(self) -> set[str]:
        # a local encoder folder is keyed by its files' contents (the backend's fingerprint), not its path
        return {"model"} if self.model and is_local_dir(self.model) else set()

    def build(self, base_model: Path | None = None) -> SimAligner:
        return SimAligner.load(self, base_model)

    def uses_base_model(self) -> bool:
        return not self.model

    def fingerprint(self) -> dict[str, Any]:
        root = Path(self.model).expanduser() if self.model else None
        if root is None or not root.is_dir():
            return {}  # the base model is an input artifact (keyed by its key); a hub id is keyed as written
        return {"model_files": folder_fingerprint(root, (p for p in root.rglob("*") if p.is_file()))}


class SimAligner(AlignBackend):
    def __init__(self, encoder: Any, settings: SimalignSettings) -> None:
        self.encoder, self.settings = encoder, settings
        self.label = f"simalign:{settings.method}"

    @classmethod
    def load(cls, settings: SimalignSettings, base_model: Path | None = None) -> SimAligner:
        """The encoder of `settings.model`, else the base_model artifact's folder."""

        model = settings.model or (str(base_model) if base_model else None)
        if not model:
            raise ValueError("simalign needs an encoder: the pipeline's base_model stage, or [align.simalign] model = DIR")
        spec = EncoderSpec(
            model=str(model),
            prefix=settings.prefix,
            max_length=settings.max_length,
            batch_size=settings.batch_size,
            device=settings.device,
            precision=settings.precision,
        )
        return cls(Encoder.load(spec), settings)

    def word_vectors(self, sentences: Sequence[list[str]]) -> tuple[list[np.ndarray | None], int]:
        """Per sentence: L2-normalised word vectors [words, hidden], or None when truncated."""
        texts = [" ".join(words) for words in sentences]
        vectors, offsets = self.encoder.token_embeddings(texts, return_offsets=True)
        out: list[np.ndarray | None] = []
        for words, vecs, offs in zip(sentences, vectors, offsets):
            lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
            token_word = word_of_tokens(lengths, offs[:, 0])
            counts = np.bincount(token_word, minlength=len(words))[: len(words)]
            if len(words) and counts[-1] == 0:  # the encoder truncated the sentence
                out.append(None)
                continue
            sums = np.zeros((len(words), vecs.shape[1]), dtype=np.float64)
            np.add.at(sums, token_word[token_word < len(words)], vecs[token_word < len(words)])
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            out.append((sums / np.where(norms > 0, norms, 1.0)).astype(np.float32))
        return out, self.encoder.hidden_size

    def align(
        self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None
    ) -> list[Links | None]:
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        vectors, hidden = self.word_vectors(sentences)
        ok = np.array([vectors[a] is not None and vectors[b] is not None for a, b in pairs], dtype=bool)
        out: list[Links | None] = [None] * len(pairs)
        kept = np.nonzero(ok)[0]
        if progress is not None and len(kept) < len(pairs):
            progress(len(pairs) - len(kept))  # no vectors (too long): done, unaligned
        for start in range(0, len(kept), PAIRS_PER_BATCH):
            chunk = kept[start : start + PAIRS_PER_BATCH]
            src = [vectors[a] for a in pairs[chunk, 0]]
            tgt = [vectors[b] for b in pairs[chunk, 1]]
            for index, links in zip(chunk, self.align_vectors(src, tgt, hidden)):
                out[index] = links
            if progress is not None:
                progress(len(chunk))
        return out

    def align_vectors(self, src: list[np.ndarray], tgt: list[np.ndarray], hidden: int) -> list[Links]:
        """Alignments of pairs given their normalised word vectors."""
        import torch

        n = len(src)
        if n == 0:
            return []
        m_len = np.array([len(v) for v in src])
        n_len = np.array([len(v) for v in tgt])
        a = np.zeros((n, max(m_len.max(), 1), hidden), dtype=np.float32)
        b = np.zeros((n, max(n_len.max(), 1), hidden), dtype=np.float32)
        for k in range(n):  # copies only; the arithmetic is batched below
            a[k, : m_len[k]] = src[k]
            b[k, : n_len[k]] = tgt[k]
        sim = torch.bmm(torch.from_numpy(a), torch.from_numpy(b).transpose(1, 2)).numpy()
        valid = (np.arange(a.shape[1])[None, :, None] < m_len[:, None, None]) & (
            np.arange(b.shape[1])[None, None, :] < n_len[:, None, None]
        )
        sim = np.where(valid, (sim + 1.0) / 2.0, 0.0)
        if self.settings.method == "match":
            return [_match(sim[k, : m_len[k], : n_len[k]]) for k in range(n)]
        links = (
            argmax_links(sim, valid)
            if self.settings.method == "argmax"
            else itermax_links(sim, valid, m_len, n_len, self.settings.max_count, self.settings.alpha)
        )
        pair, i, j = np.nonzero(links)
        return split_by_pair(n, pair, i, j, sim[pair, i, j])


def _one_hot_argmax(values: np.ndarray, axis: int) -> np.ndarray:
    """Boolean array marking the first maximum along `axis`."""
    index = np.expand_dims(values.argmax(axis=axis), axis)
    out = np.zeros(values.shape, dtype=bool)
    np.put_along_axis(out, index, True, axis=axis)
    return out


def argmax_links(sim: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """SimAlign's argmax for a batch of padded [pairs, m, n] similarity matrices: the links that
    are the best of both their row and their column, within `valid`."""
    return _one_hot_argmax(sim, 2) & _one_hot_argmax(sim, 1) & valid


def itermax_links(
    sim: np.ndarray, valid: np.ndarray, m_len: np.ndarray, n_len: np.ndarray, max_count: int, alpha: float
) -> np.ndarray:
    """SimAlign's iter_max for a batch of padded [pairs, m, n] similarity matrices."""
    inter = argmax_links(sim, valid).astype(np.float64)
    active = np.minimum(m_len, n_len) > 2  # SimAlign stops here for pairs with <= 2 words on a side
    for _ in range(max_count - 1):
        row_free = 1.0 - np.clip(inter.sum(axis=2, keepdims=True), 0.0, 1.0)  # [pairs, m, 1]
        col_free = 1.0 - np.clip(inter.sum(axis=1, keepdims=True), 0.0, 1.0)  # [pairs, 1, n]
        row_free = np.where(valid.any(axis=2, keepdims=True), row_free, 0.0)
        col_free = np.where(valid.any(axis=1, keepdims=True), col_free, 0.0)
        mask = np.clip(alpha * row_free + alpha * col_free, 0.0, 1.0)
        mask_zeros = 1.0 - (1.0 - row_free) * (1.0 - col_free)
        stop = (row_free.sum(axis=(1, 2)) < 1.0) | (col_free.sum(axis=(1, 2)) < 1.0)
        mask = np.where(stop[:, None, None], 0.0, mask)
        mask_zeros = np.where(stop[:, None, None], 0.0, mask_zeros)
        new_sim = sim * mask
        forward = _one_hot_argmax(new_sim, 2) * mask_zeros
        backward = _one_hot_argmax(new_sim, 1) * mask_zeros
        new_inter = forward * backward * valid
        changed = (new_inter > 0).any(axis=(1, 2)) & active
        if not changed.any():
            break
        inter = inter + np.where(changed[:, None, None], new_inter, 0.0)
        active &= changed
    return inter > 0


def _match(sim: np.ndarray) -> Links:
    from scipy.optimize import linear_sum_assignment

    if sim.size == 0:
        return empty_links()
    rows, cols = linear_sum_assignment(sim, maximize=True)
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    return rows.astype(np.int32), cols.astype(np.int32), sim[rows, cols].astype(np.float32)
