"""Changes between two models scored on the same items, with paired bootstrap intervals: what the
evaluation report (tasks/evaluate/report.py) and the sweep comparison (tasks/evaluate/compare.py)
both compute.

Retrieval: the two sides' per-query outcomes (`schema.ITEMS_SCHEMA`) pair up on `schema.ITEM_KEY`
(`paired_differences`); the differences are cut into one `bootstrap.Stratum` per language pair
whose resampling unit is the sentence pair, both directions' queries of row `item` together
(`pair_strata`); a headline (all languages, a language group, the xx-yy pairs, one language)
averages some of those strata with some weights (`headline_strata`), and
`bootstrap.paired_bootstrap` gives its interval. `paired_delta_intervals` does this for every
headline of the report. STS: a set's statistic is a Spearman correlation, recomputed on each
resample of its sentence pairs, which pair up on `schema.STS_ITEM_KEY` (`sts_delta_intervals`).

Items are put in key order before they are resampled, so the same items in any row order give
the same interval for the same seed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import polars as pl
import pyarrow as pa

from tasks.evaluate.benchmarks.registry import in_domain as benchmark_in_domain
from tasks.evaluate.bootstrap import (
    DEFAULT_RESAMPLES,
    BootstrapInterval,
    Stratum,
    paired_bootstrap,
    paired_spearman_mean_bootstrap,
)
from tasks.evaluate.groups import LANGUAGE_GROUPS
from tasks.evaluate.retrieval import XX_YY_GROUP, dataset_pivot
from tasks.evaluate.schema import ITEM_KEY, STS_ITEM_KEY, metric_rows
from tasks.languages import GROUP_PREFIX, is_group_code
from tasks.reporting.tables import pair_label

__all__ = [
    "MEAN",
    "XX_YY_CODE",
    "DeltaInterval",
    "StsDeltaInterval",
    "headline_changes",
    "headline_strata",
    "items_frame",
    "mean_outcomes",
    "pair_strata",
    "paired_delta_intervals",
    "paired_differences",
    "sts_delta_intervals",
]

MEAN = "mean"  # the headline over every language pair (the unweighted mean over languages)
XX_YY_CODE = f"{GROUP_PREFIX}{XX_YY_GROUP}"  # the headline over pairs of two non-pivot languages
ITEM_OUTCOMES = ("correct", "margin")  # what a query's outcome holds besides its key

# How a language group's strata are weighted; see `headline_strata`.
Weighting = Literal["languages", "targets"]
PairStrata = dict[tuple[str, str], Stratum]  # (src_lang, tgt_lang) -> its stratum, in key order


def items_frame(table: pa.Table, what: str) -> pl.DataFrame:
    """An ITEMS_SCHEMA table's key and outcomes; ValueError when it lacks a column or repeats a key."""
    columns = [*ITEM_KEY, *ITEM_OUTCOMES]
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"{what} items table lacks columns {missing}; expected the ITEMS_SCHEMA columns")
    frame = pl.from_arrow(table.select(columns))
    if frame.select(ITEM_KEY).is_duplicated().any():
        first = frame.filter(frame.select(ITEM_KEY).is_duplicated()).row(0, named=True)
        raise ValueError(f"{what} items table has more than one row for { ({k: first[k] for k in ITEM_KEY}) }")
    return frame


def mean_outcomes(tables: Sequence[pa.Table | None]) -> pl.DataFrame | None:
    """Per item, `correct` averaged over the runs (seeds) of one side, keeping items that every run scored.

    None when there is no run or a run has no outcomes: averaging the others would not
    match the side's value, which is the mean over every run."""
    present = [t for t in tables if t is not None]
    if not present or len(present) != len(tables):
        return None
    key = list(ITEM_KEY)
    frames = [pl.from_arrow(t.select([*key, "correct"])).cast({"item": pl.Int64, "correct": pl.Float64}) for t in present]
    if len(frames) == 1:
        return frames[0].sort(key)
    # group_by's output order is not its input's: sort, so what the resampler sees does not vary
    return (
        pl.concat(frames)
        .group_by(key)
        .agg(pl.col("correct").sort().mean(), pl.len().alias("runs"))
        .filter(pl.col("runs") == len(frames))
        .drop("runs")
        .sort(key)
    )


def paired_differences(ours: pl.DataFrame, theirs: pl.DataFrame, outcomes: Sequence[str]) -> pl.DataFrame:
    """Per item scored on both sides, in key order: its ITEM_KEY and, per outcome, ours - theirs (Float64)."""
    key = list(ITEM_KEY)
    joined = ours.join(theirs, on=key, how="inner", suffix="_ref").sort(key)
    return joined.select(*key, *((pl.col(o).cast(pl.Float64) - pl.col(f"{o}_ref").cast(pl.Float64)).alias(o) for o in outcomes))


def pair_strata(paired: pl.DataFrame, outcome: str) -> dict[tuple[str, str], PairStrata]:
    """(benchmark, dataset) -> (src_lang, tgt_lang) -> the pair's differences of `outcome` as one
    stratum, resampled by sentence pair (`item`: both directions' queries of the row drawn together)."""
    strata: dict[tuple[str, str], PairStrata] = {}
    parts = paired.partition_by(["benchmark", "dataset", "src_lang", "tgt_lang"], as_dict=True, maintain_order=True)
    for (benchmark, dataset, src, tgt), part in parts.items():
        strata.setdefault((benchmark, dataset), {})[src, tgt] = Stratum(part[outcome].to_numpy(), part["item"].to_numpy())
    return strata


def headline_strata(
    pairs: Mapping[tuple[str, str], Stratum], lang: str, *, pivot: str | None, weighting: Weighting
) -> list[Stratum]:
    """The strata of one dataset (`pair_strata`) that the headline `lang` averages, weighted so that
    the bootstrap statistic is the headline's own value.

    `lang`: MEAN (every language), XX_YY_CODE (the pairs of two languages other than `pivot`; none
    without a pivot), ``group:<name>`` (the group's languages) or a language. Where `pivot` is
    given, every headline but the xx-yy one keeps to the pairs into the pivot.

    `weighting` is how the table a headline is read from averages a group's languages, which the
    report and the comparison read from different tables:
    * "languages" (the report): the metrics table's group row for the pivot, the unweighted mean
      over the members present; the strata come in the group's language order (which draws of
      the seeded generator go to which stratum, so reports with the same seed stay comparable).
    * "targets" (the comparison): a group column averages the group rows of every target language,
      each the mean over its members, so a stratum weighs 1 / (targets x members of its target);
      the strata come in key order.
    Any other headline weights its strata equally, in key order.
    """
    if lang == XX_YY_CODE:
        return [] if pivot is None else [s for (src, tgt), s in pairs.items() if pivot not in (src, tgt)]
    kept = {pair: s for pair, s in pairs.items() if pivot is None or pair[1] == pivot}
    if not is_group_code(lang):
        return [s for (src, _), s in kept.items() if lang in (MEAN, src)]
    group = LANGUAGE_GROUPS.get(lang.removeprefix(GROUP_PREFIX))
    if group is None:
        return []
    if weighting == "languages":
        by_src = {src: s for (src, _), s in kept.items()}
        return [by_src[member] for member in group.langs if member in by_src]
    members = [(tgt, s) for (src, tgt), s in kept.items() if src in group.langs]
    per_target = Counter(tgt for tgt, _ in members)
    return [replace(s, weight=1.0 / (len(per_target) * per_target[tgt])) for tgt, s in members]


@dataclass(frozen=True)
class DeltaInterval:
    """The change of one headline (or one language) between two models on the same sentences."""

    benchmark: str
    dataset: str
    kind: Literal["all", "group", "xx-yy", "language"]
    label: str  # "all languages", a group name, "xx-yy pairs", or a language / pair
    accuracy: BootstrapInterval  # of accuracy_mean, as a fraction (x100 = percentage points)
    margin: BootstrapInterval | None = None  # of margin_mean (cosine); None for language rows

    @property
    def name(self) -> str:
        return f"{self.benchmark}/{self.dataset}"

    @property
    def in_domain(self) -> bool:
        """Its data are held-out rows of what the encoder is trained on (a benchmark's `in_domain`)."""
        return benchmark_in_domain(self.benchmark)


def paired_delta_intervals(
    items: pa.Table,
    baseline_items: pa.Table,
    metrics: pa.Table | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> list[DeltaInterval]:
    """Per benchmark/dataset: the paired bootstrap interval of the change in accuracy_mean (and
    margin_mean) over all languages, over each language group that has rows in ``metrics``, over
    the xx-yy pairs, and per language (accuracy only).

    A stratum is one language pair with both directions' queries; the statistic is the mean
    over strata of the per-stratum mean difference, i.e. the change of the metrics table's
    group rows (all languages: the mean of the per-language accuracy_mean). The pivot of a
    dataset is the target most pairs share (`retrieval.dataset_pivot`); pairs without it are
    the xx-yy pairs.
    """
    group_rows = [] if metrics is None else [r for r in metric_rows(metrics, "metrics") if is_group_code(r["src_lang"])]
    paired = paired_differences(items_frame(items, "evaluated"), items_frame(baseline_items, "baseline"), ITEM_OUTCOMES)
    accuracies, margins = pair_strata(paired, "correct"), pair_strata(paired, "margin")
    out: list[DeltaInterval] = []
    for (benchmark, dataset), pairs in accuracies.items():
        pivot = dataset_pivot(pairs)
        chosen: list[tuple[Literal["all", "group", "xx-yy"], str, str]] = [
            ("all", "all languages" if pivot else "all pairs", MEAN)
        ]
        groups = {
            r["src_lang"].removeprefix(GROUP_PREFIX)
            for r in group_rows
            if (r["benchmark"], r["dataset"], r["tgt_lang"], r["metric"]) == (benchmark, dataset, pivot, "accuracy_mean")
        }
        chosen += [("group", name, f"{GROUP_PREFIX}{name}") for name in sorted(g for g in groups if g in LANGUAGE_GROUPS)]
        if pivot is not None:
            chosen.append(("xx-yy", f"{XX_YY_GROUP} pairs", XX_YY_CODE))
        for kind, label, lang in chosen:
            strata = headline_strata(pairs, lang, pivot=pivot, weighting="languages")
            if not strata:
                continue
            accuracy = paired_bootstrap(strata, resamples=resamples, seed=seed)
            margin_strata = headline_strata(margins[benchmark, dataset], lang, pivot=pivot, weighting="languages")
            margin = paired_bootstrap(margin_strata, resamples=resamples, seed=seed)
            out.append(DeltaInterval(benchmark, dataset, kind, label, accuracy, margin))
        # per-language rows feed the figure, which plots accuracy only
        for (src, tgt), stratum in sorted(pairs.items()):
            if pivot is None or tgt == pivot:
                label = src if pivot else pair_label(src, tgt)
                accuracy = paired_bootstrap([stratum], resamples=resamples, seed=seed)
                out.append(DeltaInterval(benchmark, dataset, "language", label, accuracy))
    return out


def headline_changes(deltas: Sequence[DeltaInterval], baseline_name: str) -> list[dict[str, Any]]:
    """The headline changes (all languages, each group, the xx-yy pairs; not single languages)
    as plain records for the evaluate manifest's metrics, which `xlembed run` and `evaluate`
    end with: accuracy_mean change and its 95% interval in percentage points."""
    return [
        {
            "benchmark": d.benchmark, "dataset": d.dataset, "kind": d.kind, "label": d.label, "baseline": baseline_name,
            "metric": "accuracy_mean", "unit": "percentage points", "delta": round(d.accuracy.delta * 100, 2),
            "low": round(d.accuracy.low * 100, 2), "high": round(d.accuracy.high * 100, 2), "significant": bool(d.accuracy.significant),
        }
        for d in deltas
        if d.kind != "language" and math.isfinite(d.accuracy.delta)
    ]  # fmt: skip


@dataclass(frozen=True)
class StsDeltaInterval:
    """The change of one STS set's Spearman (or of the mean over a dataset's sets) between two models on the same pairs."""

    benchmark: str
    dataset: str
    label: str  # "all sets" or a set: a language, or "src–tgt" for a cross-lingual set
    spearman: BootstrapInterval


def sts_delta_intervals(
    sts_items: pa.Table, baseline_sts_items: pa.Table, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> list[StsDeltaInterval]:
    """Per STS benchmark/dataset: the paired bootstrap interval of the change in Spearman over the
    mean of its sets ("all sets", when it has several) and per set. Pairs are matched on
    (set, item); each set's sentence pairs are resampled within the set, both models' correlations
    recomputed on the same draw (`bootstrap.paired_spearman_mean_bootstrap`)."""
    key = list(STS_ITEM_KEY)
    ours = pl.from_arrow(sts_items.select([*key, "cosine", "gold"]))
    theirs = pl.from_arrow(baseline_sts_items.select([*key, "cosine"]))
    joined = ours.join(theirs, on=key, how="inner", suffix="_base").sort(key)
    out: list[StsDeltaInterval] = []
    by_dataset = joined.partition_by(["benchmark", "dataset"], as_dict=True, maintain_order=True)
    for (benchmark, dataset), part in by_dataset.items():
        sets = {
            pair: (frame["cosine"].to_numpy(), frame["cosine_base"].to_numpy(), frame["gold"].to_numpy())
            for pair, frame in part.partition_by(["src_lang", "tgt_lang"], as_dict=True, maintain_order=True).items()
            if frame.height >= 2
        }
        if len(sets) > 1:
            out.append(
                StsDeltaInterval(
                    benchmark,
                    dataset,
                    "all sets",
                    paired_spearman_mean_bootstrap(list(sets.values()), resamples=resamples, seed=seed),
                )
            )
        for (src, tgt), arrays in sets.items():
            out.append(
                StsDeltaInterval(
                    benchmark,
                    dataset,
                    src if src == tgt else pair_label(src, tgt),
                    paired_spearman_mean_bootstrap([arrays], resamples=resamples, seed=seed),
                )
            )
    return out
