"""The corpus stage end to end: real files in, Parquet and manifest out (no mocks)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import threading
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from storage import ArtifactStore, Manifest
from tasks.corpus.config import CorpusConfig
from tasks.corpus.readers import SourceError
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage

REPO_ROOT = Path(__file__).resolve().parents[3]
FLORES_DIR = REPO_ROOT.parent / "shared" / "data" / "flores200-dev"


# ------------------------------------------------------------------ helpers


@dataclass
class Run:
    store: ArtifactStore
    manifest: Manifest
    rows: list[dict[str, Any]]

    @property
    def dropped(self) -> dict[str, int]:
        return self.manifest.dropped

    def groups(self) -> dict[str, dict[str, str]]:
        """group_id -> {lang: text}, in output order."""
        out: dict[str, dict[str, str]] = defaultdict(dict)
        for row in self.rows:
            assert row["lang"] not in out[row["group_id"]]
            out[row["group_id"]][row["lang"]] = row["text"]
        return dict(out)

    def texts(self, lang: str | None = None) -> list[str]:
        return [r["text"] for r in self.rows if lang is None or r["lang"] == lang]


def check_invariants(store: ArtifactStore, manifest: Manifest, table: pa.Table) -> None:
    """rows_in == rows_out + dropped for every shard and the whole run; ids unique; schema kept."""
    assert table.schema.names == CORPUS_SCHEMA.names
    assert manifest.rows_out == table.num_rows
    assert manifest.rows_in == manifest.rows_out + sum(manifest.dropped.values())
    assert all(n > 0 for n in manifest.dropped.values())
    total_in = 0
    for shard_id in manifest.shards:
        record = store.completed_shard("corpus", manifest.key, shard_id)
        assert record is not None
        assert record.rows_in == record.rows_out + sum(record.dropped.values()), shard_id
        total_in += record.rows_in
    assert total_in == manifest.rows_in
    rows = table.to_pylist()
    assert len({r["id"] for r in rows}) == len(rows)
    split_of: dict[str, str] = {}
    for row in rows:
        assert row["id"] == f"{row['group_id']}:{row['lang']}"
        assert row["group_id"].startswith(f"{row['source']}:")
        assert row["split"] in ("train", "dev")
        assert row["text"] and row["text"] == row["text"].strip()
        assert split_of.setdefault(row["group_id"], row["split"]) == row["split"]  # a group is never split
    assert manifest.metrics["groups"] == len(split_of)
    assert sum(manifest.metrics["rows_by_lang"].values()) == len(rows)


def run_corpus(tmp_path: Path, sources: list[dict[str, Any]], store_dir: str = "store", **settings: Any) -> Run:
    store = ArtifactStore(tmp_path / store_dir)
    config = CorpusConfig.model_validate({"sources": sources, **settings})
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    table = store.read_table("corpus", manifest.key)
    check_invariants(store, manifest, table)
    return Run(store, manifest, table.to_pylist())


def write_lines(path: Path, lines: list[str | bytes], newline: bytes = b"\n") -> str:
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + newline for x in lines))
    return str(path)


def text_source(tmp_path: Path, columns: dict[str, list[str | bytes]], name: str = "src", **extra: Any) -> dict[str, Any]:
    files = {lang: write_lines(tmp_path / f"{name}.{lang}", lines) for lang, lines in columns.items()}
    return {"kind": "text", "name": name, "files": files, **extra}


def parquet_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and ".parquet" in p.name)


# ------------------------------------------------------------------ text sources


def test_monolingual_text(tmp_path: Path) -> None:
    run = run_corpus(tmp_path, [text_source(tmp_path, {"kk": ["  сәлем әлем ", "қазақ тілі", "үшінші жол"]}, name="mono")])
    assert run.manifest.shards == ["mono"]
    assert [(r["id"], r["lang"], r["text"], r["source"]) for r in run.rows] == [
        ("mono:1:kaz_Cyrl", "kaz_Cyrl", "сәлем әлем", "mono"),
        ("mono:2:kaz_Cyrl", "kaz_Cyrl", "қазақ тілі", "mono"),
        ("mono:3:kaz_Cyrl", "kaz_Cyrl", "үшінші жол", "mono"),
    ]
    assert run.manifest.rows_in == 3 and run.manifest.rows_out == 3 and run.dropped == {}
    assert run.manifest.metrics["rows_by_lang"] == {"kaz_Cyrl": 3}


def test_parallel_text_maps_iso_codes_to_flores(tmp_path: Path) -> None:
    source = text_source(tmp_path, {"kk": ["бір", "екі", "үш"], "en": ["one", "two", "three"]}, name="par")
    run = run_corpus(tmp_path, [source])
    assert {r["lang"] for r in run.rows} == {"kaz_Cyrl", "eng_Latn"}
    assert run.groups() == {
        "par:1": {"kaz_Cyrl": "бір", "eng_Latn": "one"},
        "par:2": {"kaz_Cyrl": "екі", "eng_Latn": "two"},
        "par:3": {"kaz_Cyrl": "үш", "eng_Latn": "three"},
    }
    # groups in source order, languages in config order
    assert [r["id"] for r in run.rows[:2]] == ["par:1:kaz_Cyrl", "par:1:eng_Latn"]
    assert run.manifest.metrics["rows_by_lang"] == {"eng_Latn": 3, "kaz_Cyrl": 3}
    assert sum(run.manifest.metrics["rows_by_split"].values()) == 6


def test_gzipped_and_crlf_text(tmp_path: Path) -> None:
    (tmp_path / "a.en.gz").write_bytes(gzip.compress(b"\xef\xbb\xbfone\r\ntwo\r\n"))
    (tmp_path / "a.kk").write_bytes("бір\nекі".encode())
    source = {"kind": "text", "name": "gz", "files": {"en": str(tmp_path / "a.en.gz"), "kk": str(tmp_path / "a.kk")}}
    run = run_corpus(tmp_path, [source])
    assert run.groups() == {"gz:1": {"eng_Latn": "one", "kaz_Cyrl": "бір"}, "gz:2": {"eng_Latn": "two", "kaz_Cyrl": "екі"}}


def test_mismatched_line_counts_fail_before_any_shard_file(tmp_path: Path) -> None:
    en = write_lines(tmp_path / "m.en", [f"line {i}" for i in range(100)])
    kk = write_lines(tmp_path / "m.kk", [f"жол {i}" for i in range(99)])
    store = ArtifactStore(tmp_path / "store")
    config = CorpusConfig.model_validate(
        {"sources": [{"kind": "text", "name": "m", "files": {"en": en, "kk": kk}}], "read_batch_lines": 10}
    )
    with pytest.raises(SourceError) as info:
        run_stage(store, CORPUS_STAGE, config, {})
    message = str(info.value)
    assert f"{en}: 100 lines" in message and f"{kk}: 99 lines" in message
    assert parquet_files(tmp_path / "store") == []
    assert store.list_manifests("corpus") == []


def test_rerun_is_cached_and_a_changed_file_changes_the_key(tmp_path: Path) -> None:
    source = text_source(tmp_path, {"en": ["a b", "c d"]})
    first = run_corpus(tmp_path, [source])
    again = run_corpus(tmp_path, [source])
    assert again.manifest.key == first.manifest.key
    assert again.manifest.created_at == first.manifest.created_at  # not rebuilt
    write_lines(Path(source["files"]["en"]), ["a b", "c d", "e f"])
    changed = run_corpus(tmp_path, [source])
    assert changed.manifest.key != first.manifest.key
    assert changed.texts() == ["a b", "c d", "e f"]


# ------------------------------------------------------------------ filters


def test_empty_and_whitespace_lines_are_dropped(tmp_path: Path) -> None:
    lines = ["hello world", "", "   ", "good day", "\t", "\u3000", " padded "]
    run = run_corpus(tmp_path, [text_source(tmp_path, {"en": lines})])
    assert run.texts() == ["hello world", "good day", "padded"]
    assert run.dropped == {"empty": 4}
    assert run.manifest.rows_in == 7


def test_invalid_utf8_is_dropped_and_counted(tmp_path: Path) -> None:
    mono = text_source(tmp_path, {"en": [b"ok one", b"\xff\xfe", b"ok two", b"half \xe2\x82"]}, name="mono")
    pair = text_source(tmp_path, {"en": ["x y", "z w"], "kk": [b"\xff", "жақсы".encode()]}, name="pair")
    run = run_corpus(tmp_path, [mono, pair])
    assert run.texts() == ["ok one", "ok two", "z w", "жақсы"]
    # the English row of the broken pair cannot stand alone: its group is incomplete
    assert run.dropped == {"invalid_utf8": 3, "group_incomplete": 1}


def test_word_limits_and_unspaced_scripts(tmp_path: Path) -> None:
    lines = ["one", "one two", "one two three", "one two three four", "one two three four five", "1 2 3 4 5 6"]
    run = run_corpus(tmp_path, [text_source(tmp_path, {"en": lines})], filters={"min_words": 2, "max_words": 5})
    assert run.texts() == lines[1:5]
    assert run.dropped == {"too_short": 1, "too_long": 1}

    # Japanese has no spaces: a one-"word" sentence is exempt unless listed in word_filter_langs
    pair = {
        "en": ["a long enough english sentence", "another long english sentence"],
        "ja": ["これはペンです。", "今日は 良い 天気 です"],
    }
    exempt = run_corpus(tmp_path, [text_source(tmp_path, pair, name="ja")], store_dir="s2", filters={"min_words": 3})
    assert exempt.dropped == {} and len(exempt.groups()) == 2
    listed = run_corpus(
        tmp_path,
        [text_source(tmp_path, pair, name="ja")],
        store_dir="s3",
        filters={"min_words": 3, "word_filter_langs": ["ja"]},
    )
    assert listed.dropped == {"too_short": 1, "group_incomplete": 1}
    assert listed.groups() == {"ja:2": {"eng_Latn": pair["en"][1], "jpn_Jpan": "今日は 良い 天気 です"}}
    # listing languages means only those are word-filtered: English one-worders pass then
    only_ja = run_corpus(
        tmp_path,
        [text_source(tmp_path, {"en": ["word"], "ja": ["一 二 三"]}, name="only")],
        store_dir="s4",
        filters={"min_words": 3, "word_filter_langs": ["jpn_Jpan"]},
    )
    assert only_ja.dropped == {} and only_ja.texts() == ["word", "一 二 三"]


def test_max_chars(tmp_path: Path) -> None:
    lines = ["short", "exactly 10", "this is definitely longer than ten", "ж" * 11]
    run = run_corpus(tmp_path, [text_source(tmp_path, {"kk": lines})], filters={"max_chars": 10})
    assert run.texts() == ["short", "exactly 10"]
    assert run.dropped == {"too_long": 2}


@pytest.mark.parametrize("batch", [1, 2, 65_536])
def test_exact_duplicates(tmp_path: Path, batch: int) -> None:
    lines = ["", "", "a b", "c d", "a b", " a b ", "e f", "c d"]
    source = text_source(tmp_path, {"en": lines})
    deduped = run_corpus(tmp_path, [source], read_batch_lines=batch)
    assert deduped.texts() == ["a b", "c d", "e f"]
    assert [r["group_id"] for r in deduped.rows] == ["src:3", "src:4", "src:7"]  # first occurrence wins
    assert deduped.dropped == {"empty": 2, "duplicate": 3}
    kept = run_corpus(tmp_path, [source], store_dir="s2", read_batch_lines=batch, filters={"dedupe": False})
    assert kept.texts() == ["a b", "c d", "a b", "a b", "e f", "c d"]
    assert kept.dropped == {"empty": 2}


def test_duplicate_groups_need_every_language_equal(tmp_path: Path) -> None:
    source = text_source(tmp_path, {"en": ["x", "x", "x", "y"], "kk": ["а", "а", "б", "а"]})
    run = run_corpus(tmp_path, [source])
    assert list(run.groups()) == ["src:1", "src:3", "src:4"]
    assert run.dropped == {"duplicate": 2}  # one group of two rows


def test_max_length_ratio(tmp_path: Path) -> None:
    source = text_source(
        tmp_path,
        {
            "en": ["abcd efgh", "twelve chars", "short", "tiny"],
            "kk": ["абвг деёж", "бес", "а" * 10, "x" * 9],
            "ja": ["あいう", "一二三四五六", "五文字です", "短"],
        },
    )
    run = run_corpus(tmp_path, [source], filters={"max_length_ratio": 2.0, "min_langs_per_group": 2})
    # group 1: 9/9 chars and 9/3 = 3.0 > 2: ja dropped; group 2: 12/3 = 4 > 2: kk dropped, ja 12/6 = 2 kept
    # group 3: 10/5 = 2 kept, 5/5 kept; group 4: 9/4 > 2 and 4/1 > 2: both dropped, English alone is incomplete
    assert run.groups() == {
        "src:1": {"eng_Latn": "abcd efgh", "kaz_Cyrl": "абвг деёж"},
        "src:2": {"eng_Latn": "twelve chars", "jpn_Jpan": "一二三四五六"},
        "src:3": {"eng_Latn": "short", "kaz_Cyrl": "а" * 10, "jpn_Jpan": "五文字です"},
    }
    assert run.dropped == {"length_ratio": 4, "group_incomplete": 1}


def test_min_langs_per_group(tmp_path: Path) -> None:
    columns: dict[str, list[str | bytes]] = {
        "en": ["one", "two", "three", ""],
        "kk": ["бір", "", "үш", ""],
        "te": ["ఒకటి", "రెండు", "", "నాలుగు"],
    }
    strict = run_corpus(tmp_path, [text_source(tmp_path, columns)])
    assert list(strict.groups()) == ["src:1"]
    assert strict.dropped == {"empty": 4, "group_incomplete": 5}
    loose = run_corpus(tmp_path, [text_source(tmp_path, columns)], store_dir="s2", filters={"min_langs_per_group": 2})
    assert loose.groups() == {
        "src:1": {"eng_Latn": "one", "kaz_Cyrl": "бір", "tel_Telu": "ఒకటి"},
        "src:2": {"eng_Latn": "two", "tel_Telu": "రెండు"},
        "src:3": {"eng_Latn": "three", "kaz_Cyrl": "үш"},
    }
    assert loose.dropped == {"empty": 4, "group_incomplete": 1}
    assert loose.manifest.metrics["rows_by_lang"] == {"eng_Latn": 3, "kaz_Cyrl": 2, "tel_Telu": 2}


def test_every_filter_at_once_keeps_the_invariant(tmp_path: Path) -> None:
    en = ["", "ok sentence here", "ok sentence here", "x", "w " * 30, "fine words are here", "long " * 5]
    kk = ["а", "жақсы сөйлем", "жақсы сөйлем", "бір екі", "бір екі үш", b"\xff", "қысқа"]
    run = run_corpus(
        tmp_path,
        [text_source(tmp_path, {"en": en, "kk": kk})],
        filters={"min_words": 2, "max_words": 20, "max_chars": 200, "max_length_ratio": 4.0},
        read_batch_lines=3,
    )
    assert run.groups() == {"src:2": {"eng_Latn": "ok sentence here", "kaz_Cyrl": "жақсы сөйлем"}}
    assert run.dropped == {
        "empty": 1,  # group 1
        "too_short": 3,  # "а" (group 1), "x" (4), "қысқа" (7): the first failing check names the reason
        "length_ratio": 2,  # "бір екі" vs "x" (7 > 4), "бір екі үш" vs 59 chars of English
        "too_long": 1,  # 30 English words
        "invalid_utf8": 1,
        "group_incomplete": 2,  # the English rows of groups 6 and 7
        "duplicate": 2,  # group 3
    }
    assert run.manifest.rows_in == 14


# ------------------------------------------------------------------ other source kinds


def test_tsv_with_header_by_name_and_index(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_bytes(
        b"id\ten\tkk\r\n"
        b"1\thello\t\xd1\x81\xd3\x99\xd0\xbb\xd0\xb5\xd0\xbc\r\n"
        b"2\tmalformed row\r\n"
        b"3\tbad cell\t\xff\xfe\r\n"
        b"4\tx\ty\tz\r\n"
        b"5\tworld\t\xd3\x99\xd0\xbb\xd0\xb5\xd0\xbc\r\n"
    )
    source = {"kind": "tsv", "name": "tsv", "path": str(path), "columns": {"en": "en", "kk": 2}}
    run = run_corpus(tmp_path, [source])
    assert run.groups() == {
        "tsv:2": {"eng_Latn": "hello", "kaz_Cyrl": "сәлем"},
        "tsv:4": {"eng_Latn": "world", "kaz_Cyrl": "әлем"},
    }
    assert run.dropped == {"malformed_row": 4, "invalid_utf8": 1, "group_incomplete": 1}
    assert run.manifest.rows_in == 10


def test_tsv_without_header(tmp_path: Path) -> None:
    path = tmp_path / "plain.tsv"
    path.write_text("hello\tсәлем\nNA\tжоқ\n\tбос\n")
    source = {"kind": "tsv", "name": "plain", "path": str(path), "header": False, "columns": {"eng_Latn": 0, "kaz_Cyrl": 1}}
    run = run_corpus(tmp_path, [source])
    assert run.groups() == {
        "plain:1": {"eng_Latn": "hello", "kaz_Cyrl": "сәлем"},
        "plain:2": {"eng_Latn": "NA", "kaz_Cyrl": "жоқ"},
    }
    assert run.dropped == {"empty": 1, "group_incomplete": 1}
    bad = {**source, "columns": {"en": 5}}
    with pytest.raises(SourceError, match="no column 5"):
        run_corpus(tmp_path, [bad], store_dir="s2")


def test_parquet_wide_source(tmp_path: Path) -> None:
    table = pa.table(
        {
            "english": ["one", "two", None, "four"],
            "kazakh": pa.array([b"\xd0\xb1\xd1\x96\xd1\x80", b"\xff", b"\xd2\xaf\xd1\x88", None], pa.binary()),
            "other": [1, 2, 3, 4],
        }
    )
    pq.write_table(table, tmp_path / "wide.parquet")
    source = {
        "kind": "parquet",
        "name": "pq",
        "path": str(tmp_path / "wide.parquet"),
        "columns": {"en": "english", "kk": "kazakh"},
    }
    run = run_corpus(tmp_path, [source])
    assert run.groups() == {"pq:0": {"eng_Latn": "one", "kaz_Cyrl": "бір"}}
    assert run.dropped == {"missing": 3, "group_incomplete": 3}


def test_parquet_dataset_directory(tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    (dataset / "b").mkdir(parents=True)
    pq.write_table(pa.table({"en": ["one", "two"], "kk": ["бір", "екі"]}), dataset / "a.parquet")
    pq.write_table(pa.table({"en": ["three"], "kk": ["үш"]}), dataset / "b" / "c.parquet")
    source = {"kind": "parquet", "name": "ds", "path": str(dataset), "columns": {"en": "en", "kk": "kk"}}
    run = run_corpus(tmp_path, [source])
    assert [g["eng_Latn"] for g in run.groups().values()] == ["one", "two", "three"]
    assert list(run.groups()) == ["ds:0", "ds:1", "ds:2"]  # rows numbered across the files
    # rewriting a part in place changes the key (a directory's own mtime would not)
    pq.write_table(pa.table({"en": ["three", "four"], "kk": ["үш", "төрт"]}), dataset / "b" / "c.parquet")
    again = run_corpus(tmp_path, [source])
    assert again.manifest.key != run.manifest.key
    assert len(again.groups()) == 4


def test_tatoeba_layout_one_shard_per_pair(tmp_path: Path) -> None:
    data = tmp_path / "tatoeba"
    data.mkdir()
    write_lines(data / "tatoeba.kaz-eng.kaz", ["Сәлем.", "Рақмет.", "Иә."])
    write_lines(data / "tatoeba.kaz-eng.eng", ["Hello.", "Thanks.", "Yes."])
    write_lines(data / "tatoeba.tel-eng.tel", ["నమస్కారం.", "ధన్యవాదాలు."])
    write_lines(data / "tatoeba.tel-eng.eng", ["Hello.", "Thank you."])
    source = {"kind": "tatoeba", "name": "tatoeba", "path": str(data), "langs": ["kaz", "tel"]}
    run = run_corpus(tmp_path, [source])
    assert run.manifest.shards == ["tatoeba-kaz", "tatoeba-tel"]
    groups = run.groups()
    assert len(groups) == 5  # group ids stay unique although both pairs have a line 1
    assert sorted(frozenset(g) for g in groups.values()) == sorted(
        [frozenset({"eng_Latn", "kaz_Cyrl"})] * 3 + [frozenset({"eng_Latn", "tel_Telu"})] * 2
    )
    assert {"eng_Latn": "Hello.", "kaz_Cyrl": "Сәлем."} in groups.values()
    assert {"eng_Latn": "Hello.", "tel_Telu": "నమస్కారం."} in groups.values()
    assert run.manifest.metrics["rows_by_lang"] == {"eng_Latn": 5, "kaz_Cyrl": 3, "tel_Telu": 2}
    # sample applies per pair
    sampled = run_corpus(tmp_path, [{**source, "sample": 1}], store_dir="s2")
    assert sampled.manifest.metrics["groups"] == 2
    assert sampled.dropped == {"not_sampled": 6}


def corpus_key(sources: list[dict[str, Any]], **settings: Any) -> str:
    from tasks.stage import source_fingerprints, stage_key

    config = CorpusConfig.model_validate({"sources": sources, **settings})
    return stage_key(CORPUS_STAGE, config, {}, source_fingerprints(CORPUS_STAGE, config))


def test_keys_follow_content_not_paths(tmp_path: Path) -> None:
    """Same bytes elsewhere: same key; language order, file names inside a folder and a renamed
    part of a Parquet dataset still count."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
    a = text_source(tmp_path / "a", {"en": ["one", "two"], "kk": ["бір", "екі"]})
    b = text_source(tmp_path / "b", {"en": ["one", "two"], "kk": ["бір", "екі"]})
    assert a["files"] != b["files"] and corpus_key([a]) == corpus_key([b])
    swapped = {**a, "files": {"kk": a["files"]["kk"], "en": a["files"]["en"]}}
    assert corpus_key([swapped]) != corpus_key([a])  # the first language is the pivot
    assert corpus_key([{**a, "files": {"en": a["files"]["kk"], "kk": a["files"]["en"]}}]) != corpus_key([a])
    dataset = tmp_path / "ds"
    dataset.mkdir()
    pq.write_table(pa.table({"en": ["x"], "kk": ["y"]}), dataset / "a.parquet")
    pq.write_table(pa.table({"en": ["z"], "kk": ["w"]}), dataset / "b.parquet")
    source = {"kind": "parquet", "name": "ds", "path": str(dataset), "columns": {"en": "en", "kk": "kk"}}
    before = corpus_key([source])
    (dataset / "a.parquet").rename(dataset / "c.parquet")  # now read after b.parquet
    assert corpus_key([source]) != before


@pytest.fixture
def http_dir(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A plain HTTP server on 127.0.0.1 serving a temporary directory."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_opus_moses_zip_over_http(tmp_path: Path, http_dir: tuple[str, Path]) -> None:
    base, root = http_dir
    with zipfile.ZipFile(root / "x.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README", "not a corpus file")
        archive.writestr("corpus.en-kk.en", "Hello.\nThank you.\nSame\n\nSame\n")
        archive.writestr("corpus.en-kk.kk", "Сәлем.\r\nРақмет.\r\nБірдей\r\nбос\r\nБірдей\r\n")
        archive.writestr("corpus.en-kk.ids", "1\n2\n3\n4\n5\n")
    download_dir = tmp_path / "downloads"
    source = {"kind": "opus_moses", "name": "opus", "url": f"{base}/x.zip", "langs": ["en", "kk"]}
    run = run_corpus(tmp_path, [source], download_dir=str(download_dir))
    assert run.groups() == {
        "opus:1": {"eng_Latn": "Hello.", "kaz_Cyrl": "Сәлем."},
        "opus:2": {"eng_Latn": "Thank you.", "kaz_Cyrl": "Рақмет."},
        "opus:3": {"eng_Latn": "Same", "kaz_Cyrl": "Бірдей"},
    }
    assert run.dropped == {"empty": 1, "group_incomplete": 1, "duplicate": 2}
    assert [p.name for p in download_dir.rglob("*.zip")] == ["x.zip"]  # fetched into download_dir
    zip_sha256 = hashlib.sha256((root / "x.zip").read_bytes()).hexdigest()
    assert run.manifest.metrics["downloads"] == {
        f"{base}/x.zip": {"sha256": zip_sha256, "bytes": (root / "x.zip").stat().st_size}
    }
    # the pair may be listed in either order; the first listed is the length-ratio pivot
    reverse = run_corpus(tmp_path, [{**source, "langs": ["kk", "en"]}], store_dir="s2", download_dir=str(download_dir))
    assert reverse.texts()[:2] == ["Сәлем.", "Hello."]
    # a mismatch inside the zip names both members
    with zipfile.ZipFile(root / "bad.zip", "w") as archive:
        archive.writestr("c.en-kk.en", "a\nb\n")
        archive.writestr("c.en-kk.kk", "а\n")
    with pytest.raises(SourceError, match=r"c\.en-kk\.en: 2 lines.*c\.en-kk\.kk: 1 lines"):
        run_corpus(tmp_path, [{**source, "url": f"{base}/bad.zip"}], store_dir="s3", download_dir=str(download_dir))


def test_cldr_source(tmp_path: Path) -> None:
    run = run_corpus(tmp_path, [{"kind": "cldr", "name": "cldr", "langs": ["eng_Latn", "kk"]}])
    groups = run.groups()
    assert len(groups) > 500
    assert all(set(g) == {"eng_Latn", "kaz_Cyrl"} for g in groups.values())
    assert groups["cldr:languages:kk"] == {"eng_Latn": "Kazakh", "kaz_Cyrl": "қазақ тілі"}
    assert run.manifest.rows_in == 2 * (len(groups) + sum(run.dropped.values()) // 2)


def test_several_sources_in_one_run(tmp_path: Path) -> None:
    a = text_source(tmp_path, {"en": ["a b", "c d"]}, name="a")
    b = text_source(tmp_path, {"en": ["c d", "e f"]}, name="b")  # duplicates are per source
    run = run_corpus(tmp_path, [a, b])
    assert run.manifest.shards == ["a", "b"]
    assert [(r["source"], r["text"]) for r in run.rows] == [("a", "a b"), ("a", "c d"), ("b", "c d"), ("b", "e f")]


# ------------------------------------------------------------------ config errors


def config(sources: list[dict[str, Any]], **settings: Any) -> CorpusConfig:
    return CorpusConfig.model_validate({"sources": sources, **settings})


def test_unknown_language_code_is_named() -> None:
    with pytest.raises(ValidationError, match="qqx"):
        config([{"kind": "text", "name": "a", "files": {"qqx": "a.txt"}}])
    with pytest.raises(ValidationError, match="zzz_Latn"):
        config([{"kind": "multiway_dir", "name": "a", "path": ".", "langs": ["eng_Latn", "zzz_Latn"]}])
    with pytest.raises(ValidationError, match="xyz"):
        config([{"kind": "text", "name": "a", "files": {"en": "a"}}], filters={"word_filter_langs": ["xyz"]})


def test_unknown_key_in_a_source() -> None:
    with pytest.raises(ValidationError) as info:
        config([{"kind": "text", "name": "a", "files": {"en": "a.txt"}, "sampel": 10}])
    assert "sampel" in str(info.value)
    with pytest.raises(ValidationError, match="filetrs"):
        config([{"kind": "text", "name": "a", "files": {"en": "a.txt"}}], filetrs={})


def test_duplicate_source_names() -> None:
    with pytest.raises(ValidationError, match=r"repeated: \['a'\]"):
        config([{"kind": "text", "name": "a", "files": {"en": "x"}}, {"kind": "cldr", "name": "a", "langs": ["en", "kk"]}])


def test_max_words_below_min_words() -> None:
    with pytest.raises(ValidationError, match=r"max_words \(3\) is below min_words \(5\)"):
        config([{"kind": "text", "name": "a", "files": {"en": "x"}}], filters={"min_words": 5, "max_words": 3})
    config([{"kind": "text", "name": "a", "files": {"en": "x"}}], filters={"min_words": 3, "max_words": 3})


def test_other_config_errors() -> None:
    text = {"kind": "text", "name": "a", "files": {"en": "x"}}
    with pytest.raises(ValidationError, match="listed twice"):
        config([{**text, "files": {"en": "x", "eng_Latn": "y"}}])
    with pytest.raises(ValidationError):
        config([{**text, "sample": 0}])
    with pytest.raises(ValidationError, match="kind"):
        config([{**text, "kind": "csv"}])
    with pytest.raises(ValidationError, match="English"):
        config([{"kind": "tatoeba", "name": "t", "path": ".", "langs": ["kaz", "eng"]}])
    with pytest.raises(ValidationError, match="code"):
        config([{"kind": "multiway_dir", "name": "m", "path": ".", "langs": ["en"], "pattern": "dev.txt"}])
    with pytest.raises(ValidationError):
        config([])


# ------------------------------------------------------------------ FLORES-200 (real data)

FLORES_LANGS = ["eng_Latn", "kaz_Cyrl", "tel_Telu", "jpn_Jpan", "zho_Hans"]
needs_flores = pytest.mark.skipif(
    not FLORES_DIR.is_dir(), reason="../shared/data/flores200-dev not present (a new user's clone has no ../shared)"
)


def flores_source(**extra: Any) -> dict[str, Any]:
    return {"kind": "multiway_dir", "name": "flores", "path": str(FLORES_DIR), "langs": FLORES_LANGS, **extra}


@needs_flores
def test_flores_multiway_groups(tmp_path: Path) -> None:
    run = run_corpus(tmp_path, [flores_source()])
    groups = run.groups()
    assert len(groups) == 997 and run.manifest.metrics["groups"] == 997
    assert all(set(g) == set(FLORES_LANGS) for g in groups.values())
    assert run.manifest.rows_out == 997 * 5 and run.dropped == {}
    first_en = (FLORES_DIR / "eng_Latn.dev").read_text(encoding="utf-8").splitlines()[0].strip()
    first_kk = (FLORES_DIR / "kaz_Cyrl.dev").read_text(encoding="utf-8").splitlines()[0].strip()
    assert groups["flores:1"]["eng_Latn"] == first_en
    assert groups["flores:1"]["kaz_Cyrl"] == first_kk
    dev = run.manifest.metrics["rows_by_split"]["dev"] / 5
    assert 50 <= dev <= 150  # 10 % of 997, give or take


@needs_flores
def test_flores_english_min_words(tmp_path: Path) -> None:
    english = (FLORES_DIR / "eng_Latn.dev").read_text(encoding="utf-8").splitlines()
    short = sum(1 for line in english if len(line.split()) < 10)
    assert 0 < short < 997
    run = run_corpus(tmp_path, [flores_source()], filters={"min_words": 10, "word_filter_langs": ["eng_Latn"]})
    assert run.dropped == {"too_short": short, "group_incomplete": 4 * short}
    assert len(run.groups()) == 997 - short
    assert all(len(g["eng_Latn"].split()) >= 10 for g in run.groups().values())


@needs_flores
def test_flores_sample(tmp_path: Path) -> None:
    run = run_corpus(tmp_path, [flores_source(sample=300)])
    groups = run.groups()
    assert len(groups) == 300
    assert all(set(g) == set(FLORES_LANGS) for g in groups.values())
    assert run.dropped == {"not_sampled": 697 * 5}
    full = run_corpus(tmp_path, [flores_source()], store_dir="full").groups()
    assert all(full[gid] == g for gid, g in groups.items())


def test_multiway_dir_files_must_name_listed_codes_and_plain_file_names() -> None:
    source = {"kind": "multiway_dir", "name": "ntrex", "path": ".", "langs": ["eng", "kaz"], "pattern": "ref.{code}.txt"}
    assert config([{**source, "files": {"eng": "src.eng.txt"}}]).sources[0].file_name("eng") == "src.eng.txt"
    assert config([{**source, "files": {"eng": "src.eng.txt"}}]).sources[0].file_name("kaz") == "ref.kaz.txt"
    with pytest.raises(ValidationError, match="not in langs"):
        config([{**source, "files": {"tel": "x.txt"}}])
    with pytest.raises(ValidationError, match="plain file names"):
        config([{**source, "files": {"eng": "../src.eng.txt"}}])
