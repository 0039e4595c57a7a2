"""Named MTEB tasks, run through the `mteb` package (tasks/evaluate/mteb_bridge.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from storage.user_cache import user_cache_home
from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.mteb_bridge import run_mteb
from tasks.stage_config import NOT_KEYED, ConfigPath


def default_hugging_face_cache() -> str:
    """Where the Hugging Face libraries look by default: `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`."""
    return os.environ.get("HF_HOME") or str(user_cache_home() / "huggingface")


@register_benchmark
class MtebBenchmark(Benchmark):
    """Named MTEB tasks through the `mteb` package (its datasets must already be cached)."""

    main_metric: ClassVar[str] = "main_score"  # each MTEB task names its own main score

    kind: Literal["mteb"]
    tasks: list[str] = Field(min_length=1)
    cache_dir: ConfigPath = Field(
        default_factory=default_hugging_face_cache,
        json_schema_extra=NOT_KEYED,
        description="the Hugging Face cache that holds the MTEB datasets",
    )

    def required_extras(self) -> list[tuple[str, str]]:
        return [("mteb", 'benchmark kind = "mteb"')]

    def score(self, evaluation: Evaluation) -> None:
        import shutil

        # MTEB's own result files, kept in the evaluate artifact (`mteb/bridge/`); the base, scored
        # first beside a trained model, leaves its files here too, so each run starts from an empty folder
        results = evaluation.context.workdir / "mteb" / "bridge"
        shutil.rmtree(results, ignore_errors=True)
        results.mkdir(parents=True)
        evaluation.add_rows(
            run_mteb(evaluation.model_dir, list(self.tasks), Path(self.cache_dir).expanduser(), results_dir=results)
        )
        evaluation.context.attach_dir(results, prefix="mteb/bridge/")
