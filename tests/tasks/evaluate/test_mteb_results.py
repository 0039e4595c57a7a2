"""The evaluate artifact's `mteb/{Task}.json` files are MTEB TaskResults: the fields MTEB's loader
requires are checked everywhere (`task_result_problems`), and MTEB's own loader reads them where
the `mteb` extra is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.evaluate.groups import rows_table
from tasks.evaluate.mteb_results import MTEB_FORMAT_VERSION, mteb_result_files, task_result_problems, write_mteb_results

MAIN = {"tatoeba": "accuracy_mean", "sts": "spearman"}


def metrics():
    rows = []
    for lang, acc in (("kaz_Cyrl", 0.6), ("fra_Latn", 0.9)):
        for metric, value in (("accuracy_src_tgt", acc - 0.1), ("accuracy_tgt_src", acc + 0.1), ("accuracy_mean", acc)):
            rows.append({"benchmark": "tatoeba", "dataset": "tatoeba", "src_lang": lang, "tgt_lang": "eng_Latn",
                         "metric": metric, "value": value, "n": 100})  # fmt: skip
    rows.append({"benchmark": "sts", "dataset": "stsb", "src_lang": "eng_Latn", "tgt_lang": "eng_Latn", "metric": "spearman",
                 "value": 0.8, "n": 50})  # fmt: skip
    # a pair without its main metric (MTEB requires one per subset): left out
    rows.append({"benchmark": "tatoeba", "dataset": "tatoeba", "src_lang": "deu_Latn", "tgt_lang": "eng_Latn",
                 "metric": "accuracy_src_tgt", "value": 0.5, "n": 10})  # fmt: skip
    return rows_table(rows)


def files():
    return mteb_result_files(metrics(), MAIN, {"tatoeba": "sha256:abc"}, {("tatoeba", "tatoeba"): 12.5, ("sts", "stsb"): 3.25})


def test_each_file_has_every_field_mtebs_task_result_requires():
    written = files()
    assert sorted(written) == ["STS.stsb.json", "Tatoeba.json"]
    for name, data in written.items():
        assert task_result_problems(json.loads(json.dumps(data))) == [], name
    tatoeba = written["Tatoeba.json"]
    assert tatoeba["evaluation_time"] == 12.5 and tatoeba["mteb_version"] == MTEB_FORMAT_VERSION
    assert tatoeba["dataset_revision"] == "sha256:abc" and tatoeba["evaluation_framework"] == "xlembed"
    assert written["STS.stsb.json"]["dataset_revision"] == "unknown"  # a string always: MTEB requires one
    assert [e["hf_subset"] for e in tatoeba["scores"]["test"]] == ["kaz-eng", "fra-eng"]  # deu: no main score

    # what the files held before: no evaluation_time, a null mteb_version and dataset_revision
    old = {k: v for k, v in tatoeba.items() if k != "evaluation_time"} | {"mteb_version": None, "dataset_revision": None}
    assert set(task_result_problems(old)) == {
        "no evaluation_time", "mteb_version is NoneType, not str", "dataset_revision is NoneType, not str",
    }  # fmt: skip
    broken = json.loads(json.dumps(tatoeba))
    broken["scores"]["test"][0]["main_score"] = None
    broken["scores"]["test"][1]["languages"] = ["kaz_Cyrl"]
    assert task_result_problems(broken) == [
        "scores['test'][0]: main_score None is not a finite number",
        "scores['test'][1]: languages ['kaz_Cyrl'] is not a list of ISO 639-3-Script codes",
    ]


def test_mtebs_own_loader_reads_the_files(tmp_path: Path):
    pytest.importorskip("mteb")
    from mteb.results import TaskResult

    write_mteb_results(tmp_path, files())
    result = TaskResult.from_disk(tmp_path / "Tatoeba.json", load_historic_data=False)
    assert result.task_name == "Tatoeba" and result.evaluation_time == 12.5
    assert result.get_score() == pytest.approx(0.75)  # the mean main score over the subsets
    assert TaskResult.from_disk(tmp_path / "STS.stsb.json").get_score() == pytest.approx(0.8)
