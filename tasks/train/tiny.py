"""Synthetic multi-way parallel rows for a tiny training run (tests, benchmarks, plug-in examples).

Sentences in four languages that translate each other word by word (tasks/encoders/tiny.py's
WORDS), as corpus rows (CORPUS_SCHEMA columns) and word-alignment rows (WORD_ALIGNMENT_SCHEMA
columns) in which word i aligns to word i. Seeded: the same arguments give the same rows.
"""

from __future__ import annotations

import random

from tasks.encoders.tiny import WORDS

__all__ = ["LANGS", "multiway_rows"]

LANGS = {"eng_Latn": "en", "fra_Latn": "fr", "kaz_Cyrl": "kk", "swh_Latn": "sw"}


def multiway_rows(n_groups: int, *, seed: int = 0, dev_every: int = 5) -> tuple[list[dict], list[dict]]:
    """Corpus rows and alignment rows: word i of every language is the translation of word i."""
    rng = random.Random(seed)
    vocab = min(len(WORDS[code]) for code in LANGS.values())
    corpus, align = [], []
    for g in range(n_groups):
        picks = [rng.randrange(vocab) for _ in range(rng.randint(3, 8))]
        gid = f"g{g:05d}"
        split = "dev" if g % dev_every == 0 else "train"
        words = {lang: [WORDS[code][i] for i in picks] for lang, code in LANGS.items()}
        for lang in LANGS:
            corpus.append({"id": f"{gid}:{lang}", "group_id": gid, "lang": lang, "text": " ".join(words[lang]) + f" {g}.",
                           "split": split, "source": "synthetic"})  # fmt: skip
        for lang in LANGS:
            if lang == "eng_Latn":
                continue
            n = len(picks)
            align.append({
                "id": f"{gid}:{lang}-eng_Latn", "group_id": gid, "src_lang": lang, "tgt_lang": "eng_Latn",
                "src_words": [*words[lang], f"{g}."], "tgt_words": [*words["eng_Latn"], f"{g}."],
                "alignments": [{"src": i, "tgt": i, "score": 0.95} for i in range(n)], "backend": "synthetic",
            })  # fmt: skip
    return corpus, align
