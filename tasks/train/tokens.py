"""Tokenisation of the training texts: each distinct text once, into padded numpy arrays.

The multi-way rows' texts are deduplicated (`distinct_texts`: a text id per distinct text, in
order of first appearance) and every distinct text is tokenised once with the fast tokenizer
(truncated to `max_length`, `tokenize`), a slice of `TOKENIZE_SLICE` texts at a time. Besides
the token ids it keeps each token's character span in its text (`TokenSpans`), which is what
ties a token to the aligner's word it belongs to (tasks/train/word_spans.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.train.text_columns import large_strings


def distinct_texts(texts: pa.Table) -> tuple[pa.LargeStringArray, np.ndarray]:
    """(distinct texts, [rows, columns] int32 text id or -1 for null) of a table of text columns.

    Text ids are given in order of first appearance, row by row (row 0's columns left to
    right, then row 1's, ...), as a dict filled in that order would give them; the
    deduplication is Arrow's `dictionary_encode` (which keeps that order) on the columns
    interleaved row by row, not a loop over texts.
    """
    n, width = texts.num_rows, texts.num_columns
    flat = (
        pa.concat_arrays([large_strings(column) for column in texts.columns]) if width else pa.array([], type=pa.large_string())
    )
    row_major = (np.arange(width, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None]).ravel()
    flat = flat.take(pa.array(row_major))
    del row_major
    present = flat.is_valid().to_numpy(zero_copy_only=False)
    encoded = flat.filter(pa.array(present)).dictionary_encode()
    ids = np.full(n * width, -1, dtype=np.int32)
    ids[present] = encoded.indices.to_numpy(zero_copy_only=False)
    return large_strings(encoded.dictionary), ids.reshape(n, width)


class TokenSpans:
    """Character spans of every text's tokens ([tokens, 2], relative to the text, -1 for special
    tokens), as `tokenize` gives them: one flat int32 array and each text's start and count in
    it, instead of one small array per text (20M of them would be some 2 GB of headers alone).
    `spans[t]` is text t's [count, 2]; `take(texts)` all of many texts' spans, concatenated."""

    def __init__(self, starts: np.ndarray, counts: np.ndarray, flat: np.ndarray) -> None:
        self.starts = np.asarray(starts, dtype=np.int64)  # [n_texts] first row in `flat`
        self.counts = np.asarray(counts, dtype=np.int64)  # [n_texts] tokens of the text
        self.flat = flat  # [total tokens, 2] int32

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, t: int) -> np.ndarray:
        start = int(self.starts[t])
        return self.flat[start : start + int(self.counts[t])]

    def take(self, texts: np.ndarray) -> np.ndarray:
        """The spans of `texts`, one after the other: [sum of their counts, 2]."""
        starts, counts = self.starts[texts], self.counts[texts]
        within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return self.flat[np.repeat(starts, counts) + within]


TOKENIZE_SLICE = 20_000  # texts through the tokenizer at a time: only these are ever Python strings


def tokenize(
    tokenizer: Any, texts: pa.Array | Sequence[str], *, max_length: int, prefix: str = "", slice_texts: int = TOKENIZE_SLICE
) -> tuple[np.ndarray, np.ndarray, TokenSpans]:
    """(token ids [n, max_length] padded, lengths [n], every text's token character spans relative to the text).

    The fast tokenizer gets `slice_texts` texts a call (the same ids and offsets as one call
    over all: each text is tokenised on its own), taken from the Arrow column a slice at a
    time; ids, lengths and spans go straight into numpy arrays.
    """
    n = len(texts)
    lengths = np.zeros(n, dtype=np.int64)
    ids = np.full((n, max_length), tokenizer.pad_token_id, dtype=np.int64)
    flat_spans: list[np.ndarray] = []
    positions = np.arange(max_length)[None, :]
    step = max(1, slice_texts)
    for start in range(0, n, step):
        stop = min(n, start + step)
        chunk = texts[start:stop]
        chunk = chunk.to_pylist() if isinstance(chunk, (pa.Array, pa.ChunkedArray)) else list(chunk)
        enc = tokenizer(
            [prefix + t for t in chunk],
            add_special_tokens=True,
            truncation=True,
            max_length=max_length,
            padding=False,
            return_attention_mask=False,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        del chunk
        counts = np.fromiter(map(len, enc["input_ids"]), dtype=np.int64, count=stop - start)
        total = int(counts.sum())
        lengths[start:stop] = counts
        block = ids[start:stop]
        block[positions < counts[:, None]] = np.fromiter(
            itertools.chain.from_iterable(enc["input_ids"]), dtype=np.int64, count=total
        )
        offsets = np.fromiter(
            itertools.chain.from_iterable(itertools.chain.from_iterable(enc["offset_mapping"])), dtype=np.int64, count=2 * total
        )
        spans = (offsets.reshape(-1, 2) - len(prefix)).astype(np.int32)
        spans[
            np.fromiter(itertools.chain.from_iterable(enc["special_tokens_mask"]), dtype=bool, count=total)
        ] = -1  # special tokens belong to no word
        flat_spans.append(spans)
    flat = np.concatenate(flat_spans) if flat_spans else np.zeros((0, 2), dtype=np.int32)
    return ids, lengths, TokenSpans(np.cumsum(lengths) - lengths, lengths, flat)  # counts: the lengths array itself
