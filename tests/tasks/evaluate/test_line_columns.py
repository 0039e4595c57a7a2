"""Tatoeba and BUCC lines held as Arrow columns (issue 17 §2 at 10M lines): the same lines,
the same errors on the same lines as the per-line Python code gave, and a held result that
is the lines' bytes plus 8 a line, not a Python `str` (some 60 bytes more) per id and sentence."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from tasks.evaluate.benchmarks.bucc import read_bucc
from tasks.evaluate.benchmarks.tatoeba import read_tatoeba
from tasks.evaluate.datasets import BenchmarkDataError, Lines, clear_parsed, read_line_array, read_lines


def reference_lines(data: bytes) -> list[str]:
    """`read_lines` before the lines were columns: decode, split on "\\n", one "\\r" stripped."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    text = data.decode("utf-8")
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def reference_bucc_error(path: Path) -> str | None:
    """The first error the per-line loop of `_bucc_sentences` raised (message after the path), or None."""
    seen: dict[str, int] = {}
    for number, line in enumerate(reference_lines(path.read_bytes()), 1):
        sentence_id, tab, sentence = line.partition("\t")
        if not tab:
            return f":{number}: no tab: expected id<TAB>sentence"
        if not sentence_id.strip():
            return f":{number}: id: empty"
        if not sentence.strip():
            return f":{number}: sentence: empty sentence for id {sentence_id!r}"
        if sentence_id in seen:
            return f":{number}: id: duplicate id {sentence_id!r} (first on line {seen[sentence_id] + 1})"
        seen[sentence_id] = number - 1
    return None


PIECES = ["a", "b", " ", "\t", "\r", "\n", "\r\n", "\u2028", "\u0085", "é", "中", "\x1c", "\u3000", "x\ty"]


@pytest.mark.parametrize("seed", range(6))
def test_line_array_splits_as_the_python_code_did(tmp_path, seed):
    rng = random.Random(seed)
    text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 300)))
    data = (b"\xef\xbb\xbf" if seed % 2 else b"") + text.encode("utf-8")
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    lines = read_line_array(path)
    assert lines.type == pa.large_string()
    assert lines.to_pylist() == reference_lines(data) == read_lines(path)


def test_invalid_utf8_names_its_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nstill ok\r\nbad \xff here\n")
    with pytest.raises(BenchmarkDataError, match=r"bad\.txt:3: invalid UTF-8 at byte 17"):
        read_line_array(path)


@pytest.mark.parametrize("seed", range(40))
def test_bucc_sentence_errors_are_the_first_bad_line_as_the_loop_found_it(tmp_path, seed):
    rng = random.Random(seed)
    lines = [f"de-{i}\tSatz {i}" for i in range(12)]
    for _ in range(rng.randint(1, 3)):  # one to three faults anywhere: the first one is reported
        i = rng.randrange(len(lines))
        lines[i] = rng.choice(
            [f"de-{i} no tab", f"\tSatz {i}", f" \u3000\tSatz {i}", f"de-{i}\t \x1c", f"de-{rng.randrange(12)}\tagain"]
        )
    (tmp_path / "de-en.training.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "de-en.training.en").write_text("en-1\tone\n", encoding="utf-8")
    (tmp_path / "de-en.training.gold").write_text("", encoding="utf-8")
    expected = reference_bucc_error(tmp_path / "de-en.training.de")
    clear_parsed()
    if expected is None:
        assert read_bucc(tmp_path, "de", "training").src_ids == tuple(line.partition("\t")[0] for line in lines)
        return
    with pytest.raises(BenchmarkDataError) as error:
        read_bucc(tmp_path, "de", "training")
    assert str(error.value) == str(tmp_path / "de-en.training.de") + expected


def test_gold_errors_in_line_order(tmp_path):
    (tmp_path / "de-en.training.de").write_text("de-1\tHallo\nde-2\tMorgen\n", encoding="utf-8")
    (tmp_path / "de-en.training.en").write_text("en-1\tHello\n", encoding="utf-8")
    gold = tmp_path / "de-en.training.gold"
    for text, where in [
        ("de-1\ten-1\nde-9\ten-1\nno tab\n", ":2: id_xx: id 'de-9'"),  # a missing id before a line without a tab
        ("de-1\ten-1\nno tab\nde-9\ten-1\n", ":2: no tab"),
        ("de-2\ten-7\n", ":1: id_en: id 'en-7'"),
    ]:
        gold.write_text(text, encoding="utf-8")
        clear_parsed()
        with pytest.raises(BenchmarkDataError, match=f"gold{where}"):
            read_bucc(tmp_path, "de", "training")


def test_parsed_splits_hold_columns_of_their_bytes(tmp_path):
    n = 20_000
    (tmp_path / "de-en.test.de").write_text("".join(f"de-{i}\tSatz Nummer {i}\n" for i in range(n)), encoding="utf-8")
    (tmp_path / "de-en.test.en").write_text("".join(f"en-{i}\tsentence number {i}\n" for i in range(n)), encoding="utf-8")
    (tmp_path / "de-en.test.gold").write_text("".join(f"de-{i}\ten-{i}\n" for i in range(0, n, 10)), encoding="utf-8")
    for side, word in (("kaz", "сөйлем"), ("eng", "sentence")):
        (tmp_path / f"tatoeba.kaz-eng.{side}").write_text("".join(f"{word} {i}\n" for i in range(n)), encoding="utf-8")
    clear_parsed()
    split, pairs = read_bucc(tmp_path, "de", "test"), read_tatoeba(tmp_path, "kaz")
    columns = [split.src_ids, split.src, split.tgt_ids, split.tgt, pairs.src, pairs.tgt]
    assert all(isinstance(c, Lines) and c.array.type == pa.large_string() for c in columns)
    held = sum(c.array.nbytes for c in columns)
    file_bytes = sum(p.stat().st_size for p in tmp_path.iterdir() if not p.name.endswith(".gold"))
    assert held <= file_bytes + 8 * (6 * n + 6)  # the text without tabs/newlines, one int64 offset a line
    src, tgt = split.gold_indices()
    assert src.tolist() == tgt.tolist() and sorted(src.tolist()) == list(range(0, n, 10))  # gold in id order
    assert split.src[5] == "Satz Nummer 5" and split.src[-1] == f"Satz Nummer {n - 1}" and pairs.tgt[3] == "sentence 3"


def test_lines_are_a_sequence_of_str():
    lines = Lines(["a", "b", "c", "d"])
    assert len(lines) == 4 and lines[0] == "a" and lines[-1] == "d" and list(lines) == ["a", "b", "c", "d"]
    assert lines[1:3] == ("b", "c") and lines[::2] == ["a", "c"] and isinstance(lines[1:3], Lines)
    assert lines == ("a", "b", "c", "d") and lines != ("a", "b") and lines == Lines(("a", "b", "c", "d"))
    assert tuple(lines) == ("a", "b", "c", "d") and "c" in lines and lines.index("c") == 2
    with pytest.raises(IndexError):
        lines[4]
