"""Seeded dedupe, sampling and train/dev split over a stream of groups, in flat memory.

Every group gets two 64-bit hashes of its content under the seed. Sampling keeps the k
groups with the smallest first hash (a bottom-k sample): uniform over distinct groups,
reproducible for a seed, and exact duplicates collide on the hash so they can never both
be kept. Memory is O(k), whatever the stream's length. The split uses the second hash,
so a group's split does not change when the sample size does (no dev/train leakage
between runs with different sizes).

Without a sample size, exact dedupe keeps one 8-byte hash per distinct group in sorted
numpy arrays merged like an LSM tree (membership tests are vectorised binary searches); a
merge allocates one more array of the merged size, so the peak is 16 bytes per distinct group
(near-duplicate removal adds the same per language).

With near-duplicate removal (`NearDedupe`), a row whose language's near-duplicate key
(tasks/corpus/dedup.py) occurs in an earlier group is dropped, "earlier" meaning source order
when streaming and sampling-hash order when sampling; an earlier group counts whether or not it
is kept in the end, so the outcome depends on the stream only, never on batch boundaries. A
group left with fewer than `min_langs` rows is dropped whole. When sampling, the k kept groups
are the first k in hash order that survive this; groups before the k-th that did not survive
stay in the buffer (their keys still decide later arrivals) until the sample is final.

Polars string columns are views into the buffers of the batch they came from, so a few
sampled rows would keep whole batches alive; the sample copies the rows it admits out of
their batch and is compacted again once it has admitted twice as many rows as it holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import polars as pl

from tasks.corpus.dedup import key_column, near_dup_column, near_duplicate_rows

SPLIT_RESOLUTION = 1_000_000


def compact(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of `frame` that shares no buffers with it (Arrow's strings are contiguous)."""
    return pl.from_arrow(frame.to_arrow())  # type: ignore[return-value]


def _content(langs: Sequence[str], nulled: Iterable[str] = ()) -> pl.Expr:
    """The text `h` hashes: the group's texts (null as NUL), `nulled` languages taken as null."""
    nulled = set(nulled)
    return pl.concat_str(
        [pl.lit("\x00") if lang in nulled else pl.col(lang).fill_null("\x00") for lang in langs], separator="\x1f"
    )


def hash_variants(langs: Sequence[str], droppable: Sequence[str], max_drops: int) -> list[tuple[str, ...]]:
    """The sets of rows (languages) a later filter could still null in a group: up to
    `max_drops` of the `droppable` languages. Their number grows fast; callers cap it."""
    droppable = [lang for lang in langs if lang in set(droppable)]
    return [subset for size in range(min(max_drops, len(droppable)) + 1) for subset in combinations(droppable, size)]


def smallest_possible_hash(
    frame: pl.DataFrame, langs: Sequence[str], variants: Sequence[tuple[str, ...]], seed: int
) -> pl.Series:
    """A lower bound of the `h` (add_hashes) each group can have once a later filter (LID) nulls
    some of its rows: the smallest hash over the `variants` (hash_variants) of what may be nulled.
    A group whose bound is above the sample's threshold can never enter the sample."""
    hashes = [_content(langs, nulled).hash(seed=seed % (1 << 64)) for nulled in variants]
    return frame.select(pl.min_horizontal(hashes).alias("h_bound")).to_series()


def add_hashes(
    frame: pl.DataFrame, langs: Sequence[str], seed: int, dev_fraction: float, split_by_key: bool = False
) -> pl.DataFrame:
    """Add `h` (sampling/dedupe hash) and `split` from the texts of the group.

    With `split_by_key` (the frame has `{lang}__key` columns), the split hashes the first
    language's near-duplicate key (the next language's where it has none): groups whose pivot
    texts are near-duplicates land on the same side in every shard and source of the corpus
    (Tatoeba's English sides, shared across its language pairs, cannot leak into dev)."""
    content = _content(langs)
    # a second, independent hash for the split; polars hashes are stable within a pinned version
    split_seed = (seed * 1_000_003 + 0x9E3779B9) % (1 << 63)
    split_hash = content.hash(seed=split_seed)
    if split_by_key:
        pivot_key = pl.coalesce([pl.col(key_column(lang)) for lang in langs])
        split_hash = pl.when(pivot_key.is_not_null()).then(pivot_key.hash(seed=split_seed)).otherwise(split_hash)
    threshold = int(round(dev_fraction * SPLIT_RESOLUTION))
    return frame.with_columns(
        content.hash(seed=seed % (1 << 64)).alias("h"),  # polars takes an unsigned seed
        pl.when((split_hash % SPLIT_RESOLUTION) < threshold).then(pl.lit("dev")).otherwise(pl.lit("train")).alias("split"),
    )


class SeenHashes:
    """A set of uint64 hashes as sorted arrays of geometrically growing size."""

    def __init__(self) -> None:
        self.levels: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(level) for level in self.levels)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        hashes = np.asarray(hashes, dtype=np.uint64)
        found = np.zeros(len(hashes), dtype=bool)
        for level in self.levels:
            pos = np.searchsorted(level, hashes)
            pos[pos == len(level)] = len(level) - 1
            found |= level[pos] == hashes
        return found

    def add(self, hashes: np.ndarray) -> None:
        level = np.unique(np.asarray(hashes, dtype=np.uint64))
        level = level[~self.contains(level)]  # a set: adding a member again changes nothing
        if not len(level):  # an empty level would break `contains` (no last element to compare)
            return
        while self.levels and len(self.levels[-1]) <= 2 * len(level):
            # levels are disjoint, so a merge is a concatenation sorted in place: one new array
            # of 8 bytes a hash (np.union1d made three copies: ~32 bytes a hash at the peak)
            level = np.concatenate((self.levels.pop(), level))
            level.sort()
        self.levels.append(level)


@dataclass(frozen=True)
class NearDedupe:
    """Near-duplicate removal within each language: the frames offered carry `{lang}__key` columns."""

    langs: tuple[str, ...]
    min_langs: int  # a group left with fewer rows is dropped (as the filters' min_langs_per_group)


class GroupSelector:
    """Dedupe and (optionally) sample groups; counts what it drops, in rows (`n_rows`)."""

    def __init__(self, sample: int | None, dedupe: bool, near: NearDedupe | None = None) -> None:
        self.sample = sample
        self.dedupe = dedupe
        self.near = near
        self.kept: pl.DataFrame | None = None
        self.seen = SeenHashes()
        self.seen_keys = {lang: SeenHashes() for lang in near.langs} if near else {}
        self.duplicate_rows = 0
        self.near_duplicate_rows = 0
        self.incomplete_rows = 0  # rows of groups that near-duplicate removal left incomplete
        self.unsampled_rows = 0
        self._full = False  # the sample holds `sample` groups that survive
        self._admitted = 0  # rows admitted to the sample since it was last compacted

    def offer(self, frame: pl.DataFrame) -> Iterator[pl.DataFrame]:
        """Feed a batch; yields what can be emitted now (everything, when not sampling)."""
        if self.sample is None:
            yield self._dedupe_streaming(frame)
            return
        merged, counts, full = self._merge(frame, keep=True)
        self.unsampled_rows += counts["unsampled"]
        self.duplicate_rows += counts["duplicate"]
        self._full = full
        if self._admitted > 2 * self.sample:  # evicted rows still pin the buffers they were copied to
            merged, self._admitted = compact(merged), 0
        self.kept = merged
        return

    def threshold(self) -> int | None:
        """The largest `h` that can still enter the sample (None: every group can, it is not full)."""
        return self._threshold(self.kept, self._full)

    def threshold_after(self, frame: pl.DataFrame) -> int | None:
        """`threshold()` as it would be after `offer(frame)`; changes nothing."""
        merged, _, full = self._merge(frame, keep=False)
        return self._threshold(merged, full)

    def _threshold(self, kept: pl.DataFrame | None, full: bool) -> int | None:
        if kept is None or not (full if self.near else len(kept) >= (self.sample or 0)):
            return None
        return int(kept["h"].max())  # type: ignore[arg-type]

    def _merge(self, frame: pl.DataFrame, keep: bool) -> tuple[pl.DataFrame, dict[str, int], bool]:
        """The sample after admitting `frame`, the rows it drops, and whether it is full; with
        `keep`, the admitted rows are copied out of their batch (see the module docstring)."""
        assert self.sample is not None
        counts = {"unsampled": 0, "duplicate": 0}
        threshold = self.threshold()
        if threshold is not None:
            admitted = frame.filter(pl.col("h") <= threshold)
            counts["unsampled"] += int(frame["n_rows"].sum() - admitted["n_rows"].sum())
            frame = admitted
        if frame.height and keep:
            frame = compact(frame)  # keep these rows, not the whole batch they point into
            self._admitted += frame.height
        merged = frame if self.kept is None else pl.concat([self.kept, frame], how="vertical_relaxed")
        if self.dedupe:
            unique = merged.filter(pl.col("h").is_first_distinct())
            counts["duplicate"] += int(merged["n_rows"].sum() - unique["n_rows"].sum())
            merged = unique
        full = False
        if self.near:
            merged, unsampled, full = self._cut_sample_after_near_dedupe(merged)
            counts["unsampled"] += unsampled
        elif len(merged) > self.sample:
            merged = merged.sort("h", "seq")  # ties (duplicates kept when not deduping) by source order
            counts["unsampled"] += int(merged["n_rows"][self.sample :].sum())
            merged = merged.head(self.sample)
        return merged, counts, full

    def _cut_sample_after_near_dedupe(self, merged: pl.DataFrame) -> tuple[pl.DataFrame, int, bool]:
        """Keep the groups up to the `sample`-th that survives near-dedupe, in (h, seq) order;
        also returns the rows cut and whether the sample is full."""
        assert self.near is not None and self.sample is not None
        merged = self._mark_near_duplicates(merged, ["h", "seq"])
        survives = (merged["n_rows"] - self._near_dup_counts(merged)) >= self.near.min_langs
        survivors = survives.cum_sum()
        full = bool(survivors.len()) and int(survivors[-1]) >= self.sample
        unsampled = 0
        if full:
            cut = int(survivors.search_sorted(self.sample, side="left")) + 1  # through the sample-th survivor
            unsampled = int(merged["n_rows"][cut:].sum())
            merged = merged.head(cut)
        return merged.drop([near_dup_column(lang) for lang in self.near.langs]), unsampled, full  # marked again when final

    def _mark_near_duplicates(self, frame: pl.DataFrame, order: list[str]) -> pl.DataFrame:
        assert self.near is not None
        return near_duplicate_rows(frame, self.near.langs, order)

    def _near_dup_counts(self, frame: pl.DataFrame) -> pl.Series:
        assert self.near is not None
        marks = [pl.col(near_dup_column(lang)) for lang in self.near.langs]
        return frame.select(pl.sum_horizontal(marks).cast(pl.UInt32)).to_series()

    def _drop_near_duplicates(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Null the marked rows, drop groups left incomplete; count both."""
        assert self.near is not None
        duplicates = self._near_dup_counts(frame)
        left = frame["n_rows"] - duplicates
        complete = left >= self.near.min_langs
        self.near_duplicate_rows += int(duplicates.sum())
        self.incomplete_rows += int(left.filter(~complete).sum())
        kept = frame.with_columns(
            [pl.when(pl.col(near_dup_column(lang))).then(None).otherwise(pl.col(lang)).alias(lang) for lang in self.near.langs]
            + [left.alias("n_rows")]
        ).filter(complete)
        return kept.drop([near_dup_column(lang) for lang in self.near.langs])

    def _dedupe_streaming(self, frame: pl.DataFrame) -> pl.DataFrame:
        if self.dedupe:
            hashes = frame["h"].to_numpy()
            fresh = frame["h"].is_first_distinct().to_numpy() & ~self.seen.contains(hashes)
            self.seen.add(hashes[fresh])
            kept = frame.filter(pl.Series(fresh))
            self.duplicate_rows += int(frame["n_rows"].sum() - kept["n_rows"].sum())
            frame = kept
        if self.near:
            frame = self._near_dedupe_streaming(frame)
        return frame

    def _near_dedupe_streaming(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Within the batch in source order, then against the keys of every earlier batch."""
        assert self.near is not None
        frame = self._mark_near_duplicates(frame, ["seq"])
        marks = []
        for lang in self.near.langs:
            keys = frame[key_column(lang)]
            present = keys.is_not_null().to_numpy()
            values = keys.fill_null(0).to_numpy()
            earlier = self.seen_keys[lang].contains(values) & present
            marks.append((frame[near_dup_column(lang)].to_numpy() | earlier))
            self.seen_keys[lang].add(values[present])
        frame = frame.with_columns([pl.Series(near_dup_column(lang), mark) for lang, mark in zip(self.near.langs, marks)])
        return self._drop_near_duplicates(frame)

    def finish(self) -> Iterator[pl.DataFrame]:
        """Emit the sample in source order."""
        if self.sample is not None and self.kept is not None:
            kept = self.kept
            if self.near:
                kept = self._drop_near_duplicates(self._mark_near_duplicates(kept, ["h", "seq"]))
            yield kept.sort("seq")
