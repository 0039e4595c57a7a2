"""Bitext retrieval: top-1 accuracy of cosine nearest-neighbour search, both directions.

As in DAP and WACSE (and unlike XTREME, which reports one direction), every query row i of
``src`` should retrieve row i of ``tgt`` among all ``tgt`` rows, and vice versa. Embeddings
are float32, L2-normalised (cosine = inner product); search is exact (faiss IndexFlatIP), and
ties go the way faiss breaks them (the lower index in practice).

    >>> src_to_tgt, tgt_to_src = bitext_accuracy(kaz_embeddings, eng_embeddings)
    >>> rows = tatoeba_rows(kaz_embeddings, eng_embeddings, src_lang="kaz")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import faiss
import numpy as np

from tasks.evaluate.groups import metric_row

__all__ = [
    "as_unit_float32",
    "bitext_accuracy",
    "multiway_retrieval_rows",
    "nearest_neighbours",
    "retrieval_rows",
    "tatoeba_rows",
]

NORM_TOLERANCE = 1e-2


def as_unit_float32(name: str, x: np.ndarray) -> np.ndarray:
    """``x`` as a C-contiguous float32 matrix, checked to have L2-normalised rows.

    Raises ValueError (naming ``name``) for a non-2-D or empty array, non-finite values, or
    rows whose norm is off 1 by more than 1e-2 (normalise before evaluating: cosine needs it).
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name}: expected a non-empty 2-D array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    bad = np.flatnonzero(np.abs(norms - 1) > NORM_TOLERANCE)
    if bad.size:
        raise ValueError(f"{name}: {bad.size} rows are not L2-normalised (row {bad[0]} has norm {norms[bad[0]]:.4f})")
    return x


def nearest_neighbours(queries: np.ndarray, base: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product k-NN of each query row among ``base`` rows: (similarities, indices), (n, k)."""
    if queries.shape[1] != base.shape[1]:
        raise ValueError(f"dimension mismatch: queries have {queries.shape[1]}, base {base.shape[1]}")
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    return index.search(queries, k)


def bitext_accuracy(src: np.ndarray, tgt: np.ndarray) -> tuple[float, float]:
    """(src->tgt, tgt->src) top-1 accuracy, where row i of ``src`` translates row i of ``tgt``."""
    src = as_unit_float32("src", src)
    tgt = as_unit_float32("tgt", tgt)
    if src.shape != tgt.shape:
        raise ValueError(f"src and tgt must have the same shape (row i translates row i), got {src.shape} and {tgt.shape}")
    expected = np.arange(src.shape[0])
    _, forward = nearest_neighbours(src, tgt, 1)
    _, backward = nearest_neighbours(tgt, src, 1)
    return float(np.mean(forward[:, 0] == expected)), float(np.mean(backward[:, 0] == expected))


def retrieval_rows(
    src: np.ndarray, tgt: np.ndarray, *, src_lang: str, tgt_lang: str, dataset: str, benchmark: str = "retrieval"
) -> list[dict]:
    """Metric rows accuracy_src_tgt, accuracy_tgt_src and accuracy_mean for one aligned pair."""
    forward, backward = bitext_accuracy(src, tgt)
    n = src.shape[0]
    return [
        metric_row(benchmark, dataset, src_lang, tgt_lang, "accuracy_src_tgt", forward, n),
        metric_row(benchmark, dataset, src_lang, tgt_lang, "accuracy_tgt_src", backward, n),
        metric_row(benchmark, dataset, src_lang, tgt_lang, "accuracy_mean", (forward + backward) / 2, n),
    ]


def tatoeba_rows(
    src: np.ndarray, tgt: np.ndarray, *, src_lang: str, tgt_lang: str = "eng_Latn", dataset: str = "tatoeba"
) -> list[dict]:
    """Tatoeba rows: ``src`` = the xx side, ``tgt`` = English; accuracy_src_tgt is xx->en."""
    return retrieval_rows(src, tgt, src_lang=src_lang, tgt_lang=tgt_lang, dataset=dataset, benchmark="tatoeba")


def multiway_retrieval_rows(
    embeddings: Mapping[str, np.ndarray],
    *,
    dataset: str,
    pivot: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> list[dict]:
    """Retrieval rows over line-aligned embeddings of several languages (e.g. FLORES held-out rows).

    Pairs are ``pairs`` if given, else (lang, ``pivot``) for every other language if ``pivot``
    is given, else every unordered pair once (each row holds both directions).
    """
    if pairs is None:
        langs = list(embeddings)
        if pivot is not None:
            if pivot not in embeddings:
                raise ValueError(f"pivot {pivot!r} has no embeddings")
            pairs = [(lang, pivot) for lang in langs if lang != pivot]
        else:
            pairs = list(combinations(langs, 2))
    rows: list[dict] = []
    for src_lang, tgt_lang in pairs:
        rows += retrieval_rows(embeddings[src_lang], embeddings[tgt_lang], src_lang=src_lang, tgt_lang=tgt_lang, dataset=dataset)
    return rows
