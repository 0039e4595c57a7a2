"""SeenHashes (exact and near dedupe without a sample) holds 8 bytes a distinct group and its
merges allocate one array of the merged size, not three (benchmarks/corpus_scale.py)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tasks.corpus.sampling import SeenHashes


@pytest.mark.slow
def test_a_merge_of_two_levels_allocates_little_more_than_the_merged_level():
    rng = np.random.default_rng(0)
    seen = SeenHashes()
    seen.add(rng.integers(0, 2**63, 1_000_000, dtype=np.uint64))
    fresh = rng.integers(2**63, 2**64 - 1, 1_000_000, dtype=np.uint64)  # disjoint from the first
    tracemalloc.start()  # numpy reports its array buffers to tracemalloc
    try:
        seen.add(fresh)  # 1M existing <= 2 x 1M new: the two levels merge
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [len(level) for level in seen.levels] == [2_000_000]
    assert np.all(seen.levels[0][1:] > seen.levels[0][:-1])
    # the merged array (8 bytes a hash) plus the incoming batch's own copies; np.union1d took 28
    assert peak / 2_000_000 <= 16, f"{peak / 2_000_000:.1f} bytes per merged hash"
    assert seen.contains(fresh).all() and len(seen) == 2_000_000
