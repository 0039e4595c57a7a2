"""A TOML writer for pipeline configs (what `tomllib` reads, the way back): a sweep's report keeps
each variant's config as a file that `xlembed run` accepts."""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from datetime import date, datetime, time as clock_time
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_string(text: str) -> str:
    # JSON escapes quotes, backslashes and C0 controls as TOML wants; TOML also forbids a raw DEL
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (datetime, date, clock_time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v, where)}" for k, v in value.items()) + "}"
    raise TypeError(f"{where}: {value!r} ({type(value).__name__}) has no TOML form")


def toml_document(raw: Mapping[str, Any]) -> str:
    """A TOML document equal to `raw` (tables as sections, everything below them inline)."""
    top = [f"{_toml_key(k)} = {_toml_value(v, k)}" for k, v in raw.items() if not isinstance(v, Mapping)]
    sections = []
    for name, table in raw.items():
        if isinstance(table, Mapping):
            body = [f"{_toml_key(str(k))} = {_toml_value(v, f'{name}.{k}')}" for k, v in table.items()]
            sections.append("\n".join([f"[{_toml_key(name)}]", *body]))
    text = "\n".join(top) + ("\n\n" if top and sections else "") + "\n\n".join(sections) + "\n"
    if tomllib.loads(text) != raw:  # a value TOML cannot hold exactly (never expected from a parsed TOML)
        raise ValueError("the config does not survive a TOML round trip")
    return text

