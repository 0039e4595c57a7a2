"""Bitext retrieval on held-out rows of a line-aligned multi-way folder (FLORES-200 dev)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from tasks.languages import LangCodes, to_flores
from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.stage import CONTENT_KEYED, ConfigPath


@register_benchmark
class MultiwayBenchmark(Benchmark):
    """Bitext retrieval between `pivot` and every other language of a line-aligned folder
    (FLORES-200 `{code}.dev`), on held-out rows [row_start, row_stop); with `pairs = "all"`
    also between every two other languages (and a `group:xx-yy` mean over those pairs)."""

    main_metric: ClassVar[str] = "accuracy_mean"
    row_benchmark: ClassVar[str | None] = "retrieval"
    item_metric: ClassVar[str | None] = "accuracy_mean"
    in_domain: ClassVar[bool] = True  # held-out rows of the data the encoder is trained on
    hub_task_type: ClassVar[str] = "bitext-mining"

    kind: Literal["multiway"]
    name: str = "flores200-dev"
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    langs: LangCodes = Field(min_length=2)
    pattern: str = "{code}.dev"
    pivot: str = "eng_Latn"
    row_start: int = Field(default=0, ge=0)
    row_stop: int | None = Field(default=None, ge=1)
    pairs: Literal["pivot", "all"] = Field(default="pivot", description="all: also every pair of two non-pivot languages")

    def check_files(self) -> None:
        from tasks.evaluate.datasets import read_multiway_rows

        read_multiway_rows(self.path, self.langs, slice(self.row_start, self.row_stop), pattern=self.pattern)

    def score(self, evaluation: Evaluation) -> None:
        from tasks.evaluate.datasets import read_multiway_rows
        from tasks.evaluate.retrieval import multiway_pair_scores, xx_yy_rows

        data = read_multiway_rows(self.path, self.langs, slice(self.row_start, self.row_stop), pattern=self.pattern)
        pivot = to_flores(self.pivot)
        if pivot not in data.sentences:
            raise ValueError(f"evaluate: multiway pivot {pivot} is not among langs {list(data.sentences)}")
        embeddings = {lang: evaluation.encode(texts, lang) for lang, texts in data.sentences.items()}
        scores = multiway_pair_scores(embeddings, dataset=self.name, pivot=pivot, xx_yy=self.pairs == "all")
        evaluation.add_scores(scores)
        for scored in scores:
            evaluation.add_sentences(
                scored.benchmark, scored.dataset, scored.src_lang, scored.tgt_lang,
                data.sentences[scored.src_lang], data.sentences[scored.tgt_lang],
            )  # fmt: skip
        evaluation.add_rows(xx_yy_rows(scores, pivot))
        for lang in embeddings:
            if lang != pivot:
                evaluation.add_pair(lang, pivot, embeddings[lang], embeddings[pivot])
