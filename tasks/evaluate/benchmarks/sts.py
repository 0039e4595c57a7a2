"""Semantic textual similarity: Spearman correlation of cosines with gold scores."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.stage import CONTENT_KEYED, ConfigPath

if TYPE_CHECKING:
    from tasks.evaluate.datasets import StsPairs


@register_benchmark
class StsBenchmark(Benchmark):
    """STS: SemEval 2017 track files (`STS.input.track*.txt` + `STS.gs.track*.txt`) or `s1 TAB s2 TAB score` TSV."""

    main_metric: ClassVar[str] = "spearman"

    kind: Literal["sts"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    layout: Literal["semeval2017", "tsv"] = "semeval2017"
    langs: list[str] | None = Field(default=None, description="for tsv: [src, tgt] language codes")

    def check_files(self) -> None:
        if self.layout == "semeval2017" or (self.langs and len(self.langs) == 2):
            self.read()

    def read(self) -> list[StsPairs]:
        from tasks.evaluate.datasets import read_sts2017_folder, read_sts_tsv

        if self.layout == "semeval2017":
            return read_sts2017_folder(self.path)
        if not self.langs or len(self.langs) != 2:
            raise ValueError("evaluate: an STS tsv benchmark needs langs = [src, tgt]")
        return [read_sts_tsv(self.path, self.langs[0], self.langs[1])]

    def score(self, evaluation: Evaluation) -> None:
        for pairs in self.read():
            evaluation.context.drop("sts_unscored_pair", pairs.unscored_dropped)
            evaluation.add_sentences("sts", pairs.dataset, pairs.src_lang, pairs.tgt_lang, pairs.sentence1, pairs.sentence2)
            evaluation.add_sts(
                "sts", pairs.dataset, pairs.src_lang, pairs.tgt_lang,
                evaluation.encode(pairs.sentence1, pairs.src_lang), evaluation.encode(pairs.sentence2, pairs.tgt_lang), pairs.scores,
            )  # fmt: skip
