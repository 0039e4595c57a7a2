"""Property tests (hypothesis) for the parsers and the key computation not covered elsewhere
(tests/storage/test_keys.py and tests/tasks/corpus/test_readers.py hold the others)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flows.config import ConfigError, load_config
from tasks.evaluate.benchmarks.bucc import read_bucc
from tasks.evaluate.datasets import read_lines

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
line_text = st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=30)
endings = st.sampled_from(["\n", "\r\n"])


@SETTINGS
@given(lines=st.lists(st.tuples(line_text, endings), max_size=12), bom=st.booleans(), final=st.booleans())
def test_read_lines_splits_on_newline_only(lines: list[tuple[str, str]], bom: bool, final: bool) -> None:
    """Any mix of LF/CRLF endings, a BOM or not, a final newline or not: the same lines back,
    and U+2028/U+0085 inside a line never split it."""
    body = "".join(text + end for text, end in lines)
    if lines and not final:
        body = body[: -len(lines[-1][1])]
    expected = [text for text, _ in lines]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.txt"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + body.encode("utf-8"))
        got = read_lines(path)
    if lines and not final and expected[-1] == "":
        expected = expected[:-1]  # an empty last line without its newline is no line
    assert got == expected


ids = st.text(st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=8)
sentences = st.text(
    st.characters(blacklist_characters="\t\n\r", blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=20
)


@pytest.mark.slow
@SETTINGS
@given(
    src=st.dictionaries(ids, sentences, min_size=1, max_size=8),
    tgt=st.dictionaries(ids, sentences, min_size=1, max_size=8),
    data=st.data(),
)
def test_bucc_round_trip(src: dict[str, str], tgt: dict[str, str], data: st.DataObject) -> None:
    gold = data.draw(st.sets(st.tuples(st.sampled_from(sorted(src)), st.sampled_from(sorted(tgt))), max_size=6))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "de-en.sample.de").write_text("".join(f"{i}\t{s}\n" for i, s in src.items()), encoding="utf-8")
        (folder / "de-en.sample.en").write_text("".join(f"{i}\t{s}\n" for i, s in tgt.items()), encoding="utf-8")
        (folder / "de-en.sample.gold").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(gold)), encoding="utf-8")
        split = read_bucc(folder, "de", "sample")
    assert dict(zip(split.src_ids, split.src)) == src and dict(zip(split.tgt_ids, split.tgt)) == tgt
    assert split.gold == frozenset(gold)


toml_bits = st.sampled_from(
    [
        "[pipeline]\n",
        'name = "p"\n',
        "name = 5\n",
        "[corpus]\n",
        "[[corpus.sources]]\n",
        'kind = "cldr"\n',
        'kind = "text"\n',
        'langs = ["en", "kk"]\n',
        "langs = 3\n",
        'name = "s"\n',
        "seed = -1\n",
        "seed = 1.5\n",
        "[corpus.filters]\n",
        "max_chars = 0\n",
        "pipeline = 3\n",
        "corpus = []\n",
        "[evaluate]\n",
        "[base_model]\n",
        'source = "local"\n',
        "= broken\n",
        '"\\xff"\n',
        'stages = ["corpus"]\n',
        "max_workers = 0\n",
        "files = { en = 1 }\n",
        "[nope]\n",
        "\ufeff",
    ]
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(toml_bits, max_size=12).map("".join))
def test_config_loader_fails_only_with_config_errors(text: str) -> None:
    """Whatever TOML-ish text a user writes, the loader answers a config or a ConfigError (a
    one-line message for the CLI), never a traceback from deeper down."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.toml"
        path.write_text(text, encoding="utf-8")
        try:
            load_config(path)
        except ConfigError as exc:
            assert str(path) in str(exc)


@settings(max_examples=60, deadline=None, database=None)
@given(batch=st.integers(1, 10**6), download=st.text(min_size=1, max_size=20), seed=st.integers(0, 2**31))
def test_unkeyed_settings_do_not_change_the_key(batch: int, download: str, seed: int) -> None:
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.stage import stage_key

    base = {"seed": seed, "sources": [{"name": "s", "kind": "cldr", "langs": ["en", "kk"]}]}
    plain = CorpusConfig.model_validate(base)
    tuned = CorpusConfig.model_validate({**base, "read_batch_lines": batch, "download_dir": download})
    other = CorpusConfig.model_validate({**base, "seed": seed + 1})
    assert stage_key(CORPUS_STAGE, plain, {}, {}) == stage_key(CORPUS_STAGE, tuned, {}, {})
    assert stage_key(CORPUS_STAGE, plain, {}, {}) != stage_key(CORPUS_STAGE, other, {}, {})
