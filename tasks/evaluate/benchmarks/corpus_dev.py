"""Bitext retrieval on the held-out `dev` split of the pipeline's own multi-way corpus."""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.figures import WordMap
from tasks.evaluate.retrieval import score_pair, xx_yy_rows
from tasks.languages import to_flores

if TYPE_CHECKING:
    import polars as pl


@register_benchmark
class CorpusDevBenchmark(Benchmark):
    """Bitext retrieval on the corpus artifact's held-out `dev` split: pivot vs every other language
    and, with `pairs = "all"`, every two other languages on the rows that have both."""

    main_metric: ClassVar[str] = "accuracy_mean"
    row_benchmark: ClassVar[str | None] = "retrieval"
    item_metric: ClassVar[str | None] = "accuracy_mean"
    in_domain: ClassVar[bool] = True
    hub_task_type: ClassVar[str] = "bitext-mining"

    kind: Literal["corpus_dev"]
    pivot: str = "eng_Latn"
    max_groups: int | None = Field(default=None, ge=2)
    pairs: Literal["pivot", "all"] = Field(default="pivot", description="all: also every pair of two non-pivot languages")

    def score(self, evaluation: Evaluation) -> None:
        import polars as pl

        pivot = to_flores(self.pivot)
        # the multi-way corpus: NLLB's translations when the pipeline translates, else the corpus
        inputs = evaluation.inputs
        corpus = inputs["translate"] if "translate" in inputs else inputs["corpus"]
        dev = pl.from_arrow(corpus.read_table(["group_id", "lang", "text", "split"])).filter(pl.col("split") == "dev")
        wide = dev.pivot(on="lang", index="group_id", values="text").sort("group_id")
        if pivot not in wide.columns:
            raise ValueError(f"evaluate: the corpus dev split has no {pivot} rows to pair with")
        if self.max_groups is not None:
            wide = wide.head(self.max_groups)
        langs = sorted(c for c in wide.columns if c not in ("group_id", pivot))
        pairs_to_score = [(lang, pivot) for lang in langs] + (list(combinations(langs, 2)) if self.pairs == "all" else [])
        scores = []
        for src_lang, tgt_lang in pairs_to_score:
            pairs = wide.select(src_lang, tgt_lang).drop_nulls()  # the groups that have both languages
            if pairs.height < 2:
                evaluation.context.drop("corpus_dev_pair_too_small", pairs.height)
                continue
            src, tgt = (
                evaluation.encode(pairs[src_lang].to_list(), src_lang),
                evaluation.encode(pairs[tgt_lang].to_list(), tgt_lang),
            )
            scores.append(score_pair(src, tgt, src_lang=src_lang, tgt_lang=tgt_lang, dataset="corpus-dev"))
            evaluation.add_sentences(
                "retrieval", "corpus-dev", src_lang, tgt_lang, pairs[src_lang].to_list(), pairs[tgt_lang].to_list()
            )
            if tgt_lang == pivot:
                evaluation.add_pair(src_lang, tgt_lang, src, tgt)
        evaluation.add_scores(scores)
        evaluation.add_rows(xx_yy_rows(scores, pivot))
        if evaluation.config.word_map_concepts and evaluation.word_map is None:
            evaluation.word_map = word_map(evaluation, wide, pivot)


def word_map(evaluation: Evaluation, wide: pl.DataFrame, pivot: str) -> Any:
    """Single-word concepts (the pivot text has no space) with their translations, for the report's embedding map."""
    import polars as pl

    langs = [c for c in wide.columns if c != "group_id"]
    single = wide.filter(~pl.col(pivot).str.contains(r"\s") & (pl.sum_horizontal(pl.col(langs).is_not_null()) >= 3))
    chosen = single.head(evaluation.config.word_map_concepts)
    long = chosen.unpivot(on=langs, index=[pivot], variable_name="lang", value_name="word").drop_nulls("word")
    if long.height == 0:
        return None
    words = long["word"].to_list()
    return WordMap(words=words, langs=long["lang"].to_list(), concept=long[pivot].to_list(), vectors=evaluation.encode(words))
