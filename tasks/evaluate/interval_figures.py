"""Figures of the change between two models, each with its 95% interval, as reproducible PNG
bytes: the evaluate report's paired changes per headline and language (`delta_interval_figure`)
and the headline levels of both models (`levels_figure`), and the sweep comparison's delta and
interval per variant and column (`intervals_figure`, tasks/evaluate/compare.py)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import matplotlib
import matplotlib.style
import numpy as np

from tasks.evaluate.bootstrap import BootstrapInterval
from tasks.evaluate.columns import Column
from tasks.reporting.figures import STYLE, new_figure, png_bytes
from tasks.reporting.tables import metric_scale

if TYPE_CHECKING:
    from tasks.evaluate.paired import DeltaInterval

DELTA_ROW_INCHES = 0.2  # per language / group row of the error-bar figure
DELTA_MAX_LANGUAGES = 40  # language rows per panel beyond which a seeded sample is shown
INTERVALS_FIGURE_FILE = "intervals.png"


def seeded_sample(n: int, limit: int, seed: int) -> list[int]:
    """Indices of all n items, or a seeded sample of `limit` of them in their original order."""
    if n <= limit:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size=limit, replace=False).tolist())


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
        langs = [langs[i] for i in seeded_sample(len(langs), DELTA_MAX_LANGUAGES, seed)]
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


# (label, column spec -> delta in raw units, column spec -> interval): one row of `intervals_figure`
IntervalRow = tuple[str, Mapping[str, float | None], Mapping[str, BootstrapInterval | None]]


def intervals_figure(columns: Sequence[Column], rows: Sequence[IntervalRow]) -> bytes:
    """PNG: one panel per column, a horizontal error bar per row (its delta and 95% interval), a zero line.

    `rows`: (label, column spec -> delta in raw units, column spec -> interval). Filled green/red
    where the interval excludes zero, grey within noise, hollow without an interval."""
    ncols = min(3, len(columns))
    nrows = math.ceil(len(columns) / ncols)
    panel_height = 0.9 + 0.28 * len(rows)
    y = np.arange(len(rows))[::-1].astype(float)
    labels = [label for label, _, _ in rows]
    with matplotlib.style.context(STYLE):
        fig = new_figure(4.2 * ncols, panel_height * nrows)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
        for ax, column in zip(axes.flat, columns):
            scale = metric_scale(column.metric)
            delta = np.array([np.nan if d.get(column.spec) is None else d[column.spec] * scale for _, d, _ in rows], dtype=float)
            found = [i.get(column.spec) for _, _, i in rows]
            bounds = np.array([[np.nan, np.nan] if i is None else [i.low * scale, i.high * scale] for i in found], dtype=float)
            bounds = bounds.reshape(len(rows), 2)
            has = np.isfinite(bounds[:, 0]) & np.isfinite(delta)
            up, down = has & (bounds[:, 0] > 0), has & (bounds[:, 1] < 0)
            for mask, colour in ((up, "#17692b"), (down, "#b3261e"), (has & ~up & ~down, "#777777")):
                if mask.any():
                    err = np.abs(np.vstack([delta[mask] - bounds[mask, 0], bounds[mask, 1] - delta[mask]]))
                    ax.errorbar(delta[mask], y[mask], xerr=err, fmt="o", color=colour, capsize=3, markersize=4, linewidth=1.2)
            bare = ~has & np.isfinite(delta)
            if bare.any():
                ax.plot(delta[bare], y[bare], "o", markerfacecolor="none", color="#777777", markersize=4)
            ax.axvline(0.0, color="black", linewidth=0.8)
            ax.set_title(column.label, fontsize=8)
            ax.set_xlabel("Δ vs baseline" + (" (points)" if scale == 100.0 else ""))
            ax.set_yticks(y, labels)
            ax.grid(axis="x", alpha=0.3)
        for ax in list(axes.flat)[len(columns) :]:
            ax.set_visible(False)
        return png_bytes(fig)
