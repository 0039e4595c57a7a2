"""Load a transformers AutoModel from a local folder quietly, dropping a pooler without weights.

transformers 5 prints a multi-line "LOAD REPORT ... MISSING" table and a "Loading weights"
bar for every model whose checkpoint lacks some weights. E5 checkpoints (the offline base
model) have no pooler weights, which is expected here: the pooler is dropped, so "pooler"
pooling is refused for them rather than computed by random weights ("cls" is the first token
either way; tasks/encoders/pooling.py). An exported folder carries an all-zero pooler in their
place (tasks/train/model_folder.py: so that plain `AutoModel` loads it without a report); all-zero
pooler weights count as none. The report is replaced by one line: a debug line when only the
pooler was missing, a warning naming the other missing or unexpected weights otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)
_quiet_lock = threading.Lock()


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings and progress bars off for the duration (its settings are global)."""
    from transformers.utils import logging as hf_logging

    with _quiet_lock:
        verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            yield
        finally:
            hf_logging.set_verbosity(verbosity)
            if bars:
                hf_logging.enable_progress_bar()


def load_auto_model(model_dir: str, **kwargs: Any) -> Any:
    """`AutoModel.from_pretrained(model_dir, **kwargs)`, quiet; a pooler without weights is removed."""
    import transformers

    with quiet_transformers():
        model, info = transformers.AutoModel.from_pretrained(model_dir, output_loading_info=True, **kwargs)
    missing = list(info.get("missing_keys", ()))
    pooler = getattr(model, "pooler", None)
    if pooler is not None and (any(k.startswith("pooler.") for k in missing) or is_placeholder_pooler(pooler)):
        model.pooler = None
        log.debug("%s has no pooler weights: pooler removed ('pooler' pooling unavailable)", model_dir)
    other = [k for k in missing if not k.startswith("pooler.")]
    unexpected = list(info.get("unexpected_keys", ()))
    if other or unexpected:
        log.warning(
            "%s: %d weights missing from the checkpoint (newly initialised: %s), %d unused (%s)",
            model_dir, len(other), ", ".join(sorted(other)[:5]) or "none", len(unexpected), ", ".join(sorted(unexpected)[:5]) or "none",
        )  # fmt: skip
    return model


def is_placeholder_pooler(pooler: Any) -> bool:
    """Whether a loaded pooler is the all-zero placeholder an export writes for a model without one."""
    return all(not bool(p.detach().any()) for p in pooler.parameters())
