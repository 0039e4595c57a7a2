"""The comparison report of a sweep: one row per variant, deltas against a baseline, mean ± std over seeds,
and paired bootstrap 95% intervals over sentences for the retrieval accuracies.

Input: per variant, its evaluate metrics table (`tasks.evaluate.schema.METRICS_SCHEMA`) or
None when it has none (a failed variant, a pipeline without evaluate), and, when the
evaluation recorded them, its per-query outcomes (`tasks.evaluate.schema.ITEMS_SCHEMA`) and
those of the untrained base scored beside it. Output: Markdown, one self-contained HTML
page (with a PNG of the intervals), plain rows for a Prefect table artifact and the
intervals as plain dicts.

Columns are metric values picked from each table by a spec `benchmark/dataset/language/metric`:
`language` is a FLORES-200 code, `group:<name>` (a group average row) or `mean` (the
unweighted mean over every language row, groups left out). Where a dataset also scored pairs
of two non-pivot languages (`pairs = "all"`: it has a `group:xx-yy` row), every other column
keeps to the pivot pairs, as the evaluation's own headline does, and `group:xx-yy` is the
mean over the other pairs. Without explicit columns the
headline of every (benchmark, dataset) is shown: its main metric (each benchmark's
`main_metric`, tasks/evaluate/benchmarks/: accuracy_mean for Tatoeba and retrieval, F1 for
BUCC, Spearman for STS, accuracy for XNLI, main_score for MTEB) as group averages, then as
the mean over languages.

Deltas are `value - baseline` in the metric's display units (percentage points for
percentages, x100 for correlations). The baseline is a variant, or a seed group: then it is
the group's mean. Variants that differ only in their seed keys form a group; a group with
several seeds gets a row in the "over seeds" table: mean ± sample standard deviation
(ddof = 1) over its seeds, and the delta of the mean.

Intervals (the `item_metric` of benchmarks with per-query outcomes only: `accuracy_mean`
of tatoeba and retrieval): items of the two sides are paired on `schema.ITEM_KEY`
(tasks/evaluate/paired.py); a side with several runs (seeds) is averaged per item first; one stratum
per language pair, whose sentence pairs (both directions' queries of row `item` together) are
resampled by `tasks.evaluate.bootstrap.paired_bootstrap`; each stratum is weighted so that the
statistic is the column's own average (a group row averages its members per target language,
the column averages those rows). Items are put in key order before they are resampled, and a
comparison with the same paired differences is computed once, so the same inputs give the same
interval in every table of the report and on every run. A delta is
significant when its interval excludes zero; otherwise it is within noise. A side without
outcomes (an evaluation older than them) gets no interval. Nothing here knows about
Prefect or the artifact store.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from storage.keys import canonical_json
from tasks.evaluate.benchmarks.registry import headline_metric, in_domain, item_metric, screening_sentence
from tasks.evaluate.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, BootstrapInterval, Stratum, paired_bootstrap
from tasks.evaluate.figures import INTERVALS_FIGURE_FILE, IntervalRow, intervals_figure
from tasks.evaluate.paired import MEAN, XX_YY_CODE, headline_strata, mean_outcomes, pair_strata, paired_differences
from tasks.evaluate.retrieval import dataset_pivot
from tasks.evaluate.tradeoff import UnitChange, tradeoff_section
from tasks.languages import GROUP_PREFIX, is_group_code
from tasks.reporting.tables import (
    CSS,
    MISSING,
    Cell,
    Table,
    format_delta,
    format_interval,
    format_value,
    html_escape,
    html_table,
    md_escape,
    md_table,
    metric_scale,
)

__all__ = [
    "Column",
    "Comparison",
    "VariantResult",
    "build_comparison",
    "column_value",
    "headline_columns",
]

NO_INTERVAL = "no CI"
SIGNIFICANT = "*"
ONE_SEED_NOTE = "one seed: differences are not claims"


@dataclass(frozen=True)
class Column:
    benchmark: str
    dataset: str
    lang: str  # FLORES code, "group:<name>" or "mean"
    metric: str

    @property
    def spec(self) -> str:
        return f"{self.benchmark}/{self.dataset}/{self.lang}/{self.metric}"

    @property
    def label(self) -> str:
        where = self.dataset if self.dataset == self.benchmark else f"{self.benchmark}/{self.dataset}"
        lang = "all languages" if self.lang == MEAN else self.lang.removeprefix(GROUP_PREFIX)
        return f"{where} · {lang} · {self.metric}"

    @property
    def has_items(self) -> bool:
        """Whether per-query outcomes make up this column (so it can get a bootstrap interval)."""
        return item_metric(self.benchmark) == self.metric

    @classmethod
    def parse(cls, spec: str) -> Column:
        parts = spec.split("/")
        if len(parts) != 4 or not all(parts):
            raise ValueError(
                f"report column {spec!r}: expected benchmark/dataset/language/metric, e.g. retrieval/corpus-dev/group:wacse-4/accuracy_mean"
            )
        return cls(*parts)


@dataclass(frozen=True)
class VariantResult:
    name: str
    group: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    seeds: Mapping[str, Any] = field(default_factory=dict)
    metrics: pa.Table | None = None
    metrics_key: str | None = None
    error: str | None = None
    items: pa.Table | None = None  # per-query outcomes of the scored model (ITEMS_SCHEMA); None: no intervals
    base_metrics: pa.Table | None = None  # the untrained base, scored in the same evaluation (METRICS_SCHEMA)
    base_items: pa.Table | None = None  # ... and its per-query outcomes
    trained: bool | None = None  # False: the pipeline trains nothing (the variant is an untrained model itself)
    sts_items: pa.Table | None = None  # per-pair STS cosines (STS_ITEMS_SCHEMA), for the trade-off figure
    screening: tuple[str, ...] = ()  # its evaluation scored seeded subsets (EvaluateConfig.screening_notes)


@dataclass(frozen=True)
class Comparison:
    markdown: str
    html: str
    rows: list[dict[str, Any]]  # one per variant, display units, for a Prefect table artifact
    columns: list[Column]
    values: dict[str, dict[str, float | None]]  # variant -> column spec -> value (raw units)
    seed_stats: dict[str, dict[str, tuple[float, float | None, int]]]  # group -> spec -> (mean, std, n)
    baseline: dict[str, float | None] | None  # column spec -> baseline value (raw units)
    # One per (row, reference, retrieval-accuracy column), display units (percentage points):
    # against ("baseline" | "untrained base"), row, reference, column, delta, low, high,
    # significant (None: no interval), seeds {row, reference}, items, strata, reason.
    intervals: list[dict[str, Any]] = field(default_factory=list)
    untrained: dict[str, float | None] | None = None  # column spec -> the untrained base's value (raw units)
    figure: bytes | None = None  # PNG (INTERVALS_FIGURE_FILE): deltas and intervals against the baseline
    tradeoff_figure: bytes | None = None  # PNG (TRADEOFF_FIGURE_FILE): retrieval against monolingual similarity
    tradeoff: list[dict[str, Any]] = field(default_factory=list)  # its points, display units


# ---------------------------------------------------------------------------- values


def _metric_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.select(["benchmark", "dataset", "src_lang", "tgt_lang", "metric", "value"]).to_pylist()


def headline_columns(tables: Sequence[pa.Table]) -> list[Column]:
    """Per (benchmark, dataset), in first-seen order: its main metric's group rows, then the mean."""
    found: dict[tuple[str, str], dict[str, list[str]]] = {}
    for table in tables:
        for row in _metric_rows(table):
            entry = found.setdefault((row["benchmark"], row["dataset"]), {"metrics": [], "groups": []})
            if row["metric"] not in entry["metrics"]:
                entry["metrics"].append(row["metric"])
    out = []
    for (benchmark, dataset), entry in found.items():
        metric = headline_metric(benchmark, entry["metrics"])
        groups: list[str] = []
        for table in tables:
            for row in _metric_rows(table):
                if (row["benchmark"], row["dataset"], row["metric"]) == (benchmark, dataset, metric) and is_group_code(
                    row["src_lang"]
                ):
                    if row["src_lang"] not in groups:
                        groups.append(row["src_lang"])
        out += [Column(benchmark, dataset, g, metric) for g in groups]
        out.append(Column(benchmark, dataset, MEAN, metric))
    return out


def _xx_yy_pivots(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str | None]:
    """(benchmark, dataset) -> pivot, for each dataset that also scored xx-yy pairs (it has a
    `group:xx-yy` row); the pivot is None where `dataset_pivot` cannot tell one."""
    scored = {(r["benchmark"], r["dataset"]) for r in rows if r["src_lang"] == XX_YY_CODE}
    return {
        key: dataset_pivot(
            (r["src_lang"], r["tgt_lang"])
            for r in rows
            if (r["benchmark"], r["dataset"]) == key and not is_group_code(r["src_lang"])
        )
        for key in scored
    }


def column_value(rows: Sequence[Mapping[str, Any]], column: Column) -> float | None:
    """The column's value in one metrics table (mean over matching rows); None if it has none.

    In a dataset with xx-yy pairs, a language, group or mean column keeps to the pivot pairs
    (a group's rows per other target language and the xx-yy pairs are not its members)."""
    pivot = None if column.lang == XX_YY_CODE else _xx_yy_pivots(rows).get((column.benchmark, column.dataset))
    values = [
        r["value"]
        for r in rows
        if r["benchmark"] == column.benchmark
        and r["dataset"] == column.dataset
        and r["metric"] == column.metric
        and (not is_group_code(r["src_lang"]) if column.lang == MEAN else r["src_lang"] == column.lang)
        and (pivot is None or r["tgt_lang"] == pivot)
    ]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def _difference(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base


# ---------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class _Side:
    """One side of a comparison: a variant, a seed group (its runs averaged) or an untrained base."""

    name: str
    values: Mapping[str, float | None]  # column spec -> value (the mean over runs)
    items: pl.DataFrame | None  # schema.ITEM_KEY + correct (mean over runs); None: a run has no outcomes
    runs: int


class _Intervals:
    """Bootstrap intervals of one side against another, each pair computed once; and their records."""

    def __init__(self, columns: Sequence[Column], resamples: int, xx_yy_pivots: Mapping[tuple[str, str], str | None]) -> None:
        self.columns = [c for c in columns if c.has_items]
        self.xx_yy_pivots = xx_yy_pivots
        self.resamples = resamples
        self.records: list[dict[str, Any]] = []
        self._done: dict[tuple[str, int, str, int, str], dict[str, BootstrapInterval | None]] = {}
        self._computed: dict[str, BootstrapInterval] = {}  # digest of the strata -> their interval

    def get(self, row: _Side, ref: _Side, against: str) -> dict[str, BootstrapInterval | None]:
        """Column spec -> interval of row - ref in raw units (None: no paired outcomes)."""
        ident = (row.name, row.runs, ref.name, ref.runs, against)  # a variant and a seed group may share a name
        if ident in self._done:
            return self._done[ident]
        paired = None
        if self.columns and row.items is not None and ref.items is not None:
            paired = paired_differences(row.items, ref.items, ["correct"])
        by_dataset = pair_strata(paired, "correct") if paired is not None else {}
        out: dict[str, BootstrapInterval | None] = {}
        for column in self.columns:
            strata = headline_strata(
                by_dataset.get((column.benchmark, column.dataset), {}),
                column.lang,
                pivot=self.xx_yy_pivots.get((column.benchmark, column.dataset)),
                weighting="targets",  # a group column is the mean of the group's rows over target languages
            )
            interval = self._bootstrap(strata) if strata else None
            out[column.spec] = interval
            self.records.append(self._record(row, ref, against, column, interval, paired is not None))
        self._done[ident] = out
        return out

    def _bootstrap(self, strata: Sequence[Stratum]) -> BootstrapInterval:
        """paired_bootstrap, once per distinct set of strata: two tables comparing the same
        outcomes (a seed group against the baseline variant, and against the untrained base
        that variant is) show one interval, not two draws of it."""
        digest = hashlib.sha256()
        for stratum in strata:
            for array in (
                np.ascontiguousarray(stratum.diffs, dtype=np.float64),
                np.ascontiguousarray(stratum.units, dtype=np.int64),
            ):
                digest.update(len(array).to_bytes(8, "little"))
                digest.update(array.tobytes())
            digest.update(np.float64(stratum.weight).tobytes())
        key = digest.hexdigest()
        if key not in self._computed:
            self._computed[key] = paired_bootstrap(strata, resamples=self.resamples)
        return self._computed[key]

    @staticmethod
    def _record(
        row: _Side, ref: _Side, against: str, column: Column, interval: BootstrapInterval | None, had_items: bool
    ) -> dict[str, Any]:
        scale = metric_scale(column.metric)
        value, base = row.values.get(column.spec), ref.values.get(column.spec)
        record: dict[str, Any] = {
            "against": against,
            "row": row.name,
            "reference": ref.name,
            "column": column.spec,
            "units": "percentage points" if scale == 100.0 else "metric units",
            "delta": None if (delta := _difference(value, base)) is None else round(delta * scale, 6),
            "low": None,
            "high": None,
            "significant": None,
            "seeds": {"row": row.runs, "reference": ref.runs},
        }
        if interval is None:
            record["reason"] = (
                "no paired items for this column"
                if had_items
                else "no per-sentence outcomes (evaluated before they were recorded)"
            )
            return record
        shown = interval.scaled(scale)
        record |= {
            "bootstrap_delta": round(shown.delta, 6),  # the mean paired difference the interval is around
            "low": round(shown.low, 6),
            "high": round(shown.high, 6),
            "significant": interval.significant,
            "confidence": interval.confidence,
            "items": interval.items,
            "strata": interval.strata,
        }
        return record


# ---------------------------------------------------------------------------- report


def _varied_settings(results: Sequence[VariantResult]) -> tuple[list[str], dict[str, Any]]:
    """Keys whose value differs between variants, and the settings all variants share."""
    keys = list(dict.fromkeys(k for r in results for k in r.overrides))
    varied, common = [], {}
    for key in keys:
        seen = {canonical_json(r.overrides[key]) if key in r.overrides else "<unset>" for r in results}
        if len(seen) > 1:
            varied.append(key)
        else:
            common[key] = results[0].overrides[key]
    return varied, common


def _setting(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def _delta_cell(
    value: float | None,
    base: float | None,
    column: Column,
    *,
    is_baseline: bool,
    interval: BootstrapInterval | None = None,
    reference_label: str = "baseline",
) -> Cell:
    """The delta, with its interval where the column has one: coloured only when it excludes zero."""
    if is_baseline:
        return Cell(reference_label, "missing")
    if value is None or base is None:
        return Cell(MISSING, "missing")
    text = format_delta(value - base, column.metric)
    if interval is not None:
        bounds = format_interval(interval.low, interval.high, column.metric)
        if interval.significant:
            return Cell(f"{text} {bounds} {SIGNIFICANT}", "pos" if interval.low > 0 else "neg")
        return Cell(f"{text} {bounds}", "zero")
    kind = "zero" if text.lstrip("+-").strip("0.") == "" else ("pos" if text.startswith("+") else "neg")
    return Cell(f"{text} ({NO_INTERVAL})" if column.has_items else text, kind)


def _spread(std: float | None, metric: str) -> str:
    if std is None:
        return ""
    scale = metric_scale(metric)
    return f" ± {std * scale:.1f}" if scale != 1.0 else f" ± {std:.3f}"


def build_comparison(
    results: Sequence[VariantResult],
    *,
    baseline: str | None = None,
    title: str = "Sweep comparison",
    columns: Sequence[str] | None = None,
    untrained_base: str | None = None,
    single_seed: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    tradeoff_column: str | None = None,
) -> Comparison:
    """Render the comparison of `results` (in the order given).

    `untrained_base`: a variant whose pipeline trains nothing, shown as the untrained base;
    without it, the base scored beside the first trained variant that has one.
    `single_seed`: the grid opted out of seeds; the title says its differences are not claims.
    `tradeoff_column`: the retrieval column (a spec) the trade-off figure puts on x; default: the
    first column with per-query outcomes (tasks/evaluate/tradeoff.py)."""
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names repeat: {names}")
    if untrained_base is not None and untrained_base not in names:
        raise ValueError(f"untrained base {untrained_base!r} is not a variant: {names}")
    tables = [r.metrics for r in results if r.metrics is not None]
    chosen = [Column.parse(c) for c in columns] if columns else headline_columns(tables)
    rows_of = {r.name: _metric_rows(r.metrics) if r.metrics is not None else None for r in results}
    values = {
        r.name: {c.spec: (column_value(rows_of[r.name], c) if rows_of[r.name] is not None else None) for c in chosen}
        for r in results
    }
    xx_yy_pivots: dict[tuple[str, str], str | None] = {}
    for rows in [
        *(v for v in rows_of.values() if v is not None),
        *(_metric_rows(r.base_metrics) for r in results if r.base_metrics is not None),
    ]:
        xx_yy_pivots |= _xx_yy_pivots(rows)
    intervals = _Intervals(chosen, resamples, xx_yy_pivots)

    members: dict[str, list[VariantResult]] = {}
    for r in results:
        members.setdefault(r.group, []).append(r)
    seed_stats: dict[str, dict[str, tuple[float, float | None, int]]] = {}
    for group, rs in members.items():
        if len(rs) < 2 or not any(r.seeds for r in rs):
            continue
        stats = {}
        for c in chosen:
            present = [values[r.name][c.spec] for r in rs if values[r.name][c.spec] is not None]
            if present:
                stats[c.spec] = (
                    math.fsum(present) / len(present),
                    statistics.stdev(present) if len(present) > 1 else None,
                    len(present),
                )
        seed_stats[group] = stats

    def side(name: str, runs: Sequence[VariantResult]) -> _Side:
        return _Side(
            name,
            {c.spec: _mean([values[r.name][c.spec] for r in runs]) for c in chosen},
            mean_outcomes([r.items for r in runs]),
            len(runs),
        )

    variant_side = {r.name: side(r.name, [r]) for r in results}
    group_side = {group: side(group, members[group]) for group in seed_stats}
    # What the report compares: a seed group as one (its seeds averaged), any other variant alone.
    units: list[tuple[_Side, list[VariantResult]]] = []
    for group, rs in members.items():
        units += [(group_side[group], rs)] if group in seed_stats else [(variant_side[r.name], [r]) for r in rs]

    base_values: dict[str, float | None] | None = None
    base_members: list[str] = []
    base_side: _Side | None = None
    if baseline is not None:
        if baseline in values:
            base_members = [baseline]
        elif baseline in members:
            base_members = [r.name for r in members[baseline]]
        else:
            raise ValueError(f"baseline {baseline!r} is neither a variant nor a seed group: {names}")
        base_values = {c.spec: _mean([values[n][c.spec] for n in base_members]) for c in chosen}
        base_side = side(baseline, [r for r in results if r.name in base_members])

    varied, common = _varied_settings(results)
    show_group = bool(seed_stats)

    header = ["Variant"] + (["Seed group"] if show_group else []) + (["Settings"] if varied else [])
    numeric = [False] * len(header)
    for c in chosen:
        header.append(c.label)
        numeric.append(True)
        if base_values is not None:
            header.append(f"Δ ({c.metric})" + (" [95% CI]" if c.has_items else ""))
            numeric.append(True)
    header += ["metrics artifact", "status"]
    numeric += [False, False]

    table_rows: list[list[Cell]] = []
    plain_rows: list[dict[str, Any]] = []
    for r in results:
        line = [Cell(r.name)] + ([Cell(r.group)] if show_group else [])
        settings = ", ".join(f"{k}={_setting(r.overrides[k])}" for k in varied if k in r.overrides)
        if varied:
            line.append(Cell(settings))
        plain: dict[str, Any] = {"variant": r.name, "group": r.group, "settings": settings}
        is_base = base_members == [r.name]
        found = intervals.get(variant_side[r.name], base_side, "baseline") if base_side is not None and not is_base else {}
        for c in chosen:
            value = values[r.name][c.spec]
            line.append(Cell(format_value(value, c.metric), "num" if value is not None else "missing"))
            plain[c.label] = None if value is None else round(value * metric_scale(c.metric), 3)
            if base_values is not None:
                interval = found.get(c.spec)
                cell = _delta_cell(value, base_values[c.spec], c, is_baseline=is_base, interval=interval)
                line.append(cell)
                both = not is_base and value is not None and base_values[c.spec] is not None
                plain[f"Δ {c.label}"] = format_delta(value - base_values[c.spec], c.metric) if both else cell.text
                if interval is not None:
                    plain[f"Δ {c.label} 95% CI"] = format_interval(interval.low, interval.high, c.metric)
                    plain[f"Δ {c.label} significant"] = interval.significant
        status = "ok" if r.error is None else f"failed: {r.error}"
        line += [Cell(r.metrics_key[:12] if r.metrics_key else MISSING, "text" if r.metrics_key else "missing"), Cell(status)]
        plain |= {"metrics artifact": r.metrics_key or "", "status": status}
        table_rows.append(line)
        plain_rows.append(plain)
    variant_table = Table(header, table_rows, numeric)

    seed_table = None
    if seed_stats:
        s_header = ["Seed group", "seeds"]
        s_numeric = [False, True]
        for c in chosen:
            s_header.append(f"{c.label} (mean ± std)")
            s_numeric.append(True)
            if base_values is not None:
                s_header.append(f"Δ mean ({c.metric})" + (" [95% CI]" if c.has_items else ""))
                s_numeric.append(True)
        s_rows = []
        for group, stats in seed_stats.items():
            is_base = sorted(base_members) == sorted(m.name for m in members[group])
            found = intervals.get(group_side[group], base_side, "baseline") if base_side is not None and not is_base else {}
            line = [Cell(group), Cell(str(len(members[group])), "num")]
            for c in chosen:
                stat = stats.get(c.spec)
                if stat is None:
                    line.append(Cell(MISSING, "missing"))
                else:
                    mean, std, _ = stat
                    line.append(Cell(format_value(mean, c.metric) + _spread(std, c.metric), "num"))
                if base_values is not None:
                    mean_value = stat[0] if stat else None
                    line.append(_delta_cell(mean_value, base_values[c.spec], c, is_baseline=is_base, interval=found.get(c.spec)))
            s_rows.append(line)
        seed_table = Table(s_header, s_rows, s_numeric)

    untrained, untrained_table, untrained_note, changes = _untrained_section(
        results, units, chosen, values, untrained_base, intervals
    )
    reference = next((r for r in results if r.name == untrained_base), None)
    tradeoff = tradeoff_section(chosen, changes, reference.sts_items if reference is not None else None, tradeoff_column)

    # The figure: each unit against the baseline, for the columns with intervals.
    figure = None
    if base_side is not None and intervals.columns:
        plotted: list[IntervalRow] = []
        for unit, rs in units:
            if sorted(r.name for r in rs) == sorted(base_members):
                continue
            deltas = {c.spec: _difference(unit.values[c.spec], base_values[c.spec]) for c in intervals.columns}
            plotted.append((unit.name, deltas, intervals.get(unit, base_side, "baseline")))
        drawn = [c for c in intervals.columns if any(found.get(c.spec) is not None for _, _, found in plotted)]
        if drawn:
            figure = intervals_figure(drawn, plotted)

    ok = sum(1 for r in results if r.error is None)
    intro = f"{len(results)} variants ({ok} ran to the end)"
    if baseline is not None:
        intro += f"; Δ columns compare with {'seed group' if len(base_members) > 1 else 'variant'} {baseline}"
        if len(base_members) > 1:
            intro += " (the mean over its seeds)"
    intro += (
        ". Accuracy, precision, recall and F1 in %, correlations ×100; Δ in the same units (percentage points for percentages)."
    )
    if intervals.columns and (base_side is not None or untrained_table is not None):
        intro += (
            f" [low, high]: paired bootstrap {DEFAULT_CONFIDENCE:.0%} interval of Δ over sentence pairs (both directions' queries"
            f" of a pair drawn together; {resamples} resamples within each language pair; a side with several seeds is averaged per sentence first, the spread over seeds is the ± of the"
            f" seed table). {SIGNIFICANT} marks a Δ whose interval excludes zero; any other Δ is within noise."
            f" {NO_INTERVAL}: an evaluation without per-sentence outcomes (evaluated before they were recorded)."
        )
    heading = title + (f" ({ONE_SEED_NOTE})" if single_seed else "")
    md = [f"# {md_escape(heading)}", ""]
    ht = [f"<h1>{html_escape(heading)}</h1>"]
    screening = list(dict.fromkeys(note for r in results for note in r.screening))
    if screening:  # before anything else: these numbers choose what to confirm, they prove nothing
        line = screening_sentence(screening)
        md += [f"**{md_escape(line)}**", ""]
        ht.append(f"<p><strong>{html_escape(line)}</strong></p>")
    md += [md_escape(intro), ""]
    ht.append(f'<p class="note">{html_escape(intro)}</p>')
    if common:
        shared = "; ".join(f"{k} = {_setting(v)}" for k, v in common.items())
        md += [f"Every variant sets: {md_escape(shared)}", ""]
        ht.append(f'<p class="note">Every variant sets: {html_escape(shared)}</p>')
    md += ["## Variants", "", md_table(variant_table), ""]
    ht += ["<h2>Variants</h2>", html_table(variant_table)]
    if seed_table is not None:
        md += [
            "## Over seeds",
            "",
            md_escape("Variants that differ only in their seed keys, grouped: mean ± sample standard deviation over the seeds."),
            "",
            md_table(seed_table),
            "",
        ]
        ht += [
            "<h2>Over seeds</h2>",
            '<p class="note">Variants that differ only in their seed keys, grouped: mean ± sample standard deviation over the seeds.</p>',
            html_table(seed_table),
        ]
    if untrained_table is not None:
        md += ["## Against the untrained base", "", md_escape(untrained_note), "", md_table(untrained_table), ""]
        ht += [
            "<h2>Against the untrained base</h2>",
            f'<p class="note">{html_escape(untrained_note)}</p>',
            html_table(untrained_table),
        ]
    if tradeoff is not None:
        md += tradeoff.markdown
        ht += tradeoff.html
    if figure is not None:
        import base64

        caption = (
            f"Δ against the baseline {baseline} with its paired bootstrap {DEFAULT_CONFIDENCE:.0%} interval over sentences, per column:"
            " green or red where the interval excludes zero, grey within noise, hollow without an interval."
        )
        md += [
            "## Intervals against the baseline",
            "",
            f"![Δ and 95% intervals against the baseline]({INTERVALS_FIGURE_FILE})",
            "",
            f"*{md_escape(caption)}*",
            "",
        ]
        data = base64.b64encode(figure).decode("ascii")
        ht += [
            "<h2>Intervals against the baseline</h2>",
            f'<figure><img src="data:image/png;base64,{data}" alt="Δ and 95% intervals against the baseline">'
            f"<figcaption>{html_escape(caption)}</figcaption></figure>",
        ]
    if not chosen:
        md += ["No variant has evaluation metrics (no evaluate stage, or every variant failed).", ""]
        ht.append("<p>No variant has evaluation metrics (no evaluate stage, or every variant failed).</p>")
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html_escape(heading)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(ht) + "\n</body>\n</html>\n"
    )
    return Comparison(
        "\n".join(md).rstrip("\n") + "\n",
        page,
        plain_rows,
        chosen,
        values,
        seed_stats,
        base_values,
        intervals.records,
        untrained,
        figure,
        tradeoff.figure if tradeoff is not None else None,
        tradeoff.points if tradeoff is not None else [],
    )


def _disagreement(name: str, chosen: Sequence[Column], found: Mapping[str, BootstrapInterval | None]) -> list[str]:
    """A clause for each all-languages column pair where one side (in domain: held-out rows of the
    training corpus; out of domain: every other benchmark) gains significantly and the other does not."""
    headline = [(c, found.get(c.spec)) for c in chosen if c.has_items and c.lang == MEAN]
    measured = [(c, i) for c, i in headline if i is not None]

    def gains(interval: BootstrapInterval) -> bool:
        return interval.significant and interval.delta > 0

    def described(c: Column, i: BootstrapInterval) -> str:
        verdict = "significant" if i.significant else "within noise"
        return (
            f"{c.benchmark}/{c.dataset} {format_delta(i.delta, c.metric)} {format_interval(i.low, i.high, c.metric)} ({verdict})"
        )

    clauses = []
    for better, better_i in measured:
        for worse, worse_i in measured:
            inside = in_domain(better.benchmark)
            if inside == in_domain(worse.benchmark) or not gains(better_i) or gains(worse_i):
                continue
            where = ("in domain", "out of domain") if inside else ("out of domain", "in domain")
            clauses.append(f"{name}: {where[0]} {described(better, better_i)}, but {where[1]} {described(worse, worse_i)}")
    return clauses


def _untrained_section(
    results: Sequence[VariantResult],
    units: Sequence[tuple[_Side, list[VariantResult]]],
    chosen: Sequence[Column],
    values: Mapping[str, Mapping[str, float | None]],
    untrained_base: str | None,
    intervals: _Intervals,
) -> tuple[dict[str, float | None] | None, Table | None, str, list[UnitChange]]:
    """The untrained base's values, and the table of every trained variant (or seed group) against
    it, and each one's changes against it (for the trade-off figure)."""
    by_name = {r.name: r for r in results}
    reference: tuple[pa.Table, pa.Table | None, str] | None = None
    if untrained_base is not None and by_name[untrained_base].metrics is not None:
        r = by_name[untrained_base]
        reference = (r.metrics, r.items, f"variant {r.name}, whose pipeline trains nothing")
    else:
        r = next((r for r in results if r.base_metrics is not None), None)
        if r is not None:
            reference = (r.base_metrics, r.base_items, f"the base model as scored beside {r.name} in its evaluation")
    if reference is None or not chosen:
        return None, None, "", []
    ref_metrics, ref_items, source = reference
    ref_rows = _metric_rows(ref_metrics)
    untrained = {c.spec: column_value(ref_rows, c) for c in chosen}

    header = ["Variant / seed group", "seeds"]
    numeric = [False, True]
    for c in chosen:
        header += [c.label, f"Δ vs base ({c.metric})" + (" [95% CI]" if c.has_items else "")]
        numeric += [True, True]
    first = [Cell("untrained base"), Cell(MISSING, "missing")]
    for c in chosen:
        value = untrained[c.spec]
        first += [Cell(format_value(value, c.metric), "num" if value is not None else "missing"), Cell("reference", "missing")]
    rows = [first]
    disagreements: list[str] = []
    own_base_differs = False
    against: list[UnitChange] = []
    for unit, rs in units:
        if all(r.name == untrained_base or r.trained is False for r in rs):
            continue  # an untrained model: the Variants table already compares it
        # Each run against the base scored in its own evaluation (same settings and data), else the shown one.
        bases = [(r.base_metrics, r.base_items) if r.base_metrics is not None else (ref_metrics, ref_items) for r in rs]
        base_rows = [_metric_rows(m) for m, _ in bases]
        base_values = {c.spec: _mean([column_value(rows_, c) for rows_ in base_rows]) for c in chosen}
        own_base_differs |= any(
            (delta := _difference(base_values[c.spec], untrained[c.spec])) is not None and abs(delta) > 1e-9 for c in chosen
        )
        base = _Side(f"untrained base of {unit.name}", base_values, mean_outcomes([items for _, items in bases]), len(rs))
        found = intervals.get(unit, base, "untrained base")
        against.append(
            UnitChange(unit.name, rs, {c.spec: _difference(unit.values[c.spec], base_values[c.spec]) for c in chosen}, found)
        )
        line = [Cell(unit.name), Cell(str(len(rs)), "num")]
        for c in chosen:
            value = unit.values[c.spec]
            line.append(Cell(format_value(value, c.metric), "num" if value is not None else "missing"))
            line.append(_delta_cell(value, base_values[c.spec], c, is_baseline=False, interval=found.get(c.spec)))
        rows.append(line)
        disagreements += _disagreement(unit.name, chosen, found)
    if len(rows) == 1:
        return untrained, None, "", against
    note = f"Untrained base: {source}. Δ vs base as above, with its interval where the column has one."
    if disagreements:  # the first thing to read: in-domain gains that do not carry out of domain, or the reverse
        note += " In-domain and out-of-domain results disagree: " + "; ".join(disagreements) + "."
    if own_base_differs:
        note += (
            " Some variants were scored against another untrained base (their evaluation settings or data differ):"
            " their Δ is against the base scored in their own evaluation."
        )
    return untrained, Table(header, rows, numeric), note, against
