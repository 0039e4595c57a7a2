"""XNLI transfer on a small NLI set built here, with the tiny local encoder (no hub, no network).

The synthetic task: the hypothesis ends with a marker phrase that decides the label
("water water" = entailment, "night night" = neutral, "river river" = contradiction) after a
sentence in the pair's language. A tiny random BERT learns it from the English pairs within a
few steps, and the markers carry over to every "language": transfer works when training does.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tasks.evaluate.benchmarks.xnli import XnliBenchmark, read_nli_file, read_xnli_split, xnli_rows
from tasks.evaluate.config import EncoderSettings, EvaluateConfig
from tasks.evaluate.datasets import BenchmarkDataError
from tasks.tiny_models import WORDS, build_tiny_model

MARKERS = {"entailment": "water water", "neutral": "night night", "contradiction": "river river"}
XNLI_HEADER = "language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tpromptID\tpairID\tgenre"
LANGS = {"en": "en", "fr": "fr", "sw": "sw"}  # XNLI code -> vocabulary of conftest.WORDS


def pair(rng: random.Random, vocabulary: str, label: str) -> tuple[str, str]:
    words = WORDS[vocabulary]
    premise = " ".join(rng.choice(words) for _ in range(rng.randint(3, 7)))
    hypothesis = " ".join(rng.choice(words) for _ in range(rng.randint(2, 4))) + " " + MARKERS[label]
    return premise, hypothesis


def xnli_line(lang: str, label: str, premise: str, hypothesis: str, i: int) -> str:
    return "\t".join([lang, label, "(x)", "(y)", "(X)", "(Y)", premise, hypothesis, str(i), str(i), "fiction"])


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny model's matrices are too small for intra-op threads; on a busy machine they cost 10x."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("xnli")
    rng = random.Random(3)
    labels = list(MARKERS)
    train = tmp / "multinli_1.0_train.jsonl"
    with train.open("w", encoding="utf-8") as f:
        for i in range(180):
            label = labels[i % 3]
            p, h = pair(rng, "en", label)
            f.write(json.dumps({"gold_label": label, "sentence1": p, "sentence2": h, "pairID": str(i)}) + "\n")
        f.write(json.dumps({"gold_label": "-", "sentence1": "no consensus here", "sentence2": "so it is dropped"}) + "\n")
    folder = tmp / "XNLI-1.0"
    folder.mkdir()
    for split, n in (("dev", 24), ("test", 30)):
        lines = [XNLI_HEADER]
        for lang, vocabulary in LANGS.items():
            for i in range(n):
                label = labels[(i * 7 + len(lang)) % 3]
                lines.append(xnli_line(lang, label, *pair(rng, vocabulary, label), i))
        (folder / f"xnli.{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"train": train, "folder": folder, "model": build_tiny_model(tmp / "tiny-bert")}


def bench(data: dict, **settings) -> XnliBenchmark:
    defaults = {
        "kind": "xnli",
        "path": str(data["folder"]),
        "train_file": str(data["train"]),
        "langs": list(LANGS),
        "learning_rates": [1e-7, 3e-3],
        "batch_size": 16,
        "epochs": 3,
        "max_length": 32,
        "eval_batch_size": 64,
    }
    return XnliBenchmark.model_validate(defaults | settings)


def rows_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cross_encoder", "bi_encoder"])
def test_fine_tuning_transfers_and_the_best_dev_rate_is_reported(data: dict, mode: str) -> None:
    dropped: dict[str, int] = {}
    rows = rows_frame(
        xnli_rows(
            data["model"],
            bench(data, mode=mode),
            EncoderSettings(pooling="mean"),
            drop=lambda reason, n: dropped.__setitem__(reason, n),
        )
    )
    assert dropped == {"xnli_no_gold_label": 1}
    test = rows.filter(pl.col("dataset") == "xnli-test")
    assert set(test["src_lang"]) == {"eng_Latn", "fra_Latn", "swh_Latn", "group:xnli"}
    chosen = test.filter(pl.col("metric") == "accuracy")
    # learnt from 180 English pairs, and carried over to the other languages
    assert chosen["value"].min() >= 0.8, chosen
    assert chosen.filter(pl.col("src_lang") == "eng_Latn")["n"].item() == 30
    # the reported rate is the one with the best mean dev accuracy, and its test numbers are its own
    dev = rows.filter((pl.col("dataset") == "xnli-dev") & (pl.col("src_lang") == "group:xnli"))
    per_rate = {m: v for m, v in zip(dev["metric"], dev["value"]) if m.startswith("accuracy@")}
    best = max(per_rate, key=per_rate.get)
    assert best == "accuracy@lr=0.003"
    for lang in ("eng_Latn", "fra_Latn", "swh_Latn", "group:xnli"):
        at = test.filter(pl.col("src_lang") == lang)
        assert at.filter(pl.col("metric") == "accuracy")["value"].item() == at.filter(pl.col("metric") == best)["value"].item()
    # a rate too small to move the weights stays near chance: selection had something to choose
    assert per_rate["accuracy@lr=1e-07"] < 0.6
    group = test.filter((pl.col("metric") == "accuracy") & (pl.col("src_lang") == "group:xnli"))["value"].item()
    assert group == pytest.approx(chosen.filter(pl.col("src_lang") != "group:xnli")["value"].mean())


def test_runs_are_reproducible_and_english_dev_selection(data: dict) -> None:
    settings = {"learning_rates": [3e-3], "epochs": 1, "max_train_pairs": 60, "max_eval_pairs": 10}
    first = xnli_rows(data["model"], bench(data, **settings), EncoderSettings(pooling="cls"))
    again = xnli_rows(data["model"], bench(data, **settings), EncoderSettings(pooling="cls"))
    assert first == again
    assert {r["n"] for r in first if not r["src_lang"].startswith("group:")} == {10}
    with pytest.raises(ValueError, match="english_dev"):
        xnli_rows(data["model"], bench(data, langs=["fr"], select_on="english_dev", **settings), EncoderSettings())


def test_readers_accept_the_three_layouts_and_labels(tmp_path: Path) -> None:
    mt = tmp_path / "multinli.train.en.tsv"
    mt.write_text(
        'premise\thypo\tlabel\nA "quoted" man sleeps .\tA man sleeps .\tcontradictory\nx\ty\tentailment\n', encoding="utf-8"
    )
    pairs = read_nli_file(mt)[None]
    assert pairs.premises == ('A "quoted" man sleeps .', "x") and pairs.labels.tolist() == [2, 0]
    jsonl = tmp_path / "xnli.dev.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"language": lang, "gold_label": g, "sentence1": "p", "sentence2": "h"}) + "\n"
            for lang, g in [("en", "neutral"), ("de", "entailment"), ("en", "1")]
        ),
        encoding="utf-8",
    )
    split = read_xnli_split(tmp_path, "dev", ["en"])
    assert list(split) == ["en"] and split["en"].labels.tolist() == [1, 1]


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (
            XNLI_HEADER + "\n" + xnli_line("en", "maybe", "p", "h", 1) + "\n",
            r"xnli\.test\.tsv:2: gold_label: unknown label 'maybe'",
        ),
        (
            XNLI_HEADER + "\n" + xnli_line("en", "neutral", "p", "h", 1) + "\n" + xnli_line("en", "neutral", "p", " ", 2) + "\n",
            r"xnli\.test\.tsv:3: sentence2: missing or empty hypothesis",
        ),
        (XNLI_HEADER + "\nen\tneutral\tonly three\n", r"xnli\.test\.tsv:2: expected 11 tab-separated fields"),
        ("language\tgold_label\tsentence2\nen\tneutral\th\n", r"xnli\.test\.tsv:2: no premise column"),
        (
            XNLI_HEADER + "\n" + xnli_line("fr", "neutral", "p", "h", 1) + "\n",
            r"xnli\.test\.tsv: language: no rows for language\(s\) \['en'\]",
        ),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path: Path, content: str, where: str) -> None:
    (tmp_path / "xnli.test.tsv").write_text(content, encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match=where):
        read_xnli_split(tmp_path, "test", ["en"])


def test_missing_files_and_datasets_fallback_are_clear(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkDataError, match=r"xnli\.dev\.tsv: file not found \(nor xnli\.dev\.jsonl\)"):
        read_xnli_split(tmp_path, "dev", ["en"])
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(BenchmarkDataError, match="datasets library is not installed"):
            xnli_rows(tmp_path, XnliBenchmark(kind="xnli"), EncoderSettings())


def test_xnli_runs_as_an_evaluate_benchmark(data: dict, tmp_path: Path) -> None:
    """Through the evaluate stage: the metric rows land in the artifact; the train file is in the key."""
    from storage import ArtifactStore
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.evaluate import EVALUATE_STAGE
    from tasks.stage import ShardSpec, Stage, run_stage, source_fingerprints
    from tasks.stage_config import StageConfig

    class StandInBaseConfig(StageConfig):
        seed: int = 0

    def attach(config, inputs, shard, context):  # stands in for base_model: the tiny encoder
        context.attach_dir(data["model"])
        return []

    store = ArtifactStore(tmp_path / "artifacts")
    base_ref, _ = run_stage(
        store,
        Stage("base_model", "1", StandInBaseConfig, None, lambda c, i: [ShardSpec("model")], attach),
        StandInBaseConfig(),
        {},
    )
    (tmp_path / "c.en").write_text("a river\nthe city\n", encoding="utf-8")
    (tmp_path / "c.fr").write_text("une rivière\nla ville\n", encoding="utf-8")  # not copies of the English
    corpus_ref, _ = run_stage(
        store,
        CORPUS_STAGE,
        CorpusConfig.model_validate(
            {"sources": [{"name": "t", "kind": "text", "files": {"en": str(tmp_path / "c.en"), "fr": str(tmp_path / "c.fr")}}]}
        ),
        {},
    )
    settings = bench(data, learning_rates=[3e-3], epochs=1, max_train_pairs=30, max_eval_pairs=6).model_dump()
    config = EvaluateConfig.model_validate({"benchmarks": [settings], "groups": ["wacse-8"], "word_map_concepts": 0})
    assert "0:xnli:train_file" in source_fingerprints(EVALUATE_STAGE, config)
    ref, manifest = run_stage(store, EVALUATE_STAGE, config, {"corpus": corpus_ref.key, "base_model": base_ref.key})
    metrics = pl.from_arrow(store.read_table("evaluate", ref.key))
    assert set(metrics["benchmark"]) == {"xnli"}
    assert (
        metrics.filter(
            (pl.col("dataset") == "xnli-test") & (pl.col("metric") == "accuracy") & (pl.col("src_lang") == "swh_Latn")
        )["n"].item()
        == 6
    )
    assert manifest.dropped == {"xnli_no_gold_label": 1}
    assert "xnli" in (Path(store.artifact_dir("evaluate", ref.key)) / "files/report/report.md").read_text(encoding="utf-8")
    assert np.isfinite(metrics["value"].to_numpy()).all()


def test_a_warmup_keys_the_schedule_that_changed_and_no_warmup_keeps_its_key(data: dict) -> None:
    """Fine-tuning uses transformers' linear schedule, whose warmup starts at 0 (the hand-written
    one started at 1/warmup): results with a warmup changed, so their key does; without, not."""
    plain, warm = bench(data).fingerprint(), bench(data, warmup_ratio=0.1).fingerprint()
    assert ":schedule" not in plain and warm[":schedule"] == "transformers-linear"
    assert {k: v for k, v in warm.items() if k != ":schedule"} == plain
