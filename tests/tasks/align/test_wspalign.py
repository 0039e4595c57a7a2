"""The batched WSPAlign backend on a tiny random question-answering model vs one question at a time."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.align.backends.wspalign import MARKER, WspAligner, WspalignLoadError, WspalignSettings
from tasks.align.words import split_words
from tests.tasks.align.conftest import flores_rows

SENTENCES = {
    "eng_Latn": ["The cat sleeps on the sofa.", "The river is under the old bridge tonight!", "Light, water and people."],
    "fra_Latn": ["Le chat dort sur le canapé.", "La rivière est sous le vieux pont ce soir !", "Lumière, eau et gens."],
    "zho_Hans": ["猫在沙发上睡觉。", "今晚河在旧桥下面！", "光、水和人。"],
}


def build(lang_rows: dict[str, list[str]]) -> tuple[list[list[str]], np.ndarray]:
    sentences, index = [], {}
    for lang, rows in lang_rows.items():
        for k, text in enumerate(rows):
            index[lang, k] = len(sentences)
            sentences.append(split_words(text, lang))
    n = len(next(iter(lang_rows.values())))
    pairs = [(index["eng_Latn", k], index[lang, k]) for lang in lang_rows if lang != "eng_Latn" for k in range(n)]
    return sentences, np.array(pairs)


def assert_same(batched, reference) -> None:
    np.testing.assert_array_equal(batched[0], reference[0])
    np.testing.assert_array_equal(batched[1], reference[1])
    np.testing.assert_allclose(batched[2], reference[2], rtol=1e-4, atol=1e-6)


def test_questions_are_assembled_at_token_level_exactly_as_the_tokenizer_encodes_them(wsp_aligner: WspAligner) -> None:
    a = split_words("The river, under the light!", "eng_Latn")
    b = split_words("La rivière sous la lumière.", "fra_Latn")
    tok = wsp_aligner.tokenize([a, b])
    rows = np.arange(len(a))
    batch = wsp_aligner.assemble_questions(
        tok, np.zeros(len(a), dtype=np.int64), np.ones(len(a), dtype=np.int64), tok.first[rows], tok.end[rows]
    )
    for i, word in enumerate(a):
        question = " ".join([*a[:i], MARKER, word, MARKER, *a[i + 1 :]])
        expected = wsp_aligner.tokenizer(question, " ".join(b))["input_ids"]
        got = batch["input_ids"][i][batch["attention_mask"][i] == 1]
        assert got.tolist() == expected


def test_batched_equals_one_question_at_a_time(wsp_aligner: WspAligner) -> None:
    sentences, pairs = build(SENTENCES)
    batched = wsp_aligner.align(sentences, [], pairs)
    total = 0
    for (a, b), links in zip(pairs, batched):
        assert links is not None
        assert_same(links, wsp_aligner.align_reference(sentences[a], sentences[b]))
        total += len(links[0])
    assert total > 0  # the tiny model does predict spans


def test_batched_equals_one_question_at_a_time_on_flores_rows(wsp_aligner: WspAligner) -> None:
    rows = {code: flores_rows(code, 1, start=10) for code in ("eng_Latn", "kaz_Cyrl", "jpn_Jpan")}
    sentences, pairs = build(rows)
    for (a, b), links in zip(pairs, wsp_aligner.align(sentences, [], pairs)):
        if links is not None:
            assert_same(links, wsp_aligner.align_reference(sentences[a], sentences[b]))


def test_small_batches_and_the_sum_combination_do_not_change_batched_vs_reference(tiny_wspalign_dir) -> None:
    settings = WspalignSettings(
        source="local", model=str(tiny_wspalign_dir), combine="sum", threshold=0.01, batch_tokens=256, device="cpu"
    )
    aligner = WspAligner.load(settings)
    sentences, pairs = build({lang: rows[:2] for lang, rows in SENTENCES.items()})
    for (a, b), links in zip(pairs, aligner.align(sentences, [], pairs)):
        assert_same(links, aligner.align_reference(sentences[a], sentences[b]))


def test_pairs_longer_than_the_model_allows_are_dropped(tiny_wspalign_dir) -> None:
    settings = WspalignSettings(source="local", model=str(tiny_wspalign_dir), max_seq_length=24, device="cpu")
    aligner = WspAligner.load(settings)
    sentences = [["a", "b"], ["c"], ["word"] * 30]
    out = aligner.align(sentences, [], np.array([[0, 1], [0, 2]]))
    assert out[0] is not None and out[1] is None


def test_model_loading_refuses_pickles_and_missing_dirs(tmp_path) -> None:
    with pytest.raises(WspalignLoadError, match="not found"):
        WspAligner.load(WspalignSettings(source="local", model=str(tmp_path / "nope")))
    (tmp_path / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(WspalignLoadError, match="no .safetensors"):
        WspAligner.load(WspalignSettings(source="local", model=str(tmp_path)))


def forward_precisions(aligner: WspAligner, sentences: list[list[str]], pairs: np.ndarray) -> set[tuple[str, object]]:
    """(float32 matmul precision, dtype of the first linear layer's output) of every forward pass."""
    import torch

    seen = set()
    linear = next(m for m in aligner.model.modules() if isinstance(m, torch.nn.Linear))
    handle = linear.register_forward_hook(lambda _m, _i, out: seen.add((torch.get_float32_matmul_precision(), out.dtype)))
    try:
        aligner.align(sentences, [], pairs)
        aligner.align_reference(sentences[pairs[0, 0]], sentences[pairs[0, 1]])
    finally:
        handle.remove()
    return seen


def test_default_precision_is_fp32_with_tf32_off_and_bf16_autocasts_when_asked(tiny_wspalign_dir) -> None:
    import torch

    sentences, pairs = build({lang: rows[:1] for lang, rows in SENTENCES.items()})
    fp32 = WspAligner.load(WspalignSettings(source="local", model=str(tiny_wspalign_dir), device="cpu"))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # TF32 on, as a process may have left it
    try:
        assert forward_precisions(fp32, sentences, pairs) == {("highest", torch.float32)}
    finally:
        torch.set_float32_matmul_precision(before)
    bf16 = WspAligner.load(WspalignSettings(source="local", model=str(tiny_wspalign_dir), device="cpu", precision="bf16"))
    assert {dtype for _, dtype in forward_precisions(bf16, sentences, pairs)} == {torch.bfloat16}


def test_tokenising_every_sentence_at_once_maps_tokens_to_words_as_sentence_by_sentence(wsp_aligner: WspAligner) -> None:
    from tasks.align.backends.base import word_of_tokens

    sentences = [
        split_words(text, code)
        for code in ("eng_Latn", "zho_Hans", "kaz_Cyrl", "tha_Thai", "jpn_Jpan")
        for text in flores_rows(code, 40)
    ]
    sentences += [[], ["a"], ["¶", "x"]]
    tok = wsp_aligner.tokenize(sentences)
    offsets = wsp_aligner.tokenizer([" ".join(w) for w in sentences], add_special_tokens=False, return_offsets_mapping=True)[
        "offset_mapping"
    ]
    for k, (words, row) in enumerate(zip(sentences, offsets)):
        token_word = word_of_tokens(
            np.array([len(w) for w in words], dtype=np.int64), np.array([o[0] for o in row], dtype=np.int64)
        )
        span = slice(tok.offset[k], tok.offset[k] + tok.length[k])
        words_span = slice(tok.word_offset[k], tok.word_offset[k] + tok.n_words[k])
        assert tok.word[span].tolist() == token_word.tolist()
        assert tok.first[words_span].tolist() == np.searchsorted(token_word, np.arange(len(words)), side="left").tolist()
        assert tok.end[words_span].tolist() == np.searchsorted(token_word, np.arange(len(words)), side="right").tolist()


@pytest.mark.slow
def test_prefetching_batches_gives_the_links_of_assembling_them_in_turn_and_the_reference(tiny_wspalign_dir) -> None:
    """Real-length pairs (FLORES), many small batches: the worker thread that assembles the next
    batch changes nothing, and both equal the one-question reference."""
    rows = {code: flores_rows(code, 4, start=20) for code in ("eng_Latn", "fra_Latn", "hin_Deva")}
    sentences, pairs = build(rows)
    aligner = WspAligner.load(
        WspalignSettings(
            source="local", model=str(tiny_wspalign_dir), combine="union", threshold=0.0, batch_tokens=1024, device="cpu"
        )
    )
    tok = aligner.tokenize(sentences)
    assert len(aligner._batches(np.arange(2 * int(tok.n_words.sum())), np.full(2 * int(tok.n_words.sum()), 100))) > 3
    assert not aligner.prefetch  # on a CPU the model's threads keep the cores
    aligner.prefetch = True  # as on a GPU
    ahead = aligner.align(sentences, [], pairs)
    aligner.prefetch = False
    in_turn = aligner.align(sentences, [], pairs)
    for (a, b), x, y in zip(pairs, ahead, in_turn):
        assert x is not None and all(np.array_equal(u, v) for u, v in zip(x, y))
        assert_same(x, aligner.align_reference(sentences[a], sentences[b]))


def test_padding_fraction_counts_the_padding_of_the_batches_the_aligner_runs(tiny_wspalign_dir) -> None:
    aligner = WspAligner.load(WspalignSettings(source="local", model=str(tiny_wspalign_dir), batch_tokens=256, device="cpu"))
    sentences = [["a"] * 2, ["b"] * 3, ["c"] * 10]
    pairs = np.array([[0, 2], [0, 1]] * 4)  # in question order long and short rows alternate
    tok = aligner.tokenize(sentences)
    length = aligner.sequence_lengths(tok, pairs)
    questions = np.repeat(np.concatenate([length, length]), [2] * 8 + [10, 3] * 4)
    batches = aligner._batches(np.argsort(questions, kind="stable"), questions)
    padded = sum(len(b) * questions[b].max() for b in batches)
    assert aligner.padding_fraction(pairs, tok) == pytest.approx(1 - questions.sum() / padded)
    assert 0 <= aligner.padding_fraction(pairs, tok) < aligner.padding_fraction(pairs, tok, sort=False)
