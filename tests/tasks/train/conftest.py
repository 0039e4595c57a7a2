"""Small, fast training fixtures: a tiny random BERT with a WordPiece tokenizer trained on the
spot (tasks/tiny_models.py), a multi-way corpus of synthetic sentences in four languages that
translate each other word by word, and word alignments for it (tasks/tiny_models.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
from tasks.corpus.schema import CORPUS_SCHEMA
from tasks.tiny_models import build_tiny_model, multiway_rows


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("train-tiny-bert"))


@pytest.fixture(scope="session")
def corpus_table() -> pa.Table:
    return pa.Table.from_pylist(multiway_rows(120)[0], schema=CORPUS_SCHEMA)


@pytest.fixture(scope="session")
def alignment_table() -> pa.Table:
    return pa.Table.from_pylist(multiway_rows(120)[1], schema=WORD_ALIGNMENT_SCHEMA)
