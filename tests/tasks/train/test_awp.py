"""Aligned word prediction against a hand computation of WACSE eq. 4-5, and its sampled softmax."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pyarrow as pa
import pytest
import torch

from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.train.batching import BatchPlan, step_draws_rng
from tasks.train.config import TrainConfig
from tasks.train.data import build_training_data
from tasks.train.model import DualEncoder, VocabularyHead, load_transformer
from tasks.train.objectives.aligned_word_prediction import (
    AlignedWordPredictionConfig,
    AlignedWordPredictionLoss,
    sampled_vocabulary,
)
from tasks.train.objectives.base import Chunk, Side, TrainContext

# one-to-one alignments (English word, Swahili word), so that both directions name one target per masked word
ROWS = [
    ("g1", "the river city is bright", "mto mji ni mkali sana", [(1, 0), (2, 1), (4, 3)]),
    ("g2", "small water runs", "maji madogo yanatiririka", [(0, 1), (1, 0)]),
    ("g3", "green hills", "milima kijani", [(0, 1), (1, 0)]),
]


@pytest.fixture(scope="module")
def toy(tiny_model_dir):
    from transformers import AutoTokenizer

    corpus, align = [], []
    for gid, en, sw, pairs in ROWS:
        for lang, text in (("eng_Latn", en), ("swh_Latn", sw)):
            corpus.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": text, "split": "train", "source": "t"})
        align.append({"id": f"{gid}:swh-eng", "group_id": gid, "src_lang": "swh_Latn", "tgt_lang": "eng_Latn",
                      "src_words": sw.split(), "tgt_words": en.split(),
                      "alignments": [{"src": s, "tgt": e, "score": 1.0} for e, s in pairs], "backend": "t"})  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    data = build_training_data(
        tokenizer, pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pivot="eng_Latn", langs=None, max_length=16,
        alignments=pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA),
    )  # fmt: skip
    torch.manual_seed(0)
    model = DualEncoder(load_transformer(tiny_model_dir, dropout=0.0)).eval()
    head = VocabularyHead(model)
    ctx = TrainContext(data, model, None, torch.device("cpu"), contextlib.nullcontext)
    return data, model, head, ctx


def step_batch(data, mask_fraction: float = 1.0, seed: int = 0, step: int = 0):
    """A step's batch with the words AWP masks drawn, as the trainer draws them (`Objective.draw`)."""
    awp = AlignedWordPredictionLoss(None, mask_fraction=mask_fraction)
    return BatchPlan(data, batch_size=3, views=2, seed=seed).batch(step).draw({awp.name: awp.draw}, step_draws_rng(seed, step))


def awp_loss(ctx, batch, objective) -> torch.Tensor:
    b = batch.size
    langs = torch.from_numpy(batch.lang_ids)

    def side(view: int) -> Side:
        return Side(
            torch.zeros(b, 1, 4, requires_grad=True), torch.ones(b, 1), torch.zeros(b, 1), torch.zeros(b, 1), langs[:, view]
        )

    return objective(ctx, Chunk(batch, side(1), side(0), b, objective.normaliser(ctx.data, batch)))


def hand_loss(data, model, head, batch) -> float:
    """Eq. 5: (1 / 2N) sum over rows of l(X_i) + l(Y_i); eq. 4: l(X_i) sums the token cross-entropy of
    every aligned word of X_i, all masked in one copy of X_i (longer word clipped), written with loops."""
    total = 0.0
    for row in range(batch.size):
        sw, en = int(batch.text_ids[row, 1]), int(batch.text_ids[row, 0])
        pairs = [tuple(p) for p in batch.pairs[row].tolist() if p[0] >= 0]
        for src, tgt, word_pairs, lang in (
            (sw, en, pairs, batch.lang_ids[row, 1]),
            (en, sw, [(u, w) for w, u in pairs], batch.lang_ids[row, 0]),
        ):
            n = int(data.lengths[src])
            ids = data.token_ids[src, :n].copy()
            src_words = data.word_ids[src, :n]
            for w, _ in word_pairs:
                ids[src_words == w] = data.mask_id
            with torch.no_grad():
                hidden, _ = model.token_states(
                    torch.from_numpy(ids)[None], torch.ones(1, n, dtype=torch.long), torch.tensor([lang])
                )
                log_p = torch.log_softmax(head(hidden[0]), dim=-1)
            for w, u in word_pairs:
                src_pos = np.flatnonzero(src_words == w)
                tgt_pos = np.flatnonzero(data.word_ids[tgt, : data.lengths[tgt]] == u)
                for p, q in zip(src_pos, tgt_pos):  # zip stops at the shorter word: the clipping
                    total -= float(log_p[p, data.token_ids[tgt, q]])
    return total / (2 * batch.size)


def test_default_awp_masks_every_aligned_word_in_one_copy_as_in_eq_4(toy):
    data, model, head, ctx = toy
    fraction = AlignedWordPredictionConfig().mask_fraction
    batch = step_batch(data, fraction)
    valid = batch.pairs[..., 0] >= 0
    assert valid.sum() == 7
    mask_src, mask_tgt = AlignedWordPredictionLoss(head).masks(batch)
    assert (mask_src == valid).all() and (mask_tgt == valid).all()  # every aligned word, both directions
    got = awp_loss(ctx, batch, AlignedWordPredictionLoss(head))
    want = hand_loss(data, model, head, batch)
    assert want > 0
    assert float(got.detach()) == pytest.approx(want, rel=1e-5)


def test_a_mask_fraction_masks_fewer_words_and_at_least_one(toy):
    data, _, _, _ = toy
    batch = step_batch(data, 0.01)
    valid = batch.pairs[..., 0] >= 0
    for mask in batch.drawn["aligned_word_prediction"].values():
        assert (mask <= valid).all()
        assert (mask.sum(1) == 1).all()  # the fraction rounds to nothing: one word per sentence


def test_sampled_vocabulary_holds_the_targets_and_weights_the_draws():
    torch.manual_seed(0)
    labels = torch.tensor([7, 3, 7, 11])
    vocab, log_weight, index = sampled_vocabulary(labels, 100, 20)
    assert vocab[:3].tolist() == [3, 7, 11]  # the targets first
    assert (vocab[index] == labels).all()
    drawn = vocab[3:]
    assert len(set(drawn.tolist())) == len(drawn) and not set(drawn.tolist()) & {3, 7, 11}
    assert (log_weight[:3] == 0).all()
    torch.testing.assert_close(log_weight[3:], torch.full((len(drawn),), math.log(97 / len(drawn))))
    # the weighted sum of exponentials is an unbiased estimate of the full softmax denominator
    logits = torch.randn(100) * 2
    estimates = []
    for _ in range(3000):
        v, lw, _ = sampled_vocabulary(labels, 100, 20)
        estimates.append(float(torch.exp(logits[v] + lw).sum()))
    assert np.mean(estimates) == pytest.approx(float(torch.exp(logits).sum()), rel=0.03)


@torch.no_grad()  # the losses are only read as numbers here
def test_sampled_softmax_drawing_every_token_is_the_full_loss_and_fewer_estimate_it(toy):
    data, _, head, ctx = toy
    batch = step_batch(data)
    vocab_size = ctx.model.word_embeddings().weight.shape[0]
    full = float(awp_loss(ctx, batch, AlignedWordPredictionLoss(head)))
    every = float(awp_loss(ctx, batch, AlignedWordPredictionLoss(head, vocabulary="sampled", negatives=vocab_size)))
    assert every == pytest.approx(full, rel=1e-5)
    torch.manual_seed(1)
    some = [
        float(awp_loss(ctx, batch, AlignedWordPredictionLoss(head, vocabulary="sampled", negatives=vocab_size // 4)))
        for _ in range(20)
    ]
    assert np.mean(some) == pytest.approx(full, rel=0.05)
    targets_only = float(awp_loss(ctx, batch, AlignedWordPredictionLoss(head, vocabulary="sampled", negatives=0)))
    assert targets_only < full  # a softmax over a handful of tokens: far below the full loss
    with pytest.raises(ValueError, match="negatives"):
        AlignedWordPredictionLoss(head, vocabulary="sampled", negatives=-1)


def test_the_config_chooses_the_softmax_and_keeps_old_keys(toy, tiny_model_dir):
    from tasks.train.objectives import build_objectives

    data, model, _, _ = toy

    def built(**awp):
        config = TrainConfig.model_validate({"objectives": {"aligned_word_prediction": {"weight": 0.1, **awp}}})
        return build_objectives(config, model, data, tiny_model_dir)["aligned_word_prediction"]

    assert built().negatives is None
    assert built(vocabulary="sampled", negatives=300).negatives == 300
    assert built(negatives=300).negatives is None  # negatives alone change nothing
    with pytest.raises(ValueError, match="vocabulary"):
        AlignedWordPredictionConfig(vocabulary="partial")
