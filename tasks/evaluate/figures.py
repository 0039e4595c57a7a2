"""The evaluate report's figures (`tasks/evaluate/report.py`), as reproducible PNG bytes.

Cosine histograms of translation pairs against shuffled pairs (`similarity_histogram`), a 2-D
PCA map of word embeddings (`embedding_map`), and `report_figures`, which picks the ones a
report's inputs call for, with the figures of changes and intervals
(tasks/evaluate/interval_figures.py), and captions them.

Figures are reproducible PNG bytes (tasks/reporting/figures.py: matplotlib's object API on
the Agg canvas, the default style with the bundled font, set per figure).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import matplotlib
import matplotlib.style
import numpy as np
import pyarrow as pa
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from tasks.evaluate.interval_figures import (
    delta_interval_figure,
    levels_figure,
    seeded_sample,
)
from tasks.reporting.curves import CURVES_SMOOTHING, training_curves_figure
from tasks.reporting.figures import STYLE, new_figure, png_bytes
from tasks.reporting.tables import pair_label

if TYPE_CHECKING:
    from tasks.evaluate.paired import DeltaInterval

__all__ = [
    "DELTA_INTERVALS_FILE",
    "EMBEDDING_MAP_FILE",
    "LEVELS_FILE",
    "SIMILARITY_HISTOGRAM_FILE",
    "TRAINING_CURVES_FILE",
    "PairSimilarities",
    "ReportFigure",
    "WordMap",
    "embedding_map",
    "report_figures",
    "similarity_histogram",
]

SIMILARITY_HISTOGRAM_FILE = "similarity_histogram.png"
EMBEDDING_MAP_FILE = "embedding_map.png"
DELTA_INTERVALS_FILE = "delta_intervals.png"
LEVELS_FILE = "headline_levels.png"
TRAINING_CURVES_FILE = "training_curves.png"

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
            ax.set_title(pair_label(pair.src_lang, pair.tgt_lang), fontsize=9, y=1.0, pad=4)  # fixed y: no auto-placement
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


@dataclass
class ReportFigure:
    file: str
    alt: str
    caption: str
    png: bytes
    row: str | None = None  # figures of one row are shown side by side in the HTML


def report_figures(
    similarities: Sequence[PairSimilarities],
    word_map: WordMap | None,
    seed: int,
    deltas: Sequence[DeltaInterval] = (),
    baseline_name: str = "baseline",
    curves: pa.Table | None = None,
    base_similarities: Sequence[PairSimilarities] = (),
    levels: dict[str, list[tuple[str, str, float, float]]] | None = None,
) -> list[ReportFigure]:
    """The figures a report's inputs call for, in the order it shows them, each with its alt text and
    caption: training curves, headline levels beside the changes, the changes' intervals, the cosine
    histograms and the word map (seeded samples beyond REPORT_MAX_PAIRS pairs / REPORT_MAX_CONCEPTS concepts)."""

    # the base scored the same benchmarks in the same order; anything else is not overlaid
    if [(b.src_lang, b.tgt_lang) for b in base_similarities] != [(p.src_lang, p.tgt_lang) for p in similarities]:
        base_similarities = ()
    figures = []
    if curves is not None and curves.num_rows:
        figures.append(
            ReportFigure(
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
            ReportFigure(
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
            ReportFigure(
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
        picked = seeded_sample(len(similarities), REPORT_MAX_PAIRS, seed)
        shown = [similarities[i] for i in picked]
        base_shown = [base_similarities[i] for i in picked] if base_similarities else []
        subset = (
            f" Showing {len(shown)} of {len(similarities)} language pairs (seeded sample, seed {seed})."
            if len(shown) < len(similarities)
            else ""
        )
        figures.append(
            ReportFigure(
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
        keep = {concepts[i] for i in seeded_sample(len(concepts), REPORT_MAX_CONCEPTS, seed)}
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
            ReportFigure(
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
