"""Semantic textual similarity: Spearman correlation between cosine similarity and gold scores.

    >>> rows = sts_rows(emb1, emb2, pairs.scores, dataset=pairs.dataset, src_lang=pairs.src_lang, tgt_lang=pairs.tgt_lang)

Values are correlations in [-1, 1] (papers print them x100).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import scipy.stats

from tasks.encoders.neighbours import as_unit_float32
from tasks.evaluate.groups import metric_row
from tasks.evaluate.schema import STS_ITEMS_SCHEMA

__all__ = ["paired_cosine", "spearman", "sts_items", "sts_rows"]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho (``scipy.stats.spearmanr``: the Pearson correlation of average ranks).

    NaN when either input is constant (the correlation is undefined). Raises ValueError for
    inputs of different length, fewer than two values, or NaN values.
    """
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.size != b.size:
        raise ValueError(f"inputs differ in length: {a.size} and {b.size}")
    if a.size < 2:
        raise ValueError("need at least two pairs")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("inputs contain NaN")
    if np.ptp(a) == 0 or np.ptp(b) == 0:  # scipy would warn (ConstantInputWarning) and return NaN
        return float("nan")
    return float(scipy.stats.spearmanr(a, b).statistic)


def paired_cosine(emb1: np.ndarray, emb2: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of ``emb1`` with row i of ``emb2`` (L2-normalised inputs)."""
    emb1 = as_unit_float32("emb1", emb1)
    emb2 = as_unit_float32("emb2", emb2)
    if emb1.shape != emb2.shape:
        raise ValueError(f"emb1 and emb2 must have the same shape, got {emb1.shape} and {emb2.shape}")
    return np.einsum("ij,ij->i", emb1.astype(np.float64), emb2.astype(np.float64))


def sts_rows(
    emb1: np.ndarray, emb2: np.ndarray, gold: np.ndarray, *, dataset: str, src_lang: str, tgt_lang: str, benchmark: str = "sts"
) -> list[dict]:
    """One ``spearman`` row: cosine of paired embeddings against ``gold`` scores."""
    cosine = paired_cosine(emb1, emb2)
    gold = np.asarray(gold, dtype=np.float64)
    if gold.shape != cosine.shape:
        raise ValueError(f"{gold.size} gold scores for {cosine.size} pairs")
    return [metric_row(benchmark, dataset, src_lang, tgt_lang, "spearman", spearman(cosine, gold), cosine.size)]


def sts_items(
    cosine: np.ndarray, gold: np.ndarray, *, dataset: str, src_lang: str, tgt_lang: str, benchmark: str = "sts"
) -> pa.Table:
    """Per pair, its cosine and gold score (`STS_ITEMS_SCHEMA`): what the paired Spearman bootstrap resamples."""

    n = len(cosine)
    return pa.table(
        {
            "benchmark": [benchmark] * n, "dataset": [dataset] * n, "src_lang": [src_lang] * n, "tgt_lang": [tgt_lang] * n,
            "item": np.arange(n, dtype=np.int32), "cosine": np.asarray(cosine, dtype=np.float64), "gold": np.asarray(gold, dtype=np.float64),
        },
        schema=STS_ITEMS_SCHEMA,
    )  # fmt: skip
