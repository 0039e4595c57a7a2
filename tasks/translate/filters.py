"""Quality filters over a shard's translations, vectorised (numpy and polars).

Each translation gets one reason code, the first that applies in this order:

1. ``empty_translation``: nothing left after stripping whitespace;
2. ``identical_to_source``: the same text as the source, ignoring case and spacing;
3. ``repetition``: the output loops, an n-gram of 1..`repetition_max_ngram` tokens repeated
   `repetition_min_repeats` times in a row, when the source does not loop the same way
   (found on token ids: a padded id matrix compared with itself shifted by n, and the
   longest run of equal positions per row, for all rows at once);
4. ``length_ratio``: output tokens / source tokens outside [min, max] (NLLB's SentencePiece
   pieces, so the ratio is comparable across scripts, unlike characters);
5. ``wrong_script``: the share of letters that belong to the target's script (from its
   FLORES-200 code; Jpan = Hiragana + Katakana + Han) is below `min_script_share`. Text
   without letters (numbers, symbols) passes;
6. ``lid_low_confidence`` / ``lid_mismatch`` (when `lid` is set): a language identifier is
   not sure enough of the output's language, or says it is another language than the target
   (NLLB's off-target translations in a related language: Russian for Kazakh, Hindi for
   Marathi); run on the translations that passed 1-5 only (tasks/corpus/lid.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import polars as pl

from tasks.corpus import lid
from tasks.corpus.dedup import is_copy
from tasks.drop_reasons import drop_reason
from tasks.translate.config import QualityFilters
from tasks.translate.languages import script_pattern

OK = 0
EMPTY = 1
IDENTICAL = 2
REPETITION = 3
LENGTH_RATIO = 4
WRONG_SCRIPT = 5
LID_MISMATCH = 6
LID_LOW_CONFIDENCE = 7
REASONS = {
    EMPTY: drop_reason("empty_translation"),
    IDENTICAL: drop_reason("identical_to_source"),
    REPETITION: drop_reason("repetition"),
    LENGTH_RATIO: drop_reason("length_ratio"),
    WRONG_SCRIPT: drop_reason("wrong_script"),
    LID_MISMATCH: lid.REASONS[lid.MISMATCH],
    LID_LOW_CONFIDENCE: lid.REASONS[lid.LOW_CONFIDENCE],
}
_FROM_LID = np.array([OK, LID_MISMATCH, LID_LOW_CONFIDENCE], dtype=np.uint8)  # lid.OK/MISMATCH/LOW_CONFIDENCE -> ours


def padded_ids(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(rows x longest) int64 matrix padded with -1, and the lengths."""
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    width = int(lengths.max()) if len(ids) else 0
    matrix = np.full((len(ids), max(width, 1)), -1, dtype=np.int64)
    total = int(lengths.sum())
    if total:
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
        rows = np.repeat(np.arange(len(ids)), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(total) - np.repeat(starts, lengths)
        matrix[rows, cols] = flat
    return matrix, lengths


def longest_runs(equal: np.ndarray) -> np.ndarray:
    """Per row, the longest run of consecutive True values."""
    if equal.shape[1] == 0:
        return np.zeros(equal.shape[0], dtype=np.int64)
    count = np.cumsum(equal, axis=1)
    at_false = np.where(equal, 0, count)
    return (count - np.maximum.accumulate(at_false, axis=1)).max(axis=1)


def loops(ids: Sequence[Sequence[int]], max_ngram: int, min_repeats: int) -> np.ndarray:
    """Rows whose token ids contain an n-gram (n <= max_ngram) repeated min_repeats times in a row."""
    matrix, _ = padded_ids(ids)
    found = np.zeros(len(ids), dtype=bool)
    for n in range(1, max_ngram + 1):
        if matrix.shape[1] <= n:
            break
        # position j equals j + n: a run of r such positions is a period-n stretch of r + n tokens
        equal = (matrix[:, n:] == matrix[:, :-n]) & (matrix[:, n:] >= 0)
        found |= longest_runs(equal) >= n * (min_repeats - 1)
    return found


def script_shares(texts: Sequence[str], langs: Sequence[str]) -> np.ndarray:
    """Share of letters in each text that belong to its language's script (NaN: no letters)."""
    frame = pl.DataFrame({"text": list(texts), "lang": list(langs)}, schema={"text": pl.String, "lang": pl.String})
    letters = frame["text"].str.count_matches(r"\p{L}").to_numpy().astype(np.float64)
    in_script = np.zeros(len(frame), dtype=np.float64)
    for lang in frame["lang"].unique().sort().to_list():
        rows = (frame["lang"] == lang).to_numpy()
        in_script[rows] = frame["text"].filter(rows).str.count_matches(script_pattern(lang)).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(letters > 0, in_script / letters, np.nan)


def quality_reasons(
    sources: Sequence[str],
    outputs: Sequence[str],
    source_ids: Sequence[Sequence[int]],
    output_ids: Sequence[Sequence[int]],
    target_langs: Sequence[str],
    filters: QualityFilters,
) -> np.ndarray:
    """One reason code per translation (OK = keep). `*_ids` are content tokens (no language
    code, no </s>); `target_langs` are FLORES-200 codes."""
    n = len(outputs)
    reasons = np.zeros(n, dtype=np.uint8)
    if not n:
        return reasons

    def mark(code: int, failing: np.ndarray) -> None:
        reasons[(reasons == OK) & failing] = code

    frame = pl.DataFrame({"src": list(sources), "out": list(outputs)}, schema={"src": pl.String, "out": pl.String})
    checks = frame.select(
        (pl.col("out").str.strip_chars().str.len_chars() == 0).alias("empty"),
        is_copy(pl.col("out"), pl.col("src")).alias("identical"),
    )
    mark(EMPTY, checks["empty"].to_numpy())
    if filters.drop_identical:
        mark(IDENTICAL, checks["identical"].to_numpy())
    if filters.repetition_max_ngram:
        out_loops = loops(output_ids, filters.repetition_max_ngram, filters.repetition_min_repeats)
        if out_loops.any():
            src_loops = loops(source_ids, filters.repetition_max_ngram, filters.repetition_min_repeats)
            mark(REPETITION, out_loops & ~src_loops)
    if filters.min_length_ratio or filters.max_length_ratio:
        src_len = np.fromiter((len(x) for x in source_ids), dtype=np.float64, count=n)
        out_len = np.fromiter((len(x) for x in output_ids), dtype=np.float64, count=n)
        ratio = out_len / np.maximum(src_len, 1.0)
        bad = np.zeros(n, dtype=bool)
        if filters.min_length_ratio:
            bad |= ratio < filters.min_length_ratio
        if filters.max_length_ratio:
            bad |= ratio > filters.max_length_ratio
        mark(LENGTH_RATIO, bad)
    if filters.min_script_share:
        shares = script_shares(outputs, target_langs)
        mark(WRONG_SCRIPT, ~np.isnan(shares) & (shares < filters.min_script_share))
    check = lid.lid_check(filters.lid)
    if check is not None:
        rows = np.nonzero(reasons == OK)[0]
        reasons[rows] = _FROM_LID[check.reasons([outputs[i] for i in rows], [target_langs[i] for i in rows])]
    return reasons
