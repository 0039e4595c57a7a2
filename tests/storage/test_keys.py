"""Artifact keys: what changes a key, what must not, and which names may become paths."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.keys import InvalidNameError, artifact_key, canonical_json, check_key, check_name

HEX64 = re.compile(r"^[0-9a-f]{64}$")
K1 = "a" * 64
K2 = "b" * 64

BASE: dict[str, Any] = dict(
    stage="embed",
    code_version="3",
    config={"model": "labse", "batch": 32, "langs": ["de", "fr"], "norm": {"kind": "l2", "eps": 1e-6}},
    input_keys={"corpus": K1, "vocab": K2},
    source_fingerprints={"wiki": {"de": {"sha256": "c" * 64}, "fr": {"sha256": "d" * 64}}},
)


def key_of(**changes: Any) -> str:
    return artifact_key(**{**BASE, **changes})


def test_key_is_64_hex_and_deterministic() -> None:
    assert HEX64.match(key_of())
    assert key_of() == key_of() == artifact_key(**BASE)


@pytest.mark.parametrize(
    "changes",
    [
        {"stage": "embed2"},
        {"code_version": "4"},
        {"config": {**BASE["config"], "model": "laser"}},
        {"config": {**BASE["config"], "batch": 33}},
        {"config": {**BASE["config"], "langs": ["fr", "de"]}},  # list order is meaningful
        {"config": {**BASE["config"], "norm": {"kind": "l2", "eps": 1e-7}}},  # nested value
        {"config": {**BASE["config"], "extra": None}},  # an added key, even a null one
        {"config": {k: v for k, v in BASE["config"].items() if k != "batch"}},  # a removed key
        {"config": {**BASE["config"], "batch": "32"}},  # type matters
        {"config": {**BASE["config"], "batch": 32.5}},
        {"input_keys": {"corpus": K2, "vocab": K2}},  # an input's key
        {"input_keys": {"corpus2": K1, "vocab": K2}},  # an input's name
        {"input_keys": {"corpus": K1}},  # an input fewer
        {"source_fingerprints": {"wiki": {"de": {"sha256": "e" * 64}, "fr": {"sha256": "d" * 64}}}},
        {"source_fingerprints": {"wiki": {"fr": {"sha256": "c" * 64}, "de": {"sha256": "d" * 64}}}},  # swapped
        {"source_fingerprints": None},
    ],
    ids=lambda c: ",".join(c),
)
def test_every_ingredient_changes_the_key(changes: dict[str, Any]) -> None:
    assert key_of(**changes) != key_of()


def test_the_key_scheme_is_in_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import storage.keys

    before = key_of()
    monkeypatch.setattr(storage.keys, "KEY_SCHEME", storage.keys.KEY_SCHEME + 1)
    assert key_of() != before


def test_ingredients_do_not_bleed_into_each_other() -> None:
    # the same value moved from config to fingerprints is a different artifact
    a = artifact_key("embed", "1", {"x": 1}, {}, {})
    b = artifact_key("embed", "1", {}, {}, {"x": 1})
    assert a != b
    # stage name and code version are separate fields, not concatenated strings
    assert artifact_key("embed", "12", {}, {}) != artifact_key("embed1", "2", {}, {})


def test_dict_order_does_not_change_the_key() -> None:
    config = BASE["config"]
    reordered = {k: config[k] for k in reversed(list(config))}
    reordered["norm"] = {"eps": 1e-6, "kind": "l2"}
    inputs = {"vocab": K2, "corpus": K1}
    assert key_of(config=reordered, input_keys=inputs) == key_of()


def test_equivalent_spellings_give_the_same_key() -> None:
    assert key_of(source_fingerprints=None) == key_of(source_fingerprints={})
    assert artifact_key("embed", 3, {}, {}) == artifact_key("embed", "3", {}, {})  # type: ignore[arg-type]


def test_key_rejects_bad_stage_and_input_keys() -> None:
    with pytest.raises(InvalidNameError):
        key_of(stage="../embed")
    with pytest.raises(InvalidNameError):
        key_of(stage="Embed")
    with pytest.raises(InvalidNameError):
        key_of(input_keys={"corpus": "../" + "a" * 61})
    with pytest.raises(InvalidNameError):
        key_of(input_keys={"corpus": "A" * 64})


def test_key_rejects_values_that_are_not_json() -> None:
    with pytest.raises(ValueError):
        key_of(config={"x": math.nan})
    with pytest.raises(ValueError):
        key_of(config={"x": math.inf})
    with pytest.raises(TypeError):
        key_of(config={"x": object()})


# ----------------------------------------------------------------- canonical_json
def test_canonical_json_is_sorted_and_compact() -> None:
    assert canonical_json({"b": 1, "a": [1, 2, {"d": None, "c": True}]}) == '{"a":[1,2,{"c":true,"d":null}],"b":1}'


def test_canonical_json_ignores_insertion_order_and_round_trips() -> None:
    a = {"x": {"p": 1, "q": [3, 2]}, "y": "z"}
    b = {"y": "z", "x": {"q": [3, 2], "p": 1}}
    assert canonical_json(a) == canonical_json(b)
    assert json.loads(canonical_json(a)) == a


def test_canonical_json_keeps_unicode_and_rejects_nan() -> None:
    assert canonical_json({"t": "ünï 中文"}) == '{"t":"ünï 中文"}'
    assert canonical_json("a\nb") == '"a\\nb"'
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            canonical_json({"x": bad})


# ------------------------------------------------------------------ names, keys
@pytest.mark.parametrize("key", ["0" * 64, "0123456789abcdef" * 4, "f" * 64])
def test_check_key_accepts_64_lower_hex(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize(
    "key",
    [
        "",
        "a" * 63,
        "a" * 65,
        "A" * 64,
        "g" * 64,
        "../x",
        "a/b",
        "../" + "a" * 61,
        "a" * 62 + "/.",
        "a" * 63 + "\n",
        "a" * 64 + "\n",
        " " + "a" * 63,
        None,
        0,
    ],
    ids=repr,
)
def test_check_key_rejects(key: Any) -> None:
    with pytest.raises(InvalidNameError):
        check_key(key)


@pytest.mark.parametrize("name", ["a", "embed", "corpus_v2", "x-1", "a" * 64])
def test_check_name_accepts(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "../x",
        "..",
        ".",
        ".hidden",
        "a/b",
        "a\\b",
        "/abs",
        "Embed",
        "EMBED",
        "1abc",
        "_x",
        "-x",
        "a.b",
        "a b",
        "a:b",
        "a" * 65,
        "embed\n",
        "ëmbed",
        None,
        3,
    ],
    ids=repr,
)
def test_check_name_rejects(name: Any) -> None:
    with pytest.raises(InvalidNameError, match="invalid pipeline"):
        check_name(name, "pipeline")


def test_invalid_name_error_is_a_value_error() -> None:
    assert issubclass(InvalidNameError, ValueError)


# ------------------------------------------------------------------ properties
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
configs = st.dictionaries(st.text(max_size=8), json_values, max_size=6)
names = st.from_regex(r"[a-z][a-z0-9_-]{0,15}", fullmatch=True)
hex_keys = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)


def reversed_dicts(value: Any) -> Any:
    """The same value with every dict's insertion order reversed, recursively."""
    if isinstance(value, dict):
        return {k: reversed_dicts(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_dicts(v) for v in value]
    return value


@pytest.mark.slow
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stage=names,
    code_version=st.text(max_size=6),
    config=configs,
    inputs=st.dictionaries(names, hex_keys, max_size=3),
    prints=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)
def test_key_is_a_deterministic_order_insensitive_function(
    stage: str, code_version: str, config: dict[str, Any], inputs: dict[str, str], prints: dict[str, Any]
) -> None:
    key = artifact_key(stage, code_version, config, inputs, prints)
    assert HEX64.match(key)
    assert artifact_key(stage, code_version, config, inputs, prints) == key
    assert artifact_key(stage, code_version, reversed_dicts(config), reversed_dicts(inputs), reversed_dicts(prints)) == key
    # the config really is in the key: wrapping it changes it
    assert artifact_key(stage, code_version, {"wrapped": config}, inputs, prints) != key


@pytest.mark.slow
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=configs, b=configs)
def test_keys_equal_exactly_when_canonical_configs_equal(a: dict[str, Any], b: dict[str, Any]) -> None:
    same = canonical_json(a) == canonical_json(b)
    assert (artifact_key("s", "1", a, {}) == artifact_key("s", "1", b, {})) is same


@pytest.mark.slow
@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values)
def test_canonical_json_round_trips_and_ignores_order(value: Any) -> None:
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(reversed_dicts(value)) == text
    assert canonical_json(json.loads(text)) == text
