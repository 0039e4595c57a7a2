"""A tiny NLLB-architecture model with random weights, built offline in seconds.

The model hub is not reachable from the tests, yet the translate stage must run for real:
tokenizer, CTranslate2 conversion, beam search, sharding. This builds a transformers
checkpoint with the NLLB-200 layout: an M2M100 config (pre-norm, scaled embeddings,
sinusoidal positions, decoding starts from ``</s>``), and an ``NllbTokenizer`` whose BPE
vocabulary is trained here on CLDR names shipped in Babel (many scripts, offline), with
``<s> <pad> </s> <unk>`` at ids 0-3 and NLLB's 202 language-code tokens plus ``<mask>``
appended, as in the real vocabulary. Weights are drawn from a seeded normal distribution.

Its translations are noise: it tests mechanics, never data. The same spec gives the same
files on every run (seeded weights, deterministic BPE training on fixed text).
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.encoders.loading import quiet_transformers
from tasks.translate.config import TinyModelSpec

# CLDR locales whose territory and language names train the tiny BPE vocabulary: one or
# more per script family the script filter knows, so every target language has pieces.
_TRAINING_LOCALES = (
    "en", "fr", "de", "es", "ja", "zh_Hans", "zh_Hant", "hi", "mr", "kk", "ru", "ka", "te", "ta", "ml",
    "ar", "ko", "th", "el", "he", "bn", "am", "hy", "gu", "pa", "kn", "si", "lo", "km", "my", "or",
)  # fmt: skip


def training_text() -> list[str]:
    """Territory and language names in many CLDR locales (a few hundred KB, deterministic)."""
    from babel import Locale

    texts: list[str] = []
    for locale in _TRAINING_LOCALES:
        parsed = Locale.parse(locale)
        for mapping in (parsed.territories, parsed.languages):
            texts.extend(mapping[key] for key in sorted(mapping))
    return texts


def build_tokenizer(vocab_size: int):  # -> transformers.NllbTokenizer
    """An NllbTokenizer (BPE over Metaspace pieces, as NLLB's) trained on :func:`training_text`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import NllbTokenizer

    bpe = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    bpe.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False)
    bpe.train_from_iterator(training_text(), trainer)
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
    """Write a transformers checkpoint (safetensors, config, tokenizer) of a tiny random NLLB model."""
    import torch
    from transformers import M2M100ForConditionalGeneration

    spec = spec or TinyModelSpec()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(spec.vocab_size)
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
