"""The sweep comparison's section against the untrained base (tasks/evaluate/compare.py): every
trained variant or seed group against the base scored in its own evaluation, with intervals,
and where in-domain and out-of-domain results disagree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from tasks.evaluate.benchmarks.registry import in_domain
from tasks.evaluate.bootstrap import BootstrapInterval
from tasks.evaluate.columns import Column, VariantResult, column_value, difference, mean_of, metric_rows
from tasks.evaluate.compare_intervals import ComparedSide, DeltaIntervals, delta_cell
from tasks.evaluate.paired import MEAN, mean_outcomes
from tasks.evaluate.tradeoff import UnitChange
from tasks.reporting.tables import MISSING, Cell, Table, format_delta, format_interval, format_value

__all__ = ["disagreement", "untrained_section"]


def disagreement(name: str, chosen: Sequence[Column], found: Mapping[str, BootstrapInterval | None]) -> list[str]:
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


def untrained_section(
    results: Sequence[VariantResult],
    units: Sequence[tuple[ComparedSide, list[VariantResult]]],
    chosen: Sequence[Column],
    values: Mapping[str, Mapping[str, float | None]],
    untrained_base: str | None,
    intervals: DeltaIntervals,
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
    ref_rows = metric_rows(ref_metrics)
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
        base_rows = [metric_rows(m) for m, _ in bases]
        base_values = {c.spec: mean_of([column_value(rows_, c) for rows_ in base_rows]) for c in chosen}
        own_base_differs |= any(
            (delta := difference(base_values[c.spec], untrained[c.spec])) is not None and abs(delta) > 1e-9 for c in chosen
        )
        base = ComparedSide(f"untrained base of {unit.name}", base_values, mean_outcomes([items for _, items in bases]), len(rs))
        found = intervals.get(unit, base, "untrained base")
        against.append(
            UnitChange(unit.name, rs, {c.spec: difference(unit.values[c.spec], base_values[c.spec]) for c in chosen}, found)
        )
        line = [Cell(unit.name), Cell(str(len(rs)), "num")]
        for c in chosen:
            value = unit.values[c.spec]
            line.append(Cell(format_value(value, c.metric), "num" if value is not None else "missing"))
            line.append(delta_cell(value, base_values[c.spec], c, is_baseline=False, interval=found.get(c.spec)))
        rows.append(line)
        disagreements += disagreement(unit.name, chosen, found)
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
