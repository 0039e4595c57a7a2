"""Arrow schema of the evaluate stage's metrics table: one row per (benchmark, dataset, pair, metric)."""

from typing import Any

import pyarrow as pa

METRICS_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),  # tatoeba | bucc | sts | retrieval | mteb
        pa.field("dataset", pa.string(), nullable=False),  # e.g. "tatoeba", "flores200-dev", "STS.input.track5.en-en"
        pa.field("src_lang", pa.string(), nullable=False),  # FLORES-200 code, or "group:<name>" for group averages
        pa.field("tgt_lang", pa.string(), nullable=True),  # FLORES-200 code; null where a metric has no target side
        pa.field(
            "metric", pa.string(), nullable=False
        ),  # accuracy_src_tgt | accuracy_tgt_src | accuracy_mean | precision | recall | f1 | threshold | spearman | ...
        pa.field("value", pa.float64(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),  # items the metric was computed on
    ]
)

# Per-query outcomes of the retrieval benchmarks (tatoeba, retrieval): what paired bootstrap
# intervals between two models resample (tasks/evaluate/bootstrap.py). Written into the evaluate
# artifact as `items.parquet` (the scored model) and `items/base_items.parquet` (the untrained
# base, when it is scored beside a trained model).
ITEMS_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("src_lang", pa.string(), nullable=False),  # FLORES-200 code
        pa.field("tgt_lang", pa.string(), nullable=False),  # FLORES-200 code
        pa.field("direction", pa.string(), nullable=False),  # src_tgt | tgt_src: which side the query is on
        pa.field("item", pa.int32(), nullable=False),  # the query's row in the benchmark pair
        pa.field("correct", pa.bool_(), nullable=False),  # top-1 neighbour is the translation
        pa.field("margin", pa.float32(), nullable=False),  # cos(query, translation) - max cos(query, any other candidate)
    ]
)

# Per sentence pair of the STS benchmarks: the model's cosine and the gold score, what the paired
# Spearman bootstrap between two models resamples (tasks/evaluate/bootstrap.py). Written as
# `sts_items.parquet` (the scored model) and `items/base_sts_items.parquet` (the untrained base).
STS_ITEMS_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("src_lang", pa.string(), nullable=False),  # FLORES-200 code of sentence 1
        pa.field("tgt_lang", pa.string(), nullable=False),  # FLORES-200 code of sentence 2
        pa.field("item", pa.int32(), nullable=False),  # the pair's row in the set
        pa.field("cosine", pa.float64(), nullable=False),
        pa.field("gold", pa.float64(), nullable=False),
    ]
)

# What identifies a row, so that two models' rows pair up on it: every column but the measured values.
METRICS_KEY = tuple(name for name in METRICS_SCHEMA.names if name not in ("value", "n"))
ITEM_KEY = tuple(name for name in ITEMS_SCHEMA.names if name not in ("correct", "margin"))
STS_ITEM_KEY = tuple(name for name in STS_ITEMS_SCHEMA.names if name not in ("cosine", "gold"))


def metric_rows(table: pa.Table, what: str) -> list[dict[str, Any]]:
    """A metrics table's rows; ValueError when it lacks a METRICS_SCHEMA column or repeats a METRICS_KEY."""
    missing = [c for c in METRICS_SCHEMA.names if c not in table.column_names]
    if missing:
        raise ValueError(f"{what} table lacks columns {missing}; expected the METRICS_SCHEMA columns")
    rows = table.select(METRICS_SCHEMA.names).to_pylist()
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        key = tuple(row[c] for c in METRICS_KEY)
        if key in seen:
            raise ValueError(f"{what} table has more than one row for {dict(zip(METRICS_KEY, key))}")
        seen.add(key)
    return rows
