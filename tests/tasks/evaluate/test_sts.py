"""tasks.evaluate.sts: Spearman against scipy, and STS rows from paired embeddings."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tasks.evaluate.groups import rows_table
from tasks.evaluate.sts import paired_cosine, spearman, sts_rows


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy_with_and_without_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 400))
    continuous = rng.standard_normal(n)
    tied = rng.integers(0, 6, n).astype(float)  # gold scores on a 0-5 scale: many ties
    noisy = tied + rng.standard_normal(n)
    for a, b in ((continuous, noisy), (tied, noisy), (tied, rng.integers(0, 3, n).astype(float))):
        assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.floats(-1e3, 1e3, allow_nan=False)), min_size=2, max_size=50))
def test_spearman_property_vs_scipy(pairs):
    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs])
    expected = stats.spearmanr(a, b).statistic if np.ptp(a) > 0 and np.ptp(b) > 0 else math.nan
    ours = spearman(a, b)
    assert (math.isnan(ours) and math.isnan(expected)) or ours == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_spearman_is_scipys_to_the_last_bit(seed):
    # scipy computes it (the hand-written ranks it replaced differed in the last bits on most inputs)
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 6, 300).astype(float)
    cosine = gold + rng.standard_normal(300)
    assert spearman(cosine, gold) == float(stats.spearmanr(cosine, gold).statistic)


def test_spearman_of_constant_input_is_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's ConstantInputWarning is not passed on
        assert math.isnan(spearman([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]))
        assert math.isnan(spearman([1.0, 2.0, 3.0], [0.5, 0.5, 0.5]))


def test_spearman_errors_and_constant_input():
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert spearman([1, 2, 3], [30, 20, 10]) == -1.0
    with pytest.raises(ValueError, match="differ in length"):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least two"):
        spearman([1], [1])
    with pytest.raises(ValueError, match="NaN"):
        spearman([1, np.nan], [1, 2])


def test_sts_rows_use_cosine_of_paired_embeddings():
    rng = np.random.default_rng(7)
    emb1 = rng.standard_normal((50, 12))
    emb1 /= np.linalg.norm(emb1, axis=1, keepdims=True)
    emb2 = emb1 + rng.standard_normal((50, 12))
    emb2 /= np.linalg.norm(emb2, axis=1, keepdims=True)
    gold = rng.uniform(0, 5, 50)
    cosine = np.array([float(np.dot(u, v)) for u, v in zip(emb1, emb2)])
    np.testing.assert_allclose(paired_cosine(emb1.astype(np.float32), emb2.astype(np.float32)), cosine, atol=1e-6)
    rows = sts_rows(
        emb1.astype(np.float32), emb2.astype(np.float32), gold, dataset="STS.input.track2.ar-en", src_lang="ar", tgt_lang="en"
    )
    assert rows == [
        {
            "benchmark": "sts",
            "dataset": "STS.input.track2.ar-en",
            "src_lang": "arb_Arab",
            "tgt_lang": "eng_Latn",
            "metric": "spearman",
            "value": pytest.approx(stats.spearmanr(cosine, gold).statistic, abs=1e-6),
            "n": 50,
        }
    ]
    assert rows_table(rows).num_rows == 1
    with pytest.raises(ValueError, match="49 gold scores for 50 pairs"):
        sts_rows(emb1.astype(np.float32), emb2.astype(np.float32), gold[:49], dataset="d", src_lang="en", tgt_lang="en")
