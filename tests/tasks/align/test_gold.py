from __future__ import annotations

from pathlib import Path

import pytest

from tasks.align.config import AlignConfig
from tasks.align.gold import (
    GoldFormatError,
    GoldInputError,
    check_gold,
    parse_gold_line,
    read_gold,
    read_parallel,
    read_tokenized,
    score_alignments,
    score_gold_set,
)
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


def test_score_gold_set_asks_for_the_base_model_only_when_the_backend_reads_it(tiny_encoder_dir: Path) -> None:
    files = (DATA / "eng-fra.gold", DATA / "eng-fra.eng", DATA / "eng-fra.fra")
    asked: list[str] = []

    def base_model() -> Path:
        asked.append("base_model")
        return tiny_encoder_dir

    reads = AlignConfig.model_validate({"backend": "simalign", "simalign": {"method": "argmax", "device": "cpu"}})
    result = score_gold_set(reads, *files, base_model=base_model)
    assert asked == ["base_model"] and result.label == "simalign:argmax" and result.scores.pairs == 12
    own = AlignConfig.model_validate(
        {"backend": "simalign", "simalign": {"model": str(tiny_encoder_dir), "method": "argmax", "device": "cpu"}}
    )
    same = score_gold_set(own, *files, base_model=base_model)
    assert asked == ["base_model"] and same.predicted == result.predicted  # the same encoder, not asked again
    with pytest.raises(GoldInputError, match="reads the pipeline's base model"):
        score_gold_set(reads, *files)
    with pytest.raises(GoldInputError, match="unknown language"):
        score_gold_set(own, *files, ("eng_Latn", "xx_nope"))


def test_extra_parallel_text_files_are_checked(tmp_path: Path) -> None:
    assert read_parallel(None, None) == []
    with pytest.raises(GoldInputError, match="give both"):
        read_parallel(DATA / "eng-fra.eng", None)
    short = tmp_path / "short.txt"
    short.write_text("a b\n", encoding="utf-8")
    with pytest.raises(GoldInputError, match=r"eng-fra\.eng has 12 lines, .*short\.txt has 1"):
        read_parallel(DATA / "eng-fra.eng", short)
    assert read_parallel(short, short) == [(["a", "b"], ["a", "b"])]
