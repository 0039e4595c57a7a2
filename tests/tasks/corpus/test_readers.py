"""tasks.corpus.readers on real bytes: line splitting, UTF-8 validation, chunking, compression."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.corpus.readers import (
    UTF8_BOM,
    SourceError,
    count_lines,
    iter_line_chunks,
    iter_lines,
    open_binary,
    read_aligned_lines,
    read_multiway_dir,
    read_parquet,
    read_text_files,
    read_tsv,
)


def chunk_lines(data: bytes, chunk_bytes: int = 1 << 20) -> list[str | None]:
    return [x for array in iter_line_chunks(io.BytesIO(data), chunk_bytes) for x in array.to_pylist()]


def batched(data: bytes, batch_lines: int = 4) -> list[list[str | None]]:
    return [array.to_pylist() for array in iter_lines(io.BytesIO(data), batch_lines)]


def flat(data: bytes, batch_lines: int = 4) -> list[str | None]:
    return [x for batch in batched(data, batch_lines) for x in batch]


def n_lines(data: bytes) -> int:
    return count_lines(io.BytesIO(data))


# ------------------------------------------------------------------ iter_lines


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"one\r\ntwo\r\nthree\r\n", ["one", "two", "three"]),  # CRLF
        (b"one\ntwo\r\nthree\nfour\r\n", ["one", "two", "three", "four"]),  # mixed
        (UTF8_BOM + b"first\nsecond\n", ["first", "second"]),  # BOM only at the start is removed
        (b"a\nb\nlast without newline", ["a", "b", "last without newline"]),
        (b"a\r\nlast\r", ["a", "last"]),
        (b"", []),
        (b"\n", [""]),
        (b"\n\n\r\n", ["", "", ""]),
        (UTF8_BOM, []),  # a file holding only a BOM has no lines
        (UTF8_BOM + b"\n", [""]),
        (b"keep trailing spaces  \n  and leading\n", ["keep trailing spaces  ", "  and leading"]),
        (b"inner\rcarriage return\n", ["inner\rcarriage return"]),  # only newlines split lines
        (b"x\n" + UTF8_BOM + b"y\n", ["x", "\ufeffy"]),  # a BOM later in the file is text
        ("қазақ тілі\nతెలుగు\n日本語\n".encode(), ["қазақ тілі", "తెలుగు", "日本語"]),
    ],
)
def test_iter_lines_cases(data: bytes, expected: list[str]) -> None:
    assert flat(data) == expected
    assert n_lines(data) == len(expected)
    for chunk_bytes in (1, 2, 3, 4, 5, 7, 64):
        assert chunk_lines(data, chunk_bytes) == expected, chunk_bytes


def test_batches_are_exactly_batch_lines_long() -> None:
    data = b"".join(b"line %d\n" % i for i in range(23))
    batches = batched(data, 5)
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    assert [x for b in batches for x in b] == [f"line {i}" for i in range(23)]
    assert [len(b) for b in batched(data, 23)] == [23]
    assert [len(b) for b in batched(data, 1000)] == [23]
    assert [len(b) for b in batched(data, 1)] == [1] * 23
    assert batched(b"", 5) == []


def test_batches_across_many_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches are cut the same whether a chunk holds many batches or a batch spans many chunks."""
    from tasks.corpus import readers

    data = b"".join(b"sentence number %d\n" % i for i in range(5000))
    expected = [f"sentence number {i}" for i in range(5000)]
    for chunk_bytes in (7, 100, 4096, 1 << 20):
        monkeypatch.setattr(readers, "CHUNK_BYTES", chunk_bytes)
        for batch_lines in (1, 3, 64, 1000, 4999, 5000, 7000):
            batches = [a.to_pylist() for a in iter_lines(io.BytesIO(data), batch_lines)]
            assert [x for b in batches for x in b] == expected
            assert all(len(b) == batch_lines for b in batches[:-1])
            assert 0 < len(batches[-1]) <= batch_lines


def test_very_long_line() -> None:
    long = "ж" * 100_000
    data = f"short\n{long}\nafter\n".encode()
    assert flat(data) == ["short", long, "after"]
    assert chunk_lines(data, 1000) == ["short", long, "after"]
    assert n_lines(data) == 3


def test_invalid_utf8_lines_become_null_and_neighbours_survive() -> None:
    data = b"good one\n\xff\xfe broken\nstill good\r\ntruncated \xe2\x82\nok \xe2\x82\xac\n\xc0\xaf\n"
    expected = ["good one", None, "still good", None, "ok €", None]
    assert flat(data) == expected
    assert n_lines(data) == len(expected)
    for chunk_bytes in (1, 3, 8, 1 << 20):
        assert chunk_lines(data, chunk_bytes) == expected


def test_invalid_line_in_one_chunk_leaves_other_chunks_on_the_fast_path() -> None:
    good = b"".join(b"line %d\n" % i for i in range(100))
    data = good + b"bad \xff\n" + good
    out = chunk_lines(data, 64)
    assert len(out) == 201
    assert out[100] is None
    assert out[:100] == out[101:] == [f"line {i}" for i in range(100)]


# hypothesis: any mix of lines, separators, BOM and final newline, any chunk size
valid_line = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)
invalid_line = st.sampled_from([b"\xff", b"a\xfe", b"\xe2\x82", b"\xc0\xaf", b"x\xed\xa0\x80y"])
line = st.one_of(valid_line.map(lambda s: s.encode()), invalid_line)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(line, max_size=30),
    seps=st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=30, max_size=30),
    bom=st.booleans(),
    final_newline=st.booleans(),
    chunk_bytes=st.integers(1, 40),
    batch_lines=st.integers(1, 10),
)
def test_lines_property(
    lines: list[bytes], seps: list[bytes], bom: bool, final_newline: bool, chunk_bytes: int, batch_lines: int
) -> None:
    body = b"".join(text + sep for text, sep in zip(lines, seps))
    if lines and not final_newline:
        body = body[: -len(seps[len(lines) - 1])]
        if lines[-1] == b"":  # an empty last line without its newline is no line at all
            lines = lines[:-1]
    data = (UTF8_BOM if bom else b"") + body

    def decode(raw: bytes) -> str | None:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None

    expected = [decode(raw) for raw in lines]
    assert chunk_lines(data, chunk_bytes) == expected
    assert chunk_lines(data) == expected
    assert flat(data, batch_lines) == expected
    assert n_lines(data) == len(expected)


def test_count_lines_with_small_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.corpus import readers

    monkeypatch.setattr(readers, "CHUNK_BYTES", 2)
    for data in (UTF8_BOM + b"a\nb", UTF8_BOM, b"a\nb\n", b"ab", b""):
        assert count_lines(io.BytesIO(data)) == len(flat(data)), data


# ------------------------------------------------------------------ files


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)])
def test_open_binary_decompresses_by_extension(tmp_path: Path, suffix: str, compress) -> None:
    data = UTF8_BOM + "".join(f"жол {i}\r\n" for i in range(1000)).encode() + b"\xff\nlast"
    path = tmp_path / f"lines.txt{suffix}"
    path.write_bytes(compress(data))
    with open_binary(str(path)) as stream:
        out = [x for a in iter_lines(stream, 300) for x in a.to_pylist()]
    assert out == [f"жол {i}" for i in range(1000)] + [None, "last"]
    with open_binary(str(path)) as stream:
        assert count_lines(stream) == 1002
    with open_binary(path.as_uri()) as stream:  # file:// URLs too
        assert count_lines(stream) == 1002


def test_read_text_files_zips_aligned_files(tmp_path: Path) -> None:
    (tmp_path / "a.en").write_bytes(b"one\ntwo\nthree\n")
    (tmp_path / "a.kk").write_bytes(UTF8_BOM + "бір\r\nекі\r\n".encode() + b"\xff\r\n")
    batches = list(read_text_files({"en": str(tmp_path / "a.en"), "kk": str(tmp_path / "a.kk")}, 2))
    assert [b.null_reason for b in batches] == ["invalid_utf8", "invalid_utf8"]
    rows = [r for b in batches for r in b.frame.to_dicts()]
    assert rows == [
        {"locator": "1", "eng_Latn": "one", "kaz_Cyrl": "бір"},
        {"locator": "2", "eng_Latn": "two", "kaz_Cyrl": "екі"},
        {"locator": "3", "eng_Latn": "three", "kaz_Cyrl": None},
    ]


def test_read_aligned_lines_reports_both_counts_on_mismatch() -> None:
    streams = [
        ("left.txt", "en", io.BytesIO(b"".join(b"%d\n" % i for i in range(10)))),
        ("right.txt", "kk", io.BytesIO(b"".join(b"%d\n" % i for i in range(7)))),
    ]
    with pytest.raises(SourceError) as info:
        list(read_aligned_lines(streams, 3))
    assert "left.txt: 10 lines" in str(info.value)
    assert "right.txt: 7 lines" in str(info.value)


def test_read_text_files_checks_counts_before_reading(tmp_path: Path) -> None:
    (tmp_path / "x.en").write_bytes(b"a\nb\nc\n")
    (tmp_path / "x.kk").write_bytes(b"a\nb")
    batches = read_text_files({"en": str(tmp_path / "x.en"), "kk": str(tmp_path / "x.kk")}, 100)
    with pytest.raises(SourceError, match=r"x\.en: 3 lines.*x\.kk: 2 lines"):
        next(batches)


def test_read_multiway_dir_names_missing_files(tmp_path: Path) -> None:
    (tmp_path / "eng_Latn.dev").write_text("a\n")
    with pytest.raises(SourceError, match="kaz_Cyrl.dev"):
        next(read_multiway_dir(str(tmp_path), ["eng_Latn", "kaz_Cyrl"], "{code}.dev", 10))


def test_read_tsv_counts_malformed_rows_and_nulls_invalid_cells(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_bytes(
        UTF8_BOM + b"id\ten\tkk\n1\thello\t\xd1\x81\xd3\x99\xd0\xbb\xd0\xb5\xd0\xbc\n2\tonly two\n3\tbad\t\xff\n4\tNA\t\n"
    )
    malformed = [0]
    batches = list(read_tsv(str(path), {"en": "en", "kk": 2}, True, 100, malformed))
    rows = [r for b in batches for r in b.frame.to_dicts()]
    assert malformed == [1]
    assert {b.null_reason for b in batches} == {"invalid_utf8"}
    assert rows == [
        {"locator": "2", "eng_Latn": "hello", "kaz_Cyrl": "сәлем"},
        {"locator": "3", "eng_Latn": "bad", "kaz_Cyrl": None},
        {"locator": "4", "eng_Latn": "NA", "kaz_Cyrl": ""},  # "NA" is text, an empty cell is ""
    ]
    with pytest.raises(SourceError, match="no column 'fr'"):
        list(read_tsv(str(path), {"fr": "fr"}, True, 100, [0]))


def test_read_parquet_file_and_directory(tmp_path: Path) -> None:
    table = pa.table({"english": ["a", None, "c"], "kazakh": [b"\xd0\xb0", b"\xff", None]})
    pq.write_table(table, tmp_path / "one.parquet")
    rows = [
        r for b in read_parquet(str(tmp_path / "one.parquet"), {"en": "english", "kk": "kazakh"}, 2) for r in b.frame.to_dicts()
    ]
    assert rows == [
        {"locator": "0", "eng_Latn": "a", "kaz_Cyrl": "а"},
        {"locator": "1", "eng_Latn": None, "kaz_Cyrl": None},
        {"locator": "2", "eng_Latn": "c", "kaz_Cyrl": None},
    ]
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    pq.write_table(pa.table({"english": ["p0", "p1"]}), dataset / "part-0.parquet")
    pq.write_table(pa.table({"english": ["p2"]}), dataset / "part-1.parquet")
    rows = [r for b in read_parquet(str(dataset), {"en": "english"}, 10) for r in b.frame.to_dicts()]
    assert rows == [{"locator": str(i), "eng_Latn": f"p{i}"} for i in range(3)]
    with pytest.raises(SourceError, match="no columns"):
        list(read_parquet(str(tmp_path / "one.parquet"), {"en": "nope"}, 2))


def test_read_multiway_dir_takes_named_files_for_codes_off_the_pattern(tmp_path: Path) -> None:
    # NTREX-128: every language is newstest2019-ref.{code}.txt except English, the source side
    (tmp_path / "newstest2019-src.eng.txt").write_text("one\ntwo\n")
    (tmp_path / "newstest2019-ref.kaz.txt").write_text("бір\nекі\n")
    batches = list(
        read_multiway_dir(str(tmp_path), ["eng", "kaz"], "newstest2019-ref.{code}.txt", 10, {"eng": "newstest2019-src.eng.txt"})
    )
    rows = [r for b in batches for r in b.frame.to_dicts()]
    assert [(r["eng_Latn"], r["kaz_Cyrl"]) for r in rows] == [("one", "бір"), ("two", "екі")]
