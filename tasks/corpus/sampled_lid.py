"""LID on a sampled source: only on the groups that can still enter the sample.

A sampled source keeps the `sample` groups with the smallest hash `h` (tasks/corpus/sampling.py),
and `h` hashes the group's texts after every filter, LID included: a row LID drops is hashed as
null. Checking every row is what costs (CLD2: ~15 µs a row, the rest of the stage: ~4 µs), yet
a group whose hash is above the sample's threshold never reaches the output, checked or not.
So on a sampled source LID runs here, between the cheap filters (tasks/corpus/filters.py) and
the `GroupSelector`, and the kept output is the same as with LID on every row:

1. Before LID each group gets a lower bound of the `h` it can end with: the smallest hash over
   every way LID could null its rows and leave the group complete (`smallest_possible_hash`;
   with the default `min_langs_per_group`, all languages, a group LID touches is dropped whole,
   so the bound is `h` itself). Groups whose bound is above the selector's threshold are never
   checked: the selector would not admit them whatever LID says. The rest wait in `pending`
   (at most `PENDING_SAMPLES` x `sample` groups, so memory stays O(sample)).
2. When `pending` is full, and at the end, its groups are checked in order of their bound, a
   chunk at a time; after each chunk the threshold the selector would have after admitting the
   checked survivors is computed (`GroupSelector.threshold_after`). Once the next unchecked
   bound is above it, no unchecked group can get into the sample nor change which groups do
   (the sample is a prefix in (h, seq) order, also with near-dedupe, whose "earlier group" rule
   looks at earlier groups only), and the checked survivors are offered, in source order, as one
   batch. The selector's outcome does not depend on how the stream is cut into batches, so this
   is the outcome of checking every row.

Counting: rows never checked are counted as `not_sampled` (they never were candidates); the
`lid_*` counts, and `group_incomplete` from LID drops, cover the checked rows only
(`metrics.lid.checked_rows` says how many). When the number of ways LID could null a group's
rows exceeds `MAX_HASH_VARIANTS` (many languages, small `min_langs_per_group`), the bound would
cost more than it saves: the stage then checks every row (`metrics.lid.checked = "every_row"`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import polars as pl

from tasks.corpus.dedup import add_near_duplicate_keys
from tasks.corpus.filters import GONE, OK, drop_rows, mark_lid, reason_column
from tasks.corpus.lid import LidCheck
from tasks.corpus.sampling import GroupSelector, add_hashes, compact, hash_variants, smallest_possible_hash

MAX_HASH_VARIANTS = 16
PENDING_SAMPLES = 8  # groups held for LID, in samples: larger checks fewer rows and holds more text
MIN_CHUNK = 256  # the smallest chunk of groups checked at once
MARGIN = 1.02  # check this many times as many groups as the sample still needs, for what LID drops


class SampledLid:
    """Holds a sampled source's groups that passed the cheap filters until LID on the few that
    can enter the sample decides them; offers the survivors to `selector`."""

    def __init__(
        self,
        check: LidCheck,
        langs: Sequence[str],
        min_langs: int,
        selector: GroupSelector,
        seed: int,
        dev_fraction: float,
        near: bool,
    ) -> None:
        assert selector.sample is not None
        self.check = check
        self.langs = list(langs)
        self.min_langs = min_langs
        self.selector = selector
        self.seed = seed
        self.dev_fraction = dev_fraction
        self.near = near
        droppable = [lang for lang in self.langs if check.checks(lang)]
        self.variants = hash_variants(self.langs, droppable, len(self.langs) - min_langs)
        self.pending: list[pl.DataFrame] = []
        self.pending_groups = 0
        self.dropped: Counter[tuple[str, str]] = Counter()
        self.rejected: list[pl.DataFrame] = []  # rows LID dropped (filters.drop_rows), for the stage to keep
        self.checked_rows = 0
        self.unsampled_rows = 0

    @staticmethod
    def applies(check: LidCheck | None, langs: Sequence[str], min_langs: int, sample: int | None) -> bool:
        """A sampled source with a LID filter, whose groups LID can null in few enough ways."""
        if check is None or sample is None:
            return False
        droppable = [lang for lang in langs if check.checks(lang)]
        max_drops = min(len(langs) - min_langs, len(droppable))
        return sum(math.comb(len(droppable), size) for size in range(max_drops + 1)) <= MAX_HASH_VARIANTS

    def add(self, kept: pl.DataFrame) -> None:
        """Take a batch of groups that passed every filter but LID (filters.drop_rows' output)."""
        kept = kept.with_columns(smallest_possible_hash(kept, self.langs, self.variants, self.seed))
        threshold = self.selector.threshold()
        if threshold is not None:
            candidates = kept.filter(pl.col("h_bound") <= threshold)
            self.unsampled_rows += int(kept["n_rows"].sum() - candidates["n_rows"].sum())
            kept = candidates
        if kept.height:
            self.pending.append(compact(kept))  # not the whole batch the rows point into
            self.pending_groups += kept.height
        if self.pending_groups >= PENDING_SAMPLES * (self.selector.sample or 0):
            self.flush()

    def flush(self) -> None:
        """LID on the pending groups, in bound order, until no other can enter the sample."""
        if not self.pending:
            return
        pending = pl.concat(self.pending, how="vertical_relaxed").sort("h_bound", "seq")
        self.pending, self.pending_groups = [], 0
        bounds = pending["h_bound"].to_numpy()
        sample = self.selector.sample or 0
        held = 0 if self.selector.kept is None else self.selector.kept.height
        threshold = self.selector.threshold()
        if threshold is None:  # enough to fill the sample, and a margin for what LID drops
            chunk = math.ceil(MARGIN * max(sample - held, 0)) + MIN_CHUNK
        else:  # about as many as would fall under the threshold after admitting them all
            chunk = math.ceil(MARGIN * len(pending) * sample / (sample + len(pending))) + MIN_CHUNK
        survivors: list[pl.DataFrame] = []
        pos = 0
        admitted = held
        while pos < len(pending):
            end = min(len(pending), pos + chunk)
            if survivors and threshold is not None:  # only groups that can still get under it
                end = min(end, int(np.searchsorted(bounds, np.uint64(threshold), side="right")))
                if end <= pos:
                    break
            survivors.append(self._check(pending.slice(pos, end - pos)))
            admitted += survivors[-1].height
            pos = end
            threshold = self.selector.threshold_after(self._in_source_order(survivors))
            # not full yet: what LID dropped, and a margin (dedupe may drop some too); else the
            # bound may be loose (a minimum over several hashes when LID can keep a group it
            # nulls a row of): at most twice as many as before
            chunk = math.ceil(MARGIN * max(sample - admitted, 0)) + MIN_CHUNK if threshold is None else 2 * chunk
        self.unsampled_rows += int(pending["n_rows"][pos:].sum())
        for _ in self.selector.offer(self._in_source_order(survivors)):
            pass  # a sampling selector emits nothing before `finish`

    def _in_source_order(self, frames: list[pl.DataFrame]) -> pl.DataFrame:
        return pl.concat(frames, how="vertical_relaxed").sort("seq")

    def _check(self, groups: pl.DataFrame) -> pl.DataFrame:
        """LID on the rows of `groups`; drop failing rows and incomplete groups; hash the rest."""
        marked = groups.with_columns(
            [
                pl.when(pl.col(lang).is_null()).then(GONE).otherwise(OK).cast(pl.UInt8).alias(reason_column(lang))
                for lang in self.langs
            ]
        )
        marked, checked = mark_lid(marked, self.langs, self.check)
        self.checked_rows += checked
        kept, dropped = drop_rows(
            marked, self.langs, self.min_langs, "missing", self.rejected
        )  # no NULL codes here: nulls are GONE
        self.dropped.update(dropped)
        if self.near:
            kept = add_near_duplicate_keys(kept, self.langs)
        return add_hashes(kept, self.langs, self.seed, self.dev_fraction, split_by_key=self.near).drop("h_bound")
