"""A tiny encoder built locally once per session (no hub, no network).

  tiny_model_dir   a transformers dir: a WordPiece tokenizer trained here on synthetic
                   multilingual sentences (PreTrainedTokenizerFast with [CLS]/[SEP]/[PAD]/[UNK]/[MASK])
                   and a random-weight, seeded BertModel (hidden 32, 2 layers, 2 heads)
  st_cls_dir       a sentence-transformers dir from it: Transformer + Pooling(cls) + Normalize
  st_mean_dense_dir                                    Transformer + Pooling(mean) + Dense(32->16, tanh) + Normalize

`build_tiny_model` and `synthetic_sentences` are plain functions so that
benchmarks/encoder_throughput.py can reuse them.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

WORDS = {
    "en": "the river city bright small people water under over light night house green market road".split(),
    "fr": "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route".split(),
    "kk": "өзен қала жарық кішкентай адамдар су астында үстінде түн үй жасыл базар жол".split(),
    "ka": "მდინარე ქალაქი ნათელი პატარა ხალხი წყალი ქვეშ ზემოთ სინათლე ღამე სახლი მწვანე ბაზარი".split(),
    "te": "నది నగరం ప్రకాశవంతమైన చిన్న ప్రజలు నీరు కింద పైన వెలుగు రాత్రి ఇల్లు ఆకుపచ్చ".split(),
    "sw": "mto mji angavu ndogo watu maji chini juu mwanga usiku nyumba kijani soko barabara".split(),
}


def synthetic_sentences(n: int, *, seed: int = 0, min_words: int = 3, max_words: int = 12) -> list[str]:
    """`n` random sentences, each in one of WORDS' languages, with some punctuation and digits."""
    rng = random.Random(seed)
    langs = sorted(WORDS)
    out = []
    for i in range(n):
        words = WORDS[rng.choice(langs)]
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(min_words, max_words)))
        out.append(sentence + rng.choice([".", "!", "?", f" {i % 97}.", ","]))
    return out


def build_tiny_model(directory: Path, *, seed: int = 0) -> Path:
    """Train a WordPiece tokenizer and save it with a seeded random BertModel into `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(synthetic_sentences(400, seed=seed), trainers.WordPieceTrainer(vocab_size=600, special_tokens=specials))
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
    model = BertModel(config)
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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def st_cls_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_sentence_transformers(tiny_model_dir, tmp_path_factory.mktemp("st-cls"), pooling="cls")


@pytest.fixture(scope="session")
def st_mean_dense_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sentence_transformers")
    return build_sentence_transformers(tiny_model_dir, tmp_path_factory.mktemp("st-mean-dense"), pooling="mean", dense_out=16)


@pytest.fixture(scope="session")
def reference_model(tiny_model_dir: Path):
    """The tiny model and tokenizer loaded independently of the Encoder, for manual computations."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(tiny_model_dir), local_files_only=True)
    model.eval()
    return AutoTokenizer.from_pretrained(str(tiny_model_dir), local_files_only=True), model
