"""The vectorised alignment join and per-step pair lookup give what the per-record loop gave.

The reference is the code before issue 17 (a Python loop over records, a dict looked up per
row), kept once, in `benchmarks/data_prep.py`, which also times it: the join must give
the same word ids, word pairs, drop counts and `max_pairs` on inputs with every case the loop
handled (swapped records, rows outside the training rows, missing texts, words that disagree
with an earlier record, duplicate sentence pairs, scores under the threshold, truncation).
"""

from __future__ import annotations

import copy
import random

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from benchmarks.data_prep import naive_add_alignments as reference_add_alignments
from benchmarks.data_prep import naive_step_pairs as reference_step_pairs
from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.align.words import split_words
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.tiny_models import WORDS, synthetic_sentences
from tasks.train.alignment_join import WordPairs, add_alignments
from tasks.train.batching import BatchPlan
from tasks.train.data import build_training_data
from tasks.train.tokens import tokenize
from tasks.train.word_spans import word_char_spans, word_char_spans_flat

LANGS = {"eng_Latn": "en", "fra_Latn": "fr", "kaz_Cyrl": "kk", "swh_Latn": "sw"}


def written(words: list[str]) -> str:
    """Words as a sentence: punctuation (a word of its own for the aligner) sticks to the word before."""
    return "".join(w if i == 0 or w in ",." else " " + w for i, w in enumerate(words))


def awkward_tables(n_groups: int, seed: int) -> tuple[pa.Table, pa.Table]:
    """A multi-way corpus and alignments with every case the join handles, in random order."""
    rng = random.Random(seed)
    vocab = min(len(WORDS[code]) for code in LANGS.values())
    corpus, align = [], []
    first_words: dict[str, list[str]] = {}
    for g in range(n_groups):
        gid = f"g{g:04d}"
        picks = [rng.randrange(vocab) for _ in range(rng.randint(1, 12 if g % 7 else 40))]  # some are cut by truncation
        shared = g % 11 == 3  # the same texts as group 0: text ids shared between groups
        words = {
            lang: [WORDS[code][i] if i % 5 else "," for i in picks] + ([] if shared else [f"{g}", "."])
            for lang, code in LANGS.items()
        }
        if shared:
            words = first_words
        if g == 0:
            first_words = words
        present = [lang for lang in LANGS if lang == "eng_Latn" or rng.random() < 0.8]
        for lang in present:
            corpus.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": written(words[lang]),
                           "split": "dev" if g % 13 == 5 else "train", "source": "s"})  # fmt: skip
        for lang in LANGS:
            if lang == "eng_Latn" or rng.random() < 0.1:
                continue
            n = len(words[lang])
            links = [
                {"src": i, "tgt": j, "score": round(rng.random(), 3)}
                for i in range(n)
                for j in range(n)
                if i == j or rng.random() < 0.15
            ]
            if rng.random() < 0.1:
                links.append({"src": n + 2, "tgt": 0, "score": 0.9})  # outside the words
            src_words, tgt_words = list(words[lang]), list(words["eng_Latn"])
            if rng.random() < (0.5 if shared else 0.05):
                src_words = src_words[::-1]  # words that disagree with another record of the same text
            record = {"id": f"{gid}:{lang}-eng_Latn", "group_id": gid if rng.random() > 0.03 else f"missing{g}",
                      "src_lang": lang, "tgt_lang": "eng_Latn", "src_words": src_words, "tgt_words": tgt_words,
                      "alignments": links, "backend": "s"}  # fmt: skip
            if rng.random() < 0.4:  # written pivot -> other: stored swapped
                record |= {"src_lang": "eng_Latn", "tgt_lang": lang, "src_words": tgt_words, "tgt_words": src_words,
                           "alignments": [{"src": x["tgt"], "tgt": x["src"], "score": x["score"]} for x in links]}  # fmt: skip
            align.append(record)
        if g % 17 == 4:  # a pair of two non-pivot languages: outside the training rows
            align.append({"id": f"{gid}:fra-kaz", "group_id": gid, "src_lang": "fra_Latn", "tgt_lang": "kaz_Cyrl",
                          "src_words": words["fra_Latn"], "tgt_words": words["kaz_Cyrl"], "alignments": [], "backend": "s"})  # fmt: skip
    rng.shuffle(align)
    return pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.mark.parametrize(("seed", "min_score", "prefix"), [(0, 0.0, ""), (1, 0.5, "query: "), (2, 0.2, "")])
def test_join_gives_what_the_record_loop_gave(tokenizer, seed, min_score, prefix):
    corpus, align = awkward_tables(160, seed)
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=24, prefix=prefix,
                               alignments=align, min_alignment_score=min_score)  # fmt: skip
    plain = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=24, prefix=prefix)
    _, _, spans = tokenize(tokenizer, plain.texts, max_length=24, prefix=prefix)
    reference = copy.deepcopy(plain)
    expected = reference_add_alignments(reference, align, spans, min_score)

    assert isinstance(data.alignments, WordPairs)
    assert sorted(data.alignments) == sorted(expected)
    assert {k: v.tolist() for k, v in data.alignments.items()} == {k: v.tolist() for k, v in expected.items()}
    assert all(data.alignments[k].dtype == np.int32 for k in expected)
    assert (data.word_ids == reference.word_ids).all()
    assert dict(data.dropped) == dict(reference.dropped)  # the same reasons, zero counts included
    assert data.max_pairs == reference.max_pairs
    # every case happened (the fixture is not trivially easy)
    for reason in (
        "alignment_outside_training_rows",
        "alignment_words_mismatch",
        "word_pair_without_tokens",
        "word_pair_not_one_to_one",
    ):
        assert reference.dropped[reason] > 0, reason
    assert len({k for k in expected}) < sum(1 for _ in align.to_pylist())  # some records share keys or were dropped

    plan = BatchPlan(data, batch_size=8, views=3, seed=seed)
    for step in range(len(plan.epoch(0)) + 3):
        batch = plan.batch(step)
        old = reference_step_pairs(expected, batch.text_ids)
        assert batch.pairs.shape == old.shape and (batch.pairs == old).all(), step


def test_later_record_of_the_same_sentence_pair_wins_and_max_pairs_counts_both(tokenizer):
    texts = {"eng_Latn": "the river city", "fra_Latn": "la rivière ville"}
    corpus = pa.Table.from_pylist(
        [
            {"id": f"{g}:{lang}", "group_id": g, "lang": lang, "text": t, "split": "train", "source": "s"}
            for g in ("g1", "g2")
            for lang, t in texts.items()
        ],
        schema=CORPUS_SCHEMA,
    )

    def record(gid, links):
        return {"id": gid, "group_id": gid, "src_lang": "fra_Latn", "tgt_lang": "eng_Latn", "src_words": texts["fra_Latn"].split(),
                "tgt_words": texts["eng_Latn"].split(), "alignments": [{"src": a, "tgt": b, "score": 1.0} for a, b in links], "backend": "s"}  # fmt: skip

    align = pa.Table.from_pylist([record("g1", [(0, 0), (1, 1), (2, 2)]), record("g2", [(2, 0)])], schema=WORD_ALIGNMENT_SCHEMA)
    data = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=16, alignments=align)
    assert len(data.texts) == 2 and len(data.alignments) == 1  # both groups are the same two texts
    assert data.alignments[(1, 0)].tolist() == [[2, 0]]
    assert data.max_pairs == 3
    assert (1, 0) in data.alignments and (0, 1) not in data.alignments and data.alignments.get((0, 1)) is None


def test_word_pairs_lookup_is_vectorised_over_rows():
    pairs = WordPairs(
        np.array([0 * 5 + 1, 2 * 5 + 0, 4 * 5 + 4]), np.array([0, 2, 3, 6]), np.arange(12, dtype=np.int32).reshape(6, 2), 5
    )
    start, count = pairs.lookup(np.array([0, 2, 4, 3, -1, 0]), np.array([1, 0, 4, 3, 1, 5]))
    assert start.tolist() == [0, 2, 3, 0, 0, 0] and count.tolist() == [2, 1, 3, 0, 0, 0]
    assert dict(pairs.items()).keys() == {(0, 1), (2, 0), (4, 4)}
    assert WordPairs.empty().lookup(np.array([1]), np.array([2]))[1].tolist() == [0]


@pytest.mark.slow
@pytest.mark.parametrize("slice_records", [1, 7, 50])
def test_join_in_slices_gives_what_the_record_loop_gave(tokenizer, slice_records):
    """Records joined a few at a time: texts fixed by a record of an earlier slice (the shared
    texts of group 0, the pivot text of every language of a group) are checked against it,
    and the later record of a sentence pair wins across slices."""
    corpus, align = awkward_tables(120, 3)
    plain = build_training_data(tokenizer, corpus, pivot="eng_Latn", langs=None, max_length=24)
    _, _, spans = tokenize(tokenizer, plain.texts, max_length=24)
    sliced, reference = copy.deepcopy(plain), copy.deepcopy(plain)
    add_alignments(sliced, align, spans, 0.3, slice_records=slice_records)
    expected = reference_add_alignments(reference, align, spans, 0.3)
    assert {k: v.tolist() for k, v in sliced.alignments.items()} == {k: v.tolist() for k, v in expected.items()}
    assert list(sliced.alignments) == sorted(expected)
    assert (sliced.word_ids == reference.word_ids).all()
    assert dict(sliced.dropped) == dict(reference.dropped)
    assert sliced.max_pairs == reference.max_pairs
    assert reference.dropped["alignment_words_mismatch"] > 0


TRICKY = [
    ("the river city, bright", ["the", "river", "city", ",", "bright", "absent"]),  # a word not found
    ("a a a", ["a", "a"]),  # repeated words, fewer than the text has
    ("a a a", ["a", "a", "a"]),
    ("  x  y ", [" x", "y ", "  "]),  # words stripped; one strips to nothing
    ("ab", ["a", "b"]),  # two words in one run of letters
    ("a b", ["ab"]),  # one word across a space: not in the text
    ("b a", ["a", "b"]),  # out of order: the second is not found after the first
    ("", []),
    ("河城市明亮。", ["河", "城", "市", "明", "亮", "。"]),  # CJK, no spaces
    ("Cafe\u0301 na\u0308ive", ["Cafe\u0301", "na\u0308ive"]),  # combining marks
    ("x\u200by\u00a0z\tw\n", ["x", "y", "z", "w"]),  # zero-width space, no-break space, tab, newline
    ('he said "no". no!', ["he", "said", '"', "no", '"', ".", "no", "!"]),  # a word repeated after punctuation
    ("Straße 3.5 km", ["Straße", "3.5", "km"]),
    ("one two", ["one", "two", "three"]),  # more words than the text has
    ("x\u200dy", ["x\u200dy"]),  # a word holding a format character (a joiner)
    ("\x1cx\x1c y", ["\x1cx\x1c", "y"]),  # characters str.strip() strips but that are no spaces
]


def _spans_one_by_one(texts, words):
    return np.concatenate([word_char_spans(t, w).reshape(-1, 2) for t, w in zip(texts, words)]).reshape(-1, 2)


def test_vectorised_word_search_gives_the_cursor_search_spans_on_tricky_text():
    texts, words = [t for t, _ in TRICKY], [w for _, w in TRICKY]
    spans, searched = word_char_spans_flat(texts, pl.Series(words, dtype=pl.List(pl.String)))
    assert spans.tolist() == _spans_one_by_one(texts, words).tolist()
    # searched word by word: a word missing, too few words, too many, out of order, a word across a space, a joiner
    assert searched == 6


def test_vectorised_word_search_needs_no_search_on_the_align_stages_words():
    """The align stage's own words (every script it splits differently) never fall back."""
    sentences = synthetic_sentences(300, seed=5)
    langs = ["eng_Latn"] * len(sentences)
    sentences += ["我们在河边的城市里。", "東京は大きい都市です、2024年。", "แม่น้ำในเมือง สวยงาม", "l'eau d'aujourd'hui — well-known, 1,000.5 km!",
                  "  leading and\u200b zero width ", "Ελληνικά κείμενα; ναι.", "नदी शहर उज्ज्वल।"]  # fmt: skip
    langs += ["zho_Hans", "jpn_Jpan", "tha_Thai", "fra_Latn", "eng_Latn", "ell_Grek", "hin_Deva"]
    words = [split_words(t, lang) for t, lang in zip(sentences, langs)]
    spans, searched = word_char_spans_flat(sentences, pl.Series(words, dtype=pl.List(pl.String)))
    assert spans.tolist() == _spans_one_by_one(sentences, words).tolist()
    assert searched == 0
    assert (spans[:, 0] >= 0).all()
