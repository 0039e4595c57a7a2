"""BUCC 2018 parallel-sentence mining: the threshold tuned on one split, F1 on another."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from tasks.languages import LangCodes
from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.stage import CONTENT_KEYED, ConfigPath


@register_benchmark
class BuccBenchmark(Benchmark):
    """BUCC 2018 layout: `{xx}-en.{split}.{xx|en}` (id TAB sentence) and `.gold`; threshold tuned on `tune_split`."""

    main_metric: ClassVar[str] = "f1"
    hub_task_type: ClassVar[str] = "bitext-mining"

    kind: Literal["bucc"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=1, description="codes as in the file names: de, fr, ru, zh")
    tune_split: Literal["sample", "training"] = "training"
    test_split: Literal["sample", "training", "test"] = "test"
    k: int = Field(default=4, ge=1)

    def check_files(self) -> None:
        from tasks.evaluate.datasets import read_bucc

        for lang in self.langs:
            read_bucc(self.path, lang, self.tune_split)
            read_bucc(self.path, lang, self.test_split)

    def score(self, evaluation: Evaluation) -> None:
        from tasks.evaluate.datasets import read_bucc
        from tasks.evaluate.mining import bucc_rows

        encode = evaluation.encode
        for lang in self.langs:
            tune = read_bucc(self.path, lang, self.tune_split)
            test = read_bucc(self.path, lang, self.test_split)
            evaluation.context.drop("bucc_duplicate_gold_line", tune.duplicate_gold_lines + test.duplicate_gold_lines)
            for split in (test, tune):  # the rows' dataset names (mining.bucc_rows)
                evaluation.add_sentences("bucc", f"bucc2018.{split.split}", split.src_lang, split.tgt_lang, split.src, split.tgt, aligned=False)
            evaluation.add_rows(
                bucc_rows(
                    tune, encode(tune.src, tune.src_lang), encode(tune.tgt, tune.tgt_lang),
                    test, encode(test.src, test.src_lang), encode(test.tgt, test.tgt_lang), k=self.k,
                )
            )  # fmt: skip
