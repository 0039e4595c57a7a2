"""docs/architecture.md's worked examples stay true: the four complete modules of its "Extension
points" section (a corpus source, an align backend, a training objective, a benchmark) are read
from the page, imported as they are, and run through the real stages from one pipeline TOML:
corpus -> base_model (the tiny test encoder) -> align -> train -> evaluate. What each declares
reaches where the docs say: the objective's per-step draw reaches its loss, its description and
paper reach the model card, the benchmark's hub task type reaches the card's model-index."""

from __future__ import annotations

import importlib
import json
import math
import re
import sys
from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = re.compile(r"<!-- example: (\w+) -->\n+```python\n(.*?)```", re.S)
KINDS = ("source", "aligner", "objective", "benchmark")

ENGLISH = ["the river is long", "the city is old", "a small house", "the red car", "my sister reads", "we drink water",
           "the cat sleeps", "a tall tree", "the train leaves", "the sun is hot", "an open door", "the blue sea"]  # fmt: skip
KAZAKH = ["өзен ұзын", "қала ескі", "кішкентай үй", "қызыл көлік", "әпкем оқиды", "біз су ішеміз",
          "мысық ұйықтайды", "биік ағаш", "пойыз кетеді", "күн ыстық", "ашық есік", "көк теңіз"]  # fmt: skip

PIPELINE = """
[pipeline]
name = "extension-examples"
root = "artifacts"

[corpus]
dev_fraction = 0.25
sources = [{ name = "toy", kind = "json_lines", path = "pairs.jsonl", langs = ["en", "kk"] }]

[base_model]
source = "local"
model = "tiny"

[align]
backend = "monotone"
monotone = { score = 0.5 }

[train]
steps = 3
batch_size = 4
max_length = 16
device = "cpu"
torch_threads = 1
dropout = 0.0
checkpoint_every = 3
report_to = []
objectives = { translation_ranking = { weight = 0.0 }, pull_together = { weight = 1.0, rows = 0.5 } }

[evaluate]
groups = ["wacse-4"]
word_map_concepts = 0
encoder = { pooling = "mean" }
benchmarks = [{ kind = "pair_cosine", path = "pairs.tsv", src_lang = "kk" }]
"""


def examples() -> dict[str, str]:
    found = {kind: code for kind, code in EXAMPLE.findall((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))}
    assert sorted(found) == sorted(KINDS), f"docs/architecture.md has examples {sorted(found)}, not one of each of {KINDS}"
    return found


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The page's examples, written to files and imported (each registers its class)."""
    folder = tmp_path_factory.mktemp("docs-examples")
    for kind, code in examples().items():
        (folder / f"docs_example_{kind}.py").write_text(code, encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        return {kind: importlib.import_module(f"docs_example_{kind}") for kind in KINDS}
    finally:
        sys.path.remove(str(folder))


def test_each_example_is_one_registered_class(modules: dict[str, object]) -> None:
    from tasks.align.backends import ALIGN_BACKENDS
    from tasks.corpus.sources import SOURCES
    from tasks.evaluate.benchmarks import BENCHMARKS
    from tasks.train.objectives import OBJECTIVES

    assert SOURCES["json_lines"].__module__ == "docs_example_source"
    assert ALIGN_BACKENDS["monotone"].__module__ == "docs_example_aligner"
    assert OBJECTIVES["pull_together"].__module__ == "docs_example_objective"
    assert BENCHMARKS["pair_cosine"].__module__ == "docs_example_benchmark"


def test_every_extension_point_has_one_shape(modules: dict[str, object]) -> None:
    """In each registry, built-in or from the page, the registered class is the component's settings
    (a StageConfig, selected by its name), and a built-in one is registered by one import line."""
    from tasks.align.backends import ALIGN_BACKENDS
    from tasks.corpus.sources import SOURCES
    from tasks.evaluate.benchmarks import BENCHMARKS
    from tasks.stage_config import StageConfig
    from tasks.train.objectives import OBJECTIVES

    packages = {"tasks/corpus/sources": SOURCES, "tasks/align/backends": ALIGN_BACKENDS,
                "tasks/train/objectives": OBJECTIVES, "tasks/evaluate/benchmarks": BENCHMARKS}  # fmt: skip
    for folder, registry in packages.items():
        init = (REPO / folder / "__init__.py").read_text(encoding="utf-8")
        for name, cls in registry.items():
            assert issubclass(cls, StageConfig), f"{folder}: {name!r} registers {cls.__name__}, not its settings"
            if cls.__module__.startswith("tasks."):
                module = cls.__module__.rsplit(".", 1)[1]
                lines = [
                    line
                    for line in init.splitlines()
                    if re.match(rf"from \S+ import .*\b{module}\b|from \S+\.{module} import ", line)
                ]
                assert len(lines) == 1, f"{folder}/__init__.py registers {module} in {len(lines)} lines"


def test_the_examples_validate_from_their_tables_and_name_them_in_errors(modules: dict[str, object], tmp_path: Path) -> None:
    """The page's objective, backend and benchmark, chosen from config tables as a TOML writes them."""
    from pydantic import ValidationError

    from tasks.align.config import AlignConfig
    from tasks.evaluate.config import EvaluateConfig
    from tasks.stage_config import keyed_config
    from tasks.train.config import TrainConfig

    train = TrainConfig.model_validate({"objectives": {"pull_together": {"weight": 1.0, "rows": 0.25}}})
    section = train.objectives.pull_together
    assert isinstance(section, modules["objective"].PullTogether) and section.rows == 0.25
    assert keyed_config(train)["objectives"]["pull_together"] == {"weight": 1.0, "rows": 0.25}
    assert TrainConfig.model_validate(train.model_dump(mode="json")) == train
    with pytest.raises(
        ValidationError, match=r"\[train.objectives.pull_together\]: rows: Input should be less than or equal to 1"
    ):
        TrainConfig.model_validate({"objectives": {"pull_together": {"weight": 1.0, "rows": 2.0}}})
    assert not section.needs_gpu() and not train.model_copy(update={"device": "cpu"}).needs_gpu()  # declared: the CPU will do
    with pytest.raises(ValidationError, match="pull_together.*need"):  # its declared need of the pivot
        TrainConfig.model_validate({"pivot_in_every_row": False, "objectives": {"pull_together": {"weight": 1.0}}})

    align = AlignConfig.model_validate({"backend": "monotone", "monotone": {"score": 0.5}})
    assert isinstance(align.settings, modules["aligner"].MonotoneSettings) and align.settings.score == 0.5
    assert keyed_config(align)["monotone"] == {"score": 0.5}
    with pytest.raises(ValidationError, match=r"\[align.monotone\]: scroe: no such setting"):
        AlignConfig.model_validate({"backend": "monotone", "monotone": {"scroe": 0.5}})

    (tmp_path / "pairs.tsv").write_text("өзен ұзын\tthe river is long\n", encoding="utf-8")
    evaluate = EvaluateConfig.model_validate(
        {"benchmarks": [{"kind": "pair_cosine", "path": str(tmp_path / "pairs.tsv"), "src_lang": "kk"}]}
    )
    assert isinstance(evaluate.benchmarks[0], modules["benchmark"].PairCosineBenchmark)
    with pytest.raises(ValidationError, match="src_lang"):
        EvaluateConfig.model_validate({"benchmarks": [{"kind": "pair_cosine", "path": str(tmp_path / "pairs.tsv")}]})


@pytest.mark.slow
def test_the_examples_run_through_the_stages_from_a_pipeline_toml(modules: dict[str, object], tmp_path: Path) -> None:
    from flows.config import load_config
    from storage import ArtifactStore
    from tasks.align import ALIGN_STAGE
    from tasks.base_model import BASE_MODEL_STAGE
    from tasks.corpus import CORPUS_STAGE
    from tasks.evaluate import EVALUATE_STAGE
    from tasks.reporting.model_card import front_matter
    from tasks.stage import run_stage
    from tasks.tiny_models import build_tiny_model
    from tasks.train import TRAIN_STAGE

    build_tiny_model(tmp_path / "tiny")
    lines = [json.dumps({"en": en, "kk": kk}, ensure_ascii=False) for en, kk in zip(ENGLISH, KAZAKH, strict=True)]
    (tmp_path / "pairs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "pairs.tsv").write_text(
        "".join(f"{kk}\t{en}\n" for en, kk in zip(ENGLISH, KAZAKH, strict=True)), encoding="utf-8"
    )
    (tmp_path / "pipeline.toml").write_text(PIPELINE, encoding="utf-8")
    config = load_config(tmp_path / "pipeline.toml")
    stages = config.stage_configs
    store = ArtifactStore(config.settings.root)

    corpus, corpus_manifest = run_stage(store, CORPUS_STAGE, stages["corpus"], {})
    assert corpus_manifest.config["sources"][0]["kind"] == "json_lines" and corpus_manifest.rows_out == 2 * len(ENGLISH)
    base, _ = run_stage(store, BASE_MODEL_STAGE, stages["base_model"], {})

    align, _ = run_stage(store, ALIGN_STAGE, stages["align"], {"corpus": corpus.key})
    aligned = pl.from_arrow(store.read_table("align", align.key))
    assert aligned.height > 0 and set(aligned["backend"]) == {"monotone"}
    for row in aligned.iter_rows(named=True):
        n = min(len(row["src_words"]), len(row["tgt_words"]))
        assert [(a["src"], a["tgt"], a["score"]) for a in row["alignments"]] == [(i, i, 0.5) for i in range(n)]

    train, train_manifest = run_stage(
        store, TRAIN_STAGE, stages["train"], {"corpus": corpus.key, "base_model": base.key, "align": align.key}
    )
    assert train_manifest.metrics["objectives"] == {"pull_together": 1.0}
    assert math.isfinite(train_manifest.metrics["final_losses"]["loss/pull_together"])
    card = (store.attached_dir("train", train.key) / "model" / "README.md").read_text(encoding="utf-8")
    assert "pull each text's vector to its pivot's (mean squared distance)" in card and "@inproceedings{doe2026pull," in card

    evaluate, _ = run_stage(
        store, EVALUATE_STAGE, stages["evaluate"], {"corpus": corpus.key, "base_model": base.key, "train": train.key}
    )
    metrics = pl.from_arrow(store.read_table("evaluate", evaluate.key)).filter(pl.col("benchmark") == "pair_cosine")
    kazakh = metrics.filter(pl.col("src_lang") == "kaz_Cyrl")  # and the wacse-4 group's row
    assert (
        kazakh["metric"].to_list() == ["cosine"] and kazakh["n"].to_list() == [len(KAZAKH)] and -1.0 <= kazakh["value"][0] <= 1.0
    )
    evaluated_card = (store.attached_dir("evaluate", evaluate.key) / "model-card.md").read_text(encoding="utf-8")
    results = front_matter(evaluated_card)["model-index"][0]["results"]
    assert {r["task"]["type"] for r in results if r["dataset"]["type"] == "toy-pairs"} == {"sentence-similarity"}


def test_an_objectives_draw_is_rebuilt_from_the_step_alone(modules: dict[str, object]) -> None:
    """The example's draw, as the trainer makes it: the same step gives the same rows, another step others."""
    import numpy as np

    from tasks.train.batching import StepBatch, step_draws_rng

    loss = modules["objective"].PullTogetherLoss(rows=0.5)  # its settings from keywords
    batch = StepBatch(np.zeros((64, 2), np.int64), np.zeros((64, 2), np.int64), np.full((64, 1, 2), -1, np.int32))
    first, again = (batch.draw({loss.name: loss.draw}, step_draws_rng(7, 3)).drawn[loss.name]["pulled"] for _ in range(2))
    other = batch.draw({loss.name: loss.draw}, step_draws_rng(7, 4)).drawn[loss.name]["pulled"]
    assert (first == again).all() and (first != other).any() and 10 < first.sum() < 54
    assert (batch.draw({loss.name: loss.draw}, step_draws_rng(7, 3)).rows(8, 16).drawn[loss.name]["pulled"] == first[8:16]).all()
