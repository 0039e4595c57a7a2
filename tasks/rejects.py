"""Rows a stage dropped, kept for a person to look at (`ShardContext.reject`): per shard, the
attached file `rejects/{shard}.parquet`, all rows of a reason up to REJECTS_PER_REASON, beyond
that a seeded uniform sample of that many (reservoir sampling)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

REJECTS_DIR = "rejects"
REJECTS_PER_REASON = 1000
REJECTS_SCHEMA = pa.schema(
    [
        pa.field("reason", pa.string(), nullable=False),  # as counted in the manifest's `dropped`
        pa.field("id", pa.string()),  # the row's id, when it has one
        pa.field("lang", pa.string()),
        pa.field("text", pa.string()),
        pa.field("source", pa.string()),  # the source (or file) it came from, when known
        pa.field("line", pa.int64()),  # its line in that file, when known
    ]
)


def rejects_file(shard_id: str) -> str:
    """The attached name of a shard's rejected rows."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in shard_id).strip(".") or "shard"
    return f"{REJECTS_DIR}/{safe}.parquet"


class Reservoir:
    """Up to `cap` rows of one reason: the first `cap`, then each later row replaces a random
    one with probability cap / rows seen (Algorithm R), so the rows kept are a uniform sample."""

    def __init__(self, cap: int, seed: int) -> None:
        self.cap, self.seen = cap, 0
        self.rows = REJECTS_SCHEMA.empty_table()
        self.rng = np.random.default_rng(seed)

    def add(self, table: pa.Table) -> None:
        head = table.slice(0, max(self.cap - self.rows.num_rows, 0))
        self.rows = pa.concat_tables([self.rows, head])
        rest = table.slice(head.num_rows)
        if rest.num_rows:
            # row k of `rest` is row number `ordinal[k]` (0-based) of all seen: it takes slot j if j < cap
            ordinal = self.seen + head.num_rows + np.arange(rest.num_rows)
            slots = self.rng.integers(0, ordinal + 1)
            index = np.arange(self.rows.num_rows)
            for k in np.flatnonzero(slots < self.cap):  # in order: a later row replaces an earlier one
                index[slots[k]] = self.rows.num_rows + k
            self.rows = pa.concat_tables([self.rows, rest]).take(pa.array(index))
        self.seen += table.num_rows
