"""The alignment join: the align artifact's word pairs onto the training rows' texts.

The align artifact, when the pipeline has one, gives word pairs between a row's pivot text
(English) and another language's text. `add_alignments` joins its records to the training
rows a slice at a time (`GroupRows` finds each record's row), fixes each named text's words
and sets its tokens' word ids (tasks/train/word_spans.py), and keeps the pairs as `WordPairs`
(one sorted key array, one flat pair array) for the step builder to look up a batch at once:

- word pairs whose words lost all their tokens (a word that tokenises to nothing, or one cut
  off by truncation) are dropped and counted;
- the rest are cut to a 1-1 matching by the aligner's score (each word keeps its best free
  partner, on either side), for all sentence pairs at once (`one_to_one_pairs`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tasks.train.text_columns import string_series
from tasks.train.tokens import TokenSpans
from tasks.train.training_data import TrainingData, WordPairs
from tasks.train.word_spans import word_char_spans_flat

log = logging.getLogger(__name__)


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
        self.ids = string_series(group_ids)
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
