"""Objectives against hand computations and edge cases (no model needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from tasks.train.objectives import MultiwaySupConLoss, TranslationRankingLoss
from tasks.train.objectives.dueam_wmd import neighbour_rows, sinkhorn_distance


def unit(x: torch.Tensor) -> torch.Tensor:
    return nn.functional.normalize(x, dim=-1)


def test_translation_ranking_is_cross_entropy_over_scaled_cosines():
    torch.manual_seed(0)
    emb = unit(torch.randn(5, 2, 8))
    got = TranslationRankingLoss(temperature=0.05)(emb, torch.ones(5, 2, dtype=torch.bool), {})
    sims = emb[:, 1] @ emb[:, 0].T * 20
    want = -torch.log_softmax(sims, dim=1).diag().mean()
    torch.testing.assert_close(got, want)
    both = TranslationRankingLoss(temperature=0.05, symmetric=True, margin=0.2)(emb, torch.ones(5, 2, dtype=torch.bool), {})
    m = (emb[:, 1] @ emb[:, 0].T - 0.2 * torch.eye(5)) * 20
    want2 = (-torch.log_softmax(m, 1).diag().mean() - torch.log_softmax(m.T, 1).diag().mean()) / 2
    torch.testing.assert_close(both, want2)


def test_supcon_matches_the_formula_and_survives_rows_without_positives():
    torch.manual_seed(1)
    emb = unit(torch.randn(3, 3, 8))
    valid = torch.tensor([[True, True, True], [True, True, False], [True, False, False]])  # row 2 has no positive
    loss = MultiwaySupConLoss(temperature=0.1)(emb, valid, {})
    z = emb.reshape(9, 8)[valid.reshape(-1)]
    group = [0, 0, 0, 1, 1, 2]
    terms = []
    for i in range(len(z)):
        positives = [p for p in range(len(z)) if p != i and group[p] == group[i]]
        if not positives:
            continue
        denom = sum(math.exp(float(z[i] @ z[a]) / 0.1) for a in range(len(z)) if a != i)
        terms.append(-np.mean([float(z[i] @ z[p]) / 0.1 - math.log(denom) for p in positives]))
    assert abs(float(loss) - np.mean(terms)) < 1e-5
    lonely = MultiwaySupConLoss()(emb[:, :1].clone().requires_grad_(), torch.ones(3, 1, dtype=torch.bool), {})
    assert lonely.detach().item() == 0.0 and lonely.requires_grad
    boosted = MultiwaySupConLoss(temperature=0.1, positive_boost=True, regularization=0.5)(emb, valid, {"z_orig": emb + 0.1})
    assert torch.isfinite(boosted)


def test_supcon_with_pivot_anchors_only_averages_over_view_zero():
    torch.manual_seed(2)
    emb = unit(torch.randn(4, 3, 8))
    valid = torch.ones(4, 3, dtype=torch.bool)
    got = MultiwaySupConLoss(temperature=0.1, anchors="pivot")(emb, valid, {})
    z = emb.reshape(12, 8)
    logits = z @ z.T / 0.1
    logits.fill_diagonal_(float("-inf"))
    log_prob = torch.log_softmax(logits, dim=1)
    terms = [-(log_prob[3 * r, 3 * r + 1] + log_prob[3 * r, 3 * r + 2]) / 2 for r in range(4)]
    torch.testing.assert_close(got, torch.stack(terms).mean())
    every = MultiwaySupConLoss(temperature=0.1)(emb, valid, {})
    assert not torch.isclose(got, every)  # the other views' anchors are left out
    with pytest.raises(ValueError, match="anchors"):
        MultiwaySupConLoss(anchors="english")


def test_sinkhorn_approaches_the_exact_transport_cost():
    x = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])
    y = torch.tensor([[[1.0, 0.1], [0.0, 0.1], [9.0, 9.0]]])
    mask_x = torch.tensor([[True, True]])
    mask_y = torch.tensor([[True, True, False]])  # the far point is padding
    got = sinkhorn_distance(x, mask_x, y, mask_y, epsilon=0.01, iterations=200)
    assert abs(float(got) - 0.1) < 1e-3  # each point moves 0.1 to its match
    assert neighbour_rows(5).tolist() == [1, 0, 3, 2, -1]


@pytest.mark.parametrize("pairs", ["parallel", "parallel_and_random", "random"])
def test_dueam_trains_on_the_chosen_pairs(pairs):
    """L_A = mean exp(|exp(-d) - exp(-wmd)|) over the chosen pairs, L_B = mean cosine of the pairs
    it names: translations, or for `random` (the paper's unsupervised variant) the mismatched ones only."""
    from tasks.train.objectives.dueam_wmd import DuEAMLoss

    torch.manual_seed(4)
    emb = unit(torch.randn(5, 2, 8))
    partner = torch.tensor(neighbour_rows(5), dtype=torch.float32)
    offsets = torch.where(partner >= 0, partner - torch.arange(5.0), torch.tensor(float("nan")))
    wmd_par, wmd_mis = torch.rand(5), torch.rand(5)
    wmd_mis[4] = float("nan")  # row 4 has no partner
    extras = {
        "wmd": torch.stack(
            [
                wmd_par if pairs != "random" else torch.full((5,), float("nan")),
                wmd_mis if pairs != "parallel" else torch.full((5,), float("nan")),
                offsets,
            ],
            1,
        )
    }
    got = DuEAMLoss(cosine_weight=0.5, pairs=pairs)(emb, torch.ones(5, 2, dtype=torch.bool), extras)
    src, tgt = emb[:, 1], emb[:, 0]
    a_terms, b_terms = [], []
    if pairs != "random":
        for i in range(5):
            a_terms.append(math.exp(abs(math.exp(-float((src[i] - tgt[i]).norm())) - math.exp(-float(wmd_par[i])))))
            b_terms.append(float(src[i] @ tgt[i]))
    if pairs != "parallel":
        for i, j in enumerate(neighbour_rows(5)):
            if j < 0:
                continue
            a_terms.append(math.exp(abs(math.exp(-float((src[i] - tgt[j]).norm())) - math.exp(-float(wmd_mis[i])))))
            if pairs == "random":
                b_terms.append(float(src[i] @ tgt[j]))
    assert abs(float(got) - (np.mean(a_terms) - 0.5 * np.mean(b_terms))) < 1e-5
    if pairs == "random":  # a lone row has no random partner: nothing to learn, still in the graph
        lone = emb[:1].clone().requires_grad_()
        nothing = DuEAMLoss(pairs="random")(lone, torch.ones(1, 2, dtype=torch.bool), {"wmd": torch.full((1, 3), float("nan"))})
        assert nothing.item() == 0.0 and nothing.requires_grad
    with pytest.raises(ValueError, match="pairs"):
        DuEAMLoss(pairs="weak")


def test_base_regularization_is_the_mean_squared_distance_to_the_frozen_vectors():
    from tasks.train.objectives import BaseRegularizationLoss

    torch.manual_seed(2)
    emb, start = unit(torch.randn(4, 3, 8)), unit(torch.randn(4, 3, 8))
    valid = torch.ones(4, 3, dtype=torch.bool)
    valid[1, 2] = valid[3, 1] = False  # rows without that view
    got = BaseRegularizationLoss()(emb, valid, {"z_orig": start})
    # ||z - z0||^2 = 2 - 2 cos for unit vectors, averaged over the 10 present texts
    want = (2 - 2 * (emb * start).sum(-1))[valid].mean()
    torch.testing.assert_close(got, want)
    assert float(BaseRegularizationLoss()(start, valid, {"z_orig": start})) == pytest.approx(0.0, abs=1e-6)


def test_base_similarity_counts_the_changed_angles_of_same_language_pairs_from_different_rows():
    from tasks.train.objectives import BaseSimilarityLoss

    torch.manual_seed(3)
    emb, start = unit(torch.randn(4, 2, 8)), unit(torch.randn(4, 2, 8))
    langs = torch.tensor([[0, 1], [0, 2], [0, 1], [0, -1]])  # view 0 English; row 3 has no second view
    valid = langs >= 0
    got = BaseSimilarityLoss()(emb, valid, {"z_orig": start, "langs": langs})
    texts = [(r, v) for r in range(4) for v in range(2) if valid[r, v]]
    squares = [
        (float(emb[a] @ emb[b]) - float(start[a] @ start[b])) ** 2
        for a in texts
        for b in texts
        if a[0] != b[0] and langs[a] == langs[b]  # same language, different rows: 12 English ordered pairs + 2 of language 1
    ]
    assert len(squares) == 14
    assert float(got) == pytest.approx(sum(squares) / len(squares), rel=1e-5)


def test_base_similarity_lets_a_language_move_as_a_whole_where_base_regularization_does_not():
    from tasks.train.objectives import BaseRegularizationLoss, BaseSimilarityLoss

    torch.manual_seed(4)
    start = unit(torch.randn(6, 2, 16))
    langs = torch.tensor([[0, 1]] * 6)
    valid = torch.ones(6, 2, dtype=torch.bool)
    rotation, _ = torch.linalg.qr(torch.randn(16, 16))
    moved = start.clone()
    moved[:, 1] = start[:, 1] @ rotation  # language 1 rotated as a whole, e.g. onto its translations
    extras = {"z_orig": start, "langs": langs}
    assert float(BaseSimilarityLoss()(moved, valid, extras)) == pytest.approx(0.0, abs=1e-6)
    assert float(BaseRegularizationLoss()(moved, valid, extras)) > 0.5
    scrambled = moved.clone()
    scrambled[:, 1] = moved[torch.tensor([0, 1, 2, 3, 5, 4]), 1] + 0.3 * torch.randn(6, 16)
    assert float(BaseSimilarityLoss()(unit(scrambled), valid, extras)) > 0.01  # the angles within the language changed


def test_per_word_reduction_divides_by_the_aligned_words_of_the_batch():
    from tasks.train.batching import StepBatch
    from tasks.train.objectives import WordTranslationRankingLoss
    from tasks.train.objectives.aligned_word_prediction import AlignedWordPredictionLoss

    pairs = np.full((3, 4, 2), -1, dtype=np.int32)
    pairs[0, :3] = [[0, 0], [1, 2], [2, 1]]
    pairs[2, :2] = [[0, 1], [1, 0]]  # row 1 has no alignment
    mask_src = np.zeros((3, 4), dtype=bool)
    mask_src[0, 1] = mask_src[2, 0] = True
    mask_tgt = mask_src.copy()
    mask_tgt[0, 2] = True
    drawn = {"aligned_word_prediction": {"mask_src": mask_src, "mask_tgt": mask_tgt}}  # what AWP drew for the step
    batch = StepBatch(np.zeros((3, 2), np.int64), np.zeros((3, 2), np.int64), pairs, drawn=drawn)
    assert WordTranslationRankingLoss().normaliser(None, batch) == 6.0  # 2 x 3 rows: the paper's eq. 8
    assert WordTranslationRankingLoss(reduction="per_word").normaliser(None, batch) == 10.0  # 2 x 5 aligned pairs
    head = nn.Linear(2, 2)
    assert AlignedWordPredictionLoss(head).normaliser(None, batch) == 6.0
    assert AlignedWordPredictionLoss(head, reduction="per_word").normaliser(None, batch) == 5.0  # masked words, both sides
    with pytest.raises(ValueError, match="reduction"):
        WordTranslationRankingLoss(reduction="mean")
