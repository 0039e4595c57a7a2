"""The train stage's objectives and word pairs against the papers' equations, computed by hand.

- multi-way SupCon (Fazili & Goswami eq. 1-3): the paper's denominator (negatives only) and its
  sum over anchors, against numpy on a 2-row x 3-language toy;
- word pairs: a greedy 1-1 matching by alignment score, each word in at most one pair;
- DuEAM's WMD: the Sinkhorn estimate against exact optimal transport (scipy).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from scipy.optimize import linear_sum_assignment, linprog

from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.stage_config import keyed_config
from tasks.train.alignment_join import one_to_one_pairs
from tasks.train.config import TrainConfig
from tasks.train.data import build_training_data
from tasks.train.objectives import MultiwaySupConLoss
from tasks.train.objectives.dueam_wmd import DuEAMConfig, DuEAMLoss, sinkhorn_distance
from tasks.train.objectives.multiway_supcon import MultiwaySupConConfig

REPO = Path(__file__).resolve().parents[3]

# ----------------------------------------------------------------------------- multi-way SupCon


def toy_rows() -> tuple[np.ndarray, np.ndarray]:
    """2 rows x 3 languages of unit vectors (rows 0 and 1 are two sentences and their translations) and a frozen copy."""
    rng = np.random.default_rng(7)
    z = rng.normal(size=(2, 3, 4))
    z /= np.linalg.norm(z, axis=-1, keepdims=True)
    z_orig = z + 0.1 * rng.normal(size=z.shape)
    return z, z_orig


def paper_supcon(z: np.ndarray, z_orig: np.ndarray, *, tau: float, lam: float, boost: bool) -> float:
    """Eq. 1-3 written out: L = sum_i -1/|P(i)| sum_p log(exp(z_i.z_p/tau) / sum_{a in A(i)} exp(z_i.z_a/tau)) + lam * R."""
    rows, views, _ = z.shape
    flat, row_of = z.reshape(rows * views, -1), np.repeat(np.arange(rows), views)
    total = 0.0
    for i in range(len(flat)):
        positives = [p for p in range(len(flat)) if p != i and row_of[p] == row_of[i]]
        a_of_i = [a for a in range(len(flat)) if a != i and a not in positives]  # A(i) = I \ ({i} u P(i))
        denominator = sum(np.exp(flat[i] @ flat[a] / tau) for a in a_of_i)
        terms = []
        for p in positives:
            logit = flat[i] @ flat[p] / tau
            if boost:  # appendix: the positive's logit scaled by exp(-z_i . z_p)
                logit *= np.exp(-flat[i] @ flat[p])
            terms.append(logit - np.log(denominator))
        total += -np.mean(terms)
    regulariser = np.mean(np.sum((z_orig - z).reshape(rows * views, -1) ** 2, axis=1))  # eq. 2: / N, all sentences
    return total + lam * regulariser


@pytest.mark.parametrize("boost", [False, True])
def test_supcon_paper_form_is_equation_one_summed_over_anchors(boost):
    z, z_orig = toy_rows()
    want = paper_supcon(z, z_orig, tau=0.1, lam=0.5, boost=boost)
    loss = MultiwaySupConLoss(temperature=0.1, positive_boost=boost, regularization=0.5, denominator="paper", reduction="sum")
    got = loss(
        torch.tensor(z, dtype=torch.float32),
        torch.ones(2, 3, dtype=torch.bool),
        {"z_orig": torch.tensor(z_orig, dtype=torch.float32)},
    )
    assert abs(float(got) - want) < 1e-4 * max(1.0, abs(want))
    # the former (and still default) form keeps positives in the denominator and averages over the 6 anchors: another number
    khosla = MultiwaySupConLoss(temperature=0.1, positive_boost=boost, regularization=0.5)(
        torch.tensor(z, dtype=torch.float32),
        torch.ones(2, 3, dtype=torch.bool),
        {"z_orig": torch.tensor(z_orig, dtype=torch.float32)},
    )
    assert abs(float(khosla) - want) > 0.5


def test_supcon_mean_reduction_divides_the_anchor_sum_only():
    """reduction = "mean" is the sum over the 6 anchors / 6; the regulariser is not divided (lambda_paper = 6 x lambda)."""
    z, z_orig = toy_rows()
    emb, valid, extras = (
        torch.tensor(z, dtype=torch.float32),
        torch.ones(2, 3, dtype=torch.bool),
        {"z_orig": torch.tensor(z_orig, dtype=torch.float32)},
    )
    summed = MultiwaySupConLoss(temperature=0.1, regularization=0.0, denominator="paper", reduction="sum")(emb, valid, {})
    mean = MultiwaySupConLoss(temperature=0.1, regularization=0.3, denominator="paper", reduction="mean")(emb, valid, extras)
    regulariser = np.mean(np.sum((z_orig - z).reshape(6, -1) ** 2, axis=1))
    assert abs(float(mean) - (float(summed) / 6 + 0.3 * regulariser)) < 1e-5


def test_supcon_paper_denominator_skips_anchors_without_negatives_without_nan():
    """One row alone: A(i) is empty for every text, nothing to contrast; the value is 0, in the graph, gradients finite."""
    emb = torch.nn.functional.normalize(torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(3)), dim=-1).requires_grad_()
    loss = MultiwaySupConLoss(denominator="paper", reduction="sum")(emb, torch.ones(1, 3, dtype=torch.bool), {})
    loss.backward()
    assert loss.item() == 0.0 and torch.isfinite(emb.grad).all()
    with pytest.raises(ValueError, match="denominator"):
        MultiwaySupConLoss(denominator="supcon")
    with pytest.raises(ValueError, match="reduction"):
        MultiwaySupConLoss(reduction="max")


def test_supcon_profiles_say_which_form_they_train_and_defaults_keep_old_keys():
    paper = TrainConfig.model_validate(tomllib.loads((REPO / "configs" / "multiway-supcon.toml").read_text())["train"])
    supcon = paper.objectives.multiway_supcon
    assert (supcon.denominator, supcon.reduction) == ("paper", "sum")
    offline = TrainConfig.model_validate(tomllib.loads((REPO / "configs" / "offline-multiway.toml").read_text())["train"])
    assert (offline.objectives.multiway_supcon.denominator, offline.objectives.multiway_supcon.reduction) == ("khosla", "mean")
    # the defaults reproduce the former loss, so configs that do not name them keep their cache keys
    assert set(keyed_config(MultiwaySupConConfig(weight=1.0))) == {
        "weight",
        "temperature",
        "positive_boost",
        "regularization",
        "anchors",
    }
    assert keyed_config(MultiwaySupConConfig(weight=1.0, denominator="paper"))["denominator"] == "paper"


# ----------------------------------------------------------------------------- word pairs


def greedy_by_hand(pairs: list[tuple[int, int]], scores: list[float]) -> list[list[int]]:
    """The pair-by-pair greedy: best score first (ties: lower source, then lower target word)."""
    used_src, used_tgt, kept = set(), set(), []
    for s, (a, b) in sorted(zip(scores, pairs), key=lambda t: (-t[0], t[1][0], t[1][1])):
        if a not in used_src and b not in used_tgt:
            kept.append([a, b])
            used_src.add(a)
            used_tgt.add(b)
    return sorted(kept)


def test_one_to_one_pairs_keeps_the_best_partner_on_both_sides():
    pairs = np.array([[0, 0], [0, 1], [1, 2], [2, 2], [3, 3], [4, 3], [4, 4]])
    scores = np.array([0.3, 0.9, 0.8, 0.6, 0.9, 0.8, 0.7])
    # word 0 keeps pivot word 1 (0.9), not the first-listed 0 (0.3); pivot word 2 keeps word 1 only;
    # 4 loses pivot word 3 to 3 and falls back to 4 (a second round of the vectorised matching)
    assert pairs[one_to_one_pairs(pairs, scores)].tolist() == [[0, 1], [1, 2], [3, 3], [4, 4]]
    # sentence pairs are matched independently: the same word indices in another sentence pair do not compete
    both = one_to_one_pairs(
        np.concatenate([pairs, pairs[::-1]]), np.concatenate([scores, scores[::-1]]), np.repeat([0, 1], len(pairs))
    )
    assert both.tolist() == [*one_to_one_pairs(pairs, scores).tolist(), *one_to_one_pairs(pairs, scores)[::-1].tolist()]
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(1, 30))
        p = rng.integers(0, 6, size=(k, 2))
        sc = rng.choice([0.2, 0.5, 0.5, 0.9, 1.0], size=k)  # ties too
        p, first = np.unique(p, axis=0, return_index=True)
        got = p[one_to_one_pairs(p, sc[first])].tolist()
        assert sorted(got) == greedy_by_hand([tuple(x) for x in p.tolist()], sc[first].tolist())


def test_training_data_word_pairs_are_one_to_one_by_score(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    texts = {"eng_Latn": "the river city bright", "fra_Latn": "la rivière ville claire"}
    corpus = pa.Table.from_pylist(
        [
            {"id": f"g1:{lang}", "group_id": "g1", "lang": lang, "text": t, "split": "train", "source": "t"}
            for lang, t in texts.items()
        ],
        schema=CORPUS_SCHEMA,
    )
    links = [  # (fra word, eng word, score), as the aligner wrote them: fra -> eng
        (0, 0, 0.4), (0, 1, 0.95),  # fra 0 has two partners; the old code kept the first listed, (0, 0)
        (1, 1, 0.5), (2, 1, 0.3),  # eng 1 ("river") has three partners: fra 0 wins (0.95)
        (2, 2, 0.9), (3, 2, 0.8),  # eng 2 ("city"): fra 2 wins; fra 3 keeps its own next best
        (3, 3, 0.6),
    ]  # fmt: skip
    align = pa.Table.from_pylist(
        [{"id": "g1:fra_Latn-eng_Latn", "group_id": "g1", "src_lang": "fra_Latn", "tgt_lang": "eng_Latn",
          "src_words": texts["fra_Latn"].split(), "tgt_words": texts["eng_Latn"].split(),
          "alignments": [{"src": a, "tgt": b, "score": s} for a, b, s in links], "backend": "t"}],
        schema=WORD_ALIGNMENT_SCHEMA,
    )  # fmt: skip
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=16, alignments=align)
    kept = data.alignments[(int(data.groups[0, 1]), int(data.groups[0, 0]))]
    assert kept.tolist() == [[0, 1], [2, 2], [3, 3]]
    assert len(set(kept[:, 0])) == len(kept) and len(set(kept[:, 1])) == len(kept)  # WTR/AWP: one target per word
    assert data.dropped["word_pair_not_one_to_one"] == 4


# ----------------------------------------------------------------------------- DuEAM's WMD


def exact_wmd(x: np.ndarray, y: np.ndarray) -> float:
    """Exact optimal transport with uniform weights and Euclidean cost (a linear program)."""
    a, b = len(x), len(y)
    cost = np.linalg.norm(x[:, None] - y[None], axis=-1)
    if a == b:  # uniform and equal sizes: an optimal plan is a permutation
        r, c = linear_sum_assignment(cost)
        return float(cost[r, c].mean())
    rows = np.kron(np.eye(a), np.ones((1, b)))  # sum_j P_ij = 1/a
    cols = np.kron(np.ones((1, a)), np.eye(b))  # sum_i P_ij = 1/b
    res = linprog(
        cost.ravel(),
        A_eq=np.vstack([rows, cols]),
        b_eq=np.r_[np.full(a, 1 / a), np.full(b, 1 / b)],
        bounds=(0, None),
        method="highs",
    )
    assert res.success
    return float(res.fun)


def token_clouds(n_pairs: int = 6, dim: int = 16, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Unit 'token vectors' of sentence pairs whose words roughly translate each other, padded to 9 and
    10 tokens with different real lengths. Like a contextual model's token vectors they share a common
    direction, so every cost lies in a narrow band (~0.2-0.7, exact WMD ~0.35), where the entropic
    bias is largest (e5-small's on FLORES: costs 0.3-1.05, WMD 0.5-0.85)."""
    rng = np.random.default_rng(seed)
    common = rng.normal(size=dim)
    common *= 3.0 / np.linalg.norm(common)
    x, y = np.zeros((n_pairs, 9, dim)), np.zeros((n_pairs, 10, dim))
    x_mask, y_mask = np.zeros((n_pairs, 9), bool), np.zeros((n_pairs, 10), bool)
    for k in range(n_pairs):
        a, b = int(rng.integers(4, 10)), int(rng.integers(4, 11))
        words = rng.normal(size=(max(a, b), dim)) / np.sqrt(dim) + common
        x[k, :a] = words[rng.permutation(max(a, b))[:a]] + 0.7 * rng.normal(size=(a, dim)) / np.sqrt(dim)
        y[k, :b] = words[rng.permutation(max(a, b))[:b]] + 0.7 * rng.normal(size=(b, dim)) / np.sqrt(dim)
        x_mask[k, :a], y_mask[k, :b] = True, True
    x /= np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)
    y /= np.maximum(np.linalg.norm(y, axis=-1, keepdims=True), 1e-9)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(x_mask), torch.tensor(y, dtype=torch.float32), torch.tensor(y_mask)


def test_sinkhorn_wmd_bounds_the_exact_wmd_and_the_default_is_within_one_percent():
    x, x_mask, y, y_mask = token_clouds()
    exact = np.array([exact_wmd(x[k][x_mask[k]].double().numpy(), y[k][y_mask[k]].double().numpy()) for k in range(len(x))])
    assert (exact > 0.2).all()
    errors = {}
    for eps in (0.1, 0.05, 0.02, 0.01):
        got = sinkhorn_distance(x, x_mask, y, y_mask, epsilon=eps, iterations=300).double().numpy()
        errors[eps] = got / exact - 1
        assert (errors[eps] > -1e-4).all(), (eps, errors[eps])  # the cost of a feasible plan: never below exact OT
    means = [float(errors[eps].mean()) for eps in (0.1, 0.05, 0.02, 0.01)]
    assert means == sorted(means, reverse=True) and means[1] > 0.02  # shrinks with epsilon; 0.05 is off by > 2%
    former = sinkhorn_distance(x, x_mask, y, y_mask, epsilon=0.05, iterations=50).double().numpy()  # the former default
    assert float((former / exact - 1).mean()) > 0.03
    config = DuEAMConfig(weight=1.0)
    default = (
        sinkhorn_distance(x, x_mask, y, y_mask, epsilon=config.sinkhorn_epsilon, iterations=config.sinkhorn_iterations)
        .double()
        .numpy()
    )
    assert np.abs(default / exact - 1).max() < 0.01
    loss = DuEAMLoss()
    assert (loss.settings.sinkhorn_epsilon, loss.settings.sinkhorn_iterations) == (
        config.sinkhorn_epsilon,
        config.sinkhorn_iterations,
    )


def test_sinkhorn_with_few_rounds_still_moves_all_the_mass():
    """Stopped early, the plain Sinkhorn plan matches only one marginal and can price below the exact WMD;
    the rounded plan moves exactly 1/a from every token and 1/b to every token."""
    x, x_mask, y, y_mask = token_clouds(seed=1)
    exact = np.array([exact_wmd(x[k][x_mask[k]].double().numpy(), y[k][y_mask[k]].double().numpy()) for k in range(len(x))])
    got = sinkhorn_distance(x, x_mask, y, y_mask, epsilon=0.005, iterations=5).double().numpy()
    assert (got >= exact - 1e-5).all()
