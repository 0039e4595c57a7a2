"""Running a CTranslate2 NLLB model: one Translator per process, length-sorted token batches.

`translate_tokens` is the whole hot path of the translate stage: it sorts the requests by
source length, cuts them into batches of at most `max_batch_tokens` source tokens (the
same rule as CTranslate2's ``batch_type="tokens"``) to give each batch an output limit
relative to its longest input, submits runs of batches that share a limit as one
asynchronous call (CTranslate2 splits it into the same token batches; the device never
waits for Python between calls), and puts the results back in input order.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.translate.config import DecodingConfig

EOS = "</s>"

_TRANSLATORS: dict[tuple[Any, ...], Any] = {}
_TRANSLATORS_LOCK = threading.Lock()


def get_translator(
    model_dir: Path, device: str, compute_type: str, device_index: int = 0, inter_threads: int = 1, intra_threads: int = 0
) -> Any:
    """The process's Translator for this model and device, created on first use and reused by
    every later shard (loading the 3.3B model takes seconds and gigabytes). Thread-safe:
    CTranslate2 translators accept concurrent calls from several threads."""
    key = (str(Path(model_dir).resolve()), device, compute_type, device_index, inter_threads, intra_threads)
    with _TRANSLATORS_LOCK:
        translator = _TRANSLATORS.get(key)
        if translator is None:
            import ctranslate2

            translator = ctranslate2.Translator(
                str(model_dir),
                device=device,
                device_index=device_index,
                compute_type=compute_type,
                inter_threads=inter_threads,
                intra_threads=intra_threads,
            )
            _TRANSLATORS[key] = translator
        return translator


def cached_translators() -> int:
    """How many Translators this process holds (tests check that shards share one)."""
    return len(_TRANSLATORS)


def release_translators() -> None:
    """Drop every cached Translator (frees device memory)."""
    with _TRANSLATORS_LOCK:
        _TRANSLATORS.clear()


@dataclass(frozen=True)
class Batch:
    indices: np.ndarray  # positions in the caller's request list
    max_decoding_length: int


def plan_batches(lengths: np.ndarray, max_batch_tokens: int, decoding: DecodingConfig) -> list[Batch]:
    """Length-sorted batches of at most `max_batch_tokens` source tokens (at least one request each)."""
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    total = np.cumsum(sorted_lengths)
    batches: list[Batch] = []
    start = 0
    n = len(order)
    while start < n:
        before = int(total[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(total, before + max_batch_tokens, side="right")))
        longest = int(sorted_lengths[stop - 1])
        limit = math.ceil(decoding.max_length_ratio * longest + decoding.max_length_extra)
        batches.append(Batch(order[start:stop], max(1, min(decoding.max_decoding_length, limit))))
        start = stop
    return batches


def translate_tokens(
    translator: Any,
    sources: Sequence[list[str]],
    target_prefixes: Sequence[list[str]],
    decoding: DecodingConfig,
    max_batch_tokens: int,
    progress: Callable[[int], None] | None = None,
) -> list[list[str]]:
    """Translate tokenised sources; returns each best hypothesis in input order, without the
    target prefix and without ``</s>``. `progress(n)` hears of each finished sentence."""
    if not sources:
        return []
    lengths = np.fromiter((len(s) for s in sources), dtype=np.int64, count=len(sources))
    # consecutive batches with the same output limit go in one call: CTranslate2 cuts it into
    # the same token batches itself, without a Python round trip per batch
    calls: list[tuple[list[int], int]] = []
    for batch in plan_batches(lengths, max_batch_tokens, decoding):
        if calls and calls[-1][1] == batch.max_decoding_length:
            calls[-1][0].extend(batch.indices.tolist())
        else:
            calls.append((batch.indices.tolist(), batch.max_decoding_length))
    pending = []
    for idx, max_decoding_length in calls:
        results = translator.translate_batch(
            [sources[i] for i in idx],
            target_prefix=[target_prefixes[i] for i in idx],
            max_batch_size=max_batch_tokens,
            batch_type="tokens",
            asynchronous=True,
            beam_size=decoding.beam_size,
            length_penalty=decoding.length_penalty,
            repetition_penalty=decoding.repetition_penalty,
            no_repeat_ngram_size=decoding.no_repeat_ngram_size,
            max_input_length=decoding.max_input_length,
            max_decoding_length=max_decoding_length,
            sampling_topk=1,
        )
        pending.append((idx, results))
    out: list[list[str]] = [[] for _ in sources]
    for idx, results in pending:
        for i, result in zip(idx, results):
            hypothesis = result.result().hypotheses[0]
            skip = len(target_prefixes[i])
            end = len(hypothesis) - 1 if hypothesis and hypothesis[-1] == EOS else len(hypothesis)
            out[i] = hypothesis[skip:end]
            if progress is not None:
                progress(1)
    return out


class NllbTokenizer:
    """NLLB tokenisation with the Rust `tokenizers` library: ``[src_lang] pieces </s>`` in,
    pieces out (special tokens dropped on decoding), in batches."""

    def __init__(self, tokenizer_json: Path) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_json))
        self.vocab: dict[str, int] = self.tokenizer.get_vocab(with_added_tokens=True)

    def encode(self, texts: Sequence[str], src_lang: str, max_length: int) -> list[list[str]]:
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        keep = max(1, max_length - 2)
        return [[src_lang, *e.tokens[:keep], EOS] for e in encodings]

    def ids(self, tokens: Sequence[list[str]]) -> list[list[int]]:
        vocab, unk = self.vocab, self.vocab.get("<unk>", 3)
        return [[vocab.get(t, unk) for t in seq] for seq in tokens]

    def decode(self, ids: Sequence[list[int]]) -> list[str]:
        return [text.strip() for text in self.tokenizer.decode_batch(list(ids), skip_special_tokens=True)]
