"""The trade-off a user picks an encoder on: what it gains in finding translations across
languages against what it changes in ranking sentence pairs within one language.

Each variant of a sweep (a seed group as one) is a point: x = its change in a retrieval column
(percentage points), y = its change in monolingual STS Spearman (x100, the unweighted mean over
the STS sets whose two sentences share a language), both against the untrained base, each with
its paired bootstrap 95% interval. The base sits at the origin. With several seeds, each STS
pair's cosine is averaged over the seeds before Spearman is taken (as retrieval outcomes are
averaged per sentence): the point is the seed-averaged scorer's change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from tasks.evaluate.bootstrap import DEFAULT_RESAMPLES, BootstrapInterval, paired_spearman_mean_bootstrap
from tasks.evaluate.schema import STS_ITEM_KEY
from tasks.reporting.figures import STYLE, new_figure, png_bytes, separate_labels
from tasks.reporting.tables import Cell, Table, html_escape, html_table, md_escape, md_table

TRADEOFF_FIGURE_FILE = "tradeoff.png"
SIMILARITY_LABEL = "monolingual STS (mean over languages), Spearman ×100"


@dataclass(frozen=True)
class TradeoffPoint:
    """One variant (or seed group) against the untrained base, display units."""

    name: str
    retrieval: float | None  # percentage points
    retrieval_interval: BootstrapInterval | None
    similarity: float | None  # Spearman x100
    similarity_interval: BootstrapInterval | None
    seeds: int = 1


def seed_averaged_sts(tables: Sequence[pa.Table | None]) -> pl.DataFrame | None:
    """The STS items of several runs of one model (seeds), each pair's cosine averaged over the
    runs that scored it; None when no run has STS items."""
    frames = [pl.from_arrow(t.select([*STS_ITEM_KEY, "cosine", "gold"])) for t in tables if t is not None and t.num_rows]
    if not frames:
        return None
    return (
        pl.concat(frames)
        .group_by(list(STS_ITEM_KEY), maintain_order=True)
        .agg(pl.col("cosine").mean(), pl.col("gold").first())
        .sort(list(STS_ITEM_KEY))
    )


def monolingual_similarity_change(
    ours: pl.DataFrame | None, base: pl.DataFrame | None, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> BootstrapInterval | None:
    """Change in Spearman (raw units) over the STS sets within one language, unweighted mean over
    the sets, with its paired bootstrap interval (pairs resampled within each set, both models on
    the same draw). None without monolingual sets on both sides."""
    if ours is None or base is None:
        return None
    key = list(STS_ITEM_KEY)
    joined = ours.join(base.select([*key, "cosine"]), on=key, how="inner", suffix="_base")
    joined = joined.filter(pl.col("src_lang") == pl.col("tgt_lang"))
    sets = [
        (frame["cosine"].to_numpy(), frame["cosine_base"].to_numpy(), frame["gold"].to_numpy())
        for _, frame in joined.partition_by(["benchmark", "dataset", "src_lang"], as_dict=True, maintain_order=True).items()
        if frame.height >= 2
    ]
    if not sets:
        return None
    return paired_spearman_mean_bootstrap(sets, resamples=resamples, seed=seed)


def tradeoff_caption(retrieval_label: str, seeds: bool) -> str:
    text = (
        f"Each variant against the untrained base (the origin): x = Δ {retrieval_label} in points, y = Δ {SIMILARITY_LABEL}; "
        "bars: paired bootstrap 95% intervals. Up and right is better; below the dashed line similarity within a language got worse."
    )
    if seeds:
        text += " A seed group is one point, each STS pair's cosine averaged over its seeds first."
    return text


def tradeoff_figure(points: Sequence[TradeoffPoint], retrieval_label: str) -> bytes:
    """PNG: a point per variant, x = Δ retrieval, y = Δ monolingual similarity, each with its
    interval as an error bar, the base at the origin; variants are labelled beside their point."""
    import matplotlib.style
    import numpy as np

    drawn = [p for p in points if p.retrieval is not None and p.similarity is not None]
    with matplotlib.style.context(STYLE):
        fig = new_figure(7.5, 5.2)
        ax = fig.subplots()
        ax.axhline(0.0, color="#444444", linewidth=0.9, linestyle="--")
        ax.axvline(0.0, color="#444444", linewidth=0.9, linestyle="--")
        ax.plot([0.0], [0.0], "s", color="black", markersize=6)
        labels = [ax.annotate("untrained base", (0.0, 0.0), textcoords="offset points", xytext=(6, -12), fontsize=8)]
        for point in drawn:
            xi, yi = point.retrieval_interval, point.similarity_interval
            xerr = None if xi is None else np.array([[point.retrieval - xi.low], [xi.high - point.retrieval]]).clip(min=0)
            yerr = None if yi is None else np.array([[point.similarity - yi.low], [yi.high - point.similarity]]).clip(min=0)
            keeps = yi is None or yi.high >= 0  # the interval reaches zero or above: no loss shown
            colour = "#17692b" if keeps and (xi is None or xi.low > 0) else ("#b3261e" if not keeps else "#555555")
            ax.errorbar(point.retrieval, point.similarity, xerr=xerr, yerr=yerr, fmt="o", color=colour, capsize=3,
                        markersize=5, linewidth=1.1)  # fmt: skip
            label = point.name + (f" ({point.seeds} seeds)" if point.seeds > 1 else "")
            labels.append(
                ax.annotate(label, (point.retrieval, point.similarity), textcoords="offset points", xytext=(6, 5), fontsize=8)
            )
        ax.set_xlabel(f"Δ {retrieval_label} (points)")
        ax.set_ylabel(f"Δ {SIMILARITY_LABEL}")
        ax.grid(alpha=0.3)
        ax.margins(0.15)
        separate_labels(fig, labels)
        return png_bytes(fig)


@dataclass(frozen=True)
class UnitChange:
    """A trained variant (or seed group) against the untrained base, as the comparison measured it:
    `deltas` and `intervals` by column spec, raw units; `runs` its VariantResults."""

    name: str
    runs: Sequence[Any]
    deltas: Mapping[str, float | None]
    intervals: Mapping[str, BootstrapInterval | None]


@dataclass(frozen=True)
class TradeoffSection:
    markdown: list[str]
    html: list[str]
    figure: bytes | None
    points: list[dict[str, Any]]


def tradeoff_section(
    columns: Sequence[Any], changes: Sequence[UnitChange], base_sts_items: pa.Table | None, column_spec: str | None = None
) -> TradeoffSection | None:
    """The comparison's trade-off section (figure and table), or None when there is nothing to
    draw: no retrieval column with outcomes, no untrained base with STS items, no trained variant."""
    import base64

    with_items = [c for c in columns if c.has_items]
    column = (
        next((c for c in with_items if c.spec == column_spec), None) if column_spec else (with_items[0] if with_items else None)
    )
    base = seed_averaged_sts([base_sts_items])
    if column is None or base is None or not changes:
        return None
    points: list[TradeoffPoint] = []
    for change in changes:
        x = change.deltas.get(column.spec)
        xi = change.intervals.get(column.spec)
        yi = monolingual_similarity_change(seed_averaged_sts([r.sts_items for r in change.runs]), base)
        points.append(
            TradeoffPoint(
                change.name,
                None if x is None else x * 100.0,
                None if xi is None else xi.scaled(100.0),
                None if yi is None else yi.delta * 100.0,
                None if yi is None else yi.scaled(100.0),
                len(change.runs),
            )
        )
    if not any(p.retrieval is not None and p.similarity is not None for p in points):
        return None
    label = column.label
    figure = tradeoff_figure(points, label)
    caption = tradeoff_caption(label, any(p.seeds > 1 for p in points))

    def cell(value: float | None, interval: BootstrapInterval | None) -> Cell:
        if value is None:
            return Cell("—", "missing")
        text = f"{value:+.2f}" + ("" if interval is None else f" [{interval.low:+.2f}, {interval.high:+.2f}]")
        return Cell(text + (" *" if interval is not None and interval.significant else ""), "num")

    header = ["Variant / seed group", "seeds", f"Δ {label} (points) [95% CI]", f"Δ {SIMILARITY_LABEL} [95% CI]"]
    rows = [[Cell(p.name), Cell(str(p.seeds), "num"), cell(p.retrieval, p.retrieval_interval), cell(p.similarity, p.similarity_interval)]
            for p in points]  # fmt: skip
    table = Table(header, rows, [False, True, True, True])
    data = base64.b64encode(figure).decode("ascii")
    title = "Trade-off: across languages against within one"
    md = ["## " + title, "", f"![trade-off]({TRADEOFF_FIGURE_FILE})", "", f"*{md_escape(caption)}*", "", md_table(table), ""]
    ht = [
        f"<h2>{html_escape(title)}</h2>",
        f'<figure><img src="data:image/png;base64,{data}" alt="{html_escape(title)}"><figcaption>{html_escape(caption)}</figcaption></figure>',
        html_table(table),
    ]
    plain = [
        {
            "variant": p.name, "seeds": p.seeds, "retrieval_delta": p.retrieval,
            "retrieval_low": p.retrieval_interval.low if p.retrieval_interval else None,
            "retrieval_high": p.retrieval_interval.high if p.retrieval_interval else None,
            "similarity_delta": p.similarity,
            "similarity_low": p.similarity_interval.low if p.similarity_interval else None,
            "similarity_high": p.similarity_interval.high if p.similarity_interval else None,
        }
        for p in points
    ]  # fmt: skip
    return TradeoffSection(md, ht, figure, plain)
