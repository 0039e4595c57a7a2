"""Bitext mining with the ratio margin of Artetxe & Schwenk (2019), scored as in BUCC 2018.

    score(x, y) = cos(x, y) / ( sum_{z in NN_k(x)} cos(x, z) / 2k  +  sum_{z in NN_k(y)} cos(z, y) / 2k )

with NN_k(x) the k (= 4) nearest neighbours of x among the other side's sentences. Each x
proposes its best y by margin among its k neighbours (forward), each y its best x
(backward); the proposals are merged, deduplicated, and matched one-to-one greedily by
descending score (each source and each target used once). A pair is predicted when its
score is >= a threshold, chosen to maximise F1 on a tuning split (BUCC "sample" or
"training") and then applied to the test split. Tuning and reporting on the same split (as
mSimCSE does) is optimistic; :func:`mining_rows` reports both, named by split.

Differences from DAP's public evaluation code (see docs/reference-notes): faiss instead of
a brute-force torch k-NN in 128x128 blocks; margins, proposals and matching vectorised with
numpy instead of per-element Python loops; gold as a hash of index pairs instead of a list
searched per candidate; thresholds only between distinct scores, and no read past the end
of the candidate list when the best F1 is at the last candidate; ``score >= threshold``.

Exact search (IndexFlatIP) costs n_x * n_y * d multiply-adds per direction; on two cores
that is about a minute per direction at 100k x 100k (d=384) and over an hour at 1M x 1M. For
millions of sentences pass ``search=IvfSearch()``: an inverted-file index only scans the
``nprobe`` of ``nlist`` clusters nearest each query, so some true neighbours are missed
(recall < 1; measure it with :func:`knn_recall`). A missed neighbour lowers the k-NN mean in
the denominator (inflating margins) and can drop a correct candidate, so F1 with IVF can be
lower than exact; raise ``nprobe`` to trade time for recall. IVF relies on cluster structure:
at 1M x 1M with nlist 2048 and nprobe 8 (about 3.5 min per direction on two cores) recall@4
was 1.00 on clustered synthetic vectors but 0.03 on uniformly random ones
(benchmarks/margin_mining.py --scale). Check recall on your own embeddings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import faiss
import numpy as np

from tasks.encoders.neighbours import as_unit_float32
from tasks.evaluate.datasets import BuccSplit
from tasks.evaluate.groups import metric_row

__all__ = [
    "DEFAULT_K",
    "IvfSearch",
    "MinedPairs",
    "MiningResult",
    "MiningScore",
    "ThresholdChoice",
    "best_threshold",
    "bucc_mining",
    "bucc_rows",
    "gold_mask",
    "greedy_one_to_one",
    "knn",
    "knn_recall",
    "margin_candidates",
    "mining_rows",
    "score_at_threshold",
]

DEFAULT_K = 4


@dataclass(frozen=True)
class IvfSearch:
    """Approximate k-NN with a faiss IndexIVFFlat (inner product, spherical k-means).

    nlist: clusters (default 4 * sqrt(n_base)); nprobe: clusters scanned per query;
    train_size: base vectors sampled to train the clustering; seed: for that sample and k-means.
    """

    nlist: int | None = None
    nprobe: int = 32
    train_size: int = 200_000
    seed: int = 0


def knn(queries: np.ndarray, base: np.ndarray, k: int, search: IvfSearch | None = None) -> tuple[np.ndarray, np.ndarray]:
    """k nearest ``base`` rows of each query by inner product: (similarities float32, indices int64), (n, k).

    Exact (IndexFlatIP) when ``search`` is None, else IVF as configured.
    """
    n, d = base.shape
    if not 1 <= k <= n:
        raise ValueError(f"k={k} must be between 1 and the number of base rows ({n})")
    if search is None:
        index = faiss.IndexFlatIP(d)
        index.add(base)
        return index.search(queries, k)
    nlist = search.nlist or max(1, int(4 * math.sqrt(n)))
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.spherical = True
    index.cp.seed = search.seed
    if n > search.train_size:
        sample = np.random.default_rng(search.seed).choice(n, search.train_size, replace=False)
        index.train(base[np.sort(sample)])
    else:
        index.train(base)
    index.add(base)
    index.nprobe = min(search.nprobe, nlist)
    sims, inds = index.search(queries, k)
    short = int((inds < 0).any(axis=1).sum())
    if short:
        raise ValueError(f"IVF search found fewer than {k} neighbours for {short} queries: raise nprobe (now {index.nprobe})")
    return sims, inds


def knn_recall(
    queries: np.ndarray, base: np.ndarray, approx_indices: np.ndarray, *, sample_size: int = 1000, seed: int = 0
) -> float:
    """Recall@k of approximate neighbours against exact search, on a seeded sample of queries.

    ``approx_indices`` (n_queries, k) comes from :func:`knn` with an IvfSearch; the result is
    the mean fraction of each sampled query's exact k neighbours that the approximation found.
    """
    k = approx_indices.shape[1]
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(queries), min(sample_size, len(queries)), replace=False))
    _, exact = knn(np.ascontiguousarray(queries[rows]), base, k)
    found = (approx_indices[rows][:, :, None] == exact[:, None, :]).any(axis=1)
    return float(found.mean())


@dataclass(frozen=True)
class MinedPairs:
    """One-to-one candidate pairs, by descending margin score (ties: lower src, then tgt)."""

    src: np.ndarray  # int64 row in x
    tgt: np.ndarray  # int64 row in y
    score: np.ndarray  # float64 margin
    n_src: int
    n_tgt: int
    n_proposed: int  # distinct forward + backward proposals before one-to-one matching

    def __len__(self) -> int:
        return len(self.score)


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> np.ndarray:
    """Positions of the pairs that greedy matching by descending score keeps, in that order.

    Equivalent to: walk the pairs by descending score (ties by src, then tgt) and keep a pair
    when neither its source nor its target was kept before. Computed in rounds without a
    Python loop over pairs: a pair that ranks first among the remaining pairs of both its
    source and its target is kept by the sequential walk too (every earlier pair touching it
    was already rejected); keep all such pairs, drop the pairs they block, repeat. Each round
    keeps at least the best remaining pair; on mining candidates a handful of rounds suffice.
    """
    src = np.asarray(src, dtype=np.int64)
    tgt = np.asarray(tgt, dtype=np.int64)
    m = len(src)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((tgt, src, -np.asarray(score, dtype=np.float64)))
    s, t = src[order], tgt[order]
    first_of_src = np.full(int(s.max()) + 1, m, dtype=np.int64)
    first_of_tgt = np.full(int(t.max()) + 1, m, dtype=np.int64)
    used_src = np.zeros(len(first_of_src), dtype=bool)
    used_tgt = np.zeros(len(first_of_tgt), dtype=bool)
    alive = np.arange(m, dtype=np.int64)  # ranks of undecided pairs, ascending
    kept = []
    while alive.size:
        alive_s, alive_t = s[alive], t[alive]
        first_of_src[alive_s] = m
        first_of_tgt[alive_t] = m
        np.minimum.at(first_of_src, alive_s, alive)
        np.minimum.at(first_of_tgt, alive_t, alive)
        won = alive[(first_of_src[alive_s] == alive) & (first_of_tgt[alive_t] == alive)]
        kept.append(won)
        used_src[s[won]] = True
        used_tgt[t[won]] = True
        alive = alive[~(used_src[alive_s] | used_tgt[alive_t])]
    return order[np.sort(np.concatenate(kept))]


def margin_candidates(x: np.ndarray, y: np.ndarray, k: int = DEFAULT_K, search: IvfSearch | None = None) -> MinedPairs:
    """Forward and backward ratio-margin proposals of L2-normalised ``x`` and ``y``, matched one-to-one."""
    x = as_unit_float32("x", x)
    y = as_unit_float32("y", y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x and y differ in dimension: {x.shape[1]} vs {y.shape[1]}")
    sim_xy, ind_xy = knn(x, y, k, search)
    sim_yx, ind_yx = knn(y, x, k, search)
    mean_x = sim_xy.mean(axis=1, dtype=np.float64)
    mean_y = sim_yx.mean(axis=1, dtype=np.float64)
    forward = sim_xy / ((mean_x[:, None] + mean_y[ind_xy]) / 2)
    backward = sim_yx / ((mean_y[:, None] + mean_x[ind_yx]) / 2)
    rows_x, rows_y = np.arange(len(x)), np.arange(len(y))
    best_f = forward.argmax(axis=1)
    best_b = backward.argmax(axis=1)
    src = np.concatenate([rows_x, ind_yx[rows_y, best_b]])
    tgt = np.concatenate([ind_xy[rows_x, best_f], rows_y])
    score = np.concatenate([forward[rows_x, best_f], backward[rows_y, best_b]])
    # a pair proposed in both directions: keep it once, with the higher of its two scores
    by_score = np.argsort(-score, kind="stable")
    _, first = np.unique(src[by_score] * len(y) + tgt[by_score], return_index=True)
    distinct = by_score[first]
    src, tgt, score = src[distinct], tgt[distinct], score[distinct]
    keep = greedy_one_to_one(src, tgt, score)
    return MinedPairs(src[keep], tgt[keep], score[keep], len(x), len(y), len(distinct))


def gold_mask(pairs: MinedPairs, gold_src: np.ndarray, gold_tgt: np.ndarray) -> np.ndarray:
    """Which mined pairs are gold; ``gold_src[i]``, ``gold_tgt[i]`` are rows of x and y."""
    gold_src = np.asarray(gold_src, dtype=np.int64)
    gold_tgt = np.asarray(gold_tgt, dtype=np.int64)
    if gold_src.shape != gold_tgt.shape or gold_src.ndim != 1:
        raise ValueError("gold_src and gold_tgt must be 1-D arrays of equal length")
    if gold_src.size and (
        gold_src.min() < 0 or gold_src.max() >= pairs.n_src or gold_tgt.min() < 0 or gold_tgt.max() >= pairs.n_tgt
    ):
        raise ValueError(f"gold indices outside the {pairs.n_src} x {pairs.n_tgt} sentences")
    return np.isin(pairs.src * pairs.n_tgt + pairs.tgt, gold_src * pairs.n_tgt + gold_tgt)


def _n_gold(gold_src: np.ndarray, gold_tgt: np.ndarray, n_tgt: int) -> int:
    return int(np.unique(np.asarray(gold_src, dtype=np.int64) * n_tgt + np.asarray(gold_tgt, dtype=np.int64)).size)


@dataclass(frozen=True)
class ThresholdChoice:
    threshold: float  # predict pairs with score >= threshold
    precision: float
    recall: float
    f1: float
    n_selected: int


def best_threshold(scores: np.ndarray, is_gold: np.ndarray, n_gold: int | None = None) -> ThresholdChoice:
    """The score threshold that maximises F1, with its precision, recall and F1.

    ``scores``: candidate scores; ``is_gold``: whether each candidate is a gold pair;
    ``n_gold``: gold pairs in total (default ``is_gold.sum()``; pass the real count when some
    gold pairs are not among the candidates). Thresholds lie midway between consecutive
    distinct scores (at the lowest score when keeping everything is best), so tied scores
    are kept or dropped together. On equal F1 the higher threshold wins. When no candidate
    is gold, the threshold is just above the top score (nothing selected, F1 0).
    """
    scores = np.asarray(scores, dtype=np.float64)
    is_gold = np.asarray(is_gold, dtype=bool)
    if scores.ndim != 1 or scores.shape != is_gold.shape:
        raise ValueError(f"scores and is_gold must be 1-D of equal length, got {scores.shape} and {is_gold.shape}")
    if scores.size == 0:
        raise ValueError("no candidates to choose a threshold from")
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    found = int(is_gold.sum())
    n_gold = found if n_gold is None else int(n_gold)
    if n_gold < found or n_gold == 0:
        raise ValueError(f"n_gold={n_gold} must be positive and at least the {found} gold candidates")
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    tp = np.cumsum(is_gold[order])
    selected = np.arange(1, len(s) + 1)
    f1 = 2 * tp / (selected + n_gold)
    f1[np.flatnonzero(s[:-1] == s[1:])] = -1.0  # cannot cut inside a run of equal scores
    best = int(np.argmax(f1))
    if f1[best] <= 0:
        return ThresholdChoice(float(np.nextafter(s[0], np.inf)), 0.0, 0.0, 0.0, 0)
    if best == len(s) - 1:
        threshold = s[-1]
    else:
        low, high = s[best + 1], s[best]
        threshold = low + (high - low) / 2
        if not low < threshold <= high:
            threshold = high
    return ThresholdChoice(float(threshold), float(tp[best] / (best + 1)), float(tp[best] / n_gold), float(f1[best]), best + 1)


@dataclass(frozen=True)
class MiningScore:
    precision: float
    recall: float
    f1: float
    threshold: float
    n_gold: int
    n_candidates: int  # one-to-one pairs before the threshold
    n_selected: int  # pairs with score >= threshold


def score_at_threshold(pairs: MinedPairs, gold_src: np.ndarray, gold_tgt: np.ndarray, threshold: float) -> MiningScore:
    """Precision, recall and F1 of the mined pairs with score >= ``threshold`` against the gold."""
    n_gold = _n_gold(gold_src, gold_tgt, pairs.n_tgt)
    if n_gold == 0:
        raise ValueError("no gold pairs")
    is_gold = gold_mask(pairs, gold_src, gold_tgt)
    chosen = pairs.score >= threshold
    n_selected = int(chosen.sum())
    tp = int((is_gold & chosen).sum())
    precision = tp / n_selected if n_selected else 0.0
    recall = tp / n_gold
    f1 = 2 * tp / (n_selected + n_gold)
    return MiningScore(precision, recall, f1, float(threshold), n_gold, len(pairs), n_selected)


@dataclass(frozen=True)
class MiningResult:
    tune: MiningScore  # on the split the threshold was fitted to (optimistic)
    test: MiningScore  # that threshold applied to the test split


def bucc_mining(
    tune: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    *,
    k: int = DEFAULT_K,
    search: IvfSearch | None = None,
) -> MiningResult:
    """Fit the threshold on ``tune`` and apply it to ``test``; each is (x, y, gold_src, gold_tgt)."""
    x, y, gold_src, gold_tgt = tune
    pairs = margin_candidates(x, y, k, search)
    choice = best_threshold(pairs.score, gold_mask(pairs, gold_src, gold_tgt), _n_gold(gold_src, gold_tgt, pairs.n_tgt))
    tuned = score_at_threshold(pairs, gold_src, gold_tgt, choice.threshold)
    x, y, gold_src, gold_tgt = test
    tested = score_at_threshold(margin_candidates(x, y, k, search), gold_src, gold_tgt, choice.threshold)
    return MiningResult(tuned, tested)


def mining_rows(
    result: MiningResult,
    *,
    src_lang: str,
    tgt_lang: str = "eng_Latn",
    dataset: str = "bucc2018",
    tune_split: str = "training",
    test_split: str = "test",
    benchmark: str = "bucc",
) -> list[dict]:
    """Rows for ``{dataset}.{test_split}`` (threshold from the tuning split) and ``{dataset}.{tune_split}``.

    The tuning-split rows use the threshold fitted on that same split (what DAP's Table 2
    and mSimCSE report): an upper bound, not a held-out score. n: selected pairs for
    precision, gold pairs for recall and F1, one-to-one candidates for the threshold.
    """
    rows = []
    for split, score in ((test_split, result.test), (tune_split, result.tune)):
        name = f"{dataset}.{split}"
        rows += [
            metric_row(benchmark, name, src_lang, tgt_lang, "precision", score.precision, score.n_selected),
            metric_row(benchmark, name, src_lang, tgt_lang, "recall", score.recall, score.n_gold),
            metric_row(benchmark, name, src_lang, tgt_lang, "f1", score.f1, score.n_gold),
            metric_row(benchmark, name, src_lang, tgt_lang, "threshold", score.threshold, score.n_candidates),
        ]
    return rows


def bucc_rows(
    tune_split: BuccSplit,
    tune_src: np.ndarray,
    tune_tgt: np.ndarray,
    test_split: BuccSplit,
    test_src: np.ndarray,
    test_tgt: np.ndarray,
    *,
    k: int = DEFAULT_K,
    search: IvfSearch | None = None,
) -> list[dict]:
    """Rows for two BUCC splits (tuning, test) as read by :func:`tasks.evaluate.benchmarks.bucc.read_bucc`, and their embeddings.

    ``*_src`` embeds ``split.src`` row by row, ``*_tgt`` embeds ``split.tgt``.
    """
    for split, src, tgt in ((tune_split, tune_src, tune_tgt), (test_split, test_src, test_tgt)):
        if len(src) != len(split.src) or len(tgt) != len(split.tgt):
            raise ValueError(
                f"BUCC {split.split}: {len(src)}/{len(tgt)} embeddings for {len(split.src)}/{len(split.tgt)} sentences"
            )
    result = bucc_mining(
        (tune_src, tune_tgt, *tune_split.gold_indices()), (test_src, test_tgt, *test_split.gold_indices()), k=k, search=search
    )
    return mining_rows(
        result,
        src_lang=tune_split.src_lang,
        tgt_lang=tune_split.tgt_lang,
        tune_split=tune_split.split,
        test_split=test_split.split,
    )
