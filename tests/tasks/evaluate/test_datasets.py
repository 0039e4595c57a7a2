"""tasks.evaluate.datasets: each benchmark reader on real files, and every malformed input it must reject."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tasks.evaluate.benchmarks.bucc import read_bucc
from tasks.evaluate.benchmarks.multiway import held_out_rows, read_multiway_rows
from tasks.evaluate.benchmarks.sts import read_sts2017, read_sts2017_folder, read_sts_tsv
from tasks.evaluate.benchmarks.tatoeba import read_tatoeba, scan_distractor_folder, tatoeba_languages
from tasks.evaluate.datasets import BenchmarkDataError, read_lines
from tasks.languages import UnknownLanguageError


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(text)
    return path


# ------------------------------------------------------------------ lines


def test_read_lines_splits_on_newline_only(tmp_path):
    path = write(tmp_path / "a.txt", b"\xef\xbb\xbfone\r\ntwo\xe2\x80\xa8still two\nthree")
    assert read_lines(path) == ["one", "two\u2028still two", "three"]
    assert read_lines(write(tmp_path / "empty.txt", b"")) == []
    assert read_lines(write(tmp_path / "b.txt", "x\n\n")) == ["x", ""]


def test_read_lines_invalid_utf8_names_line(tmp_path):
    path = write(tmp_path / "bad.txt", b"ok\nstill ok\nbad \xff byte\n")
    with pytest.raises(BenchmarkDataError, match=r"bad\.txt:3: invalid UTF-8"):
        read_lines(path)


# ------------------------------------------------------------------ Tatoeba


def tatoeba(folder: Path, code: str, xx: str, eng: str) -> None:
    write(folder / f"tatoeba.{code}-eng.{code}", xx)
    write(folder / f"tatoeba.{code}-eng.eng", eng)


def test_tatoeba_happy_path(tmp_path):
    tatoeba(tmp_path, "kaz", "Сәлем\nРақмет\n", "Hello\nThanks\n")
    tatoeba(tmp_path, "cmn", "你好\n", "Hello\n")
    pairs = read_tatoeba(tmp_path, "kaz")
    assert (pairs.src_lang, pairs.tgt_lang) == ("kaz_Cyrl", "eng_Latn")
    assert pairs.src == ("Сәлем", "Рақмет") and pairs.tgt == ("Hello", "Thanks") and len(pairs) == 2
    assert read_tatoeba(tmp_path, "cmn").src_lang == "zho_Hans"
    assert tatoeba_languages(tmp_path) == ["cmn", "kaz"]


def test_tatoeba_line_count_mismatch_names_both_files(tmp_path):
    tatoeba(tmp_path, "tel", "a\nb\nc\n", "A\nB\n")
    with pytest.raises(BenchmarkDataError) as error:
        read_tatoeba(tmp_path, "tel")
    message = str(error.value)
    assert "tatoeba.tel-eng.tel has 3 lines" in message and "tatoeba.tel-eng.eng has 2 lines" in message


@pytest.mark.parametrize(
    ("xx", "eng", "where"), [("a\n \nc\n", "A\nB\nC\n", "tatoeba.kaz-eng.kaz:2"), ("a\nb\n", "A\n\n", "tatoeba.kaz-eng.eng:2")]
)
def test_tatoeba_empty_line_is_an_error(tmp_path, xx, eng, where):
    tatoeba(tmp_path, "kaz", xx, eng)
    with pytest.raises(BenchmarkDataError, match="empty line") as error:
        read_tatoeba(tmp_path, "kaz")
    assert where in str(error.value)


def test_tatoeba_missing_file_and_unknown_language(tmp_path):
    write(tmp_path / "tatoeba.kaz-eng.kaz", "a\n")
    with pytest.raises(BenchmarkDataError, match=r"tatoeba\.kaz-eng\.eng: file not found"):
        read_tatoeba(tmp_path, "kaz")
    with pytest.raises(UnknownLanguageError, match="'qqq'"):
        read_tatoeba(tmp_path, "qqq")


# ------------------------------------------------------------------ BUCC


def bucc(folder: Path, de: str, en: str, gold: str, split: str = "training") -> None:
    write(folder / f"de-en.{split}.de", de)
    write(folder / f"de-en.{split}.en", en)
    write(folder / f"de-en.{split}.gold", gold)


DE = "de-1\tHallo Welt\nde-2\tGuten Morgen\nde-3\tnicht übersetzt\n"
EN = "en-7\tgood morning\nen-8\thello world\n"


def test_bucc_happy_path(tmp_path):
    bucc(tmp_path / "de-en", DE, EN, "de-1\ten-8\nde-2\ten-7\nde-1\ten-8\n")
    split = read_bucc(tmp_path, "de", "training")  # found in the de-en/ subfolder
    assert (split.src_lang, split.tgt_lang, split.split) == ("deu_Latn", "eng_Latn", "training")
    assert split.src_ids == ("de-1", "de-2", "de-3") and split.tgt == ("good morning", "hello world")
    assert split.gold == frozenset({("de-1", "en-8"), ("de-2", "en-7")}) and split.duplicate_gold_lines == 1
    src, tgt = split.gold_indices()
    assert sorted(zip(src.tolist(), tgt.tolist())) == [(0, 1), (1, 0)]
    assert read_bucc(tmp_path / "de-en", "de", "training", with_gold=False).gold is None


def test_bucc_duplicate_id(tmp_path):
    bucc(tmp_path, DE + "de-2\tagain\n", EN, "")
    with pytest.raises(BenchmarkDataError, match=r"de-en\.training\.de:4: id: duplicate id 'de-2' \(first on line 2\)"):
        read_bucc(tmp_path, "de", "training")


def test_bucc_gold_id_missing_from_sentences(tmp_path):
    bucc(tmp_path, DE, EN, "de-1\ten-8\nde-2\ten-9\n")
    with pytest.raises(BenchmarkDataError, match=r"de-en\.training\.gold:2: id_en: id 'en-9' is not in .*de-en\.training\.en"):
        read_bucc(tmp_path, "de", "training")
    bucc(tmp_path, DE, EN, "de-5\ten-8\n")
    with pytest.raises(BenchmarkDataError, match=r"de-en\.training\.gold:1: id_xx: id 'de-5'"):
        read_bucc(tmp_path, "de", "training")


@pytest.mark.parametrize(
    ("de", "en", "gold", "where"),
    [
        ("de-1 no tab here\n", EN, "", r"de-en\.training\.de:1: no tab"),
        (DE, "en-7\tok\nen-8 missing tab\n", "", r"de-en\.training\.en:2: no tab"),
        (DE, EN, "de-1 en-8\n", r"de-en\.training\.gold:1: no tab"),
        (DE, "en-7\t  \n", "", r"de-en\.training\.en:1: sentence: empty sentence"),
        ("\tHallo\n", EN, "", r"de-en\.training\.de:1: id: empty"),
    ],
)
def test_bucc_malformed_lines(tmp_path, de, en, gold, where):
    bucc(tmp_path, de, en, gold)
    with pytest.raises(BenchmarkDataError, match=where):
        read_bucc(tmp_path, "de", "training")


def test_bucc_unknown_split_and_missing_gold(tmp_path):
    with pytest.raises(ValueError, match="unknown BUCC split 'dev'"):
        read_bucc(tmp_path, "de", "dev")
    write(tmp_path / "de-en.test.de", DE)
    write(tmp_path / "de-en.test.en", EN)
    with pytest.raises(BenchmarkDataError, match=r"de-en\.test\.gold: file not found"):
        read_bucc(tmp_path, "de", "test")


# ------------------------------------------------------------------ STS


def test_sts2017_happy_path_with_unscored_pairs(tmp_path):
    write(tmp_path / "STS.input.track5.en-en.txt", "A man plays.\tA man is playing.\nA cat.\tA dog.\nX\tY\n")
    write(tmp_path / "STS.gs.track5.en-en.txt", "4.8\n\n0.5\n")
    pairs = read_sts2017(tmp_path / "STS.input.track5.en-en.txt")
    assert (pairs.dataset, pairs.src_lang, pairs.tgt_lang) == ("STS.input.track5.en-en", "eng_Latn", "eng_Latn")
    assert pairs.sentence1 == ("A man plays.", "X") and pairs.sentence2 == ("A man is playing.", "Y")
    np.testing.assert_array_equal(pairs.scores, [4.8, 0.5])
    assert pairs.unscored_dropped == 1


def test_sts2017_languages_from_track_mapping_or_config(tmp_path):
    write(tmp_path / "STS.input.track4a.txt", "Hola\tHello\n")
    write(tmp_path / "STS.gs.track4a.txt", "5\n")
    pairs = read_sts2017(tmp_path / "STS.input.track4a.txt")
    assert (pairs.src_lang, pairs.tgt_lang) == ("spa_Latn", "eng_Latn")
    assert read_sts2017(tmp_path / "STS.input.track4a.txt", languages=("es", "es")).tgt_lang == "spa_Latn"
    write(tmp_path / "STS.input.track6.tr-en.txt", "Merhaba\tHello\n")
    write(tmp_path / "STS.gs.track6.tr-en.txt", "5\n")
    found = read_sts2017_folder(tmp_path, languages={"track6": ("tr", "en")})
    assert [(p.dataset, p.src_lang) for p in found] == [("STS.input.track4a", "spa_Latn"), ("STS.input.track6.tr-en", "tur_Latn")]
    write(tmp_path / "other" / "STS.input.custom.txt", "a\tb\n")
    with pytest.raises(ValueError, match="pass languages"):
        read_sts2017(tmp_path / "other" / "STS.input.custom.txt")


def test_sts2017_count_mismatch_names_both_files(tmp_path):
    write(tmp_path / "STS.input.track1.ar-ar.txt", "a\tb\nc\td\n")
    write(tmp_path / "STS.gs.track1.ar-ar.txt", "1\n")
    with pytest.raises(BenchmarkDataError) as error:
        read_sts2017(tmp_path / "STS.input.track1.ar-ar.txt")
    assert "STS.input.track1.ar-ar.txt has 2 lines" in str(error.value) and "STS.gs.track1.ar-ar.txt has 1 lines" in str(
        error.value
    )


@pytest.mark.parametrize(
    ("inputs", "gold", "where"),
    [
        ("a\tb\nc\td\n", "1\nhigh\n", r"STS\.gs\.track5\.en-en\.txt:2: score: not a number: 'high'"),
        ("a\tb\nc\td\n", "1\nnan\n", r"STS\.gs\.track5\.en-en\.txt:2: score: not a finite number"),
        ("a\tb\nonly one field\n", "1\n2\n", r"STS\.input\.track5\.en-en\.txt:2: expected 2 tab-separated fields, found 1"),
        ("a\tb\n\td\n", "1\n2\n", r"STS\.input\.track5\.en-en\.txt:2: sentence1: empty"),
    ],
)
def test_sts2017_malformed(tmp_path, inputs, gold, where):
    write(tmp_path / "STS.input.track5.en-en.txt", inputs)
    write(tmp_path / "STS.gs.track5.en-en.txt", gold)
    with pytest.raises(BenchmarkDataError, match=where):
        read_sts2017(tmp_path / "STS.input.track5.en-en.txt")


def test_sts_tsv_with_and_without_header(tmp_path):
    with_header = write(tmp_path / "kk-en.tsv", "sentence1\tsentence2\tscore\nСәлем\tHello\t4.5\nа\tb\t\nв\tc\t1\n")
    pairs = read_sts_tsv(with_header, "kk", "en")
    assert (pairs.src_lang, pairs.tgt_lang, pairs.dataset) == ("kaz_Cyrl", "eng_Latn", "kk-en.tsv")
    assert pairs.sentence1 == ("Сәлем", "в") and pairs.scores.tolist() == [4.5, 1.0] and pairs.unscored_dropped == 1
    plain = write(tmp_path / "plain.tsv", "a\tb\t1.5\nc\td\t2\n")
    assert read_sts_tsv(plain, "en", "en", dataset="plain").scores.tolist() == [1.5, 2.0]
    assert len(read_sts_tsv(plain, "en", "en", header=True)) == 1


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("s1\ts2\tscore\na\tb\tx\n", r"bad\.tsv:2: score: not a number: 'x'"),
        ("a\tb\t1\nc\td\n", r"bad\.tsv:2: expected 3 tab-separated fields, found 2"),
        ("a\tb\t1\nc\t \t2\n", r"bad\.tsv:2: sentence2: empty"),
    ],
)
def test_sts_tsv_malformed(tmp_path, text, where):
    with pytest.raises(BenchmarkDataError, match=where):
        read_sts_tsv(write(tmp_path / "bad.tsv", text), "en", "en")


# ------------------------------------------------------------------ multi-way


def multiway(folder: Path, lines: dict[str, list[str]], suffix: str = "dev") -> None:
    for code, rows in lines.items():
        write(folder / f"{code}.{suffix}", "".join(f"{row}\n" for row in rows))


def test_multiway_held_out_rows(tmp_path):
    multiway(tmp_path, {"kaz_Cyrl": [f"k{i}" for i in range(10)], "eng_Latn": [f"e{i}" for i in range(10)]})
    rows = read_multiway_rows(tmp_path, ["kaz_Cyrl", "eng_Latn"], held_out_rows(10, 0.2))
    assert rows.rows == range(8, 10) and rows.total_lines == 10 and rows.langs == ("kaz_Cyrl", "eng_Latn")
    assert rows.sentences == {"kaz_Cyrl": ("k8", "k9"), "eng_Latn": ("e8", "e9")}
    assert read_multiway_rows(tmp_path, ["eng_Latn"], slice(-3, None)).sentences["eng_Latn"] == ("e7", "e8", "e9")
    assert held_out_rows(997, 0.2) == range(798, 997)


def test_multiway_pattern_and_code_mapping(tmp_path):
    multiway(tmp_path, {"kk": ["a", "b"], "en": ["A", "B"]}, suffix="txt")
    rows = read_multiway_rows(tmp_path, ["kk", "en"], range(0, 1), pattern="{code}.txt")
    assert rows.sentences == {"kaz_Cyrl": ("a",), "eng_Latn": ("A",)}


def test_multiway_errors(tmp_path):
    multiway(tmp_path, {"kaz_Cyrl": ["a", "b", "c"], "eng_Latn": ["A", "B"]})
    with pytest.raises(BenchmarkDataError) as error:
        read_multiway_rows(tmp_path, ["kaz_Cyrl", "eng_Latn"], slice(0, None))
    assert "kaz_Cyrl.dev has 3 lines" in str(error.value) and "eng_Latn.dev has 2 lines" in str(error.value)
    multiway(tmp_path, {"kaz_Cyrl": ["a", "", "c"], "eng_Latn": ["A", "B", "C"]})
    with pytest.raises(BenchmarkDataError, match=r"kaz_Cyrl\.dev:2: kaz_Cyrl: empty line"):
        read_multiway_rows(tmp_path, ["kaz_Cyrl", "eng_Latn"], range(0, 3))
    assert read_multiway_rows(tmp_path, ["kaz_Cyrl"], range(2, 3)).sentences["kaz_Cyrl"] == ("c",)  # row 2 not selected
    with pytest.raises(BenchmarkDataError, match=r"outside the 3 lines"):
        read_multiway_rows(tmp_path, ["eng_Latn"], range(2, 5))
    with pytest.raises(BenchmarkDataError, match=r"tel_Telu\.dev: file not found"):
        read_multiway_rows(tmp_path, ["tel_Telu"], range(0, 1))


# ------------------------------------------------------------------ distractor folders


def test_distractor_folder_maps_file_codes_to_flores(tmp_path):
    folder = tmp_path / "ntrex"
    write(folder / "newstest2019-ref.kaz.txt", "бір\nекі\n")
    write(folder / "newstest2019-ref.fra.txt", "un\n")
    write(folder / "newstest2019-ref.fra-CA.txt", "un (CA)\n")  # fra wins: the shorter code
    write(folder / "newstest2019-ref.eng-GB.txt", "one (GB)\n")
    write(folder / "newstest2019-ref.eng-US.txt", "one (US)\n")
    write(folder / "newstest2019-src.eng.txt", "one\ntwo\n")
    write(folder / "newstest2019-ref.xyz1.txt", "not a language\n")  # skipped: no FLORES code
    write(folder / "README.md", "# about\n")
    found = scan_distractor_folder(folder, "newstest2019-ref.{code}.txt", {"en": "newstest2019-src.eng.txt"})
    assert found.read("kaz_Cyrl") == ("бір", "екі")
    assert found.read("fra_Latn") == ("un",)
    assert found.read("eng_Latn") == ("one", "two")  # files win over the pattern
    assert found.read("tel_Telu") == ()  # no file: no distractors
    without_files = scan_distractor_folder(folder, "newstest2019-ref.{code}.txt")
    with pytest.raises(BenchmarkDataError, match=r"several files map to eng_Latn: .*eng-GB.*eng-US.*name one in files"):
        without_files.read("eng_Latn")
    assert without_files.read("kaz_Cyrl") == ("бір", "екі")  # the tie only matters for English


def test_distractor_folder_errors_name_file_and_line(tmp_path):
    with pytest.raises(BenchmarkDataError, match="distractor folder not found"):
        scan_distractor_folder(tmp_path / "missing")
    write(tmp_path / "kaz_Cyrl.dev", "бір\n\nүш\n")
    write(tmp_path / "tel_Telu.dev", b"ok\n\xff\n")
    write(tmp_path / "jav_Latn.dev", "")
    found = scan_distractor_folder(tmp_path)
    with pytest.raises(BenchmarkDataError, match=r"kaz_Cyrl\.dev:2: kaz_Cyrl: empty line"):
        found.read("kaz_Cyrl")
    with pytest.raises(BenchmarkDataError, match=r"tel_Telu\.dev:2: invalid UTF-8"):
        found.read("tel_Telu")
    with pytest.raises(BenchmarkDataError, match=r"jav_Latn\.dev: no sentences"):
        found.read("jav_Latn")
    with pytest.raises(BenchmarkDataError, match=r"eng\.txt: files: file not found \(named in files for 'eng'\)"):
        scan_distractor_folder(tmp_path, files={"eng": "eng.txt"})
    with pytest.raises(UnknownLanguageError):
        scan_distractor_folder(tmp_path, files={"qqq": "kaz_Cyrl.dev"})
