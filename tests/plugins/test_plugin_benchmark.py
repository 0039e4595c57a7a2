"""A benchmark added from outside the package (issue 16 §1 acceptance): this module defines and
registers it, no file of xlembed is edited, and it runs through the real evaluate stage from a
pipeline TOML: its metric rows, its headline (its own main metric), its files checked before
any encoding and keyed by content."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import polars as pl
import pytest
from pydantic import Field

from flows.config import load_config
from storage import ArtifactStore
from tasks.base_model import BASE_MODEL_STAGE
from tasks.corpus import CORPUS_STAGE
from tasks.evaluate import EVALUATE_STAGE
from tasks.evaluate.benchmarks import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.columns import headline_columns
from tasks.evaluate.datasets import BenchmarkDataError, read_lines
from tasks.evaluate.groups import metric_row
from tasks.evaluate.stage import plan_evaluate_shards
from tasks.stage import run_stage, source_fingerprints, stage_key
from tasks.stage_config import CONTENT_KEYED, ConfigPath


@register_benchmark
class PairSimilarityBenchmark(Benchmark):
    """How much closer translations are than non-translations: the mean cosine of the pairs of a
    `source TAB target` file, and its gap to the mean cosine of each source with the next pair's target."""

    kind: Literal["pair_similarity"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    src_lang: str
    tgt_lang: str = "eng_Latn"
    main_metric: ClassVar[str] = "cosine_gap"

    def read(self) -> tuple[list[str], list[str]]:
        pairs = []
        for number, line in enumerate(read_lines(self.path), 1):
            fields = line.split("\t")
            if len(fields) != 2 or not all(f.strip() for f in fields):
                raise BenchmarkDataError(self.path, number, "expected source TAB target", "pair")
            pairs.append(fields)
        if len(pairs) < 2:
            raise BenchmarkDataError(self.path, None, f"needs 2 pairs or more, found {len(pairs)}")
        return [s for s, _ in pairs], [t for _, t in pairs]

    def check_files(self) -> None:
        self.read()

    def score(self, evaluation: Evaluation) -> None:
        src_texts, tgt_texts = self.read()
        src, tgt = evaluation.encode(src_texts), evaluation.encode(tgt_texts)
        matched = float(np.einsum("ij,ij->i", src, tgt).mean())
        shifted = float(np.einsum("ij,ij->i", src, np.roll(tgt, -1, axis=0)).mean())
        key = ("pair_similarity", "toy-pairs", self.src_lang, self.tgt_lang)
        evaluation.add_rows(
            [metric_row(*key, "cosine_matched", matched, len(src)), metric_row(*key, "cosine_gap", matched - shifted, len(src))]
        )
        evaluation.add_sentences("pair_similarity", "toy-pairs", self.src_lang, self.tgt_lang, src_texts, tgt_texts)
        evaluation.add_pair(self.src_lang, self.tgt_lang, src, tgt)


KAZAKH = [
    "Мысық диванда ұйықтап жатыр.",
    "Мен күн сайын таңертең кофе ішемін.",
    "Пойыз сағат жетіде жүреді.",
    "Менің әпкем дәрігер.",
    "Бұл тау өте биік.",
]
ENGLISH = [
    "The cat sleeps on the sofa.",
    "I drink coffee every morning.",
    "The train leaves at seven o'clock.",
    "My sister is a doctor.",
    "This mountain is very high.",
]
PIPELINE = """
[pipeline]
name = "plugin-benchmark"
root = "artifacts"

[corpus]
dev_fraction = 0.5
sources = [{ name = "inline", kind = "text", files = { kaz = "train.kaz", eng = "train.eng" } }]

[base_model]

[evaluate]
groups = ["wacse-4"]
word_map_concepts = 0
encoder = { pooling = "mean" }
benchmarks = [{ kind = "pair_similarity", path = "pairs.tsv", src_lang = "kaz" }]
"""


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The pipeline TOML (the benchmark file relative to it) and its corpus and base model, built."""
    folder = tmp_path_factory.mktemp("plugin-benchmark")
    (folder / "train.kaz").write_text("\n".join(KAZAKH) + "\n", encoding="utf-8")
    (folder / "train.eng").write_text("\n".join(ENGLISH) + "\n", encoding="utf-8")
    (folder / "pairs.tsv").write_text("".join(f"{k}\t{e}\n" for k, e in zip(KAZAKH, ENGLISH, strict=True)), encoding="utf-8")
    (folder / "pipeline.toml").write_text(PIPELINE, encoding="utf-8")
    config = load_config(folder / "pipeline.toml")
    store = ArtifactStore(config.settings.root)
    corpus, _ = run_stage(store, CORPUS_STAGE, config.stage_configs["corpus"], {})
    model, _ = run_stage(store, BASE_MODEL_STAGE, config.stage_configs["base_model"], {})
    return {
        "folder": folder,
        "config": config.stage_configs["evaluate"],
        "store": store,
        "inputs": {"corpus": corpus.key, "base_model": model.key},
    }


def independent_cosines(model_dir: Path) -> tuple[float, float]:
    """sentence-transformers encodes, numpy averages: no code shared with the stage."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    kaz, eng = model.encode(KAZAKH, normalize_embeddings=True), model.encode(ENGLISH, normalize_embeddings=True)
    similarity = kaz @ eng.T
    matched = float(np.diag(similarity).mean())
    shifted = float(np.mean([similarity[i, (i + 1) % len(KAZAKH)] for i in range(len(KAZAKH))]))
    return matched, matched - shifted


@pytest.mark.slow
def test_a_benchmark_registered_by_a_test_module_runs_through_the_evaluate_stage(pipeline: dict) -> None:
    store, config = pipeline["store"], pipeline["config"]
    assert type(config.benchmarks[0]) is PairSimilarityBenchmark
    assert config.benchmarks[0].path == str(pipeline["folder"] / "pairs.tsv")  # resolved against the TOML's folder
    ref, manifest = run_stage(store, EVALUATE_STAGE, config, pipeline["inputs"])
    metrics = pl.from_arrow(store.read_table("evaluate", ref.key)).filter(pl.col("benchmark") == "pair_similarity")
    languages = metrics.filter(pl.col("src_lang") == "kaz_Cyrl")
    assert sorted(languages["metric"]) == ["cosine_gap", "cosine_matched"]
    matched, gap = independent_cosines(store.attached_dir("base_model", pipeline["inputs"]["base_model"]))
    value = dict(zip(languages["metric"], languages["value"]))
    assert value["cosine_matched"] == pytest.approx(matched, abs=1e-5)
    assert value["cosine_gap"] == pytest.approx(gap, abs=1e-5)
    assert gap > 0.1  # e5-small puts translations much closer than non-translations
    # the group average the config asks for (kk is in WACSE-4) covers its rows too
    assert set(metrics.filter(pl.col("src_lang") == "group:wacse-4")["metric"]) == {"cosine_gap", "cosine_matched"}
    # its headline is its own main metric, over its language pairs, in Prefect's metrics and the sweep's columns
    assert manifest.metrics["headline"]["pair_similarity/toy-pairs"] == {
        "metric": "cosine_gap",
        "mean": pytest.approx(gap, abs=1e-4),
        "pairs": 1,
    }
    table = store.read_table("evaluate", ref.key)
    assert [c.spec for c in headline_columns([table]) if c.benchmark == "pair_similarity"] == [
        "pair_similarity/toy-pairs/group:wacse-4/cosine_gap",
        "pair_similarity/toy-pairs/mean/cosine_gap",
    ]
    report = (Path(store.artifact_dir("evaluate", ref.key)) / "files/report/report.md").read_text(encoding="utf-8")
    assert "## pair_similarity" in report and "cosine_gap" in report
    # the sentences it scored are checked against the training rows (all of them here)
    assert manifest.metrics["training_overlap"]


def test_its_files_are_checked_before_encoding_and_keyed_by_content(pipeline: dict, tmp_path: Path) -> None:
    config = pipeline["config"]
    bad = tmp_path / "pairs.tsv"
    bad.write_text(f"{KAZAKH[0]}\t{ENGLISH[0]}\n{KAZAKH[1]}\n", encoding="utf-8")
    bad_config = config.model_copy(update={"benchmarks": [config.benchmarks[0].model_copy(update={"path": str(bad)})]})
    with pytest.raises(BenchmarkDataError, match=r"pairs\.tsv:2: pair: expected source TAB target"):
        plan_evaluate_shards(bad_config, {})  # no inputs: nothing is loaded or encoded
    key = stage_key(EVALUATE_STAGE, config, pipeline["inputs"], source_fingerprints(EVALUATE_STAGE, config))
    copy = tmp_path / "copy" / "pairs.tsv"
    copy.parent.mkdir()
    copy.write_bytes((pipeline["folder"] / "pairs.tsv").read_bytes())
    moved = config.model_copy(update={"benchmarks": [config.benchmarks[0].model_copy(update={"path": str(copy)})]})
    assert (
        stage_key(EVALUATE_STAGE, moved, pipeline["inputs"], source_fingerprints(EVALUATE_STAGE, moved)) == key
    )  # same bytes elsewhere
    copy.write_text(f"{KAZAKH[0]}\t{ENGLISH[1]}\n{KAZAKH[1]}\t{ENGLISH[0]}\n", encoding="utf-8")
    assert stage_key(EVALUATE_STAGE, moved, pipeline["inputs"], source_fingerprints(EVALUATE_STAGE, moved)) != key  # edited bytes
