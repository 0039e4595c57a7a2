"""Row filters over a wide batch of translation groups, vectorised in polars.

Each row (one language of one group) gets a reason code; a group is kept when enough of
its rows pass. Every row that does not reach the output is counted under exactly one
reason, so `rows_in == rows_out + sum(dropped)` holds for the stage. Language
identification (`filters.lid`, tasks/corpus/lid.py) runs last, on the rows that passed the
other checks only (it costs far more per row than they do): `mark_rows` (the cheap checks),
`mark_lid`, then `drop_rows` (failing rows, incomplete groups, counts). On a sampled source
the stage runs `mark_lid` only on groups that can enter the sample (tasks/corpus/sampled_lid.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import polars as pl

from tasks.corpus import lid
from tasks.corpus.config import CorpusFilters
from tasks.corpus.dedup import is_copy
from tasks.drop_reasons import drop_reason
from tasks.languages import is_unspaced_script, to_flores

OK = 0
NULL = 1  # the batch says why: "invalid_utf8" or "missing"
EMPTY = 2
TOO_LONG = 3
TOO_SHORT = 4
LENGTH_RATIO = 5
GROUP_INCOMPLETE = 6
LID_MISMATCH = 7
LID_LOW_CONFIDENCE = 8
CONTROL_CHARACTERS = 9
COPY_OF_PIVOT = 10
GONE = 255  # dropped and counted by an earlier pass (see `drop_rows`)
REASONS = {
    EMPTY: drop_reason("empty"),
    TOO_LONG: drop_reason("too_long"),
    TOO_SHORT: drop_reason("too_short"),
    LENGTH_RATIO: drop_reason("length_ratio"),
    GROUP_INCOMPLETE: drop_reason("group_incomplete"),
    LID_MISMATCH: lid.REASONS[lid.MISMATCH],
    LID_LOW_CONFIDENCE: lid.REASONS[lid.LOW_CONFIDENCE],
    CONTROL_CHARACTERS: drop_reason("control_characters"),
    COPY_OF_PIVOT: drop_reason("copy_of_pivot"),
}
# C0 controls but tab, DEL and C1 controls: a NUL or an escape sequence is never sentence text,
# and a line break inside a text would break every line-aligned file made from it
CONTROL_PATTERN = r"[\x00-\x08\x0A-\x1F\x7F-\x9F]"
_FROM_LID = np.array([OK, LID_MISMATCH, LID_LOW_CONFIDENCE], dtype=np.uint8)  # lid.OK/MISMATCH/LOW_CONFIDENCE -> ours


def reason_column(lang: str) -> str:
    return f"{lang}__reason"


def word_limits_apply(lang: str, filters: CorpusFilters) -> bool:
    """Whitespace word counts mean nothing for scripts written without spaces (zho, jpn, tha, ...)."""
    if filters.word_filter_langs:
        return lang in {to_flores(code) for code in filters.word_filter_langs}
    return not is_unspaced_script(lang)


def _reason_expr(lang: str, pivot: str, filters: CorpusFilters) -> pl.Expr:
    text = pl.col(lang)
    chars = text.str.len_chars()
    expr = (
        pl.when(text.is_null())
        .then(NULL)
        .when(chars == 0)
        .then(EMPTY)
        .when(text.str.contains(CONTROL_PATTERN))
        .then(CONTROL_CHARACTERS)
    )
    expr = expr.when(chars > filters.max_chars).then(TOO_LONG)
    if word_limits_apply(lang, filters):
        words = text.str.count_matches(r"\S+")
        if filters.min_words:
            expr = expr.when(words < filters.min_words).then(TOO_SHORT)
        if filters.max_words is not None:
            expr = expr.when(words > filters.max_words).then(TOO_LONG)
    if filters.max_length_ratio is not None and lang != pivot:
        pivot_chars = pl.col(pivot).str.len_chars()
        longer = pl.max_horizontal(chars, pivot_chars).cast(pl.Float64)
        shorter = pl.min_horizontal(chars, pivot_chars).clip(lower_bound=1).cast(pl.Float64)
        expr = expr.when(pivot_chars.is_not_null() & (pivot_chars > 0) & (longer / shorter > filters.max_length_ratio)).then(
            LENGTH_RATIO
        )
    if filters.drop_copies and lang != pivot:
        expr = expr.when(pl.col(pivot).is_not_null() & is_copy(text, pl.col(pivot))).then(COPY_OF_PIVOT)
    return expr.otherwise(OK).cast(pl.UInt8).alias(reason_column(lang))


def mark_rows(frame: pl.DataFrame, langs: Sequence[str], filters: CorpusFilters) -> pl.DataFrame:
    """Strip texts and add a `{lang}__reason` column per language: every check but LID."""
    pivot = langs[0]
    frame = frame.with_columns([pl.col(lang).str.strip_chars() for lang in langs])
    return frame.with_columns([_reason_expr(lang, pivot, filters) for lang in langs])


def mark_lid(frame: pl.DataFrame, langs: Sequence[str], check: lid.LidCheck) -> tuple[pl.DataFrame, int]:
    """Run LID on the rows that passed so far (long enough to be checked) and mark the failures;
    also returns how many rows it checked. Rows are selected in polars and identical texts go
    to the backend once (lid.LidCheck.lang_reasons)."""
    updates = []
    checked = 0
    for lang in langs:
        if not check.checks(lang):
            continue
        column = reason_column(lang)
        candidates = (pl.col(column) == OK) & (pl.col(lang).str.len_chars() >= check.config.min_chars)
        rows = np.nonzero(frame.select(candidates).to_series().fill_null(False).to_numpy())[0]
        if not len(rows):
            continue
        checked += len(rows)
        texts = frame.get_column(lang).gather(rows)
        reasons = frame.get_column(column).to_numpy().copy()
        reasons[rows] = _FROM_LID[check.lang_reasons(texts, lang)]
        updates.append(pl.Series(column, reasons, dtype=pl.UInt8))
    return (frame.with_columns(updates) if updates else frame), checked


def drop_rows(
    frame: pl.DataFrame, langs: Sequence[str], min_langs: int, null_reason: str, rejected: list[pl.DataFrame] | None = None
) -> tuple[pl.DataFrame, Counter[tuple[str, str]]]:
    """Drop the rows `mark_rows`/`mark_lid` failed and the groups left with fewer than
    `min_langs` rows; return kept groups and drop counts per (language, reason).

    A row marked GONE (dropped and counted before) is neither counted again nor kept. The
    returned frame keeps the input columns (failing texts set to null) plus `n_rows`, the number
    of rows each kept group still has. With `rejected`, the dropped rows that have a text are
    appended to it as one frame (locator, lang, text, reason: a REASONS name)."""
    ok = [pl.col(reason_column(lang)) == OK for lang in langs]
    frame = frame.with_columns(pl.sum_horizontal(ok).cast(pl.UInt32).alias("n_rows"))
    keep = pl.col("n_rows") >= min_langs
    # rows that passed but belong to a dropped group are dropped as "group_incomplete"
    frame = frame.with_columns(
        [
            pl.when(~keep & (pl.col(reason_column(lang)) == OK))
            .then(GROUP_INCOMPLETE)
            .otherwise(pl.col(reason_column(lang)))
            .cast(pl.UInt8)
            .alias(reason_column(lang))
            for lang in langs
        ]
    )
    counts = (
        frame.select([pl.col(reason_column(lang)).alias(lang) for lang in langs])
        .unpivot(variable_name="lang", value_name="reason")
        .filter((pl.col("reason") != OK) & (pl.col("reason") != GONE))
        .group_by("lang", "reason")
        .len()
    )
    dropped: Counter[tuple[str, str]] = Counter()
    for lang, code, n in counts.iter_rows():
        dropped[lang, null_reason if code == NULL else REASONS[code]] += n
    if rejected is not None and counts.height:
        names = pl.Series(list(REASONS.values()), dtype=pl.String)
        codes = pl.Series(list(REASONS), dtype=pl.UInt8)
        rejected.append(
            pl.concat(
                [
                    frame.filter(~pl.col(reason_column(lang)).is_in([OK, GONE, NULL])).select(
                        pl.col("locator"),
                        pl.lit(lang).alias("lang"),
                        pl.col(lang).alias("text"),
                        pl.col(reason_column(lang)).alias("code"),
                    )
                    for lang in langs
                ]
            )
            .with_columns(pl.col("code").replace_strict(codes, names, return_dtype=pl.String).alias("reason"))
            .drop("code")
        )
    kept = frame.filter(keep).with_columns(
        [pl.when(pl.col(reason_column(lang)) == OK).then(pl.col(lang)).alias(lang) for lang in langs]
    )
    return kept.drop([reason_column(lang) for lang in langs]), dropped


def min_langs_per_group(filters: CorpusFilters, langs: Sequence[str]) -> int:
    return min(filters.min_langs_per_group or len(langs), len(langs))
