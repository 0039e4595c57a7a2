"""Arrow schema of the evaluate stage's metrics table: one row per (benchmark, dataset, pair, metric)."""

import pyarrow as pa

METRICS_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),  # tatoeba | bucc | sts | retrieval | mteb
        pa.field("dataset", pa.string(), nullable=False),  # e.g. "tatoeba", "flores200-dev", "STS.input.track5.en-en"
        pa.field("src_lang", pa.string(), nullable=False),  # FLORES-200 code, or "group:<name>" for group averages
        pa.field("tgt_lang", pa.string(), nullable=True),  # FLORES-200 code; null where a metric has no target side
        pa.field("metric", pa.string(), nullable=False),  # accuracy_src_tgt | accuracy_tgt_src | accuracy_mean | precision | recall | f1 | threshold | spearman | ...
        pa.field("value", pa.float64(), nullable=False),
        pa.field("n", pa.int64(), nullable=False),  # items the metric was computed on
    ]
)
