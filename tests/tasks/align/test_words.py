from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.align.words import is_unspaced, split_words


def test_spaced_scripts_split_punctuation_and_keep_inner_apostrophes_and_numbers() -> None:
    assert split_words("Le chat dort, aujourd'hui à 3.5 km!", "fra_Latn") == [
        "Le",
        "chat",
        "dort",
        ",",
        "aujourd'hui",
        "à",
        "3.5",
        "km",
        "!",
    ]
    assert split_words("well-known 1,000 people.", "eng_Latn") == ["well-known", "1,000", "people", "."]


def test_combining_marks_stay_inside_words() -> None:
    assert split_words("मेरी बहन डॉक्टर है।", "hin_Deva") == ["मेरी", "बहन", "डॉक्टर", "है", "।"]
    assert split_words("ქალაქი დიდია.", "kat_Geor") == ["ქალაქი", "დიდია", "."]


def test_newlines_and_invisible_characters_never_become_words() -> None:
    assert split_words("a\nb \u200b c\r\n", "eng_Latn") == ["a", "b", "c"]
    assert split_words("\u200b\u200d", "eng_Latn") == []


def test_unspaced_scripts_split_into_characters_but_keep_latin_words_and_numbers() -> None:
    assert is_unspaced("zho_Hans") and is_unspaced("jpn_Jpan") and is_unspaced("tha_Thai") and not is_unspaced("eng_Latn")
    assert split_words("我喜欢New York的3.5公里。", "zho_Hans") == [
        "我",
        "喜",
        "欢",
        "New",
        "York",
        "的",
        "3.5",
        "公",
        "里",
        "。",
    ]
    assert split_words("これはテスト", "jpn_Jpan") == ["こ", "れ", "は", "テ", "ス", "ト"]
    assert "ง่" in split_words("ง่าย", "tha_Thai")  # a consonant keeps its tone mark


@settings(deadline=None, max_examples=60)
@given(st.text(max_size=60), st.sampled_from(["eng_Latn", "zho_Hans", "tha_Thai", "hin_Deva"]))
def test_words_hold_no_whitespace_and_rejoin_to_the_same_words(text: str, lang: str) -> None:
    words = split_words(text, lang)
    assert all(w and not any(c.isspace() for c in w) for w in words)
    if lang == "eng_Latn":
        assert split_words(" ".join(words), lang) == words
