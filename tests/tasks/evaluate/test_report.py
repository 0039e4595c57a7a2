"""Tests for tasks.evaluate.report: the Markdown/HTML report and its PNG figures."""

from __future__ import annotations

import base64
import io
import re

import matplotlib.image
import numpy as np
import pyarrow as pa
import pytest

from tasks.evaluate.report import (
    DPI,
    EMBEDDING_MAP_FILE,
    HIST_LEGEND_INCHES,
    HIST_MAX_COLS,
    HIST_PANEL_INCHES,
    MAP_INCHES,
    SIMILARITY_HISTOGRAM_FILE,
    EvaluationReport,
    PairSimilarities,
    WordMap,
    build_report,
    embedding_map,
    similarity_histogram,
)
from tasks.evaluate.schema import METRICS_SCHEMA

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


def test_figures_are_deterministic(full_report: EvaluationReport) -> None:
    again = build_report(_metrics(), title="Report", model_card=CARD, similarities=_pairs(3), word_map=_word_map())
    assert again.figures == full_report.figures
    assert again.html == full_report.html and again.markdown == full_report.markdown
    assert similarity_histogram(_pairs(2)) == similarity_histogram(_pairs(2))
    assert embedding_map(_word_map()) == embedding_map(_word_map())
    assert embedding_map(_word_map(seed=1)) != embedding_map(_word_map())


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
