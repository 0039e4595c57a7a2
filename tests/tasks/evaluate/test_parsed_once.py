"""Benchmark files are parsed once per process (issue 17 §2): the plan-time check and the
scoring read the same results; an edited, added or removed file is parsed again."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tasks.evaluate import datasets
from tasks.evaluate.benchmarks import bucc, multiway, sts, tatoeba
from tasks.evaluate.config import EvaluateConfig
from tasks.evaluate.stage import check_benchmark_files


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def age(root: Path) -> None:
    """Files and folders last written an hour ago (fresh ones are also checked by content)."""
    past = time.time() - 3600
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past))


@pytest.fixture
def benchmarks(tmp_path: Path) -> dict:
    t = tmp_path / "tatoeba"
    write(t / "tatoeba.kaz-eng.kaz", "бір\nекі\nүш\n")
    write(t / "tatoeba.kaz-eng.eng", "one\ntwo\nthree\n")
    d = tmp_path / "distractors"
    write(d / "eng_Latn.dev", "four\nfive\n")
    write(d / "kaz_Cyrl.dev", "төрт\nбес\n")
    m = tmp_path / "flores"
    write(m / "eng_Latn.dev", "a\nb\nc\nd\n")
    write(m / "kaz_Cyrl.dev", "а\nб\nв\nг\n")
    b = tmp_path / "bucc"
    for split in ("training", "test"):
        write(b / f"de-en.{split}.de", "de-1\tHallo Welt\nde-2\tGuten Morgen\n")
        write(b / f"de-en.{split}.en", "en-7\tgood morning\nen-8\thello world\n")
        write(b / f"de-en.{split}.gold", "de-1\ten-8\nde-2\ten-7\n")
    s = tmp_path / "sts"
    write(s / "STS.input.track5.en-en.txt", "A man plays.\tA man is playing.\nA cat.\tA dog.\n")
    write(s / "STS.gs.track5.en-en.txt", "4.8\n0.5\n")
    tsv = write(tmp_path / "sts.tsv", "sentence1\tsentence2\tscore\nx\ty\t1.0\n")
    age(tmp_path)
    config = EvaluateConfig.model_validate({"benchmarks": [
        {"kind": "tatoeba", "path": str(t), "langs": ["kaz"], "distractors": [{"name": "d", "path": str(d)}]},
        {"kind": "multiway", "path": str(m), "langs": ["eng_Latn", "kaz_Cyrl"], "row_start": 1},
        {"kind": "bucc", "path": str(b), "langs": ["de"], "tune_split": "training", "test_split": "test"},
        {"kind": "sts", "path": str(s)},
        {"kind": "sts", "path": str(tsv), "layout": "tsv", "langs": ["en", "en"]},
    ]})  # fmt: skip
    return {"config": config, "root": tmp_path, "sts": s}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """How often each file is read (and decoded) from disk."""
    datasets.clear_parsed()
    counts: Counter = Counter()
    read_line_array = datasets.read_line_array  # what every reader's file goes through (read_lines too)

    def counting(path):
        counts[f"{Path(path).parent.name}/{Path(path).name}"] += 1
        return read_line_array(path)

    for module in (datasets, tatoeba, bucc, multiway, sts):  # the readers in the benchmarks' files call it by name
        if getattr(module, "read_line_array", None) is read_line_array:
            monkeypatch.setattr(module, "read_line_array", counting)
    yield counts
    datasets.clear_parsed()


def scoring_reads(config: EvaluateConfig) -> list:
    """What the evaluate stage's runners read to score one model (tasks/evaluate/stage.py)."""
    t, m, b, s, tsv = config.benchmarks
    folder = tatoeba.scan_distractor_folder(t.distractors[0].path)
    return [
        tatoeba.read_tatoeba(t.path, "kaz"), folder.read("eng_Latn"), folder.read("kaz_Cyrl"),
        multiway.read_multiway_rows(m.path, m.langs, slice(m.row_start, m.row_stop), pattern=m.pattern),
        bucc.read_bucc(b.path, "de", b.tune_split), bucc.read_bucc(b.path, "de", b.test_split),
        sts.read_sts2017_folder(s.path), sts.read_sts_tsv(tsv.path, "en", "en"),
    ]  # fmt: skip


def test_check_then_two_scorings_read_every_file_once(benchmarks: dict, reads: Counter) -> None:
    config = benchmarks["config"]
    check_benchmark_files(config)  # plan time
    first = scoring_reads(config)  # the trained model
    second = scoring_reads(config)  # the untrained base beside it
    assert len(reads) == 15
    assert set(reads.values()) == {1}, reads
    assert all(a is b for a, b in zip(first, second))
    datasets.clear_parsed()  # what a fresh parse gives
    fresh = scoring_reads(config)
    assert set(reads.values()) == {2}
    for old, new in zip(first, fresh):
        if isinstance(old, sts.StsPairs) or isinstance(old, list):
            for x, y in zip(old if isinstance(old, list) else [old], new if isinstance(new, list) else [new]):
                assert (x.sentence1, x.sentence2, x.unscored_dropped) == (y.sentence1, y.sentence2, y.unscored_dropped)
                np.testing.assert_array_equal(x.scores, y.scores)
        else:
            assert old == new


def test_edited_added_and_removed_files_are_parsed_again(benchmarks: dict, reads: Counter) -> None:
    config, root = benchmarks["config"], benchmarks["root"]
    check_benchmark_files(config)
    write(root / "tatoeba" / "tatoeba.kaz-eng.eng", "One\nTwo\nThree\n")  # same size, new content
    assert tatoeba.read_tatoeba(root / "tatoeba", "kaz").tgt == ("One", "Two", "Three")
    assert reads["tatoeba/tatoeba.kaz-eng.eng"] == 2 and reads["tatoeba/tatoeba.kaz-eng.kaz"] == 2
    write(benchmarks["sts"] / "STS.input.track1.ar-ar.txt", "أ\tب\n")
    write(benchmarks["sts"] / "STS.gs.track1.ar-ar.txt", "3\n")
    assert [p.dataset for p in sts.read_sts2017_folder(benchmarks["sts"])] == ["STS.input.track1.ar-ar", "STS.input.track5.en-en"]
    (root / "flores" / "kaz_Cyrl.dev").unlink()
    with pytest.raises(datasets.BenchmarkDataError, match="kaz_Cyrl.dev: file not found"):
        check_benchmark_files(config)
    assert reads["flores/eng_Latn.dev"] == 2 and reads["distractors/eng_Latn.dev"] == 1  # only what changed is read again
