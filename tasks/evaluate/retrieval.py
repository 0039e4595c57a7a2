"""Bitext retrieval as the evaluate stage scores it: top-1 accuracy and margin, both directions.

As in DAP and WACSE (and unlike XTREME, which reports one direction), every query row i of
``src`` should retrieve row i of ``tgt`` among all ``tgt`` rows, and vice versa. The search
and the per-query outcomes (correct, margin) are tasks/encoders/neighbours.py's; this module
turns them into metric rows, per-query items and the xx-yy summaries. Candidate pools may
hold extra rows after the translations (distractors, which make the task harder without
adding queries).

    >>> scored = score_pair(kaz_embeddings, eng_embeddings, src_lang="kaz", tgt_lang="eng", dataset="tatoeba")
    >>> scored.metric_rows(), scored.items()   # metrics-table rows, ITEMS_SCHEMA table
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pyarrow as pa

from tasks.encoders.neighbours import QueryOutcomes, aligned_pair, as_unit_float32, query_outcomes
from tasks.evaluate.groups import metric_row
from tasks.evaluate.schema import ITEMS_SCHEMA
from tasks.languages import group_code, to_flores

__all__ = [
    "XX_YY_GROUP",
    "PairRetrieval",
    "dataset_pivot",
    "multiway_pair_scores",
    "multiway_retrieval_rows",
    "retrieval_rows",
    "score_pair",
    "tatoeba_rows",
    "xx_yy_rows",
]

# Summary rows over the pairs of two non-pivot languages: src_lang "group:xx-yy", tgt_lang null.
XX_YY_GROUP = "xx-yy"
DIRECTIONS = ("src_tgt", "tgt_src")


@dataclass(frozen=True)
class PairRetrieval:
    """Both directions of retrieval between two languages: per-query outcomes, metric rows, items."""

    benchmark: str
    dataset: str
    src_lang: str  # FLORES-200
    tgt_lang: str  # FLORES-200
    src_tgt: QueryOutcomes  # queries are the src rows, candidates the tgt rows (+ tgt distractors)
    tgt_src: QueryOutcomes

    def metric_rows(self) -> list[dict]:
        """accuracy_src_tgt, accuracy_tgt_src, accuracy_mean and margin_mean (over both directions' queries)."""
        forward, backward = self.src_tgt.accuracy, self.tgt_src.accuracy
        margins = np.concatenate([self.src_tgt.margin, self.tgt_src.margin]).astype(np.float64)
        n = len(self.src_tgt)
        key = (self.benchmark, self.dataset, self.src_lang, self.tgt_lang)
        return [
            metric_row(*key, "accuracy_src_tgt", forward, n),
            metric_row(*key, "accuracy_tgt_src", backward, n),
            metric_row(*key, "accuracy_mean", (forward + backward) / 2, n),
            metric_row(*key, "margin_mean", float(margins.mean()), n),
        ]

    def items(self) -> pa.Table:
        """One ITEMS_SCHEMA row per query per direction (built column-wise, no per-row Python)."""
        sizes = [len(self.src_tgt), len(self.tgt_src)]
        total = sum(sizes)

        def constant(value: str) -> pa.Array:
            return pa.repeat(pa.scalar(value, pa.string()), total)

        columns = {
            "benchmark": constant(self.benchmark),
            "dataset": constant(self.dataset),
            "src_lang": constant(self.src_lang),
            "tgt_lang": constant(self.tgt_lang),
            "direction": pa.array(np.repeat(np.array(DIRECTIONS, dtype=object), sizes), pa.string()),
            "item": pa.array(np.concatenate([np.arange(size, dtype=np.int32) for size in sizes]), pa.int32()),
            "correct": pa.array(np.concatenate([self.src_tgt.correct, self.tgt_src.correct]), pa.bool_()),
            "margin": pa.array(np.concatenate([self.src_tgt.margin, self.tgt_src.margin]), pa.float32()),
        }
        return pa.Table.from_pydict(columns, schema=ITEMS_SCHEMA)


def score_pair(
    src: np.ndarray,
    tgt: np.ndarray,
    *,
    src_lang: str,
    tgt_lang: str,
    dataset: str,
    benchmark: str = "retrieval",
    src_distractors: np.ndarray | None = None,
    tgt_distractors: np.ndarray | None = None,
) -> PairRetrieval:
    """Retrieval both ways between line-aligned ``src`` and ``tgt`` (row i translates row i).

    ``tgt_distractors`` join the candidates of src->tgt queries, ``src_distractors`` those of
    tgt->src queries; they are never queries themselves. Distractors must not repeat a
    translation's text (a duplicate would count as a wrong answer): remove those first.
    """
    src, tgt = aligned_pair(src, tgt)

    def pool(aligned: np.ndarray, extra: np.ndarray | None, name: str) -> np.ndarray:
        if extra is None or len(extra) == 0:
            return aligned
        extra = as_unit_float32(name, extra)
        if extra.shape[1] != aligned.shape[1]:
            raise ValueError(f"{name}: dimension {extra.shape[1]}, the pair has {aligned.shape[1]}")
        return np.concatenate([aligned, extra])

    return PairRetrieval(
        benchmark,
        dataset,
        to_flores(src_lang),
        to_flores(tgt_lang),
        query_outcomes(src, pool(tgt, tgt_distractors, "tgt_distractors")),
        query_outcomes(tgt, pool(src, src_distractors, "src_distractors")),
    )


# ------------------------------------------------------------------ metric rows


def retrieval_rows(
    src: np.ndarray, tgt: np.ndarray, *, src_lang: str, tgt_lang: str, dataset: str, benchmark: str = "retrieval"
) -> list[dict]:
    """Metric rows accuracy_src_tgt, accuracy_tgt_src, accuracy_mean and margin_mean for one aligned pair."""
    return score_pair(src, tgt, src_lang=src_lang, tgt_lang=tgt_lang, dataset=dataset, benchmark=benchmark).metric_rows()


def tatoeba_rows(
    src: np.ndarray, tgt: np.ndarray, *, src_lang: str, tgt_lang: str = "eng_Latn", dataset: str = "tatoeba"
) -> list[dict]:
    """Tatoeba rows: ``src`` = the xx side, ``tgt`` = English; accuracy_src_tgt is xx->en."""
    return retrieval_rows(src, tgt, src_lang=src_lang, tgt_lang=tgt_lang, dataset=dataset, benchmark="tatoeba")


def multiway_pair_scores(
    embeddings: Mapping[str, np.ndarray],
    *,
    dataset: str,
    pivot: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    xx_yy: bool = False,
    benchmark: str = "retrieval",
) -> list[PairRetrieval]:
    """Retrieval over line-aligned embeddings of several languages (e.g. FLORES held-out rows).

    Pairs are ``pairs`` if given, else (lang, ``pivot``) for every other language if ``pivot``
    is given (plus, with ``xx_yy``, every unordered pair of two other languages), else every
    unordered pair once. Each result holds both directions.
    """
    if pairs is None:
        langs = list(embeddings)
        if pivot is not None:
            if pivot not in embeddings:
                raise ValueError(f"pivot {pivot!r} has no embeddings")
            others = [lang for lang in langs if lang != pivot]
            pairs = [(lang, pivot) for lang in others] + (list(combinations(others, 2)) if xx_yy else [])
        else:
            pairs = list(combinations(langs, 2))
    return [
        score_pair(embeddings[src], embeddings[tgt], src_lang=src, tgt_lang=tgt, dataset=dataset, benchmark=benchmark)
        for src, tgt in pairs
    ]


def multiway_retrieval_rows(
    embeddings: Mapping[str, np.ndarray],
    *,
    dataset: str,
    pivot: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> list[dict]:
    """Metric rows of :func:`multiway_pair_scores` (without its items)."""
    scores = multiway_pair_scores(embeddings, dataset=dataset, pivot=pivot, pairs=pairs)
    return [row for scored in scores for row in scored.metric_rows()]


def xx_yy_rows(scores: Sequence[PairRetrieval], pivot: str) -> list[dict]:
    """Per dataset, the mean accuracy_mean and margin_mean over pairs of two non-pivot languages,
    as rows with src_lang ``group:xx-yy`` and tgt_lang null (n = pairs averaged)."""
    pivot = to_flores(pivot)
    by_dataset: dict[tuple[str, str], list[PairRetrieval]] = {}
    for scored in scores:
        if pivot not in (scored.src_lang, scored.tgt_lang):
            by_dataset.setdefault((scored.benchmark, scored.dataset), []).append(scored)
    rows = []
    for (benchmark, dataset), members in by_dataset.items():
        values = [{r["metric"]: r["value"] for r in scored.metric_rows()} for scored in members]
        for metric in ("accuracy_mean", "margin_mean"):
            mean = math.fsum(v[metric] for v in values) / len(values)
            rows.append(metric_row(benchmark, dataset, group_code(XX_YY_GROUP), None, metric, mean, len(values)))
    return rows


def dataset_pivot(pairs: Iterable[tuple[str, str | None]]) -> str | None:
    """The target language most of a dataset's (src, tgt) pairs share: its pivot.

    Pivot pairs (xx, pivot) are one per other language, while any other target language ends
    at most one fewer xx-yy pair, so the pivot is the most common target; None where no pair has
    a target or two targets tie (no pivot to tell).
    """
    counts = Counter(tgt for _, tgt in set(pairs) if tgt is not None)
    if not counts:
        return None
    (first, n_first), *rest = counts.most_common(2)
    if rest and rest[0][1] == n_first:
        return None
    return first
