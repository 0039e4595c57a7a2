"""What WSPAlign's questions are assembled from, at token level: the tokenizer's special tokens
around a question and its context (`PairTemplate`), every sentence tokenised once into one flat
pool (`TokenizedSentences`), and which word each token belongs to (`words_of_tokens`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

MARKER = "¶"  # put around the word asked about: ` ¶ word ¶ `
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class WspalignLoadError(ValueError):
    """The configured WSPAlign model cannot be loaded; the message names it."""


@dataclass(frozen=True)
class PairTemplate:
    """Special tokens around question and context: prefix Q middle C suffix (from the tokenizer)."""

    prefix: np.ndarray
    middle: np.ndarray
    suffix: np.ndarray
    prefix_types: np.ndarray
    middle_types: np.ndarray
    suffix_types: np.ndarray
    question_type: int
    context_type: int

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> PairTemplate:
        q = tokenizer("a", add_special_tokens=False)["input_ids"]
        c = tokenizer("b", add_special_tokens=False)["input_ids"]
        enc = tokenizer("a", "b", return_token_type_ids=True)
        ids, types, seq = np.array(enc["input_ids"]), np.array(enc["token_type_ids"]), enc.sequence_ids(0)
        q_pos = [i for i, s in enumerate(seq) if s == 0]
        c_pos = [i for i, s in enumerate(seq) if s == 1]
        if len(q_pos) != len(q) or len(c_pos) != len(c) or q_pos != list(range(q_pos[0], q_pos[-1] + 1)) or c_pos[0] <= q_pos[-1]:
            raise WspalignLoadError("the tokenizer's pair encoding is not `prefix question middle context suffix`")
        a, b, c0, d = q_pos[0], q_pos[-1] + 1, c_pos[0], c_pos[-1] + 1
        return cls(ids[:a], ids[b:c0], ids[d:], types[:a], types[b:c0], types[d:], int(types[a]), int(types[c0]))

    @property
    def n_special(self) -> int:
        return len(self.prefix) + len(self.middle) + len(self.suffix)


@dataclass(frozen=True)
class TokenizedSentences:
    """Every sentence tokenised once, in one flat pool of token ids."""

    ids: np.ndarray  # int64 [tokens]: all sentences' tokens, concatenated
    word: np.ndarray  # int64 [tokens]: word index (within its sentence) of each token
    offset: np.ndarray  # int64 [sentences]: first token of each sentence in the pool
    length: np.ndarray  # int64 [sentences]: tokens per sentence
    word_offset: np.ndarray  # int64 [sentences]: first word of each sentence in `first`/`end`
    n_words: np.ndarray  # int64 [sentences]
    first: np.ndarray  # int64 [words]: first token of each word, within its sentence
    end: np.ndarray  # int64 [words]: one past the last token of each word (== first: no tokens)


def run_starts(counts: np.ndarray) -> np.ndarray:
    """Offset of each run in a flat array of runs of `counts` elements."""
    return (np.cumsum(counts) - counts).astype(np.int64)


def words_of_tokens(
    word_len: np.ndarray, n_words: np.ndarray, token_start: np.ndarray, n_tokens: np.ndarray
) -> tuple[np.ndarray, ...]:
    """For every sentence's `" ".join(words)` at once (flat arrays, sentence after sentence): each
    token's word within its sentence, and each word's first and one-past-last token within its
    sentence. A token belongs to the first word that ends after the token starts (a word's own
    subwords, and a lone "▁", whose offset may cover the space before a word, to the word after):
    `base.word_of_tokens` sentence by sentence, done as one search over every sentence."""
    n_sent = len(n_words)
    sent_of_word = np.repeat(np.arange(n_sent), n_words)
    sent_of_token = np.repeat(np.arange(n_sent), n_tokens)
    word_start = run_starts(n_words)
    csum = np.concatenate([[0], np.cumsum(word_len + 1)]).astype(np.int64)
    before = csum[word_start]  # characters (and spaces) of the sentences before
    ends = csum[1:] - before[sent_of_word] - 1  # exclusive end of each word in its joined sentence
    chars = csum[word_start + n_words] - before
    # sentence s occupies [shift[s], shift[s] + chars[s]] on one axis, so one search serves all
    shift = run_starts(chars + 1)
    global_word = np.searchsorted(ends + shift[sent_of_word], token_start + shift[sent_of_token], side="right")
    token_word = np.minimum(global_word - word_start[sent_of_token], n_words[sent_of_token]).astype(np.int64)
    # each sentence's word numbers (0..n_words, n_words for tokens past the last word) on their own axis
    key = token_word + (word_start + np.arange(n_sent))[sent_of_token]
    word_key = np.arange(len(word_len)) + sent_of_word
    token_offset = run_starts(n_tokens)[sent_of_word]
    first = np.searchsorted(key, word_key, side="left") - token_offset
    end = np.searchsorted(key, word_key, side="right") - token_offset
    return token_word, first.astype(np.int64), end.astype(np.int64)
