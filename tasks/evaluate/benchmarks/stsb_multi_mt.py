"""stsb-multi-mt: the STS benchmark's pairs machine-translated into several languages, line-aligned,
scored within each language and across languages (the pivot's sentence 1 with the other
language's sentence 2, the pivot's gold score)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.languages import LangCodes
from tasks.stage import CONTENT_KEYED, ConfigPath

if TYPE_CHECKING:
    from tasks.evaluate.datasets import StsPairs


@register_benchmark
class StsbMultiMtBenchmark(Benchmark):
    """A folder of `stsb-{code}-{split}.csv` files (`sentence1,sentence2,score`, row i the same
    pair in every language). Dataset `stsb-multi-mt-{split}`: one set per language, both sentences
    in that language. With `cross_lingual`, dataset `stsb-multi-mt-{split}-cross`: one set per
    other language, the pivot's sentence 1 against that language's sentence 2."""

    main_metric: ClassVar[str] = "spearman"
    row_benchmark: ClassVar[str | None] = "sts"

    kind: Literal["stsb_multi_mt"]
    path: ConfigPath = Field(json_schema_extra=CONTENT_KEYED)
    split: str = Field(default="dev", pattern=r"^[a-z]+$", description="the split named in the file names")
    langs: LangCodes | None = Field(default=None, description="codes as in the file names (en, de, ...); unset: every file")
    pivot: str = Field(default="en", description="the language of sentence 1 in the cross-lingual sets")
    cross_lingual: bool = True
    max_pairs: int | None = Field(
        default=None, ge=2, description="the first N pairs of each set only (cheaper CPU sweeps, wider intervals); unset: all"
    )

    def dataset(self, cross: bool) -> str:
        return f"stsb-multi-mt-{self.split}" + ("-cross" if cross else "")

    def languages(self) -> list[str]:
        from tasks.evaluate.datasets import BenchmarkDataError, stsb_multi_mt_languages

        found = stsb_multi_mt_languages(self.path, self.split)
        if self.langs is None:
            if not found:
                raise BenchmarkDataError(self.path, None, f"no stsb-{{code}}-{self.split}.csv files")
            return found
        return list(self.langs)

    def read(self) -> tuple[dict[str, StsPairs], StsPairs | None]:
        """(each language's pairs, the pivot's pairs when cross-lingual sets are scored). Files
        of the pivot and another language that disagree in length or gold are an error: they are
        not line-aligned, so a cross pair would join two different pairs."""
        from tasks.evaluate.datasets import STSB_MULTI_MT_PATTERN, BenchmarkDataError, read_stsb_multi_mt

        sets = {code: read_stsb_multi_mt(self.path, code, self.split) for code in self.languages()}
        if not self.cross_lingual:
            return sets, None
        pivot = sets.get(self.pivot) or read_stsb_multi_mt(self.path, self.pivot, self.split)
        for code, pairs in sets.items():
            if len(pairs) != len(pivot) or (pairs.scores != pivot.scores).any():
                line = next((i + 1 for i, (a, b) in enumerate(zip(pairs.scores, pivot.scores)) if a != b), min(len(pairs), len(pivot)) + 1)
                raise BenchmarkDataError(
                    Path(self.path) / STSB_MULTI_MT_PATTERN.format(code=code, split=self.split), line,
                    f"not line-aligned with the pivot's {pivot.dataset} ({len(pairs)} and {len(pivot)} rows; scores differ from line {line})",
                    "score",
                )  # fmt: skip
        return sets, pivot

    def check_files(self) -> None:
        self.read()

    def _first(self, evaluation: Evaluation | None, pairs: StsPairs) -> StsPairs:
        """The first `max_pairs` pairs; the rest are counted as dropped (once per language: `evaluation`)."""
        import dataclasses

        n = self.max_pairs or len(pairs)
        if len(pairs) <= n:
            return pairs
        if evaluation is not None:
            evaluation.context.drop("sts_pair_beyond_max_pairs", len(pairs) - n)
        return dataclasses.replace(pairs, sentence1=pairs.sentence1[:n], sentence2=pairs.sentence2[:n], scores=pairs.scores[:n])

    def score(self, evaluation: Evaluation) -> None:
        sets, pivot = self.read()
        if self.max_pairs is not None:
            sets = {code: self._first(evaluation, pairs) for code, pairs in sets.items()}
            pivot = None if pivot is None else self._first(None, pivot)
        benchmark = self.rows_name()
        for pairs in sets.values():
            lang = pairs.src_lang
            evaluation.add_sentences(benchmark, self.dataset(False), lang, lang, pairs.sentence1, pairs.sentence2)
            evaluation.add_sts(
                benchmark, self.dataset(False), lang, lang,
                evaluation.encode(pairs.sentence1, lang), evaluation.encode(pairs.sentence2, lang), pairs.scores,
            )  # fmt: skip
        if pivot is None:
            return
        for pairs in sets.values():
            if pairs.src_lang == pivot.src_lang:
                continue
            src, tgt = pivot.src_lang, pairs.src_lang
            evaluation.add_sentences(benchmark, self.dataset(True), src, tgt, pivot.sentence1, pairs.sentence2)
            evaluation.add_sts(
                benchmark, self.dataset(True), src, tgt,
                evaluation.encode(pivot.sentence1, src), evaluation.encode(pairs.sentence2, tgt), pivot.scores,
            )  # fmt: skip
