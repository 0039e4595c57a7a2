"""Keys of corpus artifacts stay what they were before sources became a registry (issue 16 §1):
the values below were computed on the code before that change, with the same configs and files.

A shipped config's key is built from its keyed config alone here (its source files are not in
the repository); the local sources below cover every kind with their source fingerprints, so
a change in what a kind keys (a field, a file left out, a name changed) changes a value.

Recorded again when `filters.drop_copies` (a keyed field, on by default: it changes what the
corpus keeps) was added and the corpus code version became 2 (control characters are a drop
reason; CLD2 runs without bestEffort): both change what the corpus keeps, so every corpus key
changed on purpose, and nothing else did."""

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
from tasks.stage import source_fingerprints, stage_key
from tasks.stage_config import CONFIG_DIR

CONFIGS = Path(__file__).resolve().parents[3] / "configs"

# corpus key of each shipped config's [corpus] section, without source fingerprints
SHIPPED_KEYS = {
    "cpu-small.toml": "ae4ef5e09f23108526a67e00995a756c0a5449c1d628b0c96a398cf338b42559",
    "cpu-wacse.toml": "45323dcbf00823eb3f78dafb66a1e48069d76065ddf58c8ec9fa75e433bc3635",
    "dap.toml": "fb09d8fc924a78835316ba210ba71fc6497902d98f7270335b3a2866cfae2fb4",
    "demo.toml": "dc9db582267aecaee2d38dc607ccc2a64835cea7042661783674599168118d99",
    "dueam.toml": "c378440373e80cf6eccad4fc68ad15b89fd1bb617faea4689149374247834384",
    "multiway-supcon.toml": "2fafc07c6c0a4cfb272c5c72ca93c5f34d8aea937638e7cd624d028c5f2b8959",
    "multiway.toml": "838eaf2daac73f2f87b28bedeb0bb2b1e5b08b67576033313a9e18487be67243",
    "offline-multiway.toml": "6e04c67162d6c12adc7d85e2667294d6e84c8c5e301f786e5e0ba556eb7e0ecf",
    "smoke.toml": "9f03a65a9a558f2f29f3e5d4c5ebf29dc025521102798b4da9a83514def00e13",
    "wacse.toml": "d4ec2f6135d0dd0cb560cd8edee6e76ce334284fcd49ea91c273822dfe793639",
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
LOCAL_KEY = "29f9650627616f25892de6332fa1037e7f7393597f8e972a6305cbd628f55e77"
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
            {
                "name": "flores",
                "kind": "multiway_dir",
                "path": "flores",
                "langs": ["eng_Latn", "kaz_Cyrl", "fra_Latn"],
                "files": {"eng_Latn": "newstest-eng.txt"},
            },
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
