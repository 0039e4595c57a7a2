"""The one tiny-model builder: seeded random models of every architecture the pipeline loads,
built on the spot (no hub, no network), for the tests, the benchmarks, the plug-in examples and
the `tiny_random` sources of the shipped configs (smoke, demo).

Three layers, each in one place:

- the training text: `synthetic_sentences` over the word tables (`WORDS`, `QA_WORDS`: the same
  few words in several languages, position by position) and `cldr_names` (territory and
  language names in many CLDR locales, shipped in Babel); `multiway_rows`, synthetic corpus and
  alignment rows over `WORDS` for a tiny training run;
- `train_tokenizer`: one trainer, the algorithm (WordPiece, Unigram, BPE) chosen per
  architecture, each made deterministic (the `tokenizers` trainers break ties in hash order,
  which is seeded per process);
- one function per architecture: `build_tiny_model` (BERT encoder, WordPiece),
  `build_tiny_wspalign` (XLM-R question answering, as WSPAlign; Unigram), `build_tiny_nllb`
  (NLLB-200 layout, M2M100; BPE), and `build_sentence_transformers` around a tiny BERT.

Their outputs are noise: they test mechanics, never quality. The same arguments give the same
files in every process, which the cache keys of the `tiny_random` sources assume (a resumed run
must not mix shards made by two different models); tests/test_tiny_models.py pins the bytes.
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from tasks.encoders.loading import quiet_transformers
from tasks.stage_config import StageConfig

__all__ = [
    "LANGS",
    "QA_WORDS",
    "WORDS",
    "TinyModelSpec",
    "build_nllb_tokenizer",
    "build_sentence_transformers",
    "build_tiny_model",
    "build_tiny_nllb",
    "build_tiny_wspalign",
    "canonical_unigram",
    "cldr_names",
    "multiway_rows",
    "nllb_config",
    "synthetic_sentences",
    "tiny_wspalign_dir",
    "train_tokenizer",
    "train_wordpiece_vocab",
]

TokenizerAlgorithm = Literal["wordpiece", "unigram", "bpe"]

# --- training text -------------------------------------------------------------------------

# The same few words in six languages, position by position: word i translates word i.
WORDS = {
    "en": "the river city bright small people water under over light night house green market road".split(),
    "fr": "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route".split(),
    "kk": "өзен қала жарық кішкентай адамдар су астында үстінде түн үй жасыл базар жол".split(),
    "ka": "მდინარე ქალაქი ნათელი პატარა ხალხი წყალი ქვეშ ზემოთ სინათლე ღამე სახლი მწვანე ბაზარი".split(),
    "te": "నది నగరం ప్రకాశవంతమైన చిన్న ప్రజలు నీరు కింద పైన వెలుగు రాత్రి ఇల్లు ఆకుపచ్చ".split(),
    "sw": "mto mji angavu ndogo watu maji chini juu mwanga usiku nyumba kijani soko barabara".split(),
}

# The word table of the tiny WSPAlign model's tokenizer: other scripts (Devanagari, Han) than WORDS.
QA_WORDS = {
    "eng": "the river city bright small people water under over light night house green market road cat sleeps on sofa".split(),
    "fra": "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route chat dort canapé".split(),
    "deu": "der Fluss Stadt hell klein Leute Wasser unter über Licht Nacht Haus grün Markt Straße Katze schläft Sofa".split(),
    "kaz": "өзен қала жарық кішкентай адамдар су астында үстінде түн үй жасыл базар жол мысық ұйықтайды".split(),
    "hin": "नदी शहर उज्ज्वल छोटा लोग पानी नीचे ऊपर रोशनी रात घर हरा बाजार सड़क बिल्ली".split(),
    "zho": "河 城 市 明 亮 小 人 们 水 下 上 光 夜 房 子 绿 市 场 路 猫".split(),
}

# CLDR locales whose territory and language names train the tiny NLLB vocabulary: one or more
# per script family the translate stage's script filter knows, so every target language has pieces.
CLDR_LOCALES = (
    "en", "fr", "de", "es", "ja", "zh_Hans", "zh_Hant", "hi", "mr", "kk", "ru", "ka", "te", "ta", "ml",
    "ar", "ko", "th", "el", "he", "bn", "am", "hy", "gu", "pa", "kn", "si", "lo", "km", "my", "or",
)  # fmt: skip

# The languages of `multiway_rows`, as FLORES codes with their key in WORDS.
LANGS = {"eng_Latn": "en", "fra_Latn": "fr", "kaz_Cyrl": "kk", "swh_Latn": "sw"}


def synthetic_sentences(
    n: int, *, seed: int = 0, min_words: int = 3, max_words: int = 12, words_by_lang: dict[str, list[str]] | None = None
) -> list[str]:
    """`n` random sentences, each in one of the languages of `words_by_lang` (default WORDS), with
    some punctuation and digits: what the BERT and WSPAlign tokenizers are trained on."""
    table = WORDS if words_by_lang is None else words_by_lang
    rng = random.Random(seed)
    langs = sorted(table)
    out = []
    for i in range(n):
        words = table[rng.choice(langs)]
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(min_words, max_words)))
        out.append(sentence + rng.choice([".", "!", "?", f" {i % 97}.", ","]))
    return out


def cldr_names() -> list[str]:
    """Territory and language names in the CLDR_LOCALES (a few hundred KB, deterministic): many
    scripts, offline; what the NLLB tokenizer is trained on."""
    from babel import Locale

    texts: list[str] = []
    for locale in CLDR_LOCALES:
        parsed = Locale.parse(locale)
        for mapping in (parsed.territories, parsed.languages):
            texts.extend(mapping[key] for key in sorted(mapping))
    return texts


def multiway_rows(n_groups: int, *, seed: int = 0, dev_every: int = 5) -> tuple[list[dict], list[dict]]:
    """Corpus rows (CORPUS_SCHEMA columns) and word-alignment rows (WORD_ALIGNMENT_SCHEMA columns)
    of a tiny training run, in the four LANGS: word i of every language is the translation of
    word i, and aligns to it. Seeded: the same arguments give the same rows."""
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


# --- tokenizers ----------------------------------------------------------------------------


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


def canonical_unigram(tok: Any, specials: list[str]) -> Any:
    """The trained Unigram vocabulary in a fixed order, with scores that do not vary.

    The trainer's result varies between processes (hash-set order, float summation order):
    the required characters it appends last get the scores min, min - 1e-4, min - 2e-4, ... in
    hash-set order, the other pieces come out in another order (other ids, so other random
    embedding rows) with scores that differ in the last bits. Here that tail is rescored in
    code-point order, the rest is rounded and sorted by score, then piece: the model is the
    same in every process, which the stage's key assumes (a resumed run must not mix shards
    aligned by two different models)."""
    from tokenizers import models

    vocab = [(piece, score) for piece, score in json.loads(tok.to_str())["model"]["vocab"] if piece not in specials]
    tail = 0  # the appended required characters: single characters, each 1e-4 (or 0) below the one before
    while tail < len(vocab) - 1 and len(vocab[-1 - tail][0]) == 1 and -1e-7 < vocab[-2 - tail][1] - vocab[-1 - tail][1] < 1.5e-4:
        tail += 1
    if tail:
        tail += 1
    head = sorted(((piece, round(score, 6)) for piece, score in vocab[: len(vocab) - tail]), key=lambda item: (-item[1], item[0]))
    start = round(vocab[len(vocab) - tail][1], 6) if tail else 0.0
    rest = [
        (piece, round(start - 1e-4 * i, 6)) for i, piece in enumerate(sorted(piece for piece, _ in vocab[len(vocab) - tail :]))
    ]
    return models.Unigram([(piece, 0.0) for piece in specials] + head + rest, unk_id=specials.index("<unk>"), byte_fallback=False)


def train_tokenizer(
    algorithm: TokenizerAlgorithm, texts: list[str], *, vocab_size: int, specials: list[str], unk_token: str
) -> Any:  # -> tokenizers.Tokenizer
    """A `tokenizers.Tokenizer` trained on `texts`, the same in every process; `specials` first.

    - "wordpiece" (BERT): lowercasing BERT normaliser and pre-tokeniser, merges by frequency
      with ties to the smallest pair (train_wordpiece_vocab);
    - "unigram" (XLM-R, SentencePiece-style "▁" word prefix): NFKC, the trainer's vocabulary
      put in a canonical order (canonical_unigram); "¶" is always a piece;
    - "bpe" (NLLB, "▁" word prefix): no normaliser; BPE merges are deterministic.
    The post-processor (where the special tokens go) is the architecture's, set by its builder."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if algorithm == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=unk_token))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        vocab = train_wordpiece_vocab(texts, tok.normalizer, tok.pre_tokenizer, vocab_size=vocab_size, specials=specials)
        tok.model = models.WordPiece(vocab={piece: i for i, piece in enumerate(vocab)}, unk_token=unk_token)
    elif algorithm == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            unk_token=unk_token,
            initial_alphabet=["¶"],
            shrinking_factor=0.75,
            show_progress=False,
        )
        tok.train_from_iterator([*texts, "¶"], trainer)
        tok.model = canonical_unigram(tok, specials)
    elif algorithm == "bpe":
        tok = Tokenizer(models.BPE(unk_token=unk_token, fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
        tok.train_from_iterator(texts, trainer)
    else:
        raise ValueError(f"tokenizer algorithm must be one of wordpiece, unigram, bpe, not {algorithm!r}")
    return tok


def fast_tokenizer(tok: Any, *, single: str, pair: str, roles: dict[str, str]) -> Any:
    """`tok` (a trained `tokenizers.Tokenizer`) with a template post-processor, wrapped as a
    transformers `PreTrainedTokenizerFast`. `roles` maps the special-token roles (`cls_token`,
    `sep_token`, ...) to tokens; the templates may use the `cls_token` and `sep_token` tokens."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    framing = dict.fromkeys((roles["cls_token"], roles["sep_token"]))
    tok.post_processor = processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=[(t, tok.token_to_id(t)) for t in framing]
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, **roles, model_max_length=512)


# --- one builder per architecture ----------------------------------------------------------


def build_tiny_model(directory: Path, *, seed: int = 0, pooler: bool = True) -> Path:
    """A tiny BERT encoder (hidden 32, 2 layers, 2 heads, seeded random weights) with a WordPiece
    tokenizer ([CLS]/[SEP]/[PAD]/[UNK]/[MASK]) trained on synthetic_sentences, saved into `directory`.
    `pooler=False`: a checkpoint without pooler weights, as E5's (the loaders drop the pooler then)."""
    import torch
    from transformers import BertConfig, BertModel

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = train_tokenizer("wordpiece", synthetic_sentences(400, seed=seed), vocab_size=600, specials=specials, unk_token="[UNK]")
    fast = fast_tokenizer(
        tok,
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        roles={"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"},
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
    """The tiny BERT of `model_dir` as a sentence-transformers folder: Transformer + Pooling (+ Dense) + Normalize."""
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


_WSPALIGN_LOCK = threading.Lock()
_WSPALIGN_BUILT: dict[int, Path] = {}


def build_tiny_wspalign(directory: Path, *, seed: int = 0, hidden_size: int = 32, layers: int = 2) -> Path:
    """A tiny WSPAlign-shaped model: a seeded random XLMRobertaForQuestionAnswering (hidden 32,
    2 layers) with a Unigram tokenizer trained on synthetic_sentences over QA_WORDS, saved as
    safetensors + tokenizer.json into `directory`. Its alignments are meaningless; it runs every
    step of the WSPAlign backend exactly as a real checkpoint does."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaForQuestionAnswering

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    texts = synthetic_sentences(300, seed=seed, words_by_lang=QA_WORDS)
    tok = train_tokenizer("unigram", texts, vocab_size=400, specials=specials, unk_token="<unk>")
    fast = fast_tokenizer(
        tok,
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        roles={
            "bos_token": "<s>",
            "eos_token": "</s>",
            "cls_token": "<s>",
            "sep_token": "</s>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "mask_token": "<mask>",
        },
    )
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=max(2, hidden_size // 64),
        intermediate_size=2 * hidden_size if hidden_size <= 32 else 4 * hidden_size,
        max_position_embeddings=520,
        type_vocab_size=1,
        initializer_range=0.5,  # peaked random logits, so that spans and null answers both occur
        pad_token_id=tok.token_to_id("<pad>"),
        bos_token_id=bos,
        eos_token_id=eos,
    )
    model = XLMRobertaForQuestionAnswering(config)
    model.eval()
    directory.mkdir(parents=True, exist_ok=True)

    with quiet_transformers():  # no "Writing model shards" bar in the run's output
        model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def tiny_wspalign_dir(seed: int = 0) -> Path:
    """The tiny WSPAlign model of `seed`, built once per process into a temporary folder."""
    with _WSPALIGN_LOCK:
        if seed not in _WSPALIGN_BUILT or not (_WSPALIGN_BUILT[seed] / "config.json").exists():
            directory = Path(tempfile.mkdtemp(prefix=f"xlembed-tiny-wspalign-{seed}-"))
            _WSPALIGN_BUILT[seed] = build_tiny_wspalign(directory, seed=seed)
        return _WSPALIGN_BUILT[seed]


class TinyModelSpec(StageConfig):
    """A seeded, randomly initialised NLLB-architecture model (M2M100) with a tokenizer trained
    on the spot that carries NLLB's 202 language-code tokens. Its translations are noise:
    it exists to exercise the mechanics (tests, the smoke profile), never for data."""

    seed: int = 0
    vocab_size: int = Field(default=1000, ge=100, le=32_000, description="BPE pieces before the language codes")
    d_model: int = Field(default=32, ge=8)
    layers: int = Field(default=1, ge=1, description="encoder and decoder layers each")
    heads: int = Field(default=2, ge=1)
    ffn_dim: int = Field(default=64, ge=8)
    max_positions: int = Field(default=256, ge=16)
    init_std: float = Field(default=0.02, gt=0)

    @model_validator(mode="after")
    def _heads_divide(self) -> TinyModelSpec:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        return self


def build_nllb_tokenizer(vocab_size: int):  # -> transformers.NllbTokenizer
    """An NllbTokenizer (BPE over Metaspace pieces, as NLLB's) trained on cldr_names, with
    ``<s> <pad> </s> <unk>`` at ids 0-3 and NLLB's 202 language-code tokens plus ``<mask>``
    appended, as in the real vocabulary."""
    from transformers import NllbTokenizer

    bpe = train_tokenizer(
        "bpe", cldr_names(), vocab_size=vocab_size, specials=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>"
    )
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    # NllbTokenizer appends the 202 language codes (its default extra special tokens) and <mask>
    return NllbTokenizer(vocab=model["vocab"], merges=merges, src_lang="eng_Latn")


def nllb_config(
    *,
    vocab_size: int,
    d_model: int,
    layers: int,
    heads: int,
    ffn_dim: int,
    max_positions: int,
    pad: int,
    bos: int,
    eos: int,
    init_std: float = 0.02,
):  # -> M2M100Config
    """The M2M100 configuration of an NLLB-200 checkpoint of this shape, as NLLB-200 builds its
    own: pre-norm, scaled embeddings, relu, tied embeddings, no dropout (inference)."""
    from transformers import M2M100Config

    return M2M100Config(
        vocab_size=vocab_size,
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn_dim,
        decoder_ffn_dim=ffn_dim,
        max_position_embeddings=max_positions,
        init_std=init_std,
        activation_function="relu",
        scale_embedding=True,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        encoder_layerdrop=0.0,
        decoder_layerdrop=0.0,
        pad_token_id=pad,
        bos_token_id=bos,
        eos_token_id=eos,
        decoder_start_token_id=eos,
        tie_word_embeddings=True,
    )


def build_tiny_nllb(out_dir: Path, spec: TinyModelSpec | None = None) -> Path:
    """A transformers checkpoint (safetensors, config, tokenizer) of a tiny random NLLB-200-layout
    model: M2M100 (pre-norm, scaled embeddings, sinusoidal positions, decoding starts from
    ``</s>``) with weights drawn from a seeded normal distribution, and build_nllb_tokenizer's tokenizer."""
    import torch
    from transformers import M2M100ForConditionalGeneration

    spec = spec or TinyModelSpec()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_nllb_tokenizer(spec.vocab_size)
    config = nllb_config(
        vocab_size=len(tokenizer),
        d_model=spec.d_model,
        layers=spec.layers,
        heads=spec.heads,
        ffn_dim=spec.ffn_dim,
        max_positions=spec.max_positions,
        pad=tokenizer.pad_token_id,
        bos=tokenizer.bos_token_id,
        eos=tokenizer.eos_token_id,
        init_std=spec.init_std,
    )
    generator = torch.Generator().manual_seed(spec.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = M2M100ForConditionalGeneration(config).eval()
    # draw the weights again from our own generator: independent of transformers' init order
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if param.ndim == 1:
                param.copy_(
                    torch.ones_like(param) if "layer_norm" in name and name.endswith("weight") else torch.zeros_like(param)
                )
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * spec.init_std)

    with quiet_transformers():  # no "Writing model shards" bar in the run's output
        model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
