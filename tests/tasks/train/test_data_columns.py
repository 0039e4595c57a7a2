"""The training data held as Arrow columns (issue 17 §2 at 10M rows) gives what the data path
of Python lists gave: the same texts and text ids, groups, token ids, word ids and, step by
step, the same batches (rows, languages, token ids, word pairs, AWP masks) for the same seed.

The reference is the code before the change (rows as nested lists, texts deduplicated through
a dict, one tokenizer call, one span array per text; the join as the per-record loop), kept
once in `benchmarks/data_prep.py` (`naive_training_data`, `naive_add_alignments`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.data_prep import naive_add_alignments, naive_step_pairs, naive_training_data
from tasks.train.batching import BatchPlan, make_step_batch, texts_to_arrays
from tasks.train.data import build_training_data
from tasks.train.tokens import TokenSpans, distinct_texts, tokenize
from tests.tasks.train.test_alignment_join import awkward_tables


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.mark.parametrize(("seed", "prefix", "langs"), [(0, "", None), (1, "query: ", ["kaz_Cyrl", "fra_Latn"])])
def test_column_data_path_gives_the_list_data_path_step_by_step(tokenizer, seed, prefix, langs):
    corpus, align = awkward_tables(150, seed)
    data = build_training_data(
        tokenizer, corpus, pivot="eng_Latn", langs=langs, max_length=24, prefix=prefix, alignments=align, min_alignment_score=0.2
    )
    old, old_spans = naive_training_data(tokenizer, corpus, pivot="eng_Latn", langs=langs, max_length=24, prefix=prefix)
    expected = naive_add_alignments(old, align, old_spans, 0.2)

    assert isinstance(data.texts, pa.LargeStringArray) and isinstance(data.group_ids, pa.LargeStringArray)
    assert data.texts.to_pylist() == old.texts and data.group_ids.to_pylist() == old.group_ids and data.langs == old.langs
    assert data.groups.dtype == np.int32 and (data.groups == old.groups).all()
    assert (data.token_ids == old.token_ids).all() and (data.lengths == old.lengths).all()
    assert (data.word_ids == old.word_ids).all() and dict(data.dropped) == dict(old.dropped)
    assert {k: v.tolist() for k, v in data.alignments.items()} == {k: v.tolist() for k, v in expected.items()}

    plan, old_plan = BatchPlan(data, batch_size=8, views=3, seed=seed), BatchPlan(old, batch_size=8, views=3, seed=seed)
    steps = len(plan.epoch(0)) + 4  # into the second epoch
    for step in range(steps):
        e, i = plan.position(step)
        assert (plan.epoch(e)[i] == old_plan.epoch(e)[i]).all(), step
        batch = plan.batch(step)
        texts = batch.text_ids[batch.text_ids >= 0]
        assert [data.texts[int(t)].as_py() for t in texts] == [old.texts[int(t)] for t in texts]
        new_arrays, old_arrays = texts_to_arrays(data, texts), texts_to_arrays(old, texts)
        assert all((new_arrays[k] == old_arrays[k]).all() for k in old_arrays), step
        pairs = naive_step_pairs(expected, batch.text_ids)
        assert batch.pairs.shape == pairs.shape and (batch.pairs == pairs).all(), step
        old.alignments = data.alignments  # what objectives draw comes from (seed, step) and these pairs
        again = make_step_batch(old, old_plan.epoch(e)[i], step=step)
        assert (batch.pairs == again.pairs).all() and (batch.text_ids == again.text_ids).all(), step


def test_text_ids_are_first_appearance_row_by_row():
    rows = pa.table({"eng": ["a", "b", "a", "c"], "fra": [None, "a", "d", None], "kaz": ["e", None, "b", "f"]})
    texts, groups = distinct_texts(rows)
    index: dict[str, int] = {}  # what a dict filled row by row gives
    for row in zip(*(rows.column(c).to_pylist() for c in rows.column_names)):
        for text in row:
            if text is not None:
                index.setdefault(text, len(index))
    assert texts.to_pylist() == list(index) == ["a", "e", "b", "d", "c", "f"]
    assert groups.tolist() == [[0, -1, 1], [2, 0, -1], [0, 3, 2], [4, -1, 5]]


def test_tokenize_in_slices_is_one_call(tokenizer):
    texts = pa.array(["the river city", "", "la rivière ville, claire", "x " * 40, "mji"], type=pa.large_string())
    ids, lengths, spans = tokenize(tokenizer, texts, max_length=12, prefix="query: ", slice_texts=2)
    one_ids, one_lengths, one_spans = tokenize(tokenizer, texts.to_pylist(), max_length=12, prefix="query: ", slice_texts=100)
    assert isinstance(spans, TokenSpans) and spans.flat.dtype == np.int32 and len(spans) == 5
    assert (ids == one_ids).all() and (lengths == one_lengths).all() and (spans.flat == one_spans.flat).all()
    for t, text in enumerate(texts.to_pylist()):
        enc = tokenizer(
            "query: " + text, truncation=True, max_length=12, return_offsets_mapping=True, return_special_tokens_mask=True
        )
        assert ids[t, : lengths[t]].tolist() == enc["input_ids"] and lengths[t] == len(enc["input_ids"])
        want = np.asarray(enc["offset_mapping"]) - len("query: ")
        want[np.asarray(enc["special_tokens_mask"], dtype=bool)] = -1
        assert spans[t].tolist() == want.tolist()
    assert spans.take(np.array([4, 0])).tolist() == spans[4].tolist() + spans[0].tolist()


@pytest.mark.parametrize("ids", [["g1", "g3", "g5", "g7"], ["g5", "g1", "g7", "g3"]])
def test_group_rows_find_rows_by_binary_search_or_hash_join(ids):
    import polars as pl

    from tasks.train.alignment_join import GroupRows

    rows = GroupRows(pa.array(ids, type=pa.large_string()))
    assert rows.sorted == (ids == sorted(ids))
    wanted = pl.Series(["g7", "g0", "g3", "g9", "g5", "g3", "g1", "g30"])
    assert rows.find(wanted).tolist() == [ids.index(g) if g in ids else -1 for g in wanted.to_list()]
    assert GroupRows(pa.array([], type=pa.large_string())).find(wanted).tolist() == [-1] * 8
