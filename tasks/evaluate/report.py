"""The human-readable report of the evaluate stage: Markdown, one self-contained HTML page, PNG figures.

`build_report` turns the metrics table (`tasks.evaluate.schema.METRICS_SCHEMA`) into:

* a header with the title and the model card (model, base, pooling, artifact key, ...);
* one section per benchmark: a per-language (or per-pair) table whose columns are the
  metrics, then the group averages (``src_lang = "group:<name>"``) in a table of their own.
  Accuracy, precision, recall and F1 (and retrieval scores such as nDCG/MRR/MAP) are shown
  in %, correlations (Spearman, Pearson) x100, all with one decimal; other metrics (a
  threshold, ...) with three decimals;
* with a baseline table, a signed "Δ vs {baseline_name}" column after each metric, joined on
  (benchmark, dataset, src_lang, tgt_lang, metric), in the metric's display units
  (percentage points for percentages), "—" where the baseline has no such row;
* with per-query items of both models (`ITEMS_SCHEMA`: the evaluated model's and the
  baseline's), the change of each headline (per benchmark/dataset: the mean over all
  languages, each language group, the xx-yy pairs) with a paired bootstrap 95% interval
  over sentence pairs (`tasks.evaluate.paired`), an error-bar figure of those changes per language
  and group (`figures.delta_interval_figure`), and a sentence at the top when in-domain (held-out
  rows of the training data: benchmark ``retrieval``) and out-of-domain (Tatoeba, ...)
  headlines disagree;
* figures with captions (tasks/evaluate/figures.py): cosine histograms of translation pairs
  against shuffled pairs and a 2-D PCA map of word embeddings.

The Markdown links figures by file name (save `EvaluationReport.figures` next to it); the
HTML embeds them as base64 PNGs and loads nothing from outside. Every string that comes
from data is escaped (`html.escape` in HTML, backslash escapes in Markdown).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.evaluate.benchmarks.registry import headline_metric, screening_sentence
from tasks.evaluate.bootstrap import DEFAULT_RESAMPLES, BootstrapInterval
from tasks.evaluate.figures import PairSimilarities, WordMap, report_figures
from tasks.evaluate.paired import DeltaInterval, StsDeltaInterval, paired_delta_intervals, sts_delta_intervals
from tasks.evaluate.schema import METRICS_KEY, metric_rows
from tasks.languages import GROUP_PREFIX, is_group_code
from tasks.reporting.tables import (
    CORRELATION_TOKENS,
    CSS,
    MARGIN_TOKENS,
    MISSING,
    Cell,
    Table,
    format_delta,
    format_value,
    html_escape,
    html_table,
    md_code_free,
    md_escape,
    md_table,
    metric_scale,
    pair_label,
)

__all__ = [
    "EvaluationReport",
    "build_report",
    "disagreement_sentence",
    "headline_levels",
]

# Column order for well-known metrics; others follow in order of first appearance.
_METRIC_ORDER = (
    "accuracy_src_tgt",
    "accuracy_tgt_src",
    "accuracy_mean",
    "margin_mean",
    "precision",
    "recall",
    "f1",
    "threshold",
    "spearman",
    "pearson",
)


@dataclass
class EvaluationReport:
    """The rendered report: Markdown (figures by file name), self-contained HTML, and the PNGs."""

    markdown: str
    html: str  # one self-contained page: inline CSS, plots as base64 PNG <img>, no external URLs/scripts
    figures: dict[str, bytes] = field(default_factory=dict)  # file name -> PNG bytes
    deltas: list[DeltaInterval] = field(default_factory=list)  # the paired intervals it shows (none without items of both models)


# ---------------------------------------------------------------------------------------------
# Numbers


def _format_n(ns: list[int]) -> str:
    lo, hi = min(ns), max(ns)
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


# ---------------------------------------------------------------------------------------------
# Tables


def _ordered_metrics(metrics: list[str]) -> list[str]:
    first_seen = list(dict.fromkeys(metrics))
    known = [m for m in _METRIC_ORDER if m in first_seen]
    return known + [m for m in first_seen if m not in _METRIC_ORDER]


# Marks a score whose benchmark sentences (some of them) occur, normalised, in the training rows.
CONTAMINATED = "⚠"


def _overlap_cell(overlap: dict[str, Any] | None) -> Cell:
    if overlap is None:
        return Cell(MISSING, "missing")
    leaked = overlap["items_in_training"]
    if not leaked:
        return Cell("0", "num")
    return Cell(f"{CONTAMINATED} {leaked:,} ({overlap['share'] * 100:.1f}%)", "neg")


def _metrics_table(
    rows: list[dict[str, Any]],
    *,
    groups: bool,
    show_dataset: bool,
    baseline: dict[tuple[Any, ...], float] | None,
    baseline_name: str,
    overlaps: dict[tuple[str, str, str, str], dict[str, Any]] | None = None,
) -> Table:
    """Rows = (dataset,) language or pair; columns = metrics (+ a delta after each), then n and,
    with `overlaps` ((benchmark, dataset, src, tgt) -> leakage row), the items found in training
    (a pair with some marks its label with CONTAMINATED)."""
    metrics = _ordered_metrics([r["metric"] for r in rows])
    by_row: dict[tuple[str, str, str | None], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_row.setdefault((r["dataset"], r["src_lang"], r["tgt_lang"]), {})[r["metric"]] = r

    header = (["Dataset"] if show_dataset else []) + ["Group" if groups else "Language / pair"]
    numeric = [False] * len(header)
    for metric in metrics:
        header.append(metric)
        numeric.append(True)
        if baseline is not None:
            header.append(f"Δ vs {baseline_name} ({metric})")
            numeric.append(True)
    header.append("n")
    numeric.append(True)
    if overlaps is not None:
        header.append("in training")
        numeric.append(True)
    # on the page each Δ column is "Δ" beside its metric (the full name is its tooltip and the
    # note under the table says what it compares with): the table fits 1,280 px with four metrics
    short = [("Δ" if h.startswith(f"Δ vs {baseline_name} (") else h) for h in header]

    out: list[list[Cell]] = []
    for (dataset, src, tgt), cells in sorted(by_row.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
        label = pair_label(src.removeprefix(GROUP_PREFIX) if groups else src, tgt)
        overlap = None
        if overlaps is not None:
            benchmark = next(iter(cells.values()))["benchmark"]
            overlap = overlaps.get((benchmark, dataset, src, tgt or ""))
            if overlap is not None and overlap["items_in_training"]:
                label = f"{label} {CONTAMINATED}"
        line = ([Cell(dataset)] if show_dataset else []) + [Cell(label)]
        for metric in metrics:
            r = cells.get(metric)
            value = None if r is None else r["value"]
            line.append(Cell(format_value(value, metric), "num" if r is not None else "missing"))
            if baseline is not None:
                base = baseline.get((r["benchmark"], dataset, src, tgt, metric)) if r is not None else None
                if base is None or r is None:
                    line.append(Cell(MISSING, "missing"))
                else:
                    text = format_delta(value - base, metric)
                    kind = "zero" if text.lstrip("+-").strip("0.") == "" else ("pos" if text.startswith("+") else "neg")
                    line.append(Cell(text, kind))
        line.append(Cell(_format_n([r["n"] for r in cells.values()]), "num"))
        if overlaps is not None:
            line.append(_overlap_cell(overlap))
        out.append(line)
    return Table(header, out, numeric, short if baseline is not None else None)


def _units_note(metrics: set[str]) -> str:
    def tokens(metric: str) -> set[str]:
        return set(re.split(r"[_@\-.\s]+", metric.lower()))

    parts = []
    if any(metric_scale(m) != 1.0 and not tokens(m) & (CORRELATION_TOKENS | MARGIN_TOKENS) for m in metrics):
        parts.append("accuracy, precision, recall and F1 in %")
    if any(tokens(m) & CORRELATION_TOKENS for m in metrics):
        parts.append("correlations ×100")
    if any(tokens(m) & MARGIN_TOKENS for m in metrics):
        parts.append("margins (cosine of the translation minus that of the best other candidate) ×100")
    if any(metric_scale(m) == 1.0 for m in metrics):
        parts.append("other metrics as computed")
    return "; ".join(parts)


def _sts_delta_table(deltas: Sequence[StsDeltaInterval]) -> Table:
    header = ["Benchmark / dataset", "Set", "Δ spearman", "95% interval", "Significant", "Pairs"]
    rows = []
    for d in deltas:
        change, bounds = _interval_text(d.spearman, "spearman")
        kind = ("pos" if d.spearman.delta > 0 else "neg") if d.spearman.significant else "num"
        rows.append(
            [
                Cell(f"{d.benchmark}/{d.dataset}"), Cell(d.label), Cell(change, kind), Cell(bounds, "num"),
                Cell("yes" if d.spearman.significant else "no"), Cell(f"{d.spearman.items:,}", "num"),
            ]
        )  # fmt: skip
    return Table(header, rows, [False, False, True, True, False, True])


def _interval_text(value: BootstrapInterval, metric: str) -> tuple[str, str]:
    """(signed delta, "low to high") in the metric's display units (no brackets: Markdown would escape them)."""
    return format_delta(value.delta, metric), f"{format_delta(value.low, metric)} to {format_delta(value.high, metric)}"


def _describe(delta: DeltaInterval) -> str:
    change, bounds = _interval_text(delta.accuracy, "accuracy_mean")
    verdict = "significant" if delta.accuracy.significant else "not significant"
    return f"{delta.name} {change} pp (95% interval {bounds}, {verdict})"


def tradeoff_sentence(deltas: Sequence[DeltaInterval], sts_deltas: Sequence[StsDeltaInterval], base_name: str) -> str | None:
    """The two changes a user weighs, in one sentence: finding translations across languages (each
    out-of-domain retrieval headline) and ranking sentence pairs by similarity (each STS dataset's
    mean over its sets, with its worst language within one language); None without both."""
    retrieval = [d for d in deltas if d.kind == "all" and not d.in_domain]
    similarity = [d for d in sts_deltas if d.label == "all sets"] or [d for d in sts_deltas if "–" not in d.label]
    if not retrieval or not similarity:
        return None

    def spearman(interval: BootstrapInterval) -> str:
        verdict = "significant" if interval.significant else "not significant"
        return f"{interval.delta * 100:+.1f} (95% interval {interval.low * 100:+.1f} to {interval.high * 100:+.1f}, {verdict})"

    across = "; ".join(_describe(d) for d in retrieval)
    within = []
    for d in similarity:
        text = f"{d.benchmark}/{d.dataset} {spearman(d.spearman)}"
        sets = [s for s in sts_deltas if (s.benchmark, s.dataset) == (d.benchmark, d.dataset) and s.label != "all sets"]
        monolingual = [s for s in sets if "–" not in s.label]
        if len(monolingual) > 1:
            worst = min(monolingual, key=lambda s: s.spearman.delta)
            text += f" (lowest language {worst.label} {worst.spearman.delta * 100:+.1f})"
        within.append(text)
    return (
        f"Against {base_name}: across languages (retrieval accuracy) {across}; "
        f"similarity ranking (Spearman ×100, mean over sets) {'; '.join(within)}."
    )


def disagreement_sentence(deltas: Sequence[DeltaInterval]) -> str | None:
    """One sentence when an in-domain headline (all languages, accuracy) improves significantly
    while an out-of-domain one does not (falls or stays within noise), or the other way round;
    None when they agree."""
    headlines = [d for d in deltas if d.kind == "all"]
    inside = [d for d in headlines if d.in_domain]
    outside = [d for d in headlines if not d.in_domain]

    def gains(d: DeltaInterval) -> bool:
        return d.accuracy.significant and d.accuracy.delta > 0

    clauses = []
    for better, worse in [(i, o) for i in inside for o in outside] + [(o, i) for o in outside for i in inside]:
        if gains(better) and not gains(worse):
            where = ("in-domain", "out-of-domain") if better.in_domain else ("out-of-domain", "in-domain")
            clauses.append(f"{where[0]} {_describe(better)}, but {where[1]} {_describe(worse)}")
    if not clauses:
        return None
    return "In-domain and out-of-domain results disagree: " + "; ".join(clauses) + "."


def _delta_table(deltas: Sequence[DeltaInterval]) -> Table:
    header = ["Benchmark / dataset", "Headline", "Δ accuracy_mean", "95% interval", "Significant"]
    header += ["Δ margin_mean", "95% interval", "Languages", "Items"]
    numeric = [False, False, True, True, False, True, True, True, True]
    rows = []
    for d in deltas:
        if d.kind == "language":
            continue
        change, bounds = _interval_text(d.accuracy, "accuracy_mean")
        kind = ("pos" if d.accuracy.delta > 0 else "neg") if d.accuracy.significant else "num"
        line = [Cell(d.name), Cell(d.label), Cell(change, kind), Cell(bounds, "num")]
        line.append(Cell("yes" if d.accuracy.significant else "no"))
        if d.margin is None:
            line += [Cell(MISSING, "missing"), Cell(MISSING, "missing")]
        else:
            m_change, m_bounds = _interval_text(d.margin, "margin_mean")
            m_kind = ("pos" if d.margin.delta > 0 else "neg") if d.margin.significant else "num"
            line += [Cell(m_change, m_kind), Cell(m_bounds, "num")]
        line += [Cell(f"{d.accuracy.strata:,}", "num"), Cell(f"{d.accuracy.items:,}", "num")]
        rows.append(line)
    return Table(header, rows, numeric)


def headline_levels(metrics: pa.Table, baseline: pa.Table) -> dict[str, list[tuple[str, str, float, float]]]:
    """Per benchmark/dataset: (label, metric, baseline value, value) of its headline metric over
    all languages (the mean of the language rows) and of each group row, where both models have it."""

    def values(table: pa.Table, what: str) -> dict[tuple[str, str, str], list[float]]:
        rows = metric_rows(table, what)
        chosen = {}
        for r in rows:
            chosen.setdefault((r["benchmark"], r["dataset"]), []).append(r["metric"])
        out: dict[tuple[str, str, str], list[float]] = {}
        for r in rows:
            metric = headline_metric(r["benchmark"], list(dict.fromkeys(chosen[r["benchmark"], r["dataset"]])))
            if r["metric"] != metric or not np.isfinite(r["value"]):
                continue
            label = r["src_lang"].removeprefix(GROUP_PREFIX) if is_group_code(r["src_lang"]) else "all languages"
            out.setdefault((f"{r['benchmark']}/{r['dataset']}", label, metric), []).append(float(r["value"]))
        return out

    ours, theirs = values(metrics, "metrics"), values(baseline, "baseline")
    panels: dict[str, list[tuple[str, str, float, float]]] = {}
    for (name, label, metric), vals in ours.items():
        if (name, label, metric) in theirs:
            panels.setdefault(name, []).append((label, metric, float(np.mean(theirs[name, label, metric])), float(np.mean(vals))))
    for rows in panels.values():
        rows.sort(key=lambda row: row[0] != "all languages")
    return panels


# ---------------------------------------------------------------------------------------------
# Rendering


def _leakage_section(leakage: pa.Table, trained: bool) -> tuple[list[str], list[str]]:
    """Markdown and HTML lines: per dataset, the scored items with a sentence in the training rows."""
    totals: dict[tuple[str, str], list[int]] = {}
    for r in leakage.to_pylist():
        entry = totals.setdefault((r["benchmark"], r["dataset"]), [0, 0, 0])
        entry[0] += 1
        entry[1] += r["items"]
        entry[2] += r["items_in_training"]
    header = ["Benchmark", "Dataset", "pairs", "items", "items in training", "share"]
    rows = [
        [
            Cell(benchmark), Cell(f"{dataset} {CONTAMINATED}" if leaked else dataset), Cell(f"{pairs:,}", "num"),
            Cell(f"{items:,}", "num"), Cell(f"{leaked:,}", "neg" if leaked else "num"),
            Cell(f"{leaked / items * 100:.1f}%" if items else MISSING, "neg" if leaked else "num"),
        ]
        for (benchmark, dataset), (pairs, items, leaked) in totals.items()
    ]  # fmt: skip
    table = Table(header, rows, [False, False, True, True, True, True])
    whose = (
        "the scored model was trained on" if trained else "the pipeline's corpus holds (the scored model was not trained on them)"
    )
    note = (
        f"{CONTAMINATED} marks scores whose sentences occur, normalised (case, punctuation, digits, whitespace), among "
        f"the training rows in the same language: the train split that {whose}. An item is a pair (either side "
        "found) or, for BUCC, one sentence. MTEB and XNLI are not checked."
    )
    if not totals:
        none = "No scored sentences could be checked against the training rows."
        return ["## Training-corpus overlap", "", md_escape(none), ""], [
            "<h2>Training-corpus overlap</h2>",
            f"<p>{html_escape(none)}</p>",
        ]
    md = ["## Training-corpus overlap", "", md_table(table), "", f"*{md_escape(note)}*", ""]
    ht = ["<h2>Training-corpus overlap</h2>", html_table(table), f'<p class="note">{html_escape(note)}</p>']
    return md, ht


def build_report(
    metrics: pa.Table,
    *,
    title: str,
    model_card: dict[str, str],
    baseline: pa.Table | None = None,
    baseline_name: str | None = None,
    similarities: Sequence[PairSimilarities] = (),
    word_map: WordMap | None = None,
    seed: int = 0,
    items: pa.Table | None = None,
    baseline_items: pa.Table | None = None,
    leakage: pa.Table | None = None,
    trained: bool = True,
    sts_items: pa.Table | None = None,
    baseline_sts_items: pa.Table | None = None,
    curves: pa.Table | None = None,
    base_similarities: Sequence[PairSimilarities] = (),
    screening: Sequence[str] = (),
) -> EvaluationReport:
    """Render the evaluate stage's metrics (and optional baseline and figure inputs) as Markdown + HTML + PNGs.

    `seed` picks the sample shown when there are more than REPORT_MAX_PAIRS language pairs or
    REPORT_MAX_CONCEPTS concepts to plot, and seeds the bootstrap. With `items` and
    `baseline_items` (ITEMS_SCHEMA tables of this model and of the baseline), the report adds
    paired bootstrap intervals of the headline changes, their figure, and a sentence at the top
    when in-domain and out-of-domain headlines disagree. With `leakage` (tasks/evaluate/leakage.py's
    LEAKAGE_SCHEMA), per-language tables gain an "in training" column, contaminated pairs are
    marked, and a section sums the overlap per dataset; `trained` says whether the scored model
    was trained on those rows (else the overlap only says what training on them would leak).
    With `sts_items` and `baseline_sts_items` (STS_ITEMS_SCHEMA), the change section also gives
    each STS set's change in Spearman with a paired bootstrap interval over its sentence pairs.
    `curves` (the train artifact's curves table) adds the training curves figure; with a
    baseline, the headline levels of both models are plotted beside the changes, and
    `base_similarities` (the baseline's cosines of the same pairs) are overlaid on the histograms.
    `screening` (`EvaluateConfig.screening_notes`): the benchmarks scored on seeded subsets; the
    report then opens by saying it is a screen, not a claim.
    """
    rows = metric_rows(metrics, "metrics")
    base_name = baseline_name or "baseline"
    base_values: dict[tuple[Any, ...], float] | None = None
    unmatched_baseline = 0
    if baseline is not None:
        base_rows = metric_rows(baseline, "baseline")
        base_values = {tuple(r[c] for c in METRICS_KEY): r["value"] for r in base_rows}
        ours = {tuple(r[c] for c in METRICS_KEY) for r in rows}
        unmatched_baseline = sum(1 for key in base_values if key not in ours)

    paired = items is not None and baseline_items is not None
    deltas = paired_delta_intervals(items, baseline_items, metrics, seed=seed) if paired else []
    sts_paired = sts_items is not None and baseline_sts_items is not None and sts_items.num_rows > 0
    sts_deltas = sts_delta_intervals(sts_items, baseline_sts_items, seed=seed) if sts_paired else []
    md: list[str] = [f"# {md_escape(title)}", ""]
    ht: list[str] = [f"<h1>{html_escape(title)}</h1>"]
    if screening:
        line = screening_sentence(screening)
        md += [f"**{md_escape(line)}**", ""]
        ht.append(f"<p><strong>{html_escape(line)}</strong></p>")
    tradeoff = tradeoff_sentence(deltas, sts_deltas, base_name)
    if tradeoff:  # what a user picks an encoder on: both changes, side by side
        md += [md_escape(tradeoff), ""]
        ht.append(f"<p><strong>{html_escape(tradeoff)}</strong></p>")
    disagreement = disagreement_sentence(deltas)
    if disagreement:  # first thing a reader sees: the benchmarks do not tell one story
        md += [md_escape(disagreement), ""]
        ht.append(f"<p><strong>{html_escape(disagreement)}</strong></p>")

    card = [(str(k), str(v)) for k, v in model_card.items()]
    if card:
        md += ["| | |", "|---|---|"] + [f"| **{md_escape(k)}** | {md_escape(v)} |" for k, v in card] + [""]
        ht.append(
            '<table class="card"><tbody>'
            + "".join(f"<tr><th>{html_escape(k)}</th><td>{html_escape(v)}</td></tr>" for k, v in card)
            + "</tbody></table>"
        )

    benchmarks = list(dict.fromkeys(r["benchmark"] for r in rows))
    summary = f"{len(rows)} metric values over {len(benchmarks)} benchmark{'s' if len(benchmarks) != 1 else ''}"
    if baseline is not None:
        summary += f"; Δ columns compare with {base_name}"
        if unmatched_baseline:
            summary += f" ({unmatched_baseline} {base_name} rows have no counterpart here and are not shown)"
    summary += "."
    md += [md_escape(summary), ""]
    ht.append(f'<p class="note">{html_escape(summary)}</p>')
    if not rows:
        md += ["No metrics were computed.", ""]
        ht.append("<p>No metrics were computed.</p>")

    overlaps = None
    if leakage is not None:
        overlaps = {(r["benchmark"], r["dataset"], r["src_lang"], r["tgt_lang"]): r for r in leakage.to_pylist()}
        section_md, section_html = _leakage_section(leakage, trained)
        md += section_md
        ht += section_html

    if paired or sts_deltas:
        heading = f"Change vs {base_name}, with 95% intervals"
        md += [f"## {md_escape(heading)}", ""]
        ht.append(f"<h2>{html_escape(heading)}</h2>")
        if any(d.kind != "language" for d in deltas):
            table = _delta_table(deltas)
            note = (
                f"Δ = this model − {base_name} on the same sentences: accuracy_mean in percentage points, margin_mean "
                "(cosine of the translation minus the best other candidate) ×100. 95% intervals: paired bootstrap over "
                "sentence pairs (a pair's two queries, one per direction, drawn together), resampled within each language, "
                f"{DEFAULT_RESAMPLES} resamples, seed {seed}; "
                "the statistic is the mean over languages, as in the group rows. Significant: the interval excludes 0."
            )
            md += [md_table(table), "", f"*{md_escape(note)}*", ""]
            ht += [html_table(table), f'<p class="note">{html_escape(note)}</p>']
        elif not sts_deltas:
            none = f"No retrieval sentences are shared with {base_name}, so there are no intervals."
            md += [md_escape(none), ""]
            ht.append(f"<p>{html_escape(none)}</p>")
        if sts_deltas:
            table = _sts_delta_table(sts_deltas)
            note = (
                f"Δ spearman = this model − {base_name} on the same sentence pairs, ×100. 95% intervals: paired bootstrap "
                "over sentence pairs, resampled within each set, both correlations recomputed on each draw, "
                f"{DEFAULT_RESAMPLES} resamples, seed {seed}; all sets: the mean over the dataset's sets. "
                "Significant: the interval excludes 0."
            )
            md += [md_table(table), "", f"*{md_escape(note)}*", ""]
            ht += [html_table(table), f'<p class="note">{html_escape(note)}</p>']

    for benchmark in benchmarks:
        bench_rows = [r for r in rows if r["benchmark"] == benchmark]
        datasets = list(dict.fromkeys(r["dataset"] for r in bench_rows))
        show_dataset = len(datasets) > 1
        md += [f"## {md_code_free(benchmark)}", ""]
        ht.append(f"<h2>{html_escape(benchmark)}</h2>")
        if not show_dataset:
            md += [f"Dataset: {md_code_free(datasets[0])}", ""]
            ht.append(f"<p>Dataset: <code>{html_escape(datasets[0])}</code></p>")
        for heading, groups in (("Per language", False), ("Group averages", True)):
            part = [r for r in bench_rows if is_group_code(r["src_lang"]) == groups]
            if not part:
                continue
            table = _metrics_table(
                part, groups=groups, show_dataset=show_dataset, baseline=base_values, baseline_name=base_name,
                overlaps=None if groups else overlaps,
            )  # fmt: skip
            md += [f"### {heading}", "", md_table(table), ""]
            ht += [f"<h3>{html_escape(heading)}</h3>", html_table(table)]
        note = _units_note({r["metric"] for r in bench_rows})
        if note:
            note = note[0].upper() + note[1:] + "."
            if baseline is not None:
                note += (
                    f" Δ: the metric before it, this model − {base_name}, in the same units (percentage points for percentages)."
                )
            md += [f"*{md_escape(note)}*", ""]
            ht.append(f'<p class="note">{html_escape(note)}</p>')

    levels = headline_levels(metrics, baseline) if baseline is not None else None
    if levels:  # panels in the order of the changes' figure beside
        order = list(dict.fromkeys(d.name for d in deltas))
        levels = dict(sorted(levels.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
    figures = report_figures(similarities, word_map, seed, deltas, base_name, curves, base_similarities, levels)
    if figures:
        md += ["## Figures", ""]
        ht.append("<h2>Figures</h2>")
        open_row = None
        for fig in figures:
            md += [f"![{md_escape(fig.alt)}]({fig.file})", "", f"*{md_escape(fig.caption)}*", ""]
            data = base64.b64encode(fig.png).decode("ascii")
            if fig.row != open_row:
                if open_row is not None:
                    ht.append("</div>")
                if fig.row is not None:
                    ht.append('<div class="figure-row" style="display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start">')
                open_row = fig.row
            style = ' style="flex:1 1 420px;margin:0"' if fig.row is not None else ""
            ht.append(
                f'<figure{style}><img src="data:image/png;base64,{data}" alt="{html_escape(fig.alt)}">'
                f"<figcaption>{html_escape(fig.caption)}</figcaption></figure>"
            )
        if open_row is not None:
            ht.append("</div>")

    page = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html_escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n" + "\n".join(ht) + "\n</body>\n</html>\n"
    )
    return EvaluationReport(
        markdown="\n".join(md).rstrip("\n") + "\n",
        html=page,
        figures={fig.file: fig.png for fig in figures},
        deltas=list(deltas),
    )
