"""Word aligners: one file per backend, one interface.

    aligner.align(sentences, pairs)  ->  per pair: (src int32, tgt int32, score float32) or None

`sentences` are word lists (each sentence once, however many pairs it is in); `pairs` is an
int array [P, 2] of (source, target) indices into them. None marks a pair the backend
cannot align (too long for its model); the stage counts it as dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from tasks.align.combine import Links

Progress = Callable[[int], None] | None


class WordAligner(Protocol):
    label: str  # the output's `backend` column: "wspalign", "simalign:itermax", "eflomal"

    def align(self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None) -> list[Links | None]: ...


def word_of_tokens(word_lengths: np.ndarray, token_starts: np.ndarray) -> np.ndarray:
    """Word index of each token of `" ".join(words)`, from the tokens' character starts.

    A token belongs to the first word that ends after the token starts: a word's own
    subwords, and a lone "▁" (whose offset may cover the space before a word) to the word after.
    """
    ends = np.cumsum(word_lengths + 1) - 1  # exclusive end of each word in the joined string
    return np.searchsorted(ends, token_starts, side="right")
