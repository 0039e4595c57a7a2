"""BUCC 2018 parallel-sentence mining: the threshold tuned on one split, F1 on another."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from tasks.evaluate.benchmarks.registry import Benchmark, Evaluation, register_benchmark
from tasks.evaluate.datasets import (
    BenchmarkDataError,
    BuccSplit,
    Lines,
    blank_values,
    line_positions,
    look_at,
    parsed_once,
    read_line_array,
)
from tasks.evaluate.mining import bucc_rows
from tasks.languages import LangCodes, to_flores
from tasks.stage_config import CONTENT_KEYED, ConfigPath

BUCC_SPLITS = ("sample", "training", "test")

# ------------------------------------------------------------------ reading: BUCC 2018


def _tab_fields(lines: pa.Array) -> tuple[pa.Array, pa.Array, int]:
    """(first fields, second fields, lines with a tab) of ``a<TAB>b`` lines, split at the first tab:
    the lines before the first line without a tab (the caller reports that line unless one
    before it is wrong in another way: lines are checked in order)."""
    parts = pc.split_pattern(lines, "\t", max_splits=1)
    no_tab = np.flatnonzero(pc.list_value_length(parts).to_numpy(zero_copy_only=False) < 2)
    good = int(no_tab[0]) if len(no_tab) else len(lines)
    parts = parts.slice(0, good)
    return pc.list_element(parts, 0), pc.list_element(parts, 1), good


def _bucc_sentences(path: Path) -> tuple[Lines, Lines]:
    """(ids, sentences) of an ``id<TAB>sentence`` file; the first bad line (no tab, an empty id
    or sentence, an id seen before) is an error naming it, the same checks in the same order
    as a loop over the lines would make, done on the columns."""
    lines = read_line_array(path)
    ids, sentences, good = _tab_fields(lines)
    empty_id, empty_sentence = blank_values(ids), blank_values(sentences)
    codes = ids.dictionary_encode().indices.to_numpy(zero_copy_only=False)  # numbered in order of first appearance:
    duplicate = codes <= np.maximum.accumulate(np.concatenate([[-1], codes[:-1]]))  # a line whose id is not new is a repeat
    bad = np.flatnonzero(empty_id | empty_sentence | duplicate)
    if len(bad):
        i = int(bad[0])
        sentence_id = ids[i].as_py()
        if empty_id[i]:
            raise BenchmarkDataError(path, i + 1, "empty", "id")
        if empty_sentence[i]:
            raise BenchmarkDataError(path, i + 1, f"empty sentence for id {sentence_id!r}", "sentence")
        first = int(np.flatnonzero(codes == codes[i])[0])
        raise BenchmarkDataError(path, i + 1, f"duplicate id {sentence_id!r} (first on line {first + 1})", "id")
    if good < len(lines):
        raise BenchmarkDataError(path, good + 1, "no tab: expected id<TAB>sentence")
    if not len(ids):
        raise BenchmarkDataError(path, None, "no sentences")
    return Lines(ids), Lines(sentences)


@parsed_once
def read_bucc(folder: str | Path, lang: str, split: str, *, with_gold: bool = True) -> BuccSplit:
    """BUCC 2018 ``{lang}-en`` ``split`` (sample, training or test) from ``folder``.

    ``lang`` is the BUCC code (de, fr, ru, zh). Files are looked up in ``folder`` and then in
    ``folder/{lang}-en/``. ``with_gold=False`` reads a split whose gold is not available
    (``gold`` is then None).

    Raises:
        BenchmarkDataError: missing file; a line without a tab; an empty id or sentence; a
            duplicate id; a gold id absent from its sentence file (message names the gold
            file, line and id).
        UnknownLanguageError: ``lang`` has no FLORES-200 code.
    """
    if split not in BUCC_SPLITS:
        raise ValueError(f"unknown BUCC split {split!r}: expected one of {', '.join(BUCC_SPLITS)}")
    folder = Path(folder)
    stem = f"{lang}-en.{split}"
    look_at(folder)
    look_at(folder / f"{lang}-en")
    if not (folder / f"{stem}.{lang}").exists() and (folder / f"{lang}-en" / f"{stem}.{lang}").exists():
        folder = folder / f"{lang}-en"
    src_ids, src = _bucc_sentences(folder / f"{stem}.{lang}")
    tgt_ids, tgt = _bucc_sentences(folder / f"{stem}.en")
    gold: frozenset[tuple[str, str]] | None = None
    duplicates = 0
    if with_gold:
        gold_path = folder / f"{stem}.gold"
        lines = read_line_array(gold_path)
        id_xx, id_en, good = _tab_fields(lines)
        missing_xx, missing_en = line_positions(id_xx, src_ids) < 0, line_positions(id_en, tgt_ids) < 0
        bad = np.flatnonzero(missing_xx | missing_en)
        if len(bad):
            i = int(bad[0])
            if missing_xx[i]:
                raise BenchmarkDataError(
                    gold_path, i + 1, f"id {id_xx[i].as_py()!r} is not in {folder / f'{stem}.{lang}'}", "id_xx"
                )
            raise BenchmarkDataError(gold_path, i + 1, f"id {id_en[i].as_py()!r} is not in {folder / f'{stem}.en'}", "id_en")
        if good < len(lines):
            raise BenchmarkDataError(gold_path, good + 1, "no tab: expected id_xx<TAB>id_en")
        gold = frozenset(zip(id_xx.to_pylist(), id_en.to_pylist()))
        duplicates = good - len(gold)
    return BuccSplit(to_flores(lang), "eng_Latn", split, src_ids, src, tgt_ids, tgt, gold, duplicates)


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
        for lang in self.langs:
            read_bucc(self.path, lang, self.tune_split)
            read_bucc(self.path, lang, self.test_split)

    def score(self, evaluation: Evaluation) -> None:

        encode = evaluation.encode
        for lang in self.langs:
            tune = read_bucc(self.path, lang, self.tune_split)
            test = read_bucc(self.path, lang, self.test_split)
            evaluation.context.drop("bucc_duplicate_gold_line", tune.duplicate_gold_lines + test.duplicate_gold_lines)
            for split in (test, tune):  # the rows' dataset names (mining.bucc_rows)
                evaluation.add_sentences(
                    "bucc", f"bucc2018.{split.split}", split.src_lang, split.tgt_lang, split.src, split.tgt, aligned=False
                )
            evaluation.add_rows(
                bucc_rows(
                    tune, encode(tune.src, tune.src_lang), encode(tune.tgt, tune.tgt_lang),
                    test, encode(test.src, test.src_lang), encode(test.tgt, test.tgt_lang), k=self.k,
                )
            )  # fmt: skip
