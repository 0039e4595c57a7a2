"""The one tiny-model builder (tasks/tiny_models.py) writes, byte for byte, the files the four
per-stage builders it replaced wrote (tasks/{align,encoders,translate,train}/tiny.py): the
`tiny_random` sources of the shipped configs (smoke, demo) build these models at run time, and
their artifacts and keys assume the same model every time.

The digests were recorded with the old builders, at their default settings, under the package
versions in RECORDED_WITH (random init and tokenizer training depend on them, which is why the
tiny_random sources key on them too); under other versions the comparison is skipped, not failed.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import pytest

from tasks.tiny_models import (
    build_tiny_model,
    build_tiny_nllb,
    build_tiny_wspalign,
    multiway_rows,
    synthetic_sentences,
    train_tokenizer,
)

RECORDED_WITH = {"torch": "2.13.0+cpu", "transformers": "5.23.0", "tokenizers": "0.23.3", "babel": "2.18.0"}

BERT_TOKENIZER = {
    "tokenizer.json": "fe4fe778f71fb37cbadede69936d4e308350813339901c0b1df1da981bf7698c",
    "tokenizer_config.json": "cc21f3d5467039f7a2dc24c40886f738eefd3f9c0112dcae2a19c7517c2ed906",
}
EXPECTED = {
    "wspalign": {
        "config.json": "37fd0447dbed4dd7243288593612601a4e674e92b7394b178b6106f8f025d458",
        "model.safetensors": "ee9535f73cfd3b896838703ba4c54863f5723b5f58d3a8f701b7404a9e7c3a02",
        "tokenizer.json": "0cb304e7bcf900c136ca7673775a6c11631055703054940922a08415b9fb64f9",
        "tokenizer_config.json": "345b00a0a641574dc972dbcacfd61f7b3554c068441f5b50e314595c6759ceac",
    },
    "bert": {
        "config.json": "12dd6c6729b0a0c65e679e2b771516a9fca15339fedf6f7716b08543168441a5",
        "model.safetensors": "08cae6bc4e980d5b5f39474a5004eae4ca03809c600a432e92a418ebdddbdaad",
        **BERT_TOKENIZER,
    },
    "bert_no_pooler": {
        "config.json": "12dd6c6729b0a0c65e679e2b771516a9fca15339fedf6f7716b08543168441a5",
        "model.safetensors": "4c9491ff9a825b82ddf80162dbc621239a3107f938e5b7c042ebebbce7de7807",
        **BERT_TOKENIZER,
    },
    "nllb": {
        "config.json": "d02a58a5830b47d2ca9ecebf29ba091fae6780614d63cb27c668c025d86054f7",
        "generation_config.json": "daaac870d718ecce97f949d806bb6bd0bfacdc8dabd8533192219c54ad5145e8",
        "model.safetensors": "daa6dcbb78b3a373be57f987fe22ff5fc6524cff0341ea705014d203a90327f2",
        "tokenizer.json": "a4321acec89e0d1778d233158b7a9efe07ea345b17240ced28cb45dfe53eccab",
        "tokenizer_config.json": "f92b9ef294753dc76f5e0a22726e8527bd0c2069ca7ca08d97ac846c7144c0c0",
    },
}
# json.dumps(multiway_rows(20), sort_keys=True, ensure_ascii=False) and json.dumps(synthetic_sentences(50), ensure_ascii=False)
MULTIWAY_ROWS_20 = "1d3eac786ab5d612b446ffb4f88c99a9aca4de6107b855afef7abc5e42c4c3ab"
SENTENCES_50 = "1b071c4a8e9a4e12bc5aefc71b04907532a8e37e316a1f2e03e4a8b369424f26"

BUILDERS = {
    "wspalign": lambda d: build_tiny_wspalign(d),
    "bert": lambda d: build_tiny_model(d),
    "bert_no_pooler": lambda d: build_tiny_model(d, pooler=False),
    "nllb": lambda d: build_tiny_nllb(d),
}


def _digests(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _sha256(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_builder_writes_the_bytes_of_the_builder_it_replaced(name: str, tmp_path: Path) -> None:
    installed = {package: version(package) for package in RECORDED_WITH}
    if installed != RECORDED_WITH:
        pytest.skip(f"digests recorded under {RECORDED_WITH}, installed {installed}")
    assert _digests(BUILDERS[name](tmp_path / name)) == EXPECTED[name]


def test_the_synthetic_text_and_rows_are_those_of_before() -> None:
    assert _sha256(multiway_rows(20)) == MULTIWAY_ROWS_20
    assert hashlib.sha256(json.dumps(synthetic_sentences(50), ensure_ascii=False).encode()).hexdigest() == SENTENCES_50


def test_one_tokenizer_trainer_serves_every_architecture() -> None:
    texts = synthetic_sentences(60)
    pieces = {}
    for algorithm, specials, unk in (
        ("wordpiece", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[UNK]"),
        ("unigram", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<unk>"),
        ("bpe", ["<s>", "<pad>", "</s>", "<unk>"], "<unk>"),
    ):
        tok = train_tokenizer(algorithm, texts, vocab_size=200, specials=specials, unk_token=unk)
        assert [tok.id_to_token(i) for i in range(len(specials))] == specials
        pieces[algorithm] = tok.encode("the river city").tokens
    assert "[UNK]" not in pieces["wordpiece"] and pieces["wordpiece"][1].startswith("##")  # BERT: continuations marked
    assert pieces["unigram"][0].startswith("▁") and pieces["bpe"][0].startswith("▁")  # SentencePiece-style: words marked
    with pytest.raises(ValueError, match="wordpiece, unigram, bpe"):
        train_tokenizer("sentencepiece", texts, vocab_size=200, specials=["<unk>"], unk_token="<unk>")  # type: ignore[arg-type]
