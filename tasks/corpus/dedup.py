"""Near-duplicate keys: one normalisation of text, shared by corpus dedupe and evaluation leakage;
and `copy_normalized_text`, which tells a translation that only copies its source (the corpus's
`drop_copies`, the translate stage's `drop_identical`).

Two texts are near-duplicates when they are equal after Unicode NFKC, lowercasing, and turning
every run of punctuation (`\\p{P}`) and digits (`\\p{N}`, any script: ١٢٣, १२३) into one space,
with whitespace collapsed and trimmed: "Hello, World! 42" and "hello world" share a key, and so
do "Привет, МИР!" and "привет мир". Letters and combining marks (`\\p{M}`, which carry
Devanagari vowels) are kept, so different words never collide. A text with nothing left (only
digits and punctuation: "2019.", "1.") has no key: it is nobody's near-duplicate (exact dedupe
still applies to it).

The key is a 64-bit polars hash of the normalised text, computed as a column expression (no
Python loop per row). Polars hashes are stable within a pinned polars version; keys are never
stored in artifacts, only compared within one run, so a polars upgrade cannot mix two hashings.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

# A fixed seed, not the corpus seed: the corpus and the evaluate stage must compute the same key.
KEY_SEED = 0x6E6561725F647570  # "near_dup"
_PUNCTUATION_AND_DIGITS = r"[\p{P}\p{N}]+"


def normalized_text(text: pl.Expr) -> pl.Expr:
    """The normalised form of a string column (see the module docstring)."""
    return (
        text.str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(_PUNCTUATION_AND_DIGITS, " ")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


_PUNCTUATION_AND_SPACE = r"[\p{P}\s]+"
# what str.casefold() does beyond str.lower(), for the letters that occur in text (polars has no casefold)
_CASEFOLD_BEYOND_LOWER = {"ß": "ss", "ς": "σ", "ſ": "s", "ﬅ": "st", "ﬆ": "st"}


def copy_normalized_text(text: pl.Expr) -> pl.Expr:
    """A string column as compared to tell a copy from a translation: Unicode NFKC, case folded,
    every whitespace and punctuation character (`\\p{P}`) removed. Digits, symbols and letters
    stay: "Kazakhstan" and "KAZAKHSTAN." compare equal, "1 km" and "1 mi" do not."""
    folded = text.str.normalize("NFKC").str.to_lowercase()
    for upper, lower in _CASEFOLD_BEYOND_LOWER.items():
        folded = folded.str.replace_all(upper, lower, literal=True)
    return folded.str.replace_all(_PUNCTUATION_AND_SPACE, "")


def is_copy(text: pl.Expr, source: pl.Expr) -> pl.Expr:
    """Whether `text` equals `source` after `copy_normalized_text` (null where either is null)."""
    return copy_normalized_text(text) == copy_normalized_text(source)


def near_duplicate_key(text: pl.Expr) -> pl.Expr:
    """UInt64 key of a string column's normalised text; null where the text is null or normalises to ""."""
    normal = normalized_text(text)
    return pl.when(normal.str.len_bytes() > 0).then(normal.hash(seed=KEY_SEED)).otherwise(None).cast(pl.UInt64)


def key_column(lang: str) -> str:
    return f"{lang}__key"


def add_near_duplicate_keys(frame: pl.DataFrame, langs: Sequence[str]) -> pl.DataFrame:
    """Add `{lang}__key` for every language column of a wide frame of groups."""
    return frame.with_columns([near_duplicate_key(pl.col(lang)).alias(key_column(lang)) for lang in langs])


def near_duplicate_rows(frame: pl.DataFrame, langs: Sequence[str], order: Sequence[str]) -> pl.DataFrame:
    """Boolean `{lang}__near_dup` columns: the row's key occurs in an earlier group of `frame`
    (earlier in `order`, e.g. ["h", "seq"]) in the same language. Returns the frame sorted by `order`."""
    frame = frame.sort(list(order))
    return frame.with_columns(
        [
            (pl.col(key_column(lang)).is_not_null() & ~pl.col(key_column(lang)).is_first_distinct()).alias(near_dup_column(lang))
            for lang in langs
        ]
    )


def near_dup_column(lang: str) -> str:
    return f"{lang}__near_dup"
