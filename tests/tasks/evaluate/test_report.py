"""Tests for tasks.evaluate.report and tasks.evaluate.figures: the Markdown/HTML report and its PNG figures."""

from __future__ import annotations

import base64
import io
import re

import matplotlib.image
import numpy as np
import pyarrow as pa
import pytest

from tasks.evaluate.figures import (
    DELTA_INTERVALS_FILE,
    EMBEDDING_MAP_FILE,
    HIST_LEGEND_INCHES,
    HIST_MAX_COLS,
    HIST_PANEL_INCHES,
    MAP_INCHES,
    SIMILARITY_HISTOGRAM_FILE,
    PairSimilarities,
    WordMap,
    embedding_map,
    similarity_histogram,
)
from tasks.evaluate.paired import paired_delta_intervals
from tasks.evaluate.report import EvaluationReport, build_report
from tasks.evaluate.schema import ITEMS_SCHEMA, METRICS_SCHEMA
from tasks.reporting.figures import DPI

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CARD = {"model": "xlembed-kk", "base": "LaBSE", "pooling": "cls", "artifact key": "encoders/0123abcd"}


def _row(benchmark, dataset, src, tgt, metric, value, n=100):
    return {
        "benchmark": benchmark,
        "dataset": dataset,
        "src_lang": src,
        "tgt_lang": tgt,
        "metric": metric,
        "value": value,
        "n": n,
    }


def _metrics() -> pa.Table:
    rows = [
        _row("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", "accuracy_src_tgt", 0.81234, 1000),
        _row("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", "accuracy_mean", 0.8056, 1000),
        _row("tatoeba", "tatoeba", "kat_Geor", "eng_Latn", "accuracy_src_tgt", 0.6549, 500),
        _row("tatoeba", "tatoeba", "kat_Geor", "eng_Latn", "accuracy_mean", 0.7, 500),
        _row("tatoeba", "tatoeba", "group:low", "eng_Latn", "accuracy_mean", 0.75281, 1500),
        _row("sts", "STS17", "eng_Latn", None, "spearman", 0.84567, 250),
        _row("sts", "STS17", "arb_Arab", None, "spearman", -0.1234, 250),
    ]
    return pa.Table.from_pylist(rows, schema=METRICS_SCHEMA)


def _table_rows(markdown: str, section: str, heading: str = "### Per language") -> list[list[str]]:
    """The cells of the first table under `heading` in the `## section` part of the Markdown."""
    part = markdown.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    part = part.split(heading + "\n", 1)[1]
    lines = []
    for line in part.strip().splitlines():
        if not line.startswith("|"):
            break
        lines.append(line)
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if not re.fullmatch(r"\|[-:|]+\|", ln)]


def _pairs(k: int, seed: int = 0) -> list[PairSimilarities]:
    rng = np.random.default_rng(seed)
    langs = ["kaz_Cyrl", "kat_Geor", "tel_Telu", "jav_Latn", "swh_Latn", "mal_Mlym"]
    return [
        PairSimilarities(
            langs[i % len(langs)],
            "eng_Latn",
            np.clip(rng.normal(0.7, 0.1, 200), -1, 1),
            np.clip(rng.normal(0.1, 0.1, 200), -1, 1),
        )
        for i in range(k)
    ]


def _word_map(seed: int = 0) -> WordMap:
    rng = np.random.default_rng(seed)
    concepts = {
        "dog": ["dog", "ит", "ძაღლი", "asu"],
        "water": ["water", "су", "წყალი", "banyu"],
        "house": ["house", "үй", "სახლი", "omah"],
    }
    langs = ["eng_Latn", "kaz_Cyrl", "kat_Geor", "jav_Latn"]
    centres = {c: rng.normal(size=16) for c in concepts}
    words, word_langs, concept, vectors = [], [], [], []
    for c, ws in concepts.items():
        for w, lang in zip(ws, langs):
            words.append(w)
            word_langs.append(lang)
            concept.append(c)
            vectors.append(centres[c] + 0.2 * rng.normal(size=16))
    return WordMap(words, word_langs, concept, np.array(vectors))


def _image(png: bytes) -> np.ndarray:
    assert png.startswith(PNG_MAGIC)
    return matplotlib.image.imread(io.BytesIO(png), format="png")


def _px(inches: float) -> int:
    return int(round(inches * DPI))


@pytest.fixture(scope="module")
def full_report() -> EvaluationReport:
    return build_report(_metrics(), title="Report", model_card=CARD, similarities=_pairs(3), word_map=_word_map())


def test_tables_hold_rounded_percentages_and_spearman_x100() -> None:
    report = build_report(_metrics(), title="kk encoder", model_card=CARD)
    md = report.markdown
    assert md.startswith("# kk encoder\n")
    for key, value in CARD.items():
        assert f"| **{key}** | {value} |" in md
        assert f"<th>{key}</th><td>{value}</td>" in report.html

    tatoeba = _table_rows(md, "tatoeba")
    assert tatoeba[0] == ["Language / pair", "accuracy_src_tgt", "accuracy_mean", "n"]
    assert tatoeba[1:] == [  # rows sorted by language
        ["kat_Geor → eng_Latn", "65.5", "70.0", "500"],
        ["kaz_Cyrl → eng_Latn", "81.2", "80.6", "1,000"],
    ]
    groups = _table_rows(md, "tatoeba", "### Group averages")
    assert groups == [["Group", "accuracy_mean", "n"], ["low → eng_Latn", "75.3", "1,500"]]
    assert "group:" not in md.split("## tatoeba", 1)[1].split("### Group averages")[0]  # groups stay out of the language table

    sts = _table_rows(md, "sts")
    assert sts == [["Language / pair", "spearman", "n"], ["arb_Arab", "-12.3", "250"], ["eng_Latn", "84.6", "250"]]
    assert "Dataset: STS17" in md
    assert "Figures" not in md and "<img" not in report.html and report.figures == {}  # no figure inputs, no figures
    # the HTML carries the same numbers
    for text in ("65.5", "81.2", "75.3", "84.6", "-12.3", "kat_Geor → eng_Latn"):
        assert f">{text}</td>" in report.html


def test_non_percentage_metrics_and_several_datasets() -> None:
    rows = [
        _row("bucc", "bucc2018-ru", "rus_Cyrl", "eng_Latn", "f1", 0.91234),
        _row("bucc", "bucc2018-ru", "rus_Cyrl", "eng_Latn", "threshold", 0.73219),
        _row("bucc", "bucc2018-de", "deu_Latn", "eng_Latn", "f1", 0.95),
    ]
    md = build_report(pa.Table.from_pylist(rows, schema=METRICS_SCHEMA), title="t", model_card={}).markdown
    assert _table_rows(md, "bucc") == [
        ["Dataset", "Language / pair", "f1", "threshold", "n"],
        ["bucc2018-de", "deu_Latn → eng_Latn", "95.0", "—", "100"],
        ["bucc2018-ru", "rus_Cyrl → eng_Latn", "91.2", "0.732", "100"],
    ]


def test_delta_columns_against_a_baseline() -> None:
    base_rows = [
        _row("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", "accuracy_src_tgt", 0.70),  # +11.2
        _row("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", "accuracy_mean", 0.90),  # -9.4
        _row("tatoeba", "tatoeba", "kat_Geor", "eng_Latn", "accuracy_mean", 0.70),  # +0.0
        _row("tatoeba", "tatoeba", "group:low", "eng_Latn", "accuracy_mean", 0.70281),  # +5.0
        _row("sts", "STS17", "eng_Latn", None, "spearman", 0.80),  # +4.6 (null tgt_lang joins null)
        _row("sts", "STS-other", "eng_Latn", None, "spearman", 0.1),  # not in the run: ignored, counted
    ]
    report = build_report(
        _metrics(),
        title="t",
        model_card=CARD,
        baseline=pa.Table.from_pylist(base_rows, schema=METRICS_SCHEMA),
        baseline_name="LaBSE",
    )
    md = report.markdown
    assert _table_rows(md, "tatoeba") == [
        [
            "Language / pair",
            "accuracy_src_tgt",
            "Δ vs LaBSE (accuracy_src_tgt)",
            "accuracy_mean",
            "Δ vs LaBSE (accuracy_mean)",
            "n",
        ],
        ["kat_Geor → eng_Latn", "65.5", "—", "70.0", "+0.0", "500"],
        ["kaz_Cyrl → eng_Latn", "81.2", "+11.2", "80.6", "-9.4", "1,000"],
    ]
    assert _table_rows(md, "tatoeba", "### Group averages")[1] == ["low → eng_Latn", "75.3", "+5.0", "1,500"]
    assert _table_rows(md, "sts")[1:] == [["arb_Arab", "-12.3", "—", "250"], ["eng_Latn", "84.6", "+4.6", "250"]]
    assert "1 LaBSE rows have no counterpart" in md
    assert '<td class="pos">+11.2</td>' in report.html and '<td class="neg">-9.4</td>' in report.html

    unnamed = build_report(_metrics(), title="t", model_card={}, baseline=pa.Table.from_pylist(base_rows, schema=METRICS_SCHEMA))
    assert "Δ vs baseline (accuracy_mean)" in unnamed.markdown


def test_html_is_self_contained_and_embeds_the_figures(full_report: EvaluationReport) -> None:
    page = full_report.html
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert page.count('<img src="data:image/png;base64,') == 2
    embedded = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert sorted(base64.b64decode(data) for data in embedded) == sorted(full_report.figures.values())
    assert set(full_report.figures) == {SIMILARITY_HISTOGRAM_FILE, EMBEDDING_MAP_FILE}
    md = full_report.markdown
    assert "## Figures" in md
    assert f"]({SIMILARITY_HISTOGRAM_FILE})" in md and f"]({EMBEDDING_MAP_FILE})" in md
    assert "right of the" in md and "cluster" in md  # captions say what to look for
    assert "base64" not in md


def test_data_text_is_escaped() -> None:
    evil = '<script>alert("x")</script>'
    rows = [
        _row("tatoeba", f"ds{evil}", f"kaz_Cyrl{evil}", "eng_Latn", "accuracy_mean", 0.5),
        _row(f"bench{evil}", "d", "kaz_Cyrl", None, f"f1{evil}", 0.5),
    ]
    pairs = [PairSimilarities(f"x{evil}", "eng_Latn", np.array([0.5]), np.array([0.0]))]
    report = build_report(
        pa.Table.from_pylist(rows, schema=METRICS_SCHEMA),
        title=f"T {evil}",
        model_card={f"k{evil}": f"v{evil}"},
        baseline_name=f"B{evil}",
        baseline=pa.Table.from_pylist(rows, schema=METRICS_SCHEMA),
        similarities=pairs,
    )
    assert "<script" not in report.html.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in report.html
    assert "<title>T &lt;script&gt;" in report.html
    assert not re.search(r"(?<!\\)<", report.markdown)  # Markdown renderers pass raw HTML through
    assert "\\<script\\>" in report.markdown


@pytest.mark.slow
def test_figures_are_pngs_of_the_expected_size() -> None:
    for k in (1, 5):
        png = similarity_histogram(_pairs(k))
        ncols = min(HIST_MAX_COLS, k)
        nrows = -(-k // ncols)
        image = _image(png)
        assert image.shape[:2] == (_px(nrows * HIST_PANEL_INCHES[1] + HIST_LEGEND_INCHES), _px(ncols * HIST_PANEL_INCHES[0]))
        assert image.std() > 0.01  # something is drawn
    image = _image(embedding_map(_word_map()))
    assert image.shape[:2] == (_px(MAP_INCHES[1]), _px(MAP_INCHES[0]))
    assert image.std() > 0.01


@pytest.mark.slow
def test_figures_are_deterministic(full_report: EvaluationReport) -> None:
    again = build_report(_metrics(), title="Report", model_card=CARD, similarities=_pairs(3), word_map=_word_map())
    assert again.figures == full_report.figures
    assert again.html == full_report.html and again.markdown == full_report.markdown
    assert similarity_histogram(_pairs(2)) == similarity_histogram(_pairs(2))
    assert embedding_map(_word_map()) == embedding_map(_word_map())
    assert embedding_map(_word_map(seed=1)) != embedding_map(_word_map())


@pytest.mark.slow
def test_embedding_map_of_3_concepts_by_4_languages_and_edge_cases() -> None:
    word_map = _word_map()
    assert len(set(word_map.concept)) == 3 and len(set(word_map.langs)) == 4
    assert _image(embedding_map(word_map)).ndim == 3
    # degenerate inputs still render: one word, identical vectors, 1-D embeddings
    one = WordMap(["a"], ["eng_Latn"], ["a"], np.ones((1, 4)))
    same = WordMap(["a", "b"], ["eng_Latn", "kaz_Cyrl"], ["a", "a"], np.ones((2, 4)))
    narrow = WordMap(["a", "b", "c"], ["eng_Latn", "kaz_Cyrl", "kat_Geor"], ["a", "a", "c"], np.arange(3.0)[:, None])
    for wm in (one, same, narrow):
        assert embedding_map(wm).startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="one length"):
        embedding_map(WordMap(["a", "b"], ["eng_Latn"], ["a", "b"], np.ones((2, 4))))
    with pytest.raises(ValueError, match="method"):
        embedding_map(word_map, method="tsne")  # type: ignore[arg-type]


def test_histogram_tolerates_empty_and_non_finite_values() -> None:
    pair = PairSimilarities("kaz_Cyrl", "eng_Latn", np.array([0.9, np.nan, 1.0000001]), np.array([], dtype=float))
    assert _image(similarity_histogram([pair])).shape[2] in (3, 4)
    with pytest.raises(ValueError):
        similarity_histogram([])


def test_empty_figure_inputs_give_no_figure_section() -> None:
    empty_map = WordMap([], [], [], np.zeros((0, 8)))
    for kwargs in ({}, {"similarities": (), "word_map": None}, {"word_map": empty_map}):
        report = build_report(_metrics(), title="t", model_card=CARD, **kwargs)
        assert report.figures == {}
        assert "Figures" not in report.markdown and "<figure" not in report.html
    only_map = build_report(_metrics(), title="t", model_card=CARD, word_map=_word_map())
    assert set(only_map.figures) == {EMBEDDING_MAP_FILE}
    assert only_map.html.count("<img") == 1


@pytest.mark.slow
def test_many_pairs_are_sampled_with_the_seed() -> None:
    pairs = _pairs(40)
    for p, i in zip(pairs, range(40)):
        p.src_lang = f"l{i:02d}_Latn"
    report = build_report(_metrics(), title="t", model_card={}, similarities=pairs, seed=1)
    assert "Showing 36 of 40 language pairs (seeded sample, seed 1)" in report.markdown
    assert _image(report.figures[SIMILARITY_HISTOGRAM_FILE]).shape[:2] == (
        _px(9 * HIST_PANEL_INCHES[1] + HIST_LEGEND_INCHES),
        _px(4 * HIST_PANEL_INCHES[0]),
    )


def test_bad_tables_are_rejected() -> None:
    with pytest.raises(ValueError, match="lacks columns"):
        build_report(_metrics().drop_columns(["n"]), title="t", model_card={})
    dup = pa.concat_tables([_metrics(), _metrics().slice(0, 1)])
    with pytest.raises(ValueError, match="more than one row"):
        build_report(dup, title="t", model_card={})


def test_empty_metrics_table() -> None:
    report = build_report(METRICS_SCHEMA.empty_table(), title="t", model_card=CARD)
    assert "No metrics were computed." in report.markdown
    assert "No metrics were computed." in report.html


# ---------------------------------------------------------------------------------------------
# Paired bootstrap intervals and the in-domain / out-of-domain sentence

N_ITEMS = 100  # queries per direction per language


def _items(benchmark: str, dataset: str, src: str, tgt: str, right: int, margin: float = 0.0) -> pa.Table:
    """Both directions of one pair: the first `right` of N_ITEMS queries correct, every margin `margin`."""
    correct = np.arange(N_ITEMS) < right
    return pa.table(
        {
            "benchmark": [benchmark] * 2 * N_ITEMS,
            "dataset": [dataset] * 2 * N_ITEMS,
            "src_lang": [src] * 2 * N_ITEMS,
            "tgt_lang": [tgt] * 2 * N_ITEMS,
            "direction": ["src_tgt"] * N_ITEMS + ["tgt_src"] * N_ITEMS,
            "item": np.tile(np.arange(N_ITEMS, dtype=np.int32), 2),
            "correct": np.tile(correct, 2),
            "margin": np.full(2 * N_ITEMS, margin, dtype=np.float32),
        },
        schema=ITEMS_SCHEMA,
    )


FLORES_PAIRS = (("kaz_Cyrl", "eng_Latn"), ("tel_Telu", "eng_Latn"), ("kaz_Cyrl", "tel_Telu"))
TATOEBA_LANGS = ("kaz_Cyrl", "kat_Geor", "deu_Latn")


def _model_items(flores_right: int, tatoeba_right: int, margin: float) -> pa.Table:
    tables = [_items("retrieval", "flores200-dev", src, tgt, flores_right, margin) for src, tgt in FLORES_PAIRS]
    tables += [_items("tatoeba", "tatoeba", lang, "eng_Latn", tatoeba_right, margin) for lang in TATOEBA_LANGS]
    return pa.concat_tables(tables)


def _group_metrics() -> pa.Table:
    rows = [_row("tatoeba", "tatoeba", lang, "eng_Latn", "accuracy_mean", 0.5) for lang in TATOEBA_LANGS]
    rows.append(_row("tatoeba", "tatoeba", "group:wacse-4", "eng_Latn", "accuracy_mean", 0.5, 2))
    rows += [_row("retrieval", "flores200-dev", src, tgt, "accuracy_mean", 0.5) for src, tgt in FLORES_PAIRS]
    return pa.Table.from_pylist(rows, schema=METRICS_SCHEMA)


def test_intervals_per_headline_and_the_disagreement_sentence() -> None:
    # in domain (FLORES rows): 50 -> 90 of 100 right, a +40-point change; out of domain (Tatoeba): 60 -> 60
    base, trained = _model_items(50, 60, 0.1), _model_items(90, 60, 0.15)
    report = build_report(
        _group_metrics(),
        title="t",
        model_card={},
        baseline=_group_metrics(),
        baseline_name="untrained base",
        items=trained,
        baseline_items=base,
    )
    md = report.markdown
    sentence = md.split("\n\n")[1]
    assert sentence.startswith("In-domain and out-of-domain results disagree: in-domain retrieval/flores200-dev +40.0 pp")
    assert "significant), but out-of-domain tatoeba/tatoeba +0.0 pp (95% interval +0.0 to +0.0, not significant)." in sentence
    assert "<p><strong>In-domain and out-of-domain results disagree" in report.html
    table = _table_rows(md, "Change vs untrained base, with 95% intervals", "")
    header, *lines = table
    assert header[:5] == ["Benchmark / dataset", "Headline", "Δ accuracy_mean", "95% interval", "Significant"]
    by_headline = {(line[0], line[1]): line for line in lines}
    assert set(by_headline) == {
        ("retrieval/flores200-dev", "all languages"),
        ("retrieval/flores200-dev", "xx-yy pairs"),
        ("tatoeba/tatoeba", "all languages"),
        ("tatoeba/tatoeba", "wacse-4"),
    }
    flores = by_headline["retrieval/flores200-dev", "all languages"]
    low, high = (float(x) for x in flores[3].split(" to "))
    assert flores[2] == "+40.0" and 30 < low < 40 < high < 50 and flores[4] == "yes"
    assert flores[5] == "+5.0"  # margin 0.10 -> 0.15, x100; every item moves alike: no spread
    assert flores[7:] == ["2", "400"]  # kaz and tel (both directions); the kaz-tel pair is an xx-yy pair
    assert by_headline["retrieval/flores200-dev", "xx-yy pairs"][7:] == ["1", "200"]
    assert by_headline["tatoeba/tatoeba", "wacse-4"][7:] == ["2", "400"]  # kaz, kat: wacse-4 members present
    assert by_headline["tatoeba/tatoeba", "all languages"][2:5] == ["+0.0", "+0.0 to +0.0", "no"]
    assert DELTA_INTERVALS_FILE in report.figures and _image(report.figures[DELTA_INTERVALS_FILE]).shape[1] == _px(7.0)
    assert "Change in accuracy_mean from untrained base" in report.html


@pytest.mark.slow
def test_no_sentence_when_in_and_out_of_domain_agree_or_without_items() -> None:
    both_gain = build_report(
        _group_metrics(), title="t", model_card={}, items=_model_items(90, 95, 0.2), baseline_items=_model_items(50, 50, 0.1)
    )
    assert "disagree" not in both_gain.markdown and "disagree" not in both_gain.html
    assert "Change vs baseline, with 95% intervals" in both_gain.markdown
    out_of_domain_gain = build_report(
        _group_metrics(), title="t", model_card={}, items=_model_items(50, 95, 0.2), baseline_items=_model_items(50, 50, 0.1)
    )
    assert "disagree: out-of-domain tatoeba/tatoeba +45.0 pp" in out_of_domain_gain.markdown  # and the other way round
    plain = build_report(_group_metrics(), title="t", model_card={}, baseline=_group_metrics())
    assert "95% interval" not in plain.markdown and DELTA_INTERVALS_FILE not in plain.figures
    elsewhere = build_report(
        _group_metrics(),
        title="t",
        model_card={},
        items=_model_items(90, 95, 0.2),
        baseline_items=_items("sts", "other", "kaz_Cyrl", "eng_Latn", 10),
    )
    assert "No retrieval sentences are shared with baseline" in elsewhere.markdown


def test_interval_statistic_is_the_mean_over_languages() -> None:
    # kaz gains 40 points, kat none: the all-languages change is 20 points (the group rows' mean), not item-weighted
    base = pa.concat_tables(
        [_items("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", 50), _items("tatoeba", "tatoeba", "kat_Geor", "eng_Latn", 50)]
    )
    trained = pa.concat_tables(
        [_items("tatoeba", "tatoeba", "kaz_Cyrl", "eng_Latn", 90), _items("tatoeba", "tatoeba", "kat_Geor", "eng_Latn", 50)]
    )
    deltas = {d.label: d for d in paired_delta_intervals(trained, base)}
    assert deltas["all languages"].accuracy.delta == pytest.approx(0.2)
    assert deltas["kaz_Cyrl"].accuracy.delta == pytest.approx(0.4) and deltas["kaz_Cyrl"].accuracy.significant
    assert deltas["kat_Geor"].accuracy.delta == 0 and not deltas["kat_Geor"].accuracy.significant
    with pytest.raises(ValueError, match="evaluated items table has more than one row"):
        paired_delta_intervals(pa.concat_tables([trained, trained.slice(0, 1)]), base)
    with pytest.raises(ValueError, match="baseline items table lacks columns"):
        paired_delta_intervals(trained, base.drop_columns(["margin"]))


def test_the_headline_states_both_the_retrieval_and_the_similarity_change() -> None:
    """Issue 39: a single model's report says, in one sentence at its top, what it gained across
    languages and what it did to similarity within one, with the lowest language."""
    from tasks.evaluate.bootstrap import BootstrapInterval
    from tasks.evaluate.paired import DeltaInterval, StsDeltaInterval
    from tasks.evaluate.report import tradeoff_sentence

    def interval(delta: float, low: float, high: float) -> BootstrapInterval:
        return BootstrapInterval(delta, low, high, 100, 2, 0.95)

    retrieval = [DeltaInterval("tatoeba", "tatoeba", "all", "all languages", interval(0.03, 0.025, 0.035))]
    sts = [
        StsDeltaInterval("sts", "stsb-multi-mt-dev", "all sets", interval(-0.04, -0.05, -0.03)),
        StsDeltaInterval("sts", "stsb-multi-mt-dev", "eng_Latn", interval(-0.02, -0.03, -0.01)),
        StsDeltaInterval("sts", "stsb-multi-mt-dev", "arb_Arab", interval(-0.09, -0.11, -0.07)),
    ]
    sentence = tradeoff_sentence(retrieval, sts, "the untrained base")
    assert sentence == (
        "Against the untrained base: across languages (retrieval accuracy) tatoeba/tatoeba +3.0 pp (95% interval +2.5 to +3.5, "
        "significant); similarity ranking (Spearman ×100, mean over sets) sts/stsb-multi-mt-dev -4.0 (95% interval -5.0 to -3.0, "
        "significant) (lowest language arb_Arab -9.0)."
    )
    assert tradeoff_sentence(retrieval, [], "base") is None and tradeoff_sentence([], sts, "base") is None
