"""The sweep comparison report on metrics tables built here, checked against numbers computed by hand."""

from __future__ import annotations

import statistics
from collections.abc import Mapping

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from tasks.evaluate.columns import Column, VariantResult, headline_columns
from tasks.evaluate.compare import build_comparison
from tasks.evaluate.groups import LANGUAGE_GROUPS, group_average_rows, rows_table
from tasks.evaluate.schema import ITEMS_SCHEMA

TATOEBA = {"kaz_Cyrl": 0.0, "tel_Telu": 0.0}


def metrics(kaz: float, tel: float, sts: float | None = None) -> object:
    rows = [
        {
            "benchmark": "tatoeba",
            "dataset": "tatoeba",
            "src_lang": lang,
            "tgt_lang": "eng_Latn",
            "metric": metric,
            "value": value,
            "n": 100,
        }
        for lang, value in (("kaz_Cyrl", kaz), ("tel_Telu", tel))
        for metric in ("accuracy_src_tgt", "accuracy_mean")
    ]
    rows.append(
        {
            "benchmark": "tatoeba",
            "dataset": "tatoeba",
            "src_lang": "group:wacse-4",
            "tgt_lang": "eng_Latn",
            "metric": "accuracy_mean",
            "value": (kaz + tel) / 2,
            "n": 2,
        }
    )
    if sts is not None:
        rows.append(
            {
                "benchmark": "sts",
                "dataset": "STS17.en-en",
                "src_lang": "eng_Latn",
                "tgt_lang": "eng_Latn",
                "metric": "spearman",
                "value": sts,
                "n": 250,
            }
        )
    return rows_table(rows)


def result(name: str, group: str, table: object, seed: int | None = None, **overrides) -> VariantResult:
    seeds = {"train.seed": seed} if seed is not None else {}
    return VariantResult(name, group, {**overrides, **seeds}, seeds, table, "ab" * 32)


@pytest.fixture
def results() -> list[VariantResult]:
    return [
        result("tr_seed-1", "tr", metrics(0.50, 0.60, 0.70), 1, **{"train.objectives": ["tr"]}),
        result("tr_seed-2", "tr", metrics(0.54, 0.62, 0.72), 2, **{"train.objectives": ["tr"]}),
        result("awp_seed-1", "awp", metrics(0.60, 0.70, 0.71), 1, **{"train.objectives": ["tr", "awp"]}),
        result("awp_seed-2", "awp", metrics(0.66, 0.74, 0.69), 2, **{"train.objectives": ["tr", "awp"]}),
        VariantResult("broken", "broken", {"train.objectives": ["<wtr>"]}, {}, None, None, "RuntimeError: out of memory"),
    ]


def test_headline_columns_pick_each_benchmarks_main_metric(results: list[VariantResult]) -> None:
    columns = headline_columns([r.metrics for r in results if r.metrics is not None])
    assert [c.spec for c in columns] == [
        "tatoeba/tatoeba/group:wacse-4/accuracy_mean",
        "tatoeba/tatoeba/mean/accuracy_mean",
        "sts/STS17.en-en/mean/spearman",
    ]


def test_values_deltas_and_seed_statistics_match_hand_computation(results: list[VariantResult]) -> None:
    report = build_comparison(results, baseline="tr", title="WACSE objectives")
    mean = "tatoeba/tatoeba/mean/accuracy_mean"
    assert report.values["awp_seed-2"][mean] == pytest.approx((0.66 + 0.74) / 2)
    assert report.values["broken"][mean] is None
    # the baseline is the tr group: the mean over its seeds
    assert report.baseline is not None and report.baseline[mean] == pytest.approx((0.55 + 0.58) / 2)
    awp = [(0.60 + 0.70) / 2, (0.66 + 0.74) / 2]
    mean_awp, std_awp, n = report.seed_stats["awp"][mean]
    assert (mean_awp, std_awp, n) == (pytest.approx(statistics.fmean(awp)), pytest.approx(statistics.stdev(awp)), 2)
    assert "broken" not in report.seed_stats  # one run is not a spread
    md = report.markdown
    # awp_seed-2: 70.0 vs baseline 56.5 -> +13.5 points; awp group: mean of 65 and 70 = 67.5 ± 3.5 -> +11.0
    assert '| awp_seed-2 | awp | train.objectives=\\["tr","awp"\\], train.seed=2 |' in md
    row = next(line for line in md.splitlines() if line.startswith("| awp_seed-2 "))
    # these metrics tables come without per-sentence outcomes (older evaluations): no interval, said so
    assert "| 70.0 | +13.5 (no CI) |" in row
    assert "| 69.0 | -2.0 |" in row  # STS has no per-sentence outcomes at all: a plain delta
    group_row = next(line for line in md.splitlines() if line.startswith("| awp | 2 |"))
    assert "67.5 ± 3.5 | +11.0 (no CI) |" in group_row
    tr_row = next(line for line in md.splitlines() if line.startswith("| tr | 2 |"))
    assert "baseline" in tr_row
    assert "failed: RuntimeError: out of memory" in md and "—" in next(
        line for line in md.splitlines() if line.startswith("| broken ")
    )
    assert "Every variant sets" not in md  # nothing is common to all: train.seed differs, broken has none
    # HTML: escaped, self-contained, delta cells coloured
    assert "&lt;wtr&gt;" in report.html and "<wtr>" not in report.html
    assert '<td class="pos">+13.5 (no CI)</td>' in report.html and "http" not in report.html.replace("http-equiv", "")
    assert report.figure is None and "Against the untrained base" not in md  # nothing to draw, no base scored
    no_ci = [i for i in report.intervals if i["row"] == "awp_seed-2" and i["column"] == mean]
    assert no_ci == [
        {
            "against": "baseline",
            "row": "awp_seed-2",
            "reference": "tr",
            "column": mean,
            "units": "percentage points",
            "delta": pytest.approx(13.5),
            "low": None,
            "high": None,
            "significant": None,
            "seeds": {"row": 1, "reference": 2},
            "reason": "no per-sentence outcomes (evaluated before they were recorded)",
        }
    ]
    plain = next(r for r in report.rows if r["variant"] == "awp_seed-2")
    assert plain["tatoeba · all languages · accuracy_mean"] == pytest.approx(70.0)
    assert plain["Δ tatoeba · all languages · accuracy_mean"] == "+13.5"


def test_single_variant_baseline_and_explicit_columns(results: list[VariantResult]) -> None:
    report = build_comparison(results[:4], baseline="tr_seed-1", columns=["tatoeba/tatoeba/kaz_Cyrl/accuracy_src_tgt"])
    assert [c.label for c in report.columns] == ["tatoeba · kaz_Cyrl · accuracy_src_tgt"]
    lines = report.markdown.splitlines()
    assert "| 50.0 | baseline |" in next(line for line in lines if line.startswith("| tr_seed-1 "))
    assert "| 66.0 | +16.0 |" in next(line for line in lines if line.startswith("| awp_seed-2 "))
    with pytest.raises(ValueError, match="neither a variant nor a seed group"):
        build_comparison(results, baseline="nope")
    with pytest.raises(ValueError, match="benchmark/dataset/language/metric"):
        Column.parse("tatoeba/accuracy_mean")


def test_variants_without_metrics_still_get_rows() -> None:
    report = build_comparison(
        [
            VariantResult("bucket-5", "bucket-5", {"histogram.bucket": 5}),
            VariantResult("bucket-10", "bucket-10", {"histogram.bucket": 10}),
        ]
    )
    assert report.columns == [] and "No variant has evaluation metrics" in report.markdown
    assert [r["variant"] for r in report.rows] == ["bucket-5", "bucket-10"]


# ---------------------------------------------------------------------------- intervals over sentences

QUERIES = 100  # per direction and language pair: 200 items per pair
EVEN = np.arange(2 * QUERIES) % 2 == 0  # 50% correct
ODD = ~EVEN  # 50% correct, on the other items
NINETY = np.arange(2 * QUERIES) % 10 < 9  # 90% correct
ALL = np.ones(2 * QUERIES, dtype=bool)
KAZ_ENG, TEL_ENG, TEL_KAZ = ("kaz_Cyrl", "eng_Latn"), ("tel_Telu", "eng_Latn"), ("tel_Telu", "kaz_Cyrl")
MEAN_DEV = "retrieval/corpus-dev/mean/accuracy_mean"
WACSE4_DEV = "retrieval/corpus-dev/group:wacse-4/accuracy_mean"


def outcomes(pairs: Mapping[tuple[str, str], np.ndarray]) -> pa.Table:
    """Per-query outcomes (ITEMS_SCHEMA) of held-out retrieval: per (src, tgt) pair, the first
    QUERIES entries are the src->tgt queries, the rest tgt->src."""
    parts = []
    for (src, tgt), correct in pairs.items():
        n = correct.size
        parts.append(
            pa.table(
                {
                    "benchmark": ["retrieval"] * n,
                    "dataset": ["corpus-dev"] * n,
                    "src_lang": [src] * n,
                    "tgt_lang": [tgt] * n,
                    "direction": ["src_tgt"] * (n // 2) + ["tgt_src"] * (n // 2),
                    "item": np.tile(np.arange(n // 2, dtype=np.int32), 2),
                    "correct": correct,
                    "margin": np.where(correct, 0.1, -0.1).astype(np.float32),
                },
                schema=ITEMS_SCHEMA,
            )
        )
    return pa.concat_tables(parts)


def metrics_of(items: pa.Table) -> pa.Table:
    """The metrics table those outcomes make, as the evaluate stage builds it: accuracy_mean per
    language pair (both directions) and the wacse-4 group rows per target language."""
    per_pair = (
        pl.from_arrow(items)
        .group_by(["benchmark", "dataset", "src_lang", "tgt_lang"], maintain_order=True)
        .agg(pl.col("correct").mean().alias("value"), (pl.len() // 2).alias("n"))
    )
    rows = [r | {"metric": "accuracy_mean"} for r in per_pair.iter_rows(named=True)]
    return rows_table(group_average_rows(rows, [LANGUAGE_GROUPS["wacse-4"]]))


def scored(
    name: str,
    pairs: Mapping[tuple[str, str], np.ndarray] | None,
    *,
    group: str | None = None,
    seed: int | None = None,
    metrics_pairs=None,
    **extra,
) -> VariantResult:
    """A variant whose metrics come from `pairs` (or `metrics_pairs`), with its outcomes unless pairs is None."""
    seeds = {"train.seed": seed} if seed is not None else {}
    table = outcomes(pairs if pairs is not None else metrics_pairs)
    return VariantResult(
        name, group or name, seeds, seeds, metrics_of(table), "cd" * 32, items=table if pairs is not None else None, **extra
    )


def record(report, row: str, column: str = MEAN_DEV, against: str = "baseline") -> dict:
    return next(i for i in report.intervals if (i["row"], i["column"], i["against"]) == (row, column, against))


def md_row(report, name: str) -> str:
    return next(line for line in report.markdown.splitlines() if line.startswith(f"| {name} |"))


def test_paired_bootstrap_marks_a_real_difference_and_leaves_noise_unmarked() -> None:
    report = build_comparison(
        [
            scored("tr", {KAZ_ENG: EVEN, TEL_ENG: EVEN}),
            scored("awp", {KAZ_ENG: NINETY, TEL_ENG: NINETY}),  # 90% vs 50% on 400 paired sentences
            scored("same", {KAZ_ENG: EVEN, TEL_ENG: EVEN}),  # the baseline's outcomes exactly
            scored("shuffled", {KAZ_ENG: ODD, TEL_ENG: ODD}),  # the same accuracy on other sentences
        ],
        baseline="tr",
    )
    for column in (MEAN_DEV, WACSE4_DEV):
        better = record(report, "awp", column)
        assert better["delta"] == pytest.approx(40.0) and better["bootstrap_delta"] == pytest.approx(40.0)
        assert 30 < better["low"] < 40 < better["high"] < 50 and better["significant"] is True
        assert (better["items"], better["strata"], better["seeds"]) == (400, 2, {"row": 1, "reference": 1})
        same = record(report, "same", column)
        assert (same["low"], same["high"], same["significant"]) == (0.0, 0.0, False)  # contains zero: not a win
        noise = record(report, "shuffled", column)
        assert noise["delta"] == pytest.approx(0.0) and noise["low"] < -5 and noise["high"] > 5 and noise["significant"] is False
    # two headline columns, four rows against tr: no record for the baseline itself
    assert {(i["row"], i["column"]) for i in report.intervals} == {
        (r, c) for r in ("awp", "same", "shuffled") for c in (WACSE4_DEV, MEAN_DEV)
    }
    better = record(report, "awp")
    bounds = f"[+{better['low']:.1f}, +{better['high']:.1f}]"
    escaped = bounds.replace("[", "\\[").replace("]", "\\]")  # Markdown escapes brackets and the star
    assert f"| 90.0 | +40.0 {escaped} \\* |" in md_row(report, "awp")
    assert "\\*" not in md_row(report, "shuffled") and "\\*" not in md_row(report, "same")
    assert f'<td class="pos">+40.0 {bounds} *</td>' in report.html
    noise = record(report, "shuffled")
    assert f'<td class="zero">+0.0 [{noise["low"]:+.1f}, {noise["high"]:+.1f}]</td>' in report.html
    assert "within noise" in report.markdown and "Δ (accuracy_mean) \\[95% CI\\]" in report.markdown
    plain = next(r for r in report.rows if r["variant"] == "awp")
    label = "retrieval/corpus-dev · all languages · accuracy_mean"
    assert (plain[f"Δ {label}"], plain[f"Δ {label} 95% CI"], plain[f"Δ {label} significant"]) == ("+40.0", bounds, True)
    # the figure: each variant's delta and interval against tr, embedded in the HTML and named in the Markdown
    assert report.figure is not None and report.figure.startswith(b"\x89PNG")
    assert 'src="data:image/png;base64,' in report.html and "(intervals.png)" in report.markdown


def test_seed_groups_are_averaged_per_sentence_before_the_bootstrap() -> None:
    # tr's two seeds are right on complementary halves: 0.5 on every sentence once averaged. awp's
    # seeds are right everywhere, so every paired difference is exactly +0.5 and the interval
    # collapses on +50 points; pooling the runs instead of averaging them would give a wide one.
    report = build_comparison(
        [
            scored("tr_seed-1", {KAZ_ENG: EVEN, TEL_ENG: EVEN}, group="tr", seed=1),
            scored("tr_seed-2", {KAZ_ENG: ODD, TEL_ENG: ODD}, group="tr", seed=2),
            scored("awp_seed-1", {KAZ_ENG: ALL, TEL_ENG: ALL}, group="awp", seed=1),
            scored("awp_seed-2", {KAZ_ENG: ALL, TEL_ENG: ALL}, group="awp", seed=2),
        ],
        baseline="tr",
    )
    group = record(report, "awp")
    assert (group["low"], group["high"], group["significant"], group["seeds"]) == (
        pytest.approx(50.0),
        pytest.approx(50.0),
        True,
        {"row": 2, "reference": 2},
    )
    seed = record(report, "awp_seed-1")  # one run against the baseline group's per-sentence mean
    assert (seed["low"], seed["high"], seed["seeds"]) == (pytest.approx(50.0), pytest.approx(50.0), {"row": 1, "reference": 2})
    member = record(report, "tr_seed-1")  # a member of the baseline group against its mean
    assert member["delta"] == pytest.approx(0.0) and member["significant"] is False
    assert "+50.0 \\[+50.0, +50.0\\] \\*" in md_row(report, "awp")  # the over-seeds row
    assert report.seed_stats["tr"][MEAN_DEV] == (pytest.approx(0.5), pytest.approx(0.0), 2)  # the spread over seeds, apart


def test_group_columns_weight_strata_as_the_group_rows_do() -> None:
    # wacse-4 with two targets: eng (kaz, tel) and kaz (tel only). The group column is the mean of
    # the two group rows, ((+50 + 0) / 2 + 40) / 2 = +32.5, not the mean of the three pairs (+30).
    half = {KAZ_ENG: EVEN, TEL_ENG: EVEN, TEL_KAZ: EVEN}
    report = build_comparison(
        [scored("tr", half), scored("awp", {KAZ_ENG: ALL, TEL_ENG: EVEN, TEL_KAZ: NINETY})],
        baseline="tr",
        columns=[WACSE4_DEV, MEAN_DEV, "retrieval/corpus-dev/tel_Telu/accuracy_mean"],
    )
    for column, expected in ((WACSE4_DEV, 32.5), (MEAN_DEV, 30.0), ("retrieval/corpus-dev/tel_Telu/accuracy_mean", 20.0)):
        found = record(report, "awp", column)
        assert found["delta"] == pytest.approx(expected) and found["bootstrap_delta"] == pytest.approx(expected), column
        assert found["low"] < expected < found["high"]
    assert record(report, "awp", "retrieval/corpus-dev/tel_Telu/accuracy_mean")["strata"] == 2


def test_evaluations_without_outcomes_get_no_interval_and_no_error() -> None:
    both = {KAZ_ENG: EVEN, TEL_ENG: EVEN}
    report = build_comparison(
        [
            scored("tr", both),
            scored("old", None, metrics_pairs={KAZ_ENG: NINETY, TEL_ENG: NINETY}),  # evaluated before outcomes were recorded
            scored("mixed_seed-1", {KAZ_ENG: NINETY, TEL_ENG: NINETY}, group="mixed", seed=1),
            scored("mixed_seed-2", None, group="mixed", seed=2, metrics_pairs={KAZ_ENG: NINETY, TEL_ENG: NINETY}),
        ],
        baseline="tr",
    )
    for row in ("old", "mixed"):  # a seed group with one run lacking outcomes: no average to bootstrap
        found = record(report, row)
        assert found["delta"] == pytest.approx(40.0) and found["significant"] is None and found["low"] is None
        assert found["reason"].startswith("no per-sentence outcomes")
    assert "+40.0 (no CI)" in md_row(report, "old") and "+40.0 (no CI)" in md_row(report, "mixed")
    assert record(report, "mixed_seed-1")["significant"] is True  # its own run has outcomes
    # and an old baseline: nothing to pair with, every delta without an interval
    old_base = build_comparison(
        [scored("old", None, metrics_pairs=both), scored("awp", {KAZ_ENG: NINETY, TEL_ENG: NINETY})], baseline="old"
    )
    assert all(i["significant"] is None for i in old_base.intervals) and "+40.0 (no CI)" in md_row(old_base, "awp")
    assert old_base.figure is None  # no interval to draw


@pytest.mark.slow
def test_untrained_base_table_compares_every_trained_variant_with_the_base() -> None:
    base_pairs = {KAZ_ENG: EVEN, TEL_ENG: EVEN}
    base_items = outcomes(base_pairs)
    beside = {"base_metrics": metrics_of(base_items), "base_items": base_items, "trained": True}
    results = [
        scored("tr_seed-1", {KAZ_ENG: NINETY, TEL_ENG: NINETY}, group="tr", seed=1, **beside),
        scored("tr_seed-2", {KAZ_ENG: NINETY, TEL_ENG: ALL}, group="tr", seed=2, **beside),
        scored("same", base_pairs, **beside),  # training changed nothing
        scored("pooling-cls", {KAZ_ENG: ODD, TEL_ENG: EVEN}, trained=False),  # untrained itself: not in the table
    ]
    report = build_comparison(results, baseline="tr", single_seed=True)
    md = report.markdown
    assert "## Against the untrained base" in md and "scored beside tr\\_seed-1" in md  # Markdown-escaped
    assert report.untrained == {WACSE4_DEV: pytest.approx(0.5), MEAN_DEV: pytest.approx(0.5)}
    assert md_row(report, "untrained base").startswith("| untrained base | — | 50.0 | reference | 50.0 | reference |")
    tr = record(report, "tr", against="untrained base")  # the group: both seeds against the base
    assert (
        tr["delta"] == pytest.approx((90 + 95) / 2 - 50)
        and tr["significant"] is True
        and tr["seeds"] == {"row": 2, "reference": 2}
    )
    same = record(report, "same", against="untrained base")
    assert (same["low"], same["high"], same["significant"]) == (0.0, 0.0, False)
    assert not any(i["row"] == "pooling-cls" and i["against"] == "untrained base" for i in report.intervals)
    assert md.startswith("# Sweep comparison (one seed: differences are not claims)")
    assert "against another untrained base" not in md  # every variant's own base is the one shown

    # a variant evaluated on other settings brings its own base: its delta is against that one, and the note says so
    other_base = outcomes({KAZ_ENG: NINETY, TEL_ENG: NINETY})
    cls = scored(
        "cls", {KAZ_ENG: NINETY, TEL_ENG: NINETY}, base_metrics=metrics_of(other_base), base_items=other_base, trained=True
    )
    report = build_comparison([*results, cls], baseline="tr")
    assert record(report, "cls", against="untrained base")["delta"] == pytest.approx(0.0)
    assert "against another untrained base" in report.markdown

    # a variant of the grid that trains nothing is the base row, from its own metrics and outcomes
    untrained = scored("base", {KAZ_ENG: ODD, TEL_ENG: ODD}, trained=False)
    plain = [
        VariantResult(r.name, r.group, r.overrides, r.seeds, r.metrics, r.metrics_key, items=r.items, trained=True)
        for r in results[:2]
    ]
    report = build_comparison([untrained, *plain], baseline="tr", untrained_base="base")
    assert "variant base, whose pipeline trains nothing" in report.markdown
    assert record(report, "tr", against="untrained base")["reference"] == "untrained base of tr"
    assert record(report, "tr", against="untrained base")["significant"] is True


def _as_tatoeba(items: pa.Table) -> pa.Table:
    """The same outcomes labelled as an out-of-domain benchmark (Tatoeba) instead of held-out rows."""
    n = items.num_rows
    relabelled = items.set_column(0, "benchmark", pa.array(["tatoeba"] * n)).set_column(1, "dataset", pa.array(["tatoeba"] * n))
    return relabelled.cast(ITEMS_SCHEMA)


@pytest.mark.slow
def test_untrained_base_note_says_when_in_domain_and_out_of_domain_disagree() -> None:
    def both(dev: np.ndarray, tatoeba: np.ndarray) -> pa.Table:
        return pa.concat_tables(
            [outcomes({KAZ_ENG: dev, TEL_ENG: dev}), _as_tatoeba(outcomes({KAZ_ENG: tatoeba, TEL_ENG: tatoeba}))]
        )

    def variant(name: str, items: pa.Table, trained: bool = True) -> VariantResult:
        return VariantResult(name, name, {}, {}, metrics_of(items), "cd" * 32, items=items, trained=trained)

    results = [
        variant("base", both(EVEN, NINETY), trained=False),
        variant("phrases", both(ALL, EVEN)),  # held-out rows up 50 points, Tatoeba down 40
        variant("sentences", both(ALL, ALL)),  # up on both: nothing to flag
    ]
    report = build_comparison(results, baseline="base", untrained_base="base")
    note = next(line for line in report.markdown.splitlines() if "disagree" in line)
    assert "phrases: in domain retrieval/corpus-dev +50.0" in note and "but out of domain tatoeba/tatoeba -40.0" in note
    assert "(significant)" in note and "sentences" not in note
    assert "In-domain and out-of-domain results disagree" in report.html
    agreeing = build_comparison(results[::2], baseline="base", untrained_base="base")
    assert "disagree" not in agreeing.markdown


def _all_pairs_evaluation(noise: float, seed: int) -> tuple[pa.Table, pa.Table, dict[tuple[str, str], float]]:
    """Metrics and items of held-out-rows retrieval with `pairs = "all"` (English pivot plus every
    two other languages), scored for real on noisy copies of shared vectors, as the corpus_dev
    benchmark writes them; and each pair's accuracy_mean."""
    from tasks.evaluate.retrieval import multiway_pair_scores, xx_yy_rows

    rng = np.random.default_rng(seed)
    meaning = rng.normal(size=(60, 16))
    langs = ["eng_Latn", "ita_Latn", "pol_Latn", "por_Latn"]
    noisy = {lang: meaning + noise * rng.normal(size=meaning.shape) for lang in langs}
    embeddings = {lang: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32) for lang, x in noisy.items()}
    scores = multiway_pair_scores(embeddings, dataset="corpus-dev", pivot="eng_Latn", xx_yy=True)
    rows = [row for scored in scores for row in scored.metric_rows()] + xx_yy_rows(scores, "eng_Latn")
    table = rows_table(group_average_rows(rows, [LANGUAGE_GROUPS["tatoeba-major8"]]))
    items = pa.concat_tables([scored.items() for scored in scores]).cast(ITEMS_SCHEMA)
    accuracy = {
        (s.src_lang, s.tgt_lang): next(r["value"] for r in s.metric_rows() if r["metric"] == "accuracy_mean") for s in scores
    }
    return table, items, accuracy


def test_with_xx_yy_pairs_the_columns_keep_to_the_pivot_and_xx_yy_gets_its_interval() -> None:
    base_metrics, base_items, base_acc = _all_pairs_evaluation(noise=1.4, seed=0)
    trained_metrics, trained_items, trained_acc = _all_pairs_evaluation(noise=1.1, seed=0)
    report = build_comparison(
        [
            VariantResult("base", "base", {}, {}, base_metrics, "ab" * 32, items=base_items, trained=False),
            VariantResult("trained", "trained", {"train.steps": 10}, {}, trained_metrics, "cd" * 32, items=trained_items),
        ],
        baseline="base",
        untrained_base="base",
        resamples=300,
    )
    specs = [c.spec for c in report.columns]
    assert specs == [
        "retrieval/corpus-dev/group:xx-yy/accuracy_mean",
        "retrieval/corpus-dev/group:tatoeba-major8/accuracy_mean",
        "retrieval/corpus-dev/mean/accuracy_mean",
    ]
    for name, accuracy in (("base", base_acc), ("trained", trained_acc)):
        pivot_pairs = [v for (src, tgt), v in accuracy.items() if tgt == "eng_Latn"]
        xx_yy = [v for (src, tgt), v in accuracy.items() if "eng_Latn" not in (src, tgt)]
        assert len(pivot_pairs) == 3 and len(xx_yy) == 3
        values = report.values[name]
        # the group and the mean are over (xx, English) only, as the evaluation's own headline
        assert values["retrieval/corpus-dev/mean/accuracy_mean"] == pytest.approx(np.mean(pivot_pairs))
        assert values["retrieval/corpus-dev/group:tatoeba-major8/accuracy_mean"] == pytest.approx(np.mean(pivot_pairs))
        assert values["retrieval/corpus-dev/group:xx-yy/accuracy_mean"] == pytest.approx(np.mean(xx_yy))
    records = {r["column"]: r for r in report.intervals if r["against"] == "baseline"}
    xx_yy_record = records["retrieval/corpus-dev/group:xx-yy/accuracy_mean"]
    assert xx_yy_record["strata"] == 3 and xx_yy_record["items"] == 3 * 2 * 60  # three pairs, both directions
    assert records["retrieval/corpus-dev/mean/accuracy_mean"]["strata"] == 3
    for record in records.values():
        # the interval is around the column's own delta (the paired mean difference, unweighted over pairs)
        assert record["bootstrap_delta"] == pytest.approx(record["delta"], abs=1e-6)
        assert record["low"] <= record["delta"] <= record["high"]
    trained_row = next(line for line in report.markdown.splitlines() if line.startswith("| trained "))
    assert "no CI" not in trained_row


def sts_items(cosines: Mapping[str, np.ndarray], gold: np.ndarray) -> pa.Table:
    """Per-pair STS cosines (STS_ITEMS_SCHEMA) of monolingual sets, one per language."""
    from tasks.evaluate.schema import STS_ITEMS_SCHEMA

    parts = []
    for lang, cosine in cosines.items():
        n = cosine.size
        parts.append(
            pa.table(
                {
                    "benchmark": ["sts"] * n, "dataset": ["stsb-multi-mt-dev"] * n, "src_lang": [lang] * n,
                    "tgt_lang": [lang] * n, "item": np.arange(n, dtype=np.int32), "cosine": cosine, "gold": gold,
                },
                schema=STS_ITEMS_SCHEMA,
            )
        )  # fmt: skip
    return pa.concat_tables(parts)


def test_tradeoff_puts_each_variant_at_its_retrieval_and_similarity_change_against_the_untrained_base() -> None:
    """x: the retrieval column's change against the base (points), y: the mean over monolingual
    STS sets of the change in Spearman (x100), each with its paired interval; seed groups are one
    point, their cosines averaged per pair first."""
    import scipy.stats

    from tasks.evaluate.tradeoff import TRADEOFF_FIGURE_FILE

    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 300)
    noisy = {lang: gold + rng.normal(0, 3.0, 300) for lang in ("eng_Latn", "spa_Latn")}  # the base: far from gold
    close = {lang: gold + rng.normal(0, 0.5, 300) for lang in ("eng_Latn", "spa_Latn")}  # a model that ranks better
    base = scored("base", {KAZ_ENG: EVEN, TEL_ENG: EVEN}, trained=False, sts_items=sts_items(noisy, gold))
    runs = [
        scored(f"keeps_seed-{s}", {KAZ_ENG: NINETY, TEL_ENG: NINETY}, group="keeps", seed=s, trained=True,
               sts_items=sts_items(close, gold))
        for s in (1, 2)
    ]  # fmt: skip
    drifts = scored("drifts", {KAZ_ENG: ALL, TEL_ENG: ALL}, trained=True, sts_items=sts_items(noisy, gold))
    report = build_comparison([base, *runs, drifts], baseline="base", untrained_base="base")
    assert report.tradeoff_figure is not None and report.tradeoff_figure.startswith(b"\x89PNG")
    assert f"![trade-off]({TRADEOFF_FIGURE_FILE})" in report.markdown
    points = {p["variant"]: p for p in report.tradeoff}
    assert set(points) == {"keeps", "drifts"}
    assert points["keeps"]["seeds"] == 2
    assert points["keeps"]["retrieval_delta"] == pytest.approx(40.0)  # 90% against 50%, in points
    assert points["drifts"]["retrieval_delta"] == pytest.approx(50.0)
    by_hand = np.mean(
        [
            scipy.stats.spearmanr(close[lang], gold).statistic - scipy.stats.spearmanr(noisy[lang], gold).statistic
            for lang in close
        ]
    )
    assert points["keeps"]["similarity_delta"] == pytest.approx(100 * by_hand)
    assert points["keeps"]["similarity_low"] > 0  # a real gain in similarity
    assert points["drifts"]["similarity_delta"] == pytest.approx(0.0)
    assert points["drifts"]["similarity_low"] == pytest.approx(0.0) and points["drifts"]["similarity_high"] == pytest.approx(0.0)


def test_a_comparison_of_screened_evaluations_opens_by_saying_it_is_a_screen() -> None:
    note = "tatoeba: at most 150 translation pairs (both directions) per set (seeded sample, seed 0)"
    results = [
        scored("base", {KAZ_ENG: EVEN, TEL_ENG: EVEN}, trained=False, screening=(note,)),
        scored("tr", {KAZ_ENG: NINETY, TEL_ENG: NINETY}, trained=True, screening=(note,)),
    ]
    md = build_comparison(results, baseline="base", untrained_base="base").markdown
    assert md.split("\n\n")[1].startswith("**A screen, not a claim: scored on seeded subsets (tatoeba: at most 150")
    assert "A screen" not in build_comparison([scored("a", {KAZ_ENG: EVEN}), scored("b", {KAZ_ENG: ODD})]).markdown
