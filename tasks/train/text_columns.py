"""How the training data holds texts and group ids: Arrow string columns, not lists of `str`.

Texts and group ids are held as Arrow string columns (`pa.LargeStringArray`: one offsets
array and one bytes buffer), not as Python lists of `str`: at 10M rows a list of 20M `str`
objects alone is about 2 GB (some 90 bytes a text) where the column is the text's bytes plus
8. The corpus read, the deduplication of texts (`dictionary_encode`: ids in order of first
appearance), the tokenisation (slices of `TOKENIZE_SLICE` texts through the fast tokenizer)
and the alignment join go column to column; only a slice being tokenised is ever a list.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pyarrow as pa


def large_strings(values: pa.Array | pa.ChunkedArray) -> pa.LargeStringArray:
    """One contiguous `large_string` array (64-bit offsets: no 2 GiB limit on the bytes)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], type=pa.large_string())
    return values.cast(pa.large_string())


def string_series(values: pa.Array | pa.ChunkedArray | Sequence[str]) -> pl.Series:
    """A polars String series of an Arrow string column (no copy to Python) or of a list of str."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pl.Series(values.cast(pa.large_string())).cast(pl.String)
    return pl.Series(list(values), dtype=pl.String)
