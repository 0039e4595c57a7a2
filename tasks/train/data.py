"""Training data: Arrow tables in, deterministic batches of token ids out.

The corpus artifact (long format: one row per group and language) gives multi-way rows;
the align artifact, when the pipeline has one, gives word pairs between a row's pivot text
(English) and another language's text. Everything the step needs is computed once here:

- every distinct text is tokenised once with the fast tokenizer (truncated to `max_length`);
- each aligned text's words (as the aligner split them) are found in the text, and every
  subword token gets the index of the word it belongs to (from the tokenizer's character
  offsets, with numpy: no loop over tokens), or -1;
- word pairs whose words lost all their tokens (a word that tokenises to nothing, or one cut
  off by truncation) are dropped and counted.

A batch is `batch_size` rows, each with the pivot text in view 0 and up to `views - 1` other
languages after it; no text appears twice in a batch (duplicates would be false negatives).
Which languages a row shows and the order of rows are drawn from `(seed, epoch)`, and the
word pairs AWP masks (when it masks fewer than all) from `(seed, step)`, so the batch of any step can be rebuilt from the
step number alone: that is what makes resume exact.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

log = logging.getLogger(__name__)

IGNORE = -100


@dataclass
class TrainingData:
    texts: list[str]
    langs: list[str]  # column order of `groups`; langs[0] is the pivot
    groups: np.ndarray  # [n_groups, n_langs] int32 text id, -1 where the row lacks the language
    group_ids: list[str]
    token_ids: np.ndarray  # [n_texts, max_length] int64, padded with pad_id
    lengths: np.ndarray  # [n_texts] int64
    word_ids: np.ndarray  # [n_texts, max_length] int32: word index of each token, -1 for none
    alignments: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # (text, pivot text) -> [k, 2]
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


def multiway_rows(corpus: pa.Table, *, pivot: str, langs: list[str] | None, split: str = "train") -> tuple[list[str], list[str], list[list[str | None]]]:
    """(group ids, languages with the pivot first, texts [group][lang] or None) for rows that have the pivot."""
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
    return wide["group_id"].to_list(), order, [list(row) for row in wide.select(order).iter_rows()]


def tokenize(tokenizer: Any, texts: list[str], *, max_length: int, prefix: str = "") -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(token ids [n, max_length] padded, lengths [n], character spans per text [len, 2] relative to the text)."""
    enc = tokenizer(
        [prefix + t for t in texts],
        add_special_tokens=True,
        truncation=True,
        max_length=max_length,
        padding=False,
        return_attention_mask=False,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    n = len(texts)
    lengths = np.fromiter(map(len, enc["input_ids"]), dtype=np.int64, count=n)
    ids = np.full((n, max_length), tokenizer.pad_token_id, dtype=np.int64)
    valid = np.arange(max_length)[None, :] < lengths[:, None]
    if n:
        ids[valid] = np.fromiter((t for row in enc["input_ids"] for t in row), dtype=np.int64, count=int(lengths.sum()))
    spans = []
    for offsets, special in zip(enc["offset_mapping"], enc["special_tokens_mask"]):
        arr = np.asarray(offsets, dtype=np.int64).reshape(-1, 2) - len(prefix)
        arr[np.asarray(special, dtype=bool)] = -1  # special tokens belong to no word
        spans.append(arr)
    return ids, lengths, spans


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
    text_index: dict[str, int] = {}
    groups = np.full((len(rows), len(order)), -1, dtype=np.int32)
    for g, row in enumerate(rows):
        for c, text in enumerate(row):
            if text is not None:
                groups[g, c] = text_index.setdefault(text, len(text_index))
    texts = list(text_index)
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
        _add_alignments(data, alignments, spans, min_alignment_score)
    return data


def _add_alignments(data: TrainingData, table: pa.Table, spans: list[np.ndarray], min_score: float) -> None:
    pivot = data.langs[0]
    lang_col = {lang: c for c, lang in enumerate(data.langs)}
    group_row = {gid: g for g, gid in enumerate(data.group_ids)}
    words_of: dict[int, list[str]] = {}
    columns = ["group_id", "src_lang", "tgt_lang", "src_words", "tgt_words", "alignments"]
    for rec in table.select(columns).to_pylist():
        src_lang, tgt_lang = rec["src_lang"], rec["tgt_lang"]
        src_words, tgt_words = rec["src_words"], rec["tgt_words"]
        pairs = np.array([(a["src"], a["tgt"]) for a in rec["alignments"] if a["score"] >= min_score], dtype=np.int64).reshape(-1, 2)
        if src_lang == pivot and tgt_lang != pivot:  # store every pair as other -> pivot
            src_lang, tgt_lang, src_words, tgt_words = tgt_lang, src_lang, tgt_words, src_words
            pairs = pairs[:, ::-1]
        g = group_row.get(rec["group_id"])
        if tgt_lang != pivot or src_lang not in lang_col or g is None:
            data.dropped["alignment_outside_training_rows"] += 1
            continue
        src_t, tgt_t = int(data.groups[g, lang_col[src_lang]]), int(data.groups[g, 0])
        if src_t < 0:
            data.dropped["alignment_without_text"] += 1
            continue
        ok = True
        for t, words in ((src_t, src_words), (tgt_t, tgt_words)):
            if t in words_of:
                ok &= words_of[t] == words
            else:
                words_of[t] = words
                data.word_ids[t, : data.lengths[t]] = token_word_ids(spans[t], word_char_spans(data.texts[t], words))
        if not ok:
            data.dropped["alignment_words_mismatch"] += 1
            continue
        in_range = (pairs[:, 0] < len(src_words)) & (pairs[:, 1] < len(tgt_words)) & (pairs >= 0).all(axis=1)
        pairs = pairs[in_range]
        has_src = np.isin(pairs[:, 0], data.word_ids[src_t])
        has_tgt = np.isin(pairs[:, 1], data.word_ids[tgt_t])
        kept = pairs[has_src & has_tgt]
        data.dropped["word_pair_without_tokens"] += int(len(pairs) - len(kept))
        if len(kept):
            _, first = np.unique(kept[:, 0], return_index=True)  # one target word per source word
            kept = kept[np.sort(first)]
            data.alignments[(src_t, tgt_t)] = kept.astype(np.int32)
            data.max_pairs = max(data.max_pairs, len(kept))


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

    def __init__(
        self, data: TrainingData, *, batch_size: int, views: int, seed: int, mask_fraction: float = 1.0, pivot_in_every_row: bool = True
    ) -> None:
        self.data, self.batch_size, self.views, self.seed = data, batch_size, views, seed
        self.pivot_in_every_row = pivot_in_every_row
        self.mask_fraction = mask_fraction
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
                self.data, epoch=e, batch_size=self.batch_size, views=self.views, seed=self.seed, pivot_in_every_row=self.pivot_in_every_row
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
        return make_step_batch(self.data, plan, step=step, seed=self.seed, mask_fraction=self.mask_fraction)


@dataclass
class StepBatch:
    """Everything one optimiser step needs, indexed by row so that it can be cut into chunks/ranks."""

    text_ids: np.ndarray  # [B, V] text id, -1 for no view
    lang_ids: np.ndarray  # [B, V] column in data.langs, -1 for no view
    pairs: np.ndarray  # [B, A, 2] aligned (view-1 word, pivot word), -1 padded
    mask_src: np.ndarray  # [B, A] bool: AWP masks the view-1 word of this pair
    mask_tgt: np.ndarray  # [B, A] bool: AWP masks the pivot word of this pair
    step: int = 0

    @property
    def size(self) -> int:
        return int(self.text_ids.shape[0])

    def rows(self, start: int, stop: int) -> StepBatch:
        return StepBatch(self.text_ids[start:stop], self.lang_ids[start:stop], self.pairs[start:stop],
                         self.mask_src[start:stop], self.mask_tgt[start:stop], self.step)  # fmt: skip


def make_step_batch(data: TrainingData, plan: np.ndarray, *, step: int, seed: int, mask_fraction: float = 1.0) -> StepBatch:
    rows, cols = plan[:, 0], plan[:, 1:]
    text_ids = np.where(cols >= 0, data.groups[rows[:, None], np.maximum(cols, 0)], -1)
    found = [data.alignments.get((int(s), int(t))) for s, t in zip(text_ids[:, 1], text_ids[:, 0])]
    width = max([len(p) for p in found if p is not None], default=0)
    pairs = np.full((len(rows), max(width, 1), 2), -1, dtype=np.int32)
    for b, p in enumerate(found):
        if p is not None:
            pairs[b, : len(p)] = p
    valid = pairs[..., 0] >= 0
    rng = np.random.default_rng([seed, step, 1])
    masks = []
    for _ in range(2):  # which pairs AWP masks: a fraction of each sentence's aligned words (1.0: all), at least one
        keys = np.where(valid, rng.random(valid.shape), np.inf)  # random() < 1.0: a fraction of 1.0 takes every pair
        chosen = (keys < mask_fraction) | (keys == keys.min(axis=1, keepdims=True))
        masks.append(chosen & valid)
    return StepBatch(text_ids.astype(np.int64), np.where(cols >= 0, cols, -1).astype(np.int64), pairs, masks[0], masks[1], step)


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


def masked_word_prediction(data: TrainingData, src: np.ndarray, tgt: np.ndarray, pairs: np.ndarray, chosen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AWP inputs for one direction: (masked src input ids, attention mask, labels), all [n, T].

    For each chosen pair (src word w, tgt word u) every token of w is masked; the j-th masked
    token of w predicts the j-th token of u, for j < min(tokens of w, tokens of u) (the longer
    word is clipped, as WACSE does); the other masked tokens carry no label. Vectorised.
    """
    arrays = texts_to_arrays(data, src)
    ids, wid = arrays["input_ids"].copy(), arrays["word_ids"]
    n, width = ids.shape
    n_words = int(max(wid.max(initial=-1), data.word_ids[tgt].max(initial=-1))) + 1
    labels = np.full((n, width), IGNORE, dtype=np.int64)
    if n_words == 0 or not chosen.any():
        return ids, arrays["attention_mask"], labels
    target_of = np.full((n, n_words), -1, dtype=np.int64)  # src word -> aligned tgt word, where masked
    b_idx, a_idx = np.nonzero(chosen)
    target_of[b_idx, pairs[b_idx, a_idx, 0]] = pairs[b_idx, a_idx, 1]
    tgt_wid = data.word_ids[tgt]  # [n, L]
    positions = np.arange(tgt_wid.shape[1])
    first_tgt = np.full((n, n_words), 10**9, dtype=np.int64)
    rows_t, cols_t = np.nonzero(tgt_wid >= 0)
    np.minimum.at(first_tgt, (rows_t, tgt_wid[rows_t, cols_t]), positions[cols_t])
    count_tgt = np.zeros((n, n_words), dtype=np.int64)
    np.add.at(count_tgt, (rows_t, tgt_wid[rows_t, cols_t]), 1)
    first_src = np.full((n, n_words), 10**9, dtype=np.int64)
    rows_s, cols_s = np.nonzero(wid >= 0)
    np.minimum.at(first_src, (rows_s, wid[rows_s, cols_s]), cols_s)

    safe_w = np.maximum(wid, 0)
    u = np.where(wid >= 0, np.take_along_axis(target_of, safe_w, axis=1), -1)
    masked = u >= 0
    ids[masked] = data.mask_id
    rank = np.arange(width)[None, :] - np.take_along_axis(first_src, safe_w, axis=1)
    safe_u = np.maximum(u, 0)
    labelled = masked & (rank < np.take_along_axis(count_tgt, safe_u, axis=1))
    r, c = np.nonzero(labelled)
    tgt_pos = first_tgt[r, safe_u[r, c]] + rank[r, c]
    labels[r, c] = data.token_ids[tgt[r], tgt_pos]
    return ids, arrays["attention_mask"], labels
