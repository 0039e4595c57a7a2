"""Seeded dedupe, sampling and train/dev split over a stream of groups, in flat memory.

Every group gets two 64-bit hashes of its content under the seed. Sampling keeps the k
groups with the smallest first hash (a bottom-k sample): uniform over distinct groups,
reproducible for a seed, and exact duplicates collide on the hash so they can never both
be kept. Memory is O(k), whatever the stream's length. The split uses the second hash,
so a group's split does not change when the sample size does (no dev/train leakage
between runs with different sizes).

Without a sample size, exact dedupe keeps one 8-byte hash per distinct group in sorted
numpy arrays merged like an LSM tree (membership tests are vectorised binary searches).

Polars string columns are views into the buffers of the batch they came from, so a few
sampled rows would keep whole batches alive; the sample copies the rows it admits out of
their batch and is compacted again once it has admitted twice as many rows as it holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import polars as pl

SPLIT_RESOLUTION = 1_000_000


def compact(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of `frame` that shares no buffers with it (Arrow's strings are contiguous)."""
    return pl.from_arrow(frame.to_arrow())  # type: ignore[return-value]


def add_hashes(frame: pl.DataFrame, langs: Sequence[str], seed: int, dev_fraction: float) -> pl.DataFrame:
    """Add `h` (sampling/dedupe hash) and `split` from the texts of the group."""
    content = pl.concat_str([pl.col(lang).fill_null("\x00") for lang in langs], separator="\x1f")
    # a second, independent hash for the split; polars hashes are stable within a pinned version
    split_hash = content.hash(seed=(seed * 1_000_003 + 0x9E3779B9) % (1 << 63))
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
            level = np.union1d(self.levels.pop(), level)
        self.levels.append(level)


class GroupSelector:
    """Dedupe and (optionally) sample groups; counts what it drops, in rows (`n_rows`)."""

    def __init__(self, sample: int | None, dedupe: bool) -> None:
        self.sample = sample
        self.dedupe = dedupe
        self.kept: pl.DataFrame | None = None
        self.seen = SeenHashes()
        self.duplicate_rows = 0
        self.unsampled_rows = 0
        self._admitted = 0  # rows admitted to the sample since it was last compacted

    def offer(self, frame: pl.DataFrame) -> Iterator[pl.DataFrame]:
        """Feed a batch; yields what can be emitted now (everything, when not sampling)."""
        if self.sample is None:
            yield self._dedupe_streaming(frame)
            return
        if self.kept is not None and len(self.kept) >= self.sample:
            threshold = self.kept["h"].max()
            admitted = frame.filter(pl.col("h") <= threshold)
            self.unsampled_rows += int(frame["n_rows"].sum() - admitted["n_rows"].sum())
            frame = admitted
        if frame.height:
            frame = compact(frame)  # keep these rows, not the whole batch they point into
            self._admitted += frame.height
        merged = frame if self.kept is None else pl.concat([self.kept, frame], how="vertical_relaxed")
        if self.dedupe:
            unique = merged.filter(pl.col("h").is_first_distinct())
            self.duplicate_rows += int(merged["n_rows"].sum() - unique["n_rows"].sum())
            merged = unique
        if len(merged) > self.sample:
            merged = merged.sort("h", "seq")  # ties (duplicates kept when not deduping) by source order
            self.unsampled_rows += int(merged["n_rows"][self.sample :].sum())
            merged = merged.head(self.sample)
        if self._admitted > 2 * self.sample:  # evicted rows still pin the buffers they were copied to
            merged, self._admitted = compact(merged), 0
        self.kept = merged
        return

    def _dedupe_streaming(self, frame: pl.DataFrame) -> pl.DataFrame:
        if not self.dedupe:
            return frame
        hashes = frame["h"].to_numpy()
        fresh = frame["h"].is_first_distinct().to_numpy() & ~self.seen.contains(hashes)
        self.seen.add(hashes[fresh])
        kept = frame.filter(pl.Series(fresh))
        self.duplicate_rows += int(frame["n_rows"].sum() - kept["n_rows"].sum())
        return kept

    def finish(self) -> Iterator[pl.DataFrame]:
        """Emit the sample in source order."""
        if self.sample is not None and self.kept is not None:
            yield self.kept.sort("seq")
