"""The evaluate stage end to end on the offline base model, checked against an independent computation."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from storage import ArtifactStore
from tasks.base_model import BASE_MODEL_STAGE
from tasks.base_model.config import BaseModelConfig
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.evaluate import EVALUATE_STAGE
from tasks.evaluate.benchmarks.tatoeba import read_tatoeba
from tasks.evaluate.config import EvaluateConfig
from tasks.evaluate.datasets import BenchmarkDataError
from tasks.evaluate.schema import ITEMS_SCHEMA
from tasks.stage import run_stage

FLORES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "flores200-dev"

SENTENCES = {
    "eng": [
        "The cat sleeps on the sofa.",
        "I drink coffee every morning.",
        "The train leaves at seven o'clock.",
        "My sister is a doctor.",
        "It is raining in the city today.",
        "We are reading a book about history.",
        "The children play football in the park.",
        "This mountain is very high.",
    ],
    "kaz": [
        "Мысық диванда ұйықтап жатыр.",
        "Мен күн сайын таңертең кофе ішемін.",
        "Пойыз сағат жетіде жүреді.",
        "Менің әпкем дәрігер.",
        "Бүгін қалада жаңбыр жауып тұр.",
        "Біз тарих туралы кітап оқып жатырмыз.",
        "Балалар саябақта футбол ойнайды.",
        "Бұл тау өте биік.",
    ],
    "fra": [
        "Le chat dort sur le canapé.",
        "Je bois du café chaque matin.",
        "Le train part à sept heures.",
        "Ma sœur est médecin.",
        "Il pleut en ville aujourd'hui.",
        "Nous lisons un livre sur l'histoire.",
        "Les enfants jouent au football dans le parc.",
        "Cette montagne est très haute.",
    ],
}
# single words: the corpus-dev benchmark draws its word-embedding map from one-word groups
WORDS = {
    "eng": ["water", "mountain", "book", "city"],
    "kaz": ["су", "тау", "кітап", "қала"],
    "fra": ["eau", "montagne", "livre", "ville"],
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A store holding the converted offline base model and a small corpus, plus benchmark folders."""
    tmp = tmp_path_factory.mktemp("evaluate")
    store = ArtifactStore(tmp / "artifacts")
    texts = tmp / "texts"
    texts.mkdir()
    for code, lines in SENTENCES.items():
        (texts / f"train.{code}").write_text("\n".join(lines + WORDS[code]) + "\n", encoding="utf-8")
    corpus_config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "inline", "kind": "text", "files": {c: str(texts / f"train.{c}") for c in SENTENCES}}],
            "dev_fraction": 0.99,
        }
    )
    corpus_ref, _ = run_stage(store, CORPUS_STAGE, corpus_config, {})
    model_ref, _ = run_stage(store, BASE_MODEL_STAGE, BaseModelConfig(), {})
    tatoeba = tmp / "tatoeba"
    tatoeba.mkdir()
    for code in ("kaz", "fra"):
        (tatoeba / f"tatoeba.{code}-eng.{code}").write_text("\n".join(SENTENCES[code]) + "\n", encoding="utf-8")
        (tatoeba / f"tatoeba.{code}-eng.eng").write_text("\n".join(SENTENCES["eng"]) + "\n", encoding="utf-8")
    multiway = tmp / "multiway"
    multiway.mkdir()
    for code, flores in (("eng", "eng_Latn"), ("kaz", "kaz_Cyrl"), ("fra", "fra_Latn")):
        (multiway / f"{flores}.dev").write_text("\n".join(SENTENCES[code]) + "\n", encoding="utf-8")
    sts = tmp / "sts.tsv"
    sts.write_text(
        "".join(
            f"{a}\t{b}\t{score}\n"
            for a, b, score in zip(SENTENCES["eng"], SENTENCES["eng"][1:] + SENTENCES["eng"][:1], range(8), strict=True)
        ),
        encoding="utf-8",
    )
    inputs = {"corpus": corpus_ref.key, "base_model": model_ref.key}
    return {"store": store, "inputs": inputs, "tatoeba": tatoeba, "multiway": multiway, "sts": sts, "tmp": tmp}


@functools.lru_cache(maxsize=2)
def sentence_transformer(model_dir: Path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device="cpu")


def independent_accuracy(model_dir: Path, src: list[str], tgt: list[str]) -> tuple[float, float]:
    """sentence-transformers encodes, numpy scores: no code shared with the stage."""
    model = sentence_transformer(model_dir)
    a = model.encode(src, normalize_embeddings=True)
    b = model.encode(tgt, normalize_embeddings=True)
    similarity = a @ b.T
    target = np.arange(len(src))
    return float(np.mean(similarity.argmax(1) == target)), float(np.mean(similarity.argmax(0) == target))


def evaluate(built: dict, benchmarks: list[dict], **settings) -> tuple[pl.DataFrame, object]:
    config = EvaluateConfig.model_validate({"benchmarks": benchmarks, "encoder": {"pooling": "mean"}, **settings})
    ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, built["inputs"])
    return pl.from_arrow(built["store"].read_table("evaluate", ref.key)), manifest


def stand_in_trained_model(built: dict, seed: int):
    """A committed `train` artifact holding a tiny model under model/ (what evaluate reads of a
    trained model), built by a stand-in stage; its ref."""
    from tasks.stage import ShardSpec, Stage
    from tasks.stage_config import StageConfig

    class StandInTrainConfig(StageConfig):
        seed: int = 0

    def attach_model(config, inputs, shard, context):
        from tasks.tiny_models import build_tiny_model

        context.attach_dir(build_tiny_model(context.workdir / "model", seed=config.seed), prefix="model/")
        return []

    stand_in = Stage("train", "1", StandInTrainConfig, None, lambda c, i: [ShardSpec("model")], attach_model)
    train_ref, _ = run_stage(built["store"], stand_in, StandInTrainConfig(seed=seed), {})
    return train_ref


def value(metrics: pl.DataFrame, **where) -> float:
    rows = metrics.filter(pl.all_horizontal([pl.col(k) == v for k, v in where.items()]))
    assert rows.height == 1, (where, rows)
    return rows["value"][0]


@pytest.mark.slow
def test_tatoeba_multiway_corpus_dev_and_sts_match_independent_computation(built: dict) -> None:
    metrics, manifest = evaluate(
        built,
        [
            {"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz", "fra"]},
            {"kind": "multiway", "path": str(built["multiway"]), "langs": ["eng_Latn", "kaz_Cyrl", "fra_Latn"], "row_start": 2},
            {"kind": "corpus_dev"},
            {"kind": "sts", "path": str(built["sts"]), "layout": "tsv", "langs": ["en", "en"]},
        ],
        groups=["wacse-4"],
    )
    model_dir = built["store"].attached_dir("base_model", built["inputs"]["base_model"])
    for code, flores in (("kaz", "kaz_Cyrl"), ("fra", "fra_Latn")):
        forward, backward = independent_accuracy(model_dir, SENTENCES[code], SENTENCES["eng"])
        assert value(metrics, benchmark="tatoeba", src_lang=flores, metric="accuracy_src_tgt") == pytest.approx(forward)
        assert value(metrics, benchmark="tatoeba", src_lang=flores, metric="accuracy_tgt_src") == pytest.approx(backward)
        held_out = independent_accuracy(model_dir, SENTENCES[code][2:], SENTENCES["eng"][2:])
        assert value(metrics, dataset="flores200-dev", src_lang=flores, metric="accuracy_src_tgt") == pytest.approx(held_out[0])
        assert value(metrics, dataset="flores200-dev", src_lang=flores, metric="accuracy_mean") == pytest.approx(
            sum(held_out) / 2
        )
    # a real multilingual model finds these easy translations
    assert value(metrics, benchmark="tatoeba", src_lang="kaz_Cyrl", metric="accuracy_mean") >= 0.75
    # the group average covers the one WACSE-4 language present (kk)
    assert value(metrics, benchmark="tatoeba", src_lang="group:wacse-4", metric="accuracy_mean") == pytest.approx(
        value(metrics, benchmark="tatoeba", src_lang="kaz_Cyrl", metric="accuracy_mean")
    )
    dev = metrics.filter(pl.col("dataset") == "corpus-dev")
    assert set(dev["src_lang"]) >= {"kaz_Cyrl", "fra_Latn"}
    assert metrics.filter(pl.col("benchmark") == "sts")["metric"].to_list() == ["spearman"]
    # the report is attached, self-contained and carries both figures
    files = {f.path for f in manifest.attached_files}
    assert {
        "files/report/report.html",
        "files/report/report.md",
        "files/report/similarity_histogram.png",
        "files/report/embedding_map.png",
    } <= files
    html = (Path(built["store"].artifact_dir("evaluate", manifest.key)) / "files/report/report.html").read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == 2 and "kaz_Cyrl" in html
    assert manifest.metrics["headline"]["tatoeba/tatoeba"]["metric"] == "accuracy_mean"


@pytest.mark.slow
def test_baseline_comparison_adds_delta_columns(built: dict) -> None:
    _, first = evaluate(built, [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"]}])
    _, second = evaluate(
        built,
        [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"]}],
        baseline=first.key[:12],
        encoder={"pooling": "cls"},
    )
    report = (Path(built["store"].artifact_dir("evaluate", second.key)) / "files/report/report.md").read_text(encoding="utf-8")
    assert f"Δ vs evaluate {first.key[:12]}" in report
    # the earlier artifact's items.parquet pairs with this one's: intervals of the change
    assert f"## Change vs evaluate {first.key[:12]}, with 95% intervals" in report
    assert "| tatoeba/tatoeba | all languages |" in report


def test_bad_benchmark_data_fails_naming_the_file(built: dict, tmp_path: Path) -> None:
    (tmp_path / "tatoeba.kaz-eng.kaz").write_text("а\nб\n", encoding="utf-8")
    (tmp_path / "tatoeba.kaz-eng.eng").write_text("a\n", encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match=r"tatoeba\.kaz-eng\.kaz"):
        evaluate(built, [{"kind": "tatoeba", "path": str(tmp_path), "langs": ["kaz"]}])


@pytest.mark.slow
@pytest.mark.skipif(not FLORES.is_dir(), reason="../shared/data/flores200-dev not present (a new user's clone has no ../shared)")
def test_flores_dev_rows_match_independent_computation(built: dict) -> None:
    metrics, _ = evaluate(
        built, [{"kind": "multiway", "path": str(FLORES), "langs": ["eng_Latn", "kaz_Cyrl", "tel_Telu"], "row_start": 937}]
    )
    model_dir = built["store"].attached_dir("base_model", built["inputs"]["base_model"])
    english = (FLORES / "eng_Latn.dev").read_text(encoding="utf-8").splitlines()[937:]
    for lang in ("kaz_Cyrl", "tel_Telu"):
        other = (FLORES / f"{lang}.dev").read_text(encoding="utf-8").splitlines()[937:]
        forward, backward = independent_accuracy(model_dir, other, english)
        assert value(metrics, src_lang=lang, metric="accuracy_src_tgt") == pytest.approx(forward)
        assert value(metrics, src_lang=lang, metric="accuracy_tgt_src") == pytest.approx(backward)
        assert value(metrics, src_lang=lang, metric="accuracy_mean") > 0.8  # e5-small on FLORES is strong


@pytest.mark.slow
def test_trained_model_is_scored_beside_the_untrained_base(built: dict, tmp_path: Path) -> None:
    """With a `train` input, evaluate scores the trained model, and the base model beside it."""

    train_ref = stand_in_trained_model(built, seed=0)
    tatoeba = [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"]}]
    base_only, _ = evaluate(built, tatoeba)
    config = EvaluateConfig.model_validate({"benchmarks": tatoeba, "encoder": {"pooling": "mean"}})
    ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key})
    assert manifest.input_keys["train"] == train_ref.key
    folder = Path(built["store"].artifact_dir("evaluate", ref.key)) / "files/report"
    base_side = pl.read_parquet(folder / "base_metrics.parquet")
    assert base_side.sort(["metric", "src_lang"]).equals(base_only.sort(["metric", "src_lang"]))
    trained = pl.from_arrow(built["store"].read_table("evaluate", ref.key))
    # a random tiny model does not find Kazakh translations the way the real base does
    assert value(trained, src_lang="kaz_Cyrl", metric="accuracy_mean") < value(
        base_only, src_lang="kaz_Cyrl", metric="accuracy_mean"
    )
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert "Δ vs untrained base" in report
    assert manifest.metrics["base_headline"]["tatoeba/tatoeba"]["mean"] == pytest.approx(
        value(base_only, src_lang="kaz_Cyrl", metric="accuracy_mean"), abs=1e-4
    )
    # per-query items of both models, at the attached paths the sweep comparison reads
    files = Path(built["store"].artifact_dir("evaluate", ref.key)) / "files"
    assert {"files/items.parquet", "files/items/base_items.parquet"} <= {f.path for f in manifest.attached_files}
    trained_items = pq.read_table(files / "items.parquet")
    base_items = pq.read_table(files / "items/base_items.parquet")
    assert trained_items.schema == ITEMS_SCHEMA and base_items.schema == ITEMS_SCHEMA
    assert trained_items.num_rows == base_items.num_rows == 2 * len(SENTENCES["kaz"])
    for items, metrics in ((trained_items, trained), (base_items, base_only)):
        frame = pl.from_arrow(items)
        for direction in ("src_tgt", "tgt_src"):
            part = frame.filter(pl.col("direction") == direction)
            assert part["item"].to_list() == list(range(len(SENTENCES["kaz"])))
            assert part["correct"].mean() == pytest.approx(value(metrics, src_lang="kaz_Cyrl", metric=f"accuracy_{direction}"))
        assert frame["margin"].mean() == pytest.approx(value(metrics, src_lang="kaz_Cyrl", metric="margin_mean"), abs=1e-6)
        # positive margin <=> correct, up to ties (a tiny random model may embed two sentences alike)
        assert (frame.filter(pl.col("correct"))["margin"] >= -1e-6).all() and (
            frame.filter(~pl.col("correct"))["margin"] <= 1e-6
        ).all()
    # the report turns the two item files into a paired interval of the change
    change = value(trained, src_lang="kaz_Cyrl", metric="accuracy_mean") - value(
        base_only, src_lang="kaz_Cyrl", metric="accuracy_mean"
    )
    assert "## Change vs untrained base, with 95% intervals" in report
    assert f"| tatoeba/tatoeba | all languages | {100 * change:+.1f} |" in report
    assert "files/report/delta_intervals.png" in {f.path for f in manifest.attached_files}


def test_a_bad_file_in_a_later_benchmark_fails_before_any_encoding(built: dict, tmp_path: Path) -> None:
    from tasks.evaluate.stage import plan_evaluate_shards

    (tmp_path / "tatoeba.kaz-eng.kaz").write_text("а\nб\n", encoding="utf-8")
    (tmp_path / "tatoeba.kaz-eng.eng").write_text("a\n", encoding="utf-8")
    config = EvaluateConfig.model_validate(
        {
            "benchmarks": [
                {"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["fra"]},
                {"kind": "tatoeba", "path": str(tmp_path), "langs": ["kaz"]},
            ]
        }
    )
    with pytest.raises(BenchmarkDataError, match=r"tatoeba\.kaz-eng\.kaz"):
        plan_evaluate_shards(config, {})  # no inputs needed: nothing is loaded or encoded


@pytest.mark.slow
def test_distractors_enlarge_the_pools_and_duplicates_are_removed_and_counted(built: dict, tmp_path: Path) -> None:
    distractors = tmp_path / "distractors"
    distractors.mkdir()
    english = [
        "The bridge was closed for repairs.",
        SENTENCES["eng"][3],
        "Prices rose sharply last year.",
        "Prices rose sharply last year.",
    ]
    kazakh = ["Көпір жөндеуге жабылды.", SENTENCES["kaz"][0], "Өткен жылы бағалар күрт өсті."]
    (distractors / "eng_Latn.dev").write_text("\n".join(english) + "\n", encoding="utf-8")
    (distractors / "kaz_Cyrl.dev").write_text("\n".join(kazakh) + "\n", encoding="utf-8")  # fra has no file: no fra distractors
    metrics, manifest = evaluate(
        built,
        [
            {
                "kind": "tatoeba",
                "path": str(built["tatoeba"]),
                "langs": ["kaz", "fra"],
                "distractors": [{"name": "flores", "path": str(distractors)}],
            }
        ],
    )
    # per language scored: English loses the Tatoeba sentence and the repeat; Kazakh (kaz only) its Tatoeba sentence
    assert manifest.dropped["tatoeba_distractor_equals_tatoeba_sentence"] == 2 + 1
    assert manifest.dropped["tatoeba_distractor_repeated"] == 2
    model_dir = built["store"].attached_dir("base_model", built["inputs"]["base_model"])
    pool_eng = [english[0], english[2]]
    for code, flores, pool_xx in (("kaz", "kaz_Cyrl", [kazakh[0], kazakh[2]]), ("fra", "fra_Latn", [])):
        forward = independent_accuracy_with_pools(model_dir, SENTENCES[code], SENTENCES["eng"] + pool_eng)
        backward = independent_accuracy_with_pools(model_dir, SENTENCES["eng"], SENTENCES[code] + pool_xx)
        assert value(metrics, dataset="tatoeba-distractors", src_lang=flores, metric="accuracy_src_tgt") == pytest.approx(forward)
        assert value(metrics, dataset="tatoeba-distractors", src_lang=flores, metric="accuracy_tgt_src") == pytest.approx(
            backward
        )
        # a bigger pool can only lower the margin of a query
        assert (
            value(metrics, dataset="tatoeba-distractors", src_lang=flores, metric="margin_mean")
            <= value(metrics, dataset="tatoeba", src_lang=flores, metric="margin_mean") + 1e-6
        )
    items = pl.read_parquet(Path(built["store"].artifact_dir("evaluate", manifest.key)) / "files/items.parquet")
    assert items.group_by("dataset").len().sort("dataset").rows() == [("tatoeba", 32), ("tatoeba-distractors", 32)]
    assert set(items["benchmark"]) == {"tatoeba"}


def independent_accuracy_with_pools(model_dir: Path, queries: list[str], candidates: list[str]) -> float:
    """Query i's answer is candidate i; the rest of the candidates are distractors (numpy, not faiss)."""
    model = sentence_transformer(model_dir)
    a = model.encode(queries, normalize_embeddings=True)
    b = model.encode(candidates, normalize_embeddings=True)
    return float(np.mean((a @ b.T).argmax(1) == np.arange(len(queries))))


@pytest.mark.slow
def test_pairs_all_adds_xx_yy_rows_and_a_summary(built: dict) -> None:
    metrics, manifest = evaluate(
        built,
        [
            {"kind": "multiway", "path": str(built["multiway"]), "langs": ["eng_Latn", "kaz_Cyrl", "fra_Latn"], "pairs": "all"},
            {"kind": "corpus_dev", "pairs": "all"},
        ],
        word_map_concepts=0,
    )
    flores = metrics.filter(pl.col("dataset") == "flores200-dev")
    pairs = set(zip(flores["src_lang"], flores["tgt_lang"]))
    assert {("kaz_Cyrl", "eng_Latn"), ("fra_Latn", "eng_Latn"), ("kaz_Cyrl", "fra_Latn"), ("group:xx-yy", None)} <= pairs
    model_dir = built["store"].attached_dir("base_model", built["inputs"]["base_model"])
    forward, backward = independent_accuracy(model_dir, SENTENCES["kaz"], SENTENCES["fra"])
    assert value(flores, src_lang="kaz_Cyrl", tgt_lang="fra_Latn", metric="accuracy_src_tgt") == pytest.approx(forward)
    assert value(flores, src_lang="kaz_Cyrl", tgt_lang="fra_Latn", metric="accuracy_tgt_src") == pytest.approx(backward)
    summary = value(flores, src_lang="group:xx-yy", metric="accuracy_mean")
    assert summary == pytest.approx(value(flores, src_lang="kaz_Cyrl", tgt_lang="fra_Latn", metric="accuracy_mean"))
    dev = metrics.filter(pl.col("dataset") == "corpus-dev")
    assert {("fra_Latn", "kaz_Cyrl"), ("fra_Latn", "eng_Latn"), ("kaz_Cyrl", "eng_Latn"), ("group:xx-yy", None)} <= set(
        zip(dev["src_lang"], dev["tgt_lang"])
    )
    # the headline stays the pivot pairs' mean; the xx-yy mean has its own entry
    headline = manifest.metrics["headline"]
    assert headline["retrieval/flores200-dev"]["pairs"] == 2
    assert headline["retrieval/flores200-dev/xx-yy"]["mean"] == pytest.approx(summary, abs=1e-4)
    items = pl.read_parquet(Path(built["store"].artifact_dir("evaluate", manifest.key)) / "files/items.parquet")
    assert items.filter((pl.col("dataset") == "flores200-dev") & (pl.col("tgt_lang") == "fra_Latn")).height == 2 * len(
        SENTENCES["kaz"]
    )


def test_bad_distractor_file_fails_before_encoding_and_edits_change_the_key(built: dict, tmp_path: Path) -> None:
    from tasks.evaluate.stage import fingerprint_evaluate_sources, plan_evaluate_shards

    (tmp_path / "eng_Latn.dev").write_text("fine\n", encoding="utf-8")
    (tmp_path / "kaz_Cyrl.dev").write_text("бір\n\nүш\n", encoding="utf-8")
    bench = {
        "kind": "tatoeba",
        "path": str(built["tatoeba"]),
        "langs": ["kaz"],
        "distractors": [{"name": "d", "path": str(tmp_path)}],
    }
    config = EvaluateConfig.model_validate({"benchmarks": [bench]})
    with pytest.raises(BenchmarkDataError, match=r"kaz_Cyrl\.dev:2: kaz_Cyrl: empty line"):
        plan_evaluate_shards(config, {})
    before = fingerprint_evaluate_sources(config)
    (tmp_path / "kaz_Cyrl.dev").write_text("бір\nекі\nүш\n", encoding="utf-8")
    assert fingerprint_evaluate_sources(config) != before
    plan_evaluate_shards(config, {})
    with pytest.raises(ValueError, match="distractor source names must be unique"):
        EvaluateConfig.model_validate(
            {"benchmarks": [{**bench, "distractors": [{"name": "d", "path": "a"}, {"name": "d", "path": "b"}]}]}
        )
    with pytest.raises(ValueError, match="must contain '\\{code\\}' once"):
        EvaluateConfig.model_validate(
            {"benchmarks": [{**bench, "distractors": [{"name": "d", "path": "a", "pattern": "x.dev"}]}]}
        )


@pytest.mark.slow
def test_tatoeba_max_pairs_scores_the_first_pairs_and_counts_the_rest(built: dict) -> None:
    metrics, manifest = evaluate(built, [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"], "max_pairs": 5}])
    model_dir = built["store"].attached_dir("base_model", built["inputs"]["base_model"])
    forward, backward = independent_accuracy(model_dir, SENTENCES["kaz"][:5], SENTENCES["eng"][:5])
    assert value(metrics, benchmark="tatoeba", src_lang="kaz_Cyrl", metric="accuracy_src_tgt") == pytest.approx(forward)
    assert value(metrics, benchmark="tatoeba", src_lang="kaz_Cyrl", metric="accuracy_mean", dataset="tatoeba") == pytest.approx(
        (forward + backward) / 2
    )
    assert manifest.dropped["tatoeba_pair_beyond_max_pairs"] == len(SENTENCES["kaz"]) - 5


def test_a_model_trained_with_language_vectors_is_scored_with_them(built: dict) -> None:
    """A train artifact with the trainer's language vectors (`train.language_embedding`) is scored
    with each text's language vector, as in training (transformers and sentence-transformers do
    not apply them); the report and the manifest say so and name the languages without one."""
    from safetensors.numpy import save_file

    from tasks.encoders import Encoder, EncoderSpec
    from tasks.encoders.language_vectors import LANGUAGE_EMBEDDING_FILE, LANGUAGES_FILE
    from tasks.encoders.neighbours import bitext_accuracy
    from tasks.evaluate.stage import LANGUAGE_EMBEDDING_NOTE
    from tasks.stage import ShardSpec, Stage
    from tasks.stage_config import StageConfig
    from tasks.tiny_models import build_tiny_model

    vectors = np.random.default_rng(0).normal(0.0, 0.5, size=(2, 32)).astype(np.float32)  # large: they move every vector

    class StandInTrainConfig(StageConfig):
        langs: list[str]

    def attach_model(config, inputs, shard, context):  # a model under model/, with language vectors beside it
        model_dir = build_tiny_model(context.workdir / "model", seed=1)
        save_file({"weight": vectors[: len(config.langs)]}, str(model_dir / LANGUAGE_EMBEDDING_FILE))
        (model_dir / LANGUAGES_FILE).write_text(json.dumps(config.langs), encoding="utf-8")
        context.attach_dir(model_dir, prefix="model/")
        return []

    stand_in = Stage("train", "1", StandInTrainConfig, None, lambda c, i: [ShardSpec("model")], attach_model)
    tatoeba = [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"]}]
    config = EvaluateConfig.model_validate({"benchmarks": tatoeba, "encoder": {"pooling": "mean"}, "compare_with_base": False})
    pairs = read_tatoeba(built["tatoeba"], "kaz")

    def scored(langs: list[str]) -> tuple[pl.DataFrame, dict, str, Path]:
        train_ref, _ = run_stage(built["store"], stand_in, StandInTrainConfig(langs=langs), {})
        ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key})
        report = (Path(built["store"].artifact_dir("evaluate", ref.key)) / "files/report/report.md").read_text(encoding="utf-8")
        model_dir = Path(built["store"].artifact_dir("train", train_ref.key)) / "files/model"
        return pl.from_arrow(built["store"].read_table("evaluate", ref.key)), manifest.metrics, report, model_dir

    metrics, manifest_metrics, report, model_dir = scored(["eng_Latn", "kaz_Cyrl"])
    encoder = Encoder.load(EncoderSpec(str(model_dir), pooling="mean"))
    kaz = encoder.encode(list(pairs.src), embedding_offset=vectors[1])
    eng = encoder.encode(list(pairs.tgt), embedding_offset=vectors[0])
    expected = sum(bitext_accuracy(kaz, eng)) / 2
    assert value(metrics, src_lang="kaz_Cyrl", metric="accuracy_mean") == pytest.approx(expected, abs=1e-6)
    plain = encoder.encode(list(pairs.src))
    assert np.abs(kaz - plain).max() > 1e-2  # so the check above tells the two apart
    assert manifest_metrics["language_embedding"] == LANGUAGE_EMBEDDING_NOTE
    assert "| **language embedding** |" in report and "scored with its language's vector" in report

    # a language the model has no vector for is scored without one, and named
    _, manifest_metrics, report, _ = scored(["eng_Latn"])
    assert manifest_metrics["language_embedding"].endswith(
        "without one (not trained on, or not named by the benchmark): kaz_Cyrl"
    )
    assert "kaz\\_Cyrl" in report


# ---------------------------------------------------------------- stopping and the headline line (issue 30, item 5)
from typing import ClassVar, Literal  # noqa: E402

from tasks.evaluate.benchmarks import Benchmark, register_benchmark  # noqa: E402
from tasks.stop import STOP, Interrupted  # noqa: E402


@register_benchmark
class StopRequestedWhileScoring(Benchmark):
    """Encodes `texts` sentences, with the stop requested (Ctrl-C) after its first `encode_first` ones."""

    kind: Literal["stop_requested_while_scoring"]
    texts: int = 40
    encode_first: int = 4
    main_metric: ClassVar[str] = "accuracy_mean"

    def score(self, evaluation) -> None:
        sentences = [f"{SENTENCES['eng'][i % 8]} ({i})" for i in range(self.texts)]
        evaluation.encode(sentences[: self.encode_first], "eng_Latn")
        STOP.set()  # what the command line's Ctrl-C handler does
        evaluation.encode(sentences[self.encode_first :], "eng_Latn")


@pytest.mark.slow
def test_ctrl_c_during_evaluate_stops_between_benchmarks_and_batches(built: dict) -> None:
    store = built["store"]
    before = {m.key for m in store.list_manifests("evaluate")}
    tatoeba = {"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"]}
    try:
        # the stop arrives between batches: the next batch does not start
        config = EvaluateConfig.model_validate(
            {"benchmarks": [{"kind": "stop_requested_while_scoring"}, tatoeba], "encoder": {"pooling": "mean", "batch_size": 4}}
        )
        with pytest.raises(
            Interrupted, match=r"^evaluate: stopped while scoring the base model; no scores of this evaluation are kept"
        ):
            run_stage(store, EVALUATE_STAGE, config, built["inputs"])
        STOP.clear()
        # the stop arrives at the end of one benchmark: the next one does not start
        config = EvaluateConfig.model_validate(
            {"benchmarks": [{"kind": "stop_requested_while_scoring", "texts": 4}, tatoeba], "encoder": {"pooling": "mean"}}
        )
        with pytest.raises(
            Interrupted,
            match=r"^evaluate: stopped before benchmark 2 of 2 \(tatoeba\) of the base model; .*rerun evaluates again$",
        ):
            run_stage(store, EVALUATE_STAGE, config, built["inputs"])
    finally:
        STOP.clear()
    assert {m.key for m in store.list_manifests("evaluate")} == before  # nothing half-written was committed


@pytest.mark.slow
def test_the_headline_change_and_its_interval_end_run_and_evaluate(built: dict) -> None:
    """The evaluate manifest records each headline change with its paired interval; `xlembed run`
    and `evaluate` end with it, in percentage points."""
    from flows.cli.run import headline_lines

    train_ref = stand_in_trained_model(built, seed=1)
    config = EvaluateConfig.model_validate(
        {
            "benchmarks": [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz", "fra"]}],
            "encoder": {"pooling": "mean"},
        }
    )
    ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key})
    report = (Path(built["store"].artifact_dir("evaluate", ref.key)) / "files/report/report.md").read_text(encoding="utf-8")
    changes = {(c["kind"], c["label"]): c for c in manifest.metrics["headline_change"]}
    overall = changes["all", "all languages"]
    row = next(line for line in report.splitlines() if line.startswith("| tatoeba/tatoeba | all languages |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert (
        cells[2] == f"{overall['delta']:+.1f}" and cells[3] == f"{overall['low']:+.1f} to {overall['high']:+.1f}"
    )  # the report's numbers
    assert overall["low"] <= overall["delta"] <= overall["high"] and overall["baseline"] == "untrained base"
    lines = headline_lines(manifest.metrics)
    groups = [c for c in manifest.metrics["headline_change"] if c["kind"] == "group"]
    assert len(lines) == (len(groups) or 1)
    shown = groups[0] if groups else overall
    assert lines[0].startswith(
        f"tatoeba/tatoeba {shown['label']}: {shown['delta']:+.1f} [{shown['low']:+.1f}, {shown['high']:+.1f}] points of accuracy over the untrained base ("
    ), lines


@pytest.mark.slow
def test_report_of_a_trained_model_shows_its_training_curves_and_base_vs_trained_levels(built: dict) -> None:
    """The train artifact's curves.parquet becomes the report's curves figure; the headline levels
    of base and trained are plotted beside the Δ forest plot; the base's cosines are overlaid."""
    from tasks.stage import ShardSpec, Stage
    from tasks.stage_config import StageConfig
    from tasks.train.model_folder import write_curves

    class StandInTrainConfig(StageConfig):
        seed: int = 5

    def attach_model(config, inputs, shard, context):  # the train stage's files: a model under model/ and its curves
        from tasks.tiny_models import build_tiny_model

        context.attach_dir(build_tiny_model(context.workdir / "model", seed=config.seed), prefix="model/")
        steps = range(1, 41)
        rows = [
            {"step": s, "metric": m, "value": v}
            for s in steps
            for m, v in (
                ("loss", 2.0 / s),
                ("loss/translation_ranking", 1.5 / s),
                ("loss/multiway_supcon", 0.5 / s),
                ("lr", 1e-4),
                ("grad_norm", 3.0),
            )
        ]
        rows += [{"step": s, "metric": "dev_accuracy", "value": 0.5 + s / 100} for s in (0, 20, 40)]
        write_curves(rows, context.workdir / "curves.parquet", context.workdir / "curves.png")
        context.attach("curves.parquet", context.workdir / "curves.parquet")
        return []

    stand_in = Stage("train", "1", StandInTrainConfig, None, lambda c, i: [ShardSpec("model")], attach_model)
    train_ref, _ = run_stage(built["store"], stand_in, StandInTrainConfig(), {})
    benchmarks = [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz", "fra"]}, {"kind": "corpus_dev"}]
    config = EvaluateConfig.model_validate({"benchmarks": benchmarks, "encoder": {"pooling": "mean"}, "groups": ["wacse-4"]})
    ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key})
    files = {f.path for f in manifest.attached_files}
    assert {"files/report/training_curves.png", "files/report/headline_levels.png", "files/report/delta_intervals.png"} <= files
    html = (Path(built["store"].artifact_dir("evaluate", ref.key)) / "files/report/report.html").read_text(encoding="utf-8")
    assert 'alt="Training curves of the scored model"' in html
    # the levels and the changes share one row of the page
    row = html.split('<div class="figure-row"', 1)[1].split("</div>", 1)[0]
    assert (
        'alt="Headline scores of untrained base and this model"' in row
        and 'alt="Change in retrieval accuracy vs untrained base' in row
    )
    assert "Dotted outlines: untrained base" in html


def test_evaluate_reports_texts_rate_and_eta_per_model_and_benchmark_in_lines_mode(built: dict, capsys) -> None:
    """With XLEMBED_PROGRESS=lines (stderr not a terminal), an evaluation says which model and
    benchmark it is on, how many texts it encoded, how fast, and when it will be done."""
    from flows.progress import StageProgress

    train_ref = stand_in_trained_model(built, seed=13)
    benchmarks = [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz", "fra"]},
                  {"kind": "sts", "path": str(built["sts"]), "layout": "tsv", "langs": ["en", "en"]}]  # fmt: skip
    config = EvaluateConfig.model_validate({"benchmarks": benchmarks, "encoder": {"pooling": "mean", "batch_size": 4}})
    capsys.readouterr()
    progress = StageProgress("evaluate:all", how="lines", interval=0)  # a line at every batch
    run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key}, force=True, progress=progress)
    err = capsys.readouterr().err
    for model in ("the trained model", "the base model"):
        for benchmark in ("tatoeba (1/2)", "sts (2/2)"):
            assert f"evaluate: {model}: benchmark {benchmark}\n" in err, err
            done = re.search(rf"^evaluate: {model}: {re.escape(benchmark)} done in \d:\d\d:\d\d, (\d+) texts encoded", err, re.M)
            assert done, (model, benchmark, err)
        # tatoeba encodes; sts reads the same English sentences, each encoded once per model (0 new texts)
        assert re.search(
            rf"^evaluate:all {model}, tatoeba \(1/2\): \d+/\d+ texts \(\d+%\), [\d.,]+ texts/s, ETA \d:\d\d:\d\d", err, re.M
        ), (model, err)
        assert re.search(rf"^evaluate: {model}: tatoeba \(1/2\) done in .*, [1-9]\d* texts encoded, [\d.,]+ texts/s$", err, re.M)
        assert re.search(rf"^evaluate: {model}: sts \(2/2\) done in .*, 0 texts encoded$", err, re.M)


def test_mteb_format_tatoeba_file_equals_sentence_transformers_translation_evaluator(built: dict, tmp_path: Path) -> None:
    """mteb/Tatoeba.json in the evaluate artifact holds xlembed's per-direction accuracies, which
    are sentence-transformers' TranslationEvaluator's src2trg / trg2src on the same model and data."""
    import json

    from sentence_transformers.sentence_transformer.evaluation import TranslationEvaluator

    from tasks.evaluate.mteb_results import MTEB_FORMAT_VERSION, task_result_problems

    train_ref = stand_in_trained_model(built, seed=11)
    benchmarks = [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz", "fra"]},
                  {"kind": "sts", "path": str(built["sts"]), "layout": "tsv", "langs": ["en", "en"]}]  # fmt: skip
    config = EvaluateConfig.model_validate({"benchmarks": benchmarks, "encoder": {"pooling": "mean"}, "compare_with_base": False})
    ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key})
    attached = {f.path for f in manifest.attached_files}
    sts_files = sorted(p for p in attached if p.startswith("files/mteb/STS"))  # STS.{dataset}.json: the dataset is the file's
    assert "files/mteb/Tatoeba.json" in attached and len(sts_files) == 1
    files = Path(built["store"].artifact_dir("evaluate", ref.key)) / "files"
    result = json.loads((files / "mteb/Tatoeba.json").read_text(encoding="utf-8"))
    assert (
        result["task_name"] == "Tatoeba"
        and result["dataset_revision"].startswith("sha256:")
        and result["mteb_version"] == MTEB_FORMAT_VERSION
    )
    subsets = {entry["hf_subset"]: entry for entry in result["scores"]["test"]}
    assert set(subsets) == {"kaz-eng", "fra-eng"}
    # every file is a TaskResult MTEB's loader reads, with the seconds its benchmark took
    for path in sorted((files / "mteb").glob("*.json")):
        content = json.loads(path.read_text(encoding="utf-8"))
        assert task_result_problems(content) == [] and content["evaluation_time"] > 0, path.name
    model = sentence_transformer(Path(built["store"].artifact_dir("train", train_ref.key)) / "files/model")
    for code in ("kaz", "fra"):
        entry = subsets[f"{code}-eng"]
        assert entry["languages"] == [{"kaz": "kaz-Cyrl", "fra": "fra-Latn"}[code], "eng-Latn"]
        evaluator = TranslationEvaluator(SENTENCES[code], SENTENCES["eng"], show_progress_bar=False, write_csv=False)
        theirs = evaluator(model)
        src2trg = next(v for k, v in theirs.items() if k.endswith("src2trg_accuracy"))
        trg2src = next(v for k, v in theirs.items() if k.endswith("trg2src_accuracy"))
        assert entry["accuracy_src_tgt"] == pytest.approx(src2trg) and entry["accuracy_tgt_src"] == pytest.approx(trg2src)
        assert entry["main_score"] == entry["accuracy_mean"] == pytest.approx((src2trg + trg2src) / 2)
    sts = json.loads((files / sts_files[0].removeprefix("files/")).read_text(encoding="utf-8"))["scores"]["test"]
    assert len(sts) == 1 and sts[0]["main_score"] == sts[0]["spearman"]


# stsb-multi-mt layout: row i is the same pair in every language, with the same gold score; quoted
# fields where a sentence holds a comma, as in ../shared/data/stsb-multi-mt-dev
STSB = {
    "en": [f'"{a}, yes",{b},{s}' if i % 3 == 0 else f"{a},{b},{s}" for i, (a, b, s) in enumerate(
        zip(SENTENCES["eng"], SENTENCES["eng"][3:] + SENTENCES["eng"][:3], [4.8, 0.4, 3.1, 2.2, 1.0, 5.0, 2.6, 0.0]))],
    "fr": [f"{a},{b},{s}" for a, b, s in zip(SENTENCES["fra"], SENTENCES["fra"][3:] + SENTENCES["fra"][:3], [4.8, 0.4, 3.1, 2.2, 1.0, 5.0, 2.6, 0.0])],
}  # fmt: skip


def stsb_folder(root: Path) -> Path:
    folder = root / "stsb"
    folder.mkdir(exist_ok=True)
    for code, rows in STSB.items():
        (folder / f"stsb-{code}-dev.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


@pytest.mark.slow
def test_stsb_multi_mt_scores_each_language_and_english_with_each_other_as_scipy_does(built: dict, tmp_path: Path) -> None:
    """Monolingual sets per language and cross-lingual en-xx sets: each value is scipy's Spearman of
    the cosines of the model's own vectors (encoded here by sentence-transformers) and the gold."""
    import scipy.stats

    folder = stsb_folder(tmp_path)
    metrics, manifest = evaluate(built, [{"kind": "stsb_multi_mt", "path": str(folder)}])
    sts = metrics.filter(pl.col("benchmark") == "sts")
    assert sorted(zip(sts["dataset"], sts["src_lang"], sts["tgt_lang"])) == [
        ("stsb-multi-mt-dev", "eng_Latn", "eng_Latn"),
        ("stsb-multi-mt-dev", "fra_Latn", "fra_Latn"),
        ("stsb-multi-mt-dev-cross", "eng_Latn", "fra_Latn"),
    ]
    model = sentence_transformer(built["store"].attached_dir("base_model", built["inputs"]["base_model"]))
    import csv

    rows = {code: list(csv.reader((folder / f"stsb-{code}-dev.csv").open(encoding="utf-8", newline=""))) for code in STSB}
    assert rows["en"][0][0].endswith(", yes")  # the quoted comma is inside the sentence
    gold = np.array([float(r[2]) for r in rows["en"]])
    for dataset, first, second, lang in (
        ("stsb-multi-mt-dev", "en", "en", "eng_Latn"),
        ("stsb-multi-mt-dev", "fr", "fr", "fra_Latn"),
        ("stsb-multi-mt-dev-cross", "en", "fr", "eng_Latn"),
    ):
        a = model.encode([r[0] for r in rows[first]], normalize_embeddings=True)
        b = model.encode([r[1] for r in rows[second]], normalize_embeddings=True)
        expected = scipy.stats.spearmanr((a * b).sum(axis=1), gold).statistic
        assert value(metrics, benchmark="sts", dataset=dataset, src_lang=lang, metric="spearman") == pytest.approx(
            expected, abs=1e-6
        )
    # the per-pair cosines are kept, and give the same correlation
    items = pl.read_parquet(Path(built["store"].artifact_dir("evaluate", manifest.key)) / "files/sts_items.parquet")
    for (dataset, src, tgt), part in items.group_by(["dataset", "src_lang", "tgt_lang"]):
        assert part["item"].to_list() == list(range(8)) and part["gold"].to_list() == gold.tolist()
        expected = scipy.stats.spearmanr(part["cosine"].to_numpy(), gold).statistic
        assert value(metrics, dataset=dataset, src_lang=src, tgt_lang=tgt, metric="spearman") == pytest.approx(
            expected, abs=1e-12
        )
    # one headline for the monolingual sets, one for the cross-lingual ones
    assert manifest.metrics["headline"]["sts/stsb-multi-mt-dev"]["pairs"] == 2
    assert manifest.metrics["headline"]["sts/stsb-multi-mt-dev-cross"]["pairs"] == 1


@pytest.mark.slow
def test_stsb_multi_mt_beside_the_base_reports_each_sets_change_with_an_interval(built: dict, tmp_path: Path) -> None:
    from tasks.evaluate.bootstrap import paired_spearman_bootstrap

    train_ref = stand_in_trained_model(built, seed=3)
    config = EvaluateConfig.model_validate(
        {"benchmarks": [{"kind": "stsb_multi_mt", "path": str(stsb_folder(tmp_path))}], "encoder": {"pooling": "mean"}}
    )
    ref, manifest = run_stage(built["store"], EVALUATE_STAGE, config, {**built["inputs"], "train": train_ref.key})
    files = Path(built["store"].artifact_dir("evaluate", ref.key)) / "files"
    assert {"files/sts_items.parquet", "files/items/base_sts_items.parquet"} <= {f.path for f in manifest.attached_files}
    ours, base = pl.read_parquet(files / "sts_items.parquet"), pl.read_parquet(files / "items/base_sts_items.parquet")
    report = (files / "report/report.md").read_text(encoding="utf-8")
    assert "## Change vs untrained base, with 95% intervals" in report
    for dataset, src, tgt, label in (
        ("stsb-multi-mt-dev", "fra_Latn", "fra_Latn", "fra_Latn"),
        ("stsb-multi-mt-dev-cross", "eng_Latn", "fra_Latn", "eng_Latn → fra_Latn"),
    ):
        mine = ours.filter((pl.col("dataset") == dataset) & (pl.col("src_lang") == src) & (pl.col("tgt_lang") == tgt)).sort(
            "item"
        )
        theirs = base.filter((pl.col("dataset") == dataset) & (pl.col("src_lang") == src) & (pl.col("tgt_lang") == tgt)).sort(
            "item"
        )
        interval = paired_spearman_bootstrap(mine["cosine"].to_numpy(), theirs["cosine"].to_numpy(), mine["gold"].to_numpy())
        line = (
            f"| sts/{dataset} | {label} | {100 * interval.delta:+.1f} | {100 * interval.low:+.1f} to {100 * interval.high:+.1f} |"
        )
        assert line in report, report[report.index("## Change") : report.index("## sts")]
    assert "| sts/stsb-multi-mt-dev | all sets |" in report
    # the per-language table shows each set beside the base
    assert "## sts" in report and "Δ vs untrained base (spearman)" in report


def test_stsb_multi_mt_files_that_are_not_line_aligned_fail_naming_file_and_line(built: dict, tmp_path: Path) -> None:
    folder = stsb_folder(tmp_path)
    rows = STSB["fr"][:]
    rows[4] = rows[4].rsplit(",", 1)[0] + ",1.5"
    (folder / "stsb-fr-dev.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match=r"stsb-fr-dev\.csv:5: score: not line-aligned"):
        evaluate(built, [{"kind": "stsb_multi_mt", "path": str(folder)}])
    (folder / "stsb-fr-dev.csv").write_text("\n".join(STSB["fr"][:3]) + '\n"a, b",c\n', encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match=r"stsb-fr-dev\.csv:4: expected 3 comma-separated fields"):
        evaluate(built, [{"kind": "stsb_multi_mt", "path": str(folder), "cross_lingual": False}])


@pytest.mark.slow
def test_stsb_multi_mt_max_pairs_scores_the_first_pairs_and_counts_the_rest(built: dict, tmp_path: Path) -> None:
    metrics, manifest = evaluate(built, [{"kind": "stsb_multi_mt", "path": str(stsb_folder(tmp_path)), "max_pairs": 5}])
    sts = metrics.filter(pl.col("benchmark") == "sts")
    assert sts.height == 3 and set(sts["n"]) == {5}
    assert manifest.dropped["sts_pair_beyond_max_pairs"] == 2 * 3  # per language (en, fr), not per set


# ----------------------------------------------------------------------------- screening subsets (issue 39)


def test_a_subset_is_seeded_stable_and_the_same_for_every_set_name_and_model() -> None:
    from tasks.evaluate.benchmarks.registry import screening_sample

    first = screening_sample(1000, 200, 0, "tatoeba:afr")
    assert np.array_equal(first, screening_sample(1000, 200, 0, "tatoeba:afr"))  # every run, every model
    assert np.all(np.diff(first) > 0) and first.size == 200  # sorted, no repeats
    assert not np.array_equal(first, screening_sample(1000, 200, 0, "tatoeba:amh"))  # each set its own sample
    assert not np.array_equal(first, screening_sample(1000, 200, 1, "tatoeba:afr"))  # the seed changes it


def test_subset_is_keyed_only_when_set_and_refused_where_a_benchmark_cannot_honour_it(built: dict) -> None:
    from tasks.stage_config import keyed_config

    bench = {"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"]}
    plain = EvaluateConfig.model_validate({"benchmarks": [bench]})
    assert keyed_config(plain) == keyed_config(EvaluateConfig.model_validate({"benchmarks": [{**bench, "subset_seed": 0}]}))
    assert keyed_config(plain) != keyed_config(EvaluateConfig.model_validate({"benchmarks": [{**bench, "subset": 4}]}))
    with pytest.raises(ValueError, match="cannot score a subset"):
        EvaluateConfig.model_validate({"benchmarks": [{"kind": "corpus_dev", "pivot": "eng_Latn", "subset": 4}]})


@pytest.mark.slow
def test_tatoeba_subset_scores_the_seeded_pairs_in_both_directions_for_base_and_trained_alike(built: dict) -> None:
    from tasks.evaluate.benchmarks.registry import screening_sample

    metrics, manifest = evaluate(built, [{"kind": "tatoeba", "path": str(built["tatoeba"]), "langs": ["kaz"], "subset": 5}])
    chosen = screening_sample(len(SENTENCES["kaz"]), 5, 0, "tatoeba:kaz")
    model_dir = built["store"].attached_dir("base_model", built["inputs"]["base_model"])
    forward, backward = independent_accuracy(
        model_dir, [SENTENCES["kaz"][i] for i in chosen], [SENTENCES["eng"][i] for i in chosen]
    )
    assert value(metrics, benchmark="tatoeba", src_lang="kaz_Cyrl", metric="accuracy_src_tgt") == pytest.approx(forward)
    assert value(metrics, benchmark="tatoeba", src_lang="kaz_Cyrl", metric="accuracy_tgt_src") == pytest.approx(backward)
    assert manifest.dropped["tatoeba_pair_outside_subset"] == len(SENTENCES["kaz"]) - 5
    assert manifest.metrics["screening"] == [
        "tatoeba: at most 5 translation pairs (both directions) per set (seeded sample, seed 0)"
    ]
    report = (built["store"].attached_dir("evaluate", manifest.key) / "report" / "report.md").read_text(encoding="utf-8")
    assert "A screen, not a claim" in report.split("\n\n")[1]  # right under the title


@pytest.mark.slow
def test_stsb_multi_mt_subset_takes_the_same_rows_in_every_language(built: dict, tmp_path: Path) -> None:
    import scipy.stats

    from tasks.evaluate.benchmarks.registry import screening_sample

    folder = stsb_folder(tmp_path)
    metrics, manifest = evaluate(built, [{"kind": "stsb_multi_mt", "path": str(folder), "subset": 4}])
    import csv

    parsed = {code: list(csv.reader(lines)) for code, lines in STSB.items()}
    chosen = screening_sample(len(parsed["en"]), 4, 0, "stsb-multi-mt-dev")
    model = sentence_transformer(built["store"].attached_dir("base_model", built["inputs"]["base_model"]))

    def spearman(first: list[str], second: list[str], gold: list[float]) -> float:
        a = model.encode(first, normalize_embeddings=True)
        b = model.encode(second, normalize_embeddings=True)
        return float(scipy.stats.spearmanr((a * b).sum(1), gold).statistic)

    gold = [float(parsed["en"][i][2]) for i in chosen]
    fr_en = spearman([parsed["en"][i][0] for i in chosen], [parsed["fr"][i][1] for i in chosen], gold)
    assert value(metrics, benchmark="sts", src_lang="eng_Latn", tgt_lang="fra_Latn") == pytest.approx(fr_en, abs=1e-6)
    fr = spearman([parsed["fr"][i][0] for i in chosen], [parsed["fr"][i][1] for i in chosen], gold)
    assert value(metrics, benchmark="sts", src_lang="fra_Latn", tgt_lang="fra_Latn") == pytest.approx(fr, abs=1e-6)
    assert manifest.dropped["sts_pair_outside_subset"] == 2 * (len(parsed["en"]) - 4)
