"""A tiny encoder built locally (no hub, no network), for tests, benchmarks and the plug-in examples.

`build_tiny_model`: a transformers folder with a WordPiece tokenizer trained here on synthetic
multilingual sentences (PreTrainedTokenizerFast with [CLS]/[SEP]/[PAD]/[UNK]/[MASK]) and a
random-weight, seeded BertModel (hidden 32, 2 layers, 2 heads), with or without a pooler: the
one tiny BERT the tests build (an aligner's and a translator's tiny models, of other shapes and
tokenizer kinds, are in tasks/align/tiny.py and tasks/translate/tiny.py). `build_sentence_transformers`
wraps one as Transformer + Pooling (+ Dense) + Normalize. The same seed gives the same files
on every run. Its vectors are noise: it tests mechanics, never quality.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["WORDS", "build_sentence_transformers", "build_tiny_model", "synthetic_sentences", "train_wordpiece_vocab"]

# The same few words in six languages, position by position: word i translates word i.
WORDS = {
    "en": "the river city bright small people water under over light night house green market road".split(),
    "fr": "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route".split(),
    "kk": "өзен қала жарық кішкентай адамдар су астында үстінде түн үй жасыл базар жол".split(),
    "ka": "მდინარე ქალაქი ნათელი პატარა ხალხი წყალი ქვეშ ზემოთ სინათლე ღამე სახლი მწვანე ბაზარი".split(),
    "te": "నది నగరం ప్రకాశవంతమైన చిన్న ప్రజలు నీరు కింద పైన వెలుగు రాత్రి ఇల్లు ఆకుపచ్చ".split(),
    "sw": "mto mji angavu ndogo watu maji chini juu mwanga usiku nyumba kijani soko barabara".split(),
}


def synthetic_sentences(
    n: int, *, seed: int = 0, min_words: int = 3, max_words: int = 12, words_by_lang: dict[str, list[str]] | None = None
) -> list[str]:
    """`n` random sentences, each in one of the languages of `words_by_lang` (default WORDS), with
    some punctuation and digits: what every tiny model's tokenizer is trained on."""
    table = WORDS if words_by_lang is None else words_by_lang
    rng = random.Random(seed)
    langs = sorted(table)
    out = []
    for i in range(n):
        words = table[rng.choice(langs)]
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(min_words, max_words)))
        out.append(sentence + rng.choice([".", "!", "?", f" {i % 97}.", ","]))
    return out


def train_wordpiece_vocab(
    texts: list[str], normalizer: Any, pre_tokenizer: Any, *, vocab_size: int, specials: list[str]
) -> list[str]:
    """A WordPiece vocabulary by frequency merges, the same in every process.

    `tokenizers`' WordPieceTrainer breaks ties between equally frequent pairs in hash-map
    order, which is seeded per process: each run got another vocabulary, so another tiny
    model, and the tests that train it (XNLI transfer) passed or failed by draw. Here ties
    go to the smallest pair. Test setup on a few hundred sentences, not a hot path."""
    counts = Counter(word for text in texts for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    pieces = {word: [word[0], *("##" + c for c in word[1:])] for word in sorted(counts)}
    vocab = [*specials, *sorted({p for split in pieces.values() for p in split})]
    known = set(vocab)
    while len(vocab) < vocab_size:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, split in pieces.items():
            for pair in zip(split, split[1:]):
                pairs[pair] += counts[word]
        if not pairs:
            break
        left, right = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merged = left + right[2:]
        for word, split in pieces.items():
            i, out = 0, []
            while i < len(split):
                if i + 1 < len(split) and split[i] == left and split[i + 1] == right:
                    out.append(merged)
                    i += 2
                else:
                    out.append(split[i])
                    i += 1
            pieces[word] = out
        if merged not in known:
            known.add(merged)
            vocab.append(merged)
    return vocab


def build_tiny_model(directory: Path, *, seed: int = 0, pooler: bool = True) -> Path:
    """Train a WordPiece tokenizer (deterministically) and save it with a seeded random BertModel into `directory`.
    `pooler=False`: a checkpoint without pooler weights, as E5's (the loaders drop the pooler then)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    vocab = train_wordpiece_vocab(
        synthetic_sentences(400, seed=seed), tok.normalizer, tok.pre_tokenizer, vocab_size=600, specials=specials
    )
    tok.model = models.WordPiece(vocab={piece: i for i, piece in enumerate(vocab)}, unk_token="[UNK]")
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        pad_token_id=tok.token_to_id("[PAD]"),
    )
    model = BertModel(config, add_pooling_layer=pooler)
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def build_sentence_transformers(model_dir: Path, directory: Path, *, pooling: str, dense_out: int | None = None) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    transformer = Transformer(str(model_dir), max_seq_length=128)
    modules = [transformer, Pooling(32, pooling_mode=pooling)]
    if dense_out is not None:
        torch.manual_seed(1)
        modules.append(Dense(32, dense_out, activation_function=torch.nn.Tanh()))
    modules.append(Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(directory))
    return directory
