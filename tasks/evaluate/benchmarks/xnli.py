"""XNLI cross-lingual transfer: fine-tune on English NLI, test accuracy per language (tasks/evaluate/xnli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, register_benchmark
from tasks.stage import CONTENT_KEYED, NOT_KEYED, ConfigPath, file_fingerprint

if TYPE_CHECKING:
    from tasks.evaluate.stage import Evaluation

XNLI_LANGUAGES = ("en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur")


@register_benchmark
class XnliBenchmark(Benchmark):
    """XNLI cross-lingual transfer (WACSE Table 7, DAP Table 4): fine-tune the encoder and a linear
    head on English NLI pairs, pick the learning rate on dev, report test accuracy per language.
    Defaults are the papers' settings; see tasks/evaluate/xnli.py."""

    main_metric: ClassVar[str] = "accuracy"  # at the learning rate picked on dev (not the accuracy@lr=... rows)

    kind: Literal["xnli"]
    path: ConfigPath | None = Field(default=None, json_schema_extra=CONTENT_KEYED, description="folder with xnli.dev.tsv and xnli.test.tsv (or .jsonl); unset: the datasets library")
    train_file: ConfigPath | None = Field(
        default=None, json_schema_extra=CONTENT_KEYED, description="English NLI training pairs: MultiNLI .jsonl/.txt or XNLI-MT .tsv; unset: XNLI's English train split (datasets)"
    )
    langs: list[str] = Field(default_factory=lambda: list(XNLI_LANGUAGES), min_length=1, description="XNLI language codes, as in the files")
    mode: Literal["cross_encoder", "bi_encoder"] = Field(
        default="cross_encoder", description="cross_encoder: the pair concatenated, as the papers; bi_encoder: head on [u, v, |u-v|, u*v]"
    )
    learning_rates: list[float] = Field(default_factory=lambda: [1e-5, 3e-5, 5e-5, 7e-5], min_length=1)
    batch_size: int = Field(default=256, ge=1)
    max_length: int = Field(default=128, ge=8, le=8192)
    epochs: int = Field(default=2, ge=1)
    weight_decay: float = Field(default=0.0, ge=0.0)
    warmup_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    select_on: Literal["all_dev", "english_dev"] = Field(default="all_dev", description="dev accuracy that picks the learning rate: mean over langs, or English only")
    max_train_pairs: int | None = Field(default=None, ge=1, description="a seeded sample of the training pairs (cpu-small runs)")
    max_eval_pairs: int | None = Field(default=None, ge=1, description="first N pairs per language of dev and of test")
    seed: int = 0
    micro_batch_size: int | None = Field(default=None, ge=1, json_schema_extra=NOT_KEYED, description="split each batch for memory (gradients accumulate)")
    eval_batch_size: int = Field(default=256, ge=1, json_schema_extra=NOT_KEYED)

    def check_files(self) -> None:
        if self.path and self.train_file:  # without either, the data come from the datasets library
            from tasks.evaluate.xnli import load_xnli_data

            load_xnli_data(self)

    def fingerprint(self) -> dict[str, Any]:
        prints = {}
        if self.train_file:  # the training pairs live outside `path`
            prints[":train_file"] = file_fingerprint(Path(self.train_file).expanduser())
        return prints | super().fingerprint()

    def score(self, evaluation: Evaluation) -> None:
        from tasks.evaluate.xnli import xnli_rows

        context = evaluation.context
        evaluation.add_rows(xnli_rows(evaluation.model_dir, self, evaluation.config.encoder, progress=context.progress, drop=context.drop))
