"""tasks.encoders.neighbours (bitext accuracy), tasks.evaluate.retrieval (metric rows), groups (paper groups, group averages) and mteb_bridge (rows)."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tasks.encoders.neighbours import NO_OTHER_CANDIDATE_COSINE, bitext_accuracy, nearest_neighbours, query_outcomes
from tasks.evaluate import mteb_bridge
from tasks.evaluate.groups import (
    DAP_36,
    LANGUAGE_GROUPS,
    WACSE_4,
    WACSE_5,
    WACSE_8,
    LanguageGroup,
    dap_28_from_test_sizes,
    group_average_rows,
    metric_row,
    rows_table,
)
from tasks.evaluate.retrieval import (
    dataset_pivot,
    multiway_pair_scores,
    multiway_retrieval_rows,
    retrieval_rows,
    score_pair,
    tatoeba_rows,
    xx_yy_rows,
)
from tasks.evaluate.schema import ITEMS_SCHEMA
from tasks.languages import UnknownLanguageError
from tasks.reporting.tables import format_value, metric_scale


def unit(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def noisy_pair(n: int, dim: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, dim))
    return unit(src), unit(src + noise * rng.standard_normal((n, dim)))


def brute_force_accuracy(src: np.ndarray, tgt: np.ndarray) -> tuple[float, float]:
    correct_forward = correct_backward = 0
    similarity = src.astype(np.float64) @ tgt.astype(np.float64).T
    for i in range(len(src)):
        if np.argmax(similarity[i]) == i:
            correct_forward += 1
        if np.argmax(similarity[:, i]) == i:
            correct_backward += 1
    return correct_forward / len(src), correct_backward / len(src)


# ------------------------------------------------------------------ bitext accuracy


@pytest.mark.parametrize(("n", "dim", "noise", "seed"), [(200, 16, 0.9, 0), (500, 32, 1.2, 1), (50, 8, 0.5, 2)])
def test_bitext_accuracy_matches_brute_force(n, dim, noise, seed):
    src, tgt = noisy_pair(n, dim, noise, seed)
    forward, backward = bitext_accuracy(src, tgt)
    assert (forward, backward) == brute_force_accuracy(src, tgt)
    assert 0 < forward < 1 and 0 < backward < 1  # the data is neither trivial nor hopeless


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 16), st.integers(3, 6), st.integers(0, 2**32 - 1))
def test_accuracy_in_unit_interval_and_one_for_identical_rows(n, dim, seed):
    # Gaussian rows have distinct directions almost surely, so `assume` rarely discards an
    # example (small integer rows collided so often that Hypothesis's filter health check failed)
    vectors = unit(np.random.default_rng(seed).standard_normal((n, dim)))
    cos = vectors.astype(np.float64) @ vectors.astype(np.float64).T
    np.fill_diagonal(cos, -1)
    assume(cos.max() < 0.9999)  # distinct directions
    rng = np.random.default_rng(len(vectors))
    other = unit(rng.standard_normal(vectors.shape))
    for forward, backward in (bitext_accuracy(vectors, other), bitext_accuracy(other, vectors)):
        assert 0.0 <= forward <= 1.0 and 0.0 <= backward <= 1.0
    assert bitext_accuracy(vectors, vectors) == (1.0, 1.0)


def test_bitext_accuracy_checks_inputs():
    src, tgt = noisy_pair(10, 4, 0.1, 3)
    with pytest.raises(ValueError, match="same shape"):
        bitext_accuracy(src, tgt[:9])
    with pytest.raises(ValueError, match="tgt: 10 rows are not L2-normalised"):
        bitext_accuracy(src, tgt * 3)
    with pytest.raises(ValueError, match="non-empty 2-D"):
        bitext_accuracy(src[0], tgt[0])
    with pytest.raises(ValueError, match="NaN"):
        bitext_accuracy(np.full_like(src, np.nan), tgt)


def test_tatoeba_and_retrieval_rows():
    src, tgt = noisy_pair(100, 16, 0.8, 4)
    forward, backward = bitext_accuracy(src, tgt)
    rows = tatoeba_rows(src, tgt, src_lang="kaz")
    assert [r["metric"] for r in rows] == ["accuracy_src_tgt", "accuracy_tgt_src", "accuracy_mean", "margin_mean"]
    assert [r["value"] for r in rows[:3]] == [forward, backward, (forward + backward) / 2]
    assert rows[3]["value"] == pytest.approx(np.mean(brute_force_margins(src, tgt) + brute_force_margins(tgt, src)), abs=1e-6)
    assert all(r["benchmark"] == "tatoeba" and r["dataset"] == "tatoeba" and r["n"] == 100 for r in rows)
    assert {(r["src_lang"], r["tgt_lang"]) for r in rows} == {("kaz_Cyrl", "eng_Latn")}
    assert rows_table(rows).num_rows == 4
    other = retrieval_rows(src, tgt, src_lang="tel_Telu", tgt_lang="eng_Latn", dataset="flores200-dev")
    assert {r["benchmark"] for r in other} == {"retrieval"}
    with pytest.raises(UnknownLanguageError):
        tatoeba_rows(src, tgt, src_lang="qqq")


def test_multiway_retrieval_rows_pairs():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((30, 8))
    embeddings = {lang: unit(base + 0.3 * rng.standard_normal(base.shape)) for lang in ("eng_Latn", "kaz_Cyrl", "tel_Telu")}
    pivot = multiway_retrieval_rows(embeddings, dataset="flores200-dev", pivot="eng_Latn")
    assert {(r["src_lang"], r["tgt_lang"]) for r in pivot} == {("kaz_Cyrl", "eng_Latn"), ("tel_Telu", "eng_Latn")}
    every = multiway_retrieval_rows(embeddings, dataset="flores200-dev")
    assert len(every) == 3 * 4
    with pytest.raises(ValueError, match="pivot"):
        multiway_retrieval_rows(embeddings, dataset="x", pivot="fra_Latn")


# ------------------------------------------------------------------ margins and items


def brute_force_margins(queries: np.ndarray, candidates: np.ndarray) -> list[float]:
    """Loop per query over the full similarity row: the definition, written out."""
    similarity = queries.astype(np.float64) @ candidates.astype(np.float64).T
    margins = []
    for i, row in enumerate(similarity):
        others = np.delete(row, i)
        margins.append(row[i] - (others.max() if others.size else NO_OTHER_CANDIDATE_COSINE))
    return margins


# Three 2-D unit vectors per side; every cosine is a product of 0, 0.6, 0.8, 1:
#            tgt0=(.8,.6)  tgt1=(0,1)  tgt2=(1,0)
# src0=(1,0)     0.8          0           1       -> top tgt2: wrong, margin 0.8 - 1    = -0.2
# src1=(0,1)     0.6          1           0       -> top tgt1: right, margin 1 - 0.6    = +0.4
# src2=(.6,.8)   0.96         0.8         0.6     -> top tgt0: wrong, margin 0.6 - 0.96 = -0.36
# and tgt -> src (columns): tgt0 -0.16 (src2 wins), tgt1 +0.2 (right), tgt2 -0.4 (src0 wins).
HAND_SRC = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
HAND_TGT = np.array([[0.8, 0.6], [0.0, 1.0], [1.0, 0.0]], dtype=np.float32)


def test_margins_and_correctness_of_hand_made_vectors():
    forward = query_outcomes(HAND_SRC, HAND_TGT)
    backward = query_outcomes(HAND_TGT, HAND_SRC)
    assert forward.correct.tolist() == [False, True, False]
    assert forward.margin == pytest.approx([-0.2, 0.4, -0.36], abs=1e-6)
    assert backward.correct.tolist() == [False, True, False]
    assert backward.margin == pytest.approx([-0.16, 0.2, -0.4], abs=1e-6)
    assert forward.margin.dtype == np.float32 and forward.correct.dtype == bool
    rows = {r["metric"]: r["value"] for r in retrieval_rows(HAND_SRC, HAND_TGT, src_lang="kk", tgt_lang="en", dataset="d")}
    assert rows["accuracy_src_tgt"] == rows["accuracy_tgt_src"] == pytest.approx(1 / 3)
    assert rows["margin_mean"] == pytest.approx((-0.2 + 0.4 - 0.36 - 0.16 + 0.2 - 0.4) / 6, abs=1e-6)


def test_distractors_join_only_the_candidates_of_their_side():
    # (0.28, 0.96) is close to tgt1 = (0, 1): src1's margin shrinks from 0.4 to 1 - 0.96; nothing else moves
    # (src0 . d = 0.28 < 1, src2 . d = 0.936 < 0.96). (0.8, 0.6) on the src side beats src0 for tgt0: 0.8 - 1.0.
    scored = score_pair(
        HAND_SRC,
        HAND_TGT,
        src_lang="kk",
        tgt_lang="en",
        dataset="d",
        tgt_distractors=np.array([[0.28, 0.96]], dtype=np.float32),
        src_distractors=np.array([[0.8, 0.6]], dtype=np.float32),
    )
    assert scored.src_tgt.margin == pytest.approx([-0.2, 0.04, -0.36], abs=1e-6)
    assert scored.tgt_src.margin == pytest.approx([-0.2, 0.2, -0.4], abs=1e-6)
    assert scored.src_tgt.correct.tolist() == [False, True, False]
    # a distractor equal to a translation ties with it: margin 0, which is why the stage removes those
    tie = score_pair(HAND_SRC, HAND_TGT, src_lang="kk", tgt_lang="en", dataset="d", tgt_distractors=HAND_TGT[1:2])
    assert tie.src_tgt.margin[1] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="tgt_distractors: 1 rows are not L2-normalised"):
        score_pair(HAND_SRC, HAND_TGT, src_lang="kk", tgt_lang="en", dataset="d", tgt_distractors=2 * HAND_TGT[:1])


def test_a_pool_holding_only_the_translation_has_a_finite_margin():
    one = np.array([[0.6, 0.8]], dtype=np.float32)
    outcome = query_outcomes(one, one)
    assert outcome.correct.tolist() == [True]
    assert outcome.margin.tolist() == pytest.approx([1.0 - NO_OTHER_CANDIDATE_COSINE])
    with pytest.raises(ValueError, match="every query needs its translation"):
        query_outcomes(HAND_SRC, HAND_TGT[:2])


@pytest.mark.parametrize(("n", "extra", "dim", "noise", "seed"), [(60, 0, 8, 0.8, 0), (40, 25, 6, 1.0, 1), (2, 3, 4, 0.5, 2)])
def test_margins_match_brute_force(n, extra, dim, noise, seed):
    src, tgt = noisy_pair(n, dim, noise, seed)
    distractors = unit(np.random.default_rng(seed + 10).standard_normal((extra, dim))) if extra else None
    scored = score_pair(src, tgt, src_lang="kk", tgt_lang="en", dataset="d", tgt_distractors=distractors)
    candidates = tgt if distractors is None else np.concatenate([tgt, distractors])
    expected = brute_force_margins(src, candidates)
    assert scored.src_tgt.margin == pytest.approx(expected, abs=1e-5)
    assert scored.src_tgt.correct.tolist() == [m > 0 for m in expected]  # random data: no ties
    assert scored.tgt_src.margin == pytest.approx(brute_force_margins(tgt, src), abs=1e-5)


def test_items_table_has_one_row_per_query_per_direction():
    scored = score_pair(HAND_SRC, HAND_TGT, src_lang="kaz", tgt_lang="eng", dataset="tatoeba", benchmark="tatoeba")
    items = scored.items()
    assert items.schema == ITEMS_SCHEMA
    assert items.num_rows == 6
    rows = items.to_pylist()
    assert {(r["benchmark"], r["dataset"], r["src_lang"], r["tgt_lang"]) for r in rows} == {
        ("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn")
    }
    assert [(r["direction"], r["item"], r["correct"]) for r in rows] == [
        ("src_tgt", 0, False),
        ("src_tgt", 1, True),
        ("src_tgt", 2, False),
        ("tgt_src", 0, False),
        ("tgt_src", 1, True),
        ("tgt_src", 2, False),
    ]
    assert [r["margin"] for r in rows] == pytest.approx([-0.2, 0.4, -0.36, -0.16, 0.2, -0.4], abs=1e-6)


def test_xx_yy_pairs_and_their_summary_rows():
    rng = np.random.default_rng(6)
    base = rng.standard_normal((30, 8))
    embeddings = {
        lang: unit(base + 0.9 * rng.standard_normal(base.shape)) for lang in ("eng_Latn", "kaz_Cyrl", "tel_Telu", "kat_Geor")
    }
    scores = multiway_pair_scores(embeddings, dataset="flores200-dev", pivot="eng_Latn", xx_yy=True)
    pairs = [(s.src_lang, s.tgt_lang) for s in scores]
    assert pairs == [
        ("kaz_Cyrl", "eng_Latn"),
        ("tel_Telu", "eng_Latn"),
        ("kat_Geor", "eng_Latn"),
        ("kaz_Cyrl", "tel_Telu"),
        ("kaz_Cyrl", "kat_Geor"),
        ("tel_Telu", "kat_Geor"),
    ]
    assert dataset_pivot(pairs) == "eng_Latn"
    summary = {r["metric"]: r for r in xx_yy_rows(scores, "eng_Latn")}
    xx_yy = [{r["metric"]: r["value"] for r in s.metric_rows()} for s in scores[3:]]
    assert set(summary) == {"accuracy_mean", "margin_mean"}
    for metric, row in summary.items():
        assert (row["src_lang"], row["tgt_lang"], row["n"]) == ("group:xx-yy", None, 3)
        assert row["value"] == pytest.approx(np.mean([v[metric] for v in xx_yy]))
    assert rows_table(list(summary.values())).num_rows == 2
    assert xx_yy_rows(scores[:3], "eng_Latn") == []  # pivot pairs only: no summary
    assert dataset_pivot([("a", "b"), ("c", "d")]) is None and dataset_pivot([("sts", None)]) is None


def test_margins_are_shown_x100():
    assert metric_scale("margin_mean") == 100.0
    assert format_value(0.0523, "margin_mean") == "5.2"


# ------------------------------------------------------------------ groups


def test_paper_groups():
    assert WACSE_4.langs == ("kaz_Cyrl", "tel_Telu", "kat_Geor", "jav_Latn")
    assert WACSE_5.langs == ("tgl_Latn", "jav_Latn", "kat_Geor", "kaz_Cyrl", "tel_Telu")
    assert set(WACSE_8.langs) == set(WACSE_5.langs) | {"mal_Mlym", "swh_Latn", "mar_Deva"}
    assert len(DAP_36.langs) == len(set(DAP_36.langs)) == 36 and set(WACSE_8.langs) <= set(DAP_36.langs)
    assert {"arb_Arab", "pes_Arab", "zho_Hans", "heb_Hebr", "swh_Latn"} <= set(DAP_36.langs)
    assert set(LANGUAGE_GROUPS) == {"wacse-4", "wacse-5", "wacse-8", "dap-36", "tatoeba-low16", "tatoeba-major8"}


def test_dap_28_from_test_sizes():
    small = {"jv": 205, "kk": 575, "ka": 746, "ml": 687, "sw": 390, "ta": 307, "te": 234, "th": 548}  # illustrative sizes
    sizes = {
        lang: small.get(lang, 1000)
        for lang in "af ar bg bn de el es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr nl pt ru sw ta te th tl tr ur vi zh".split()
    }
    group = dap_28_from_test_sizes(sizes)
    assert group.name == "dap-28" and len(group.langs) == 28 and "kaz_Cyrl" not in group.langs
    with pytest.raises(ValueError, match="not 28"):
        dap_28_from_test_sizes({**sizes, "tl": 999})
    with pytest.raises(ValueError, match="missing for DAP-36 languages: afr_Latn"):
        dap_28_from_test_sizes({k: v for k, v in sizes.items() if k != "af"})


def test_group_average_rows():
    rows = [
        metric_row("tatoeba", "tatoeba", lang, "eng_Latn", metric, value, 1000)
        for lang, values in {"kaz": (0.5, 0.7), "tel": (0.9, 0.8), "kat": (0.6, 0.6), "deu": (0.99, 0.98)}.items()
        for metric, value in zip(("accuracy_src_tgt", "accuracy_tgt_src"), values)
    ]
    empty_group = LanguageGroup.from_codes("none-present", ["fr"], "test")
    out = group_average_rows(rows, [WACSE_4, empty_group])
    assert out[: len(rows)] == rows
    added = {r["metric"]: r for r in out[len(rows) :]}
    assert set(added) == {"accuracy_src_tgt", "accuracy_tgt_src"}  # nothing for the group with no member present
    assert added["accuracy_src_tgt"]["value"] == pytest.approx((0.5 + 0.9 + 0.6) / 3)
    assert added["accuracy_tgt_src"]["value"] == pytest.approx((0.7 + 0.8 + 0.6) / 3)
    assert all(r["src_lang"] == "group:wacse-4" and r["n"] == 3 and r["tgt_lang"] == "eng_Latn" for r in added.values())
    assert rows_table(out).num_rows == len(out)
    # group rows are not averaged again; duplicate language rows are an error
    assert len(group_average_rows(out, [WACSE_4])) == len(out) + 2
    with pytest.raises(ValueError, match="two rows for kaz_Cyrl"):
        group_average_rows(rows + rows[:1], [WACSE_4])


# ------------------------------------------------------------------ MTEB rows


def test_mteb_task_result_rows():
    scores = {
        "test": [
            {
                "hf_subset": "kaz-eng",
                "languages": ["kaz-Cyrl", "eng-Latn"],
                "main_score": 0.61,
                "f1": 0.61,
                "accuracy": 0.7,
                "precision": None,
            },
            {"hf_subset": "en", "languages": ["eng-Latn"], "main_score": 0.5, "flag": True, "details": {"a": 1}},
            {"hf_subset": "default", "languages": ["deu-Latn", "eng-Latn", "fra-Latn"], "main_score": 0.4},
        ]
    }
    rows = mteb_bridge.task_result_rows("Tatoeba", scores, {"test": {"kaz-eng": 1000, "__all__": 5000}})
    by_key = {(r["src_lang"], r["tgt_lang"], r["metric"]): r for r in rows}
    assert by_key[("kaz_Cyrl", "eng_Latn", "f1")]["value"] == 0.61 and by_key[("kaz_Cyrl", "eng_Latn", "f1")]["n"] == 1000
    assert by_key[("eng_Latn", None, "main_score")]["n"] == 5000
    assert ("group:Tatoeba:default", None, "main_score") in by_key
    assert len(rows) == 5 and {r["benchmark"] for r in rows} == {"mteb"} and {r["dataset"] for r in rows} == {"Tatoeba.test"}
    assert rows_table(rows).num_rows == 5
    unknown = {"test": [{"hf_subset": "ber-eng", "languages": ["ber-Latn", "eng-Latn"], "main_score": 0.1}]}
    with pytest.raises(UnknownLanguageError, match="ber"):
        mteb_bridge.task_result_rows("Tatoeba", unknown)
    with pytest.warns(UserWarning, match="1 subsets without a FLORES-200 language skipped: test/ber-eng"):
        assert mteb_bridge.task_result_rows("Tatoeba", unknown, on_unknown_language="skip") == []
    assert (
        mteb_bridge.task_result_rows("X", {"test": [{"hf_subset": "s", "languages": ["eng-Latn"], "main_score": 1}]})[0]["n"]
        == -1
    )


def test_run_mteb_without_mteb_says_how_to_install(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mteb" else real_find_spec(name, *a))
    with pytest.raises(mteb_bridge.MtebNotInstalledError, match=r"pip install 'xlembed\[mteb\]'.*datasets must also be cached"):
        mteb_bridge.run_mteb(tmp_path, ["STS22"], tmp_path / "cache")


@pytest.mark.parametrize("k", [1, 3, 12])
def test_without_faiss_the_search_finds_the_same_neighbours(monkeypatch, k):
    rng = np.random.default_rng(5)
    queries = rng.standard_normal((40, 16)).astype(np.float32)
    base = rng.standard_normal((10, 16)).astype(np.float32)
    with_faiss = nearest_neighbours(queries, base, k)
    monkeypatch.setitem(sys.modules, "faiss", None)  # an `import faiss` now raises ImportError
    without = nearest_neighbours(queries, base, k)
    np.testing.assert_array_equal(without[1], with_faiss[1])  # k = 12 > 10 rows: both pad with -1
    np.testing.assert_allclose(without[0], with_faiss[0], rtol=1e-5, atol=1e-5)
