"""The evaluate stage: score an encoder on retrieval, mining and STS benchmarks; write a report.

Input artifacts: `base_model` (the encoder, as a transformers directory), `corpus` (for
the held-out `dev` split; `translate` instead when the pipeline translates) and, when the
pipeline trains one, `train` (the trained encoder:
it is the model scored, and the base model is scored beside it for a before/after report).
Output: the metrics table (Parquet, `METRICS_SCHEMA`) of the scored model and, as attached
files, `report/report.md`, `report/report.html`, the figures and, with a trained model,
`report/base_metrics.parquet`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from tasks.corpus.languages import to_flores
from tasks.evaluate.config import (
    BuccBenchmark,
    CorpusDevBenchmark,
    EvaluateConfig,
    MtebBenchmark,
    MultiwayBenchmark,
    StsBenchmark,
    TatoebaBenchmark,
    XnliBenchmark,
)
from tasks.evaluate.schema import METRICS_SCHEMA
from tasks.stage import Inputs, ShardContext, ShardSpec, Stage, file_fingerprint

CODE_VERSION = "1"
REPORT_DIR = "report"


def check_benchmark_files(config: EvaluateConfig) -> None:
    """Parse every benchmark's files before any model loads, so that a bad line in the last
    benchmark fails in seconds (naming file, line and field), not after the first ones ran."""
    from tasks.evaluate import datasets

    for bench in config.benchmarks:
        if isinstance(bench, TatoebaBenchmark):
            for lang in bench.langs:
                datasets.read_tatoeba(bench.path, lang)
        elif isinstance(bench, MultiwayBenchmark):
            datasets.read_multiway_rows(bench.path, bench.langs, slice(bench.row_start, bench.row_stop), pattern=bench.pattern)
        elif isinstance(bench, BuccBenchmark):
            for lang in bench.langs:
                datasets.read_bucc(bench.path, lang, bench.tune_split)
                datasets.read_bucc(bench.path, lang, bench.test_split)
        elif isinstance(bench, StsBenchmark):
            if bench.layout == "semeval2017":
                datasets.read_sts2017_folder(bench.path)
            elif bench.langs and len(bench.langs) == 2:
                datasets.read_sts_tsv(bench.path, bench.langs[0], bench.langs[1])
        elif isinstance(bench, XnliBenchmark) and bench.path and bench.train_file:
            from tasks.evaluate.xnli import load_xnli_data

            load_xnli_data(bench)


def plan_evaluate_shards(config: EvaluateConfig, inputs: Inputs) -> list[ShardSpec]:
    check_benchmark_files(config)
    return [ShardSpec("evaluation", {}, f"{len(config.benchmarks)} benchmarks")]


def pair_similarities(src_lang: str, tgt_lang: str, src: np.ndarray, tgt: np.ndarray, seed: int) -> Any:
    """Cosines of translation pairs vs of the same rows paired with a seeded derangement."""
    from tasks.evaluate.report import PairSimilarities

    n = len(src)
    matched = np.einsum("ij,ij->i", src, tgt)
    if n < 2:
        return PairSimilarities(src_lang, tgt_lang, matched, matched[:0])
    shift = int(np.random.default_rng(seed).integers(1, n))  # a rotation by 1..n-1 moves every row
    shuffled = np.einsum("ij,ij->i", src, np.roll(tgt, shift, axis=0))
    return PairSimilarities(src_lang, tgt_lang, matched, shuffled)


class _Evaluation:
    """State of one evaluation run: the encoder, metric rows, figure inputs."""

    def __init__(self, config: EvaluateConfig, inputs: Inputs, context: ShardContext, model_dir: Path) -> None:
        from tasks.encoders import Encoder, EncoderSpec

        self.config, self.inputs, self.context = config, inputs, context
        self.model_dir = model_dir
        settings = config.encoder
        self.encoder = Encoder.load(
            EncoderSpec(
                model=str(self.model_dir),
                pooling=settings.pooling,
                prefix=settings.prefix,
                max_length=settings.max_length,
                batch_size=settings.batch_size,
                device=settings.device,
            )
        )
        self.rows: list[dict[str, Any]] = []
        self.similarities: list[Any] = []
        self.word_map: Any = None
        self._vectors: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of `texts`; each distinct text goes through the model once per evaluation
        (pivot sentences recur in every language pair)."""
        self.context.read(len(texts))
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self.encoder.encode(missing)))
        if not texts:
            return np.zeros((0, self.encoder.dim), dtype=np.float32)
        return np.stack([self._vectors[t] for t in texts])

    def add_pair(self, src_lang: str, tgt_lang: str, src: np.ndarray, tgt: np.ndarray) -> None:
        self.similarities.append(pair_similarities(src_lang, tgt_lang, src, tgt, self.config.seed + len(self.similarities)))

    # ------------------------------------------------------------ benchmarks
    def tatoeba(self, bench: TatoebaBenchmark) -> None:
        from tasks.evaluate.datasets import read_tatoeba
        from tasks.evaluate.retrieval import tatoeba_rows

        for lang in bench.langs:
            pairs = read_tatoeba(bench.path, lang)
            src, tgt = self.encode(pairs.src), self.encode(pairs.tgt)
            self.rows += tatoeba_rows(src, tgt, src_lang=pairs.src_lang, tgt_lang=pairs.tgt_lang)
            self.add_pair(pairs.src_lang, pairs.tgt_lang, src, tgt)

    def multiway(self, bench: MultiwayBenchmark) -> None:
        from tasks.evaluate.datasets import read_multiway_rows
        from tasks.evaluate.retrieval import multiway_retrieval_rows

        rows = slice(bench.row_start, bench.row_stop)
        data = read_multiway_rows(bench.path, bench.langs, rows, pattern=bench.pattern)
        pivot = to_flores(bench.pivot)
        if pivot not in data.sentences:
            raise ValueError(f"evaluate: multiway pivot {pivot} is not among langs {list(data.sentences)}")
        embeddings = {lang: self.encode(texts) for lang, texts in data.sentences.items()}
        self.rows += multiway_retrieval_rows(embeddings, dataset=bench.name, pivot=pivot)
        for lang in embeddings:
            if lang != pivot:
                self.add_pair(lang, pivot, embeddings[lang], embeddings[pivot])

    def corpus_dev(self, bench: CorpusDevBenchmark) -> None:
        from tasks.evaluate.retrieval import retrieval_rows

        pivot = to_flores(bench.pivot)
        # the multi-way corpus: NLLB's translations when the pipeline translates, else the corpus
        corpus = self.inputs["translate"] if "translate" in self.inputs else self.inputs["corpus"]
        dev = pl.from_arrow(corpus.read_table(["group_id", "lang", "text", "split"])).filter(pl.col("split") == "dev")
        wide = dev.pivot(on="lang", index="group_id", values="text").sort("group_id")
        if pivot not in wide.columns:
            raise ValueError(f"evaluate: the corpus dev split has no {pivot} rows to pair with")
        if bench.max_groups is not None:
            wide = wide.head(bench.max_groups)
        langs = [c for c in wide.columns if c not in ("group_id", pivot)]
        for lang in sorted(langs):
            pairs = wide.select(pivot, lang).drop_nulls()
            if pairs.height < 2:
                self.context.drop("corpus_dev_pair_too_small", pairs.height)
                continue
            src, tgt = self.encode(pairs[lang].to_list()), self.encode(pairs[pivot].to_list())
            self.rows += retrieval_rows(src, tgt, src_lang=lang, tgt_lang=pivot, dataset="corpus-dev")
            self.add_pair(lang, pivot, src, tgt)
        if self.config.word_map_concepts and self.word_map is None:
            self.word_map = self._word_map(wide, pivot)

    def _word_map(self, wide: pl.DataFrame, pivot: str) -> Any:
        """Single-word concepts (the pivot text has no space) with their translations."""
        from tasks.evaluate.report import WordMap

        langs = [c for c in wide.columns if c != "group_id"]
        single = wide.filter(~pl.col(pivot).str.contains(r"\s") & (pl.sum_horizontal(pl.col(langs).is_not_null()) >= 3))
        chosen = single.head(self.config.word_map_concepts)
        long = chosen.unpivot(on=langs, index=[pivot], variable_name="lang", value_name="word").drop_nulls("word")
        if long.height == 0:
            return None
        words = long["word"].to_list()
        return WordMap(words=words, langs=long["lang"].to_list(), concept=long[pivot].to_list(), vectors=self.encode(words))

    def bucc(self, bench: BuccBenchmark) -> None:
        from tasks.evaluate.datasets import read_bucc
        from tasks.evaluate.mining import bucc_rows

        for lang in bench.langs:
            tune = read_bucc(bench.path, lang, bench.tune_split)
            test = read_bucc(bench.path, lang, bench.test_split)
            self.context.drop("bucc_duplicate_gold_line", tune.duplicate_gold_lines + test.duplicate_gold_lines)
            self.rows += bucc_rows(
                tune, self.encode(tune.src), self.encode(tune.tgt), test, self.encode(test.src), self.encode(test.tgt), k=bench.k
            )

    def sts(self, bench: StsBenchmark) -> None:
        from tasks.evaluate.datasets import read_sts2017_folder, read_sts_tsv
        from tasks.evaluate.sts import sts_rows

        if bench.layout == "semeval2017":
            sets = read_sts2017_folder(bench.path)
        else:
            if not bench.langs or len(bench.langs) != 2:
                raise ValueError("evaluate: an STS tsv benchmark needs langs = [src, tgt]")
            sets = [read_sts_tsv(bench.path, bench.langs[0], bench.langs[1])]
        for pairs in sets:
            self.context.drop("sts_unscored_pair", pairs.unscored_dropped)
            self.rows += sts_rows(
                self.encode(pairs.sentence1), self.encode(pairs.sentence2), pairs.scores,
                dataset=pairs.dataset, src_lang=pairs.src_lang, tgt_lang=pairs.tgt_lang,
            )

    def mteb(self, bench: MtebBenchmark) -> None:
        from tasks.evaluate.mteb_bridge import run_mteb

        self.rows += run_mteb(self.model_dir, list(bench.tasks), Path(bench.cache_dir).expanduser())

    def xnli(self, bench: XnliBenchmark) -> None:
        from tasks.evaluate.xnli import xnli_rows

        self.rows += xnli_rows(self.model_dir, bench, self.config.encoder, progress=self.context.progress, drop=self.context.drop)

    # ---------------------------------------------------------------- output
    def metrics_table(self) -> pa.Table:
        from tasks.evaluate.groups import LANGUAGE_GROUPS, group_average_rows, rows_table

        rows = group_average_rows(self.rows, [LANGUAGE_GROUPS[name] for name in self.config.groups])
        return rows_table(rows).cast(METRICS_SCHEMA)

    def report(self, metrics: pa.Table, base_metrics: pa.Table | None = None) -> None:
        from tasks.evaluate.report import build_report

        baseline, baseline_name = None, None
        if self.config.baseline:
            store = self.inputs["base_model"].store
            key = store.resolve("evaluate", self.config.baseline)
            baseline, baseline_name = store.read_table("evaluate", key), f"evaluate {key[:12]}"
        elif base_metrics is not None:
            baseline, baseline_name = base_metrics, "untrained base"
        base = self.inputs["base_model"]
        base_config = base.manifest().config
        card = {}
        if "train" in self.inputs:
            card["trained model artifact"] = f"train {self.inputs['train'].key[:12]}"
        card |= {
            "base model artifact": f"base_model {base.key[:12]}",
            "base model": str(base_config.get("model") or base_config.get("source")),
            "pooling": str(self.encoder.pooling),
            "prefix": repr(self.config.encoder.prefix),
            "max length": str(self.encoder.max_length),
            "corpus artifact": f"corpus {self.inputs['corpus'].key[:12]}",
        }
        report = build_report(
            metrics, title=self.config.title, model_card=card, baseline=baseline, baseline_name=baseline_name,
            similarities=self.similarities, word_map=self.word_map, seed=self.config.seed,
        )
        folder = self.context.workdir / REPORT_DIR
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.md").write_text(report.markdown, encoding="utf-8")
        (folder / "report.html").write_text(report.html, encoding="utf-8")
        for name, png in report.figures.items():
            (folder / name).write_bytes(png)
        if base_metrics is not None:
            import pyarrow.parquet as pq

            pq.write_table(base_metrics, folder / "base_metrics.parquet")
        self.context.attach_dir(folder, prefix=f"{REPORT_DIR}/")


def headline_metrics(metrics: pa.Table) -> dict[str, Any]:
    """Per benchmark/dataset, the mean of its main metric: what `xlembed run` and Prefect show."""
    main = {"tatoeba": "accuracy_mean", "retrieval": "accuracy_mean", "bucc": "f1", "sts": "spearman"}
    frame = pl.from_arrow(metrics).filter(~pl.col("src_lang").str.starts_with("group:"))
    out: dict[str, Any] = {}
    for (benchmark, dataset), part in frame.group_by(["benchmark", "dataset"], maintain_order=True):
        metric = main.get(benchmark)
        values = part.filter(pl.col("metric") == metric)["value"] if metric else part["value"]
        if len(values):
            out[f"{benchmark}/{dataset}"] = {"metric": metric or "mean", "mean": round(float(values.mean()), 4), "pairs": len(values)}
    return out


def trained_model_dir(artifact_dir: Path) -> Path:
    """The model folder of a train artifact: its root, or `model/` under it."""
    for candidate in (artifact_dir, artifact_dir / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    raise FileNotFoundError(f"the train artifact at {artifact_dir} holds no model (no config.json at its root or in model/)")


def _score(evaluation: _Evaluation, config: EvaluateConfig) -> pa.Table:
    runners = {
        "tatoeba": evaluation.tatoeba,
        "multiway": evaluation.multiway,
        "corpus_dev": evaluation.corpus_dev,
        "bucc": evaluation.bucc,
        "sts": evaluation.sts,
        "mteb": evaluation.mteb,
        "xnli": evaluation.xnli,
    }
    for bench in config.benchmarks:
        runners[bench.kind](bench)
    return evaluation.metrics_table()


def build_evaluate_shard(config: EvaluateConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    base_dir = inputs["base_model"].local_dir()
    base_metrics = None
    if "train" in inputs:
        evaluation = _Evaluation(config, inputs, context, trained_model_dir(inputs["train"].local_dir()))
        if config.compare_with_base:
            base_metrics = _score(_Evaluation(config, inputs, ShardContext(shard.shard_id, workdir=context.workdir), base_dir), config)
    else:
        evaluation = _Evaluation(config, inputs, context, base_dir)
    metrics = _score(evaluation, config)
    evaluation.report(metrics, base_metrics)
    context.metrics = {"headline": headline_metrics(metrics), "metric_rows": metrics.num_rows}
    if base_metrics is not None:
        context.metrics["base_headline"] = headline_metrics(base_metrics)
    yield metrics


def fingerprint_evaluate_sources(config: EvaluateConfig) -> dict[str, Any]:
    """Sizes and mtimes of the benchmark files, so edited benchmark data re-evaluates."""
    prints: dict[str, Any] = {}
    for index, bench in enumerate(config.benchmarks):
        if getattr(bench, "train_file", None):  # xnli: the training pairs live outside `path`
            prints[f"{index}:{bench.kind}:train_file"] = file_fingerprint(Path(bench.train_file).expanduser())
        path = getattr(bench, "path", None)
        if path is None:
            continue
        root = Path(path).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"evaluate.benchmarks[{index}] ({bench.kind}): {root} does not exist")
        files = [root] if root.is_file() else sorted(p for p in root.iterdir() if p.is_file())
        prints[f"{index}:{bench.kind}"] = {p.name: file_fingerprint(p) for p in files}
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
    description="score the encoder on Tatoeba, BUCC, STS and held-out retrieval; write a report",
)
