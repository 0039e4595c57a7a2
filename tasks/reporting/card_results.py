"""An evaluate artifact's results as a model card reports them: the main metric per benchmark,
dataset and language pair, beside the base model's, with paired bootstrap intervals of the change."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tasks.languages import GROUP_PREFIX, group_code, is_group_code


@dataclass
class EvaluationResults:
    """The main metric per benchmark, dataset and language pair of one evaluate artifact."""

    key: str | None
    rows: list[dict[str, Any]]  # benchmark, dataset, src_lang, tgt_lang, metric, value, n, base (or None)
    encoder: dict[str, Any]  # the evaluate config's encoder settings (prefix, max_length, pooling)
    # (benchmark, dataset, label) -> paired bootstrap interval of the change in accuracy_mean
    # (trained - base, a fraction); label: "all languages", a group, "xx-yy pairs" or a language
    intervals: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    seed: int | None = None  # the bootstrap's seed

    @classmethod
    def from_tables(
        cls,
        key: str | None,
        metrics: pa.Table,
        encoder: Mapping[str, Any],
        base_metrics: pa.Table | None = None,
        *,
        main_metric: Callable[[str], str | None],
        hub_task_type: Callable[[str], str] = lambda benchmark: "sentence-similarity",
        items: pa.Table | None = None,
        base_items: pa.Table | None = None,
        seed: int = 0,
        paired_intervals: Callable[..., Any] | None = None,
        group_members: Callable[[str], Sequence[str] | None] = lambda name: None,
    ) -> EvaluationResults:
        """`main_metric`: a benchmark's main metric (None: keep all its rows), the evaluate
        stage's `benchmarks.main_metric`; `hub_task_type`: the hub's task type of its results
        (`benchmarks.hub_task_type`, which each benchmark declares). `items`/`base_items` (per-query outcomes of the trained
        model and of the base on the same queries) give the paired bootstrap intervals through
        `paired_intervals` (the evaluate report's `paired_delta_intervals`). Both functions are
        passed in because train sits below evaluate.

        `group_members`: the languages of a language group by name (the evaluate stage's
        `LANGUAGE_GROUPS`), None for a group it does not define. The metrics table's row for such
        a group averages its members with `n` = members present; the card defines `n` as items,
        so its row gets the members' items summed (a group it cannot resolve keeps its `n`:
        MTEB's subsets already count items)."""
        base = {}
        if base_metrics is not None:
            base = {_row_id(r): r["value"] for r in base_metrics.to_pylist()}
        rows = []
        for row in _group_items(metrics.to_pylist(), group_members):
            metric = main_metric(row["benchmark"])
            if metric is not None and row["metric"] != metric:
                continue
            rows.append({**row, "base": base.get(_row_id(row)), "task_type": hub_task_type(row["benchmark"])})
        rows.sort(key=lambda r: (r["benchmark"], r["dataset"], is_group_code(r["src_lang"]), r["src_lang"], r["tgt_lang"] or ""))
        intervals = {}
        if (
            paired_intervals is not None
            and items is not None
            and base_items is not None
            and items.num_rows
            and base_items.num_rows
        ):
            for d in paired_intervals(items, base_items, metrics, seed=seed):
                intervals[d.benchmark, d.dataset, d.label] = d.accuracy
        return cls(key, rows, dict(encoder), intervals, seed if intervals else None)

    def interval(self, row: Mapping[str, Any]) -> Any:
        """The interval of a metrics row's change, when the evaluation computed one (accuracy_mean rows)."""
        if row["metric"] != "accuracy_mean":
            return None
        label = "all languages" if row["src_lang"] == group_code("all") else row["src_lang"].removeprefix(GROUP_PREFIX)
        return self.intervals.get((row["benchmark"], row["dataset"], label))


def _group_items(rows: list[dict[str, Any]], group_members: Callable[[str], Sequence[str] | None]) -> list[dict[str, Any]]:
    """`rows` with each resolvable language group's `n` replaced by its members' items."""
    items: dict[tuple[Any, ...], dict[str, int]] = {}
    for row in rows:
        if not is_group_code(row["src_lang"]):
            items.setdefault((row["benchmark"], row["dataset"], row["tgt_lang"], row["metric"]), {})[row["src_lang"]] = row["n"]
    out = []
    for row in rows:
        members = group_members(row["src_lang"].removeprefix(GROUP_PREFIX)) if is_group_code(row["src_lang"]) else None
        if members is not None:
            present = items.get((row["benchmark"], row["dataset"], row["tgt_lang"], row["metric"]), {})
            row = {**row, "n": sum(present[lang] for lang in members if lang in present)}
        out.append(row)
    return out


def _row_id(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["benchmark"], row["dataset"], row["src_lang"], row["tgt_lang"], row["metric"])
