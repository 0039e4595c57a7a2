"""cldr_multiway_table on the real Babel CLDR data (no mocks)."""

from __future__ import annotations

import unicodedata

import pyarrow as pa
import pytest
from babel import Locale

from tasks.corpus import cldr
from tasks.corpus.cldr import CLDR_CATEGORIES, cldr_multiway_table
from tasks.languages import cldr_locale

LANGS = [
    "eng_Latn",
    "kaz_Cyrl",
    "kat_Geor",
    "tel_Telu",
    "swh_Latn",
    "tgl_Latn",
    "jav_Latn",
    "mal_Mlym",
    "mar_Deva",
    "fra_Latn",
]
# Acehnese: in FLORES-200, but CLDR/Babel has no "ace" locale.
NO_CLDR_CODE = "ace_Latn"


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return cldr_multiway_table(LANGS)


@pytest.fixture(scope="module")
def rows(table: pa.Table) -> list[dict[str, str | None]]:
    return table.to_pylist()


def _category(key: str) -> str:
    return key.split(":", 1)[0]


def test_columns_and_types(table: pa.Table) -> None:
    assert table.column_names == ["key", *LANGS]
    for field in table.schema:
        assert field.type == pa.string(), field


def test_keys_unique_sorted_and_categorised(table: pa.Table) -> None:
    keys = table["key"].to_pylist()
    assert table["key"].null_count == 0
    assert len(set(keys)) == len(keys)
    assert keys == sorted(keys)
    assert {_category(k) for k in keys} == set(CLDR_CATEGORIES)


def test_size_and_coverage(table: pa.Table, rows: list[dict[str, str | None]]) -> None:
    assert table.num_rows >= 1000
    full = sum(all(r[c] is not None for c in LANGS) for r in rows)
    assert full >= 500
    for code in LANGS:
        assert table.num_rows - table[code].null_count >= 1000, code


def test_every_row_is_parallel_and_values_clean(rows: list[dict[str, str | None]]) -> None:
    for r in rows:
        values = [r[c] for c in LANGS if r[c] is not None]
        assert len(values) >= 2, r["key"]
        for v in values:
            assert v == v.strip() and v, r["key"]


def test_known_key(rows: list[dict[str, str | None]]) -> None:
    by_key = {r["key"]: r for r in rows}
    fr = by_key["territories:FR"]
    assert fr["eng_Latn"] == "France"
    assert fr["kaz_Cyrl"] == "Франция"
    assert fr["kat_Geor"] == "საფრანგეთი"
    assert by_key["months:01"]["eng_Latn"] == "January"
    assert by_key["weekdays:mon"]["eng_Latn"] == "Monday"
    assert by_key["units:length-kilometer"]["eng_Latn"] == "7 kilometers"
    assert by_key["relative_time:year-past"]["eng_Latn"] == "7 years ago"


def _has_seven(text: str) -> bool:
    return any(ch.isdigit() and unicodedata.digit(ch, None) == 7 for ch in text)


def test_patterns_are_rendered(rows: list[dict[str, str | None]]) -> None:
    pattern_rows = [r for r in rows if _category(r["key"]) in ("units", "relative_time")]
    assert len(pattern_rows) >= 100
    for r in pattern_rows:
        for code in LANGS:
            v = r[code]
            if v is None:
                continue
            assert "{0}" not in v and "{" not in v, (r["key"], code, v)
            assert _has_seven(v), (r["key"], code, v)


def _nested_strings(node: object) -> set[str]:
    if isinstance(node, str):
        return {node.strip()}
    if hasattr(node, "keys"):
        return {s for k in node.keys() for s in _nested_strings(node[k])}  # type: ignore[index]
    return set()


_WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _root_values(key: str) -> set[str]:
    """Everything root (codes and placeholders, no translations) holds for ``key``."""
    root = Locale("root")
    category, ident = key.split(":", 1)
    if category in ("territories", "languages", "scripts", "currencies"):
        return _nested_strings(getattr(root, category).get(ident))
    if category in ("months", "weekdays"):
        field = getattr(root, "months" if category == "months" else "days")
        index = int(ident) if category == "months" else _WEEKDAYS.index(ident)
        return {str(names[index]) for widths in field.values() for names in widths.values()}
    if category == "unit_names":
        return _nested_strings(root._data["unit_display_names"].get(ident))
    if category == "units":
        raw = _nested_strings(root._data["unit_patterns"].get(ident))
    else:
        field = ident.rsplit("-", 1)[0]
        raw = set().union(*(_nested_strings(root._data["date_fields"].get(f)) for f in (field, f"{field}-short")))
    return raw | {p.replace("{0}", "7") for p in raw}


def test_no_root_placeholders(rows: list[dict[str, str | None]]) -> None:
    assert "M01" in _root_values("months:01")  # the check really sees root's data
    assert "+7 y" in _root_values("relative_time:year-future")
    for r in rows:
        bad = _root_values(r["key"])
        for code in LANGS:
            assert r[code] not in bad, (r["key"], code, r[code])


def test_deterministic(table: pa.Table) -> None:
    cldr.category_values.cache_clear()
    again = cldr_multiway_table(LANGS)
    assert again.equals(table)
    assert cldr_multiway_table(LANGS).equals(table)


def test_column_order_and_category_subset() -> None:
    langs = ["fra_Latn", "eng_Latn"]
    t = cldr_multiway_table(langs, categories=("months", "weekdays"))
    assert t.column_names == ["key", "fra_Latn", "eng_Latn"]
    assert t.num_rows == 19
    by_key = {r["key"]: r for r in t.to_pylist()}
    assert by_key["months:01"] == {"key": "months:01", "fra_Latn": "janvier", "eng_Latn": "January"}


def test_single_language_has_no_parallel_rows() -> None:
    t = cldr_multiway_table(["eng_Latn"])
    assert t.column_names == ["key", "eng_Latn"]
    assert t.num_rows == 0


def test_unknown_category_raises() -> None:
    with pytest.raises(ValueError, match="nonsense"):
        cldr_multiway_table(["eng_Latn", "fra_Latn"], categories=("months", "nonsense"))


def test_language_without_cldr_locale_raises() -> None:
    assert cldr_locale(NO_CLDR_CODE) is None
    with pytest.raises(ValueError, match=NO_CLDR_CODE):
        cldr_multiway_table(["eng_Latn", NO_CLDR_CODE])


def test_duplicate_language_raises() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        cldr_multiway_table(["eng_Latn", "eng_Latn"])
