"""Training data: word-to-subword maps, batches without duplicates, AWP labels, bad alignments."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.train.batching import BatchPlan, epoch_batches, step_draws_rng
from tasks.train.data import build_training_data
from tasks.train.objectives.aligned_word_prediction import IGNORE, choose_masked_pairs, masked_word_prediction
from tasks.train.word_spans import token_word_ids, word_char_spans


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def test_word_spans_and_token_word_ids_follow_the_offsets(tokenizer):
    text = "the river city, bright"
    words = ["the", "river", "city", ",", "bright", "absent"]
    spans = word_char_spans(text, words)
    assert spans.tolist() == [[0, 3], [4, 9], [10, 14], [14, 15], [16, 22], [-1, -1]]
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    offsets = np.asarray(enc["offset_mapping"])
    offsets[np.asarray(enc["special_tokens_mask"], dtype=bool)] = -1
    ids = token_word_ids(offsets, spans)
    tokens = tokenizer.convert_ids_to_tokens(enc["input_ids"])
    for tok, (s, e), w in zip(tokens, offsets, ids):
        if s < 0:
            assert w == -1, tok
        else:
            assert words[w].lower().startswith(text[s:e].lower().lstrip("#")) or text[s:e] in words[w], (tok, w)


def _tables(rows):
    corpus, align = [], []
    for gid, texts, pairs in rows:
        for lang, text in texts.items():
            corpus.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": text, "split": "train", "source": "t"})
        if pairs is not None:
            align.append({"id": f"{gid}:eng_Latn-fra_Latn", "group_id": gid, "src_lang": "eng_Latn", "tgt_lang": "fra_Latn",
                          "src_words": texts["eng_Latn"].split(), "tgt_words": texts["fra_Latn"].split(),
                          "alignments": [{"src": a, "tgt": b, "score": 1.0} for a, b in pairs], "backend": "t"})  # fmt: skip
    return pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA)


def test_alignments_are_stored_other_to_pivot_and_bad_pairs_dropped(tokenizer):
    long_en = " ".join(["river"] * 30) + " city"
    long_fr = " ".join(["rivière"] * 30) + " ville"
    corpus, align = _tables([
        ("g1", {"eng_Latn": "the river city", "fra_Latn": "la rivière ville"}, [(0, 0), (1, 1), (2, 2)]),
        ("g2", {"eng_Latn": long_en, "fra_Latn": long_fr}, [(0, 0), (30, 30)]),  # word 30 is cut by truncation
        ("g3", {"eng_Latn": "small house", "fra_Latn": "petite maison"}, None),  # no alignment: trains on TR only
        ("g4", {"eng_Latn": "green road", "fra_Latn": "verte route"}, [(5, 0)]),  # index outside the words
    ])  # fmt: skip
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=16, alignments=align)
    assert data.langs == ["eng_Latn", "fra_Latn"]
    g1 = data.group_ids.to_pylist().index("g1")
    fr, en = int(data.groups[g1, 1]), int(data.groups[g1, 0])
    assert data.alignments[(fr, en)].tolist() == [[0, 0], [1, 1], [2, 2]]  # swapped to fra -> eng
    g2 = data.group_ids.to_pylist().index("g2")
    assert data.alignments[(int(data.groups[g2, 1]), int(data.groups[g2, 0]))].tolist() == [[0, 0]]
    assert data.dropped["word_pair_without_tokens"] == 1
    g3 = data.group_ids.to_pylist().index("g3")
    assert (int(data.groups[g3, 1]), int(data.groups[g3, 0])) not in data.alignments
    assert all(len(p) for p in data.alignments.values())


def test_batches_have_no_duplicate_texts_and_are_reproducible(tokenizer):
    rows = []
    for g in range(40):
        en = "the river" if g % 4 == 0 else f"the city {g}"  # every 4th row shares its English text
        rows.append((f"g{g:02d}", {"eng_Latn": en, "fra_Latn": f"la ville {g}", "swh_Latn": f"mji {g}"}, None))
    corpus, _ = _tables(rows)
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=16)
    batches = epoch_batches(data, epoch=0, batch_size=8, views=3, seed=1)
    assert batches and all(b.shape == (8, 4) for b in batches)
    for b in batches:
        ids = [int(data.groups[r, c]) for r, *cols in b for c in cols if c >= 0]
        assert len(ids) == len(set(ids))
    again = epoch_batches(data, epoch=0, batch_size=8, views=3, seed=1)
    assert all((a == b).all() for a, b in zip(batches, again))
    plan = BatchPlan(data, batch_size=8, views=3, seed=1)
    n = len(plan.epoch(0))
    assert plan.position(n) == (1, 0)
    assert (plan.batch(3).text_ids == plan.batch(3).text_ids).all()


def test_rows_without_mandatory_pivot_draw_every_view_from_all_languages(tokenizer):
    rows = [
        (
            f"g{g:02d}",
            {"eng_Latn": f"the city {g}", "fra_Latn": f"la ville {g}", "swh_Latn": f"mji {g}", "deu_Latn": f"die Stadt {g}"},
            None,
        )
        for g in range(60)
    ]
    corpus, _ = _tables(rows)
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=16)
    batches = epoch_batches(data, epoch=0, batch_size=8, views=2, seed=3, pivot_in_every_row=False)
    cols = np.concatenate([b[:, 1:] for b in batches])
    assert cols.shape[1] == 2 and (cols >= 0).all()
    assert all(len(set(r)) == 2 for r in cols.tolist())  # two different languages per row
    assert (cols[:, 0] != 0).any() and not (cols == 0).any(axis=1).all()  # English is neither fixed nor in every row
    assert set(cols.ravel().tolist()) == {0, 1, 2, 3}
    pinned = epoch_batches(data, epoch=0, batch_size=8, views=2, seed=3)
    assert all((b[:, 1] == 0).all() for b in pinned)


def test_awp_labels_clip_the_longer_word(tokenizer, tiny_model_dir):
    corpus, align = _tables([
        ("g1", {"eng_Latn": "the river city", "fra_Latn": "la rivière ville"}, [(1, 1), (2, 2)]),
        ("g2", {"eng_Latn": "small water", "fra_Latn": "petite eau"}, [(0, 0)]),
    ])  # fmt: skip
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=16, alignments=align)
    batch = BatchPlan(data, batch_size=2, views=2, seed=0).batch(0)
    mask_src, _ = choose_masked_pairs(batch.pairs, 1.0, step_draws_rng(0, 0))
    ids, att, labels = masked_word_prediction(data, batch.text_ids[:, 1], batch.text_ids[:, 0], batch.pairs, mask_src)
    for row in range(2):
        src, tgt = batch.text_ids[row, 1], batch.text_ids[row, 0]
        for a in np.flatnonzero(mask_src[row]):
            w, u = batch.pairs[row, a]
            src_pos = np.flatnonzero(data.word_ids[src] == w)
            tgt_pos = np.flatnonzero(data.word_ids[tgt] == u)
            assert (ids[row, src_pos] == data.mask_id).all()
            k = min(len(src_pos), len(tgt_pos))
            assert labels[row, src_pos[:k]].tolist() == data.token_ids[tgt, tgt_pos[:k]].tolist()
            assert (labels[row, src_pos[k:]] == IGNORE).all()
    assert ((labels != IGNORE) <= (ids == data.mask_id)).all()
