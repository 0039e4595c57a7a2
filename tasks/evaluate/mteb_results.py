"""xlembed's Tatoeba, BUCC and STS scores as MTEB-format result files, for tools that read MTEB results.

One JSON file per task and dataset, shaped like an MTEB `TaskResult`:

    {"task_name": "Tatoeba", "dataset_revision": "sha256:…", "mteb_version": null,
     "evaluation_framework": "xlembed", "scores": {"test": [
        {"hf_subset": "kaz-eng", "languages": ["kaz-Cyrl", "eng-Latn"], "main_score": 0.9,
         "accuracy_src_tgt": …, "accuracy_tgt_src": …, "accuracy_mean": …, "n": 100}, …]}}

The scores are xlembed's, computed by xlembed (tasks/evaluate/retrieval.py, mining.py, sts.py),
under xlembed's metric names, as fractions like MTEB's; `main_score` is the benchmark's main
metric (Tatoeba: accuracy_mean, BUCC: f1, STS: spearman). They are not MTEB's implementation of
the task (MTEB's Tatoeba scores one direction, its main score is F1), so `mteb_version` is null;
`dataset_revision` is the content hash of the benchmark's files, which is what fixes the data here.
A dataset other than the benchmark's own (`tatoeba-distractors`, a BUCC split) is its own task,
`{Task}.{dataset}`. Group rows (language-group averages) are not written: MTEB has none.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.languages import is_group_code

__all__ = ["MTEB_TASK_NAMES", "mteb_language", "mteb_result_files"]

MTEB_TASK_NAMES = {"tatoeba": "Tatoeba", "bucc": "BUCC", "sts": "STS"}
SPLIT = "test"


def mteb_language(code: str) -> str:
    """A FLORES-200 code as MTEB writes languages: `kaz_Cyrl` -> `kaz-Cyrl`."""
    return code.replace("_", "-")


def dataset_revision(fingerprint: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode("utf-8")).hexdigest()


def mteb_result_files(
    metrics: pa.Table, main_metrics: dict[str, str], revisions: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """File name (`{Task}.json`) -> MTEB TaskResult-shaped dict, for the Tatoeba/BUCC/STS rows of
    a metrics table. `main_metrics`: row benchmark -> its main metric; `revisions`: row benchmark
    -> the content hash of its files."""
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
            scores.append({
                "hf_subset": "-".join(lang.split("_")[0] for lang in langs),
                "languages": [mteb_language(lang) for lang in langs],
                "main_score": values.get(main) if main else None,
                **values,
            })  # fmt: skip
        files[f"{task}.json"] = {
            "task_name": task,
            "dataset_revision": (revisions or {}).get(benchmark),
            "mteb_version": None,
            "evaluation_framework": "xlembed",
            "scores": {SPLIT: scores},
        }
    return files


def write_mteb_results(folder: Path, files: dict[str, dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, indent=1, sort_keys=False) + "\n", encoding="utf-8")
