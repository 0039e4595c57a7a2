"""What training reads: the texts, their token and word ids, the multi-way rows and the word
pairs between them (`TrainingData`, built by tasks/train/data.py, the word pairs joined in by
tasks/train/alignment_join.py), and what the objectives and the step builder look up in it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa


class WordPairs(Mapping):
    """Word pairs per (text, pivot text), as one sorted key array and one flat pair array.

    A read-only mapping `(text id, pivot text id) -> [k, 2] int32 pairs` (what a dict of them
    would give), and `lookup` for a whole batch of keys at once with one `searchsorted`, so
    the step builder never goes through Python per row.
    """

    def __init__(self, keys: np.ndarray, offsets: np.ndarray, pairs: np.ndarray, n_texts: int) -> None:
        self.keys = keys  # [n] int64, sorted: text * n_texts + pivot text
        self.offsets = offsets  # [n + 1] int64 into `pairs`
        self.pairs = pairs  # [total, 2] int32 (word of the text, word of the pivot text)
        self.n_texts = n_texts

    @classmethod
    def empty(cls) -> WordPairs:
        return cls(np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros((0, 2), dtype=np.int32), 0)

    def lookup(self, texts: np.ndarray, pivots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start in `pairs`, number of pairs) per (text, pivot text): 0 pairs where it has none."""
        texts, pivots = np.asarray(texts, dtype=np.int64), np.asarray(pivots, dtype=np.int64)
        start, count = np.zeros(len(texts), dtype=np.int64), np.zeros(len(texts), dtype=np.int64)
        if not len(self.keys):
            return start, count
        wanted = texts * self.n_texts + pivots
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        hit = (texts >= 0) & (pivots >= 0) & (texts < self.n_texts) & (pivots < self.n_texts) & (self.keys[at] == wanted)
        start[hit] = self.offsets[at[hit]]
        count[hit] = self.offsets[at[hit] + 1] - start[hit]
        return start, count

    def __getitem__(self, key: tuple[int, int]) -> np.ndarray:
        start, count = self.lookup(np.array([key[0]]), np.array([key[1]]))
        if not count[0]:
            raise KeyError(key)
        return self.pairs[start[0] : start[0] + count[0]]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        n = max(self.n_texts, 1)
        return zip((self.keys // n).tolist(), (self.keys % n).tolist())

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class TrainingData:
    texts: pa.LargeStringArray  # distinct texts by text id (in order of first appearance, row by row)
    langs: list[str]  # column order of `groups`; langs[0] is the pivot
    groups: np.ndarray  # [n_groups, n_langs] int32 text id, -1 where the row lacks the language
    group_ids: pa.LargeStringArray  # corpus group id of each row of `groups`
    token_ids: np.ndarray  # [n_texts, max_length] int64, padded with pad_id
    lengths: np.ndarray  # [n_texts] int64
    word_ids: np.ndarray  # [n_texts, max_length] int32: word index of each token, -1 for none
    alignments: WordPairs = field(default_factory=lambda: WordPairs.empty())  # (text, pivot text) -> [k, 2] word pairs
    pad_id: int = 0
    mask_id: int | None = None
    dropped: Counter = field(default_factory=Counter)
    max_pairs: int = 0

    @property
    def n_groups(self) -> int:
        return int(self.groups.shape[0])
