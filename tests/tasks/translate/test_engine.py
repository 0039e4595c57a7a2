"""Batching, ordering and the multi-way draw, with a recording fake and with real CTranslate2."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.translate.config import DecodingConfig
from tasks.translate.engine import NllbTokenizer, get_translator, plan_batches, translate_tokens
from tasks.translate.layout import draw_subsets, multiway_layout


@dataclass
class _Hypotheses:
    hypotheses: list[list[str]]


class _Async:
    def __init__(self, value: _Hypotheses) -> None:
        self.value = value

    def result(self) -> _Hypotheses:
        return self.value


class RecordingTranslator:
    """Echoes each source reversed after its target prefix, and records every batch."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def translate_batch(self, source, target_prefix, **options):  # noqa: ANN001, ANN201
        self.calls.append({"lengths": [len(s) for s in source], **options})
        return [_Async(_Hypotheses([[*p, *reversed(s), "</s>"]])) for s, p in zip(source, target_prefix)]


@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=60), st.integers(16, 200))
def test_batches_are_sorted_bounded_and_results_restored(lengths: list[int], budget: int) -> None:
    sources = [[f"t{i}"] * n for i, n in enumerate(lengths)]
    prefixes = [[f"lang{i % 3}"] for i in range(len(lengths))]
    fake = RecordingTranslator()
    decoding = DecodingConfig(max_length_ratio=1.5, max_length_extra=2, max_decoding_length=50)
    finished: list[int] = []
    out = translate_tokens(fake, sources, prefixes, decoding, budget, progress=finished.append)
    assert out == [list(reversed(s)) for s in sources]  # input order, prefix and </s> removed
    assert sum(finished) == len(sources)  # progress in sentences, one per finished translation
    seen = [n for call in fake.calls for n in call["lengths"]]
    assert seen == sorted(lengths)
    batches = plan_batches(np.array(lengths), budget, decoding)
    limits = [b.max_decoding_length for b in batches]
    assert [c["max_decoding_length"] for c in fake.calls] == [k for i, k in enumerate(limits) if i == 0 or limits[i - 1] != k]
    for batch in batches:
        longest = int(max(np.array(lengths)[batch.indices]))
        assert sum(np.array(lengths)[batch.indices]) <= budget or len(batch.indices) == 1
        assert batch.max_decoding_length == min(50, int(np.ceil(1.5 * longest + 2)))
    for call in fake.calls:
        assert call["batch_type"] == "tokens" and call["max_batch_size"] == budget and call["sampling_topk"] == 1


def test_plan_batches_packs_greedily() -> None:
    batches = plan_batches(np.array([5, 1, 5, 3, 9]), 10, DecodingConfig())
    assert [b.indices.tolist() for b in batches] == [[1, 3, 0], [2], [4]]


def test_real_batched_translation_equals_one_by_one(model_dir: Path) -> None:
    """Order restored on the real model: batched = each sentence alone (float32, greedy)."""
    tokenizer = NllbTokenizer(model_dir / "tokenizer" / "tokenizer.json")
    texts = [
        "A short one.",
        "A much longer sentence about rivers, towns and bridges in the north.",
        "Mid length text here.",
        "Hi",
    ]
    sources = tokenizer.encode(texts, "eng_Latn", 512)
    prefixes = [["fra_Latn"], ["hin_Deva"], ["jpn_Jpan"], ["deu_Latn"]]
    translator = get_translator(model_dir / "ctranslate2", "cpu", "float32")
    decoding = DecodingConfig(beam_size=1, max_length_ratio=0, max_length_extra=12)  # the same limit in every batch
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    batched = translate_tokens(translator, [sources[i] for i in order], [prefixes[i] for i in order], decoding, 10_000)
    alone = [translate_tokens(translator, [sources[i]], [prefixes[i]], decoding, 10_000)[0] for i in order]
    assert batched == alone
    assert all(batched)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30, unique=True), st.integers(1, 6), st.integers(0, 2**32))
def test_draw_is_k_per_row_deterministic_and_order_independent(group_ids: list[str], k: int, seed: int) -> None:
    mask = draw_subsets(group_ids, 6, k, seed)
    assert (mask.sum(axis=1) == k).all()
    assert (draw_subsets(list(reversed(group_ids)), 6, k, seed) == mask[::-1]).all()
    assert (draw_subsets(group_ids[:1], 6, k, seed) == mask[:1]).all()


def test_draw_is_roughly_uniform_over_languages() -> None:
    ids = [f"g{i}" for i in range(6000)]
    counts = draw_subsets(ids, 6, 3, 42).sum(axis=0)
    assert np.all(np.abs(counts / 6000 - 0.5) < 0.03)
    ablate = multiway_layout(ids, ["a", "b", "c", "d", "e", "f"], 3, False, 42)
    assert abs(ablate.keep_source.mean() - 4 / 7) < 0.03
    assert ((ablate.targets.sum(axis=1) + ablate.keep_source) == 4).all()
