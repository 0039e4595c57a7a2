"""The comparison report of a sweep: one row per variant, deltas against a baseline, mean ± std over seeds.

Input: per variant, its evaluate metrics table (`tasks.evaluate.schema.METRICS_SCHEMA`) or
None when it has none (a failed variant, a pipeline without evaluate). Output: Markdown,
one self-contained HTML page, and plain rows for a Prefect table artifact.

Columns are metric values picked from each table by a spec `benchmark/dataset/language/metric`:
`language` is a FLORES-200 code, `group:<name>` (a group average row) or `mean` (the
unweighted mean over every language row, groups left out). Without explicit columns the
headline of every (benchmark, dataset) is shown: its main metric (accuracy_mean for Tatoeba
and retrieval, F1 for BUCC, Spearman for STS, accuracy for XNLI, main_score for MTEB) as
group averages, then as the mean over languages.

Deltas are `value - baseline` in the metric's display units (percentage points for
percentages, x100 for correlations). The baseline is a variant, or a seed group: then it is
the group's mean. Variants that differ only in their seed keys form a group; a group with
several seeds gets a row in the "over seeds" table: mean ± sample standard deviation
(ddof = 1) over its seeds, and the delta of the mean. Nothing here knows about Prefect.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from storage.keys import canonical_json
from tasks.evaluate.tables import (
    CSS,
    MISSING,
    Cell,
    Table,
    format_delta,
    format_value,
    html_escape,
    html_table,
    md_escape,
    md_table,
    metric_scale,
)

__all__ = ["MAIN_METRICS", "Column", "Comparison", "VariantResult", "build_comparison", "column_value", "headline_columns"]

MAIN_METRICS = {"tatoeba": "accuracy_mean", "retrieval": "accuracy_mean", "bucc": "f1", "sts": "spearman", "xnli": "accuracy"}
MEAN = "mean"
GROUP_PREFIX = "group:"


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


@dataclass(frozen=True)
class Comparison:
    markdown: str
    html: str
    rows: list[dict[str, Any]]  # one per variant, display units, for a Prefect table artifact
    columns: list[Column]
    values: dict[str, dict[str, float | None]]  # variant -> column spec -> value (raw units)
    seed_stats: dict[str, dict[str, tuple[float, float | None, int]]]  # group -> spec -> (mean, std, n)
    baseline: dict[str, float | None] | None  # column spec -> baseline value (raw units)


# ---------------------------------------------------------------------------- values


def _metric_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.select(["benchmark", "dataset", "src_lang", "tgt_lang", "metric", "value"]).to_pylist()


def _main_metric(benchmark: str, metrics: list[str]) -> str:
    if benchmark in MAIN_METRICS and MAIN_METRICS[benchmark] in metrics:
        return MAIN_METRICS[benchmark]
    return "main_score" if "main_score" in metrics else metrics[0]


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
        metric = _main_metric(benchmark, entry["metrics"])
        groups: list[str] = []
        for table in tables:
            for row in _metric_rows(table):
                if (row["benchmark"], row["dataset"], row["metric"]) == (benchmark, dataset, metric) and row[
                    "src_lang"
                ].startswith(GROUP_PREFIX):
                    if row["src_lang"] not in groups:
                        groups.append(row["src_lang"])
        out += [Column(benchmark, dataset, g, metric) for g in groups]
        out.append(Column(benchmark, dataset, MEAN, metric))
    return out


def column_value(rows: Sequence[Mapping[str, Any]], column: Column) -> float | None:
    """The column's value in one metrics table (mean over matching rows); None if it has none."""
    values = [
        r["value"]
        for r in rows
        if r["benchmark"] == column.benchmark
        and r["dataset"] == column.dataset
        and r["metric"] == column.metric
        and (not r["src_lang"].startswith(GROUP_PREFIX) if column.lang == MEAN else r["src_lang"] == column.lang)
    ]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


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


def _delta_cell(value: float | None, base: float | None, metric: str, *, is_baseline: bool) -> Cell:
    if is_baseline:
        return Cell("baseline", "missing")
    if value is None or base is None:
        return Cell(MISSING, "missing")
    text = format_delta(value - base, metric)
    kind = "zero" if text.lstrip("+-").strip("0.") == "" else ("pos" if text.startswith("+") else "neg")
    return Cell(text, kind)


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
) -> Comparison:
    """Render the comparison of `results` (in the order given)."""
    names = [r.name for r in results]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names repeat: {names}")
    tables = [r.metrics for r in results if r.metrics is not None]
    chosen = [Column.parse(c) for c in columns] if columns else headline_columns(tables)
    rows_of = {r.name: _metric_rows(r.metrics) if r.metrics is not None else None for r in results}
    values = {
        r.name: {c.spec: (column_value(rows_of[r.name], c) if rows_of[r.name] is not None else None) for c in chosen}
        for r in results
    }

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

    base_values: dict[str, float | None] | None = None
    base_members: set[str] = set()
    if baseline is not None:
        if baseline in values:
            base_members = {baseline}
        elif baseline in members:
            base_members = {r.name for r in members[baseline]}
        else:
            raise ValueError(f"baseline {baseline!r} is neither a variant nor a seed group: {names}")
        base_values = {c.spec: _mean([values[n][c.spec] for n in base_members]) for c in chosen}

    varied, common = _varied_settings(results)
    show_group = bool(seed_stats)

    header = ["Variant"] + (["Seed group"] if show_group else []) + (["Settings"] if varied else [])
    numeric = [False] * len(header)
    for c in chosen:
        header.append(c.label)
        numeric.append(True)
        if base_values is not None:
            header.append(f"Δ ({c.metric})")
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
        for c in chosen:
            value = values[r.name][c.spec]
            line.append(Cell(format_value(value, c.metric), "num" if value is not None else "missing"))
            plain[c.label] = None if value is None else round(value * metric_scale(c.metric), 3)
            if base_values is not None:
                cell = _delta_cell(
                    value, base_values[c.spec], c.metric, is_baseline=r.name in base_members and len(base_members) == 1
                )
                line.append(cell)
                plain[f"Δ {c.label}"] = cell.text
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
                s_header.append(f"Δ mean ({c.metric})")
                s_numeric.append(True)
        s_rows = []
        for group, stats in seed_stats.items():
            line = [Cell(group), Cell(str(len(members[group])), "num")]
            for c in chosen:
                stat = stats.get(c.spec)
                if stat is None:
                    line.append(Cell(MISSING, "missing"))
                else:
                    mean, std, _ = stat
                    line.append(Cell(format_value(mean, c.metric) + _spread(std, c.metric), "num"))
                if base_values is not None:
                    is_base = base_members == {m.name for m in members[group]}
                    line.append(_delta_cell(stat[0] if stat else None, base_values[c.spec], c.metric, is_baseline=is_base))
            s_rows.append(line)
        seed_table = Table(s_header, s_rows, s_numeric)

    ok = sum(1 for r in results if r.error is None)
    intro = f"{len(results)} variants ({ok} ran to the end)"
    if baseline is not None:
        intro += f"; Δ columns compare with {'seed group' if len(base_members) > 1 else 'variant'} {baseline}"
        if len(base_members) > 1:
            intro += " (the mean over its seeds)"
    intro += (
        ". Accuracy, precision, recall and F1 in %, correlations ×100; Δ in the same units (percentage points for percentages)."
    )
    md = [f"# {md_escape(title)}", "", md_escape(intro), ""]
    ht = [f"<h1>{html_escape(title)}</h1>", f'<p class="note">{html_escape(intro)}</p>']
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
    if not chosen:
        md += ["No variant has evaluation metrics (no evaluate stage, or every variant failed).", ""]
        ht.append("<p>No variant has evaluation metrics (no evaluate stage, or every variant failed).</p>")
    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html_escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(ht) + "\n</body>\n</html>\n"
    )
    return Comparison("\n".join(md).rstrip("\n") + "\n", page, plain_rows, chosen, values, seed_stats, base_values)
