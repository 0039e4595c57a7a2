"""The dual encoder: one shared transformer, a pooling, optional language-ID embeddings, and the
vocabulary heads the token-level objectives need.

Both sides of a pair go through the same transformer (a "dual encoder" with shared weights).
The sentence vector is the configured pooling of the last hidden states, L2-normalised, as
tasks/encoders/pooling.py defines it for every stage: "mean" (attention-masked mean over every
token, specials included: what E5 does), "cls" (the first token's state) or "pooler" (the
model's pooler output; an error for a model without trained pooler weights).

`language_embedding=True` adds a learned vector per language to every token embedding (WACSE
section 6.1). The paper initialises that layer "randomly at the start of training"; it is drawn
like the model's own embeddings, normal with std `initializer_range` (0.02 for BERT, XLM-R and
E5), from the seeded torch generator, so step 0 is the base model plus a small per-language
offset (step-0 dev scores are of that model, not exactly the base's).
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tasks.encoders.loading import load_auto_model
from tasks.encoders.pooling import check_pooling, embed, require_pooler, warn_cls_with_pooler

log = logging.getLogger(__name__)

# Pretrained MLM head weights, by checkpoint family: our name -> the checkpoint's name.
_MLM_KEYS = {
    "bert": {"dense.weight": "cls.predictions.transform.dense.weight", "dense.bias": "cls.predictions.transform.dense.bias",
             "norm.weight": "cls.predictions.transform.LayerNorm.weight", "norm.bias": "cls.predictions.transform.LayerNorm.bias",
             "bias": "cls.predictions.bias"},
    "xlmr": {"dense.weight": "lm_head.dense.weight", "dense.bias": "lm_head.dense.bias",
             "norm.weight": "lm_head.layer_norm.weight", "norm.bias": "lm_head.layer_norm.bias", "bias": "lm_head.bias"},
}  # fmt: skip


def load_transformer(model_dir: Path, *, dropout: float | None = None) -> Any:
    """AutoModel from a local directory, float32; a randomly initialised pooler (no weights in the
    checkpoint, as for E5) is removed, so that "pooler" pooling is refused rather than noise."""

    kwargs: dict[str, Any] = {}
    if dropout is not None:
        kwargs.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return load_auto_model(str(model_dir), dtype=torch.float32, **kwargs)


class DualEncoder(nn.Module):
    def __init__(self, transformer: Any, *, pooling: str = "mean", n_langs: int = 0) -> None:
        super().__init__()
        self.transformer = transformer
        self.pooling = check_pooling(pooling)
        where = f"model {getattr(transformer, 'name_or_path', '') or type(transformer).__name__!r}"
        require_pooler(self.pooling, transformer, where)
        warn_cls_with_pooler(self.pooling, transformer, where)
        hidden = transformer.config.hidden_size
        self.lang_embedding = nn.Embedding(n_langs, hidden) if n_langs else None
        if self.lang_embedding is not None:
            nn.init.normal_(self.lang_embedding.weight, std=getattr(transformer.config, "initializer_range", 0.02))

    @property
    def hidden_size(self) -> int:
        return int(self.transformer.config.hidden_size)

    def word_embeddings(self) -> nn.Embedding:
        return self.transformer.get_input_embeddings()

    def transformer_layers(self) -> nn.ModuleList:
        """The stack of transformer layers, lowest first: the ModuleList as long as the config's
        `num_hidden_layers` (`encoder.layer` in BERT, XLM-R and E5)."""
        depth = getattr(self.transformer.config, "num_hidden_layers", None)
        for _, module in self.transformer.named_modules():
            if isinstance(module, nn.ModuleList) and len(module) == depth:
                return module
        raise ValueError(f"cannot find the {depth} transformer layers of {type(self.transformer).__name__}")

    def freeze_lower(self, n_layers: int) -> None:
        """Keep the embeddings and the lowest `n_layers` layers fixed (no gradient, no update)."""
        if n_layers <= 0:
            return
        layers = self.transformer_layers()
        if n_layers > len(layers):
            raise ValueError(f"freeze_lower_layers = {n_layers}: the model has only {len(layers)} layers")
        embeddings = getattr(self.transformer, "embeddings", None) or self.word_embeddings()
        for module in (embeddings, *layers[:n_layers]):
            module.requires_grad_(False)

    def token_states(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, lang_ids: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(last hidden states [n, T, H], pooler output or None)."""
        if self.lang_embedding is not None and lang_ids is not None:
            embeds = self.word_embeddings()(input_ids) + self.lang_embedding(lang_ids)[:, None, :]
            out = self.transformer(inputs_embeds=embeds, attention_mask=attention_mask)
        else:
            out = self.transformer(input_ids=input_ids, attention_mask=attention_mask)
        return out.last_hidden_state, getattr(out, "pooler_output", None)

    def pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor, pooled: torch.Tensor | None = None) -> torch.Tensor:
        """L2-normalised sentence vectors [n, H]: the shared pooling (tasks/encoders/pooling.py)."""
        return embed(self.pooling, hidden, attention_mask, pooled)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, lang_ids: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(L2-normalised sentence vectors [n, H], last hidden states [n, T, H])."""
        hidden, pooled = self.token_states(input_ids, attention_mask, lang_ids)
        return self.pool(hidden, attention_mask, pooled), hidden


class VocabularyHead(nn.Module):
    """Transform (dense + GELU + LayerNorm) then a decoder tied to the input embeddings, plus a bias.

    Bases with pretrained MLM weights load them (`load_pretrained`); bases without (the offline
    E5) keep the freshly initialised transform, and the decoder is the embedding matrix either way.
    """

    def __init__(self, encoder: DualEncoder, *, eps: float = 1e-12) -> None:
        super().__init__()
        hidden = encoder.hidden_size
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        vocab = encoder.word_embeddings().weight.shape[0]
        self.bias = nn.Parameter(torch.zeros(vocab))
        self._encoder = [encoder]  # a plain list: the embedding is the encoder's parameter, not this module's
        nn.init.normal_(self.dense.weight, std=getattr(encoder.transformer.config, "initializer_range", 0.02))
        nn.init.zeros_(self.dense.bias)

    def forward(self, states: torch.Tensor, vocab: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm(nn.functional.gelu(self.dense(states)))
        weight = self._encoder[0].word_embeddings().weight
        bias = self.bias
        if vocab is not None:
            weight, bias = weight[vocab], bias[vocab]
        return x @ weight.t() + bias

    def load_pretrained(self, model_dir: Path) -> bool:
        """Copy MLM head weights from the base checkpoint's safetensors when it has them."""
        from safetensors import safe_open

        for path in sorted(Path(model_dir).glob("*.safetensors")):
            with safe_open(str(path), framework="pt") as f:
                keys = set(f.keys())
                for names in _MLM_KEYS.values():
                    if all(v in keys for v in names.values()):
                        state = {ours: f.get_tensor(theirs) for ours, theirs in names.items()}
                        self.load_state_dict(state, strict=True)
                        return True
        return False


def encoder_layers(transformer: Any) -> nn.ModuleList:
    for path in ("encoder.layer", "encoder.layers", "layers", "transformer.layer"):
        obj = transformer
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList):
            return obj
    raise TypeError(f"cannot find the transformer layers of {type(transformer).__name__} (RTL copies the last K)")


class RepresentationTranslationHead(nn.Module):
    """DAP's RTL head: copies of the encoder's last K layers (not tied) and a vocabulary head.

    Input: the source sentence's token states (first token excluded, padding masked) followed
    by one [MASK] embedding per token of the sentence to rebuild (word + position + token
    type, one LayerNorm: the embedding module applied once, unlike the reference code which
    applies the position embedding and LayerNorm twice). The first [MASK], in the place of the
    rebuilt sentence's CLS, is hidden from attention as in DAP's code (the CLS is not rebuilt:
    its logits are returned but are no label). Output: logits at the [MASK] positions.
    """

    def __init__(self, encoder: DualEncoder, layers: int, mask_id: int, n_langs: int = 0) -> None:
        super().__init__()
        source = encoder_layers(encoder.transformer)
        if layers > len(source):
            raise ValueError(f"RTL head wants {layers} layers; the encoder has {len(source)}")
        self.layers = nn.ModuleList(copy.deepcopy(layer) for layer in source[-layers:])
        self.head = VocabularyHead(encoder, eps=getattr(encoder.transformer.config, "layer_norm_eps", 1e-12))
        self.mask_id = mask_id
        self._encoder = [encoder]
        # DAP section 5.1: when the rebuilt language varies, a language embedding (as in TLM) tells
        # the head which language the source tokens are in and which one to write
        self.lang_embedding = nn.Embedding(n_langs, encoder.hidden_size) if n_langs else None
        if self.lang_embedding is not None:
            nn.init.normal_(self.lang_embedding.weight, std=getattr(encoder.transformer.config, "initializer_range", 0.02))

    def forward(
        self,
        src_states: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_mask: torch.Tensor,
        vocab: torch.Tensor | None = None,
        src_lang: torch.Tensor | None = None,
        tgt_lang: torch.Tensor | None = None,
    ) -> torch.Tensor:
        from transformers.masking_utils import create_bidirectional_mask

        transformer = self._encoder[0].transformer
        n, t_tgt = tgt_mask.shape
        mask_ids = torch.full((n, t_tgt), self.mask_id, dtype=torch.long, device=tgt_mask.device)
        queries = transformer.embeddings(input_ids=mask_ids).to(src_states.dtype)
        source = src_states[:, 1:]
        if self.lang_embedding is not None:
            if src_lang is None or tgt_lang is None:
                raise ValueError("this RTL head has language embeddings: pass src_lang and tgt_lang")
            source = source + self.lang_embedding(src_lang)[:, None, :].to(source.dtype)
            queries = queries + self.lang_embedding(tgt_lang)[:, None, :].to(queries.dtype)
        hidden = torch.cat([source, queries], dim=1)
        tgt_keys = tgt_mask.clone()
        tgt_keys[:, 0] = 0  # the rebuilt sentence's CLS place: no token attends to it (DAP's code)
        mask2d = torch.cat([src_mask[:, 1:], tgt_keys], dim=1)
        attn = create_bidirectional_mask(config=transformer.config, inputs_embeds=hidden, attention_mask=mask2d)
        for layer in self.layers:
            out = layer(hidden, attention_mask=attn)
            hidden = out[0] if isinstance(out, tuple) else out
        return self.head(hidden[:, -t_tgt:], vocab)


def frozen_copy(encoder: DualEncoder) -> DualEncoder:
    """The starting model, frozen: the SupCon regulariser's z_orig and DuEAM's anchor."""
    anchor = copy.deepcopy(encoder)
    anchor.eval()
    for p in anchor.parameters():
        p.requires_grad_(False)
    return anchor
