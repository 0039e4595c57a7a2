"""stsb-multi-mt: the STS benchmark's pairs machine-translated into several languages, line-aligned,
scored within each language and across languages (the pivot's sentence 1 with the other
language's sentence 2, the pivot's gold score)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.benchmarks.sts import StsPairs, _parse_score
from tasks.evaluate.datasets import BenchmarkDataError, look_at, parsed_once
from tasks.languages import LangCodes, to_flores
from tasks.stage_config import CONTENT_KEYED, ConfigPath

STSB_MULTI_MT_PATTERN = "stsb-{code}-{split}.csv"


def stsb_multi_mt_languages(folder: str | Path, split: str = "dev") -> list[str]:
    """The language codes of the ``stsb-{code}-{split}.csv`` files in ``folder``, sorted."""
    folder = Path(folder)
    look_at(folder)
    if not folder.is_dir():
        raise BenchmarkDataError(folder, None, "folder not found")
    name = re.compile(rf"^stsb-([A-Za-z_-]+)-{re.escape(split)}\.csv$")
    return sorted(m.group(1) for p in folder.iterdir() if (m := name.match(p.name)))


@parsed_once
def read_stsb_multi_mt(folder: str | Path, code: str, split: str = "dev") -> StsPairs:
    """One language of stsb-multi-mt (``stsb-{code}-{split}.csv``: CSV rows ``sentence1,sentence2,score``,
    quoted where a sentence holds a comma; no header). The languages' files are line-aligned: row i
    is the same pair translated, with the same gold score.

    Raises:
        BenchmarkDataError: a row without exactly three fields, an empty sentence, a score that is
            not a number, invalid UTF-8 (all naming file and line); a file with no rows.
    """
    import csv
    import io

    path = Path(folder) / STSB_MULTI_MT_PATTERN.format(code=code, split=split)
    look_at(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BenchmarkDataError(path, None, "file not found") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BenchmarkDataError(path, data.count(b"\n", 0, error.start) + 1, f"invalid UTF-8 at byte {error.start}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    sentence1: list[str] = []
    sentence2: list[str] = []
    scores: list[float] = []
    try:
        for row in reader:
            number = reader.line_num
            if len(row) != 3:
                raise BenchmarkDataError(
                    path, number, f"expected 3 comma-separated fields (sentence1,sentence2,score), found {len(row)}"
                )
            for name, value in zip(("sentence1", "sentence2"), row):
                if not value.strip():
                    raise BenchmarkDataError(path, number, "empty", name)
            scores.append(_parse_score(path, number, row[2].strip()))
            sentence1.append(row[0])
            sentence2.append(row[1])
    except csv.Error as error:
        raise BenchmarkDataError(path, reader.line_num, f"malformed CSV: {error}") from None
    if not scores:
        raise BenchmarkDataError(path, None, "no scored pairs")
    lang = to_flores(code)
    return StsPairs(path.name, lang, lang, tuple(sentence1), tuple(sentence2), np.array(scores, dtype=np.float64))


@register_benchmark
class StsbMultiMtBenchmark(Benchmark):
    """A folder of `stsb-{code}-{split}.csv` files (`sentence1,sentence2,score`, row i the same
    pair in every language). Dataset `stsb-multi-mt-{split}`: one set per language, both sentences
    in that language. With `cross_lingual`, dataset `stsb-multi-mt-{split}-cross`: one set per
    other language, the pivot's sentence 1 against that language's sentence 2."""

    main_metric: ClassVar[str] = "spearman"
    row_benchmark: ClassVar[str | None] = "sts"
    supports_subset: ClassVar[bool] = True
    subset_unit: ClassVar[str] = "sentence pairs (the same rows in every language)"

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
        sets = {code: read_stsb_multi_mt(self.path, code, self.split) for code in self.languages()}
        if not self.cross_lingual:
            return sets, None
        pivot = sets.get(self.pivot) or read_stsb_multi_mt(self.path, self.pivot, self.split)
        for code, pairs in sets.items():
            if len(pairs) != len(pivot) or (pairs.scores != pivot.scores).any():
                line = next(
                    (i + 1 for i, (a, b) in enumerate(zip(pairs.scores, pivot.scores)) if a != b), min(len(pairs), len(pivot)) + 1
                )
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
        # the files are line-aligned: one sample of rows for every language and the pivot, so a
        # cross-lingual set still pairs a sentence with its own translation's partner
        chosen = self.subset_indices(len(next(iter(sets.values()))), f"stsb-multi-mt-{self.split}")
        if chosen is not None:
            for pairs in sets.values():
                evaluation.context.drop("sts_pair_outside_subset", len(pairs) - len(chosen))
            sets = {code: _rows(pairs, chosen) for code, pairs in sets.items()}
            pivot = None if pivot is None else _rows(pivot, chosen)
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


def _rows(pairs: StsPairs, indices: np.ndarray) -> StsPairs:
    """The pairs at `indices` (sorted), in order."""
    import dataclasses

    return dataclasses.replace(
        pairs,
        sentence1=tuple(pairs.sentence1[i] for i in indices),
        sentence2=tuple(pairs.sentence2[i] for i in indices),
        scores=pairs.scores[indices],
    )
