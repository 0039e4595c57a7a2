"""Artifact keys: the content address of a stage output.

A key is a sha256 over exactly what determines a stage's output: the stage name, the
stage's explicit code version, its config section, the keys of its input artifacts and
fingerprints of any external sources it reads. Anything else (timeouts, worker counts,
logging) must be left out by the caller so that it does not invalidate the cache.

`KEY_SCHEME` names how the callers build those ingredients; it is hashed too, so a new
scheme changes every key once (2: input files by content, their paths out of the config;
1: by size and mtime, paths in the config).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

# `\Z`, not `$`: `$` also matches before a trailing newline, which let "embed\n" through
KEY_PATTERN = re.compile(r"^[0-9a-f]{64}\Z")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,63}\Z")
KEY_SCHEME = 2
KEY_SCHEMES = {1: "size and mtime keys", 2: "content keys"}


class InvalidNameError(ValueError):
    """A stage, pipeline or key name that could escape the store root or is malformed."""


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal values hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def artifact_key(
    stage: str,
    code_version: str,
    config: Mapping[str, Any],
    input_keys: Mapping[str, str],
    source_fingerprints: Mapping[str, Any] | None = None,
) -> str:
    """sha256 over (key scheme, stage, code version, canonical config, input keys, source fingerprints)."""
    check_name(stage, "stage")
    for key in input_keys.values():
        check_key(key)
    payload = {
        "scheme": KEY_SCHEME,
        "stage": stage,
        "code_version": str(code_version),
        "config": dict(config),
        "inputs": dict(input_keys),
        "sources": dict(source_fingerprints or {}),
    }
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def attempt_key(config_key: str, attempt: int) -> str:
    """The key of the `attempt`-th rebuild (1, 2, ...) of the artifact keyed `config_key`.

    A forced rebuild never writes into, or deletes, the version it replaces: it builds beside it
    under this key, and the ref moves once the new version is committed. The number is part of
    the key (not a random id) so that a forced rebuild that was killed resumes where it stopped
    when it is run again."""
    check_key(config_key)
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, not {attempt}")
    return hashlib.sha256(f"xlembed-rebuild\0{config_key}\0{attempt}".encode()).hexdigest()


def check_key(key: str) -> str:
    """Keys become path components: only 64 lowercase hex digits are accepted."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise InvalidNameError(f"invalid artifact key {key!r}: expected 64 lowercase hex digits")
    return key


def check_name(name: str, what: str = "name") -> str:
    """Stage and pipeline names become path components: no separators, dots or upper case."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidNameError(f"invalid {what} {name!r}: use lowercase letters, digits, '_' or '-', starting with a letter")
    return name
