"""Multi-way parallel phrases from the Unicode CLDR data shipped in Babel.

The offline demo needs real, human-translated parallel text without a network. CLDR
keys its display strings identically across locales, so ("territories", "FR") is
"France" / "Франция" / "საფრანგეთი": one multi-way parallel group per key.
The data comes from the pinned Babel wheel, so the output is fixed for a given Babel version.

What is read, per locale (keys are "<category>:<id>"):

* ``territories`` - ``Locale.territories`` (region names), id = CLDR region code.
* ``languages``   - ``Locale.languages`` (language names), id = CLDR language tag.
* ``scripts``     - ``Locale.scripts`` (script names), id = ISO 15924 code.
* ``currencies``  - ``Locale.currencies`` (currency display names), id = ISO 4217 code.
* ``months``      - Gregorian wide month names, stand-alone context (format context
  where stand-alone is missing), id = "01".."12".
* ``weekdays``    - wide weekday names, same context rule, id = "mon".."sun".
* ``unit_names``  - unit display names (``unit_display_names``), id = CLDR unit id
  such as "length-kilometer".
* ``units``       - unit patterns (``unit_patterns``) rendered with the number 7.
  Both unit categories take the long width, else the short one: CLDR aliases long
  to short, so short is what the locale means where its long entry is missing.
* ``relative_time`` - wide relative-time patterns (``date_fields``; "year", "day",
  "sun", ...) for "future" and "past", rendered with 7, id = "<field>-<direction>".

Patterns are rendered with the plural form the locale's own rule picks for 7 (falling
back to "other") and with 7 formatted by the locale's decimal format, so rows read
"7 kilometers" / "7 километр" and stay translations of each other.

Only values the locale itself defines are kept: Babel merges every locale onto the
root locale, whose strings are codes, placeholders and English-like abbreviations
("M01", "+{0} y", "km"), not translations, so a value equal to anything root holds
for the same key (any width, form or context) is dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from babel import Locale
from babel.numbers import format_decimal

from tasks.languages import cldr_locale

CLDR_CATEGORIES: tuple[str, ...] = (
    "territories",
    "languages",
    "scripts",
    "currencies",
    "months",
    "weekdays",
    "unit_names",
    "units",
    "relative_time",
)

# Babel numbers weekdays from Monday = 0.
_WEEKDAY_IDS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# CLDR aliases the long unit width to the short one, so short fills in where a locale
# leaves a long entry out (root's short placeholders are still dropped).
_UNIT_WIDTHS: tuple[str, ...] = ("long", "short")
_RELATIVE_DIRECTIONS: tuple[str, ...] = ("future", "past")
_RENDER_NUMBER = 7
_PLACEHOLDER = "{0}"


def _strings(node: Any) -> frozenset[str]:
    """Every stripped string nested under a Babel data node (all widths, forms, contexts)."""
    if isinstance(node, str):
        return frozenset((node.strip(),))
    if node is None or not hasattr(node, "keys"):
        return frozenset()
    return frozenset().union(*(_strings(node[k]) for k in node.keys()))


def _clean(value: Any, root_values: frozenset[str]) -> str | None:
    """The stripped value, or None when empty, not a string, or one of root's placeholders.

    ``root_values`` holds everything root has for the same key in any width or form:
    root's strings are codes and English-like abbreviations, so a locale value equal to
    one of them is inherited or untranslated, not a translation.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or text in root_values:
        return None
    return text


def _get(mapping: Any, *path: Any) -> Any:
    """Walk nested Babel data dicts; None where any step is missing."""
    node = mapping
    for step in path:
        if node is None or not hasattr(node, "get"):
            return None
        node = node.get(step)
    return node


def _names(locale: Locale, root: Locale, field: str) -> dict[str, str]:
    """Flat code -> display-name tables (territories, languages, scripts, currencies)."""
    own: Mapping[str, Any] = getattr(locale, field)
    base: Mapping[str, Any] = getattr(root, field)
    out: dict[str, str] = {}
    for code in own:
        text = _clean(own[code], _strings(base.get(code)))
        if text is not None:
            out[str(code)] = text
    return out


def _calendar_names(locale: Locale, root: Locale, field: str, ids: Mapping[int, str]) -> dict[str, str]:
    """Wide names, stand-alone first (nominative forms), format context as fallback."""
    own = getattr(locale, field)
    base = getattr(root, field)
    out: dict[str, str] = {}
    for index, key in ids.items():
        root_values = frozenset().union(*(_strings(_get(base, ctx, width, index)) for ctx in base for width in base[ctx]))
        for context in ("stand-alone", "format"):
            text = _clean(_get(own, context, "wide", index), root_values)
            if text is not None:
                out[key] = text
                break
    return out


def _render(locale: Locale, forms: Any, root_values: frozenset[str], number_text: str) -> str | None:
    """A plural pattern rendered with 7, in the plural form the locale picks for 7."""
    if forms is None or not hasattr(forms, "get"):
        return None
    form = locale.plural_form(_RENDER_NUMBER)
    if _get(forms, form) is None:
        form = "other"
    pattern = _clean(_get(forms, form), root_values)
    if pattern is None or _PLACEHOLDER not in pattern:
        return None
    return pattern.replace(_PLACEHOLDER, number_text).strip() or None


def _units(locale: Locale, root: Locale) -> dict[str, str]:
    """Unit patterns such as "{0} kilometers", rendered as "7 kilometers"."""
    own = locale._data["unit_patterns"]
    base = root._data["unit_patterns"]
    number_text = format_decimal(_RENDER_NUMBER, locale=locale)
    out: dict[str, str] = {}
    for unit in own:
        root_values = _strings(base.get(unit))
        for width in _UNIT_WIDTHS:
            text = _render(locale, _get(own, unit, width), root_values, number_text)
            if text is not None:
                out[str(unit)] = text
                break
    return out


def _unit_names(locale: Locale, root: Locale) -> dict[str, str]:
    """Unit display names such as "kilometers"."""
    own = locale._data["unit_display_names"]
    base = root._data["unit_display_names"]
    out: dict[str, str] = {}
    for unit in own:
        root_values = _strings(base.get(unit))
        for width in _UNIT_WIDTHS:
            text = _clean(_get(own, unit, width), root_values)
            if text is not None:
                out[str(unit)] = text
                break
    return out


def _relative_time(locale: Locale, root: Locale) -> dict[str, str]:
    """Wide relative-time patterns ("in {0} years", "{0} days ago") rendered with 7."""
    own = locale._data["date_fields"]
    base = root._data["date_fields"]
    number_text = format_decimal(_RENDER_NUMBER, locale=locale)
    out: dict[str, str] = {}
    for field in own:
        if "-" in field:  # "-short" / "-narrow" widths are abbreviations, not phrases
            continue
        root_values = frozenset().union(*(_strings(base.get(name)) for name in (field, f"{field}-short", f"{field}-narrow")))
        for direction in _RELATIVE_DIRECTIONS:
            text = _render(locale, _get(own, field, direction), root_values, number_text)
            if text is not None:
                out[f"{field}-{direction}"] = text
    return out


_EXTRACTORS: dict[str, Callable[[Locale, Locale], dict[str, str]]] = {
    "territories": lambda loc, root: _names(loc, root, "territories"),
    "languages": lambda loc, root: _names(loc, root, "languages"),
    "scripts": lambda loc, root: _names(loc, root, "scripts"),
    "currencies": lambda loc, root: _names(loc, root, "currencies"),
    "months": lambda loc, root: _calendar_names(loc, root, "months", {m: f"{m:02d}" for m in range(1, 13)}),
    "weekdays": lambda loc, root: _calendar_names(loc, root, "days", dict(enumerate(_WEEKDAY_IDS))),
    "unit_names": _unit_names,
    "units": _units,
    "relative_time": _relative_time,
}
assert tuple(_EXTRACTORS) == CLDR_CATEGORIES


@functools.lru_cache(maxsize=512)
def category_values(locale_id: str, category: str) -> tuple[tuple[str, str], ...]:
    """One locale's (key, value) pairs for one category; cached, immutable."""
    locale = Locale.parse(locale_id)
    values = _EXTRACTORS[category](locale, Locale("root"))
    return tuple((f"{category}:{key}", text) for key, text in values.items())


def cldr_multiway_table(langs: Sequence[str], categories: Sequence[str] = CLDR_CATEGORIES) -> pa.Table:
    """Wide table: ``key`` plus one string column per FLORES code, in the order given.

    A row is one CLDR key; cells are that locale's own translation, null where the
    locale defines none. Keys held by fewer than two of ``langs`` are dropped because
    they are not parallel. Keys are unique and sorted so the output is deterministic.
    """
    if isinstance(langs, str) or isinstance(categories, str):
        raise TypeError("langs and categories must be sequences of strings, not a string")
    for category in categories:
        if category not in _EXTRACTORS:
            raise ValueError(f"unknown CLDR category {category!r}; supported: {', '.join(CLDR_CATEGORIES)}")
    if len(set(langs)) != len(langs):
        raise ValueError(f"duplicate language codes in {list(langs)!r}")
    locale_ids: list[str] = []
    for code in langs:
        locale_id = cldr_locale(code)
        if locale_id is None:
            raise ValueError(f"no CLDR locale in Babel for language {code!r}")
        locale_ids.append(locale_id)

    per_lang: list[dict[str, str]] = []
    for locale_id in locale_ids:
        values: dict[str, str] = {}
        for category in dict.fromkeys(categories):
            values.update(category_values(locale_id, category))
        per_lang.append(values)

    counts: dict[str, int] = {}
    for values in per_lang:
        for key in values:
            counts[key] = counts.get(key, 0) + 1
    keys = sorted(key for key, n in counts.items() if n >= 2)

    columns: dict[str, pa.Array] = {"key": pa.array(keys, type=pa.string())}
    for code, values in zip(langs, per_lang):
        columns[code] = pa.array([values.get(key) for key in keys], type=pa.string())
    return pa.table(columns)
