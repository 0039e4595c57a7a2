"""tasks.evaluate.mining against plain brute-force re-implementations on small random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.evaluate.benchmarks.bucc import read_bucc
from tasks.evaluate.mining import (
    IvfSearch,
    best_threshold,
    bucc_mining,
    bucc_rows,
    gold_mask,
    greedy_one_to_one,
    knn,
    knn_recall,
    margin_candidates,
    mining_rows,
    score_at_threshold,
)


def unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def synthetic(n_x: int, n_y: int, n_gold: int, noise: float, dim: int, seed: int):
    """x random; y = noisy copies of n_gold rows of x plus distractors, shuffled; gold as index arrays."""
    rng = np.random.default_rng(seed)
    x = unit(rng.standard_normal((n_x, dim)))
    gold_src = rng.choice(n_x, n_gold, replace=False)
    y = rng.standard_normal((n_y, dim))
    y[:n_gold] = x[gold_src] + noise / np.sqrt(dim) * y[:n_gold]
    order = rng.permutation(n_y)
    y = unit(y[order])
    gold_tgt = np.argsort(order)[:n_gold]
    return x, y, gold_src, gold_tgt


# ------------------------------------------------------------------ brute force, written plainly


def brute_force_candidates(x: np.ndarray, y: np.ndarray, k: int = 4) -> list[tuple[int, int, float]]:
    """Artetxe & Schwenk ratio margin, forward + backward, greedy one-to-one, with Python loops."""
    cos = x.astype(np.float64) @ y.astype(np.float64).T
    nn_xy = [list(np.argsort(-cos[i])[:k]) for i in range(len(x))]
    nn_yx = [list(np.argsort(-cos[:, j])[:k]) for j in range(len(y))]
    mean_x = [sum(cos[i, j] for j in nn_xy[i]) / k for i in range(len(x))]
    mean_y = [sum(cos[i, j] for i in nn_yx[j]) / k for j in range(len(y))]

    def margin(i, j):
        return cos[i, j] / ((mean_x[i] + mean_y[j]) / 2)

    proposals = {}
    for i in range(len(x)):
        j = max(nn_xy[i], key=lambda j: margin(i, j))
        proposals[(i, j)] = margin(i, j)
    for j in range(len(y)):
        i = max(nn_yx[j], key=lambda i: margin(i, j))
        proposals[(i, j)] = margin(i, j)
    used_x, used_y, kept = set(), set(), []
    for (i, j), score in sorted(proposals.items(), key=lambda item: -item[1]):
        if i not in used_x and j not in used_y:
            used_x.add(i)
            used_y.add(j)
            kept.append((i, j, score))
    return kept


def brute_force_best_f1(scores: list[float], is_gold: list[bool], n_gold: int) -> float:
    best = 0.0
    for threshold in sorted(set(scores)):
        selected = [g for s, g in zip(scores, is_gold) if s >= threshold]
        tp = sum(selected)
        if tp:
            precision, recall = tp / len(selected), tp / n_gold
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def f1_at(scores, is_gold, n_gold, threshold) -> float:
    selected = [g for s, g in zip(scores, is_gold) if s >= threshold]
    tp = sum(selected)
    return 0.0 if tp == 0 else 2 * tp / (len(selected) + n_gold)


# ------------------------------------------------------------------ candidates and F1


@pytest.mark.parametrize(("n_x", "n_y", "noise", "seed"), [(300, 260, 3.0, 0), (200, 320, 4.0, 1), (150, 150, 5.0, 2)])
def test_margin_candidates_match_brute_force(n_x, n_y, noise, seed):
    x, y, gold_src, gold_tgt = synthetic(n_x, n_y, 80, noise, 48, seed)
    pairs = margin_candidates(x, y)
    expected = brute_force_candidates(x, y)
    assert [(i, j) for i, j, _ in expected] == list(zip(pairs.src.tolist(), pairs.tgt.tolist()))
    np.testing.assert_allclose(pairs.score, [s for _, _, s in expected], rtol=1e-5)
    assert len(set(pairs.src.tolist())) == len(pairs) and len(set(pairs.tgt.tolist())) == len(pairs)
    # F1 at the best threshold equals the brute-force search over every threshold
    gold = set(zip(gold_src.tolist(), gold_tgt.tolist()))
    is_gold = [(i, j) in gold for i, j, _ in expected]
    choice = best_threshold(pairs.score, gold_mask(pairs, gold_src, gold_tgt), len(gold))
    assert 0 < choice.f1 < 1
    assert math.isclose(choice.f1, brute_force_best_f1([s for *_, s in expected], is_gold, len(gold)), rel_tol=1e-12)


def test_bucc_mining_tunes_on_one_split_and_applies_to_the_other():
    tune = synthetic(250, 250, 70, 3.5, 48, 10)
    test = synthetic(250, 250, 70, 3.5, 48, 11)
    result = bucc_mining(tune, test)
    # brute force: threshold from the tuning split, F1 on the test split
    tune_pairs = brute_force_candidates(tune[0], tune[1])
    gold = set(zip(tune[2].tolist(), tune[3].tolist()))
    tune_scores = [s for *_, s in tune_pairs]
    tune_gold = [(i, j) in gold for i, j, _ in tune_pairs]
    assert math.isclose(result.tune.f1, brute_force_best_f1(tune_scores, tune_gold, len(gold)), rel_tol=1e-12)
    test_pairs = brute_force_candidates(test[0], test[1])
    test_gold_set = set(zip(test[2].tolist(), test[3].tolist()))
    expected = f1_at([s for *_, s in test_pairs], [(i, j) in test_gold_set for i, j, _ in test_pairs], 70, result.test.threshold)
    assert math.isclose(result.test.f1, expected, rel_tol=1e-12)
    assert result.test.threshold == result.tune.threshold and result.test.n_gold == 70
    rows = mining_rows(result, src_lang="de")
    assert {(r["dataset"], r["metric"]) for r in rows} == {
        (f"bucc2018.{split}", metric) for split in ("test", "training") for metric in ("precision", "recall", "f1", "threshold")
    }
    assert all(r["src_lang"] == "deu_Latn" and r["tgt_lang"] == "eng_Latn" and r["benchmark"] == "bucc" for r in rows)


def test_bucc_rows_from_read_splits(tmp_path):
    rng = np.random.default_rng(3)
    splits, embeddings = [], []
    for split in ("sample", "test"):
        x, y, gold_src, gold_tgt = synthetic(40, 50, 15, 2.0, 32, int(rng.integers(1000)))
        folder = tmp_path / split
        folder.mkdir()
        (folder / f"de-en.{split}.de").write_text("".join(f"de-{i}\tsatz {i}\n" for i in range(40)))
        (folder / f"de-en.{split}.en").write_text("".join(f"en-{j}\tsentence {j}\n" for j in range(50)))
        (folder / f"de-en.{split}.gold").write_text("".join(f"de-{i}\ten-{j}\n" for i, j in zip(gold_src, gold_tgt)))
        splits.append(read_bucc(folder, "de", split))
        embeddings.append((x, y))
    rows = bucc_rows(splits[0], *embeddings[0], splits[1], *embeddings[1])
    f1 = {r["dataset"]: r["value"] for r in rows if r["metric"] == "f1"}
    assert set(f1) == {"bucc2018.sample", "bucc2018.test"} and all(0 < v <= 1 for v in f1.values())
    with pytest.raises(ValueError, match="embeddings for"):
        bucc_rows(splits[0], embeddings[0][0][:5], embeddings[0][1], splits[1], *embeddings[1])


# ------------------------------------------------------------------ greedy matching


def sequential_greedy(src, tgt, score) -> list[int]:
    order = sorted(range(len(score)), key=lambda i: (-score[i], src[i], tgt[i]))
    used_s, used_t, kept = set(), set(), []
    for i in order:
        if src[i] not in used_s and tgt[i] not in used_t:
            used_s.add(src[i])
            used_t.add(tgt[i])
            kept.append(i)
    return kept


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 5)), min_size=1, max_size=40))
def test_greedy_one_to_one_equals_sequential_walk(edges):
    src, tgt, score = (np.array(column) for column in zip(*edges))
    score = score.astype(np.float64) / 5  # few distinct values: many ties
    assert greedy_one_to_one(src, tgt, score).tolist() == sequential_greedy(src.tolist(), tgt.tolist(), score.tolist())


def test_greedy_one_to_one_long_chain():
    # a chain where each round can only keep one pair: still exact
    n = 200
    src = np.r_[np.arange(n), np.arange(1, n)]
    tgt = np.r_[np.arange(n), np.arange(n - 1)]
    score = np.r_[np.arange(n) * 2.0, np.arange(1, n) * 2.0 + 1]
    assert greedy_one_to_one(src, tgt, score).tolist() == sequential_greedy(src.tolist(), tgt.tolist(), score.tolist())


# ------------------------------------------------------------------ best_threshold


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=1, max_size=60), st.integers(0, 5))
def test_best_threshold_matches_brute_force(candidates, missing_gold):
    scores = [s / 4 for s, _ in candidates]  # coarse values: ties are common
    is_gold = [g for _, g in candidates]
    n_gold = sum(is_gold) + missing_gold
    if n_gold == 0:
        with pytest.raises(ValueError, match="n_gold"):
            best_threshold(np.array(scores), np.array(is_gold))
        return
    choice = best_threshold(np.array(scores), np.array(is_gold), n_gold)
    expected = brute_force_best_f1(scores, is_gold, n_gold)
    assert math.isclose(choice.f1, expected, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(f1_at(scores, is_gold, n_gold, choice.threshold), choice.f1, rel_tol=1e-12, abs_tol=1e-15)
    assert choice.n_selected == sum(s >= choice.threshold for s in scores)


def test_best_threshold_edges():
    # best at the last candidate: threshold = lowest score, no read past the end
    choice = best_threshold(np.array([0.9, 0.5, 0.1]), np.array([True, True, True]))
    assert (choice.threshold, choice.f1, choice.n_selected) == (0.1, 1.0, 3)
    # midpoint between consecutive distinct scores
    assert best_threshold(np.array([3.0, 2.0, 1.0]), np.array([True, False, False])).threshold == 2.5
    # no gold among the candidates: nothing selected
    none = best_threshold(np.array([1.0, 2.0]), np.array([False, False]), n_gold=3)
    assert none.f1 == 0 and none.n_selected == 0 and none.threshold > 2.0
    with pytest.raises(ValueError, match="no candidates"):
        best_threshold(np.array([]), np.array([], dtype=bool))
    with pytest.raises(ValueError, match="NaN"):
        best_threshold(np.array([np.nan]), np.array([True]))


def test_score_at_threshold_counts():
    x, y, gold_src, gold_tgt = synthetic(100, 100, 30, 2.0, 32, 5)
    pairs = margin_candidates(x, y)
    everything = score_at_threshold(pairs, gold_src, gold_tgt, -np.inf)
    assert everything.n_selected == len(pairs) == everything.n_candidates and everything.n_gold == 30
    nothing = score_at_threshold(pairs, gold_src, gold_tgt, np.inf)
    assert (nothing.n_selected, nothing.precision, nothing.recall, nothing.f1) == (0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="gold indices outside"):
        gold_mask(pairs, np.array([0]), np.array([100]))


# ------------------------------------------------------------------ k-NN


def test_knn_exact_and_ivf():
    x, y, *_ = synthetic(400, 500, 50, 1.0, 32, 7)
    sims, inds = knn(x, y, 4)
    brute = x.astype(np.float64) @ y.astype(np.float64).T
    np.testing.assert_array_equal(inds, np.argsort(-brute, axis=1)[:, :4])
    np.testing.assert_allclose(sims, np.take_along_axis(brute, inds, axis=1), rtol=1e-5)
    # IVF scanning every list is exact; scanning few lists loses some neighbours
    _, full = knn(x, y, 4, IvfSearch(nlist=8, nprobe=8))
    assert knn_recall(x, y, full, sample_size=100) == 1.0
    _, partial = knn(x, y, 4, IvfSearch(nlist=16, nprobe=1))
    assert 0 < knn_recall(x, y, partial, sample_size=400) < 1
    with pytest.raises(ValueError, match="k=9 must be between 1"):
        knn(x[:3], y[:8], 9)


def test_inputs_are_checked():
    x, y, *_ = synthetic(20, 20, 5, 1.0, 16, 8)
    with pytest.raises(ValueError, match="not L2-normalised"):
        margin_candidates(x * 2, y)
    with pytest.raises(ValueError, match="differ in dimension"):
        margin_candidates(x, y[:, :8] / np.linalg.norm(y[:, :8], axis=1, keepdims=True))
