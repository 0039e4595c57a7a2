"""Semantic textual similarity: Spearman correlation of cosines with gold scores."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.datasets import BenchmarkDataError, look_at, parsed_once, read_lines, same_line_counts
from tasks.languages import to_flores
from tasks.stage_config import CONTENT_KEYED, ConfigPath

# SemEval-2017 Task 1 tracks (Cer et al., 2017): track -> (language of sentence 1, of sentence 2).
# Used when a file name carries no "l1-l2" part; a pair in the file name wins. track4b is the
# WMT-quality-estimation Spanish-English track, with the same languages as track4a.
STS2017_TRACK_LANGUAGES: Mapping[str, tuple[str, str]] = {
    "track1": ("ar", "ar"),
    "track2": ("ar", "en"),
    "track3": ("es", "es"),
    "track4a": ("es", "en"),
    "track4b": ("es", "en"),
    "track5": ("en", "en"),
    "track6": ("tr", "en"),
}

_STS_TRACK = re.compile(r"^STS\.(?:input|gs)\.(track[0-9]+[a-z]?)(?:\.([A-Za-z_]+)-([A-Za-z_]+))?\.txt$")


# ------------------------------------------------------------------ reading: STS


@dataclass(frozen=True)
class StsPairs:
    """Sentence pairs with gold similarity scores (unscored pairs already removed)."""

    dataset: str  # e.g. "STS.input.track5.en-en"
    src_lang: str  # FLORES-200 code of sentence 1
    tgt_lang: str  # FLORES-200 code of sentence 2
    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    scores: np.ndarray  # float64, one per pair
    unscored_dropped: int = 0  # pairs whose gold line was empty

    def __len__(self) -> int:
        return len(self.sentence1)


def _parse_score(path: Path, number: int, text: str, field_name: str = "score") -> float:
    try:
        value = float(text)
    except ValueError:
        raise BenchmarkDataError(path, number, f"not a number: {text!r}", field_name) from None
    if not math.isfinite(value):
        raise BenchmarkDataError(path, number, f"not a finite number: {text!r}", field_name)
    return value


def _split_pair(path: Path, number: int, line: str, n_fields: int) -> list[str]:
    fields = line.split("\t")
    if len(fields) != n_fields:
        raise BenchmarkDataError(path, number, f"expected {n_fields} tab-separated fields, found {len(fields)}")
    for name, value in zip(("sentence1", "sentence2"), fields):
        if not value.strip():
            raise BenchmarkDataError(path, number, "empty", name)
    return fields


@parsed_once
def read_sts2017(
    input_path: str | Path, gold_path: str | Path | None = None, languages: tuple[str, str] | None = None
) -> StsPairs:
    """One SemEval-2017 STS track: ``STS.input.track*.txt`` and its ``STS.gs.track*.txt``.

    ``gold_path`` defaults to the input name with ``STS.input.`` replaced by ``STS.gs.``.
    Languages come from ``languages`` if given, else from the ``l1-l2`` part of the file name,
    else from :data:`STS2017_TRACK_LANGUAGES`. Empty gold lines mean "unscored" in SemEval
    data: those pairs are dropped and counted in ``unscored_dropped``.

    Raises:
        BenchmarkDataError: line counts differ (names both files and counts); an input line
            without exactly two fields or with an empty sentence; a gold value that is not a number.
    """
    input_path = Path(input_path)
    gold_path = (
        Path(gold_path) if gold_path is not None else input_path.with_name(input_path.name.replace("STS.input.", "STS.gs.", 1))
    )
    match = _STS_TRACK.match(input_path.name)
    if languages is None:
        if match and match.group(2):
            languages = (match.group(2), match.group(3))
        elif match and match.group(1) in STS2017_TRACK_LANGUAGES:
            languages = STS2017_TRACK_LANGUAGES[match.group(1)]
        else:
            raise ValueError(f"cannot tell the languages of {input_path}: pass languages=(l1, l2)")
    src_lang, tgt_lang = to_flores(languages[0]), to_flores(languages[1])
    inputs, gold = read_lines(input_path), read_lines(gold_path)
    same_line_counts({input_path: inputs, gold_path: gold})
    sentence1: list[str] = []
    sentence2: list[str] = []
    scores: list[float] = []
    unscored = 0
    for number, (line, gold_line) in enumerate(zip(inputs, gold), 1):
        first, second = _split_pair(input_path, number, line, 2)
        if not gold_line.strip():
            unscored += 1
            continue
        scores.append(_parse_score(gold_path, number, gold_line.strip()))
        sentence1.append(first)
        sentence2.append(second)
    if not scores:
        raise BenchmarkDataError(gold_path, None, "no scored pairs")
    name = input_path.name.removesuffix(".txt")
    return StsPairs(name, src_lang, tgt_lang, tuple(sentence1), tuple(sentence2), np.array(scores, dtype=np.float64), unscored)


@parsed_once
def read_sts2017_folder(folder: str | Path, languages: Mapping[str, tuple[str, str]] | None = None) -> list[StsPairs]:
    """Every ``STS.input.track*.txt`` in ``folder`` with its gold file, sorted by name.

    ``languages`` maps a track name (``track4a``) to its (l1, l2), overriding file names and
    :data:`STS2017_TRACK_LANGUAGES`.
    """
    found = []
    look_at(folder)
    for path in sorted(Path(folder).glob("STS.input.track*.txt")):
        match = _STS_TRACK.match(path.name)
        override = languages.get(match.group(1)) if (languages and match) else None
        found.append(read_sts2017(path, languages=override))
    if not found:
        raise BenchmarkDataError(folder, None, "no STS.input.track*.txt files")
    return found


@parsed_once
def read_sts_tsv(
    path: str | Path, src_lang: str, tgt_lang: str, *, header: bool | None = None, dataset: str | None = None
) -> StsPairs:
    """``sentence1<TAB>sentence2<TAB>score`` lines; an empty score = unscored (dropped, counted).

    ``header=None`` detects a header: a first line whose score field is not a number.

    Raises:
        BenchmarkDataError: a line without exactly three fields, an empty sentence, a score
            that is not a number (all naming file and line).
    """
    path = Path(path)
    lines = read_lines(path)
    start = 0
    if lines:
        first = lines[0].split("\t")
        if header is None:
            header = len(first) == 3 and not _is_number(first[2])
        start = 1 if header else 0
    sentence1: list[str] = []
    sentence2: list[str] = []
    scores: list[float] = []
    unscored = 0
    for number in range(start + 1, len(lines) + 1):
        first, second, score = _split_pair(path, number, lines[number - 1], 3)
        if not score.strip():
            unscored += 1
            continue
        scores.append(_parse_score(path, number, score.strip()))
        sentence1.append(first)
        sentence2.append(second)
    if not scores:
        raise BenchmarkDataError(path, None, "no scored pairs")
    name = dataset or path.name
    return StsPairs(
        name, to_flores(src_lang), to_flores(tgt_lang), tuple(sentence1), tuple(sentence2), np.array(scores), unscored
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
