"""The benchmark registry: one main metric per benchmark, used alike by the stage's headline,
the sweep comparison and the CLI; kinds looked up by name, with clear errors."""

from __future__ import annotations

from typing import ClassVar, Literal

import pytest
from pydantic import ValidationError

from tasks.evaluate.benchmarks import (
    BENCHMARKS,
    Benchmark,
    headline_metric,
    in_domain,
    item_metric,
    main_metric,
    register_benchmark,
)
from tasks.evaluate.columns import Column, headline_columns
from tasks.evaluate.config import EvaluateConfig
from tasks.evaluate.groups import metric_row, rows_table
from tasks.evaluate.stage import headline_metrics, main_metric_rows

XNLI_TEST = {"en": 0.84, "fr": 0.78, "sw": 0.66}


def xnli_rows() -> list[dict]:
    """XNLI rows as tasks/evaluate/benchmarks/xnli.py writes them: `accuracy` at the picked rate, one row
    per rate tried, a group mean; the rates tried score lower than the picked one here."""
    rows = []
    for metric, shift in (("accuracy", 0.0), ("accuracy@lr=1e-05", -0.30), ("accuracy@lr=3e-05", -0.20)):
        values = {lang: value + shift for lang, value in XNLI_TEST.items()}
        rows += [metric_row("xnli", "xnli-test", lang, None, metric, value, 5010) for lang, value in values.items()]
        rows.append(metric_row("xnli", "xnli-test", "group:xnli", None, metric, sum(values.values()) / 3, 3))
    return rows


def test_xnli_headline_is_its_main_metric_only() -> None:
    """Before the registry, the stage knew no XNLI main metric and averaged every
    `accuracy@lr` row into the headline (0.59 over 9 rows here instead of 0.76 over 3 languages)."""
    headline = headline_metrics(rows_table(xnli_rows()))
    assert headline["xnli/xnli-test"] == {
        "metric": "accuracy",
        "mean": pytest.approx(sum(XNLI_TEST.values()) / 3, abs=1e-4),
        "pairs": 3,
    }


def every_row_benchmark_table() -> object:
    """For each benchmark the metric rows name, its main metric and two others, in an order that
    puts the main metric neither first nor last."""
    rows = []
    for benchmark in dict.fromkeys(cls.rows_name() for cls in BENCHMARKS.values()):
        main = main_metric(benchmark)
        for metric, value in (("other_a", 0.1), (main, 0.5), ("other_b", 0.9)):
            rows.append(metric_row(benchmark, f"{benchmark}-set", "kaz_Cyrl", "eng_Latn", metric, value, 10))
    return rows_table(rows)


def test_stage_comparison_and_cli_rows_agree_on_every_main_metric() -> None:
    table = every_row_benchmark_table()
    benchmarks = {cls.rows_name() for cls in BENCHMARKS.values()}
    assert {"tatoeba", "retrieval", "bucc", "sts", "mteb", "xnli"} <= benchmarks
    expected = {benchmark: main_metric(benchmark) for benchmark in benchmarks}
    assert {key.split("/")[0]: entry["metric"] for key, entry in headline_metrics(table).items()} == expected
    assert {c.benchmark: c.metric for c in headline_columns([table])} == expected
    cli_rows = main_metric_rows(table)  # what `xlembed run` / `xlembed evaluate` print
    assert dict(zip(cli_rows["benchmark"], cli_rows["metric"])) == expected
    assert cli_rows.height == len(expected) and set(cli_rows["value"]) == {0.5}


def test_facts_of_the_built_in_benchmarks() -> None:
    assert {kind: cls.rows_name() for kind, cls in BENCHMARKS.items()}.items() >= {
        "tatoeba": "tatoeba", "bucc": "bucc", "sts": "sts", "multiway": "retrieval", "corpus_dev": "retrieval", "mteb": "mteb", "xnli": "xnli",
    }.items()  # fmt: skip
    assert [main_metric(b) for b in ("tatoeba", "retrieval", "bucc", "sts", "mteb", "xnli")] == [
        "accuracy_mean", "accuracy_mean", "f1", "spearman", "main_score", "accuracy",
    ]  # fmt: skip
    assert [item_metric(b) for b in ("tatoeba", "retrieval", "bucc", "sts")] == ["accuracy_mean", "accuracy_mean", None, None]
    assert [in_domain(b) for b in ("retrieval", "tatoeba", "bucc")] == [True, False, False]
    assert Column("retrieval", "corpus-dev", "mean", "accuracy_mean").has_items
    assert not Column("bucc", "bucc2018.test", "mean", "f1").has_items


def test_headline_of_rows_without_a_registered_benchmark_is_their_first_metric() -> None:
    assert main_metric("retired-benchmark") is None
    assert headline_metric("retired-benchmark", ["recall", "precision"]) == "recall"
    assert headline_metric("bucc", ["precision", "threshold"]) == "precision"  # an old table without f1 rows
    table = rows_table(
        [metric_row("retired-benchmark", "d", "kaz_Cyrl", None, m, v, 5) for m, v in (("recall", 0.5), ("precision", 0.2))]
    )
    assert headline_metrics(table) == {"retired-benchmark/d": {"metric": "recall", "mean": 0.5, "pairs": 1}}


def test_unknown_or_missing_kind_names_the_known_ones() -> None:
    with pytest.raises(ValidationError, match=r"unknown benchmark kind 'tatoebaa'; known: 'tatoeba', 'bucc'"):
        EvaluateConfig.model_validate({"benchmarks": [{"kind": "tatoebaa", "path": "t", "langs": ["kaz"]}]})
    with pytest.raises(ValidationError, match=r"benchmarks\.0\n.*a benchmark needs kind = one of 'tatoeba'"):
        EvaluateConfig.model_validate({"benchmarks": [{"path": "t", "langs": ["kaz"]}]})
    with pytest.raises(ValidationError, match=r"benchmarks\.1\.k\n"):  # a field error names the field inside the table
        EvaluateConfig.model_validate(
            {"benchmarks": [{"kind": "corpus_dev"}, {"kind": "bucc", "path": "b", "langs": ["de"], "k": 0}]}
        )


def test_registering_a_taken_kind_or_disagreeing_facts_is_refused() -> None:
    class SecondTatoeba(Benchmark):
        kind: Literal["tatoeba"]
        main_metric: ClassVar[str] = "accuracy_mean"

    with pytest.raises(
        ValueError, match=r"kind 'tatoeba' is already registered by tasks\.evaluate\.benchmarks\.tatoeba\.TatoebaBenchmark"
    ):
        register_benchmark(SecondTatoeba)

    class RetrievalByF1(Benchmark):
        kind: Literal["retrieval_by_f1"]
        row_benchmark: ClassVar[str | None] = "retrieval"
        main_metric: ClassVar[str] = "f1"

    with pytest.raises(ValueError, match=r"both write 'retrieval' rows but disagree"):
        register_benchmark(RetrievalByF1)

    class NoMainMetric(Benchmark):
        kind: Literal["no_main_metric"]

    with pytest.raises(TypeError, match="must set main_metric"):
        register_benchmark(NoMainMetric)

    class KindNotLiteral(Benchmark):
        kind: str
        main_metric: ClassVar[str] = "f1"

    with pytest.raises(TypeError, match=r'kind: Literal\["name"\]'):
        register_benchmark(KindNotLiteral)
    assert not {"retrieval_by_f1", "no_main_metric"} & set(BENCHMARKS)
    assert BENCHMARKS["tatoeba"].__name__ == "TatoebaBenchmark"
