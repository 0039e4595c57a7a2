"""Keys of corpus artifacts stay what they were before sources became a registry (issue 16 §1):
the values below were computed on the code before that change, with the same configs and files.

A shipped config's key is built from its keyed config alone here (its source files are not in
the repository); the local sources below cover every kind with their source fingerprints, so
a change in what a kind keys (a field, a file left out, a name changed) changes a value.

Recorded again when `filters.drop_copies` (a keyed field, on by default: it changes what the
corpus keeps) was added: that changed every corpus key on purpose, and nothing else did."""

from __future__ import annotations

import gzip
import io
import pickle
import tomllib
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.corpus import CORPUS_STAGE
from tasks.corpus.config import CorpusConfig
from tasks.corpus.stage import source_langs
from tasks.stage import CONFIG_DIR, source_fingerprints, stage_key

CONFIGS = Path(__file__).resolve().parents[3] / "configs"

# corpus key of each shipped config's [corpus] section, without source fingerprints
SHIPPED_KEYS = {
    "cpu-small.toml": "47741a534943dfb0bd7d1645d2f2c5bc84af760c3c12ca60803c645218596319",
    "cpu-wacse.toml": "f2683202fc9a7baa1b41d603f2d1d0fe66b934da847ec5274249ebf30ced4b3a",
    "dap.toml": "0347bc3dc7b643c338fdce75795868bdc960534d05d41cb21d338eb1ca79714a",
    "demo.toml": "c33208302cfd8e3699e064dc7b69899b6ed326d3e1261551d9dab2b840c0e971",
    "dueam.toml": "7a348e2db01f17f06b51193385280b5522a02f5b9017ae935a98512b2ee64964",
    "multiway-supcon.toml": "362655f6e01607033df7e9f7a72435e3c8e7fc6d7e64c085031b1632880aaac3",
    "multiway.toml": "5d1048b9ec7a3377efaa760e137a09b36c699d2418a0c049ac185b586b063e96",
    "offline-multiway.toml": "cc02b21ec82d2950f4b861097f6e25ed42e723b14b2f369106e2e3397e5e4a64",
    "smoke.toml": "e26e8ace41deef0fd9d16b0f3823beb69ba321cce35b38c5bfed3734db0908d2",
    "wacse.toml": "200dde10c6848f72a6f205e275406da61987dfb6cf58375a1075282725af65c6",
}
# shard ids of each shipped config, in plan order
SHIPPED_SHARDS = {
    "cpu-small.toml": ["flores200-dev", "ntrex128"],
    "cpu-wacse.toml": ["flores200-dev"],
    "dap.toml": ["opus-de", "opus-kk", "opus-te"],
    "demo.toml": ["cldr-lowres", "cldr-major"],
    "dueam.toml": ["opus-de", "opus-hi"],
    "multiway-supcon.toml": ["opus-wikipedia-en", "opus-opensubtitles-en"],
    "multiway.toml": ["opus-wikipedia-en", "opus-opensubtitles-en"],
    "offline-multiway.toml": ["flores200-dev", "ntrex128"],
    "smoke.toml": ["cldr-english"],
    "wacse.toml": ["opus-kk", "opus-te", "opus-ka", "opus-jv", "opus-tl", "opus-sw", "opus-ml", "opus-mr"],
}
# every kind, from local files (and one URL with a declared sha256): key with fingerprints
LOCAL_KEY = "4a9fd76e7cdf55440b7d0bb51aab240758d04b4a6ab4823a05cacee2d9a65aa7"
LOCAL_SHARDS = {  # shard id: its languages, first = the pivot
    "text": ["eng_Latn", "kaz_Cyrl"],
    "remote": ["eng_Latn"],
    "tsv": ["eng_Latn", "fra_Latn"],
    "parquet": ["eng_Latn", "deu_Latn"],
    "opus": ["eng_Latn", "kaz_Cyrl"],
    "flores": ["eng_Latn", "kaz_Cyrl", "fra_Latn"],
    "tatoeba-kaz": ["eng_Latn", "kaz_Cyrl"],
    "tatoeba-tel": ["eng_Latn", "tel_Telu"],
    "cldr": ["eng_Latn", "kaz_Cyrl", "fra_Latn"],
}


def shipped_corpus_config(name: str) -> CorpusConfig:
    path = CONFIGS / name
    section = tomllib.loads(path.read_text(encoding="utf-8"))["corpus"]
    return CorpusConfig.model_validate(section, context={CONFIG_DIR: str(path.parent)})


def local_sources(root: Path) -> dict:
    """One source of each kind, written under `root`; the TOML form a user would write."""
    (root / "en.txt").write_text("Hello.\nGood night.\n", encoding="utf-8")
    (root / "kk.txt.gz").write_bytes(gzip.compress("Сәлем.\nҚайырлы түн.\n".encode(), mtime=0))
    (root / "pairs.tsv").write_text("en\tfr\nHello.\tBonjour.\nThanks.\tMerci.\n", encoding="utf-8")
    pq.write_table(pa.table({"english": ["Yes.", "No."], "german": ["Ja.", "Nein."]}), root / "wide.parquet")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, text in (("Demo.en-kk.en", "One.\nTwo.\n"), ("Demo.en-kk.kk", "Бір.\nЕкі.\n")):
            archive.writestr(zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0)), text)  # fixed bytes
    (root / "demo.en-kk.zip").write_bytes(buffer.getvalue())
    (root / "flores").mkdir()
    for code, text in (("eng_Latn", "Cat.\nDog.\n"), ("kaz_Cyrl", "Мысық.\nИт.\n"), ("fra_Latn", "Chat.\nChien.\n")):
        (root / "flores" / f"{code}.dev").write_text(text, encoding="utf-8")
    (root / "flores" / "newstest-eng.txt").write_text("Cat.\nDog.\n", encoding="utf-8")
    (root / "tatoeba").mkdir()
    for lang, text in (("kaz", "Иә.\n"), ("tel", "అవును.\n")):
        (root / "tatoeba" / f"tatoeba.{lang}-eng.{lang}").write_text(text, encoding="utf-8")
        (root / "tatoeba" / f"tatoeba.{lang}-eng.eng").write_text("Yes.\n", encoding="utf-8")
    return {
        "seed": 7,
        "dev_fraction": 0.2,
        "filters": {"max_words": 50, "near_dedupe": True},
        "sources": [
            {"name": "text", "kind": "text", "files": {"en": "en.txt", "kk": "kk.txt.gz"}, "sample": 10},
            {"name": "remote", "kind": "text", "files": {"en": "https://example.org/en.txt"}, "sha256": {"en": "AB" * 32}},
            {"name": "tsv", "kind": "tsv", "path": "pairs.tsv", "columns": {"en": "en", "fr": 1}},
            {"name": "parquet", "kind": "parquet", "path": "wide.parquet", "columns": {"en": "english", "de": "german"}},
            {"name": "opus", "kind": "opus_moses", "url": "demo.en-kk.zip", "langs": ["en", "kk"]},
            {"name": "flores", "kind": "multiway_dir", "path": "flores", "langs": ["eng_Latn", "kaz_Cyrl", "fra_Latn"],
             "files": {"eng_Latn": "newstest-eng.txt"}},
            {"name": "tatoeba", "kind": "tatoeba", "path": "tatoeba", "langs": ["kaz", "tel"]},
            {"name": "cldr", "kind": "cldr", "langs": ["en", "kk", "fr"], "categories": ["languages"]},
        ],
    }


def local_config(root: Path) -> CorpusConfig:
    return CorpusConfig.model_validate(local_sources(root), context={CONFIG_DIR: str(root)})


def test_keys_of_shipped_corpus_configs_are_unchanged() -> None:
    assert sorted(SHIPPED_KEYS) == sorted(p.name for p in CONFIGS.glob("*.toml") if "[corpus]" in p.read_text(encoding="utf-8"))
    for name, key in SHIPPED_KEYS.items():
        config = shipped_corpus_config(name)
        assert stage_key(CORPUS_STAGE, config, {}, {}) == key, name
        assert [s.shard_id for s in CORPUS_STAGE.plan_shards(config, {})] == SHIPPED_SHARDS[name], name


def test_key_and_fingerprints_of_every_source_kind_are_unchanged(tmp_path: Path) -> None:
    import babel

    config = local_config(tmp_path)
    prints = source_fingerprints(CORPUS_STAGE, config)
    assert prints["cldr"] == {"babel": babel.__version__}
    prints["cldr"] = {"babel": "recorded"}  # the key must not depend on the installed Babel here
    assert stage_key(CORPUS_STAGE, config, {}, prints) == LOCAL_KEY
    shards = CORPUS_STAGE.plan_shards(config, {})
    assert {s.shard_id: source_langs(config.sources[s.params["source"]], s) for s in shards} == LOCAL_SHARDS
    assert list(LOCAL_SHARDS) == [s.shard_id for s in shards]
    assert pickle.loads(pickle.dumps(config)) == config  # shards run in Dask and Ray workers
