"""Random-weight models with the published architectures of the models users run (no hub).

The throughput ratios of the tiny models (d_model 256, hidden 32, a tiny BERT) are dominated by
Python overhead; these builders give the same matrix shapes, FLOPs and memory as the real
checkpoints, with seeded random weights and the small offline tokenizers the project already
trains (tasks/tiny_models.py). Only the tokenizer is small: the model's
vocabulary (embedding and output matrices) has the published size, and CTranslate2 pads its
vocabulary file to the model's size with "madeupword" tokens, as it does for M2M100 anyway.

    NLLB_600M   facebook/nllb-200-distilled-600M: M2M100, d_model 1024, 12+12 layers, FFN 4096,
                16 heads, vocabulary 256,206, tied embeddings (≈ 615M parameters)
    NLLB_1_3B   facebook/nllb-200-distilled-1.3B: d_model 1024, 24+24 layers, FFN 8192 (≈ 1.37B)
    NLLB_3_3B   facebook/nllb-200-3.3B: d_model 2048, 24+24 layers, FFN 8192, 16 heads (≈ 3.3B)
    XLMR_BASE   xlm-roberta-base (= intfloat/multilingual-e5-base): 768, 12 layers, 12 heads,
                FFN 3072, vocabulary 250,002 (≈ 278M; WSPAlign's QA model has no pooler)
    XLMR_LARGE  xlm-roberta-large (= multilingual-e5-large, WSPAlign-xlmr-large): 1024, 24 layers,
                16 heads, FFN 4096 (≈ 560M)

Parameter counts come from instantiating the model on torch's "meta" device (no memory):
:func:`parameter_count`. Random decoders never emit end-of-sentence on purpose, so callers fix
the output length (see benchmarks/translate_throughput.py --shape real).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NllbShape:
    name: str
    d_model: int
    layers: int  # encoder and decoder layers each
    ffn_dim: int
    heads: int
    vocab_size: int = 256_206
    max_positions: int = 1024


@dataclass(frozen=True)
class XlmrShape:
    name: str
    hidden: int
    layers: int
    heads: int
    ffn_dim: int
    vocab_size: int = 250_002
    max_positions: int = 514


NLLB_600M = NllbShape("nllb-200-distilled-600M", d_model=1024, layers=12, ffn_dim=4096, heads=16)
NLLB_1_3B = NllbShape("nllb-200-distilled-1.3B", d_model=1024, layers=24, ffn_dim=8192, heads=16)
NLLB_3_3B = NllbShape("nllb-200-3.3B", d_model=2048, layers=24, ffn_dim=8192, heads=16)
XLMR_BASE = XlmrShape("xlm-roberta-base", hidden=768, layers=12, heads=12, ffn_dim=3072)
XLMR_LARGE = XlmrShape("xlm-roberta-large", hidden=1024, layers=24, heads=16, ffn_dim=4096)

# the tokenizers are the tiny ones: their ids must fit the model's vocabulary, nothing more
_PAD, _BOS, _EOS = 1, 0, 2


def nllb_config(shape: NllbShape, *, pad: int = _PAD, bos: int = _BOS, eos: int = _EOS):  # -> M2M100Config
    """The M2M100 configuration of an NLLB-200 checkpoint of `shape` (pre-norm, scaled embeddings, relu)."""
    from tasks.tiny_models import nllb_config as config_of_shape

    return config_of_shape(
        vocab_size=shape.vocab_size,
        d_model=shape.d_model,
        layers=shape.layers,
        heads=shape.heads,
        ffn_dim=shape.ffn_dim,
        max_positions=shape.max_positions,
        pad=pad,
        bos=bos,
        eos=eos,
    )


def xlmr_config(shape: XlmrShape, *, initializer_range: float = 0.02, pad: int = _PAD, bos: int = _BOS, eos: int = _EOS):
    """The XLMRobertaConfig of an XLM-R checkpoint of `shape`."""
    from transformers import XLMRobertaConfig

    return XLMRobertaConfig(
        vocab_size=shape.vocab_size,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.ffn_dim,
        max_position_embeddings=shape.max_positions,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        initializer_range=initializer_range,
        pad_token_id=pad,
        bos_token_id=bos,
        eos_token_id=eos,
    )


def parameter_count(config, model_class) -> int:  # noqa: ANN001
    """Parameters of `model_class(config)`, counted on the meta device (nothing allocated)."""
    import torch

    with torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for p in model.parameters())


def non_embedding_parameters(config, model_class) -> int:  # noqa: ANN001
    """Parameters outside the token and position embeddings (what costs FLOPs per token)."""
    import torch

    with torch.device("meta"):
        model = model_class(config)
    return sum(p.numel() for name, p in model.named_parameters() if "embed" not in name and "shared" not in name)


def _randomize(model, seed: int, std: float) -> None:  # noqa: ANN001
    """Seeded normal weights (std), layer norms 1, biases 0: independent of transformers' init order."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if param.ndim == 1:
                param.copy_(
                    torch.ones_like(param)
                    if ("layer_norm" in name or "LayerNorm" in name) and name.endswith("weight")
                    else torch.zeros_like(param)
                )
            else:
                param.normal_(0.0, std, generator=generator)


def build_nllb_shape(out_dir: Path, shape: NllbShape = NLLB_600M, *, seed: int = 1, tokenizer_vocab: int = 8000) -> Path:
    """A transformers checkpoint of `shape` with random weights and the tiny NLLB tokenizer."""
    from transformers import M2M100ForConditionalGeneration

    from tasks.encoders.loading import quiet_transformers
    from tasks.tiny_models import build_nllb_tokenizer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_nllb_tokenizer(tokenizer_vocab)
    if len(tokenizer) > shape.vocab_size:
        raise ValueError(f"tokenizer has {len(tokenizer)} tokens, more than the {shape.name} vocabulary ({shape.vocab_size})")
    config = nllb_config(shape, pad=tokenizer.pad_token_id, bos=tokenizer.bos_token_id, eos=tokenizer.eos_token_id)
    model = M2M100ForConditionalGeneration(config).eval()
    _randomize(model, seed, std=0.02)
    with quiet_transformers():
        model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    del model
    return out_dir


def build_xlmr_shape(out_dir: Path, shape: XlmrShape = XLMR_BASE, *, head: str = "qa", seed: int = 0) -> Path:
    """An XLM-R checkpoint of `shape` with random weights and the tiny WSPAlign (Unigram, "▁") tokenizer.

    head "qa": XLMRobertaForQuestionAnswering, as WSPAlign; "encoder": XLMRobertaModel, a base
    for the train stage. Both with XLM-R's initialiser (normal, std 0.02, as transformers'
    `initializer_range`), so the random model behaves like a trained one where it matters here:
    token states stay distinct through the 12 layers and the QA logits differ between context
    positions (spread ~2 at the real shape), so the best answer of every question is not a tie.
    The std this builder used before, 0.5 * sqrt(32 / hidden) (0.10 at hidden 768, chosen to
    match the tiny model's logit spread), saturates the attention and collapses every position
    to the same state: QA logits equal to within 4e-6 over the context, every span tied, and
    batched and one-question decoding pick different tied spans through float rounding alone
    (docs/benchmarks.md, "align at XLM-R base's shape")."""
    import shutil
    import tempfile

    from transformers import AutoTokenizer, XLMRobertaForQuestionAnswering, XLMRobertaModel

    from tasks.encoders.loading import quiet_transformers
    from tasks.tiny_models import build_tiny_wspalign

    if head not in ("qa", "encoder"):
        raise ValueError(f"head must be 'qa' or 'encoder', not {head!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="xlembed-shape-tok-"))
    build_tiny_wspalign(scratch, seed=seed, hidden_size=8, layers=1)  # its tokenizer; the model is replaced
    tokenizer = AutoTokenizer.from_pretrained(str(scratch))
    std = 0.02
    config = xlmr_config(
        shape, initializer_range=std, pad=tokenizer.pad_token_id, bos=tokenizer.bos_token_id, eos=tokenizer.eos_token_id
    )
    model_class = XLMRobertaForQuestionAnswering if head == "qa" else XLMRobertaModel
    model = model_class(config).eval()
    _randomize(model, seed, std=std)
    with quiet_transformers():
        model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    shutil.rmtree(scratch, ignore_errors=True)
    del model
    return out_dir


def peak_rss_reset() -> bool:
    """Reset this process's peak resident set size (Linux clear_refs 5); False where unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def proc_status_bytes(field: str) -> int | None:
    """A size field of /proc/self/status (VmRSS, VmHWM, VmPeak, ...) in bytes; None where unavailable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """This process's peak resident set size since start or the last :func:`peak_rss_reset` (Linux VmHWM)."""
    peak = proc_status_bytes("VmHWM")
    if peak is not None:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_bytes() -> int:
    return proc_status_bytes("VmRSS") or 0
