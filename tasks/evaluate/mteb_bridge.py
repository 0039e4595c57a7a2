"""Run MTEB tasks on a saved encoder and turn MTEB's scores into metric rows (benchmark="mteb").

mteb is optional and imported only by the worker process, never by this module's import.
Install it with ``pip install 'xlembed[mteb]'`` (seen to work: mteb 2.26.24 with the CPU torch 2.13.0
here; it adds datasets, pandas, pytrec-eval-terrier, dill, multiprocess, xxhash and no other
torch). Nothing is downloaded at evaluation time: the MTEB datasets must already be in
``cache_dir`` (a Hugging Face cache root), e.g. fetched once on a connected machine with

    HF_HOME=<cache_dir> python -c "import mteb; [t.load_data() for t in mteb.get_tasks(tasks=['STS22'])]"

MTEB runs in a child Python process with ``HF_HOME=<cache_dir>`` and, by default, the Hugging
Face offline switches on: huggingface_hub and datasets read those variables once, at import,
so setting them in an already running process would not take effect, and a missing dataset
must fail fast instead of hanging on the network. The model is loaded with
sentence-transformers from ``model_dir`` (a sentence-transformers folder; a bare Hugging Face
model folder gets sentence-transformers' default mean pooling, which is not DAP's CLS pooling).
MTEB's own result files go to ``results_dir`` (the evaluate stage: a folder it attaches to its
artifact as ``mteb/bridge/``; default ``<cache_dir>/mteb-results``) and are always recomputed, so a
new checkpoint saved under an old path never reuses old scores.

Rows: dataset ``"{task}.{split}"``; languages from MTEB's ``languages`` field (``kaz-Cyrl``)
mapped to FLORES-200 (one language: tgt_lang null; two: src, tgt; more: ``group:{task}:{subset}``);
one row per numeric score (``main_score`` included); ``n`` = samples in that subset from
MTEB's descriptive statistics, or -1 where MTEB does not record it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from tasks.encoders.loading import quiet_transformers
from tasks.evaluate.groups import metric_row
from tasks.languages import UnknownLanguageError, group_code

__all__ = ["MtebNotInstalledError", "MtebRunError", "run_mteb", "task_result_rows"]

_INSTALL_HINT = (
    "mteb is not installed: pip install 'xlembed[mteb]' (tested: mteb==2.26.24 with the CPU torch build). "
    "Evaluation runs offline, so the MTEB datasets must also be cached under cache_dir beforehand "
    "(see tasks/evaluate/mteb_bridge.py)."
)


class MtebNotInstalledError(ImportError):
    """mteb is not importable in this environment."""


class MtebRunError(RuntimeError):
    """The MTEB worker process failed; the message ends with its last output lines."""


def _require_mteb() -> None:
    if importlib.util.find_spec("mteb") is None:
        raise MtebNotInstalledError(_INSTALL_HINT)


def run_mteb(
    model_dir: Path,
    task_names: list[str],
    cache_dir: Path,
    *,
    languages: Sequence[str] | None = None,
    batch_size: int = 32,
    device: str = "cpu",
    offline: bool = True,
    on_unknown_language: str = "error",
    timeout_s: float | None = None,
    results_dir: Path | None = None,
) -> list[dict]:
    """Evaluate the encoder in ``model_dir`` on MTEB ``task_names``; metric rows, benchmark="mteb".

    ``languages`` (ISO 639-3 codes, as MTEB takes them) restricts multilingual tasks.
    ``results_dir``: where MTEB writes its own result files (default ``<cache_dir>/mteb-results``).
    ``on_unknown_language``: "error" (default) raises UnknownLanguageError for a subset whose
    language has no FLORES-200 code; "skip" leaves those subsets out with a warning.

    Raises:
        MtebNotInstalledError: mteb is not installed.
        MtebRunError: the MTEB run failed (e.g. a dataset missing from ``cache_dir``).
    """
    if on_unknown_language not in ("error", "skip"):
        raise ValueError(f"on_unknown_language must be 'error' or 'skip', not {on_unknown_language!r}")
    if not task_names:
        raise ValueError("no MTEB tasks given")
    _require_mteb()
    model_dir, cache_dir = Path(model_dir), Path(cache_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HOME=str(cache_dir))
    if offline:
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    with tempfile.TemporaryDirectory() as scratch:
        spec_path, out_path = Path(scratch) / "spec.json", Path(scratch) / "out.json"
        spec = {
            "model_dir": str(model_dir),
            "task_names": list(task_names),
            "languages": list(languages) if languages else None,
            "batch_size": batch_size,
            "device": device,
            "results_dir": str(results_dir or cache_dir / "mteb-results"),
            "out": str(out_path),
        }
        spec_path.write_text(json.dumps(spec))
        repo_root = Path(__file__).resolve().parents[2]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo_root), env.get("PYTHONPATH")]))
        process = subprocess.run(
            [sys.executable, "-m", "tasks.evaluate.mteb_bridge", str(spec_path)],
            env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
        if process.returncode != 0:
            lines = (process.stdout + "\n" + process.stderr).strip().splitlines() or ["(no output)"]
            hint = " (offline: is every dataset cached under cache_dir?)" if offline else ""
            tail = "\n".join(lines[-25:])
            raise MtebRunError(
                f"MTEB run failed with exit code {process.returncode}{hint}: {lines[-1]}\n--- worker output, last lines ---\n{tail}"
            )
        results = json.loads(out_path.read_text())
    rows: list[dict] = []
    for result in results:
        rows += task_result_rows(
            result["task_name"], result["scores"], result["n_samples"], on_unknown_language=on_unknown_language
        )
    return rows


def task_result_rows(
    task_name: str,
    scores: Mapping[str, Sequence[Mapping]],
    n_samples: Mapping[str, Mapping[str, int]] | None = None,
    *,
    on_unknown_language: str = "error",
) -> list[dict]:
    """Metric rows from one MTEB TaskResult's ``scores`` ({split: [scores dict per subset]}).

    ``n_samples``: {split: {hf_subset: count, "__all__": count}}; missing counts give n=-1.
    Raises ValueError when two subsets of a split map to the same languages and metric.
    """
    rows: list[dict] = []
    seen: dict[tuple, str] = {}
    skipped: list[str] = []
    for split, entries in scores.items():
        counts = (n_samples or {}).get(split, {})
        for entry in entries:
            subset = entry["hf_subset"]
            n = counts.get(subset, counts.get("__all__", -1))
            codes = list(entry.get("languages") or [])
            if len(codes) in (1, 2):
                src, tgt = codes[0], (codes[1] if len(codes) == 2 else None)
            else:
                src, tgt = group_code(f"{task_name}:{subset}"), None
            dataset = f"{task_name}.{split}"
            try:
                entry_rows = [
                    metric_row("mteb", dataset, src, tgt, metric, value, n)
                    for metric, value in entry.items()
                    if metric not in ("hf_subset", "languages")
                    and isinstance(value, (int, float))
                    and not isinstance(value, bool)
                    and math.isfinite(value)
                ]
            except UnknownLanguageError:
                if on_unknown_language == "error":
                    raise
                skipped.append(f"{split}/{subset}")
                continue
            for row in entry_rows:
                key = (row["dataset"], row["src_lang"], row["tgt_lang"], row["metric"])
                if key in seen:
                    raise ValueError(f"{task_name}: subsets {seen[key]!r} and {subset!r} both give {key}")
                seen[key] = subset
            rows += entry_rows
    if skipped:
        warnings.warn(
            f"{task_name}: {len(skipped)} subsets without a FLORES-200 language skipped: {', '.join(skipped)}", stacklevel=2
        )
    return rows


def _n_samples(task) -> dict[str, dict[str, int]]:
    """{split: {hf_subset: num_samples, "__all__": num_samples}} from MTEB's descriptive statistics."""
    stats = task.metadata.descriptive_stats or {}  # None when MTEB ships no statistics file
    counts: dict[str, dict[str, int]] = {}
    for split, split_stats in stats.items():
        if not isinstance(split_stats, Mapping):
            continue
        per_split = counts.setdefault(split, {})
        if isinstance(split_stats.get("num_samples"), int):
            per_split["__all__"] = split_stats["num_samples"]
        for subset, subset_stats in (split_stats.get("hf_subset_descriptive_stats") or {}).items():
            if isinstance(subset_stats, Mapping) and isinstance(subset_stats.get("num_samples"), int):
                per_split[subset] = subset_stats["num_samples"]
    return counts


def _worker(spec_path: str) -> None:
    """Child process: load the model, run MTEB, write [{task_name, scores, n_samples}] as JSON."""
    import mteb
    from sentence_transformers import SentenceTransformer

    spec = json.loads(Path(spec_path).read_text())
    tasks = mteb.get_tasks(tasks=spec["task_names"], languages=spec["languages"])
    missing = sorted(set(spec["task_names"]) - {task.metadata.name for task in tasks})
    if missing:
        raise SystemExit(f"unknown MTEB tasks (or none in the requested languages): {', '.join(missing)}")

    with quiet_transformers():
        model = SentenceTransformer(spec["model_dir"], device=spec["device"])
    result = mteb.evaluate(
        model,
        tasks,
        cache=mteb.ResultCache(cache_path=spec["results_dir"]),
        overwrite_strategy="always",
        encode_kwargs={"batch_size": spec["batch_size"]},
        show_progress_bar=False,
    )
    by_name = {task.metadata.name: task for task in tasks}
    out = [
        {"task_name": r.task_name, "scores": r.scores, "n_samples": _n_samples(by_name[r.task_name])} for r in result.task_results
    ]
    Path(spec["out"]).write_text(json.dumps(out, default=float))


if __name__ == "__main__":
    _worker(sys.argv[1])
