"""xlembed's Tatoeba, BUCC and STS scores as MTEB-format result files, for tools that read MTEB results.

One JSON file per task and dataset, an MTEB `TaskResult` (`mteb.results.TaskResult.from_disk`
loads it; `task_result_problems` checks the fields that loader requires, without mteb):

    {"task_name": "Tatoeba", "dataset_revision": "sha256:…", "mteb_version": "2.26.24",
     "evaluation_time": 12.3, "kg_co2_emissions": null, "evaluation_framework": "xlembed",
     "scores": {"test": [
        {"hf_subset": "kaz-eng", "languages": ["kaz-Cyrl", "eng-Latn"], "main_score": 0.9,
         "accuracy_src_tgt": …, "accuracy_tgt_src": …, "accuracy_mean": …, "n": 100}, …]}}

The scores are xlembed's, computed by xlembed (tasks/evaluate/retrieval.py, mining.py, sts.py),
under xlembed's metric names, as fractions like MTEB's; `main_score` is the benchmark's main
metric (Tatoeba: accuracy_mean, BUCC: f1, STS: spearman). They are not MTEB's implementation of
the task (MTEB's Tatoeba scores one direction, its main score is F1): `evaluation_framework` says
who computed them, and `mteb_version` names the result format the file follows (MTEB's loader
picks its reading of a file by that version, and reads an absent or unparsable one as a pre-1.11
file, whose conversion looks the task up in its registry), not an MTEB run.
`evaluation_time` is the seconds of the benchmark run that scored the dataset (together with
its other datasets, where it scored several); `dataset_revision` is the content hash of the
benchmark's files, which is what fixes the data here ("unknown" where they could not be read).
A dataset other than the benchmark's own (`tatoeba-distractors`, a BUCC split) is its own task,
`{Task}.{dataset}`. Group rows (language-group averages) are not written: MTEB has none.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.languages import is_group_code

__all__ = ["MTEB_FORMAT_VERSION", "MTEB_TASK_NAMES", "mteb_language", "mteb_result_files", "task_result_problems"]

MTEB_TASK_NAMES = {"tatoeba": "Tatoeba", "bucc": "BUCC", "sts": "STS"}
SPLIT = "test"
MTEB_FORMAT_VERSION = "2.26.24"  # the mteb release whose TaskResult these files follow (its loader read them in a test)


def mteb_language(code: str) -> str:
    """A FLORES-200 code as MTEB writes languages: `kaz_Cyrl` -> `kaz-Cyrl`."""
    return code.replace("_", "-")


def dataset_revision(fingerprint: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode("utf-8")).hexdigest()


def mteb_result_files(
    metrics: pa.Table,
    main_metrics: dict[str, str],
    revisions: dict[str, str] | None = None,
    seconds: dict[tuple[str, str], float] | None = None,
) -> dict[str, dict[str, Any]]:
    """File name (`{Task}.json`) -> MTEB TaskResult-shaped dict, for the Tatoeba/BUCC/STS rows of
    a metrics table. `main_metrics`: row benchmark -> its main metric; `revisions`: row benchmark
    -> the content hash of its files; `seconds`: (row benchmark, dataset) -> the seconds its
    scoring took (`evaluation_time`; null where not given). A language pair without a main score
    is left out (MTEB requires one per subset)."""
    entries: dict[tuple[str, str], dict[tuple[str, str | None], dict[str, Any]]] = {}
    for row in metrics.to_pylist():
        benchmark = row["benchmark"]
        if benchmark not in MTEB_TASK_NAMES or is_group_code(row["src_lang"]) or not math.isfinite(row["value"]):
            continue
        entry = entries.setdefault((benchmark, row["dataset"]), {}).setdefault((row["src_lang"], row["tgt_lang"]), {})
        entry[row["metric"]] = float(row["value"])
        entry["n"] = max(int(row["n"]), entry.get("n", -1))
    files: dict[str, dict[str, Any]] = {}
    for (benchmark, dataset), pairs in entries.items():
        task = MTEB_TASK_NAMES[benchmark] if dataset == benchmark else f"{MTEB_TASK_NAMES[benchmark]}.{dataset}"
        scores = []
        for (src, tgt), values in pairs.items():
            langs = [src] if tgt is None else [src, tgt]
            main = main_metrics.get(benchmark)
            if main is None or main not in values:
                continue
            scores.append({
                "hf_subset": "-".join(lang.split("_")[0] for lang in langs),
                "languages": [mteb_language(lang) for lang in langs],
                "main_score": values[main],
                **values,
            })  # fmt: skip
        if not scores:
            continue
        elapsed = (seconds or {}).get((benchmark, dataset))
        files[f"{task}.json"] = {
            "task_name": task,
            "dataset_revision": (revisions or {}).get(benchmark) or "unknown",
            "mteb_version": MTEB_FORMAT_VERSION,
            "evaluation_time": None if elapsed is None else round(float(elapsed), 3),
            "kg_co2_emissions": None,
            "evaluation_framework": "xlembed",
            "scores": {SPLIT: scores},
        }
    return files


def task_result_problems(data: Any) -> list[str]:
    """What keeps MTEB's `TaskResult` (mteb 2.26.24, mteb/results/task_result.py) from loading a
    result file's JSON, checked without mteb: its required fields and their types, and per score
    entry a numeric `main_score`, a string `hf_subset` and a list of `languages` written as MTEB
    writes them (`kaz-Cyrl`). Empty when it loads."""
    if not isinstance(data, dict):
        return ["not a JSON object"]
    problems = []
    required = {"dataset_revision": (str,), "task_name": (str,), "mteb_version": (str,), "scores": (dict,),
                "evaluation_time": (int, float, type(None))}  # fmt: skip
    for name, types in required.items():
        if name not in data:
            problems.append(f"no {name}")
        elif not isinstance(data[name], types) or isinstance(data[name], bool):
            problems.append(f"{name} is {type(data[name]).__name__}, not {' or '.join(t.__name__ for t in types)}")
    if data.get("kg_co2_emissions") is not None and not isinstance(data["kg_co2_emissions"], (int, float)):
        problems.append("kg_co2_emissions is not a number")
    for split, entries in (data.get("scores") or {}).items() if isinstance(data.get("scores"), dict) else ():
        if not isinstance(entries, list):
            problems.append(f"scores[{split!r}] is not a list")
            continue
        for i, entry in enumerate(entries):
            where = f"scores[{split!r}][{i}]"
            if not isinstance(entry, dict):
                problems.append(f"{where} is not an object")
                continue
            main = entry.get("main_score")
            if not isinstance(main, (int, float)) or isinstance(main, bool) or not math.isfinite(main):
                problems.append(f"{where}: main_score {main!r} is not a finite number")
            if not isinstance(entry.get("hf_subset"), str):
                problems.append(f"{where}: no hf_subset string")
            langs = entry.get("languages")
            if not isinstance(langs, list) or not all(
                isinstance(x, str) and re.fullmatch(r"[a-z]{3}-[A-Z][a-z]{3}", x) for x in langs
            ):
                problems.append(f"{where}: languages {langs!r} is not a list of ISO 639-3-Script codes")
    try:
        json.dumps(data, allow_nan=False)
    except ValueError as exc:
        problems.append(f"not strict JSON: {exc}")
    return problems


def write_mteb_results(folder: Path, files: dict[str, dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, indent=1, sort_keys=False) + "\n", encoding="utf-8")
