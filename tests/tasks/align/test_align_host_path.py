"""WSPAlign's host path (issue 37): the same links as the one-question reference in both directions,
the same bytes as the path before it (benchmarks/align_legacy.py), its decoding on one CPU thread."""

from __future__ import annotations

import io
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.align_legacy import LegacyWspAligner
from tasks.align import ALIGN_STAGE
from tasks.align.backends import wspalign
from tasks.align.backends.wspalign import WspAligner, WspalignSettings
from tasks.align.backends.wspalign_reference import reference_direction
from tasks.align.config import AlignConfig
from tasks.align.words import split_words
from tests.tasks.align.conftest import flores_rows

ROOT = Path(__file__).resolve().parents[3]


def flores_pairs(codes: tuple[str, ...], n: int, start: int) -> tuple[list[list[str]], np.ndarray]:
    """English with each other language, and each other language with English (both as source)."""
    rows = {code: flores_rows(code, n, start=start) for code in ("eng_Latn", *codes)}
    sentences, index = [], {}
    for code, texts in rows.items():
        for k, text in enumerate(texts):
            index[code, k] = len(sentences)
            sentences.append(split_words(text, code))
    pairs = [(index["eng_Latn", k], index[c, k]) for c in codes for k in range(n)]
    return sentences, np.array(pairs + [(b, a) for a, b in pairs])


def aligner(model_dir: Path, cls: type[WspAligner] = WspAligner, **settings) -> WspAligner:
    base = {"source": "local", "model": str(model_dir), "combine": "union", "threshold": 0.0, "device": "cpu"}
    return cls.load(WspalignSettings(**{**base, **settings}))


def test_directional_links_equal_the_one_question_reference_in_both_directions(tiny_wspalign_dir: Path) -> None:
    wsp = aligner(tiny_wspalign_dir, batch_tokens=2048)
    sentences, pairs = flores_pairs(("fra_Latn", "zho_Hans"), 2, start=40)
    tok = wsp.tokenize(sentences)
    pairs = pairs[wsp.sequence_lengths(tok, pairs) <= wsp.settings.max_seq_length]
    assert len(pairs) >= 4
    fwd, bwd = wsp.directional_links(tok, pairs)
    checked = 0
    for k, (a, b) in enumerate(pairs):
        for links, (q, c), flip in ((fwd, (a, b), False), (bwd, (b, a), True)):
            i, j, score, width = reference_direction(wsp, sentences[q], sentences[c])
            sel = links.pair == k
            src, tgt = links.src[sel], links.tgt[sel]
            got_i, got_j = (tgt, src) if flip else (src, tgt)
            order = np.lexsort((got_j, got_i))
            np.testing.assert_array_equal(got_i[order], i)
            np.testing.assert_array_equal(got_j[order], j)
            np.testing.assert_array_equal(links.width[sel][order], width)
            np.testing.assert_allclose(links.score[sel][order], score, rtol=1e-4, atol=1e-6)
            checked += len(i)
    assert checked > 0


def test_the_host_path_gives_the_links_of_the_path_before_it_bit_for_bit(tiny_wspalign_dir: Path) -> None:
    sentences, pairs = flores_pairs(("kaz_Cyrl", "hin_Deva"), 3, start=60)
    now = aligner(tiny_wspalign_dir, batch_tokens=1024)
    before = aligner(tiny_wspalign_dir, LegacyWspAligner, batch_tokens=1024)
    tok = now.tokenize(sentences)
    for field in ("ids", "word", "offset", "length", "first", "end"):
        np.testing.assert_array_equal(getattr(tok, field), getattr(before.tokenize(sentences), field))
    for x, y in zip(now.directional_links(tok, pairs), before.directional_links(tok, pairs)):
        for field in ("pair", "src", "tgt", "score", "width"):
            assert getattr(x, field).tobytes() == getattr(y, field).tobytes(), field


def test_span_decoding_runs_on_one_cpu_thread_and_leaves_the_thread_count_as_it_was(tiny_wspalign_dir, monkeypatch) -> None:
    import torch

    seen: list[int] = []
    softmax = wspalign._masked_softmax

    def counting(logits, allowed):  # noqa: ANN001, ANN202
        seen.append(torch.get_num_threads())
        return softmax(logits, allowed)

    monkeypatch.setattr(wspalign, "_masked_softmax", counting)
    wsp = aligner(tiny_wspalign_dir)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        wsp.align([["a", "b", "c"], ["x", "y"]], [], np.array([[0, 1]]))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert seen and set(seen) == {1}


def stage_bytes(tmp: Path, cls: type[WspAligner]) -> bytes:
    """The align stage's table for configs/smoke.toml's [align] (its tiny random WSPAlign), as IPC bytes."""
    from storage import ArtifactStore
    from tasks.align import stage
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.stage import run_stage

    codes = ("eng_Latn", "fra_Latn", "kaz_Cyrl", "zho_Hans")
    for code in codes:
        (tmp / f"train.{code}").write_text("\n".join(flores_rows(code, 6, start=100)) + "\n", encoding="utf-8")
    corpus = CorpusConfig.model_validate(
        {
            "sources": [{"name": "inline", "kind": "text", "files": {c: str(tmp / f"train.{c}") for c in codes}}],
            "dev_fraction": 0.0,
        }
    )
    store = ArtifactStore(tmp / "artifacts")
    ref, _ = run_stage(store, CORPUS_STAGE, corpus, {})
    config = AlignConfig.model_validate(tomllib.loads((ROOT / "configs" / "smoke.toml").read_text())["align"])
    settings = config.settings
    assert settings.source == "tiny_random"
    with stage._CACHE_LOCK:  # the stage's aligner for this config is the one under test
        stage._ALIGNER_CACHE.clear()
        stage._ALIGNER_CACHE[f"{config.model_dump_json()}|None"] = cls.load(settings)
    try:
        _, manifest = run_stage(store, ALIGN_STAGE, config, {"corpus": ref.key})
    finally:
        stage._ALIGNER_CACHE.clear()
    table = store.read_table("align", manifest.key)
    alignments = table["alignments"].to_pylist()
    assert table.num_rows > 0 and sum(map(len, alignments)) > 0
    # the manifest's counts, from all pairs' links at once, are each pair's distinct words summed
    assert manifest.metrics["links"] == sum(map(len, alignments))
    assert manifest.metrics["aligned_words"] == {
        "src": sum(len({link["src"] for link in pair}) for pair in alignments),
        "tgt": sum(len({link["tgt"] for link in pair}) for pair in alignments),
    }
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


@pytest.mark.slow
def test_the_align_stage_writes_the_bytes_of_the_path_before_for_the_smoke_config(tmp_path: Path) -> None:
    (tmp_path / "now").mkdir()
    (tmp_path / "before").mkdir()
    assert stage_bytes(tmp_path / "now", WspAligner) == stage_bytes(tmp_path / "before", LegacyWspAligner)


def test_questions_assembled_from_runs_equal_the_assembly_before_with_and_without_token_types(tiny_wspalign_dir: Path) -> None:
    sentences, _ = flores_pairs(("zho_Hans", "kaz_Cyrl"), 4, start=0)
    sentences += [["x"], ["¶", "y", "z"]]
    now, before = aligner(tiny_wspalign_dir), aligner(tiny_wspalign_dir, LegacyWspAligner)
    tok = now.tokenize(sentences)
    rng = np.random.default_rng(0)
    for trial in range(12):
        n = int(rng.integers(1, 120))
        q, c = rng.integers(0, len(sentences), n), rng.integers(0, len(sentences), n)
        at = tok.word_offset[q] + (rng.random(n) * tok.n_words[q]).astype(np.int64)
        for token_types in (False, True):  # XLM-R has none; a BERT-style tokenizer would
            now.token_types = before.token_types = token_types
            x = now.assemble_questions(tok, q, c, tok.first[at], tok.end[at])
            y = before.assemble_questions(tok, q, c, tok.first[at], tok.end[at])
            for key, value in y.items():
                assert np.asarray(x[key]).dtype == np.asarray(value).dtype, key
                np.testing.assert_array_equal(x[key], value, err_msg=f"{key}, trial {trial}")
            np.testing.assert_array_equal(x["context_length"], tok.length[c])
