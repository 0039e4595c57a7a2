"""What a comparison reads (`VariantResult`: one variant's tables) and shows (`Column`: a metric
value of a metrics table): shared by the sweep comparison (tasks/evaluate/compare.py and its
sections), the figures that draw it (tasks/evaluate/interval_figures.py) and the sweep report.

A column is a spec `benchmark/dataset/language/metric`: `language` is a FLORES-200 code,
`group:<name>` (a group average row) or `mean` (the unweighted mean over every language row,
groups left out). Where a dataset also scored pairs of two non-pivot languages (`pairs = "all"`:
it has a `group:xx-yy` row), every other column keeps to the pivot pairs, as the evaluation's
own headline does, and `group:xx-yy` is the mean over the other pairs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tasks.evaluate.benchmarks.registry import headline_metric, item_metric
from tasks.evaluate.paired import MEAN, XX_YY_CODE
from tasks.evaluate.retrieval import dataset_pivot
from tasks.languages import GROUP_PREFIX, is_group_code

__all__ = ["Column", "VariantResult", "column_value", "difference", "headline_columns", "mean_of", "metric_rows", "xx_yy_pivots"]


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

    @property
    def has_items(self) -> bool:
        """Whether per-query outcomes make up this column (so it can get a bootstrap interval)."""
        return item_metric(self.benchmark) == self.metric

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
    items: pa.Table | None = None  # per-query outcomes of the scored model (ITEMS_SCHEMA); None: no intervals
    base_metrics: pa.Table | None = None  # the untrained base, scored in the same evaluation (METRICS_SCHEMA)
    base_items: pa.Table | None = None  # ... and its per-query outcomes
    trained: bool | None = None  # False: the pipeline trains nothing (the variant is an untrained model itself)
    sts_items: pa.Table | None = None  # per-pair STS cosines (STS_ITEMS_SCHEMA), for the trade-off figure
    screening: tuple[str, ...] = ()  # its evaluation scored seeded subsets (EvaluateConfig.screening_notes)


def metric_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.select(["benchmark", "dataset", "src_lang", "tgt_lang", "metric", "value"]).to_pylist()


def headline_columns(tables: Sequence[pa.Table]) -> list[Column]:
    """Per (benchmark, dataset), in first-seen order: its main metric's group rows, then the mean."""
    found: dict[tuple[str, str], dict[str, list[str]]] = {}
    for table in tables:
        for row in metric_rows(table):
            entry = found.setdefault((row["benchmark"], row["dataset"]), {"metrics": [], "groups": []})
            if row["metric"] not in entry["metrics"]:
                entry["metrics"].append(row["metric"])
    out = []
    for (benchmark, dataset), entry in found.items():
        metric = headline_metric(benchmark, entry["metrics"])
        groups: list[str] = []
        for table in tables:
            for row in metric_rows(table):
                if (row["benchmark"], row["dataset"], row["metric"]) == (benchmark, dataset, metric) and is_group_code(
                    row["src_lang"]
                ):
                    if row["src_lang"] not in groups:
                        groups.append(row["src_lang"])
        out += [Column(benchmark, dataset, g, metric) for g in groups]
        out.append(Column(benchmark, dataset, MEAN, metric))
    return out


def xx_yy_pivots(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str | None]:
    """(benchmark, dataset) -> pivot, for each dataset that also scored xx-yy pairs (it has a
    `group:xx-yy` row); the pivot is None where `dataset_pivot` cannot tell one."""
    scored = {(r["benchmark"], r["dataset"]) for r in rows if r["src_lang"] == XX_YY_CODE}
    return {
        key: dataset_pivot(
            (r["src_lang"], r["tgt_lang"])
            for r in rows
            if (r["benchmark"], r["dataset"]) == key and not is_group_code(r["src_lang"])
        )
        for key in scored
    }


def column_value(rows: Sequence[Mapping[str, Any]], column: Column) -> float | None:
    """The column's value in one metrics table (mean over matching rows); None if it has none.

    In a dataset with xx-yy pairs, a language, group or mean column keeps to the pivot pairs
    (a group's rows per other target language and the xx-yy pairs are not its members)."""
    pivot = None if column.lang == XX_YY_CODE else xx_yy_pivots(rows).get((column.benchmark, column.dataset))
    values = [
        r["value"]
        for r in rows
        if r["benchmark"] == column.benchmark
        and r["dataset"] == column.dataset
        and r["metric"] == column.metric
        and (not is_group_code(r["src_lang"]) if column.lang == MEAN else r["src_lang"] == column.lang)
        and (pivot is None or r["tgt_lang"] == pivot)
    ]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else None


def mean_of(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def difference(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base
