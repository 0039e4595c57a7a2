"""SimAlign: the batched argmax/itermax equal SimAlign's per-pair algorithm; runs on FLORES rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tasks.align.backends.simalign import SimAligner, SimalignSettings, argmax_links, itermax_links
from tasks.align.words import split_words
from tests.tasks.align.conftest import flores_rows


def simalign_iter_max(sim: np.ndarray, max_count: int = 2, alpha: float = 0.9) -> np.ndarray:
    """SimAlign's `iter_max`, one pair at a time (as in simalign/simalign.py)."""
    m, n = sim.shape
    forward = np.eye(n)[sim.argmax(axis=1)]
    backward = np.eye(m)[sim.argmax(axis=0)]
    inter = forward * backward.transpose()
    if min(m, n) <= 2:
        return inter
    count = 1
    while count < max_count:
        mask_x = 1.0 - np.tile(inter.sum(1)[:, np.newaxis], (1, n)).clip(0.0, 1.0)
        mask_y = 1.0 - np.tile(inter.sum(0)[np.newaxis, :], (m, 1)).clip(0.0, 1.0)
        mask = ((alpha * mask_x) + (alpha * mask_y)).clip(0.0, 1.0)
        mask_zeros = 1.0 - ((1.0 - mask_x) * (1.0 - mask_y))
        if mask_x.sum() < 1.0 or mask_y.sum() < 1.0:
            mask *= 0.0
            mask_zeros *= 0.0
        new_sim = sim * mask
        fwd = np.eye(n)[new_sim.argmax(axis=1)] * mask_zeros
        bac = np.eye(m)[new_sim.argmax(axis=0)].transpose() * mask_zeros
        new_inter = fwd * bac
        if np.array_equal(inter + new_inter, inter):
            break
        inter = inter + new_inter
        count += 1
    return inter


def padded(matrices: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    m_len = np.array([x.shape[0] for x in matrices])
    n_len = np.array([x.shape[1] for x in matrices])
    sim = np.zeros((len(matrices), m_len.max(), n_len.max()))
    for k, x in enumerate(matrices):
        sim[k, : x.shape[0], : x.shape[1]] = x
    valid = (np.arange(sim.shape[1])[None, :, None] < m_len[:, None, None]) & (
        np.arange(sim.shape[2])[None, None, :] < n_len[:, None, None]
    )
    return sim, valid, m_len, n_len


matrix = st.tuples(st.integers(1, 7), st.integers(1, 7)).flatmap(
    lambda shape: arrays(np.float64, shape, elements=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.6, 0.75, 0.9, 1.0]))
)


@settings(deadline=None, max_examples=80)
@given(st.lists(matrix, min_size=1, max_size=5), st.integers(1, 4))
def test_batched_itermax_and_argmax_equal_simalign_per_pair(matrices: list[np.ndarray], max_count: int) -> None:
    sim, valid, m_len, n_len = padded(matrices)
    batched = itermax_links(sim, valid, m_len, n_len, max_count, 0.9)
    arg = argmax_links(sim, valid)
    for k, x in enumerate(matrices):
        expected = simalign_iter_max(x, max_count) > 0
        np.testing.assert_array_equal(batched[k, : x.shape[0], : x.shape[1]], expected)
        assert not batched[k][~valid[k]].any()
        np.testing.assert_array_equal(arg[k, : x.shape[0], : x.shape[1]], simalign_iter_max(x, 1) > 0)


def test_simalign_on_flores_rows_with_each_method(tiny_encoder_dir) -> None:
    eng, kaz = flores_rows("eng_Latn", 4), flores_rows("kaz_Cyrl", 4)
    sentences = [split_words(t, "eng_Latn") for t in eng] + [split_words(t, "kaz_Cyrl") for t in kaz]
    pairs = np.array([[k, 4 + k] for k in range(4)])
    for method in ("argmax", "itermax", "match"):
        aligner = SimAligner.load(SimalignSettings(model=str(tiny_encoder_dir), method=method, device="cpu"))
        assert aligner.label == f"simalign:{method}"
        out = aligner.align(sentences, [], pairs)
        for (a, b), (src, tgt, score) in zip(pairs, out):
            assert len(src) and src.max() < len(sentences[a]) and tgt.max() < len(sentences[b])
            assert ((score >= 0) & (score <= 1)).all()
            if method in ("argmax", "match"):  # one-to-one
                assert len(set(src.tolist())) == len(src) and len(set(tgt.tolist())) == len(tgt)
            if method == "match":
                assert len(src) == min(len(sentences[a]), len(sentences[b]))


def test_sentences_the_encoder_truncates_are_dropped(tiny_encoder_dir) -> None:
    aligner = SimAligner.load(SimalignSettings(model=str(tiny_encoder_dir), max_length=16, device="cpu"))
    out = aligner.align([["water"] * 3, ["eau"] * 3, ["water"] * 40], [], np.array([[0, 1], [2, 1]]))
    assert out[0] is not None and out[1] is None
