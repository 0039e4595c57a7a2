"""benchmarks/shapes.py: the real-shape builders have the published sizes and run end to end."""

from __future__ import annotations

import json

import pytest

from benchmarks.shapes import (
    NLLB_1_3B,
    NLLB_3_3B,
    NLLB_600M,
    XLMR_BASE,
    XLMR_LARGE,
    NllbShape,
    XlmrShape,
    build_nllb_shape,
    build_xlmr_shape,
    nllb_config,
    non_embedding_parameters,
    parameter_count,
    peak_rss_bytes,
    peak_rss_reset,
    xlmr_config,
)


@pytest.mark.parametrize(
    ("shape", "published"),
    [(NLLB_600M, 615e6), (NLLB_1_3B, 1.37e9), (NLLB_3_3B, 3.34e9)],
)
def test_nllb_shapes_have_the_published_parameter_counts(shape, published):
    from transformers import M2M100ForConditionalGeneration

    config = nllb_config(shape)
    assert config.vocab_size == 256_206
    assert parameter_count(config, M2M100ForConditionalGeneration) == pytest.approx(published, rel=0.01)


def test_nllb_600m_embeddings_are_tied_and_counted_once():
    from transformers import M2M100ForConditionalGeneration

    config = nllb_config(NLLB_600M)
    total = parameter_count(config, M2M100ForConditionalGeneration)
    body = non_embedding_parameters(config, M2M100ForConditionalGeneration)
    assert total - body == 256_206 * 1024  # one shared matrix: encoder, decoder and output projection


@pytest.mark.parametrize(("shape", "published"), [(XLMR_BASE, 278e6), (XLMR_LARGE, 560e6)])
def test_xlmr_shapes_have_the_published_parameter_counts(shape, published):
    from transformers import XLMRobertaModel

    assert parameter_count(xlmr_config(shape), XLMRobertaModel) == pytest.approx(published, rel=0.01)


@pytest.mark.slow
def test_small_vocabulary_tokenizer_in_a_full_vocabulary_model_converts_to_ctranslate2(tmp_path):
    """The tiny tokenizer is far smaller than the model's vocabulary: the checkpoint keeps the
    model's size and CTranslate2 pads its vocabulary to it, so the converted model translates."""
    import ctranslate2

    from tasks.translate.engine import NllbTokenizer
    from tasks.translate.model_stage import convert_checkpoint, model_vocabulary

    shape = NllbShape("test", d_model=32, layers=1, ffn_dim=64, heads=2, vocab_size=3000, max_positions=128)
    checkpoint = build_nllb_shape(tmp_path / "hf", shape, tokenizer_vocab=500)
    assert json.loads((checkpoint / "config.json").read_text())["vocab_size"] == 3000
    convert_checkpoint(checkpoint, tmp_path / "ct2", "int8")
    assert len(model_vocabulary(tmp_path / "ct2")) == 3000
    tokenizer = NllbTokenizer(checkpoint / "tokenizer.json")
    source = tokenizer.encode(["The river city."], "eng_Latn", 64)
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    result = translator.translate_batch(source, target_prefix=[["fra_Latn"]], min_decoding_length=6, max_decoding_length=6)
    assert len(result[0].hypotheses[0]) == 6


def test_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path):
    shape = NllbShape("too-small", d_model=16, layers=1, ffn_dim=32, heads=2, vocab_size=300)
    with pytest.raises(ValueError, match="more than the too-small vocabulary"):
        build_nllb_shape(tmp_path, shape, tokenizer_vocab=500)


def test_xlmr_builder_writes_a_model_of_the_shape_with_the_tiny_tokenizer(tmp_path):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    shape = XlmrShape("test", hidden=32, layers=2, heads=2, ffn_dim=64, vocab_size=5000)
    out = build_xlmr_shape(tmp_path / "qa", shape, head="qa")
    model = AutoModelForQuestionAnswering.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.vocab_size == 5000 and model.config.num_hidden_layers == 2
    assert len(tokenizer) < 5000
    with pytest.raises(ValueError, match="head must be"):
        build_xlmr_shape(tmp_path / "x", shape, head="mlm")


def test_peak_rss_reset_lowers_the_peak():
    import numpy as np

    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    high = peak_rss_bytes()
    del block
    if not peak_rss_reset():
        pytest.skip("no /proc/self/clear_refs here")
    assert peak_rss_bytes() < high - 32 * 2**20
