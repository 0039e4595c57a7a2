"""The comparison report of a sweep: one row per variant, deltas against a baseline, mean ± std over seeds,
and paired bootstrap 95% intervals over sentences for the retrieval accuracies.

Input: per variant, its evaluate metrics table (`tasks.evaluate.schema.METRICS_SCHEMA`) or
None when it has none (a failed variant, a pipeline without evaluate), and, when the
evaluation recorded them, its per-query outcomes (`tasks.evaluate.schema.ITEMS_SCHEMA`) and
those of the untrained base scored beside it. Output: Markdown, one self-contained HTML
page (with a PNG of the intervals), plain rows for a Prefect table artifact and the
intervals as plain dicts.

Columns are metric values picked from each table by a spec `benchmark/dataset/language/metric`
(tasks/evaluate/columns.py). Without explicit columns the
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
of tatoeba and retrieval; tasks/evaluate/compare_intervals.py): items of the two sides are paired on `schema.ITEM_KEY`
(tasks/evaluate/paired.py); a side with several runs (seeds) is averaged per item first; one stratum
per language pair, whose sentence pairs (both directions' queries of row `item` together) are
resampled by `tasks.evaluate.bootstrap.paired_bootstrap`; each stratum is weighted so that the
statistic is the column's own average (a group row averages its members per target language,
the column averages those rows). Items are put in key order before they are resampled, and a
comparison with the same paired differences is computed once, so the same inputs give the same
interval in every table of the report and on every run. A delta is
significant when its interval excludes zero; otherwise it is within noise. A side without
outcomes (an evaluation older than them) gets no interval. The section against the untrained
base is tasks/evaluate/compare_untrained.py. Nothing here knows about Prefect or the artifact
store.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from storage.keys import canonical_json
from tasks.evaluate.benchmarks.registry import screening_sentence
from tasks.evaluate.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from tasks.evaluate.columns import (
    Column,
    VariantResult,
    column_value,
    difference,
    headline_columns,
    mean_of,
    metric_rows,
    xx_yy_pivots,
)
from tasks.evaluate.compare_intervals import NO_INTERVAL, SIGNIFICANT, ComparedSide, DeltaIntervals, delta_cell
from tasks.evaluate.compare_untrained import untrained_section
from tasks.evaluate.interval_figures import INTERVALS_FIGURE_FILE, IntervalRow, intervals_figure
from tasks.evaluate.paired import mean_outcomes
from tasks.evaluate.tradeoff import tradeoff_section
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

__all__ = ["Comparison", "build_comparison"]

ONE_SEED_NOTE = "one seed: differences are not claims"


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
    rows_of = {r.name: metric_rows(r.metrics) if r.metrics is not None else None for r in results}
    values = {
        r.name: {c.spec: (column_value(rows_of[r.name], c) if rows_of[r.name] is not None else None) for c in chosen}
        for r in results
    }
    pivots: dict[tuple[str, str], str | None] = {}
    for rows in [
        *(v for v in rows_of.values() if v is not None),
        *(metric_rows(r.base_metrics) for r in results if r.base_metrics is not None),
    ]:
        pivots |= xx_yy_pivots(rows)
    intervals = DeltaIntervals(chosen, resamples, pivots)

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

    def side(name: str, runs: Sequence[VariantResult]) -> ComparedSide:
        return ComparedSide(
            name,
            {c.spec: mean_of([values[r.name][c.spec] for r in runs]) for c in chosen},
            mean_outcomes([r.items for r in runs]),
            len(runs),
        )

    variant_side = {r.name: side(r.name, [r]) for r in results}
    group_side = {group: side(group, members[group]) for group in seed_stats}
    # What the report compares: a seed group as one (its seeds averaged), any other variant alone.
    units: list[tuple[ComparedSide, list[VariantResult]]] = []
    for group, rs in members.items():
        units += [(group_side[group], rs)] if group in seed_stats else [(variant_side[r.name], [r]) for r in rs]

    base_values: dict[str, float | None] | None = None
    base_members: list[str] = []
    base_side: ComparedSide | None = None
    if baseline is not None:
        if baseline in values:
            base_members = [baseline]
        elif baseline in members:
            base_members = [r.name for r in members[baseline]]
        else:
            raise ValueError(f"baseline {baseline!r} is neither a variant nor a seed group: {names}")
        base_values = {c.spec: mean_of([values[n][c.spec] for n in base_members]) for c in chosen}
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
                cell = delta_cell(value, base_values[c.spec], c, is_baseline=is_base, interval=interval)
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
                    line.append(delta_cell(mean_value, base_values[c.spec], c, is_baseline=is_base, interval=found.get(c.spec)))
            s_rows.append(line)
        seed_table = Table(s_header, s_rows, s_numeric)

    untrained, untrained_table, untrained_note, changes = untrained_section(
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
            deltas = {c.spec: difference(unit.values[c.spec], base_values[c.spec]) for c in intervals.columns}
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
