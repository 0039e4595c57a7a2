"""benchmarks/align_throughput.py: tie margins, the batched/single forward comparison, SimAlign's layer."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.align_throughput import (
    ForwardCapture,
    answer_margin,
    compare_forwards,
    context_region,
    load_pairs,
    xlmr_layer_encoder,
)
from benchmarks.shapes import XlmrShape, build_xlmr_shape

# 12 layers as XLM-R base, small widths: the depth is what collapsed the old builder's model
DEEP_SMALL = XlmrShape("deep-small", hidden=64, layers=12, heads=4, ffn_dim=256, vocab_size=2000)


@pytest.fixture(scope="module")
def deep_small_qa(tmp_path_factory):
    return build_xlmr_shape(tmp_path_factory.mktemp("qa"), DEEP_SMALL, head="qa")


@pytest.fixture(scope="module")
def tiny_aligner(tmp_path_factory):
    from tasks.align.backends.wspalign import WspAligner, WspalignSettings
    from tasks.tiny_models import build_tiny_wspalign

    model_dir = build_tiny_wspalign(tmp_path_factory.mktemp("tiny"))
    return WspAligner.load(WspalignSettings(source="local", model=str(model_dir), combine="union", threshold=0.0, device="cpu"))


def test_answer_margin_is_the_relative_gap_between_the_two_best_answers():
    allowed = np.array([True, False, True, True])  # CLS, a question token, two context tokens
    # P(start) over CLS and the context = 1/4, 1/2, 1/4; P(end) = 1/4, 1/4, 1/2: null 1/16,
    # spans (2,2) 1/8, (2,3) 1/4, (3,3) 1/8 -> best 1/4, second 1/8
    start = np.log(np.array([1.0, 7.0, 2.0, 1.0]))
    end = np.log(np.array([1.0, 7.0, 1.0, 2.0]))
    assert answer_margin(start, end, allowed, max_answer_tokens=2) == pytest.approx(0.5)
    # equal logits: every span and the null answer score 1/9, a tie
    assert answer_margin(np.zeros(4), np.zeros(4), allowed, max_answer_tokens=2) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.slow
def test_context_region_is_the_pair_encodings_context_and_cls(tiny_aligner):
    tokenizer = tiny_aligner.tokenizer
    enc = tokenizer("the river ¶ city ¶ bright", "la rivière ville claire")
    expected = np.array([s == 1 for s in enc.sequence_ids(0)]) | (np.array(enc["input_ids"]) == tokenizer.cls_token_id)
    found = context_region(np.array(enc["input_ids"]), tiny_aligner.template, tokenizer.cls_token_id)
    assert found.tolist() == expected.tolist() and found.sum() > 2


def test_batched_rows_are_the_reference_questions_token_for_token(tiny_aligner):
    sentences, pairs, langs = load_pairs(3, synthetic=True)
    with ForwardCapture(tiny_aligner.model) as batched:
        tiny_aligner.align(sentences, langs, pairs)
    with ForwardCapture(tiny_aligner.model) as single:
        for a, b in pairs:
            tiny_aligner.align_reference(sentences[a], sentences[b])
    batched_rows, single_rows = batched.rows(), single.rows()
    questions = sum(len(sentences[a]) + len(sentences[b]) for a, b in pairs)
    assert len(single_rows) == len(batched_rows) == questions
    result = compare_forwards(batched_rows, single_rows, tiny_aligner)
    assert result["questions"] == questions and result["missing"] == 0
    assert result["logit_diff"] < 1e-4 and result["margin_min"] > result["logit_diff"]
    # a question the batch did not ask is counted, not skipped silently
    assert compare_forwards(batched_rows[1:], single_rows, tiny_aligner)["missing"] >= 1


def test_deep_qa_model_from_the_builder_keeps_positions_apart(deep_small_qa):
    """XLM-R's initialiser (std 0.02): the QA logits of a 12-layer random model differ between
    positions. The builder's former std 0.5 * sqrt(32 / hidden) collapsed every position to the
    same state (logits equal to ~3e-6), so every answer was a tie."""
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    model = AutoModelForQuestionAnswering.from_pretrained(deep_small_qa).eval()
    tokenizer = AutoTokenizer.from_pretrained(deep_small_qa)
    assert model.config.initializer_range == 0.02 and model.config.num_hidden_layers == 12
    enc = tokenizer("the river ¶ city ¶ bright", "la rivière ville claire sous la nuit", return_tensors="pt")
    with torch.no_grad():
        out = model(**enc)
    allowed = context_region(enc["input_ids"][0].numpy(), _template(tokenizer), tokenizer.cls_token_id)
    start, end = out.start_logits[0].double().numpy(), out.end_logits[0].double().numpy()
    assert np.ptp(start[allowed]) > 0.05 and np.ptp(end[allowed]) > 0.05
    assert answer_margin(start, end, allowed, max_answer_tokens=15) > 1e-3


def test_simalign_layer_encoder_gives_the_full_models_hidden_state_of_that_layer(deep_small_qa, tmp_path):
    import torch
    from transformers import AutoTokenizer, XLMRobertaModel

    cut = xlmr_layer_encoder(deep_small_qa, tmp_path / "layer8", 8)
    full = XLMRobertaModel.from_pretrained(deep_small_qa, add_pooling_layer=False).eval()
    short = XLMRobertaModel.from_pretrained(cut, add_pooling_layer=False).eval()
    assert short.config.num_hidden_layers == 8
    enc = AutoTokenizer.from_pretrained(cut)("the river city bright", return_tensors="pt")
    with torch.no_grad():
        expected = full(**enc, output_hidden_states=True).hidden_states[8]
        found = short(**enc).last_hidden_state
        last = full(**enc).last_hidden_state
    assert torch.allclose(found, expected, atol=1e-5)
    assert not torch.allclose(found, last, atol=1e-3)  # layer 8, not the last
    with pytest.raises(ValueError, match="no layer 13"):
        xlmr_layer_encoder(deep_small_qa, tmp_path / "layer13", 13)


def _template(tokenizer):
    from tasks.align.backends.wspalign_tokens import PairTemplate

    return PairTemplate.from_tokenizer(tokenizer)


def test_host_path_times_now_and_before_with_fixed_logits_and_compares_their_links(tiny_aligner):
    import torch

    from benchmarks.align_throughput import fixed_logits_qa, host_path, profile_host_path

    stub = fixed_logits_qa(len(tiny_aligner.tokenizer))
    ids = torch.tensor([[5, 6, 7], [8, 9, 1]])
    out = stub(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert out.start_logits.shape == out.end_logits.shape == ids.shape
    assert torch.equal(stub(input_ids=ids).start_logits, out.start_logits)  # fixed: the same ids, the same logits
    sentences, pairs, langs = load_pairs(3, synthetic=True)
    threads = torch.get_num_threads()
    result = host_path(tiny_aligner, sentences, langs, pairs, threads=(1,), rounds=1)
    assert torch.get_num_threads() == threads
    assert result["identical"] is True
    assert set(result["stub"][1]) == {"now", "before"} and all(v > 0 for v in result["stub"][1].values())
    for run in result["real"].values():
        assert 0 < run["forward"] < run["total"]
    assert "assemble_questions" in profile_host_path(tiny_aligner, sentences, langs, pairs)
