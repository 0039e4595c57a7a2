"""Training data: Arrow tables in, deterministic batches of token ids out.

The corpus artifact (long format: one row per group and language) gives multi-way rows;
the align artifact, when the pipeline has one, gives word pairs between a row's pivot text
(English) and another language's text. Everything the step needs is computed once here:

- every distinct text is tokenised once with the fast tokenizer (truncated to `max_length`);
- each aligned text's words (as the aligner split them) are found in the text, and every
  subword token gets the index of the word it belongs to (from the tokenizer's character
  offsets, with numpy: no loop over tokens), or -1;
- word pairs whose words lost all their tokens (a word that tokenises to nothing, or one cut
  off by truncation) are dropped and counted;
- the rest are cut to a 1-1 matching by the aligner's score (each word keeps its best free
  partner, on either side), for all sentence pairs at once (`one_to_one_pairs`).

Texts and group ids are held as Arrow string columns (`pa.LargeStringArray`: one offsets
array and one bytes buffer), not as Python lists of `str`: at 10M rows a list of 20M `str`
objects alone is about 2 GB (some 90 bytes a text) where the column is the text's bytes plus
8. The corpus read, the deduplication of texts (`dictionary_encode`: ids in order of first
appearance), the tokenisation (slices of `TOKENIZE_SLICE` texts through the fast tokenizer)
and the alignment join go column to column; only a slice being tokenised is ever a list.

A batch is `batch_size` rows, each with the pivot text in view 0 and up to `views - 1` other
languages after it; no text appears twice in a batch (duplicates would be false negatives).
Which languages a row shows and the order of rows are drawn from `(seed, epoch)`, and what an
objective draws for a step (AWP: which aligned words it masks) from `(seed, step)`, so the batch
of any step can be rebuilt from the step number alone: that is what makes resume exact.
"""

from __future__ import annotations

import itertools
import logging
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)


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


def _rows_from(table: pa.Table, split: str) -> pl.DataFrame:
    df = pl.from_arrow(table)
    if "split" in df.columns:
        df = df.filter(pl.col("split") == split)
    return df.select("group_id", "lang", "text")


def multiway_rows(
    corpus: pa.Table, *, pivot: str, langs: list[str] | None, split: str = "train"
) -> tuple[pa.LargeStringArray, list[str], pa.Table]:
    """(group ids, languages with the pivot first, texts: one large_string column per language
    in that order, null where the row lacks it) for the rows that have the pivot, by group id."""
    df = _rows_from(corpus, split).unique(subset=["group_id", "lang"], keep="first", maintain_order=True)
    present = sorted(set(df["lang"].to_list()))
    if pivot not in present:
        raise ValueError(f"the {split} split has no text in the pivot language {pivot!r} (languages: {present})")
    others = [lang for lang in (langs if langs is not None else present) if lang != pivot and lang in present]
    missing = [lang for lang in (langs or []) if lang not in present and lang != pivot]
    if missing:
        log.warning("languages %s have no %s rows", missing, split)
    if not others:
        raise ValueError(f"the {split} split has no language besides the pivot {pivot!r} to train on")
    order = [pivot, *others]
    wide = df.filter(pl.col("lang").is_in(order)).pivot(on="lang", index="group_id", values="text", aggregate_function="first")
    for lang in order:
        if lang not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.String).alias(lang))
    wide = wide.filter(pl.col(pivot).is_not_null()).sort("group_id")
    others_present = pl.sum_horizontal([pl.col(lang).is_not_null() for lang in others])
    wide = wide.filter(others_present > 0)
    group_ids = _large_strings(wide["group_id"].to_arrow())
    texts = pa.table({lang: _large_strings(wide[lang].to_arrow()) for lang in order})
    return group_ids, order, texts


def _large_strings(values: pa.Array | pa.ChunkedArray) -> pa.LargeStringArray:
    """One contiguous `large_string` array (64-bit offsets: no 2 GiB limit on the bytes)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], type=pa.large_string())
    return values.cast(pa.large_string())


def distinct_texts(texts: pa.Table) -> tuple[pa.LargeStringArray, np.ndarray]:
    """(distinct texts, [rows, columns] int32 text id or -1 for null) of a table of text columns.

    Text ids are given in order of first appearance, row by row (row 0's columns left to
    right, then row 1's, ...), as a dict filled in that order would give them; the
    deduplication is Arrow's `dictionary_encode` (which keeps that order) on the columns
    interleaved row by row, not a loop over texts.
    """
    n, width = texts.num_rows, texts.num_columns
    flat = (
        pa.concat_arrays([_large_strings(column) for column in texts.columns]) if width else pa.array([], type=pa.large_string())
    )
    row_major = (np.arange(width, dtype=np.int64)[None, :] * n + np.arange(n, dtype=np.int64)[:, None]).ravel()
    flat = flat.take(pa.array(row_major))
    del row_major
    present = flat.is_valid().to_numpy(zero_copy_only=False)
    encoded = flat.filter(pa.array(present)).dictionary_encode()
    ids = np.full(n * width, -1, dtype=np.int32)
    ids[present] = encoded.indices.to_numpy(zero_copy_only=False)
    return _large_strings(encoded.dictionary), ids.reshape(n, width)


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


def build_training_data(
    tokenizer: Any,
    corpus: pa.Table,
    *,
    pivot: str,
    langs: list[str] | None,
    max_length: int,
    prefix: str = "",
    alignments: pa.Table | None = None,
    min_alignment_score: float = 0.0,
) -> TrainingData:
    group_ids, order, rows = multiway_rows(corpus, pivot=pivot, langs=langs)
    texts, groups = distinct_texts(rows)
    del rows
    ids, lengths, spans = tokenize(tokenizer, texts, max_length=max_length, prefix=prefix)
    data = TrainingData(
        texts=texts,
        langs=order,
        groups=groups,
        group_ids=group_ids,
        token_ids=ids,
        lengths=lengths,
        word_ids=np.full(ids.shape, -1, dtype=np.int32),
        pad_id=int(tokenizer.pad_token_id),
        mask_id=tokenizer.mask_token_id,
    )
    if alignments is not None and alignments.num_rows:
        add_alignments(data, alignments, spans, min_alignment_score)
    return data


def one_to_one_pairs(pairs: np.ndarray, scores: np.ndarray, sentence: np.ndarray | None = None) -> np.ndarray:
    """Which word pairs the greedy 1-1 matching by score keeps: a bool mask over `pairs` [k, 2].

    Within each sentence pair (`sentence`, an id per pair; default: all one), pairs are taken
    highest score first (ties: lower source word, then lower target word) and a pair is kept
    when neither of its words is in a pair kept before, so every word on either side keeps one
    partner, its best-scoring one still free. Vectorised by rounds instead of a loop over pairs,
    all sentence pairs at once: each round keeps every pair that is the best remaining pair of
    both its words (the best of a sentence pair always is, so a round keeps at least one), then
    drops the pairs that touch a kept word. That gives the same matching as the pair-by-pair
    greedy (a pair best at both its words cannot lose either word to a pair ranked above it).
    Rounds are few (3 for 10,000 synthetic sentence pairs with random scores and 20% extra
    links: 18 us per sentence pair), at worst one per pair of a chain of ever better pairs.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    sentence = np.zeros(len(pairs), dtype=np.int64) if sentence is None else np.asarray(sentence, dtype=np.int64)
    width = int(pairs.max(initial=0)) + 1
    src_key, tgt_key = sentence * width + pairs[:, 0], sentence * width + pairs[:, 1]  # a word of a sentence
    order = np.lexsort((pairs[:, 1], pairs[:, 0], -np.asarray(scores, dtype=np.float64)))
    src_key, tgt_key = src_key[order], tgt_key[order]
    keep = np.zeros(len(order), dtype=bool)
    alive = np.ones(len(order), dtype=bool)
    while alive.any():
        cand = np.flatnonzero(alive)  # in rank order: the first pair of each word is its best
        _, best_src = np.unique(src_key[cand], return_index=True)
        _, best_tgt = np.unique(tgt_key[cand], return_index=True)
        dominant = np.intersect1d(cand[best_src], cand[best_tgt], assume_unique=True)
        keep[dominant] = True
        alive &= ~np.isin(src_key, src_key[dominant]) & ~np.isin(tgt_key, tgt_key[dominant])
    mask = np.zeros(len(order), dtype=bool)
    mask[order[keep]] = True
    return mask


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


JOIN_SLICE_RECORDS = 200_000  # align records joined at a time: the join's working memory is flat in the records


def add_alignments(
    data: TrainingData, table: pa.Table, spans: TokenSpans, min_score: float, slice_records: int = JOIN_SLICE_RECORDS
) -> None:
    """Join the align artifact's rows to the training rows (polars/numpy), `slice_records` records at a time.

    Per record, in table order: a record is stored other -> pivot (a pivot -> other one is
    swapped); one outside the training rows or whose text is missing is dropped and counted.
    The first record that names a text fixes that text's words (and its tokens' word ids); a
    later record giving the text other words is dropped as a mismatch. Links under
    `min_score`, outside the words or on a word without tokens are dropped; the rest are cut
    to a 1-1 matching per record by score. Where two records give the same (text, pivot
    text), the later one's pairs are kept. The records are taken in slices, so the working
    memory does not grow with their number; what carries over between slices is one number
    per text (the record that fixed its words) and the kept pairs (the output).
    """
    columns = ["group_id", "src_lang", "tgt_lang", "src_words", "tgt_words", "alignments"]
    table = table.select(columns)
    rows = GroupRows(data.group_ids)
    defined_by = np.full(len(data.texts), -1, dtype=np.int64)  # 2 * record + side of the record that fixed a text's words
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for start in range(0, table.num_rows, max(1, slice_records)):
        part = _join_slice(
            data, table, start, min(table.num_rows, start + max(1, slice_records)), rows, spans, min_score, defined_by
        )
        if part is not None:
            parts.append(part)
    if not parts:
        return
    key, count = np.concatenate([part[1] for part in parts]), np.concatenate([part[2] for part in parts])
    pairs = np.empty((int(count.sum()), 2), dtype=np.int32)
    filled = 0
    for part in parts:  # one copy of the pairs at a time: each slice's is dropped once copied
        pairs[filled : filled + len(part[3])] = part[3]
        filled += len(part[3])
    del parts, part
    data.max_pairs = max(data.max_pairs, int(count.max()))
    # the later record of a (text, pivot text) wins: records are in table order
    keys, last = np.unique(key[::-1], return_index=True)
    chosen = len(key) - 1 - last  # in key order
    del key, last
    first_pair = np.cumsum(count) - count
    n = count[chosen]
    offsets = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    ordered = np.empty((int(offsets[-1]), 2), dtype=np.int32)
    for lo in range(
        0, len(chosen), max(1, slice_records)
    ):  # into key order a slice of keys at a time (the index is 8 bytes a pair)
        hi = min(len(chosen), lo + max(1, slice_records))
        k = n[lo:hi]
        at = np.repeat(first_pair[chosen[lo:hi]], k) + np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
        ordered[offsets[lo] : offsets[hi]] = pairs[at]
    data.alignments = WordPairs(keys, offsets, ordered, len(data.texts))


def _join_slice(
    data: TrainingData,
    table: pa.Table,
    begin: int,
    stop: int,
    rows: GroupRows,
    spans: TokenSpans,
    min_score: float,
    defined_by: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Records [begin, stop) of the join: sets the word ids of the texts they name first and
    returns (record, key, number of pairs, pairs [k, 2] int32) of those left with pairs."""
    pivot = data.langs[0]
    n_texts = len(data.texts)
    lang_col = {lang: c for c, lang in enumerate(data.langs)}
    part = table.slice(begin, stop - begin)
    records = (
        pl.from_arrow(part.select(["group_id", "src_lang", "tgt_lang", "src_words", "tgt_words"]))
        .with_columns(swap=_swapped(pivot))
        .with_columns(
            other_lang=pl.when("swap").then("tgt_lang").otherwise("src_lang"),
            pivot_lang=pl.when("swap").then("src_lang").otherwise("tgt_lang"),
            other_words=pl.when("swap").then("tgt_words").otherwise("src_words"),
            pivot_words=pl.when("swap").then("src_words").otherwise("tgt_words"),
        )
        .with_columns(
            col=pl.col("other_lang").replace_strict(list(lang_col), list(lang_col.values()), default=-1, return_dtype=pl.Int64)
        )
        .select("group_id", "swap", "pivot_lang", "other_words", "pivot_words", "col")
    )
    n = records.height
    swap = records["swap"].to_numpy()
    col, row = records["col"].to_numpy(), rows.find(records["group_id"])
    outside = (records["pivot_lang"] != pivot).to_numpy() | (col < 0) | (row < 0)
    src_t = np.where(outside, -1, data.groups[np.maximum(row, 0), np.maximum(col, 0)]).astype(np.int64)
    tgt_t = np.where(outside, -1, data.groups[np.maximum(row, 0), 0]).astype(np.int64)
    without_text = ~outside & (src_t < 0)
    if outside.any():
        data.dropped["alignment_outside_training_rows"] += int(outside.sum())
    if without_text.any():
        data.dropped["alignment_without_text"] += int(without_text.sum())

    # the first record (other side, then pivot side) that names a text fixes its words;
    # a text fixed in an earlier slice is compared with the words of the record that fixed it
    named = np.flatnonzero(~outside & ~without_text)
    words = records.select("other_words", "pivot_words")[named]
    events = pl.DataFrame({
        "record": np.concatenate([named, named]),
        "side": np.repeat(np.array([0, 1], dtype=np.int8), len(named)),
        "text": np.concatenate([src_t[named], tgt_t[named]]),
        "words": pl.concat([words["other_words"], words["pivot_words"]]),
    }).sort("record", "side")  # fmt: skip
    event_texts = events["text"].to_numpy()
    earlier = _distinct(event_texts[defined_by[event_texts] >= 0])
    events = (
        events.join(_defining_words(table, pivot, earlier, defined_by[earlier]), on="text", how="left", maintain_order="left")
        .with_columns(fixed=pl.col("fixed_words").is_not_null())
        .with_columns(
            first=(pl.int_range(pl.len()).over("text") == 0) & ~pl.col("fixed"),
            same=pl.col("words") == pl.coalesce("fixed_words", pl.col("words").first().over("text")),
        )
    )
    mismatch = np.zeros(n, dtype=bool)
    mismatch[events.filter(~pl.col("same"))["record"].to_numpy()] = True
    if mismatch.any():
        data.dropped["alignment_words_mismatch"] += int(mismatch.sum())
    defining = events.filter("first")
    defining_texts = defining["text"].to_numpy()
    defined_by[defining_texts] = 2 * (begin + defining["record"].to_numpy().astype(np.int64)) + defining["side"].to_numpy()
    _set_word_ids(data, defining_texts, defining["words"], spans)

    # links: kept by score, swapped to (other word, pivot word), inside the words, with tokens
    links = part.column("alignments").combine_chunks()
    link_record = np.repeat(np.arange(n), pc.list_value_length(links).fill_null(0).to_numpy(zero_copy_only=False))
    flat = pc.list_flatten(links)
    src = flat.field("src").to_numpy(zero_copy_only=False).astype(np.int64)
    tgt = flat.field("tgt").to_numpy(zero_copy_only=False).astype(np.int64)
    scores = flat.field("score").to_numpy(zero_copy_only=False).astype(np.float64)
    link_swap = swap[link_record]
    a, b = np.where(link_swap, tgt, src), np.where(link_swap, src, tgt)
    n_other_record = records["other_words"].list.len().to_numpy().astype(np.int64)
    n_pivot_record = records["pivot_words"].list.len().to_numpy().astype(np.int64)
    n_other, n_pivot = n_other_record[link_record], n_pivot_record[link_record]
    checked = ~outside & ~without_text & ~mismatch
    in_range = (scores >= min_score) & checked[link_record] & (a >= 0) & (b >= 0) & (a < n_other) & (b < n_pivot)
    used = _distinct(np.concatenate([src_t[checked], tgt_t[checked]]))  # their words are fixed: word ids set
    used_ids = data.word_ids[used]
    has_word = used_ids >= 0
    stride = int(max(n_other_record.max(initial=0), n_pivot_record.max(initial=0), used_ids.max(initial=-1) + 1)) + 1
    with_tokens = np.sort(np.repeat(used, has_word.sum(axis=1)) * stride + used_ids[has_word])  # (text, word) with a token
    la, lb = src_t[link_record], tgt_t[link_record]
    has_tokens = in_range & _members(la * stride + a, with_tokens) & _members(lb * stride + b, with_tokens)
    if checked.any():
        data.dropped["word_pair_without_tokens"] += int(in_range.sum() - has_tokens.sum())
    found = np.flatnonzero(has_tokens)
    if not len(found):
        return None
    # one word, one partner: the greedy 1-1 matching by score, over all sentence pairs at once
    keep = one_to_one_pairs(np.stack([a[found], b[found]], axis=1), scores[found], link_record[found])
    data.dropped["word_pair_not_one_to_one"] += int(len(keep) - keep.sum())
    kept = found[keep]  # in link order: by record, each record's links in its order
    per_record = np.bincount(link_record[kept], minlength=n)
    with_pairs = np.flatnonzero(per_record)
    key = src_t[with_pairs] * n_texts + tgt_t[with_pairs]
    return begin + with_pairs, key, per_record[with_pairs], np.stack([a[kept], b[kept]], axis=1).astype(np.int32)


class GroupRows:
    """Group id -> row of the training data, for the join's records a slice at a time.

    The training rows come sorted by group id (`multiway_rows`): a slice's ids are then found
    by binary search (`search_sorted`), so no slice builds a hash table over all the rows (at
    10M rows, 50 slices each hashing 10M ids made the join's time grow faster than its
    records). Rows in another order are joined through a polars hash join, as before.
    """

    def __init__(self, group_ids: pa.Array | Sequence[str]) -> None:
        self.ids = _string_series(group_ids)
        self.sorted = bool(self.ids.is_sorted()) and self.ids.null_count() == 0
        self.frame = (
            None if self.sorted else pl.DataFrame({"group_id": self.ids, "row": np.arange(len(self.ids), dtype=np.int64)})
        )

    def find(self, group_ids: pl.Series) -> np.ndarray:
        """The row of each of `group_ids` (int64), -1 for an id not among the rows."""
        if self.frame is not None:
            found = pl.DataFrame({"group_id": group_ids}).join(self.frame, on="group_id", how="left", maintain_order="left")
            return found["row"].fill_null(-1).to_numpy().astype(np.int64)
        if not len(self.ids) or not len(group_ids):
            return np.full(len(group_ids), -1, dtype=np.int64)
        at = np.minimum(self.ids.search_sorted(group_ids, side="left").cast(pl.Int64).to_numpy(), len(self.ids) - 1)
        hit = (self.ids.gather(at) == group_ids).fill_null(False).to_numpy()
        return np.where(hit, at, -1).astype(np.int64)


def _swapped(pivot: str) -> pl.Expr:
    """A record written pivot -> other, stored swapped (every pair is kept as other -> pivot)."""
    return (pl.col("src_lang") == pivot) & (pl.col("tgt_lang") != pivot)


def _defining_words(table: pa.Table, pivot: str, texts: np.ndarray, defined_by: np.ndarray) -> pl.DataFrame:
    """(text, fixed_words): the words that the record `defined_by // 2` gave each of `texts` on
    its side `defined_by % 2` (0: the other language, 1: the pivot), read back from `table`."""
    fixing = pl.from_arrow(table.select(["src_lang", "tgt_lang", "src_words", "tgt_words"]).take(pa.array(defined_by // 2)))
    other_side = pl.Series(defined_by % 2 == 0)
    return fixing.select(
        text=pl.Series(texts, dtype=pl.Int64),
        fixed_words=pl.when(other_side != _swapped(pivot)).then("src_words").otherwise("tgt_words"),
    )


# characters that separate the align stage's words (tasks/align/words.py: whitespace, invisible
# format and control characters) and what `str.strip()` strips, for the vectorised word search
_SEPARATOR = r"\s\p{Cc}\p{Cf}\p{Z}"
_WHITESPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())


def _string_series(values: pa.Array | pa.ChunkedArray | Sequence[str]) -> pl.Series:
    """A polars String series of an Arrow string column (no copy to Python) or of a list of str."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return pl.Series(values.cast(pa.large_string())).cast(pl.String)
    return pl.Series(list(values), dtype=pl.String)


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
    frame = pl.DataFrame({"text": _string_series(texts), "words": words.list.eval(pl.element().str.strip_chars(_WHITESPACE))})
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


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (numpy's hashing `unique` is several times slower on these)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values


def _members(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """values in sorted_set, by binary search (no hashing of either side)."""
    if not len(sorted_set):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def _set_word_ids(data: TrainingData, texts: np.ndarray, words: pl.Series, spans: TokenSpans) -> None:
    """Set `data.word_ids` of `texts` (distinct) from their words, `token_word_ids` for all texts at once."""
    if not len(texts):
        return
    word_span, searched = word_char_spans_flat(data.texts.take(pa.array(texts)), words)
    if searched:
        log.debug(
            "word search: %d of %d texts are not their words with separators between, searched word by word", searched, len(texts)
        )
    n_words = words.list.len().fill_null(0).to_numpy().astype(np.int64)
    n_tokens = data.lengths[texts]
    token_spans = spans.take(texts).astype(np.int64)
    token_text = np.repeat(np.arange(len(texts)), n_tokens)
    word_text = np.repeat(np.arange(len(texts)), n_words)
    word_index = np.arange(len(word_span)) - np.repeat(np.cumsum(n_words) - n_words, n_words)
    located = word_span[:, 0] >= 0  # found words start left to right within a text: the keys are sorted
    stride = int(max(word_span[:, 1].max(initial=0), token_spans[:, 1].max(initial=0))) + 2
    starts = word_text[located] * stride + word_span[located, 0]
    ends, owner, index = word_span[located, 1], word_text[located], word_index[located]
    last_char = token_spans[:, 1] - 1
    real = (token_spans[:, 1] > token_spans[:, 0]) & (last_char >= 0)
    ids = np.full(len(token_spans), -1, dtype=np.int32)
    if len(starts):
        pos = np.searchsorted(starts, token_text * stride + last_char, side="right") - 1
        pos_c = np.clip(pos, 0, len(starts) - 1)
        ok = real & (pos >= 0) & (owner[pos_c] == token_text) & (last_char < ends[pos_c])
        ids[ok] = index[pos_c[ok]]
    rows = np.repeat(texts, n_tokens)
    cols = np.arange(len(token_spans)) - np.repeat(np.cumsum(n_tokens) - n_tokens, n_tokens)
    data.word_ids[rows, cols] = ids


# ----------------------------------------------------------------------------- batches


def epoch_batches(
    data: TrainingData, *, epoch: int, batch_size: int, views: int, seed: int, pivot_in_every_row: bool = True
) -> list[np.ndarray]:
    """The epoch's batches: [batch_size, views] arrays of group row and language column (column -1: no view).

    Row order and each row's languages come from (seed, epoch); a row whose texts already
    appear in the batch waits for the next batch; a last incomplete batch is dropped. View 0 is
    the pivot unless `pivot_in_every_row` is False: then all views are drawn from every
    language, the pivot included (multi-way en-ablate; the rows' pivot alignments go unused).
    """
    rng = np.random.default_rng([seed, epoch])
    n_groups, n_langs = data.groups.shape
    order = rng.permutation(n_groups)
    fixed = 1 if pivot_in_every_row else 0  # column 0, the pivot, is always view 0; else drawn like the rest
    keys = rng.random((n_groups, n_langs - fixed))
    keys[data.groups[:, fixed:] < 0] = np.inf
    chosen = np.argsort(keys, axis=1, kind="stable")[:, : views - fixed] + fixed
    chosen[np.take_along_axis(keys, chosen - fixed, axis=1) == np.inf] = -1
    cols = np.concatenate([np.zeros((n_groups, fixed), dtype=np.int64), chosen], axis=1)  # [n_groups, views]
    batches: list[np.ndarray] = []
    current: list[int] = []
    seen: set[int] = set()
    waiting: list[int] = []
    for g in order.tolist():
        queue = [*waiting, g]
        waiting = []
        for item in queue:
            row_texts = {int(data.groups[item, c]) for c in cols[item] if c >= 0}
            if row_texts & seen:
                waiting.append(item)
                continue
            current.append(item)
            seen |= row_texts
            if len(current) == batch_size:
                rows = np.array(current, dtype=np.int64)
                batches.append(np.concatenate([rows[:, None], cols[rows]], axis=1))  # [B, 1 + views]
                current, seen = [], set()
    return batches


class BatchPlan:
    """Step number -> batch, over as many epochs as needed (each epoch's batches computed once)."""

    def __init__(self, data: TrainingData, *, batch_size: int, views: int, seed: int, pivot_in_every_row: bool = True) -> None:
        self.data, self.batch_size, self.views, self.seed = data, batch_size, views, seed
        self.pivot_in_every_row = pivot_in_every_row
        self._epochs: dict[int, list[np.ndarray]] = {}
        first = self.epoch(0)
        if not first:
            raise ValueError(
                f"not one batch of {batch_size} rows without duplicate texts can be formed from "
                f"{data.n_groups} training rows: lower batch_size or add data"
            )

    def epoch(self, e: int) -> list[np.ndarray]:
        if e not in self._epochs:
            self._epochs = {k: v for k, v in self._epochs.items() if k >= e - 1}
            self._epochs[e] = epoch_batches(
                self.data,
                epoch=e,
                batch_size=self.batch_size,
                views=self.views,
                seed=self.seed,
                pivot_in_every_row=self.pivot_in_every_row,
            )
        return self._epochs[e]

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, batch within the epoch) of a 0-based step."""
        e = 0
        while step >= len(self.epoch(e)):
            step -= len(self.epoch(e))
            e += 1
        return e, step

    def batch(self, step: int) -> StepBatch:
        e, i = self.position(step)
        plan = self.epoch(e)[i]
        return make_step_batch(self.data, plan, step=step)


@dataclass
class StepBatch:
    """Everything one optimiser step needs, indexed by row so that it can be cut into chunks/ranks."""

    text_ids: np.ndarray  # [B, V] text id, -1 for no view
    lang_ids: np.ndarray  # [B, V] column in data.langs, -1 for no view
    pairs: np.ndarray  # [B, A, 2] aligned (view-1 word, pivot word), -1 padded
    step: int = 0
    drawn: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # objective -> what it drew for the step, [B, ...] each

    def draw(self, draws: Mapping[str, Any], rng: np.random.Generator) -> StepBatch:
        """This batch with what each of `draws` (objective name -> `draw(batch, rng)`) draws from `rng`, in order."""
        drawn = dict(self.drawn)
        for name, draw in draws.items():
            arrays = draw(self, rng)
            if arrays:
                drawn[name] = arrays
        return StepBatch(self.text_ids, self.lang_ids, self.pairs, self.step, drawn)

    @property
    def size(self) -> int:
        return int(self.text_ids.shape[0])

    def rows(self, start: int, stop: int) -> StepBatch:
        drawn = {name: {k: v[start:stop] for k, v in arrays.items()} for name, arrays in self.drawn.items()}
        return StepBatch(self.text_ids[start:stop], self.lang_ids[start:stop], self.pairs[start:stop], self.step, drawn)


def make_step_batch(data: TrainingData, plan: np.ndarray, *, step: int) -> StepBatch:
    rows, cols = plan[:, 0], plan[:, 1:]
    text_ids = np.where(cols >= 0, data.groups[rows[:, None], np.maximum(cols, 0)], -1)
    start, count = data.alignments.lookup(text_ids[:, 1], text_ids[:, 0])  # each row's (view 1, view 0) pairs
    pairs = np.full((len(rows), max(int(count.max(initial=0)), 1), 2), -1, dtype=np.int32)
    at = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    pairs[np.repeat(np.arange(len(rows)), count), at] = data.alignments.pairs[np.repeat(start, count) + at]
    return StepBatch(text_ids.astype(np.int64), np.where(cols >= 0, cols, -1).astype(np.int64), pairs, step)


def step_draws_rng(seed: int, step: int) -> np.random.Generator:
    """The generator objectives draw a step's random choices from (`StepBatch.draw`)."""
    return np.random.default_rng([seed, step, 1])


# ----------------------------------------------------------------------------- tensors


def texts_to_arrays(data: TrainingData, text_ids: np.ndarray) -> dict[str, np.ndarray]:
    """input_ids, attention_mask, word_ids for a flat list of text ids, cut to their longest."""
    lengths = data.lengths[text_ids]
    width = int(lengths.max()) if len(lengths) else 1
    return {
        "input_ids": data.token_ids[text_ids, :width],
        "attention_mask": (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64),
        "word_ids": data.word_ids[text_ids, :width],
    }
