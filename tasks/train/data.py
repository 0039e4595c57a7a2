"""Training data: Arrow tables in, a table of token ids, word ids and word pairs out.

The corpus artifact (long format: one row per group and language) gives multi-way rows
(`multiway_rows`); the align artifact, when the pipeline has one, gives word pairs between a
row's pivot text (English) and another language's text. Everything the step needs is computed
once, by `build_training_data`, into a `TrainingData`:

- every distinct text is tokenised once with the fast tokenizer (truncated to `max_length`;
  tasks/train/tokens.py);
- each aligned text's words (as the aligner split them) are found in the text, and every
  subword token gets the index of the word it belongs to, or -1 (tasks/train/word_spans.py);
- the align artifact's records are joined to the rows; word pairs whose words lost all their
  tokens are dropped and counted, the rest cut to a 1-1 matching by the aligner's score
  (tasks/train/alignment_join.py).

Texts and group ids are held as Arrow string columns, not Python lists of `str`
(tasks/train/text_columns.py). The batches of the training steps, rebuilt from the step number
alone, are drawn from this table by tasks/train/batching.py.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tasks.train.alignment_join import add_alignments
from tasks.train.text_columns import large_strings
from tasks.train.tokens import distinct_texts, tokenize
from tasks.train.training_data import TrainingData

log = logging.getLogger(__name__)


def _rows_from(table: pa.Table, split: str) -> pl.DataFrame:
    df = pl.from_arrow(table)
    if "split" in df.columns:
        df = df.filter(pl.col("split") == split)
    return df.select("group_id", "lang", "text")


def multiway_rows(
    corpus: pa.Table, *, pivot: str, langs: list[str] | None, split: str = "train"
) -> tuple[pa.LargeStringArray, list[str], pa.Table]:
    """(group ids, languages with the pivot first, texts: one large_string column per language
    in that order, null where the row lacks it) for the rows that have the pivot, by group id."""
    df = _rows_from(corpus, split).unique(subset=["group_id", "lang"], keep="first", maintain_order=True)
    present = sorted(set(df["lang"].to_list()))
    if pivot not in present:
        raise ValueError(f"the {split} split has no text in the pivot language {pivot!r} (languages: {present})")
    others = [lang for lang in (langs if langs is not None else present) if lang != pivot and lang in present]
    missing = [lang for lang in (langs or []) if lang not in present and lang != pivot]
    if missing:
        log.warning("languages %s have no %s rows", missing, split)
    if not others:
        raise ValueError(f"the {split} split has no language besides the pivot {pivot!r} to train on")
    order = [pivot, *others]
    wide = df.filter(pl.col("lang").is_in(order)).pivot(on="lang", index="group_id", values="text", aggregate_function="first")
    for lang in order:
        if lang not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.String).alias(lang))
    wide = wide.filter(pl.col(pivot).is_not_null()).sort("group_id")
    others_present = pl.sum_horizontal([pl.col(lang).is_not_null() for lang in others])
    wide = wide.filter(others_present > 0)
    group_ids = large_strings(wide["group_id"].to_arrow())
    texts = pa.table({lang: large_strings(wide[lang].to_arrow()) for lang in order})
    return group_ids, order, texts


def build_training_data(
    tokenizer: Any,
    corpus: pa.Table,
    *,
    pivot: str,
    langs: list[str] | None,
    max_length: int,
    prefix: str = "",
    alignments: pa.Table | None = None,
    min_alignment_score: float = 0.0,
) -> TrainingData:
    group_ids, order, rows = multiway_rows(corpus, pivot=pivot, langs=langs)
    texts, groups = distinct_texts(rows)
    del rows
    ids, lengths, spans = tokenize(tokenizer, texts, max_length=max_length, prefix=prefix)
    data = TrainingData(
        texts=texts,
        langs=order,
        groups=groups,
        group_ids=group_ids,
        token_ids=ids,
        lengths=lengths,
        word_ids=np.full(ids.shape, -1, dtype=np.int32),
        pad_id=int(tokenizer.pad_token_id),
        mask_id=tokenizer.mask_token_id,
    )
    if alignments is not None and alignments.num_rows:
        add_alignments(data, alignments, spans, min_alignment_score)
    return data
