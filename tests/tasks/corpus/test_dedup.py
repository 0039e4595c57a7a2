"""Near-duplicate keys and their removal in the corpus stage; no dev row is a near-duplicate of a train row."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import regex

from storage import ArtifactStore
from tasks.corpus.config import CorpusConfig
from tasks.corpus.dedup import near_duplicate_key, normalized_text
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage


def reference_normal(text: str) -> str:
    """The normalisation written independently, with Python's `regex` and `unicodedata`."""
    text = unicodedata.normalize("NFKC", text).lower()
    return " ".join(regex.sub(r"[\p{P}\p{N}]+", " ", text).split())


SAMPLES = [
    "Hello, World! 42",
    "  hello   world ",
    "Привет, МИР!!",
    "привет мир",
    "नमस्ते, दुनिया। १२३",  # Devanagari danda and digits
    "नमस्ते दुनिया",
    "किताब",  # vowel sign i (a combining mark) ...
    "कताब",  # ... without it: a different word
    "مرحبا ١٢٣ بالعالم؟",  # Arabic-Indic digits, Arabic question mark
    "ＡＢＣ　ｄｅｆ",  # full-width letters and space (NFKC)
    "2019.",
    "...",
    "",
]


def normalise(texts: list[str]) -> pl.DataFrame:
    frame = pl.DataFrame({"text": texts})
    return frame.with_columns(normalized_text(pl.col("text")).alias("normal"), near_duplicate_key(pl.col("text")).alias("key"))


def test_normalisation_matches_an_independent_implementation_in_every_script() -> None:
    frame = normalise(SAMPLES)
    assert frame["normal"].to_list() == [reference_normal(t) for t in SAMPLES]
    key = dict(zip(SAMPLES, frame["key"].to_list()))
    assert key["Hello, World! 42"] == key["  hello   world "] is not None
    assert key["Привет, МИР!!"] == key["привет мир"]
    assert key["नमस्ते, दुनिया। १२३"] == key["नमस्ते दुनिया"]
    assert key["किताब"] != key["कताब"]  # combining marks are letters' parts, not punctuation
    assert frame.filter(pl.col("normal") == "ａｂｃ")["key"].to_list() == []  # NFKC folded it to abc def
    assert reference_normal("ＡＢＣ　ｄｅｆ") == "abc def"
    # nothing left: no key, so "2019." is nobody's near-duplicate
    assert key["2019."] is None and key["..."] is None and key[""] is None
    assert len({k for k in key.values() if k is not None}) == 7


# ------------------------------------------------------------------ the stage


def write_lines(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def run_corpus(tmp_path: Path, store: str, sources: list[dict[str, Any]], **settings: Any) -> tuple[Any, list[dict[str, Any]]]:
    artifacts = ArtifactStore(tmp_path / store)
    config = CorpusConfig.model_validate({"sources": sources, **settings})
    _, manifest = run_stage(artifacts, CORPUS_STAGE, config, {})
    rows = artifacts.read_table("corpus", manifest.key).to_pylist()
    assert manifest.rows_in == manifest.rows_out + sum(manifest.dropped.values())
    for shard in manifest.shards:
        record = artifacts.completed_shard("corpus", manifest.key, shard)
        assert record is not None and record.rows_in == record.rows_out + sum(record.dropped.values())
    return manifest, rows


def keyed(rows: list[dict[str, Any]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows).select("group_id", "lang", "text", "split")
    return frame.with_columns(near_duplicate_key(pl.col("text")).alias("key"))


EN = [
    "The cat sleeps.",
    "the cat sleeps",
    "A dog runs!",
    "Room 101 is free.",
    "Room 102 is free",
    "A bird sings.",
    "2019.",
    "2020.",
]
KK = [
    "Мысық ұйықтайды.",
    "Мысық ұйықтап жатыр",
    "Ит жүгіреді",
    "101 бөлме бос",
    "102-бөлме бос!",
    "Ит жүгіреді.",
    "2019 ж.",
    "2020 ж.",
]


@pytest.mark.parametrize("batch", [1, 3, 65_536])
def test_near_duplicates_within_a_language_are_dropped_and_counted_apart_from_exact_ones(tmp_path: Path, batch: int) -> None:
    en = write_lines(tmp_path / "s.en", EN + ["A dog runs!"])
    kk = write_lines(tmp_path / "s.kk", KK + ["Ит жүгіреді"])  # group 9 repeats group 3 exactly
    source = {"kind": "text", "name": "s", "files": {"en": en, "kk": kk}}
    filters = {"near_dedupe": True, "min_langs_per_group": 1}
    manifest, rows = run_corpus(tmp_path, "near", [source], filters=filters, read_batch_lines=batch)
    kept = {(r["group_id"], r["lang"]): r["text"] for r in rows}
    # group 2: English near-dup of group 1 (its Kazakh differs: kept); group 5: both near-dups of group 4
    # group 6: Kazakh near-dup of group 3; groups 7/8: English has no key, Kazakh "ж" is shared
    assert kept == {
        ("s:1", "eng_Latn"): "The cat sleeps.", ("s:1", "kaz_Cyrl"): "Мысық ұйықтайды.",
        ("s:2", "kaz_Cyrl"): "Мысық ұйықтап жатыр",
        ("s:3", "eng_Latn"): "A dog runs!", ("s:3", "kaz_Cyrl"): "Ит жүгіреді",
        ("s:4", "eng_Latn"): "Room 101 is free.", ("s:4", "kaz_Cyrl"): "101 бөлме бос",
        ("s:6", "eng_Latn"): "A bird sings.",
        ("s:7", "eng_Latn"): "2019.", ("s:7", "kaz_Cyrl"): "2019 ж.",
        ("s:8", "eng_Latn"): "2020.",
    }  # fmt: skip
    assert manifest.dropped == {"duplicate": 2, "near_duplicate": 5}
    # without near_dedupe: the old behaviour, exact duplicates only
    old, old_rows = run_corpus(tmp_path, "exact", [source], filters={"min_langs_per_group": 1}, read_batch_lines=batch)
    assert old.dropped == {"duplicate": 2} and len(old_rows) == 16


def test_a_group_left_incomplete_by_near_dedupe_is_dropped_whole(tmp_path: Path) -> None:
    source = {
        "kind": "text",
        "name": "s",
        "files": {"en": write_lines(tmp_path / "s.en", EN), "kk": write_lines(tmp_path / "s.kk", KK)},
    }
    manifest, rows = run_corpus(tmp_path, "st", [source], filters={"near_dedupe": True})
    assert sorted({r["group_id"] for r in rows}) == ["s:1", "s:3", "s:4", "s:7"]
    assert manifest.dropped == {"near_duplicate": 5, "group_incomplete": 3}  # groups 2, 6, 8 lose their other row


def sampled(tmp_path: Path, store: str, lines: int, sample: int, batch: int) -> tuple[Any, list[dict[str, Any]]]:
    # every English sentence appears in ~4 spellings; Kazakh is distinct per line
    # 97 English sentences (letters, not digits: digits are normalised away), each in several spellings
    en = [
        f"{'The' if i % 2 else 'the'} sentence {chr(97 + i % 97 % 26)}{chr(97 + i % 97 // 26)}{'!' if i % 5 else '.'}"
        for i in range(lines)
    ]
    kk = [f"сөйлем {i} {chr(0x430 + i % 32)}{chr(0x430 + (i // 32) % 32)}{chr(0x430 + (i // 1024) % 32)}" for i in range(lines)]
    files = {"en": write_lines(tmp_path / f"{store}.en", en), "kk": write_lines(tmp_path / f"{store}.kk", kk)}
    source = {"kind": "text", "name": "s", "files": files, "sample": sample}
    return run_corpus(tmp_path, store, [source], filters={"near_dedupe": True}, read_batch_lines=batch)


@pytest.mark.slow
def test_sampling_with_near_dedupe_is_exact_and_does_not_depend_on_batches(tmp_path: Path) -> None:
    runs = [sampled(tmp_path, f"b{batch}", 2000, 40, batch) for batch in (7, 256, 5000)]
    (manifest, rows), *others = runs
    assert all(other_rows == rows for _, other_rows in others)
    assert all(m.dropped == manifest.dropped for m, _ in others)
    frame = keyed(rows)
    assert frame["group_id"].n_unique() == 40  # the sample size, after near-dedupe
    for lang in ("eng_Latn", "kaz_Cyrl"):
        assert frame.filter(pl.col("lang") == lang)["key"].is_unique().all()
    assert manifest.dropped["near_duplicate"] > 0 and manifest.dropped["not_sampled"] > 0
    # only 97 distinct English keys: asking for more keeps exactly those
    _, every = sampled(tmp_path, "all", 2000, 1000, 300)
    assert keyed(every)["group_id"].n_unique() == 97


def leaked_rows(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Dev rows whose (language, normalised key) occurs among train rows anywhere in the corpus."""
    frame = keyed(rows).drop_nulls("key")
    train = frame.filter(pl.col("split") == "train").select("lang", "key").unique()
    return frame.filter(pl.col("split") == "dev").join(train, on=["lang", "key"], how="semi")


def test_no_dev_row_is_a_near_duplicate_of_a_train_row(tmp_path: Path) -> None:
    """Tatoeba-like pairs: the same English sentences (re-spelt) pair with two languages in
    two shards, and repeat within each; with near_dedupe, no dev row of any language has a
    train near-duplicate, within a shard or across them. Without it, they leak."""
    folder = tmp_path / "tatoeba"
    folder.mkdir()
    english = [f"Sentence {word} is here" for word in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")]
    spellings = [lambda s: s + ".", lambda s: s.lower() + "!", lambda s: s.upper(), lambda s: s.replace(" ", "  ") + "?"]
    for lang, word in (("kaz", "сөйлем"), ("tel", "వాక్యం")):
        en = [spell(s) for k, spell in enumerate(spellings) for s in english[k % 2 :: 1]]
        xx = [f"{word} {i} {chr(0x430 + i % 30)}{chr(0x430 + i // 30)}" for i in range(len(en))]
        write_lines(folder / f"tatoeba.{lang}-eng.{lang}", xx)
        write_lines(folder / f"tatoeba.{lang}-eng.eng", en)
    source = {"kind": "tatoeba", "name": "tatoeba", "path": str(folder), "langs": ["kaz", "tel"]}
    manifest, rows = run_corpus(tmp_path, "near", [source], filters={"near_dedupe": True}, dev_fraction=0.5)
    assert {r["split"] for r in rows} == {"train", "dev"}
    assert leaked_rows(rows).height == 0
    assert manifest.dropped["near_duplicate"] > 0
    # each English sentence once per pair, on the same side in both pairs
    english_rows = keyed(rows).filter(pl.col("lang") == "eng_Latn")
    assert english_rows.height == 2 * len(english)
    assert english_rows.group_by("key").agg(pl.col("split").n_unique())["split"].to_list() == [1] * len(english)
    _, old_rows = run_corpus(tmp_path, "exact", [source], dev_fraction=0.5)
    assert leaked_rows(old_rows).height > 0
