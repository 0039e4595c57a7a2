"""The evaluate stage: score an encoder on its benchmarks (retrieval, mining, STS, ...); write a report.

Each benchmark is a registered class (tasks/evaluate/benchmarks/): the stage asks it to check
its files, fingerprint them and score the model (through `benchmarks.Evaluation`), and takes each
dataset's headline from its main metric; nothing here knows a benchmark by name.

Input artifacts: `base_model` (the encoder, as a transformers directory), `corpus` (for
the held-out `dev` split; `translate` instead when the pipeline translates) and, when the
pipeline trains one, `train` (the trained encoder:
it is the model scored, and the base model is scored beside it for a before/after report).
Output: the metrics table (Parquet, `METRICS_SCHEMA`) of the scored model and, as attached
files, `items.parquet` (per-query retrieval outcomes, `ITEMS_SCHEMA`), `sts_items.parquet` (per-pair
cosines of the STS sets, `STS_ITEMS_SCHEMA`, when it scores STS), `report/report.md`,
`report/report.html`, the figures, `report/leakage.parquet` (how many of each scored set's
sentences occur, normalised, in the training rows: tasks/evaluate/leakage.py) and, with a trained model, `report/base_metrics.parquet` and
`items/base_items.parquet` (the untrained base's items, which the report's paired bootstrap
intervals and the sweep comparison read; `items/base_sts_items.parquet` for STS, which the report reads), and `mteb/{Task}.json`: the Tatoeba/BUCC/STS scores as
MTEB-format result files (tasks/evaluate/mteb_results.py), with MTEB's own result files of an
`mteb` benchmark under `mteb/bridge/`. When it scored a trained model it also stores that
model's card with these results, `model-card.md` (tasks/reporting/model_card.py): each evaluation
is a new version of the card, which `xlembed export` of the model uses (the newest).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tasks.encoders import Encoder, EncoderSpec
from tasks.encoders.language_vectors import read_language_vectors
from tasks.evaluate.benchmarks.registry import BENCHMARKS, headline_metric, hub_task_type, main_metric
from tasks.evaluate.config import EvaluateConfig
from tasks.evaluate.datasets import BenchmarkDataError
from tasks.evaluate.figures import PairSimilarities
from tasks.evaluate.groups import LANGUAGE_GROUPS, group_average_rows, group_languages, rows_table
from tasks.evaluate.leakage import SentenceSet, leakage_summary, overlap_table, training_keys
from tasks.evaluate.mteb_results import dataset_revision, mteb_result_files, write_mteb_results
from tasks.evaluate.paired import headline_changes, paired_delta_intervals
from tasks.evaluate.report import build_report
from tasks.evaluate.retrieval import XX_YY_GROUP, dataset_pivot
from tasks.evaluate.schema import ITEMS_SCHEMA, METRICS_SCHEMA, STS_ITEMS_SCHEMA
from tasks.evaluate.sts import paired_cosine, sts_items, sts_rows
from tasks.languages import GROUP_PREFIX, group_code
from tasks.reporting.card_facts import CARD_FILE, card_facts
from tasks.reporting.card_results import EvaluationResults
from tasks.reporting.model_card import render_model_card
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage
from tasks.stop import raise_if_stopping
from tasks.train.card import TRAIN_CARD
from tasks.train.stage import training_table

log = logging.getLogger(__name__)

# Raised whenever the same inputs would score differently, so old artifacts are not reused;
# CHANGELOG.md says what each version changed.
CODE_VERSION = "4"
REPORT_DIR = "report"
# Attached paths of the per-query items: a contract with the sweep comparison, which reads them.
ITEMS_FILE = "items.parquet"
BASE_ITEMS_FILE = "items/base_items.parquet"
# Per-pair cosines of the STS sets (STS_ITEMS_SCHEMA), for the report's paired Spearman intervals.
STS_ITEMS_FILE = "sts_items.parquet"
BASE_STS_ITEMS_FILE = "items/base_sts_items.parquet"


def check_benchmark_files(config: EvaluateConfig) -> None:
    """Parse every benchmark's files before any model loads, so that a bad line in the last
    benchmark fails in seconds (naming file, line and field), not after the first ones ran.
    The readers remember what they parsed (`parsed_once`, tasks/evaluate/datasets.py), so scoring the model,
    and the base beside it, reads these results again instead of parsing the files again."""
    for bench in config.benchmarks:
        bench.check_files()


def benchmark_problems(config: EvaluateConfig) -> list[str]:
    """`check_benchmark_files` as the plan-time check: the first problem, naming file and line."""

    try:
        check_benchmark_files(config)
    except BenchmarkDataError as exc:
        return [str(exc)]
    except OSError as exc:
        return [f"cannot read {exc.filename or ''}: {exc.strerror or exc}"]
    return []


def plan_evaluate_shards(config: EvaluateConfig, inputs: Inputs) -> list[ShardSpec]:
    check_benchmark_files(config)
    return [ShardSpec("evaluation", {}, f"{len(config.benchmarks)} benchmarks")]


def pair_similarities(src_lang: str, tgt_lang: str, src: np.ndarray, tgt: np.ndarray, seed: int) -> Any:
    """Cosines of translation pairs vs of the same rows paired with a seeded derangement."""

    n = len(src)
    matched = np.einsum("ij,ij->i", src, tgt)
    if n < 2:
        return PairSimilarities(src_lang, tgt_lang, matched, matched[:0])
    shift = int(np.random.default_rng(seed).integers(1, n))  # a rotation by 1..n-1 moves every row
    shuffled = np.einsum("ij,ij->i", src, np.roll(tgt, shift, axis=0))
    return PairSimilarities(src_lang, tgt_lang, matched, shuffled)


class _Evaluation:
    """One model's evaluation: what a benchmark's `score` gets (`benchmarks.Evaluation`). The
    encoder, and what the benchmarks add: metric rows, per-query items, the sentences scored
    (for the training-overlap check), pair similarities and a word map (for the report's figures)."""

    def __init__(
        self, config: EvaluateConfig, inputs: Inputs, context: ShardContext, model_dir: Path, model_name: str = "the model"
    ) -> None:

        self.config, self.inputs, self.context = config, inputs, context
        self.model_dir = model_dir
        self.model_name = model_name
        settings = config.encoder
        self.encoder = Encoder.load(
            EncoderSpec(
                model=str(self.model_dir),
                pooling=settings.pooling,
                prefix=settings.prefix,
                max_length=settings.max_length,
                batch_size=settings.batch_size,
                device=settings.device,
                precision=settings.precision,
            )
        )
        self.rows: list[dict[str, Any]] = []
        self.items: list[pa.Table] = []
        self.sts_items: list[pa.Table] = []
        self.similarities: list[Any] = []
        self.sentence_sets: list[Any] = []  # leakage.SentenceSet of every scored pair, for the overlap check
        self.word_map: Any = None  # report.WordMap, set by the first benchmark that has one
        # (row benchmark, dataset) -> seconds of the benchmark run that scored it (MTEB's evaluation_time)
        self.seconds: dict[tuple[str, str], float] = {}
        self.benchmark_label = ""  # "tatoeba (2/4)": what the progress display names while it encodes
        self.encoded = 0  # texts through the model so far
        # the trainer's language vectors (train.language_embedding), by language; {} for other models
        self.language_vectors = read_language_vectors(model_dir)
        self.languages_without_vector: set[str] = set()  # scored languages the model has no vector for
        self._vectors: dict[tuple[str | None, str], np.ndarray] = {}

    def encode(self, texts: Sequence[str], lang: str | None = None) -> np.ndarray:
        """Vectors of `texts`; each distinct text goes through the model once per evaluation
        (pivot sentences recur in every language pair). `lang` (a FLORES code) names their
        language: a model trained with language vectors gets that language's vector added to
        every token embedding, as in training."""
        self.context.read(len(texts))
        vector = self.language_vectors.get(lang) if lang is not None else None
        if self.language_vectors and vector is None:
            self.languages_without_vector.add(lang or "(not named)")
        key = lang if vector is not None else None
        missing = list(dict.fromkeys(t for t in texts if (key, t) not in self._vectors))
        if missing:
            # the bar and the lines count this call's texts: rate and ETA of what the model is encoding now
            self.context.expect(len(missing), "texts", label=f"{self.model_name}, {self.benchmark_label}")
            vectors = self.encoder.encode(missing, embedding_offset=vector, progress=self._between_batches)
            self._vectors.update(zip(((key, t) for t in missing), vectors))
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        return np.stack([self._vectors[key, t] for t in texts])

    def _between_batches(self, texts: int) -> None:
        """After each batch: progress, and a safe point (a stop requested now ends the evaluation
        before the next batch)."""
        self.encoded += texts
        self.context.progress(texts, check_stop=False)
        raise_if_stopping(f"evaluate: stopped while scoring {self.model_name}; {STOPPED_KEEPS}")

    def language_embedding_note(self) -> str | None:
        """What the report says of a model trained with language vectors; None for other models."""
        if not self.language_vectors:
            return None
        note = LANGUAGE_EMBEDDING_NOTE
        if self.languages_without_vector:
            note += f"; without one (not trained on, or not named by the benchmark): {', '.join(sorted(self.languages_without_vector))}"
        return note

    def add_rows(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Metric rows (`groups.metric_row`; their `benchmark` is the benchmark's row benchmark)."""
        self.rows += [dict(row) for row in rows]

    def add_pair(self, src_lang: str, tgt_lang: str, src: np.ndarray, tgt: np.ndarray) -> None:
        """Embeddings of translation pairs, for the report's similarity histograms."""
        self.similarities.append(pair_similarities(src_lang, tgt_lang, src, tgt, self.config.seed + len(self.similarities)))

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
        """The sentences of a scored set, for the overlap check against the training rows (leakage.py)."""

        self.sentence_sets.append(SentenceSet(benchmark, dataset, src_lang, tgt_lang, tuple(src), tuple(tgt), aligned))

    def add_sts(
        self, benchmark: str, dataset: str, src_lang: str, tgt_lang: str, emb1: np.ndarray, emb2: np.ndarray, gold: np.ndarray
    ) -> None:
        """One STS set's `spearman` row and its per-pair cosines (STS_ITEMS_SCHEMA)."""

        names = {"dataset": dataset, "src_lang": src_lang, "tgt_lang": tgt_lang, "benchmark": benchmark}
        self.rows += sts_rows(emb1, emb2, gold, **names)
        self.sts_items.append(sts_items(paired_cosine(emb1, emb2), gold, **names))

    def add_scores(self, scores: Iterable[Any]) -> None:
        """Metric rows and per-query items of scored pairs (`retrieval.PairRetrieval`)."""
        for scored in scores:
            self.rows += scored.metric_rows()
            self.items.append(scored.items())

    # ---------------------------------------------------------------- output
    def metrics_table(self) -> pa.Table:

        rows = group_average_rows(self.rows, [LANGUAGE_GROUPS[name] for name in self.config.groups])
        return rows_table(rows).cast(METRICS_SCHEMA)

    def items_table(self) -> pa.Table:
        """Per-query outcomes of every retrieval pair scored (ITEMS_SCHEMA; empty without retrieval benchmarks)."""
        return pa.concat_tables(self.items) if self.items else ITEMS_SCHEMA.empty_table()

    def sts_items_table(self) -> pa.Table:
        """Per-pair cosines of every STS set scored (STS_ITEMS_SCHEMA; empty without STS benchmarks)."""
        return pa.concat_tables(self.sts_items) if self.sts_items else STS_ITEMS_SCHEMA.empty_table()

    def report(
        self,
        metrics: pa.Table,
        base_metrics: pa.Table | None = None,
        items: pa.Table | None = None,
        base_items: pa.Table | None = None,
        leakage: pa.Table | None = None,
        sts_items: pa.Table | None = None,
        base_sts_items: pa.Table | None = None,
        base_similarities: Sequence[Any] = (),
    ) -> list[dict[str, Any]]:
        """Write the report; returns its headline changes (`paired.headline_changes`; [] without a baseline's items)."""

        baseline, baseline_name, baseline_items, baseline_sts_items = None, None, None, None
        if self.config.baseline:
            store = self.inputs["base_model"].store
            key = store.resolve("evaluate", self.config.baseline)
            baseline, baseline_name = store.read_table("evaluate", key), f"evaluate {key[:12]}"
            # an evaluate artifact of code version 1 has no items: then the report has no intervals
            attached = {entry.path for entry in store.manifest("evaluate", key).attached_files}
            if f"files/{ITEMS_FILE}" in attached:
                baseline_items = pq.read_table(store.attached_dir("evaluate", key) / ITEMS_FILE)
            if f"files/{STS_ITEMS_FILE}" in attached:
                baseline_sts_items = pq.read_table(store.attached_dir("evaluate", key) / STS_ITEMS_FILE)
        elif base_metrics is not None:
            baseline, baseline_name, baseline_items, baseline_sts_items = (
                base_metrics,
                "untrained base",
                base_items,
                base_sts_items,
            )
        base = self.inputs["base_model"]
        base_config = base.manifest().config
        card = {}
        if "train" in self.inputs:
            card["trained model artifact"] = f"train {self.inputs['train'].key[:12]}"
            if (note := self.language_embedding_note()) is not None:
                card["language embedding"] = note
        card |= {
            "base model artifact": f"base_model {base.key[:12]}",
            "base model": str(base_config.get("model") or base_config.get("source")),
            "pooling": str(self.encoder.pooling),
            "prefix": repr(self.config.encoder.prefix),
            "max length": str(self.encoder.max_length),
            "corpus artifact": f"corpus {self.inputs['corpus'].key[:12]}",
        }
        report = build_report(
            metrics,
            title=self.config.title,
            model_card=card,
            baseline=baseline,
            baseline_name=baseline_name,
            similarities=self.similarities,
            word_map=self.word_map,
            seed=self.config.seed,
            items=items,
            baseline_items=baseline_items,
            leakage=leakage,
            trained="train" in self.inputs,
            sts_items=sts_items,
            baseline_sts_items=baseline_sts_items,
            curves=self._training_curves(),
            screening=self.config.screening_notes(),
            base_similarities=base_similarities if base_metrics is not None and not self.config.baseline else (),
        )
        folder = self.context.workdir / REPORT_DIR
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.md").write_text(report.markdown, encoding="utf-8")
        (folder / "report.html").write_text(report.html, encoding="utf-8")
        for name, png in report.figures.items():
            (folder / name).write_bytes(png)
        if base_metrics is not None:
            pq.write_table(base_metrics, folder / "base_metrics.parquet")
        if leakage is not None:
            pq.write_table(leakage, folder / "leakage.parquet")
        self.context.attach_dir(folder, prefix=f"{REPORT_DIR}/")
        return headline_changes(report.deltas, baseline_name or "baseline")

    def _training_curves(self) -> pa.Table | None:
        """The scored train artifact's curves.parquet (None without a train input or the file)."""
        if "train" not in self.inputs:
            return None
        path = self.inputs["train"].local_dir() / "curves.parquet"
        return pq.read_table(path) if path.is_file() else None


def main_metric_rows(metrics: pa.Table) -> pl.DataFrame:
    """The rows of each (benchmark, dataset)'s main metric (`benchmarks.headline_metric`), in table order."""
    frame = pl.from_arrow(metrics)
    chosen = {
        (benchmark, dataset): headline_metric(benchmark, list(dict.fromkeys(part["metric"])))
        for (benchmark, dataset), part in frame.group_by(["benchmark", "dataset"], maintain_order=True)
    }
    keep = [
        chosen[benchmark, dataset] == metric
        for benchmark, dataset, metric in zip(frame["benchmark"], frame["dataset"], frame["metric"])
    ]
    return frame.filter(pl.Series(keep, dtype=pl.Boolean))


def headline_metrics(metrics: pa.Table) -> dict[str, Any]:
    """Per benchmark/dataset, the mean over languages of its main metric: what `xlembed run` and Prefect show.

    Where a dataset also scored pairs of two non-pivot languages (`pairs = "all"`), its
    headline stays the mean over pivot pairs and `{benchmark}/{dataset}/xx-yy` is added."""

    out: dict[str, Any] = {}
    for (benchmark, dataset), chosen in main_metric_rows(metrics).group_by(["benchmark", "dataset"], maintain_order=True):
        metric = chosen["metric"][0]
        languages = chosen.filter(~pl.col("src_lang").str.starts_with(GROUP_PREFIX))
        xx_yy = chosen.filter(pl.col("src_lang") == group_code(XX_YY_GROUP))
        if xx_yy.height:
            pivot = dataset_pivot(zip(languages["src_lang"], languages["tgt_lang"]))
            if pivot is not None:
                languages = languages.filter(pl.col("tgt_lang") == pivot)
        if languages.height:
            out[f"{benchmark}/{dataset}"] = {
                "metric": metric,
                "mean": round(float(languages["value"].mean()), 4),
                "pairs": languages.height,
            }
        if xx_yy.height:
            out[f"{benchmark}/{dataset}/{XX_YY_GROUP}"] = {
                "metric": metric,
                "mean": round(float(xx_yy["value"].mean()), 4),
                "pairs": int(xx_yy["n"].max()),
            }
    return out


# The trainer's language-ID vectors (`train.language_embedding = true`) live beside the model;
# transformers and sentence-transformers do not apply them, so evaluate does (each benchmark
# names the language of what it encodes) and says so in the report and the manifest.
LANGUAGE_EMBEDDING_NOTE = "trained with language_embedding = true: each text is scored with its language's vector, as in training"


def trained_model_dir(artifact_dir: Path) -> Path:
    """The model folder of a train artifact: its root, or `model/` under it."""
    for candidate in (artifact_dir, artifact_dir / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    raise FileNotFoundError(f"the train artifact at {artifact_dir} holds no model (no config.json at its root or in model/)")


# What a stopped evaluation keeps: its scores are written only with the whole artifact.
STOPPED_KEEPS = "no scores of this evaluation are kept (they are written together, at its end); every earlier stage is kept; rerun evaluates again"


def _hms(seconds: float) -> str:
    seconds = int(round(max(0.0, seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _score(evaluation: _Evaluation, config: EvaluateConfig) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(metrics, retrieval items, STS items) of one model; a requested stop ends it between benchmarks or batches."""
    total = len(config.benchmarks)
    for index, bench in enumerate(config.benchmarks):
        raise_if_stopping(
            f"evaluate: stopped before benchmark {index + 1} of {total} ({bench.kind}) of {evaluation.model_name}; {STOPPED_KEEPS}"
        )
        evaluation.benchmark_label = f"{bench.kind} ({index + 1}/{total})"
        evaluation.context.report(f"evaluate: {evaluation.model_name}: benchmark {evaluation.benchmark_label}")
        before, started, encoded = len(evaluation.rows), time.perf_counter(), evaluation.encoded
        bench.score(evaluation)
        elapsed = time.perf_counter() - started
        texts = evaluation.encoded - encoded
        rate = f", {texts / elapsed:,.1f} texts/s" if texts and elapsed > 0 else ""
        evaluation.context.report(
            f"evaluate: {evaluation.model_name}: {evaluation.benchmark_label} done in {_hms(elapsed)}, "
            f"{texts:,} texts encoded{rate}"
        )
        for key in dict.fromkeys((row["benchmark"], row["dataset"]) for row in evaluation.rows[before:]):
            evaluation.seconds[key] = evaluation.seconds.get(key, 0.0) + elapsed
    return evaluation.metrics_table(), evaluation.items_table(), evaluation.sts_items_table()


def build_evaluate_shard(config: EvaluateConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    base_dir = inputs["base_model"].local_dir()
    base_metrics = base_items = base_sts_items = None
    base_similarities: list[Any] = []
    if "train" in inputs:
        evaluation = _Evaluation(config, inputs, context, trained_model_dir(inputs["train"].local_dir()), "the trained model")
        if config.compare_with_base:
            # its own context: the base reads the same data, which must not be counted twice
            base_context = context.sharing_progress()
            base_evaluation = _Evaluation(config, inputs, base_context, base_dir, "the base model")
            base_metrics, base_items, base_sts_items = _score(base_evaluation, config)
            base_similarities = base_evaluation.similarities
    else:
        evaluation = _Evaluation(config, inputs, context, base_dir, "the base model")
    metrics, items, sts_items = _score(evaluation, config)
    leakage = training_overlap(evaluation.sentence_sets, inputs)
    _attach_items(context, ITEMS_FILE, items)
    if base_items is not None:
        _attach_items(context, BASE_ITEMS_FILE, base_items)
    if sts_items.num_rows:
        _attach_items(context, STS_ITEMS_FILE, sts_items, STS_ITEMS_SCHEMA)
    if base_sts_items is not None and base_sts_items.num_rows:
        _attach_items(context, BASE_STS_ITEMS_FILE, base_sts_items, STS_ITEMS_SCHEMA)
    _attach_mteb_results(config, context, metrics, evaluation.seconds)
    changes = evaluation.report(
        metrics, base_metrics, items=items, base_items=base_items, leakage=leakage, sts_items=sts_items, base_sts_items=base_sts_items,
        base_similarities=base_similarities,
    )  # fmt: skip
    if "train" in inputs:
        _attach_model_card(config, inputs, context, metrics, base_metrics, items, base_items)
    context.metrics = {"headline": headline_metrics(metrics), "metric_rows": metrics.num_rows, "item_rows": items.num_rows}
    if screening := config.screening_notes():
        context.metrics["screening"] = screening
    if leakage.num_rows:
        context.metrics["training_overlap"] = leakage_summary(leakage)
    if base_metrics is not None:
        context.metrics["base_headline"] = headline_metrics(base_metrics)
    if changes:
        context.metrics["headline_change"] = changes
    if "train" in inputs and (note := evaluation.language_embedding_note()) is not None:
        log.info("evaluate: train artifact %s: %s", inputs["train"].key[:12], note)
        context.metrics["language_embedding"] = note
    yield metrics


def training_overlap(sentence_sets: Sequence[Any], inputs: Inputs) -> pa.Table:
    """How many of each scored set's sentences occur, normalised, in the rows the train stage
    trains on (the corpus's train split, or the translate artifact's): tasks/evaluate/leakage.py."""

    return overlap_table(sentence_sets, training_keys(training_table(inputs)))


def _attach_model_card(
    config: EvaluateConfig, inputs: Inputs, context: ShardContext, metrics: pa.Table, base_metrics: pa.Table | None,
    items: pa.Table, base_items: pa.Table | None,
) -> None:  # fmt: skip
    """The scored trained model's card, with these results (and the report's paired intervals), as `model-card.md`."""

    train = inputs["train"]
    results = EvaluationResults.from_tables(
        None, metrics, config.encoder.model_dump(mode="json"), base_metrics, main_metric=main_metric, hub_task_type=hub_task_type,
        items=items, base_items=base_items, seed=config.seed, paired_intervals=paired_delta_intervals,
        group_members=group_languages,
    )  # fmt: skip
    path = context.workdir / CARD_FILE
    path.write_text(render_model_card(card_facts(train.store, train.key, TRAIN_CARD), results), encoding="utf-8")
    context.attach(CARD_FILE, path)


MTEB_DIR = "mteb"


def _attach_mteb_results(
    config: EvaluateConfig, context: ShardContext, metrics: pa.Table, seconds: dict[tuple[str, str], float]
) -> None:
    """The scored model's Tatoeba/BUCC/STS scores as MTEB-format result files, `mteb/{Task}.json`
    (tasks/evaluate/mteb_results.py); the MTEB bridge's own files are under `mteb/bridge/`."""

    revisions = {}
    for bench in config.benchmarks:
        try:
            revisions.setdefault(bench.kind, dataset_revision(bench.fingerprint()))
        except OSError:  # its files were checked at plan time; a hash is a label here, not a requirement
            continue
    benchmarks = set(metrics.column("benchmark").to_pylist())
    files = mteb_result_files(metrics, {b: m for b in benchmarks if (m := main_metric(b)) is not None}, revisions, seconds)
    if files:
        folder = context.workdir / MTEB_DIR
        write_mteb_results(folder, files)
        for name in files:
            context.attach(f"{MTEB_DIR}/{name}", folder / name)


def _attach_items(context: ShardContext, name: str, items: pa.Table, schema: pa.Schema = ITEMS_SCHEMA) -> None:
    path = context.workdir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(items.cast(schema), path)
    context.attach(name, path)


def fingerprint_evaluate_sources(config: EvaluateConfig) -> dict[str, Any]:
    """The contents of the benchmark files (a folder's by file name, not by its path), so edited
    benchmark data re-evaluates and the same data elsewhere does not: `{index}:{kind}` plus the
    suffix each benchmark's `fingerprint` names its parts by."""
    prints: dict[str, Any] = {}
    for index, bench in enumerate(config.benchmarks):
        try:
            parts = bench.fingerprint()
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"evaluate.benchmarks[{index}] ({bench.kind}): {exc}") from None
        prints |= {f"{index}:{bench.kind}{suffix}": value for suffix, value in parts.items()}
    return prints


EVALUATE_STAGE: Stage[EvaluateConfig] = Stage(
    name="evaluate",
    code_version=CODE_VERSION,
    config_model=EvaluateConfig,
    schema=METRICS_SCHEMA,
    plan_shards=plan_evaluate_shards,
    build_shard=build_evaluate_shard,
    inputs=("corpus", "base_model"),
    optional_inputs=("translate", "train"),
    fingerprint_sources=fingerprint_evaluate_sources,
    check_sources=benchmark_problems,
    description=f"score the encoder on the registered benchmarks ({', '.join(BENCHMARKS)}); write a report",
    one_at_a_time=True,
)
