"""WSPAlign the way its authors run it, which the batched aligner is checked against (tests and
benchmarks/align_throughput.py): string questions, the tokenizer's pair encoding, one forward
pass per question, and the question-answering pipeline's numpy decoding."""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.align.backends.wspalign_tokens import MARKER
from tasks.align.combine import DirectionalLinks, Links, combine_directions
from tasks.encoders.precision import compute_precision

MASKED = -10_000.0  # the pipeline's value for logits outside the context


def align_reference(aligner: Any, src_words: list[str], tgt_words: list[str]) -> Links:
    """`aligner` (a WspAligner) on one pair, one question per forward pass, decoded as the question-answering pipeline does."""
    links = []
    for direction, (q_words, c_words) in enumerate(((src_words, tgt_words), (tgt_words, src_words))):
        i, j, score, width = reference_direction(aligner, q_words, c_words)
        src, tgt = (i, j) if direction == 0 else (j, i)
        links.append(DirectionalLinks(np.zeros(len(i), dtype=np.int64), src, tgt, score, width))
    return combine_directions(1, links[0], links[1], method=aligner.settings.combine, threshold=aligner.settings.threshold)[0]


def reference_direction(aligner: Any, q_words: list[str], c_words: list[str]) -> tuple[np.ndarray, ...]:
    import torch

    context = " ".join(c_words)
    word_ends = np.cumsum(np.array([len(w) for w in c_words], dtype=np.int64) + 1) - 1
    out_i, out_j, out_s, out_w = [], [], [], []
    for i, word in enumerate(q_words):
        question = " ".join([*q_words[:i], MARKER, word, MARKER, *q_words[i + 1 :]])
        enc = aligner.tokenizer(question, context, return_offsets_mapping=True, return_token_type_ids=aligner.token_types)
        ids = np.array(enc["input_ids"])
        inputs = {"input_ids": torch.tensor([enc["input_ids"]], device=aligner.device)}
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
        if aligner.token_types:
            inputs["token_type_ids"] = torch.tensor([enc["token_type_ids"]], device=aligner.device)
        with torch.inference_mode(), compute_precision(aligner.device.type, aligner.settings.precision):
            output = aligner.model(**inputs)
        start = output.start_logits[0].float().cpu().numpy()
        end = output.end_logits[0].float().cpu().numpy()
        # the pipeline: p_mask = not context, CLS unmasked; masked logits -10000; softmax
        allowed = np.array([s == 1 for s in enc.sequence_ids(0)])
        if aligner.cls_id is not None:
            allowed |= ids == aligner.cls_id
        start = np.where(allowed, start, MASKED)
        end = np.where(allowed, end, MASKED)
        start = np.exp(start - start.max())
        start = start / start.sum()
        end = np.exp(end - end.max())
        end = end / end.sum()
        null = start[0] * end[0]
        start[0] = end[0] = 0.0
        candidates = np.tril(np.triu(np.outer(start, end)), aligner.settings.max_answer_tokens - 1)
        s, e = np.unravel_index(int(np.argmax(candidates)), candidates.shape)
        score = candidates[s, e]
        if not (score > 0 and score >= null):
            continue
        offsets = enc["offset_mapping"]
        ws = int(np.searchsorted(word_ends, offsets[s][0], side="right"))
        we = int(np.searchsorted(word_ends, offsets[e][0], side="right"))
        for j in range(ws, we + 1):
            out_i.append(i)
            out_j.append(j)
            out_s.append(score)
            out_w.append(we - ws + 1)
    as_int = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return as_int(out_i), as_int(out_j), np.array(out_s, dtype=np.float32), as_int(out_w)
