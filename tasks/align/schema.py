"""Arrow schema of the align stage's output: one row per aligned sentence pair.

Rows of the corpus stage's long format that share a `group_id` translate each other; the
align stage pairs them (English with every other language, or all pairs) and records which
word of the source sentence aligns with which word of the target sentence.
"""

import pyarrow as pa

ALIGNMENT_STRUCT = pa.struct(
    [
        pa.field("src", pa.int32(), nullable=False),  # index into src_words
        pa.field("tgt", pa.int32(), nullable=False),  # index into tgt_words
        pa.field("score", pa.float32(), nullable=False),  # backend confidence in [0, 1]
    ]
)

WORD_ALIGNMENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # "{group_id}:{src_lang}-{tgt_lang}"
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("src_lang", pa.string(), nullable=False),  # FLORES-200 codes
        pa.field("tgt_lang", pa.string(), nullable=False),
        pa.field("src_words", pa.list_(pa.string()), nullable=False),
        pa.field("tgt_words", pa.list_(pa.string()), nullable=False),
        pa.field("alignments", pa.list_(ALIGNMENT_STRUCT), nullable=False),
        pa.field("backend", pa.string(), nullable=False),  # "wspalign", "simalign:itermax", "eflomal"
    ]
)
