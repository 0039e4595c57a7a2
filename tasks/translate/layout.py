"""Which languages each source row is translated into: all of the pool, or k drawn per row.

The draw for a row depends only on the seed and the row's group id: each candidate
language gets a 64-bit key from ``splitmix64(hash(seed, group_id) ^ splitmix64(i + 1))``,
and the k smallest keys win. So a row's languages are the same whatever the shard size,
the row order or the machine, and the draws of different rows are independent. Only the
per-row hash is computed in Python (blake2b); the keys and the selection are numpy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser over a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return z ^ (z >> np.uint64(31))


def row_hashes(group_ids: Sequence[str], seed: int) -> np.ndarray:
    """A 64-bit hash of (seed, group id) per row, stable across Python and library versions."""
    prefix = f"{seed}\x1f".encode()
    digests = b"".join(hashlib.blake2b(prefix + g.encode("utf-8"), digest_size=8).digest() for g in group_ids)
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def draw_subsets(group_ids: Sequence[str], n_candidates: int, k: int, seed: int) -> np.ndarray:
    """A boolean (rows x candidates) mask with exactly k candidates chosen per row."""
    if not 0 < k <= n_candidates:
        raise ValueError(f"cannot draw {k} of {n_candidates} candidates")
    hashes = row_hashes(group_ids, seed)
    salts = splitmix64(np.arange(1, n_candidates + 1, dtype=np.uint64))
    keys = splitmix64(hashes[:, None] ^ salts[None, :])
    chosen = np.argsort(keys, axis=1, kind="stable")[:, :k]
    mask = np.zeros((len(group_ids), n_candidates), dtype=bool)
    np.put_along_axis(mask, chosen, True, axis=1)
    return mask


@dataclass(frozen=True)
class Layout:
    """For each source row: whether its own row is kept, and which targets it is translated into."""

    keep_source: np.ndarray  # (rows,) bool
    targets: np.ndarray  # (rows, len(pool)) bool, columns in pool order


def multiway_layout(group_ids: Sequence[str], pool: Sequence[str], k: int | None, include_source: bool, seed: int) -> Layout:
    """All of the pool, k of the pool per row, or (en-ablate) k + 1 of source + pool per row."""
    rows = len(group_ids)
    if k is None:
        return Layout(np.ones(rows, dtype=bool), np.ones((rows, len(pool)), dtype=bool))
    if include_source:
        return Layout(np.ones(rows, dtype=bool), draw_subsets(group_ids, len(pool), k, seed))
    mask = draw_subsets(group_ids, len(pool) + 1, k + 1, seed)  # column 0 is the source language
    return Layout(mask[:, 0].copy(), mask[:, 1:].copy())
