from __future__ import annotations

import numpy as np
import pytest

from tasks.align.combine import DirectionalLinks, combine_directions, grow_diag_final_and


def links(pair, src, tgt, score, width=None) -> DirectionalLinks:
    n = len(pair)
    return DirectionalLinks(
        np.array(pair), np.array(src), np.array(tgt), np.array(score, dtype=np.float32), np.array(width or [1] * n)
    )


FWD = links([0, 0, 0, 1], [0, 1, 1, 0], [0, 1, 2, 0], [0.9, 0.6, 0.6, 0.3], [1, 2, 2, 1])
BWD = links([0, 0, 1], [0, 2, 1], [0, 2, 0], [0.8, 0.9, 0.95])


def as_sets(result):
    return [{(int(i), int(j)): round(float(s), 4) for i, j, s in zip(*r)} for r in result]


def test_sum_keeps_forward_links_only_and_divides_by_span_width() -> None:
    out = as_sets(combine_directions(2, FWD, BWD, method="sum", threshold=0.5))
    # (0,0): 0.9 + 0.8 = 1.7; (1,1): 0.3; (1,2): 0.3 (no B->A); pair 1 (0,0): 0.3; (2,2) and (1,0) only B->A: dropped
    assert out == [{(0, 0): 0.85}, {}]


def test_average_intersection_union() -> None:
    assert as_sets(combine_directions(2, FWD, BWD, method="average", threshold=0.4)) == [
        {(0, 0): 0.85, (2, 2): 0.45},
        {(1, 0): 0.475},
    ]
    assert as_sets(combine_directions(2, FWD, BWD, method="intersection", threshold=0.5)) == [{(0, 0): 0.85}, {}]
    assert as_sets(combine_directions(2, FWD, BWD, method="union", threshold=0.5)) == [
        {(0, 0): 0.9, (1, 1): 0.6, (1, 2): 0.6, (2, 2): 0.9},
        {(1, 0): 0.95},
    ]
    with pytest.raises(ValueError, match="unknown combination"):
        combine_directions(1, FWD, BWD, method="mean", threshold=0.1)


def test_grow_diag_final_and_adds_neighbours_of_the_intersection() -> None:
    fwd = np.zeros((4, 4), dtype=bool)
    bwd = np.zeros((4, 4), dtype=bool)
    fwd[0, 0] = bwd[0, 0] = True
    fwd[1, 1] = True  # diagonal neighbour of an intersection link, both words unaligned: grown
    bwd[3, 0] = True  # not adjacent; target 0 already aligned: "final-and" leaves it out
    out = grow_diag_final_and(4, 4, fwd, bwd)
    assert set(zip(*np.nonzero(out))) == {(0, 0), (1, 1)}
