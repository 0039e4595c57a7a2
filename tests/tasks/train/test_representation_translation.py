"""RTL's three directions (DAP Table 5) on the tiny BERT: what each rebuilds, from what, and
that `both` splits rows the same way in every chunk, so chunked (GradCache) losses add up."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from tasks.train.batching import StepBatch
from tasks.train.model import DualEncoder, RepresentationTranslationHead, load_transformer
from tasks.train.objectives.base import Chunk, Side, TrainContext
from tasks.train.objectives.representation_translation import RepresentationTranslationLoss, rows_to_pivot

ROWS, WIDTH, LANGS, MASK_ID = 12, 9, 4, 4


@pytest.fixture(scope="module")
def encoder(tiny_model_dir) -> DualEncoder:
    torch.manual_seed(0)
    return DualEncoder(load_transformer(tiny_model_dir, dropout=0.0)).eval()


def batch_and_sides(encoder: DualEncoder, step: int = 3) -> tuple[StepBatch, SimpleNamespace, Side, Side]:
    """A batch of ROWS pairs: random token states, token ids and lengths; pivot texts are 0..R-1, the others R..2R-1."""
    g = torch.Generator().manual_seed(step)
    lengths = torch.randint(3, WIDTH + 1, (2 * ROWS,), generator=g)
    vocab = encoder.word_embeddings().weight.shape[0]

    def side(lens: torch.Tensor, lang: int) -> Side:
        mask = (torch.arange(WIDTH)[None, :] < lens[:, None]).long()
        ids = torch.randint(5, vocab, (ROWS, WIDTH), generator=g) * mask
        return Side(
            torch.randn(ROWS, WIDTH, encoder.hidden_size, generator=g),
            mask,
            ids,
            torch.full((ROWS, WIDTH), -1),
            torch.full((ROWS,), lang),
        )

    pivot, other = side(lengths[:ROWS], 0), side(lengths[ROWS:], 2)
    text_ids = np.stack([np.arange(ROWS), np.arange(ROWS, 2 * ROWS)], axis=1)
    lang_ids = np.tile(np.array([0, 2]), (ROWS, 1))
    batch = StepBatch(text_ids, lang_ids, np.full((ROWS, 1, 2), -1, dtype=np.int32), step)
    data = SimpleNamespace(lengths=lengths.numpy())
    return batch, data, other, pivot


def context(encoder: DualEncoder, data) -> TrainContext:
    return TrainContext(data=data, model=encoder, frozen=None, device=torch.device("cpu"), autocast=contextlib.nullcontext)


def cross_entropy_sum(head: RepresentationTranslationHead, source: Side, target: Side, rows: np.ndarray) -> torch.Tensor:
    """By hand: the head reads `source` rows, every real token of `target` rows but the first (CLS) is a label."""
    r = torch.from_numpy(np.flatnonzero(rows))
    logits = head(
        source.hidden[r], source.attention_mask[r], target.attention_mask[r], None, source.lang_ids[r], target.lang_ids[r]
    )
    labels = target.input_ids[r].masked_fill(target.attention_mask[r] == 0, -100)[:, 1:]
    return nn.functional.cross_entropy(logits[:, 1:].flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")


def test_both_sends_about_half_of_the_rows_each_way_and_every_slice_agrees():
    text_ids = np.stack([np.arange(100, 164), np.arange(200, 264)], axis=1)
    batch = StepBatch(text_ids, np.zeros((64, 2), dtype=np.int64), np.full((64, 1, 2), -1, dtype=np.int32), 5)
    flags = rows_to_pivot(batch, "both")
    assert 16 <= flags.sum() <= 48
    np.testing.assert_array_equal(
        np.concatenate([rows_to_pivot(batch.rows(0, 20), "both"), rows_to_pivot(batch.rows(20, 64), "both")]), flags
    )
    later = StepBatch(*[getattr(batch, f) for f in ("text_ids", "lang_ids", "pairs")], 6)
    assert (rows_to_pivot(later, "both") != flags).all()  # the next step sends each row the other way
    assert rows_to_pivot(batch, "to_pivot").all() and not rows_to_pivot(batch, "from_pivot").any()


@pytest.mark.parametrize("direction", ["to_pivot", "from_pivot", "both"])
def test_each_direction_rebuilds_the_right_side_with_a_token_mean(encoder, direction):
    torch.manual_seed(1)
    head = RepresentationTranslationHead(encoder, 2, MASK_ID, n_langs=0 if direction == "to_pivot" else LANGS)
    loss = RepresentationTranslationLoss(head, direction=direction)
    batch, data, other, pivot = batch_and_sides(encoder)
    norm = loss.normaliser(data, batch)
    with torch.no_grad():
        got = loss(context(encoder, data), Chunk(batch, other, pivot, ROWS, norm))
        to_pivot = rows_to_pivot(batch, direction)
        want = (cross_entropy_sum(head, other, pivot, to_pivot) if to_pivot.any() else 0.0) + (
            cross_entropy_sum(head, pivot, other, ~to_pivot) if (~to_pivot).any() else 0.0
        )
    rebuilt_lengths = np.where(to_pivot, data.lengths[:ROWS], data.lengths[ROWS:])
    assert norm == float((rebuilt_lengths - 1).sum())  # the CLS is not rebuilt
    torch.testing.assert_close(got, want / norm)


def test_chunks_of_a_both_batch_add_up_to_the_whole_batch(encoder):
    """GradCache and data parallelism cut a batch into chunks: each chunk's share must sum to the whole."""
    torch.manual_seed(2)
    loss = RepresentationTranslationLoss(RepresentationTranslationHead(encoder, 1, MASK_ID, n_langs=LANGS), direction="both")
    batch, data, other, pivot = batch_and_sides(encoder, step=8)
    norm = loss.normaliser(data, batch)
    ctx = context(encoder, data)

    def cut(s: Side, a: int, b: int) -> Side:
        return Side(s.hidden[a:b], s.attention_mask[a:b], s.input_ids[a:b], s.word_ids[a:b], s.lang_ids[a:b])

    with torch.no_grad():
        whole = loss(ctx, Chunk(batch, other, pivot, ROWS, norm))
        parts = sum(
            loss(ctx, Chunk(batch.rows(a, b), cut(other, a, b), cut(pivot, a, b), ROWS, norm)) for a, b in ((0, 5), (5, ROWS))
        )
    torch.testing.assert_close(parts, whole)


def test_the_language_embedding_names_the_language_to_rebuild(encoder):
    torch.manual_seed(3)
    head = RepresentationTranslationHead(encoder, 2, MASK_ID, n_langs=LANGS).eval()
    _, _, other, pivot = batch_and_sides(encoder)
    with torch.no_grad():
        a = head(pivot.hidden, pivot.attention_mask, other.attention_mask, None, pivot.lang_ids, other.lang_ids)
        b = head(pivot.hidden, pivot.attention_mask, other.attention_mask, None, pivot.lang_ids, torch.full((ROWS,), 3))
    assert not torch.allclose(a, b)
    with pytest.raises(ValueError, match="src_lang and tgt_lang"):
        head(pivot.hidden, pivot.attention_mask, other.attention_mask)


def test_the_rebuilt_sentences_cls_is_neither_a_label_nor_attended_to_as_in_daps_code(encoder):
    """DAP's `cl_forward` (target pattern): input = source states without CLS + one [MASK]
    embedding per target place; the attention mask hides the target's first place; its label is
    -100; the loss is the mean over the other real target tokens. Computed here layer by layer."""
    torch.manual_seed(4)
    head = RepresentationTranslationHead(encoder, 2, MASK_ID).eval()
    loss = RepresentationTranslationLoss(head, direction="to_pivot")
    batch, data, other, pivot = batch_and_sides(encoder, step=5)
    with torch.no_grad():
        got = loss(context(encoder, data), Chunk(batch, other, pivot, ROWS, loss.normaliser(data, batch)))

        queries = encoder.transformer.embeddings(input_ids=torch.full((ROWS, WIDTH), MASK_ID))
        hidden = torch.cat([other.hidden[:, 1:], queries], dim=1)
        keys = torch.cat([other.attention_mask[:, 1:], pivot.attention_mask], dim=1).bool()
        keys[:, WIDTH - 1] = False  # the target's first place (its CLS)
        additive = torch.zeros(ROWS, 1, 1, keys.shape[1]).masked_fill(~keys[:, None, None, :], torch.finfo(torch.float32).min)
        for layer in head.layers:
            out = layer(hidden, attention_mask=additive)
            hidden = out[0] if isinstance(out, tuple) else out
        logits = head.head(hidden[:, WIDTH - 1 :])
        real = pivot.attention_mask.bool()
        real[:, 0] = False
        want = nn.functional.cross_entropy(logits[real], pivot.input_ids[real], reduction="mean")
    assert int(real.sum()) == int((data.lengths[:ROWS] - 1).sum())
    torch.testing.assert_close(got, want)
