"""The language-vector files beside a model: what the train stage writes, evaluate and export read back."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tasks.encoders.language_vectors import (
    LANGUAGE_EMBEDDING_FILE,
    LANGUAGES_FILE,
    LanguageVectorsError,
    has_language_vectors,
    read_language_vectors,
    write_language_vectors,
)


def test_vectors_written_from_a_trained_embedding_read_back_by_language(tmp_path):
    weight = torch.nn.Embedding(3, 8).weight  # as the trainer holds them: a parameter that requires grad
    langs = ["swh_Latn", "kaz_Cyrl", "fra_Latn"]
    write_language_vectors(tmp_path, weight, langs)

    assert has_language_vectors(tmp_path)
    assert json.loads((tmp_path / LANGUAGES_FILE).read_text(encoding="utf-8")) == langs
    vectors = read_language_vectors(tmp_path)
    assert list(vectors) == langs  # the training order, which the row index depends on
    for i, lang in enumerate(langs):
        assert vectors[lang].dtype == np.float32
        np.testing.assert_array_equal(vectors[lang], weight[i].detach().numpy())


def test_a_model_without_vectors_reads_as_none(tmp_path):
    assert not has_language_vectors(tmp_path)
    assert read_language_vectors(tmp_path) == {}


def test_files_that_disagree_are_refused_naming_both(tmp_path):
    write_language_vectors(tmp_path, np.zeros((2, 4), dtype=np.float32), ["swh_Latn", "fra_Latn"])
    (tmp_path / LANGUAGES_FILE).write_text(json.dumps(["swh_Latn"]), encoding="utf-8")
    with pytest.raises(LanguageVectorsError) as error:
        read_language_vectors(tmp_path)
    assert LANGUAGE_EMBEDDING_FILE in str(error.value) and LANGUAGES_FILE in str(error.value)
    assert "2 language vectors" in str(error.value)

    (tmp_path / LANGUAGES_FILE).unlink()  # the list is missing altogether
    with pytest.raises(LanguageVectorsError, match=LANGUAGES_FILE):
        read_language_vectors(tmp_path)


def test_a_weight_that_does_not_match_the_languages_is_not_written(tmp_path):
    with pytest.raises(LanguageVectorsError, match="3 language vectors for 2 languages"):
        write_language_vectors(tmp_path, np.zeros((3, 4)), ["swh_Latn", "fra_Latn"])
    assert not has_language_vectors(tmp_path)
