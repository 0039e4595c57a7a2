"""Arrow schema of the corpus stage's output: long format, one row per (group, language)."""

import pyarrow as pa

CORPUS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # "{group_id}:{lang}"
        pa.field("group_id", pa.string(), nullable=False),  # rows sharing it translate each other
        pa.field("lang", pa.string(), nullable=False),  # FLORES-200 code, e.g. kaz_Cyrl
        pa.field("text", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # "train" or "dev"
        pa.field("source", pa.string(), nullable=False),  # the config's source name
    ]
)
