"""Paired bootstrap intervals: the resampling unit is the sentence pair (both directions' queries
together), the same inputs give byte-identical reports in any row order, and one comparison
shown in two tables of a sweep report has one interval."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import scipy.stats

from tasks.evaluate.bootstrap import Stratum, paired_bootstrap, paired_spearman_bootstrap
from tasks.evaluate.columns import VariantResult
from tasks.evaluate.compare import build_comparison
from tasks.evaluate.groups import LANGUAGE_GROUPS, group_average_rows, rows_table
from tasks.evaluate.paired import paired_delta_intervals
from tasks.evaluate.schema import ITEMS_SCHEMA

PAIRS = 200
RESAMPLES = 2000
MEAN_DEV = "retrieval/corpus-dev/mean/accuracy_mean"


def pair_outcomes(src: str, tgt: str, forward: np.ndarray, backward: np.ndarray) -> pa.Table:
    """ITEMS_SCHEMA rows of one language pair: query i of each direction is sentence pair i."""
    n = forward.size
    return pa.table(
        {
            "benchmark": ["retrieval"] * 2 * n,
            "dataset": ["corpus-dev"] * 2 * n,
            "src_lang": [src] * 2 * n,
            "tgt_lang": [tgt] * 2 * n,
            "direction": ["src_tgt"] * n + ["tgt_src"] * n,
            "item": np.tile(np.arange(n, dtype=np.int32), 2),
            "correct": np.concatenate([forward, backward]),
            "margin": np.zeros(2 * n, dtype=np.float32),
        },
        schema=ITEMS_SCHEMA,
    )


def metrics_of(items: pa.Table) -> pa.Table:
    per_pair = (
        pl.from_arrow(items)
        .group_by(["benchmark", "dataset", "src_lang", "tgt_lang"], maintain_order=True)
        .agg(pl.col("correct").mean().alias("value"), (pl.len() // 2).alias("n"))
    )
    rows = [r | {"metric": "accuracy_mean"} for r in per_pair.iter_rows(named=True)]
    return rows_table(
        group_average_rows(sorted(rows, key=lambda r: (r["src_lang"], r["tgt_lang"])), [LANGUAGE_GROUPS["wacse-4"]])
    )


def hand_percentiles(per_unit: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The percentile interval of the mean of `per_unit` values resampled with numpy directly
    (the same generator, seed and draw shape as paired_bootstrap uses for one stratum)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, per_unit.size, size=(RESAMPLES, per_unit.size))
    low, high = np.percentile(per_unit[picks].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


def correlated_case() -> tuple[pa.Table, pa.Table, np.ndarray]:
    """Base wrong everywhere; trained right on 60% of the sentence pairs, in both directions at
    once: the two queries of a pair move together, so they are one draw, not two."""
    right = np.random.default_rng(7).random(PAIRS) < 0.6
    wrong = np.zeros(PAIRS, dtype=bool)
    trained = pair_outcomes("kaz_Cyrl", "eng_Latn", right, right)
    base = pair_outcomes("kaz_Cyrl", "eng_Latn", wrong, wrong)
    return trained, base, right.astype(np.float64)


def test_pair_level_interval_matches_a_hand_computation_and_is_wider_than_query_level() -> None:
    trained, base, per_pair = correlated_case()
    delta = paired_delta_intervals(trained, base)[0].accuracy
    low, high = hand_percentiles(per_pair)  # each sentence pair's difference: the mean of its two queries'
    assert (delta.low, delta.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert (delta.items, delta.units, delta.strata) == (2 * PAIRS, PAIRS, 1)
    # Resampling the 400 queries independently treats them as 400 draws: about 1/sqrt(2) as wide.
    # The analytic width of the pair-level interval is 2 x 1.96 x sqrt(p(1-p)/pairs).
    query_level = paired_bootstrap([np.concatenate([per_pair, per_pair])], resamples=RESAMPLES)
    p = per_pair.mean()
    analytic = 2 * 1.96 * np.sqrt(p * (1 - p) / PAIRS)
    assert delta.high - delta.low == pytest.approx(analytic, rel=0.08)
    assert (delta.high - delta.low) / (query_level.high - query_level.low) == pytest.approx(np.sqrt(2), rel=0.1)

    # the sweep comparison resamples the same unit with the same function: the same interval
    report = build_comparison(
        [
            VariantResult("base", "base", {}, {}, metrics_of(base), "ab" * 32, items=base),
            VariantResult("trained", "trained", {}, {}, metrics_of(trained), "cd" * 32, items=trained),
        ],
        baseline="base",
        columns=[MEAN_DEV],
    )
    found = next(r for r in report.intervals if r["row"] == "trained")
    assert (found["low"], found["high"]) == (pytest.approx(100 * low, abs=1e-5), pytest.approx(100 * high, abs=1e-5))


def test_units_spanning_unequal_item_counts_are_a_ratio_of_sums() -> None:
    # unit 0 holds two items (+1, +1), unit 1 one item (0): the observed mean is 2/3, not the mean of unit means
    interval = paired_bootstrap([Stratum(np.array([1.0, 0.0, 1.0]), np.array([0, 1, 0]))], resamples=500)
    assert interval.delta == pytest.approx(2 / 3) and (interval.items, interval.units) == (3, 2)
    # the order the items come in changes nothing
    again = paired_bootstrap([Stratum(np.array([0.0, 1.0, 1.0]), np.array([1, 0, 0]))], resamples=500)
    assert again == interval
    with pytest.raises(ValueError, match="stratum 0 has 3 differences but 2 units"):
        paired_bootstrap([Stratum(np.zeros(3), np.arange(2))])
    with pytest.raises(ValueError, match="weights must be positive"):
        paired_bootstrap([Stratum(np.zeros(3), weight=0.0)])


def seed_sweep(rng: np.random.Generator, shuffle: bool) -> list[VariantResult]:
    """An untrained base variant and a three-seed trained group whose runs carry the base's
    outcomes scored beside them; `shuffle`: every items table in another row order."""

    def shuffled(table: pa.Table) -> pa.Table:
        return table.take(rng.permutation(table.num_rows)) if shuffle else table

    def outcomes(share: float, seed: int) -> pa.Table:
        draw = np.random.default_rng(seed)
        langs = (("kaz_Cyrl", "eng_Latn"), ("tel_Telu", "eng_Latn"), ("kat_Geor", "eng_Latn"))
        return pa.concat_tables([pair_outcomes(s, t, draw.random(PAIRS) < share, draw.random(PAIRS) < share) for s, t in langs])

    base_items = outcomes(0.5, 1)
    out = [VariantResult("base", "base", {}, {}, metrics_of(base_items), "ab" * 32, items=shuffled(base_items), trained=False)]
    for seed in (1, 2, 3):
        items = outcomes(0.55, 10 + seed)
        out.append(
            VariantResult(
                f"tr_seed-{seed}", "tr", {"train.seed": seed}, {"train.seed": seed}, metrics_of(items), "cd" * 32,
                items=shuffled(items), base_metrics=metrics_of(base_items), base_items=shuffled(base_items), trained=True,
            )
        )  # fmt: skip
    return out


@pytest.mark.slow
def test_regenerating_a_sweep_report_gives_identical_bytes_in_any_row_order() -> None:
    first = build_comparison(seed_sweep(np.random.default_rng(0), shuffle=False), baseline="base", untrained_base="base")
    again = build_comparison(seed_sweep(np.random.default_rng(0), shuffle=False), baseline="base", untrained_base="base")
    shuffled = build_comparison(seed_sweep(np.random.default_rng(1), shuffle=True), baseline="base", untrained_base="base")
    assert first.markdown == again.markdown == shuffled.markdown
    assert first.html == again.html == shuffled.html
    assert first.intervals == shuffled.intervals and first.figure == shuffled.figure


def test_both_tables_of_a_sweep_report_show_one_interval_for_one_comparison() -> None:
    report = build_comparison(seed_sweep(np.random.default_rng(2), shuffle=True), baseline="base", untrained_base="base")
    over_seeds = next(r for r in report.intervals if (r["row"], r["against"], r["column"]) == ("tr", "baseline", MEAN_DEV))
    against_base = next(
        r for r in report.intervals if (r["row"], r["against"], r["column"]) == ("tr", "untrained base", MEAN_DEV)
    )
    # the base variant once, or the same base scored beside each of the three runs: the same outcomes
    assert (over_seeds["seeds"], against_base["seeds"]) == ({"row": 3, "reference": 1}, {"row": 3, "reference": 3})
    assert (over_seeds["delta"], over_seeds["low"], over_seeds["high"]) == (
        against_base["delta"],
        against_base["low"],
        against_base["high"],
    )
    text = f"[{over_seeds['low']:+.1f}, {over_seeds['high']:+.1f}]".replace("[", "\\[").replace("]", "\\]")
    over_section, base_section = report.markdown.split("## Against the untrained base")
    assert text in over_section.split("## Over seeds")[1] and text in base_section


def test_evaluate_report_intervals_do_not_depend_on_row_order() -> None:
    trained, base, _ = correlated_case()
    rng = np.random.default_rng(3)
    ordered = paired_delta_intervals(trained, base)
    shuffled = paired_delta_intervals(trained.take(rng.permutation(trained.num_rows)), base.take(rng.permutation(base.num_rows)))
    assert ordered == shuffled


@pytest.mark.slow
def test_spearman_difference_is_resampled_by_sentence_pair() -> None:
    rng = np.random.default_rng(5)
    gold = rng.uniform(0, 5, 300)
    good = gold + rng.normal(0, 1.0, 300)
    worse = gold + rng.normal(0, 2.5, 300)
    interval = paired_spearman_bootstrap(good, worse, gold, resamples=RESAMPLES)
    expected = scipy.stats.spearmanr(good, gold).statistic - scipy.stats.spearmanr(worse, gold).statistic
    assert (
        interval.delta == pytest.approx(expected, abs=1e-12) and interval.significant and interval.low < expected < interval.high
    )
    # by hand: the same draws of sentence pairs (in the function's canonical row order), both correlations per draw
    order = np.lexsort((gold, worse, good))
    g, a, b = gold[order], good[order], worse[order]
    picks = np.random.default_rng(0).integers(0, 300, size=(RESAMPLES, 300))
    by_hand = [scipy.stats.spearmanr(a[p], g[p]).statistic - scipy.stats.spearmanr(b[p], g[p]).statistic for p in picks]
    low, high = np.percentile(by_hand, [2.5, 97.5])
    assert (interval.low, interval.high) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    # the same model on both sides: a zero-width interval at zero, not significant
    same = paired_spearman_bootstrap(good, good, gold, resamples=200)
    assert (same.delta, same.low, same.high, same.significant) == (0.0, 0.0, 0.0, False)
