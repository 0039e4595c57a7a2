"""Exact cosine nearest-neighbour search over unit vectors, and bitext retrieval's per-query outcomes.

The core every consumer of an encoder's vectors shares: the trainer picks the checkpoint it
keeps by `bitext_accuracy` on dev rows, `xlembed export` measures a language embedding's effect
with it, and the evaluate stage's retrieval, mining and STS benchmarks score with it.

Every query row i of `queries` should retrieve row i of `candidates` (rows past the queries are
distractors). Embeddings are float32, L2-normalised (cosine = inner product); search is exact
(faiss IndexFlatIP), and ties go the way faiss breaks them (the lower index in practice).
Besides top-1 correctness, every query gets a margin: cos(query, its translation) minus the
highest cosine of the query with any other candidate. It is positive exactly when the query
is answered correctly (up to ties) and, unlike accuracy, it keeps moving when accuracy is at
its ceiling.

    >>> src_to_tgt, tgt_to_src = bitext_accuracy(kaz_embeddings, eng_embeddings)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "NO_OTHER_CANDIDATE_COSINE",
    "QueryOutcomes",
    "aligned_pair",
    "as_unit_float32",
    "bitext_accuracy",
    "nearest_neighbours",
    "query_outcomes",
]

NORM_TOLERANCE = 1e-2
# The "best other candidate" of a query whose pool holds only its translation: the lowest
# possible cosine, so the margin stays finite and positive (the query cannot be wrong).
NO_OTHER_CANDIDATE_COSINE = -1.0


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
    """Exact inner-product k-NN of each query row among ``base`` rows: (similarities, indices), (n, k).

    Where ``base`` has fewer than k rows, faiss pads with index -1 (and a huge negative similarity).
    Without faiss installed (a GPU machine set up with the numeric stack only, `make gpu-check`)
    the same exact search runs in numpy: the same neighbours up to float rounding; exact ties
    may be ordered differently (numpy keeps the lower index first)."""
    if queries.shape[1] != base.shape[1]:
        raise ValueError(f"dimension mismatch: queries have {queries.shape[1]}, base {base.shape[1]}")
    try:
        import faiss
    except ImportError:
        return _exact_search(queries, base, k)
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    return index.search(queries, k)


FAISS_PAD_SIMILARITY = np.float32(-3.4028235e38)  # what IndexFlatIP gives the slots past base's last row


def _exact_search(queries: np.ndarray, base: np.ndarray, k: int, block: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    found = min(k, len(base))
    sims = np.full((len(queries), k), FAISS_PAD_SIMILARITY, dtype=np.float32)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    for start in range(0, len(queries), block):
        scores = queries[start : start + block] @ base.T
        order = np.argsort(-scores, axis=1, kind="stable")[:, :found]
        ids[start : start + block, :found] = order
        sims[start : start + block, :found] = np.take_along_axis(scores, order, axis=1)
    return sims, ids


@dataclass(frozen=True)
class QueryOutcomes:
    """One retrieval direction, per query: top-1 correct, and the margin of the translation."""

    correct: np.ndarray  # bool, (n,)
    margin: np.ndarray  # float32, (n,): cos(query, translation) - max cos(query, other candidate)

    def __len__(self) -> int:
        return int(self.correct.shape[0])

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.correct))


def query_outcomes(queries: np.ndarray, candidates: np.ndarray) -> QueryOutcomes:
    """Query i's translation is candidate row i; rows of ``candidates`` past the queries are distractors.

    Vectorised: one exact top-2 search; the translation's cosine is the row-wise dot product
    of matched rows; the best wrong candidate is the top-1 hit unless that is the translation,
    then the top-2 hit. Both arrays must already be unit float32 (see :func:`as_unit_float32`).
    """
    n = queries.shape[0]
    if candidates.shape[0] < n:
        raise ValueError(f"{candidates.shape[0]} candidates for {n} queries: every query needs its translation among them")
    similarities, indices = nearest_neighbours(queries, candidates, 2)
    truth = np.arange(n)
    true_cosine = np.einsum("ij,ij->i", queries, candidates[:n])
    top_is_true = indices[:, 0] == truth
    second = np.where(indices[:, 1] >= 0, similarities[:, 1], NO_OTHER_CANDIDATE_COSINE)
    best_wrong = np.where(top_is_true, second, similarities[:, 0])
    return QueryOutcomes(top_is_true, (true_cosine - best_wrong).astype(np.float32))


def aligned_pair(src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both as unit float32, checked to be line-aligned (same shape: row i translates row i)."""
    src = as_unit_float32("src", src)
    tgt = as_unit_float32("tgt", tgt)
    if src.shape != tgt.shape:
        raise ValueError(f"src and tgt must have the same shape (row i translates row i), got {src.shape} and {tgt.shape}")
    return src, tgt


def bitext_accuracy(src: np.ndarray, tgt: np.ndarray) -> tuple[float, float]:
    """(src->tgt, tgt->src) top-1 accuracy, where row i of ``src`` translates row i of ``tgt``."""
    src, tgt = aligned_pair(src, tgt)
    return query_outcomes(src, tgt).accuracy, query_outcomes(tgt, src).accuracy
