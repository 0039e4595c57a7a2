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
  over sentence pairs (`tasks.evaluate.bootstrap`), an error-bar figure of those changes per language
  and group (`delta_interval_figure`), and a sentence at the top when in-domain (held-out
  rows of the training data: benchmark ``retrieval``) and out-of-domain (Tatoeba, ...)
  headlines disagree;
* figures with captions: cosine histograms of translation pairs against shuffled pairs
  (`similarity_histogram`) and a 2-D PCA map of word embeddings (`embedding_map`).

The Markdown links figures by file name (save `EvaluationReport.figures` next to it); the
HTML embeds them as base64 PNGs and loads nothing from outside. Every string that comes
from data is escaped (`html.escape` in HTML, backslash escapes in Markdown).

Figures are reproducible PNG bytes (tasks/reporting/figures.py: matplotlib's object API on
the Agg canvas, the default style with the bundled font, set per figure).
"""

from __future__ import annotations

import base64
import functools
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import matplotlib
import matplotlib.style
import numpy as np
import pyarrow as pa
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from tasks.evaluate.benchmarks.registry import in_domain as benchmark_in_domain
from tasks.evaluate.bootstrap import (
    DEFAULT_RESAMPLES,
    BootstrapInterval,
    Stratum,
    paired_bootstrap,
    paired_spearman_mean_bootstrap,
)
from tasks.languages import GROUP_PREFIX, is_group_code
from tasks.reporting.figures import STYLE, new_figure, png_bytes
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
)

__all__ = [
    "DELTA_INTERVALS_FILE",
    "LEVELS_FILE",
    "TRAINING_CURVES_FILE",
    "EMBEDDING_MAP_FILE",
    "SIMILARITY_HISTOGRAM_FILE",
    "DeltaInterval",
    "EvaluationReport",
    "PairSimilarities",
    "WordMap",
    "build_report",
    "delta_interval_figure",
    "disagreement_sentence",
    "embedding_map",
    "paired_delta_intervals",
    "similarity_histogram",
]

SIMILARITY_HISTOGRAM_FILE = "similarity_histogram.png"
EMBEDDING_MAP_FILE = "embedding_map.png"
DELTA_INTERVALS_FILE = "delta_intervals.png"
LEVELS_FILE = "headline_levels.png"
TRAINING_CURVES_FILE = "training_curves.png"
DELTA_ROW_INCHES = 0.2  # per language / group row of the error-bar figure
DELTA_MAX_LANGUAGES = 40  # language rows per panel beyond which a seeded sample is shown

HIST_PANEL_INCHES = (3.5, 2.75)  # per language pair; exact in binary so pixel sizes are exact
HIST_LEGEND_INCHES = 0.3  # band above the panels for the shared legend
HIST_MAX_COLS = 4
HIST_BINS = 40
_HIST_SERIES = (("matched (translations)", "#1f77b4"), ("shuffled (derangement)", "#ff7f0e"))
MAP_INCHES = (8.0, 6.5)
MAP_MAX_WORD_LABELS = 40  # beyond this many points, words are not written next to points
MAP_CONCEPT_LABELS = 14  # concepts labelled: a spread subset (farthest-point), so labels do not pile up
# build_report shows at most this many histogram panels / map concepts (a seeded sample).
REPORT_MAX_PAIRS = 36
REPORT_MAX_CONCEPTS = 40

_KEY_COLUMNS = ("benchmark", "dataset", "src_lang", "tgt_lang", "metric")
_REQUIRED_COLUMNS = (*_KEY_COLUMNS, "value", "n")
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
class PairSimilarities:
    """Cosine similarities of one language pair: translation pairs vs a seeded derangement of the targets."""

    src_lang: str
    tgt_lang: str
    matched: np.ndarray  # cos(x_i, y_i) for translation pairs
    shuffled: np.ndarray  # cos(x_i, y_perm(i)) for a seeded derangement


@dataclass
class WordMap:
    """Word embeddings for the 2-D map: one row per word, `concept` shared by translations of one another."""

    words: list[str]
    langs: list[str]
    concept: list[str]  # shared id of translations, e.g. the English word
    vectors: np.ndarray  # [n, dim]


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


def _rows_of(table: pa.Table, what: str) -> list[dict[str, Any]]:
    missing = [c for c in _REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{what} table lacks columns {missing}; expected the METRICS_SCHEMA columns")
    rows = table.select(list(_REQUIRED_COLUMNS)).to_pylist()
    seen: set[tuple[Any, ...]] = set()
    for row in rows:
        key = tuple(row[c] for c in _KEY_COLUMNS)
        if key in seen:
            raise ValueError(f"{what} table has more than one row for {dict(zip(_KEY_COLUMNS, key))}")
        seen.add(key)
    return rows


def _ordered_metrics(metrics: list[str]) -> list[str]:
    first_seen = list(dict.fromkeys(metrics))
    known = [m for m in _METRIC_ORDER if m in first_seen]
    return known + [m for m in first_seen if m not in _METRIC_ORDER]


def _pair_label(src: str, tgt: str | None) -> str:
    return src if tgt is None else f"{src} → {tgt}"


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

    out: list[list[Cell]] = []
    for (dataset, src, tgt), cells in sorted(by_row.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
        label = _pair_label(src.removeprefix(GROUP_PREFIX) if groups else src, tgt)
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
    return Table(header, out, numeric)


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


# ---------------------------------------------------------------------------------------------
# Figures


def _finite(values: np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be 1-D, got shape {array.shape}")
    return array[np.isfinite(array)]


def _histogram_floor(pairs: Sequence[PairSimilarities]) -> float:
    """Left end of the shared x range: -1, or higher when every cosine is higher.

    Many encoders (E5 among them) put all cosines in [0.7, 1]; on [-1, 1] both
    histograms would be two slivers at the right edge. Rounded down to 0.1 so that
    panels and reports compare.
    """
    values = [np.asarray(v, dtype=np.float64) for p in pairs for v in (p.matched, p.shuffled)]
    finite = np.concatenate([v[np.isfinite(v)] for v in values]) if values else np.zeros(0)
    if finite.size == 0:
        return -1.0
    return float(max(-1.0, min(0.9, math.floor((finite.min() - 0.05) * 10) / 10)))


def similarity_histogram(pairs: Sequence[PairSimilarities], baseline: Sequence[PairSimilarities] = ()) -> bytes:
    """PNG: one panel per language pair, histograms of matched vs shuffled cosines on a shared x range
    from the lowest cosine (rounded down to 0.1, at least -1) to 1. With `baseline` (the base
    model's cosines of the same pairs, in the same order) its two histograms are drawn over them
    as dotted outlines.

    Panels are HIST_PANEL_INCHES at figures.DPI each, HIST_MAX_COLS to a row, under a HIST_LEGEND_INCHES band; densities, so pairs of
    any size compare; dashed lines mark the means, which the panel's corner also gives.
    """
    if not pairs:
        raise ValueError("similarity_histogram needs at least one language pair")
    ncols = min(HIST_MAX_COLS, len(pairs))
    nrows = math.ceil(len(pairs) / ncols)
    if baseline and [(b.src_lang, b.tgt_lang) for b in baseline] != [(p.src_lang, p.tgt_lang) for p in pairs]:
        raise ValueError("similarity_histogram: the baseline's pairs must be the same language pairs in the same order")
    base_of = dict(enumerate(baseline))
    low = _histogram_floor([*pairs, *baseline])
    bins = np.linspace(low, 1.0, HIST_BINS + 1)
    # A fixed layout in inches (constrained layout takes seconds for dozens of panels).
    panel_w, panel_h = HIST_PANEL_INCHES
    left, right, top, bottom = 0.55, 0.1, 0.3, 0.5  # per panel: tick labels + ylabel, title, xlabel
    legend_entries = 4 if base_of else 2
    legend_cols = legend_entries if ncols >= 2 else 2  # one panel is too narrow for four entries in a row
    legend_band = HIST_LEGEND_INCHES * math.ceil(legend_entries / legend_cols)
    width, height = ncols * panel_w, nrows * panel_h + legend_band
    with matplotlib.style.context(STYLE):
        fig = new_figure(width, height, layout=None)
        axes = fig.subplots(
            nrows,
            ncols,
            sharex=True,
            squeeze=False,
            gridspec_kw={
                "left": left / width,
                "right": 1 - right / width,
                "bottom": bottom / height,
                "top": 1 - (top + legend_band) / height,
                "wspace": (left + right) / (panel_w - left - right),
                "hspace": (top + bottom) / (panel_h - top - bottom),
            },
        )
        for index, ax in enumerate(axes.flat):
            if index >= len(pairs):
                ax.set_axis_off()
                continue
            pair = pairs[index]
            series = [
                (label, _finite(values, label.split()[0]), colour)
                for (label, colour), values in zip(_HIST_SERIES, (pair.matched, pair.shuffled))
            ]
            means = []
            for label, values, colour in series:
                clipped = np.clip(values, -1.0, 1.0)  # float error can put a cosine a hair past 1
                if clipped.size:
                    counts, _ = np.histogram(clipped, bins=bins)
                    density = counts / (clipped.size * np.diff(bins))
                    ax.stairs(density, bins, fill=True, color=colour, alpha=0.45, linewidth=0)
                    ax.stairs(density, bins, color=colour, linewidth=1.0)
                    mean = float(clipped.mean())
                    ax.axvline(mean, color=colour, linestyle="--", linewidth=1.0)
                    means.append(f"{mean:.2f}")
                else:
                    means.append("n/a")
            base = base_of.get(index)
            base_means = []
            if base is not None:
                for values, (_, colour) in zip((base.matched, base.shuffled), _HIST_SERIES):
                    clipped = np.clip(_finite(values, "baseline"), -1.0, 1.0)
                    if clipped.size:
                        counts, _ = np.histogram(clipped, bins=bins)
                        ax.stairs(counts / (clipped.size * np.diff(bins)), bins, color=colour, linewidth=1.2, linestyle=":")
                        base_means.append(f"{float(clipped.mean()):.2f}")
                    else:
                        base_means.append("n/a")
            ax.set_xlim(low, 1.0)
            ax.set_ylim(0.0, ax.get_ylim()[1] * (1.45 if base_means else 1.3))  # headroom for the text in the corner
            ax.xaxis.set_major_locator(MaxNLocator(5))
            ax.yaxis.set_major_locator(MaxNLocator(4))
            ax.set_title(_pair_label(pair.src_lang, pair.tgt_lang), fontsize=9, y=1.0, pad=4)  # fixed y: no auto-placement
            ax.text(
                0.02,
                0.97,
                f"mean {means[0]} vs {means[1]}"
                + (f"\nbase {base_means[0]} vs {base_means[1]}" if base_means else "")
                + f"\nn = {series[0][1].size:,} / {series[1][1].size:,}",
                transform=ax.transAxes,
                ha="left",
                va="top",
                fontsize=7,
            )
            ax.tick_params(labelsize=7)
            if index // ncols == nrows - 1 or index + ncols >= len(pairs):
                ax.set_xlabel("cosine similarity")
                ax.xaxis.set_tick_params(labelbottom=True)
            if index % ncols == 0:
                ax.set_ylabel("density")
        handles: list[Any] = [Patch(facecolor=c, edgecolor=c, alpha=0.6, label=label) for label, c in _HIST_SERIES]
        if base_of:
            from matplotlib.lines import Line2D

            handles += [
                Line2D([], [], color=c, linestyle=":", linewidth=1.2, label=f"base: {label.split()[0]}")
                for label, c in _HIST_SERIES
            ]
        fig.legend(
            handles=handles,
            loc="center",
            bbox_to_anchor=(0.5, 1 - legend_band / 2 / height),
            ncols=legend_cols,
            fontsize=8,
            frameon=False,
        )
        with warnings.catch_warnings():  # scripts DejaVu Sans lacks render as boxes; no warning per glyph
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            return png_bytes(fig)


def _pca_2d(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalise rows, centre, project on the first two principal axes (SVD); returns (coords, variance ratio)."""
    x = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    x = x - x.mean(axis=0, keepdims=True)
    coords = np.zeros((x.shape[0], 2))
    ratio = np.zeros(2)
    if x.shape[0] < 2 or not np.any(x):
        return coords, ratio
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    k = min(2, vt.shape[0])
    components = vt[:k]
    # An axis's sign is arbitrary: make each one's largest loading positive so the map is stable.
    signs = np.sign(components[np.arange(k), np.argmax(np.abs(components), axis=1)])
    components = components * np.where(signs == 0, 1.0, signs)[:, None]
    coords[:, :k] = x @ components.T
    variance = s**2
    ratio[:k] = variance[:k] / variance.sum()
    return coords, ratio


@functools.lru_cache(maxsize=1)
def _font() -> Any:
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    return FT2Font(font_manager.findfont("DejaVu Sans", fallback_to_default=True))


def _renderable(text: str) -> bool:
    """Whether the bundled font has a glyph for every character (else matplotlib draws boxes)."""
    font = _font()
    return all(ch.isspace() or font.get_char_index(ord(ch)) != 0 for ch in text)


def _spread(points: np.ndarray, k: int) -> list[int]:
    """Indices of up to k points spread over the set: farthest-point order from the point
    farthest from the mean (deterministic; ties go to the lower index)."""
    if len(points) <= k:
        return list(range(len(points)))
    chosen = [int(np.argmax(np.linalg.norm(points - points.mean(axis=0), axis=1)))]
    nearest = np.linalg.norm(points - points[chosen[0]], axis=1)
    while len(chosen) < k:
        chosen.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, np.linalg.norm(points - points[chosen[-1]], axis=1))
    return sorted(chosen)


def embedding_map(word_map: WordMap, method: Literal["pca"] = "pca") -> bytes:
    """PNG: 2-D PCA of the (L2-normalised) word vectors, coloured by language, each concept's translations joined.

    Lines join every word to its concept's centroid; MAP_CONCEPT_LABELS concepts spread over the
    map (`_spread`) are labelled, each label pushed outwards from the middle with a leader line;
    words are written next to their points while there are at most MAP_MAX_WORD_LABELS.
    """
    if method != "pca":
        raise ValueError(f"unknown projection method {method!r}; only 'pca' is supported")
    vectors = np.asarray(word_map.vectors)
    n = len(word_map.words)
    if vectors.ndim != 2 or vectors.shape[0] != n or len(word_map.langs) != n or len(word_map.concept) != n:
        raise ValueError(
            f"WordMap needs words, langs, concept and vectors rows of one length and 2-D vectors; got "
            f"{n} words, {len(word_map.langs)} langs, {len(word_map.concept)} concepts, vectors {vectors.shape}"
        )
    if n == 0:
        raise ValueError("embedding_map needs at least one word")
    coords, ratio = _pca_2d(vectors)
    langs = sorted(set(word_map.langs))
    palette = matplotlib.colormaps["tab10" if len(langs) <= 10 else "tab20"]
    colour_of = {lang: palette(i % palette.N) for i, lang in enumerate(langs)}
    concepts = list(dict.fromkeys(word_map.concept))
    members = {c: [i for i, ci in enumerate(word_map.concept) if ci == c] for c in concepts}

    centres = np.array([coords[members[c]].mean(axis=0) for c in concepts])
    labelled = [concepts[i] for i in _spread(centres, MAP_CONCEPT_LABELS)]
    middle = coords.mean(axis=0)
    span = float(np.ptp(coords, axis=0).max()) or 1.0

    with matplotlib.style.context(STYLE):
        fig = new_figure(*MAP_INCHES)
        ax = fig.add_subplot()
        for concept in concepts:
            idx = members[concept]
            centre = coords[idx].mean(axis=0)
            if len(idx) > 1:
                for i in idx:
                    ax.plot([centre[0], coords[i, 0]], [centre[1], coords[i, 1]], color="0.6", linewidth=0.7, zorder=1)
        for concept in labelled:
            centre = coords[members[concept]].mean(axis=0)
            # pushed outwards from the middle of the cloud, where most points are, with a leader line
            away = centre - middle
            away = away / np.linalg.norm(away) if np.linalg.norm(away) > 1e-9 * span else np.array([0.0, 1.0])
            ax.annotate(
                concept,
                centre,
                xytext=tuple(away * 28),
                textcoords="offset points",
                fontsize=8,
                fontweight="bold",
                ha="left" if away[0] >= 0 else "right",
                va="bottom" if away[1] >= 0 else "top",
                zorder=4,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "0.5", "alpha": 0.85},
                arrowprops={"arrowstyle": "-", "color": "0.45", "linewidth": 0.6},
            )
        for lang in langs:
            idx = [i for i, li in enumerate(word_map.langs) if li == lang]
            ax.scatter(
                coords[idx, 0],
                coords[idx, 1],
                s=36,
                color=colour_of[lang],
                label=lang,
                zorder=3,
                edgecolors="white",
                linewidths=0.5,
            )
        if n <= MAP_MAX_WORD_LABELS:
            for i, word in enumerate(word_map.words):
                if not _renderable(word):  # no font here for the script: the point's colour still names the language
                    continue
                ax.annotate(
                    word,
                    coords[i],
                    xytext=(4, 3),
                    textcoords="offset points",
                    fontsize=7,
                    color=colour_of[word_map.langs[i]],
                    zorder=5,
                )
        ax.set_xlabel(f"PC1 ({ratio[0]:.0%} of variance)")
        ax.set_ylabel(f"PC2 ({ratio[1]:.0%} of variance)")
        ax.set_title(f"{n} words, {len(concepts)} concepts, {len(langs)} languages (PCA)", fontsize=10)
        ax.margins(0.08)
        ax.legend(title="language", loc="best", fontsize=8, title_fontsize=8, ncols=1 if len(langs) <= 12 else 2)
        ax.grid(True, linewidth=0.3, alpha=0.5)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            return png_bytes(fig)


# ---------------------------------------------------------------------------------------------
# Paired deltas with bootstrap intervals

_ITEM_KEY = ("benchmark", "dataset", "src_lang", "tgt_lang", "direction", "item")
_ITEM_COLUMNS = (*_ITEM_KEY, "correct", "margin")


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


def _items_frame(table: pa.Table, what: str) -> Any:
    import polars as pl

    missing = [c for c in _ITEM_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{what} items table lacks columns {missing}; expected the ITEMS_SCHEMA columns")
    frame = pl.from_arrow(table.select(list(_ITEM_COLUMNS)))
    if frame.select(_ITEM_KEY).is_duplicated().any():
        first = frame.filter(frame.select(_ITEM_KEY).is_duplicated()).row(0, named=True)
        raise ValueError(f"{what} items table has more than one row for { ({k: first[k] for k in _ITEM_KEY}) }")
    return frame


_Strata = dict[tuple[str, str], tuple[Stratum, Stratum]]  # (src, tgt) -> (accuracy, margin) differences, unit: sentence pair


def _paired_strata(items: pa.Table, baseline_items: pa.Table) -> dict[tuple[str, str], _Strata]:
    """(benchmark, dataset) -> (src_lang, tgt_lang) -> per-item (accuracy, margin) differences,
    both directions' queries of the pair together, resampled by sentence pair (`item`); items
    are paired on their full key."""
    import polars as pl

    ours = _items_frame(items, "evaluated")
    theirs = _items_frame(baseline_items, "baseline")
    joined = ours.join(theirs, on=list(_ITEM_KEY), how="inner", suffix="_base").sort(list(_ITEM_KEY))
    joined = joined.with_columns(
        (pl.col("correct").cast(pl.Float64) - pl.col("correct_base").cast(pl.Float64)).alias("accuracy_diff"),
        (pl.col("margin").cast(pl.Float64) - pl.col("margin_base").cast(pl.Float64)).alias("margin_diff"),
    )
    strata: dict[tuple[str, str], _Strata] = {}
    parts = joined.partition_by(["benchmark", "dataset", "src_lang", "tgt_lang"], as_dict=True, maintain_order=True)
    for (benchmark, dataset, src, tgt), part in parts.items():
        units = part["item"].to_numpy()
        strata.setdefault((benchmark, dataset), {})[src, tgt] = (
            Stratum(part["accuracy_diff"].to_numpy(), units),
            Stratum(part["margin_diff"].to_numpy(), units),
        )
    return strata


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
    from tasks.evaluate.groups import LANGUAGE_GROUPS
    from tasks.evaluate.retrieval import XX_YY_GROUP, dataset_pivot

    group_rows = [] if metrics is None else [r for r in _rows_of(metrics, "metrics") if is_group_code(r["src_lang"])]
    out: list[DeltaInterval] = []
    for (benchmark, dataset), pairs in _paired_strata(items, baseline_items).items():
        pivot = dataset_pivot(pairs)
        pivot_pairs = {pair: diffs for pair, diffs in pairs.items() if pivot is None or pair[1] == pivot}
        by_src = {src: diffs for (src, _), diffs in pivot_pairs.items()}
        chosen: list[tuple[str, str, list[tuple[Stratum, Stratum]]]] = [
            ("all", "all languages" if pivot else "all pairs", list(pivot_pairs.values()))
        ]
        groups = {
            r["src_lang"].removeprefix(GROUP_PREFIX)
            for r in group_rows
            if (r["benchmark"], r["dataset"], r["tgt_lang"], r["metric"]) == (benchmark, dataset, pivot, "accuracy_mean")
        }
        for name in sorted(g for g in groups if g in LANGUAGE_GROUPS):
            chosen.append(("group", name, [by_src[lang] for lang in LANGUAGE_GROUPS[name].langs if lang in by_src]))
        if pivot is not None:
            chosen.append(("xx-yy", f"{XX_YY_GROUP} pairs", [d for (src, tgt), d in pairs.items() if pivot not in (src, tgt)]))
        chosen += [("language", src if pivot else _pair_label(src, tgt), [d]) for (src, tgt), d in sorted(pivot_pairs.items())]
        for kind, label, strata in chosen:
            if not strata:
                continue
            accuracy = paired_bootstrap([a for a, _ in strata], resamples=resamples, seed=seed)
            # per-language rows feed the figure, which plots accuracy only
            margin = None if kind == "language" else paired_bootstrap([m for _, m in strata], resamples=resamples, seed=seed)
            out.append(DeltaInterval(benchmark, dataset, kind, label, accuracy, margin))
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


_STS_KEY = ("benchmark", "dataset", "src_lang", "tgt_lang", "item")


def sts_delta_intervals(
    sts_items: pa.Table, baseline_sts_items: pa.Table, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> list[StsDeltaInterval]:
    """Per STS benchmark/dataset: the paired bootstrap interval of the change in Spearman over the
    mean of its sets ("all sets", when it has several) and per set. Pairs are matched on
    (set, item); each set's sentence pairs are resampled within the set, both models' correlations
    recomputed on the same draw (`bootstrap.paired_spearman_mean_bootstrap`)."""
    import polars as pl

    ours = pl.from_arrow(sts_items.select([*_STS_KEY, "cosine", "gold"]))
    theirs = pl.from_arrow(baseline_sts_items.select([*_STS_KEY, "cosine"]))
    joined = ours.join(theirs, on=list(_STS_KEY), how="inner", suffix="_base").sort(list(_STS_KEY))
    out: list[StsDeltaInterval] = []
    by_dataset = joined.partition_by(["benchmark", "dataset"], as_dict=True, maintain_order=True)
    for (benchmark, dataset), part in by_dataset.items():
        sets = {
            key: (frame["cosine"].to_numpy(), frame["cosine_base"].to_numpy(), frame["gold"].to_numpy())
            for key, frame in part.partition_by(["src_lang", "tgt_lang"], as_dict=True, maintain_order=True).items()
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
                    src if src == tgt else _pair_label(src, tgt),
                    paired_spearman_mean_bootstrap([arrays], resamples=resamples, seed=seed),
                )
            )
    return out


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


def delta_interval_figure(deltas: Sequence[DeltaInterval], seed: int = 0) -> bytes:
    """PNG: one panel per benchmark/dataset, the accuracy change (percentage points) of each
    headline and language with its 95% interval; green = significant gain, red = significant
    loss, grey = within noise. Over DELTA_MAX_LANGUAGES languages a panel shows a seeded sample."""
    panels: dict[str, list[DeltaInterval]] = {}
    for d in deltas:
        panels.setdefault(d.name, []).append(d)
    if not panels:
        raise ValueError("delta_interval_figure needs at least one interval")
    shown: dict[str, list[DeltaInterval]] = {}
    for name, members in panels.items():
        heads = [d for d in members if d.kind != "language"]
        langs = [d for d in members if d.kind == "language"]
        langs = [langs[i] for i in _sample(len(langs), DELTA_MAX_LANGUAGES, seed)]
        shown[name] = heads + langs
    heights = [len(rows) * DELTA_ROW_INCHES + 0.9 for rows in shown.values()]
    with matplotlib.style.context(STYLE):
        fig = new_figure(7.0, sum(heights))
        axes = fig.subplots(len(shown), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, (name, rows) in zip(axes, shown.items()):
            y = np.arange(len(rows))[::-1]
            centre = np.array([d.accuracy.delta for d in rows]) * 100
            low = np.array([d.accuracy.low for d in rows]) * 100
            high = np.array([d.accuracy.high for d in rows]) * 100
            colours = [("#17692b" if d.accuracy.delta > 0 else "#b3261e") if d.accuracy.significant else "0.45" for d in rows]
            ax.axvline(0.0, color="0.3", linewidth=0.8)
            for yi, c, lo, hi, colour, d in zip(y, centre, low, high, colours, rows):
                bold = d.kind != "language"
                ax.errorbar(
                    c,
                    yi,
                    xerr=[[c - lo], [hi - c]],
                    fmt="D" if bold else "o",
                    color=colour,
                    markersize=5 if bold else 3.5,
                    capsize=2,
                    linewidth=1.4 if bold else 0.9,
                )
            ax.set_yticks(y, [d.label for d in rows], fontsize=7)
            ax.set_ylim(-0.7, len(rows) - 0.3)
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("Δ accuracy_mean (percentage points), 95% interval")
            ax.grid(True, axis="x", linewidth=0.3, alpha=0.5)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            return png_bytes(fig)


def headline_levels(metrics: pa.Table, baseline: pa.Table) -> dict[str, list[tuple[str, str, float, float]]]:
    """Per benchmark/dataset: (label, metric, baseline value, value) of its headline metric over
    all languages (the mean of the language rows) and of each group row, where both models have it."""
    from tasks.evaluate.benchmarks.registry import headline_metric

    def values(table: pa.Table, what: str) -> dict[tuple[str, str, str], list[float]]:
        rows = _rows_of(table, what)
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


def levels_figure(
    levels: dict[str, list[tuple[str, str, float, float]]], baseline_name: str, model_name: str = "this model"
) -> bytes:
    """PNG: per benchmark/dataset, the headline metric of the baseline and of this model as
    horizontal bars (all languages, then each group), the values written at the bars' ends."""
    if not levels:
        raise ValueError("levels_figure needs at least one benchmark with values of both models")
    heights = [len(rows) * 2 * DELTA_ROW_INCHES + 0.9 for rows in levels.values()]
    with matplotlib.style.context(STYLE):
        fig = new_figure(5.5, sum(heights))
        axes = fig.subplots(len(levels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for index, (ax, (name, rows)) in enumerate(zip(axes, levels.items())):
            y = np.arange(len(rows))[::-1].astype(float)
            scale = [metric_scale(metric) for _, metric, _, _ in rows]
            base = np.array([b * k for (_, _, b, _), k in zip(rows, scale)])
            ours = np.array([v * k for (_, _, _, v), k in zip(rows, scale)])
            ax.barh(y + 0.2, base, height=0.38, color="0.7", label=baseline_name)
            ax.barh(y - 0.2, ours, height=0.38, color="#1f77b4", label=model_name)
            top = float(max(np.max(base), np.max(ours), 1e-9))
            for yi, b, v in zip(y, base, ours):
                ax.text(b + top * 0.01, yi + 0.2, f"{b:.1f}", va="center", fontsize=6.5, color="0.35")
                ax.text(v + top * 0.01, yi - 0.2, f"{v:.1f}", va="center", fontsize=6.5, color="#1f77b4")
            ax.set_yticks(y, [label for label, _, _, _ in rows], fontsize=7)
            ax.set_xlim(min(0.0, float(np.min(base)), float(np.min(ours))), top * 1.12)
            ax.set_ylim(-0.7, len(rows) - 0.3)
            metrics = sorted({metric for _, metric, _, _ in rows})
            units = "%" if all(metric_scale(m) == 100 for m in metrics) else "value"
            ax.set_title(name, fontsize=9)
            ax.set_xlabel(f"{', '.join(metrics)} ({units})")
            ax.grid(True, axis="x", linewidth=0.3, alpha=0.5)
            if index == 0:  # above the panels, where it covers no bar
                fig.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncols=2, fontsize=7, frameon=False)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            return png_bytes(fig)


# ---------------------------------------------------------------------------------------------
# Rendering


@dataclass
class _Figure:
    file: str
    alt: str
    caption: str
    png: bytes
    row: str | None = None  # figures of one row are shown side by side in the HTML


def _sample(n: int, limit: int, seed: int) -> list[int]:
    """Indices of all n items, or a seeded sample of `limit` of them in their original order."""
    if n <= limit:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size=limit, replace=False).tolist())


def _figures(
    similarities: Sequence[PairSimilarities],
    word_map: WordMap | None,
    seed: int,
    deltas: Sequence[DeltaInterval] = (),
    baseline_name: str = "baseline",
    curves: pa.Table | None = None,
    base_similarities: Sequence[PairSimilarities] = (),
    levels: dict[str, list[tuple[str, str, float, float]]] | None = None,
) -> list[_Figure]:
    from tasks.reporting.curves import CURVES_SMOOTHING, training_curves_figure

    # the base scored the same benchmarks in the same order; anything else is not overlaid
    if [(b.src_lang, b.tgt_lang) for b in base_similarities] != [(p.src_lang, p.tgt_lang) for p in similarities]:
        base_similarities = ()
    figures = []
    if curves is not None and curves.num_rows:
        figures.append(
            _Figure(
                TRAINING_CURVES_FILE,
                "Training curves of the scored model",
                "The train artifact's curves: loss per objective (each its own colour) and the weighted total (wide grey, "
                f"underneath), as an exponential moving average (weight {CURVES_SMOOTHING}) over the raw per-step values "
                "(faint); the learning rate; the gradient norm before clipping; dev retrieval accuracy (black: the mean over "
                "languages, thin: each language), measured before the first update (step 0, the base) and at each evaluation. "
                "Dev accuracy is measured in the training loop, on the weights before any WiSE-FT interpolation and at the "
                "training max length. What to look for: losses that flatten while dev accuracy still rises, or dev accuracy "
                "that falls while the loss keeps dropping (over-fitting).",
                training_curves_figure(curves, "training curves"),
            )
        )
    pair_row = "levels" if levels and deltas else None
    if levels:
        figures.append(
            _Figure(
                LEVELS_FILE,
                f"Headline scores of {baseline_name} and this model",
                f"Each benchmark's headline metric for {baseline_name} (grey) and this model (blue): the mean over the "
                "language rows (all languages), then each language group. The levels the changes beside are measured from.",
                levels_figure(levels, baseline_name),
                pair_row,
            )
        )
    if deltas:
        figures.append(
            _Figure(
                DELTA_INTERVALS_FILE,
                f"Change in retrieval accuracy vs {baseline_name} with 95% intervals",
                f"Change in accuracy_mean from {baseline_name} to this model, in percentage points, with paired "
                "bootstrap 95% intervals over sentences: first the headlines (diamonds: all languages, language "
                "groups, xx-yy pairs), then each language (dots); one panel per benchmark/dataset. Green: the "
                "interval is above zero; red: below; grey: it contains zero. What to look for: a change whose "
                "interval crosses zero is within the noise of this many sentences.",
                delta_interval_figure(deltas, seed),
                pair_row,
            )
        )
    if similarities:
        picked = _sample(len(similarities), REPORT_MAX_PAIRS, seed)
        shown = [similarities[i] for i in picked]
        base_shown = [base_similarities[i] for i in picked] if base_similarities else []
        subset = (
            f" Showing {len(shown)} of {len(similarities)} language pairs (seeded sample, seed {seed})."
            if len(shown) < len(similarities)
            else ""
        )
        figures.append(
            _Figure(
                SIMILARITY_HISTOGRAM_FILE,
                "Cosine similarity of translation pairs vs shuffled pairs",
                "Cosine similarity of each sentence with its translation (matched, blue) and with the translation "
                "of another sentence under a seeded derangement (shuffled, orange), one panel per language pair; "
                "dashed lines mark the means. What to look for: matched pairs should sit well to the right of the "
                "shuffled ones with little overlap; where the two overlap, the encoder does not tell translations "
                "from unrelated sentences for that pair."
                + (f" Dotted outlines: {baseline_name}'s cosines of the same pairs." if base_similarities else "")
                + subset,
                similarity_histogram(shown, base_shown),
            )
        )
    if word_map is not None and len(word_map.words) > 0:
        concepts = list(dict.fromkeys(word_map.concept))
        keep = {concepts[i] for i in _sample(len(concepts), REPORT_MAX_CONCEPTS, seed)}
        shown_map = word_map
        subset = ""
        if len(keep) < len(concepts):
            idx = [i for i, c in enumerate(word_map.concept) if c in keep]
            shown_map = WordMap(
                words=[word_map.words[i] for i in idx],
                langs=[word_map.langs[i] for i in idx],
                concept=[word_map.concept[i] for i in idx],
                vectors=np.asarray(word_map.vectors)[idx],
            )
            subset = f" Showing {len(keep)} of {len(concepts)} concepts (seeded sample, seed {seed})."
        figures.append(
            _Figure(
                EMBEDDING_MAP_FILE,
                "2-D PCA map of word embeddings by language",
                "Word embeddings (L2-normalised) projected on their first two principal components, coloured by "
                "language; grey lines join the translations of one concept to their centre; a spread subset of "
                f"concepts (up to {MAP_CONCEPT_LABELS}) is labelled, labels pushed outwards with a leader line. What to look for: translations of one concept should cluster together; points that "
                "group by language instead mean the space is not language-agnostic." + subset,
                embedding_map(shown_map),
            )
        )
    return figures


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
    """
    rows = _rows_of(metrics, "metrics")
    base_name = baseline_name or "baseline"
    base_values: dict[tuple[Any, ...], float] | None = None
    unmatched_baseline = 0
    if baseline is not None:
        base_rows = _rows_of(baseline, "baseline")
        base_values = {tuple(r[c] for c in _KEY_COLUMNS): r["value"] for r in base_rows}
        ours = {tuple(r[c] for c in _KEY_COLUMNS) for r in rows}
        unmatched_baseline = sum(1 for key in base_values if key not in ours)

    paired = items is not None and baseline_items is not None
    deltas = paired_delta_intervals(items, baseline_items, metrics, seed=seed) if paired else []
    sts_paired = sts_items is not None and baseline_sts_items is not None and sts_items.num_rows > 0
    sts_deltas = sts_delta_intervals(sts_items, baseline_sts_items, seed=seed) if sts_paired else []
    md: list[str] = [f"# {md_escape(title)}", ""]
    ht: list[str] = [f"<h1>{html_escape(title)}</h1>"]
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
                note += " Δ columns are in the same units (percentage points for percentages)."
            md += [f"*{md_escape(note)}*", ""]
            ht.append(f'<p class="note">{html_escape(note)}</p>')

    levels = headline_levels(metrics, baseline) if baseline is not None else None
    if levels:  # panels in the order of the changes' figure beside
        order = list(dict.fromkeys(d.name for d in deltas))
        levels = dict(sorted(levels.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
    figures = _figures(similarities, word_map, seed, deltas, base_name, curves, base_similarities, levels)
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
