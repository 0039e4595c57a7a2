"""Where the aligner's words lie in a text, and which word each subword token belongs to.

Each aligned text's words (as the align stage split them) are found in the text
(`word_char_spans`, `word_char_spans_flat` for many texts at once), and every subword token
gets the index of the word it belongs to from the tokenizer's character offsets
(`token_word_ids`, with numpy: no loop over tokens), or -1. Word-level objectives (AWP,
word translation ranking) read those word ids; the alignment join sets them
(tasks/train/alignment_join.py).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tasks.train.text_columns import string_series


def word_char_spans(text: str, words: list[str]) -> np.ndarray:
    """[n_words, 2] start/end characters of each word, found left to right; (-1, -1) when not found."""
    out = np.full((len(words), 2), -1, dtype=np.int64)
    cursor = 0
    for i, word in enumerate(words):
        word = word.strip()
        if not word:
            continue
        at = text.find(word, cursor)
        if at < 0:
            continue
        out[i] = (at, at + len(word))
        cursor = at + len(word)
    return out


def token_word_ids(token_spans: np.ndarray, word_spans: np.ndarray) -> np.ndarray:
    """Word index of each token (its last character lies inside the word), -1 for none; vectorised."""
    ids = np.full(len(token_spans), -1, dtype=np.int32)
    found = np.flatnonzero(word_spans[:, 0] >= 0)
    if not len(found) or not len(token_spans):
        return ids
    starts, ends = word_spans[found, 0], word_spans[found, 1]
    last_char = token_spans[:, 1] - 1
    real = token_spans[:, 1] > token_spans[:, 0]
    pos = np.searchsorted(starts, last_char, side="right") - 1
    ok = real & (pos >= 0)
    pos_c = np.clip(pos, 0, len(found) - 1)
    ok &= last_char < ends[pos_c]
    ids[ok] = found[pos_c[ok]]
    return ids


# characters that separate the align stage's words (tasks/align/words.py: whitespace, invisible
# format and control characters) and what `str.strip()` strips, for the vectorised word search
_SEPARATOR = r"\s\p{Cc}\p{Cf}\p{Z}"
_WHITESPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())


def word_char_spans_flat(texts: pa.Array | Sequence[str], words: pl.Series) -> tuple[np.ndarray, int]:
    """`word_char_spans` of many texts, stacked: ([total words, 2], texts searched one by one).

    `word_char_spans` looks for each (stripped) word from the end of the previous one. Where a
    text is its words with separators around them (as the align stage splits it: the text
    without separator characters is its words joined, no word holds a separator, and each word
    lies within one run of non-separators), that search lands on exactly those positions: what
    lies between two words is separators only, and a word cannot start on one. Such texts get
    their spans from run and word lengths and cumulative sums, all texts at once; any other
    text (a word missing or out of order, words that are not the text's own) is searched as
    `word_char_spans` does, and counted.
    """
    n_words = words.list.len().fill_null(0).to_numpy().astype(np.int64)
    out = np.full((int(n_words.sum()), 2), -1, dtype=np.int64)
    word_offset = np.cumsum(n_words) - n_words
    frame = pl.DataFrame({"text": string_series(texts), "words": words.list.eval(pl.element().str.strip_chars(_WHITESPACE))})
    tiled = (
        frame.select(
            (pl.col("text").str.replace_all(f"[{_SEPARATOR}]+", "") == pl.col("words").list.join(""))
            & ~pl.col("words").list.eval(pl.element().str.contains(f"[{_SEPARATOR}]")).list.any()
        )
        .to_series()
        .fill_null(False)
        .to_numpy()
    )
    fast = np.flatnonzero(tiled)
    sub = frame[fast].select(
        run=pl.col("text").str.extract_all(f"[^{_SEPARATOR}]+").list.eval(pl.element().str.len_chars()),
        piece=pl.col("text").str.extract_all(f"[{_SEPARATOR}]*[^{_SEPARATOR}]+").list.eval(pl.element().str.len_chars()),
        word=pl.col("words").list.eval(pl.element().str.len_chars()),
    )
    run_len, piece_len, word_len = (_flat_lengths(sub[name]) for name in ("run", "piece", "word"))
    runs_per_text = sub["run"].list.len().to_numpy().astype(np.int64)
    # a run's start in its text: the pieces (separators + run) before it in the text, then its own separators
    piece_end = np.cumsum(piece_len)
    text_chars = sub["piece"].list.sum().fill_null(0).to_numpy().astype(np.int64)  # up to its last run
    run_start = piece_end - run_len - np.repeat(np.cumsum(text_chars) - text_chars, runs_per_text)
    # words and runs cover the same characters once the separators are out: compact positions
    run_compact = np.cumsum(run_len) - run_len
    word_compact = np.cumsum(word_len) - word_len
    fast_words = n_words[fast]
    word_text = np.repeat(np.arange(len(fast)), fast_words)
    word_index = (
        np.repeat(word_offset[fast], fast_words)
        + np.arange(len(word_len))
        - np.repeat(np.cumsum(fast_words) - fast_words, fast_words)
    )
    real = np.flatnonzero(word_len > 0)  # a word that strips to nothing is not looked for
    j = np.searchsorted(run_compact, word_compact[real], side="right") - 1
    inside = (j >= 0) & (word_compact[real] + word_len[real] <= run_compact[np.maximum(j, 0)] + run_len[np.maximum(j, 0)])
    begin = run_start[np.maximum(j, 0)] + word_compact[real] - run_compact[np.maximum(j, 0)]
    out[word_index[real], 0] = begin
    out[word_index[real], 1] = begin + word_len[real]
    slow = np.union1d(np.flatnonzero(~tiled), fast[np.unique(word_text[real[~inside]])])
    if len(slow):
        listed = words[slow.tolist()].to_list()
        slow_texts = frame["text"][slow.tolist()].to_list()
        for t, text, text_words in zip(slow.tolist(), slow_texts, listed):
            out[word_offset[t] : word_offset[t] + n_words[t]] = word_char_spans(text, text_words)
    return out, len(slow)


def _flat_lengths(lists: pl.Series) -> np.ndarray:
    """The values of a list column, flattened (empty lists give nothing), as int64."""
    return pc.list_flatten(lists.to_arrow()).to_numpy(zero_copy_only=False).astype(np.int64)
