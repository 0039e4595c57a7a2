"""A seeded tiny random WSPAlign-shaped model, built on the spot (no hub, no network).

An XLM-R question-answering model (hidden 32, 2 layers) with random weights and a Unigram
(SentencePiece-style, "▁" word prefix) tokenizer trained here on a few hundred synthetic
sentences, saved as safetensors + tokenizer.json. Its alignments are meaningless; it runs
every step of the WSPAlign backend exactly as a real checkpoint does. Used by the tests,
the benchmark and the `smoke` config (`[align.wspalign] source = "tiny_random"`).
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

from tasks.encoders.loading import quiet_transformers
from tasks.encoders.tiny import synthetic_sentences

WORDS = {
    "eng": "the river city bright small people water under over light night house green market road cat sleeps on sofa".split(),
    "fra": "la rivière ville claire petite gens eau sous sur lumière nuit maison verte marché route chat dort canapé".split(),
    "deu": "der Fluss Stadt hell klein Leute Wasser unter über Licht Nacht Haus grün Markt Straße Katze schläft Sofa".split(),
    "kaz": "өзен қала жарық кішкентай адамдар су астында үстінде түн үй жасыл базар жол мысық ұйықтайды".split(),
    "hin": "नदी शहर उज्ज्वल छोटा लोग पानी नीचे ऊपर रोशनी रात घर हरा बाजार सड़क बिल्ली".split(),
    "zho": "河 城 市 明 亮 小 人 们 水 下 上 光 夜 房 子 绿 市 场 路 猫".split(),
}
_LOCK = threading.Lock()
_BUILT: dict[int, Path] = {}


def canonical_unigram(tok: Any, specials: list[str]) -> Any:
    """The trained Unigram vocabulary in a fixed order, with scores that do not vary.

    The trainer's result varies between processes (hash-set order, float summation order):
    the required characters it appends last get the scores min, min - 1e-4, min - 2e-4, ... in
    hash-set order, the other pieces come out in another order (other ids, so other random
    embedding rows) with scores that differ in the last bits. Here that tail is rescored in
    code-point order, the rest is rounded and sorted by score, then piece: the model is the
    same in every process, which the stage's key assumes (a resumed run must not mix shards
    aligned by two different models)."""
    import json

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


def build_tiny_wspalign(directory: Path, *, seed: int = 0, hidden_size: int = 32, layers: int = 2) -> Path:
    """Train the tokenizer and save it with a seeded random XLMRobertaForQuestionAnswering into `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaForQuestionAnswering

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=400,
        special_tokens=specials,
        unk_token="<unk>",
        initial_alphabet=["¶"],
        shrinking_factor=0.75,
        show_progress=False,
    )
    tok.train_from_iterator(synthetic_sentences(300, seed=seed, words_by_lang=WORDS) + ["¶"], trainer)
    tok.model = canonical_unigram(tok, specials)
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
        model_max_length=512,
    )
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
    """The tiny model of `seed`, built once per process into a temporary folder."""
    with _LOCK:
        if seed not in _BUILT or not (_BUILT[seed] / "config.json").exists():
            _BUILT[seed] = build_tiny_wspalign(Path(tempfile.mkdtemp(prefix=f"xlembed-tiny-wspalign-{seed}-")), seed=seed)
        return _BUILT[seed]
