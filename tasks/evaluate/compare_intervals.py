"""Paired bootstrap intervals of a comparison's deltas (tasks/evaluate/compare.py): one side (a
variant, a seed group, an untrained base) against another, per column with per-query outcomes,
each pair computed once; and the table cell that shows a delta with its interval.

Items of the two sides are paired on `schema.ITEM_KEY` (tasks/evaluate/paired.py); a side with
several runs (seeds) is averaged per item first; one stratum per language pair, whose sentence
pairs (both directions' queries of row `item` together) are resampled by
`tasks.evaluate.bootstrap.paired_bootstrap`; each stratum is weighted so that the statistic is the
column's own average. A delta is significant when its interval excludes zero.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tasks.evaluate.bootstrap import BootstrapInterval, Stratum, paired_bootstrap
from tasks.evaluate.columns import Column, difference
from tasks.evaluate.paired import headline_strata, pair_strata, paired_differences
from tasks.reporting.tables import MISSING, Cell, format_delta, format_interval, metric_scale

__all__ = ["NO_INTERVAL", "SIGNIFICANT", "ComparedSide", "DeltaIntervals", "delta_cell"]

NO_INTERVAL = "no CI"
SIGNIFICANT = "*"


@dataclass(frozen=True)
class ComparedSide:
    """One side of a comparison: a variant, a seed group (its runs averaged) or an untrained base."""

    name: str
    values: Mapping[str, float | None]  # column spec -> value (the mean over runs)
    items: pl.DataFrame | None  # schema.ITEM_KEY + correct (mean over runs); None: a run has no outcomes
    runs: int


class DeltaIntervals:
    """Bootstrap intervals of one side against another, each pair computed once; and their records."""

    def __init__(self, columns: Sequence[Column], resamples: int, xx_yy_pivots: Mapping[tuple[str, str], str | None]) -> None:
        self.columns = [c for c in columns if c.has_items]
        self.xx_yy_pivots = xx_yy_pivots
        self.resamples = resamples
        self.records: list[dict[str, Any]] = []
        self._done: dict[tuple[str, int, str, int, str], dict[str, BootstrapInterval | None]] = {}
        self._computed: dict[str, BootstrapInterval] = {}  # digest of the strata -> their interval

    def get(self, row: ComparedSide, ref: ComparedSide, against: str) -> dict[str, BootstrapInterval | None]:
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
        row: ComparedSide, ref: ComparedSide, against: str, column: Column, interval: BootstrapInterval | None, had_items: bool
    ) -> dict[str, Any]:
        scale = metric_scale(column.metric)
        value, base = row.values.get(column.spec), ref.values.get(column.spec)
        record: dict[str, Any] = {
            "against": against,
            "row": row.name,
            "reference": ref.name,
            "column": column.spec,
            "units": "percentage points" if scale == 100.0 else "metric units",
            "delta": None if (delta := difference(value, base)) is None else round(delta * scale, 6),
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


def delta_cell(
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
