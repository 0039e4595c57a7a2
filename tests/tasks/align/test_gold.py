from __future__ import annotations

from pathlib import Path

import pytest

from tasks.align.gold import GoldFormatError, check_gold, parse_gold_line, read_gold, read_tokenized, score_alignments

from tests.tasks.align.conftest import DATA


def test_parse_sure_and_possible_links_one_based() -> None:
    pair = parse_gold_line("1-1 2p3 3?2")
    assert pair.sure == {(0, 0)}
    assert pair.possible == {(0, 0), (1, 2), (2, 1)}
    assert parse_gold_line("0-0", zero_based=True).sure == {(0, 0)}
    assert parse_gold_line("").possible == frozenset()


def test_aer_precision_recall_by_hand() -> None:
    gold = [parse_gold_line("1-1 2-2 3p3")]  # S = {00, 11}, P = {00, 11, 22}
    scores = score_alignments([{(0, 0), (2, 2), (0, 1)}], gold)
    # |A|=3 |S|=2 |A∩S|=1 |A∩P|=2: AER = 1 - 3/5, P = 2/3, R = 1/2
    assert scores.aer == pytest.approx(0.4)
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(0.5)
    assert scores.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert score_alignments([{(0, 0), (1, 1)}], gold).aer == 0.0


def test_hand_made_gold_set_is_consistent() -> None:
    gold = read_gold(DATA / "eng-fra.gold")
    src, tgt = read_tokenized(DATA / "eng-fra.eng"), read_tokenized(DATA / "eng-fra.fra")
    check_gold(gold, src, tgt, DATA / "eng-fra.gold")
    assert len(gold) == 12 and sum(len(p.sure) for p in gold) == 88


def test_bad_gold_files_name_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gold"
    bad.write_text("1-1 2-2\n1-1 2x2\n", encoding="utf-8")
    with pytest.raises(GoldFormatError, match=r"bad\.gold:2: field 2 '2x2'"):
        read_gold(bad)
    bad.write_text("0-1\n", encoding="utf-8")
    with pytest.raises(GoldFormatError, match=r"bad\.gold:1: field 1 '0-1' has index 0 in a 1-based"):
        read_gold(bad)
    bad.write_text("1-1\n1-9\n", encoding="utf-8")
    with pytest.raises(GoldFormatError, match=r"bad\.gold:2: link \(0, 8\)"):
        check_gold(read_gold(bad), [["a"], ["b"]], [["c"], ["d"]], bad)
    with pytest.raises(GoldFormatError, match="2 gold lines, but 1 source"):
        check_gold(read_gold(bad), [["a"]], [["c"]], bad)
    with pytest.raises(GoldFormatError, match="no such gold file"):
        read_gold(tmp_path / "missing.gold")
    empty = tmp_path / "s.txt"
    empty.write_text("a b\n\n", encoding="utf-8")
    with pytest.raises(GoldFormatError, match=r"s\.txt:2: empty sentence"):
        read_tokenized(empty)
