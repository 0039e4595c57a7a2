"""Pipeline configs back to TOML (what `tomllib` reads, the way back): a sweep's report keeps
each variant's config as a file that `xlembed run` accepts and a person can read and edit.

`tomli_w` writes it: every table, nested ones included, as its own `[section]` (inline tables
are hard to read and edit in a long config); arrays of tables as `[[section]]`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

import tomli_w


def toml_document(raw: Mapping[str, Any]) -> str:
    """A TOML document equal to `raw`; a value TOML cannot hold is a TypeError naming it."""
    text = tomli_w.dumps(dict(raw))
    if tomllib.loads(text) != raw:  # a value TOML cannot hold exactly (never expected from a parsed TOML)
        raise ValueError("the config does not survive a TOML round trip")
    return text
