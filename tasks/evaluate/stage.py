"""The evaluate stage: score an encoder on retrieval, mining and STS benchmarks; write a report.

Input artifacts: `base_model` (the encoder, as a transformers directory), `corpus` (for
the held-out `dev` split; `translate` instead when the pipeline translates) and, when the
pipeline trains one, `train` (the trained encoder:
it is the model scored, and the base model is scored beside it for a before/after report).
Output: the metrics table (Parquet, `METRICS_SCHEMA`) of the scored model and, as attached
files, `items.parquet` (per-query retrieval outcomes, `ITEMS_SCHEMA`), `report/report.md`,
`report/report.html`, the figures, `report/leakage.parquet` (how many of each scored set's
sentences occur, normalised, in the training rows: tasks/evaluate/leakage.py) and, with a trained model, `report/base_metrics.parquet` and
`items/base_items.parquet` (the untrained base's items, which the report's paired bootstrap
intervals and the sweep comparison read). When it scored a trained model it also stores that
model's card with these results, `model-card.md` (tasks/train/model_card.py): each evaluation
is a new version of the card, which `xlembed export` of the model uses (the newest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

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
from tasks.evaluate.schema import ITEMS_SCHEMA, METRICS_SCHEMA
from tasks.stage import Inputs, ShardContext, ShardSpec, Stage, file_fingerprint, folder_fingerprint

CODE_VERSION = "3"  # 2: margin_mean rows, per-query items, distractors, xx-yy pairs; 3: training-corpus overlap
REPORT_DIR = "report"
# Attached paths of the per-query items: a contract with the sweep comparison, which reads them.
ITEMS_FILE = "items.parquet"
BASE_ITEMS_FILE = "items/base_items.parquet"


def check_benchmark_files(config: EvaluateConfig) -> None:
    """Parse every benchmark's files before any model loads, so that a bad line in the last
    benchmark fails in seconds (naming file, line and field), not after the first ones ran.
    The readers remember what they parsed (tasks/evaluate/datasets.py), so scoring the model,
    and the base beside it, reads these results again instead of parsing the files again."""
    from tasks.evaluate import datasets

    for bench in config.benchmarks:
        if isinstance(bench, TatoebaBenchmark):
            langs = {datasets.read_tatoeba(bench.path, lang).src_lang for lang in bench.langs} | {"eng_Latn"}
            for source in bench.distractors:
                folder = datasets.scan_distractor_folder(source.path, source.pattern, source.files)
                for lang in sorted(langs):
                    folder.read(lang)
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


def benchmark_problems(config: EvaluateConfig) -> list[str]:
    """`check_benchmark_files` as the plan-time check: the first problem, naming file and line."""
    from tasks.evaluate.datasets import BenchmarkDataError

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
        self.items: list[pa.Table] = []
        self.similarities: list[Any] = []
        self.sentence_sets: list[Any] = []  # leakage.SentenceSet of every scored pair, for the overlap check
        self.word_map: Any = None
        self._vectors: dict[str, np.ndarray] = {}
        self._distractor_lines: dict[tuple[str, str], tuple[str, ...]] = {}

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

    def add_sentences(self, benchmark: str, dataset: str, src_lang: str, tgt_lang: str, src: Sequence[str], tgt: Sequence[str], aligned: bool = True) -> None:
        from tasks.evaluate.leakage import SentenceSet

        self.sentence_sets.append(SentenceSet(benchmark, dataset, src_lang, tgt_lang, tuple(src), tuple(tgt), aligned))

    def add_scores(self, scores: Iterable[Any]) -> None:
        """Metric rows and per-query items of scored pairs (`retrieval.PairRetrieval`)."""
        for scored in scores:
            self.rows += scored.metric_rows()
            self.items.append(scored.items())

    # ------------------------------------------------------------ benchmarks
    def tatoeba(self, bench: TatoebaBenchmark) -> None:
        from tasks.evaluate.datasets import read_tatoeba, scan_distractor_folder
        from tasks.evaluate.retrieval import score_pair

        folders = [(s.name, scan_distractor_folder(s.path, s.pattern, s.files)) for s in bench.distractors]
        for lang in bench.langs:
            pairs = read_tatoeba(bench.path, lang)
            if bench.max_pairs is not None and len(pairs) > bench.max_pairs:
                self.context.drop("tatoeba_pair_beyond_max_pairs", len(pairs) - bench.max_pairs)
                pairs = dataclasses.replace(pairs, src=pairs.src[: bench.max_pairs], tgt=pairs.tgt[: bench.max_pairs])
            src, tgt = self.encode(pairs.src), self.encode(pairs.tgt)
            names = {"src_lang": pairs.src_lang, "tgt_lang": pairs.tgt_lang, "benchmark": "tatoeba"}
            self.add_scores([score_pair(src, tgt, dataset="tatoeba", **names)])
            for dataset in ("tatoeba", "tatoeba-distractors") if folders else ("tatoeba",):
                self.add_sentences("tatoeba", dataset, pairs.src_lang, pairs.tgt_lang, pairs.src, pairs.tgt)
            self.add_pair(pairs.src_lang, pairs.tgt_lang, src, tgt)
            if folders:
                src_pool = self.distractor_pool(folders, pairs.src_lang, pairs.src)
                tgt_pool = self.distractor_pool(folders, pairs.tgt_lang, pairs.tgt)
                self.add_scores(
                    [
                        score_pair(
                            src, tgt, dataset="tatoeba-distractors", src_distractors=self.encode(src_pool),
                            tgt_distractors=self.encode(tgt_pool), **names,
                        )
                    ]
                )

    def distractor_pool(self, folders: Sequence[tuple[str, Any]], lang: str, tatoeba_side: Sequence[str]) -> list[str]:
        """Distractor rows of `lang` from every folder, each text once, without the texts of
        `tatoeba_side`: a distractor equal to a sentence's translation would be scored as a
        wrong answer. Both removals are counted."""
        pool: dict[str, None] = {}
        offered = 0
        for name, folder in folders:
            if (name, lang) not in self._distractor_lines:  # English is read once for all languages
                self._distractor_lines[name, lang] = folder.read(lang)
            lines = self._distractor_lines[name, lang]
            offered += len(lines)
            pool.update(dict.fromkeys(line.strip() for line in lines))
        unique = len(pool)
        for text in tatoeba_side:
            pool.pop(text.strip(), None)
        self.context.drop("tatoeba_distractor_repeated", offered - unique)
        self.context.drop("tatoeba_distractor_equals_tatoeba_sentence", unique - len(pool))
        return list(pool)

    def multiway(self, bench: MultiwayBenchmark) -> None:
        from tasks.evaluate.datasets import read_multiway_rows
        from tasks.evaluate.retrieval import multiway_pair_scores, xx_yy_rows

        rows = slice(bench.row_start, bench.row_stop)
        data = read_multiway_rows(bench.path, bench.langs, rows, pattern=bench.pattern)
        pivot = to_flores(bench.pivot)
        if pivot not in data.sentences:
            raise ValueError(f"evaluate: multiway pivot {pivot} is not among langs {list(data.sentences)}")
        embeddings = {lang: self.encode(texts) for lang, texts in data.sentences.items()}
        scores = multiway_pair_scores(embeddings, dataset=bench.name, pivot=pivot, xx_yy=bench.pairs == "all")
        self.add_scores(scores)
        for scored in scores:
            self.add_sentences(
                scored.benchmark, scored.dataset, scored.src_lang, scored.tgt_lang,
                data.sentences[scored.src_lang], data.sentences[scored.tgt_lang],
            )  # fmt: skip
        self.rows += xx_yy_rows(scores, pivot)
        for lang in embeddings:
            if lang != pivot:
                self.add_pair(lang, pivot, embeddings[lang], embeddings[pivot])

    def corpus_dev(self, bench: CorpusDevBenchmark) -> None:
        from tasks.evaluate.retrieval import score_pair, xx_yy_rows

        pivot = to_flores(bench.pivot)
        # the multi-way corpus: NLLB's translations when the pipeline translates, else the corpus
        corpus = self.inputs["translate"] if "translate" in self.inputs else self.inputs["corpus"]
        dev = pl.from_arrow(corpus.read_table(["group_id", "lang", "text", "split"])).filter(pl.col("split") == "dev")
        wide = dev.pivot(on="lang", index="group_id", values="text").sort("group_id")
        if pivot not in wide.columns:
            raise ValueError(f"evaluate: the corpus dev split has no {pivot} rows to pair with")
        if bench.max_groups is not None:
            wide = wide.head(bench.max_groups)
        langs = sorted(c for c in wide.columns if c not in ("group_id", pivot))
        pairs_to_score = [(lang, pivot) for lang in langs] + (list(combinations(langs, 2)) if bench.pairs == "all" else [])
        scores = []
        for src_lang, tgt_lang in pairs_to_score:
            pairs = wide.select(src_lang, tgt_lang).drop_nulls()  # the groups that have both languages
            if pairs.height < 2:
                self.context.drop("corpus_dev_pair_too_small", pairs.height)
                continue
            src, tgt = self.encode(pairs[src_lang].to_list()), self.encode(pairs[tgt_lang].to_list())
            scores.append(score_pair(src, tgt, src_lang=src_lang, tgt_lang=tgt_lang, dataset="corpus-dev"))
            self.add_sentences("retrieval", "corpus-dev", src_lang, tgt_lang, pairs[src_lang].to_list(), pairs[tgt_lang].to_list())
            if tgt_lang == pivot:
                self.add_pair(src_lang, tgt_lang, src, tgt)
        self.add_scores(scores)
        self.rows += xx_yy_rows(scores, pivot)
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
            for split in (test, tune):  # the rows' dataset names (mining.bucc_rows)
                self.add_sentences("bucc", f"bucc2018.{split.split}", split.src_lang, split.tgt_lang, split.src, split.tgt, aligned=False)
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
            self.add_sentences("sts", pairs.dataset, pairs.src_lang, pairs.tgt_lang, pairs.sentence1, pairs.sentence2)
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

    def items_table(self) -> pa.Table:
        """Per-query outcomes of every retrieval pair scored (ITEMS_SCHEMA; empty without retrieval benchmarks)."""
        return pa.concat_tables(self.items) if self.items else ITEMS_SCHEMA.empty_table()

    def report(
        self,
        metrics: pa.Table,
        base_metrics: pa.Table | None = None,
        items: pa.Table | None = None,
        base_items: pa.Table | None = None,
        leakage: pa.Table | None = None,
    ) -> None:
        from tasks.evaluate.report import build_report

        baseline, baseline_name, baseline_items = None, None, None
        if self.config.baseline:
            store = self.inputs["base_model"].store
            key = store.resolve("evaluate", self.config.baseline)
            baseline, baseline_name = store.read_table("evaluate", key), f"evaluate {key[:12]}"
            # an evaluate artifact of code version 1 has no items: then the report has no intervals
            if any(entry.path == f"files/{ITEMS_FILE}" for entry in store.manifest("evaluate", key).attached_files):
                baseline_items = pq.read_table(store.attached_dir("evaluate", key) / ITEMS_FILE)
        elif base_metrics is not None:
            baseline, baseline_name, baseline_items = base_metrics, "untrained base", base_items
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
            items=items, baseline_items=baseline_items, leakage=leakage, trained="train" in self.inputs,
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


def headline_metrics(metrics: pa.Table) -> dict[str, Any]:
    """Per benchmark/dataset, the mean of its main metric: what `xlembed run` and Prefect show.

    Where a dataset also scored pairs of two non-pivot languages (`pairs = "all"`), its
    headline stays the mean over pivot pairs and `{benchmark}/{dataset}/xx-yy` is added."""
    from tasks.evaluate.retrieval import XX_YY_GROUP, dataset_pivot

    main = {"tatoeba": "accuracy_mean", "retrieval": "accuracy_mean", "bucc": "f1", "sts": "spearman"}
    frame = pl.from_arrow(metrics)
    out: dict[str, Any] = {}
    for (benchmark, dataset), part in frame.group_by(["benchmark", "dataset"], maintain_order=True):
        metric = main.get(benchmark)
        chosen = part.filter(pl.col("metric") == metric) if metric else part
        languages = chosen.filter(~pl.col("src_lang").str.starts_with("group:"))
        xx_yy = chosen.filter(pl.col("src_lang") == f"group:{XX_YY_GROUP}")
        if xx_yy.height:
            pivot = dataset_pivot(zip(languages["src_lang"], languages["tgt_lang"]))
            if pivot is not None:
                languages = languages.filter(pl.col("tgt_lang") == pivot)
        if languages.height:
            out[f"{benchmark}/{dataset}"] = {
                "metric": metric or "mean", "mean": round(float(languages["value"].mean()), 4), "pairs": languages.height
            }
        if xx_yy.height:
            out[f"{benchmark}/{dataset}/{XX_YY_GROUP}"] = {
                "metric": metric or "mean", "mean": round(float(xx_yy["value"].mean()), 4), "pairs": int(xx_yy["n"].max())
            }
    return out


def trained_model_dir(artifact_dir: Path) -> Path:
    """The model folder of a train artifact: its root, or `model/` under it."""
    for candidate in (artifact_dir, artifact_dir / "model"):
        if (candidate / "config.json").is_file():
            return candidate
    raise FileNotFoundError(f"the train artifact at {artifact_dir} holds no model (no config.json at its root or in model/)")


def _score(evaluation: _Evaluation, config: EvaluateConfig) -> tuple[pa.Table, pa.Table]:
    """(metrics, items) of one model."""
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
    return evaluation.metrics_table(), evaluation.items_table()


def build_evaluate_shard(config: EvaluateConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    base_dir = inputs["base_model"].local_dir()
    base_metrics = base_items = None
    if "train" in inputs:
        evaluation = _Evaluation(config, inputs, context, trained_model_dir(inputs["train"].local_dir()))
        if config.compare_with_base:
            # its own context: the base reads the same data, which must not be counted twice
            base_context = ShardContext(shard.shard_id, workdir=context.workdir)
            base_metrics, base_items = _score(_Evaluation(config, inputs, base_context, base_dir), config)
    else:
        evaluation = _Evaluation(config, inputs, context, base_dir)
    metrics, items = _score(evaluation, config)
    leakage = training_overlap(evaluation.sentence_sets, inputs)
    _attach_items(context, ITEMS_FILE, items)
    if base_items is not None:
        _attach_items(context, BASE_ITEMS_FILE, base_items)
    evaluation.report(metrics, base_metrics, items=items, base_items=base_items, leakage=leakage)
    if "train" in inputs:
        _attach_model_card(config, inputs, context, metrics, base_metrics)
    context.metrics = {"headline": headline_metrics(metrics), "metric_rows": metrics.num_rows, "item_rows": items.num_rows}
    if leakage.num_rows:
        from tasks.evaluate.leakage import leakage_summary

        context.metrics["training_overlap"] = leakage_summary(leakage)
    if base_metrics is not None:
        context.metrics["base_headline"] = headline_metrics(base_metrics)
    yield metrics


def training_overlap(sentence_sets: Sequence[Any], inputs: Inputs) -> pa.Table:
    """How many of each scored set's sentences occur, normalised, in the rows the train stage
    trains on (the corpus's train split, or the translate artifact's): tasks/evaluate/leakage.py."""
    from tasks.evaluate.leakage import overlap_table, training_keys
    from tasks.train.stage import training_table

    return overlap_table(sentence_sets, training_keys(training_table(inputs)))


def _attach_model_card(config: EvaluateConfig, inputs: Inputs, context: ShardContext, metrics: pa.Table, base_metrics: pa.Table | None) -> None:
    """The scored trained model's card, with these results, as `model-card.md`."""
    from tasks.train.model_card import CARD_FILE, EvaluationResults, render_model_card
    from tasks.train.publish import card_facts

    train = inputs["train"]
    results = EvaluationResults.from_tables(None, metrics, config.encoder.model_dump(mode="json"), base_metrics)
    path = context.workdir / CARD_FILE
    path.write_text(render_model_card(card_facts(train.store, train.key), results), encoding="utf-8")
    context.attach(CARD_FILE, path)


def _attach_items(context: ShardContext, name: str, items: pa.Table) -> None:
    path = context.workdir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(items.cast(ITEMS_SCHEMA), path)
    context.attach(name, path)


def fingerprint_evaluate_sources(config: EvaluateConfig) -> dict[str, Any]:
    """The contents of the benchmark files (a folder's by file name, not by its path), so edited
    benchmark data re-evaluates and the same data elsewhere does not."""
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
        if root.is_file():  # its name stays: it can name the dataset (an STS .tsv)
            prints[f"{index}:{bench.kind}"] = {root.name: file_fingerprint(root)}
        else:
            prints[f"{index}:{bench.kind}"] = folder_fingerprint(root, (p for p in root.iterdir() if p.is_file()))
        for source in getattr(bench, "distractors", ()):  # tatoeba: distractor folders live outside `path`
            folder = Path(source.path).expanduser()
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"evaluate.benchmarks[{index}] ({bench.kind}) distractors {source.name!r}: {folder} is not a folder"
                )
            prints[f"{index}:{bench.kind}:distractors:{source.name}"] = folder_fingerprint(
                folder, (p for p in folder.iterdir() if p.is_file())
            )
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
    description="score the encoder on Tatoeba, BUCC, STS and held-out retrieval; write a report",
    one_at_a_time=True,
)
