"""Bitext retrieval on held-out rows of a line-aligned multi-way folder (FLORES-200 dev)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.datasets import BenchmarkDataError, parsed_once, read_lines, same_line_counts
from tasks.evaluate.retrieval import multiway_pair_scores, xx_yy_rows
from tasks.languages import LangCodes, to_flores
from tasks.stage_config import CONTENT_KEYED, ConfigPath

# ------------------------------------------------------------------ reading: FLORES-200 multi-way


@dataclass(frozen=True)
class MultiwayRows:
    """The same rows of line-aligned files in several languages."""

    rows: range  # line indices (0-based) into the files
    sentences: Mapping[str, tuple[str, ...]]  # FLORES-200 code -> sentences of those rows
    total_lines: int  # lines in each file

    @property
    def langs(self) -> tuple[str, ...]:
        return tuple(self.sentences)

    def __len__(self) -> int:
        return len(self.rows)


def held_out_rows(total_lines: int, fraction: float = 0.2) -> range:
    """The last ``fraction`` of ``total_lines`` rows (at least one), e.g. a held-out evaluation set."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    keep = max(1, round(total_lines * fraction))
    return range(total_lines - keep, total_lines)


@parsed_once
def read_multiway_rows(
    path: str | Path, langs: Sequence[str], rows: range | slice, *, pattern: str = "{code}.dev"
) -> MultiwayRows:
    """Rows ``rows`` of the line-aligned file ``pattern.format(code=lang)`` of each of ``langs``.

    ``langs`` are the codes as they appear in the file names (FLORES-200: ``kaz_Cyrl.dev``);
    the result is keyed by their FLORES-200 codes. A ``slice`` is resolved against the line
    count (``slice(-200, None)`` = the last 200 lines; see also :func:`held_out_rows`); a
    ``range`` must lie inside the files.

    Raises:
        BenchmarkDataError: missing file, files with different line counts (all named with
            their counts), an empty line among the selected rows, a range past the end.
        UnknownLanguageError: a code without a FLORES-200 code.
    """
    if "{code}" not in pattern:
        raise ValueError(f"pattern {pattern!r} has no {{code}}")
    folder = Path(path)
    if not langs:
        raise ValueError("no languages given")
    codes = {to_flores(lang): folder / pattern.format(code=lang) for lang in langs}
    if len(codes) != len(langs):
        raise ValueError(f"languages given twice (after mapping to FLORES-200): {list(langs)}")
    files = {file: read_lines(file) for file in codes.values()}
    same_line_counts(files)
    total = len(next(iter(files.values())))
    if total == 0:
        raise BenchmarkDataError(next(iter(files)), None, "empty file (no lines)")
    if isinstance(rows, slice):
        selected = range(*rows.indices(total))
    else:
        selected = rows
        if len(selected) and (min(selected) < 0 or max(selected) >= total):
            raise BenchmarkDataError(next(iter(files)), None, f"rows {selected} outside the {total} lines of the files")
    if len(selected) == 0:
        raise ValueError(f"rows {rows} select nothing from {total} lines")
    sentences: dict[str, tuple[str, ...]] = {}
    for code, file in codes.items():
        lines = files[file]
        chosen = tuple(lines[i] for i in selected)
        for i, text in zip(selected, chosen):
            if not text.strip():
                raise BenchmarkDataError(file, i + 1, "empty line (rows are aligned across languages)", code)
        sentences[code] = chosen
    return MultiwayRows(selected, sentences, total)


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
        read_multiway_rows(self.path, self.langs, slice(self.row_start, self.row_stop), pattern=self.pattern)

    def score(self, evaluation: Evaluation) -> None:

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
