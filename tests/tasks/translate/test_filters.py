"""Each quality filter on hand-made inputs, and the script table."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.corpus.config import LidFilter
from tasks.translate.config import QualityFilters
from tasks.translate.filters import (
    EMPTY,
    IDENTICAL,
    LENGTH_RATIO,
    LID_LOW_CONFIDENCE,
    LID_MISMATCH,
    OK,
    REPETITION,
    WRONG_SCRIPT,
    longest_runs,
    loops,
    quality_reasons,
    script_shares,
)
from tasks.translate.languages import NLLB_LANGUAGE_CODES, SCRIPT_UNICODE, nllb_code, script_pattern

ALL_OFF = QualityFilters(
    drop_identical=False, repetition_max_ngram=None, min_length_ratio=None, max_length_ratio=None, min_script_share=None
)


def reasons(outputs, langs, filters, sources=None, source_ids=None, output_ids=None):  # noqa: ANN001, ANN201
    n = len(outputs)
    sources = sources or ["The cat sat on the mat."] * n
    source_ids = source_ids or [list(range(10))] * n
    output_ids = output_ids or [list(range(10))] * n
    return quality_reasons(sources, outputs, source_ids, output_ids, langs, filters).tolist()


def test_empty_always_dropped() -> None:
    assert reasons(["", "   ", "Le chat."], ["fra_Latn"] * 3, ALL_OFF) == [EMPTY, EMPTY, OK]


def test_identical_ignores_case_spacing_punctuation_and_unicode_forms() -> None:
    """The corpus's copy check (tasks/corpus/dedup.py copy_normalized_text): a translation that
    differs from its source only in case, spacing, punctuation or compatibility forms is a copy;
    one digit of difference is not."""
    filters = ALL_OFF.model_copy(update={"drop_identical": True})
    out = [
        "the  cat sat on the MAT.",
        "Le chat s'est assis.",
        "The cat sat on the mat",
        "«The cat» sat on the ｍａｔ!",
        "The cat sat on 2 mats.",
    ]
    assert reasons(out, ["fra_Latn"] * 5, filters) == [IDENTICAL, OK, IDENTICAL, IDENTICAL, OK]
    assert reasons(out, ["fra_Latn"] * 5, ALL_OFF) == [OK] * 5


def test_repetition_finds_looping_ngrams_not_in_the_source() -> None:
    filters = ALL_OFF.model_copy(update={"repetition_max_ngram": 3, "repetition_min_repeats": 4})
    output_ids = [
        [5, 6, 7, 7, 7, 7, 8],  # unigram x4
        [5, 6, 7, 7, 7, 8],  # unigram x3: fine
        [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3],  # trigram x4
        [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4],  # 4-gram: longer than max_ngram
        [9, 4, 9, 4, 9, 4, 9, 4],  # bigram x4, but the source loops the same way
        [],
    ]
    source_ids = [[1, 2]] * 4 + [[4, 4, 4, 4, 4]] + [[1]]
    got = reasons(["x"] * 6, ["fra_Latn"] * 6, filters, source_ids=source_ids, output_ids=output_ids)
    assert got == [REPETITION, OK, REPETITION, OK, OK, OK]
    assert loops([[4, 4, 4, 4, 4]], 3, 4).tolist() == [True]
    assert longest_runs(np.array([[True, True, False, True, True, True], [False] * 6])).tolist() == [3, 0]


def test_length_ratio_bounds_in_tokens() -> None:
    filters = ALL_OFF.model_copy(update={"min_length_ratio": 0.5, "max_length_ratio": 2.0})
    output_ids = [[1] * 4, [1] * 5, [1] * 20, [1] * 21, [1]]
    got = reasons(["x"] * 5, ["fra_Latn"] * 5, filters, source_ids=[[1] * 10] * 4 + [[]], output_ids=output_ids)
    assert got == [LENGTH_RATIO, OK, OK, LENGTH_RATIO, OK]  # an empty source counts as one token


@pytest.mark.parametrize(
    ("text", "lang", "share"),
    [
        ("यह एक अच्छा अनुवाद है", "hin_Deva", 1.0),
        ("यह Google है", "hin_Deva", 3 / 9),  # य ह ह are letters; vowel signs are marks
        ("これは日本語のテキストーです", "jpn_Jpan", 1.0),
        ("東京タワー", "jpn_Jpan", 1.0),
        ("这是中文", "zho_Hans", 1.0),
        ("這是中文", "zho_Hant", 1.0),
        ("ეს ქართულია", "kat_Geor", 1.0),
        ("Это текст", "kat_Geor", 0.0),
        ("Das ist gut", "deu_Latn", 1.0),
        ("Это текст", "kaz_Cyrl", 1.0),
        ("이것은 한국어", "kor_Hang", 1.0),
        ("هذا نص", "arb_Arab", 1.0),
        ("ᱥᱟᱱᱛᱟᱲᱤ", "sat_Olck", 1.0),
        ("ᱥᱟᱱᱛᱟᱲᱤ", "sat_Beng", 1.0),  # NLLB's token for Santali; the text is Ol Chiki
    ],
)
def test_script_share(text: str, lang: str, share: float) -> None:
    assert script_shares([text], [lang])[0] == pytest.approx(share)


def test_wrong_script_drops_below_threshold_and_passes_text_without_letters() -> None:
    filters = ALL_OFF.model_copy(update={"min_script_share": 0.5})
    out = ["यह एक अच्छा अनुवाद है", "This is English", "2024 — 15%", "これはtest", "這是中文"]
    langs = ["hin_Deva", "hin_Deva", "hin_Deva", "jpn_Jpan", "zho_Hans"]
    assert reasons(out, langs, filters) == [OK, WRONG_SCRIPT, OK, WRONG_SCRIPT, OK]


def test_first_failing_reason_wins() -> None:
    filters = QualityFilters(min_length_ratio=0.5, min_script_share=0.5)
    got = reasons(
        ["", "The cat sat on the mat.", "猫"], ["fra_Latn", "fra_Latn", "fra_Latn"], filters, output_ids=[[], [1] * 10, [1]]
    )
    assert got == [EMPTY, IDENTICAL, LENGTH_RATIO]


def test_every_nllb_language_has_a_script_pattern() -> None:
    assert len(NLLB_LANGUAGE_CODES) == len(set(NLLB_LANGUAGE_CODES)) == 202
    for code in NLLB_LANGUAGE_CODES:
        script_pattern(code)
    assert set(SCRIPT_UNICODE) >= {c[4:] for c in NLLB_LANGUAGE_CODES}
    assert nllb_code("sat_Olck") == "sat_Beng" and nllb_code("ja") == "jpn_Jpan"


def test_zero_switches_a_filter_off_as_toml_has_no_null() -> None:
    zeros = QualityFilters(
        drop_identical=False, repetition_max_ngram=0, min_length_ratio=0, max_length_ratio=0, min_script_share=0
    )
    out = ["la la la la la la", "x", "Это"]
    got = reasons(out, ["hin_Deva"] * 3, zeros, source_ids=[[1] * 10] * 3, output_ids=[[7] * 8, [1], [1] * 100])
    assert got == [OK, OK, OK]


def test_lid_drops_off_target_translations_after_the_other_filters() -> None:
    kazakh = "Бүгін таңертең біз ауылға барып, әжемізге сәлем бердік."
    russian = "Мой брат работает врачом в большой городской больнице уже десять лет."
    out = [kazakh, russian, "Қала", russian]
    langs = ["kaz_Cyrl", "kaz_Cyrl", "kaz_Cyrl", "rus_Cyrl"]
    lid_on = ALL_OFF.model_copy(update={"lid": LidFilter()})
    # Russian for Kazakh: off target; a one-word output is too short to judge (min_chars)
    assert reasons(out, langs, lid_on) == [OK, LID_MISMATCH, OK, OK]
    assert reasons(out, langs, ALL_OFF) == [OK] * 4
    # a translation another filter dropped first keeps that reason
    both = lid_on.model_copy(update={"drop_identical": True})
    assert reasons(out, langs, both, sources=[russian] * 4) == [OK, IDENTICAL, OK, IDENTICAL]


def test_lid_low_confidence_in_translations() -> None:
    mixed = "Это предложение на русском языке. This sentence is in English and it is longer than that."
    # CLD2 finds both Russian and English in it (reliably): kept for either label, a mismatch for Polish;
    # CLD2's answers are reliable or undecided, so its drops are never for low confidence
    filters = ALL_OFF.model_copy(update={"lid": LidFilter(min_confidence=0.6)})
    assert reasons([mixed, mixed, mixed], ["rus_Cyrl", "eng_Latn", "pol_Latn"], filters) == [OK, OK, LID_MISMATCH]
    assert LID_LOW_CONFIDENCE not in reasons([mixed, "Kazakhstan is big."], ["pol_Latn", "pol_Latn"], filters)
