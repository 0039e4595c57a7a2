from __future__ import annotations

import numpy as np
import pytest

from tasks.align.gold import align_gold_set, read_gold, read_tokenized, score_alignments
from tasks.align.words import split_words
from tests.tasks.align.conftest import DATA, flores_rows

pytest.importorskip("eflomal")


@pytest.mark.slow
def test_eflomal_on_flores_rows_and_the_gold_set() -> None:
    from tasks.align.backends.eflomal_backend import EflomalAligner, EflomalSettings

    eng, fra = flores_rows("eng_Latn", 200), flores_rows("fra_Latn", 200)
    extra = [(split_words(e, "eng_Latn"), split_words(f, "fra_Latn")) for e, f in zip(eng, fra)]
    aligner = EflomalAligner(EflomalSettings(iterations_scale=0.2, n_samplers=1))
    src, tgt = read_tokenized(DATA / "eng-fra.eng"), read_tokenized(DATA / "eng-fra.fra")
    aligner.fit(extra)
    predicted = align_gold_set(aligner, src, tgt, "eng_Latn", "fra_Latn")
    scores = score_alignments(predicted, read_gold(DATA / "eng-fra.gold"))
    assert scores.predicted > 0 and scores.aer < 0.6  # sampled: a loose bound, not a benchmark

    sentences = [w for pair in extra[:20] for w in pair]
    langs = ["eng_Latn", "fra_Latn"] * 20
    out = aligner.align(sentences, langs, np.array([[2 * k, 2 * k + 1] for k in range(20)]))
    for k, (i, j, score) in enumerate(out):
        assert len(i) and i.max() < len(sentences[2 * k]) and j.max() < len(sentences[2 * k + 1])
        assert set(np.unique(score).tolist()) <= {0.5, 1.0}
