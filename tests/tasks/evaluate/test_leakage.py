"""Evaluation leakage: benchmark sentences found, normalised, among the training rows; marked in the report."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex

from storage import ArtifactStore
from tasks.base_model import BASE_MODEL_STAGE
from tasks.base_model.config import BaseModelConfig
from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.evaluate import EVALUATE_STAGE
from tasks.evaluate.config import EvaluateConfig
from tasks.evaluate.leakage import LEAKAGE_SCHEMA, SentenceSet, overlap_table, training_keys
from tasks.stage import run_stage

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"


def reference_normal(text: str) -> str:
    """Written independently of tasks/corpus/dedup.py."""
    return " ".join(regex.sub(r"[\p{P}\p{N}]+", " ", unicodedata.normalize("NFKC", text).lower()).split())


def corpus_rows(rows: list[tuple[str, str, str]]) -> pa.Table:
    return pa.Table.from_pylist([{"lang": lang, "text": text, "split": split} for lang, text, split in rows])


def test_overlap_counts_per_side_per_language_and_per_pair() -> None:
    training = training_keys(
        corpus_rows(
            [
                ("eng_Latn", "The cat sleeps.", "train"),
                ("eng_Latn", "It rains", "dev"),  # dev rows are not training rows
                ("kaz_Cyrl", "Ит жүгіреді!", "train"),
                ("fra_Latn", "Мысық", "train"),  # a text found in another language only does not count
            ]
        )
    )
    sets = [
        SentenceSet(
            "tatoeba",
            "tatoeba",
            "kaz_Cyrl",
            "eng_Latn",
            ["Мысық", "ит жүгіреді", "the cat sleeps"],
            ["A cat", "A dog runs", "THE CAT SLEEPS 2"],
        ),
        SentenceSet("retrieval", "flores", "eng_Latn", "kaz_Cyrl", ["It rains", "nothing"], ["жаңбыр", "жоқ"]),
        SentenceSet("bucc", "bucc2018.test", "kaz_Cyrl", "eng_Latn", ["ит жүгіреді"], ["x", "the cat sleeps."], aligned=False),
    ]
    table = overlap_table(sets, training)
    assert table.schema == LEAKAGE_SCHEMA
    rows = {row["dataset"]: row for row in table.to_pylist()}
    # item 1 by its Kazakh side, item 2 by its English side (its "Kazakh" side is English text: not in kaz rows)
    assert rows["tatoeba"] == {
        "benchmark": "tatoeba", "dataset": "tatoeba", "src_lang": "kaz_Cyrl", "tgt_lang": "eng_Latn", "items": 3,
        "src_in_training": 1, "tgt_in_training": 1, "items_in_training": 2, "share": pytest.approx(2 / 3),
    }  # fmt: skip
    assert rows["flores"]["items_in_training"] == 0
    assert (rows["bucc2018.test"]["items"], rows["bucc2018.test"]["items_in_training"]) == (3, 2)
    assert overlap_table([], training).num_rows == 0


needs_data = pytest.mark.skipif(
    not (DATA / "flores200-dev").is_dir(), reason="../shared/data (FLORES-200 dev, Tatoeba) is absent"
)


@pytest.mark.slow
@needs_data
def test_evaluate_counts_flores_and_tatoeba_sentences_in_the_training_rows_and_marks_them(tmp_path: Path) -> None:
    """Train rows = FLORES-200 dev (eng, afr); scored: its first 30 rows and 40 Tatoeba pairs."""
    store = ArtifactStore(tmp_path / "artifacts")
    corpus_config = CorpusConfig.model_validate(
        {
            "sources": [
                {"name": "flores", "kind": "multiway_dir", "path": str(DATA / "flores200-dev"), "langs": ["eng_Latn", "afr_Latn"]}
            ]
        }
    )
    corpus_ref, _ = run_stage(store, CORPUS_STAGE, corpus_config, {})
    model_ref, _ = run_stage(store, BASE_MODEL_STAGE, BaseModelConfig(), {})
    benchmarks = [
        {"kind": "multiway", "path": str(DATA / "flores200-dev"), "langs": ["eng_Latn", "afr_Latn"], "row_stop": 30},
        {"kind": "tatoeba", "path": str(DATA / "tatoeba-dev"), "langs": ["afr"], "max_pairs": 40},
    ]
    config = EvaluateConfig.model_validate({"benchmarks": benchmarks, "encoder": {"pooling": "mean"}, "word_map_concepts": 0})
    ref, manifest = run_stage(store, EVALUATE_STAGE, config, {"corpus": corpus_ref.key, "base_model": model_ref.key})

    # independent count: Python sets of normalised train texts per language
    corpus = pl.from_arrow(store.read_table("corpus", corpus_ref.key)).filter(pl.col("split") == "train")
    train = {lang: {reference_normal(t) for t in part["text"]} - {""} for (lang,), part in corpus.group_by("lang")}

    def expected(src_lang: str, tgt_lang: str, src: list[str], tgt: list[str]) -> int:
        return sum(reference_normal(a) in train[src_lang] or reference_normal(b) in train[tgt_lang] for a, b in zip(src, tgt))

    lines = {
        lang: (DATA / "flores200-dev" / f"{lang}.dev").read_text(encoding="utf-8").splitlines()[:30]
        for lang in ("eng_Latn", "afr_Latn")
    }
    tatoeba = {
        side: (DATA / "tatoeba-dev" / f"tatoeba.afr-eng.{side}").read_text(encoding="utf-8").splitlines()[:40]
        for side in ("afr", "eng")
    }
    files = Path(store.artifact_dir("evaluate", ref.key)) / "files" / "report"
    leakage = {(r["benchmark"], r["dataset"]): r for r in pq.read_table(files / "leakage.parquet").to_pylist()}
    flores = leakage["retrieval", "flores200-dev"]
    assert (flores["src_lang"], flores["tgt_lang"], flores["items"]) == ("afr_Latn", "eng_Latn", 30)
    assert flores["items_in_training"] == expected("afr_Latn", "eng_Latn", lines["afr_Latn"], lines["eng_Latn"])
    assert 20 <= flores["items_in_training"] < 30  # the corpus holds ~10% out as dev
    pairs = leakage["tatoeba", "tatoeba"]
    assert pairs["items"] == 40
    assert pairs["items_in_training"] == expected("afr_Latn", "eng_Latn", tatoeba["afr"], tatoeba["eng"])
    assert manifest.metrics["training_overlap"]["retrieval/flores200-dev"]["items_in_training"] == flores["items_in_training"]

    report = (files / "report.md").read_text(encoding="utf-8")
    html = (files / "report.html").read_text(encoding="utf-8")
    assert "## Training-corpus overlap" in report and "<h2>Training-corpus overlap</h2>" in html
    sections = {part.split("\n", 1)[0]: part for part in report.split("\n## ")}

    def pair_line(section: str) -> str:
        return next(line for line in sections[section].splitlines() if line.startswith("| afr_Latn → eng_Latn"))

    for section, found in (("retrieval", flores), ("tatoeba", pairs)):
        leaked = found["items_in_training"]
        cell = f"⚠ {leaked} ({leaked / found['items'] * 100:.1f}%)" if leaked else "0"
        line = pair_line(section)
        assert line.rstrip(" |").endswith(f"| {cell}"), line
        assert line.startswith("| afr_Latn → eng_Latn ⚠ |") == bool(leaked)
    assert f"⚠ {flores['items_in_training']} ({flores['items_in_training'] / 30 * 100:.1f}%)" in html
