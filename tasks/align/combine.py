"""Turning directional word links into one alignment per sentence pair.

Directional links of many pairs are flat arrays (pair, src, tgt, score, width), both
directions already oriented src→tgt of the pair. Combination works on all pairs at once:
links are keyed by (pair, src, tgt), merged with `np.unique`, scored, thresholded, sorted
and split per pair. Only grow-diag-final-and (for eflomal) walks each pair on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Links = tuple[np.ndarray, np.ndarray, np.ndarray]  # src int32, tgt int32, score float32 (one pair)


@dataclass(frozen=True)
class DirectionalLinks:
    """Links of one direction for many pairs. `width`: words in the predicted span (1 for word-level aligners)."""

    pair: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    score: np.ndarray
    width: np.ndarray

    @classmethod
    def empty(cls) -> DirectionalLinks:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, np.zeros(0, dtype=np.float32), z)


def empty_links() -> Links:
    return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)


def split_by_pair(n_pairs: int, pair: np.ndarray, src: np.ndarray, tgt: np.ndarray, score: np.ndarray) -> list[Links]:
    """Per pair 0..n_pairs-1: its links sorted by (src, tgt)."""
    order = np.lexsort((tgt, src, pair))
    pair, src, tgt, score = pair[order], src[order].astype(np.int32), tgt[order].astype(np.int32), score[order].astype(np.float32)
    bounds = np.searchsorted(pair, np.arange(n_pairs + 1))
    return [(src[a:b], tgt[a:b], score[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]


def combine_directions(
    n_pairs: int, fwd: DirectionalLinks, bwd: DirectionalLinks, *, method: str, threshold: float
) -> list[Links]:
    """One alignment per pair from its A→B (`fwd`) and B→A (`bwd`) links; see WspalignSettings."""
    n_words = int(max(fwd.src.max(initial=0), fwd.tgt.max(initial=0), bwd.src.max(initial=0), bwd.tgt.max(initial=0))) + 1
    keys = np.concatenate(
        [(fwd.pair * n_words + fwd.src) * n_words + fwd.tgt, (bwd.pair * n_words + bwd.src) * n_words + bwd.tgt]
    )
    unique, inverse = np.unique(keys, return_inverse=True)
    k = len(fwd.pair)
    f_score = np.zeros(len(unique), dtype=np.float64)
    b_score = np.zeros(len(unique), dtype=np.float64)
    f_width = np.ones(len(unique), dtype=np.float64)
    b_width = np.ones(len(unique), dtype=np.float64)
    in_fwd = np.zeros(len(unique), dtype=bool)
    f_score[inverse[:k]] = fwd.score
    f_width[inverse[:k]] = np.maximum(fwd.width, 1)
    in_fwd[inverse[:k]] = True
    b_score[inverse[k:]] = bwd.score
    b_width[inverse[k:]] = np.maximum(bwd.width, 1)
    if method == "sum":
        value = f_score / f_width + b_score / b_width
        keep = in_fwd & (value > threshold)
        score = value / 2.0
    elif method == "average":
        score = (f_score + b_score) / 2.0
        keep = score > threshold
    elif method == "intersection":
        keep = (f_score > threshold) & (b_score > threshold)
        score = (f_score + b_score) / 2.0
    elif method == "union":
        keep = (f_score > threshold) | (b_score > threshold)
        score = np.maximum(f_score, b_score)
    else:
        raise ValueError(f"unknown combination {method!r}; expected sum, average, intersection or union")
    unique, score = unique[keep], np.clip(score[keep], 0.0, 1.0)
    pair, rest = np.divmod(unique, n_words * n_words)
    src, tgt = np.divmod(rest, n_words)
    return split_by_pair(n_pairs, pair, src, tgt, score)


def grow_diag_final_and(m: int, n: int, fwd: np.ndarray, bwd: np.ndarray) -> np.ndarray:
    """Koehn's grow-diag-final-and of two boolean [m, n] link matrices -> boolean [m, n]."""
    union = fwd | bwd
    alignment = fwd & bwd
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    changed = True
    while changed:
        changed = False
        aligned_src = alignment.any(axis=1)
        aligned_tgt = alignment.any(axis=0)
        for i, j in zip(*np.nonzero(alignment)):
            for di, dj in neighbours:
                a, b = i + di, j + dj
                if (
                    0 <= a < m
                    and 0 <= b < n
                    and union[a, b]
                    and not alignment[a, b]
                    and (not aligned_src[a] or not aligned_tgt[b])
                ):
                    alignment[a, b] = True
                    aligned_src[a] = aligned_tgt[b] = True
                    changed = True
    for direction in (fwd, bwd):  # final-and: links of each direction whose both words are still unaligned
        aligned_src = alignment.any(axis=1)
        aligned_tgt = alignment.any(axis=0)
        for i, j in zip(*np.nonzero(direction & ~alignment)):
            if not aligned_src[i] and not aligned_tgt[j]:
                alignment[i, j] = True
                aligned_src[i] = aligned_tgt[j] = True
    return alignment
