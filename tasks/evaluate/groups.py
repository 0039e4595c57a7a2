"""Metric rows in the shape of ``METRICS_SCHEMA``, and the language groups the papers average over.

A metric row is a plain dict with the keys of :data:`tasks.evaluate.schema.METRICS_SCHEMA`
(benchmark, dataset, src_lang, tgt_lang, metric, value, n); :func:`metric_row` builds one
and maps language codes to FLORES-200. :func:`group_average_rows` adds the unweighted
per-group means that the papers report ("4 langs", "36 langs", ...).

Groups, as printed in the papers (ISO 639-1 there, FLORES-200 here):
  * WACSE (Wang et al., "Word-aligned cross-lingual sentence embeddings", seeds/wacse-*):
    section 4.2 and the caption of Table 3 — 4 langs (kk, te, ka, jv), 5 langs
    (tl, jv, ka, kk, te), 8 langs (te, ka, kk, jv, ml, sw, tl, mr).
  * DAP (Li et al., 2023, seeds/dap-dual-alignment-pretraining.txt): the 36 XTREME Tatoeba
    languages are the columns of appendix Tables 7 and 8.
  * DAP "14 langs" and "28 langs" (Table 1) are NOT listed in the paper text. 14 = "the 14
    languages tested in LASER (Artetxe and Schwenk, 2019b)", without naming them: not
    recoverable from the text, so there is no DAP_14 here. 28 = "all languages contain 1000
    test pairs": the members are not printed, but the rule is, so
    :func:`dap_28_from_test_sizes` applies it to the Tatoeba files actually evaluated.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from tasks.evaluate.schema import METRICS_SCHEMA
from tasks.languages import FLORES200_CODES, group_code, is_group_code, to_flores

__all__ = [
    "DAP_36",
    "LANGUAGE_GROUPS",
    "WACSE_4",
    "WACSE_5",
    "WACSE_8",
    "TATOEBA_LOW16",
    "TATOEBA_MAJOR8",
    "LanguageGroup",
    "dap_28_from_test_sizes",
    "group_average_rows",
    "group_languages",
    "metric_row",
    "rows_table",
]


def metric_row(benchmark: str, dataset: str, src_lang: str, tgt_lang: str | None, metric: str, value: float, n: int) -> dict:
    """One row of the metrics table; language codes are mapped with :func:`to_flores`.

    ``src_lang`` may also be ``group:<name>``. Raises UnknownLanguageError for an unmappable code.
    """
    if not is_group_code(src_lang):
        src_lang = to_flores(src_lang)
    if tgt_lang is not None:
        tgt_lang = to_flores(tgt_lang)
    return {
        "benchmark": benchmark,
        "dataset": dataset,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "metric": metric,
        "value": float(value),
        "n": int(n),
    }


def rows_table(rows: Iterable[Mapping]) -> pa.Table:
    """Rows as an Arrow table with ``METRICS_SCHEMA`` (raises if a row does not fit it)."""
    return pa.Table.from_pylist([dict(row) for row in rows], schema=METRICS_SCHEMA)


@dataclass(frozen=True)
class LanguageGroup:
    """A named set of languages whose metrics a paper averages."""

    name: str
    langs: tuple[str, ...]  # FLORES-200 codes, in the paper's order
    source: str  # where the list is printed

    @classmethod
    def from_codes(cls, name: str, codes: Sequence[str], source: str) -> LanguageGroup:
        langs = tuple(to_flores(code) for code in codes)
        if len(set(langs)) != len(langs):
            raise ValueError(f"group {name!r} lists a language twice: {langs}")
        return cls(name, langs, source)


# WACSE section 4.2 ("settings with four languages (kk, te, ka, jv), five languages (tl, kk,
# te, ka, jv) and all eight languages") and Table 3's caption, which gives the orders below.
WACSE_4 = LanguageGroup.from_codes("wacse-4", "kk te ka jv".split(), "WACSE sec. 4.2 / Table 3 caption")
WACSE_5 = LanguageGroup.from_codes("wacse-5", "tl jv ka kk te".split(), "WACSE sec. 4.2 / Table 3 caption")
WACSE_8 = LanguageGroup.from_codes("wacse-8", "te ka kk jv ml sw tl mr".split(), "WACSE Table 3 caption")

# DAP appendix A, Tables 7 and 8 (the 36 columns, "Retrieval accuracy on 36 languages").
DAP_36 = LanguageGroup.from_codes(
    "dap-36",
    ("af ar bg bn de el es et eu fa fi fr he hi hu id it ja jv ka kk ko ml mr nl pt ru sw ta te th tl tr ur vi zh").split(),
    "DAP appendix A, Tables 7-8",
)

# ../shared/data/tatoeba-dev: 24 Tatoeba languages that FLORES-200 and NTREX-128 also cover, a
# development benchmark (train on FLORES/NTREX rows, measure on Tatoeba); the WACSE-8
# languages are left out of it on purpose, so they stay untouched test languages.
TATOEBA_LOW16 = LanguageGroup.from_codes(
    "tatoeba-low16",
    "afr amh bel ben ceb cym eus gla gle hye isl khm tat uig urd yid".split(),
    "shared/data/tatoeba-dev README (lower-resource)",
)
TATOEBA_MAJOR8 = LanguageGroup.from_codes(
    "tatoeba-major8", "ita por pol tur vie kor ukr heb".split(), "shared/data/tatoeba-dev README (major)"
)

LANGUAGE_GROUPS: Mapping[str, LanguageGroup] = {
    g.name: g for g in (WACSE_4, WACSE_5, WACSE_8, DAP_36, TATOEBA_LOW16, TATOEBA_MAJOR8)
}


def group_languages(name: str) -> tuple[str, ...] | None:
    """The languages of the group `name` in LANGUAGE_GROUPS, None for a name it does not hold."""
    group = LANGUAGE_GROUPS.get(name)
    return None if group is None else group.langs


def dap_28_from_test_sizes(pairs_per_language: Mapping[str, int], full_size: int = 1000) -> LanguageGroup:
    """DAP's "28 langs": the DAP-36 languages whose Tatoeba test set has ``full_size`` pairs.

    DAP (section 4.4) defines the group by that rule but does not print its members, so it is
    computed from the test sets actually read (``{language code: number of pairs}``, any
    codes :func:`to_flores` maps). Raises ValueError when a DAP-36 language is missing from
    ``pairs_per_language`` or when the rule does not give 28 languages (then the data are not
    the XTREME Tatoeba files the paper used).
    """
    sizes = {to_flores(code): n for code, n in pairs_per_language.items()}
    missing = [lang for lang in DAP_36.langs if lang not in sizes]
    if missing:
        raise ValueError(f"test sizes missing for DAP-36 languages: {', '.join(missing)}")
    members = tuple(lang for lang in DAP_36.langs if sizes[lang] == full_size)
    if len(members) != 28:
        raise ValueError(
            f"{len(members)} DAP-36 languages have {full_size} test pairs, not 28: these are not "
            "the XTREME Tatoeba test sets DAP used"
        )
    return LanguageGroup("dap-28", members, f"DAP sec. 4.4 rule (all {full_size} test pairs), applied to the data")


def group_average_rows(rows: Sequence[Mapping], groups: Iterable[LanguageGroup]) -> list[dict]:
    """``rows`` plus, per group, the unweighted mean of each metric over the members present.

    Rows are grouped by (benchmark, dataset, tgt_lang, metric); members are matched on
    ``src_lang``. A group row has ``src_lang="group:<name>"`` and ``n`` = members present; a
    group with no member present for a key adds nothing. Existing group rows are not
    averaged again. Raises ValueError when a language has two rows for the same key.
    """
    groups = list(groups)
    by_key: dict[tuple, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if is_group_code(row["src_lang"]):
            continue
        key = (row["benchmark"], row["dataset"], row["tgt_lang"], row["metric"])
        if row["src_lang"] in by_key[key]:
            raise ValueError(f"two rows for {row['src_lang']} in {key}: cannot average")
        by_key[key][row["src_lang"]] = row["value"]
    added = []
    for group in groups:
        unknown = [lang for lang in group.langs if lang not in FLORES200_CODES]
        if unknown:
            raise ValueError(f"group {group.name!r} has non-FLORES codes {unknown}")
        for (benchmark, dataset, tgt_lang, metric), values in by_key.items():
            present = [values[lang] for lang in group.langs if lang in values]
            if not present:
                continue
            added.append(
                {
                    "benchmark": benchmark,
                    "dataset": dataset,
                    "src_lang": group_code(group.name),
                    "tgt_lang": tgt_lang,
                    "metric": metric,
                    "value": math.fsum(present) / len(present),
                    "n": len(present),
                }
            )
    return [dict(row) for row in rows] + added
