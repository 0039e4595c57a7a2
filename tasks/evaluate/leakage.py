"""Evaluation leakage: benchmark sentences that also occur, normalised, in the training rows.

A score is contaminated when the model may have trained on the sentences it is scored on. For
every set of sentences the evaluate stage scores (a Tatoeba language pair, a FLORES or corpus-dev
pair, a BUCC split, an STS track), this counts the sentences whose near-duplicate key
(tasks/corpus/dedup.py: the corpus dedupe's normalisation, one home) occurs among the training
rows of the same language: the `train` split of the corpus, or of the translate artifact when
the pipeline translates (what the train stage reads, `tasks.train.stage.training_table`).

The comparison is a hash join of (language, key) pairs in polars, never pairwise: its cost is
one pass over the training rows plus one over the benchmark sentences.

    >>> sets = [SentenceSet("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", kk_sentences, en_sentences)]
    >>> table = overlap_table(sets, training_keys(training_rows))
    >>> table.filter(pl.col("items_in_training") > 0)  # contaminated pairs

MTEB and XNLI read their data through their own libraries and are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from tasks.corpus.dedup import near_duplicate_key

# One row per scored sentence set (same benchmark/dataset/src_lang/tgt_lang as its metric rows).
LEAKAGE_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("src_lang", pa.string(), nullable=False),
        pa.field("tgt_lang", pa.string(), nullable=False),
        pa.field("items", pa.int64(), nullable=False),  # pairs (aligned sets) or sentences of both sides
        pa.field("src_in_training", pa.int64(), nullable=False),  # src sentences whose key is in the training rows
        pa.field("tgt_in_training", pa.int64(), nullable=False),
        pa.field("items_in_training", pa.int64(), nullable=False),  # items with a side (either side) in training
        pa.field("share", pa.float64(), nullable=False),  # items_in_training / items
    ]
)


@dataclass(frozen=True)
class SentenceSet:
    """The sentences behind one scored pair; `aligned`: src[i] translates tgt[i] and an item is a pair."""

    benchmark: str
    dataset: str
    src_lang: str
    tgt_lang: str
    src: Sequence[str]
    tgt: Sequence[str]
    aligned: bool = True


def training_keys(rows: pa.Table) -> pl.DataFrame:
    """Distinct (lang, key) of the `train` rows of a corpus-layout table (lang, text[, split])."""
    frame = pl.from_arrow(rows.select([c for c in ("lang", "text", "split") if c in rows.column_names]))
    assert isinstance(frame, pl.DataFrame)
    if "split" in frame.columns:
        frame = frame.filter(pl.col("split") == "train")
    return frame.select(pl.col("lang"), near_duplicate_key(pl.col("text")).alias("key")).drop_nulls("key").unique()


def overlap_table(sets: Sequence[SentenceSet], training: pl.DataFrame) -> pa.Table:
    """LEAKAGE_SCHEMA rows, one per set: how many of its sentences occur, normalised, in `training`."""
    if not sets:
        return LEAKAGE_SCHEMA.empty_table()
    parts = []
    for index, s in enumerate(sets):
        for side, lang, texts in (("src", s.src_lang, s.src), ("tgt", s.tgt_lang, s.tgt)):
            parts.append(
                pl.DataFrame(
                    {"set": index, "side": side, "lang": lang, "item": pl.int_range(len(texts), eager=True), "text": list(texts)},
                    schema_overrides={"set": pl.UInt32, "item": pl.Int64, "text": pl.String},
                )
            )
    sentences = pl.concat(parts).with_columns(near_duplicate_key(pl.col("text")).alias("key"))
    seen = training.select("lang", "key").unique().with_columns(pl.lit(True).alias("in_training"))
    flagged = sentences.join(seen, on=["lang", "key"], how="left").with_columns(pl.col("in_training").fill_null(False))
    per_side = flagged.group_by("set", "side").agg(pl.col("in_training").sum().alias("n"), pl.len().alias("sentences"))
    per_item = (
        flagged.group_by("set", "item")
        .agg(pl.col("in_training").any().alias("leaked"))
        .group_by("set")
        .agg(pl.col("leaked").sum().alias("pairs_in_training"), pl.len().alias("pairs"))
    )
    side_counts = {(int(row[0]), row[1]): (int(row[2]), int(row[3])) for row in per_side.iter_rows()}
    item_counts = {int(row[0]): (int(row[1]), int(row[2])) for row in per_item.iter_rows()}
    rows = []
    for index, s in enumerate(sets):
        src_in, src_n = side_counts.get((index, "src"), (0, 0))
        tgt_in, tgt_n = side_counts.get((index, "tgt"), (0, 0))
        if s.aligned:
            leaked, items = item_counts.get(index, (0, 0))
        else:
            leaked, items = src_in + tgt_in, src_n + tgt_n
        rows.append(
            {
                "benchmark": s.benchmark, "dataset": s.dataset, "src_lang": s.src_lang, "tgt_lang": s.tgt_lang,
                "items": items, "src_in_training": src_in, "tgt_in_training": tgt_in,
                "items_in_training": leaked, "share": leaked / items if items else 0.0,
            }
        )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=LEAKAGE_SCHEMA)


def leakage_summary(table: pa.Table) -> dict[str, dict[str, int | float]]:
    """Per benchmark/dataset: items, items with a side in training, and their share (the manifest's metrics)."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    out: dict[str, dict[str, int | float]] = {}
    for (benchmark, dataset), part in frame.group_by(["benchmark", "dataset"], maintain_order=True):
        items, leaked = int(part["items"].sum()), int(part["items_in_training"].sum())
        out[f"{benchmark}/{dataset}"] = {
            "items": items,
            "items_in_training": leaked,
            "share": round(leaked / items, 4) if items else 0.0,
        }
    return out
