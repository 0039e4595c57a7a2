"""Word segmentation per language, for alignment.

Spaced scripts: a word is a run of letters, marks and digits, with apostrophes and hyphens
inside it ("aujourd'hui", "well-known") and decimal separators inside numbers ("3.5",
"1,000"); every other visible character (punctuation, symbols) is a word of its own.
Whitespace and invisible format characters (newlines, zero-width spaces) separate words
and never become words: the reference turns newlines into fake words, this does not.

Scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar,
Tibetan) are split into characters (grapheme clusters, so a Thai consonant keeps its
vowel and tone marks), while Latin words and numbers inside them stay whole. That is the
character-level segmentation word alignment benchmarks use for Chinese and Japanese; it
needs no dictionary and gives the same words everywhere.

Words never contain whitespace, so `" ".join(words)` re-tokenises to the same words; the
backends rely on that.
"""

from __future__ import annotations

import regex

# Scripts (ISO 15924, as in FLORES-200 codes) and Unicode script names written without spaces.
UNSPACED_SCRIPTS = {
    "Hans": "Han",
    "Hant": "Han",
    "Jpan": None,
    "Thai": "Thai",
    "Laoo": "Lao",
    "Khmr": "Khmer",
    "Mymr": "Myanmar",
    "Tibt": "Tibetan",
}
_UNSPACED_CLASS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"

_WORD = r"[\p{L}\p{M}\p{N}]+(?:['’\-][\p{L}\p{M}\p{N}]+)*"
_NUMBER = r"\p{N}+(?:[.,]\p{N}+)+"
_SYMBOL = r"[^\s\p{Cf}\p{Cc}\p{Z}]"  # one visible non-word character

_SPACED = regex.compile(rf"{_NUMBER}|{_WORD}|{_SYMBOL}", regex.V1)
_UNSPACED = regex.compile(
    rf"(?=[{_UNSPACED_CLASS}])\X|{_NUMBER}|(?:(?![{_UNSPACED_CLASS}])[\p{{L}}\p{{M}}\p{{N}}])+|{_SYMBOL}",
    regex.V1,
)


def is_unspaced(lang: str) -> bool:
    """True for FLORES-200 codes whose script is written without spaces (zho_Hans, jpn_Jpan, tha_Thai...)."""
    return lang.rpartition("_")[2] in UNSPACED_SCRIPTS


def split_words(text: str, lang: str) -> list[str]:
    """The words of `text` in language `lang` (FLORES-200 code), in order."""
    pattern = _UNSPACED if is_unspaced(lang) else _SPACED
    return pattern.findall(text)
