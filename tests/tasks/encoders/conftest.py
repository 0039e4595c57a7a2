"""A tiny encoder built locally once per session (no hub, no network).

  tiny_model_dir   a transformers dir: a WordPiece tokenizer trained here on synthetic
                   multilingual sentences (PreTrainedTokenizerFast with [CLS]/[SEP]/[PAD]/[UNK]/[MASK])
                   and a random-weight, seeded BertModel (hidden 32, 2 layers, 2 heads)
  st_cls_dir       a sentence-transformers dir from it: Transformer + Pooling(cls) + Normalize
  st_mean_dense_dir                                    Transformer + Pooling(mean) + Dense(32->16, tanh) + Normalize

The builders live in tasks/tiny_models.py, so benchmarks and other tests use them too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.tiny_models import build_sentence_transformers, build_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def st_cls_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_sentence_transformers(tiny_model_dir, tmp_path_factory.mktemp("st-cls"), pooling="cls")


@pytest.fixture(scope="session")
def st_mean_dense_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_sentence_transformers(tiny_model_dir, tmp_path_factory.mktemp("st-mean-dense"), pooling="mean", dense_out=16)


@pytest.fixture(scope="session")
def reference_model(tiny_model_dir: Path):
    """The tiny model and tokenizer loaded independently of the Encoder, for manual computations."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(tiny_model_dir), local_files_only=True)
    model.eval()
    return AutoTokenizer.from_pretrained(str(tiny_model_dir), local_files_only=True), model
