"""What a benchmark is, and the one registry of them.

A benchmark is a class: a pydantic config model (one `[[evaluate.benchmarks]]` table, `kind`
naming the class) that also knows how to check its files, fingerprint them, score a model
on them, and which of its metrics is the headline. The evaluate stage, the sweep comparison
and the CLI look all of this up here; none of them branches on a benchmark's name.

    @register_benchmark
    class ToyBenchmark(Benchmark):
        kind: Literal["toy"]
        path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
        main_metric: ClassVar[str] = "accuracy_mean"

        def score(self, evaluation: Evaluation) -> None:
            pairs = read_toy(self.path)
            evaluation.add_scores([score_pair(evaluation.encode(pairs.src, pairs.src_lang), evaluation.encode(pairs.tgt, pairs.tgt_lang), ...)])

Registration only fills a dict, so a class registered from any module (a plug-in, a test)
before a config is validated is a benchmark like the built-in ones (`tasks/evaluate/benchmarks/__init__.py`).

Metric rows name their benchmark in the `benchmark` column: by default the class's `kind`;
`row_benchmark` overrides it when several classes score the same kind of task (`multiway`
and `corpus_dev` both write `retrieval` rows). Classes that share a row benchmark must agree
on its main metric, its per-query item metric, whether it is in domain and its hub task type.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
from pydantic import Field, model_validator

from tasks.registry import literal_kind, register_unique, validate_kind
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, file_fingerprint, folder_fingerprint
from tasks.stage_config import KEYED_UNLESS_DEFAULT, StageConfig

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "Evaluation",
    "headline_metric",
    "hub_task_type",
    "in_domain",
    "item_metric",
    "main_metric",
    "path_fingerprint",
    "register_benchmark",
    "screening_sample",
    "screening_sentence",
    "validate_benchmark",
]


class Evaluation(Protocol):
    """What a benchmark's `score` gets: one model's evaluation (tasks/evaluate/stage.py implements it)."""

    config: Any  # the stage's EvaluateConfig (encoder settings, word_map_concepts, seed, ...)
    inputs: Inputs  # the stage's input artifacts (corpus, base_model; translate, train when present)
    context: ShardContext  # drop counts (`context.drop(reason, n)`), progress
    model_dir: Path  # the model scored, as a transformers / sentence-transformers folder
    word_map: Any  # report.WordMap for the report's embedding map; the first benchmark that has one sets it

    def encode(self, texts: Sequence[str], lang: str | None = None) -> np.ndarray:
        """Unit vectors of `texts` (each distinct text encoded once per evaluation). `lang`, the
        texts' language as a FLORES code, lets a model trained with language vectors use them."""
        ...

    def add_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Metric rows (`groups.metric_row`), their `benchmark` being the benchmark's row benchmark."""
        ...

    def add_scores(self, scores: Iterable[Any]) -> None:
        """Scored retrieval pairs (`retrieval.PairRetrieval`): their metric rows and per-query items."""
        ...

    def add_sts(
        self, benchmark: str, dataset: str, src_lang: str, tgt_lang: str, emb1: np.ndarray, emb2: np.ndarray, gold: np.ndarray
    ) -> None:
        """One STS set: its `spearman` row (cosine of row i of `emb1` and `emb2` against `gold`)
        and the per-pair cosines, which the report's paired Spearman bootstrap resamples."""
        ...

    def add_sentences(
        self,
        benchmark: str,
        dataset: str,
        src_lang: str,
        tgt_lang: str,
        src: Sequence[str],
        tgt: Sequence[str],
        aligned: bool = True,
    ) -> None:
        """The sentences of a scored set, for the overlap check against the training rows."""
        ...

    def add_pair(self, src_lang: str, tgt_lang: str, src: np.ndarray, tgt: np.ndarray) -> None:
        """Embeddings of translation pairs, for the report's similarity histograms."""
        ...


class Benchmark(StageConfig):
    """Base of every benchmark. A subclass declares `kind: Literal["<name>"]` and its settings as
    pydantic fields (mark paths CONTENT_KEYED: `fingerprint` keys their content), sets
    `main_metric`, and implements `score`; `check_files` and `fingerprint` have defaults."""

    # The metric the headline of each of its (benchmark, dataset) shows: `xlembed run`, Prefect,
    # the sweep comparison's default columns.
    main_metric: ClassVar[str]
    # The `benchmark` column of its metric rows; None: its kind.
    row_benchmark: ClassVar[str | None] = None
    # The metric its per-query items (ITEMS_SCHEMA) make up, so comparisons can bootstrap it; None: no items.
    item_metric: ClassVar[str | None] = None
    # Its data are held-out rows of what the encoder is trained on (the report contrasts in- and out-of-domain).
    in_domain: ClassVar[bool] = False
    # The model hub's task type of its results (the model card's `model-index`): "bitext-mining" for
    # finding translations, "sentence-similarity", "pair-classification", ...
    hub_task_type: ClassVar[str] = "sentence-similarity"
    # Whether `score` honours `subset` (the benchmarks that do take their items through `subset_indices`).
    supports_subset: ClassVar[bool] = False
    # What one item of a set is, for the report's screening note ("pairs", "sentence pairs", ...).
    subset_unit: ClassVar[str] = "items"
    # One that runs a model of its own on the accelerator only sets `requires_gpu = True`
    # (StageConfig); the evaluate stage's shards reserve a GPU then (they do anyway unless device = "cpu").

    subset: int | None = Field(
        default=None, ge=2, json_schema_extra=KEYED_UNLESS_DEFAULT,
        description=(
            "screening: score a seeded sample of N items of each set, the same items for every model (the base "
            "included) and both directions of a pair together; the report says so and calls it a screen, never a "
            "claim. Unset: every item"
        ),
    )  # fmt: skip
    subset_seed: int = Field(default=0, json_schema_extra=KEYED_UNLESS_DEFAULT, description="the subset's sample seed")

    @model_validator(mode="after")
    def _subset_supported(self) -> Benchmark:
        if self.subset is not None and not self.supports_subset:
            raise ValueError(f"benchmark {self.kind_name()!r} cannot score a subset (subset = {self.subset}): unset it")
        return self

    def subset_indices(self, n_items: int, set_name: str) -> np.ndarray | None:
        """The sorted indices of the screening sample of a set of `n_items` items (None: score
        them all). `set_name` names the set: sets that must share items (line-aligned languages)
        pass one name."""
        if self.subset is None or n_items <= self.subset:
            return None
        return screening_sample(n_items, self.subset, self.subset_seed, set_name)

    def screening_note(self) -> str | None:
        """One line for the report when this benchmark scores a subset; None when it scores everything."""
        if self.subset is None:
            return None
        return f"{self.kind_name()}: at most {self.subset} {self.subset_unit} per set (seeded sample, seed {self.subset_seed})"

    @classmethod
    def kind_name(cls) -> str:
        """The `kind = "..."` that selects this class (its `kind` field's one Literal value)."""
        return literal_kind(cls, "benchmark")

    @classmethod
    def rows_name(cls) -> str:
        """The `benchmark` column of the metric rows it writes."""
        return cls.row_benchmark or cls.kind_name()

    def required_extras(self) -> list[tuple[str, str]]:
        """(extra, the setting that needs it) of the optional packages it needs (tasks/extras.py):
        checked when the config loads. Default: none."""
        return []

    def check_files(self) -> None:
        """Parse every file it will read, raising BenchmarkDataError (file, line, field) on bad
        data: run before any model loads, so a bad line fails in seconds. Default: nothing."""

    def fingerprint(self) -> dict[str, Any]:
        """The contents of what it reads, by a name suffix (`""` for `path`, `":train_file"`, ...):
        edited data re-evaluates, the same data elsewhere does not. Default: the file or the
        files of the folder at `path`, when it has one."""
        path = getattr(self, "path", None)
        return {} if path is None else {"": path_fingerprint(Path(path).expanduser())}

    def score(self, evaluation: Evaluation) -> None:
        """Score the evaluation's encoder: add metric rows (and items, sentences, pair similarities) to `evaluation`."""
        raise NotImplementedError(f"benchmark {self.kind_name()!r} does not implement score()")


def screening_sample(n_items: int, size: int, seed: int, set_name: str) -> np.ndarray:
    """`size` of `n_items` indices, sorted, drawn by a generator seeded with `seed` and a hash of
    `set_name`: the same sample for every model, every run and every machine."""
    import hashlib

    name_hash = int.from_bytes(hashlib.sha256(set_name.encode("utf-8")).digest()[:8], "little")
    rng = np.random.default_rng([seed, name_hash])
    return np.sort(rng.choice(n_items, size=size, replace=False))


def screening_sentence(notes: Sequence[str]) -> str:
    """The line that says a report or comparison scored seeded subsets (a screen), and what that means."""
    return (
        f"A screen, not a claim: scored on seeded subsets ({'; '.join(notes)}), the same items for every model; "
        "intervals cover these items only, and retrieval among fewer candidates is easier than on the full sets."
    )


def path_fingerprint(root: Path) -> dict[str, Any]:
    """The content of a benchmark file (by its name: it can name the dataset) or of the files
    directly in a benchmark folder (by their names)."""
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    if root.is_file():
        return {root.name: file_fingerprint(root)}
    return folder_fingerprint(root, (p for p in root.iterdir() if p.is_file()))


# kind -> class, in registration order (the built-in ones first: tasks/evaluate/benchmarks/__init__.py)
BENCHMARKS: dict[str, type[Benchmark]] = {}

BenchmarkT = TypeVar("BenchmarkT", bound=type[Benchmark])


def register_benchmark(cls: BenchmarkT) -> BenchmarkT:
    """Class decorator: make `cls` the benchmark of its kind. Registering another class under a
    taken kind, or one that disagrees with a class writing the same row benchmark, is an error."""
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise TypeError(f"register_benchmark: {cls!r} is not a subclass of Benchmark")
    kind = cls.kind_name()
    if not isinstance(getattr(cls, "main_metric", None), str):
        raise TypeError(f"benchmark {cls.__name__} ({kind!r}) must set main_metric: ClassVar[str]")
    for other in BENCHMARKS.values():
        if other.kind_name() != kind and other.rows_name() == cls.rows_name():  # (a taken kind: register_unique says so)
            facts, other_facts = _row_facts(cls), _row_facts(other)
            if facts != other_facts:
                raise ValueError(
                    f"benchmarks {kind!r} and {other.kind_name()!r} both write {cls.rows_name()!r} rows but disagree: "
                    f"{facts} vs {other_facts}"
                )
    return register_unique(BENCHMARKS, kind, cls, "benchmark kind")


def _row_facts(cls: type[Benchmark]) -> dict[str, Any]:
    return {
        "main_metric": cls.main_metric,
        "item_metric": cls.item_metric,
        "in_domain": cls.in_domain,
        "hub_task_type": cls.hub_task_type,
    }


def _by_rows_name(benchmark: str) -> type[Benchmark] | None:
    return next((cls for cls in BENCHMARKS.values() if cls.rows_name() == benchmark), None)


def main_metric(benchmark: str) -> str | None:
    """The main metric of the benchmark named in metric rows' `benchmark` column; None if none is registered."""
    cls = _by_rows_name(benchmark)
    return cls.main_metric if cls is not None else None


def headline_metric(benchmark: str, metrics: Collection[str]) -> str:
    """The metric a (benchmark, dataset) is summed up by, among the `metrics` its rows have:
    the benchmark's main metric, or (rows of an unregistered benchmark, or without their main
    metric) the first of `metrics`."""
    main = main_metric(benchmark)
    if main is not None and main in metrics:
        return main
    if not metrics:
        raise ValueError(f"benchmark {benchmark!r}: no metrics to choose a headline from")
    return next(iter(metrics))


def item_metric(benchmark: str) -> str | None:
    """The metric the per-query items of a row benchmark make up; None: it records no items."""
    cls = _by_rows_name(benchmark)
    return cls.item_metric if cls is not None else None


def in_domain(benchmark: str) -> bool:
    """Whether a row benchmark's data are held-out rows of what the encoder is trained on."""
    cls = _by_rows_name(benchmark)
    return cls.in_domain if cls is not None else False


def hub_task_type(benchmark: str) -> str:
    """The model hub's task type of a row benchmark's results ("sentence-similarity" for one not registered)."""
    cls = _by_rows_name(benchmark)
    return cls.hub_task_type if cls is not None else Benchmark.hub_task_type


def validate_benchmark(value: Any, context: dict[str, Any] | None = None) -> Benchmark:
    """One `[[evaluate.benchmarks]]` table as the config of the class its `kind` names.
    Errors name the field inside the table (pydantic adds where the table is)."""
    return validate_kind(value, BENCHMARKS, Benchmark, "benchmark", context)
