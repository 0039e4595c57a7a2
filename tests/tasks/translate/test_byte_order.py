"""Strings in byte order through integer keys: the order pyarrow's string sort gives, and
duplicates found (the translate plan's group ids, issue 17 §2)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasks.translate import byte_order as module
from tasks.translate.byte_order import byte_order

# NUL (a real byte where keys pad with zeros), ASCII, digits, 2-, 3- and 4-byte UTF-8
ALPHABET = ["\x00", "a", "b", "z", "0", "1", "9", ":", "é", "ÿ", "日", "\U0001f600"]
PREFIXES = ["", "g", "src:", "flores200:dev:", "tatoeba:train:", "x\x00y", "日本:"]


def random_strings(rng: random.Random, n: int, with_duplicates: bool) -> list[str]:
    strings = []
    for _ in range(n):
        width = rng.randint(2, len(ALPHABET))
        tail = "".join(rng.choice(ALPHABET[:width]) for _ in range(rng.randint(0, 24)))
        strings.append(rng.choice(PREFIXES) + rng.choice(PREFIXES) + tail)
    if with_duplicates and strings:
        strings.insert(rng.randint(0, len(strings)), rng.choice(strings))
    return strings


def as_arrow(strings: list[str], rng: random.Random) -> pa.Array:
    """A StringArray or LargeStringArray, sometimes a slice of a longer one (offset != 0)."""
    kind = rng.choice([pa.string(), pa.large_string()])
    if rng.random() < 0.5:
        return pa.array(["zz", *strings, "aa"], kind).slice(1, len(strings))
    return pa.array(strings, kind)


@pytest.fixture(params=["default", "small blocks and runs"])
def sizes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Also with blocks of 5 strings and runs of 3 sorted on their own, so that small inputs
    take the paths large ones take."""
    if request.param != "default":
        monkeypatch.setattr(module, "BLOCK", 5)
        monkeypatch.setattr(module, "LARGE_RUN", 3)
    return request.param


@pytest.mark.slow
def test_order_is_pyarrows_and_pythons_string_order(sizes: str) -> None:
    rng = random.Random(17)
    for _ in range(400):
        strings = random_strings(rng, rng.randint(0, 40), with_duplicates=False)
        strings = list(dict.fromkeys(strings))
        array = as_arrow(strings, rng)
        order, duplicate = byte_order(array)
        assert duplicate is None
        assert [strings[i] for i in order] == sorted(strings)
        assert order.tolist() == pc.sort_indices(array).to_pylist()


@pytest.mark.slow
def test_a_duplicate_is_found_wherever_it_is(sizes: str) -> None:
    rng = random.Random(3)
    for _ in range(400):
        strings = random_strings(rng, rng.randint(1, 40), with_duplicates=True)
        _, duplicate = byte_order(as_arrow(strings, rng))
        assert duplicate is not None and strings.count(strings[duplicate]) > 1


@pytest.mark.parametrize(
    "strings",
    [
        ["a", "a\x00", "a\x00\x00"],  # zero padding is not a NUL byte: a prefix comes first
        ["abcdefg", "abcdefgh", "abcdefg\x00"],  # a string that ends where a key ends
        ["10", "9", "010", "1e3", "-1", "1.0", " 1"],  # numbers compare as text
        ["k" * 40 + "b", "k" * 40 + "a", "k" * 39, "k" * 41],  # a prefix longer than several keys
        ["source:" + "x" * 20 + str(i) for i in range(12)] + ["other:" + str(i) for i in range(5)],
        ["é", "e", "ÿ", "z", "日", "\U0001f600", "\uffff"],  # UTF-8 bytes, not UTF-16 units
        ["", "a", "\x00"],
        # two runs tied on their first key whose next keys meet at the boundary ("B"): not equal
        ["0" + "x" * 7 + "A", "0" + "x" * 7 + "B", "1" + "x" * 7 + "B", "1" + "x" * 7 + "C"],
    ],
)
def test_tricky_strings(strings: list[str], sizes: str) -> None:
    order, duplicate = byte_order(pa.array(strings))
    assert duplicate is None
    assert [strings[i] for i in order] == sorted(strings)


@pytest.mark.parametrize(
    ("strings", "twice"),
    [
        (["b", "a", "b"], "b"),
        (["", "x", ""], ""),
        (["p" * 30 + "q", "p" * 30, "p" * 30 + "q"], "p" * 30 + "q"),
        (["日本", "日本"], "日本"),
    ],
)
def test_duplicates(strings: list[str], twice: str, sizes: str) -> None:
    _, duplicate = byte_order(pa.array(strings))
    assert duplicate is not None and strings[duplicate] == twice


def test_many_ids_of_several_sources() -> None:
    """Runs larger than LARGE_RUN (each source's ids tie on their first key), at the default sizes."""
    rng = np.random.default_rng(0)
    numbers = rng.permutation(30_000)
    sources = np.array(["flores200:dev:", "tatoeba:train:", "wmt:"])[numbers % 3]
    array = pc.binary_join_element_wise(pa.array(sources), pa.array(numbers.astype(str)), "")
    order, duplicate = byte_order(array)
    assert duplicate is None
    assert np.array_equal(order, pc.sort_indices(array).to_numpy())


def test_nulls_are_refused() -> None:
    with pytest.raises(ValueError, match="1 null"):
        byte_order(pa.array(["a", None, "b"]))


def test_no_or_one_string() -> None:
    assert byte_order(pa.array([], pa.string()))[0].tolist() == []
    assert byte_order(pa.array(["only"]))[0].tolist() == [0]
