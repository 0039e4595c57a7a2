"""The sweep comparison report on metrics tables built here, checked against numbers computed by hand."""

from __future__ import annotations

import statistics

import pytest

from tasks.evaluate.compare import Column, VariantResult, build_comparison, headline_columns
from tasks.evaluate.groups import rows_table

TATOEBA = {"kaz_Cyrl": 0.0, "tel_Telu": 0.0}


def metrics(kaz: float, tel: float, sts: float | None = None) -> object:
    rows = [
        {"benchmark": "tatoeba", "dataset": "tatoeba", "src_lang": lang, "tgt_lang": "eng_Latn", "metric": metric, "value": value, "n": 100}
        for lang, value in (("kaz_Cyrl", kaz), ("tel_Telu", tel))
        for metric in ("accuracy_src_tgt", "accuracy_mean")
    ]
    rows.append({"benchmark": "tatoeba", "dataset": "tatoeba", "src_lang": "group:wacse-4", "tgt_lang": "eng_Latn", "metric": "accuracy_mean", "value": (kaz + tel) / 2, "n": 2})
    if sts is not None:
        rows.append({"benchmark": "sts", "dataset": "STS17.en-en", "src_lang": "eng_Latn", "tgt_lang": "eng_Latn", "metric": "spearman", "value": sts, "n": 250})
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
    assert "| 70.0 | +13.5 |" in row
    group_row = next(line for line in md.splitlines() if line.startswith("| awp | 2 |"))
    assert "67.5 ± 3.5 | +11.0 |" in group_row
    tr_row = next(line for line in md.splitlines() if line.startswith("| tr | 2 |"))
    assert "baseline" in tr_row
    assert "failed: RuntimeError: out of memory" in md and "—" in next(line for line in md.splitlines() if line.startswith("| broken "))
    assert "Every variant sets" not in md  # nothing is common to all: train.seed differs, broken has none
    # HTML: escaped, self-contained, delta cells coloured
    assert "&lt;wtr&gt;" in report.html and "<wtr>" not in report.html
    assert '<td class="pos">+13.5</td>' in report.html and "http" not in report.html.replace("http-equiv", "")
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
    report = build_comparison([VariantResult("bucket-5", "bucket-5", {"histogram.bucket": 5}), VariantResult("bucket-10", "bucket-10", {"histogram.bucket": 10})])
    assert report.columns == [] and "No variant has evaluation metrics" in report.markdown
    assert [r["variant"] for r in report.rows] == ["bucket-5", "bucket-10"]
