"""Named MTEB tasks, run through the `mteb` package (tasks/evaluate/mteb_bridge.py)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.stage import NOT_KEYED, ConfigPath


@register_benchmark
class MtebBenchmark(Benchmark):
    """Named MTEB tasks through the `mteb` package (its datasets must already be cached)."""

    main_metric: ClassVar[str] = "main_score"  # each MTEB task names its own main score

    kind: Literal["mteb"]
    tasks: list[str] = Field(min_length=1)
    cache_dir: ConfigPath = Field(
        default="~/.cache/huggingface", json_schema_extra=NOT_KEYED, description="the Hugging Face cache that holds the MTEB datasets"
    )

    def score(self, evaluation: Evaluation) -> None:
        from tasks.evaluate.mteb_bridge import run_mteb

        evaluation.add_rows(run_mteb(evaluation.model_dir, list(self.tasks), Path(self.cache_dir).expanduser()))
