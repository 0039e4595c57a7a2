"""The WSPAlign host path as it was before issue 37, kept callable as the benchmark's "before".

`LegacyWspAligner` is `WspAligner` with the tokenisation (per-token Python generators), span
decoding (the whole [rows, length, width] band, four device-to-host reads per batch) and batch
loop of that version, verbatim. benchmarks/align_throughput.py times it beside the current path in
one run, and tests/tasks/align/test_align_host_path.py checks that both give the same links and
the align stage the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

import numpy as np

from tasks.align.backends.base import Progress
from tasks.align.backends.wspalign import WspAligner
from tasks.align.backends.wspalign_reference import MASKED
from tasks.align.backends.wspalign_tokens import MODEL_INPUTS, TokenizedSentences, run_starts, words_of_tokens
from tasks.align.combine import DirectionalLinks
from tasks.encoders.precision import compute_precision


class LegacyWspAligner(WspAligner):
    """WspAligner with the host path of before issue 37."""

    def tokenize(self, sentences: Sequence[list[str]]) -> TokenizedSentences:
        texts = [" ".join(words) for words in sentences]
        n_words = np.fromiter((len(words) for words in sentences), dtype=np.int64, count=len(texts))
        backend = self.tokenizer.backend_tokenizer
        if backend.truncation is None and backend.padding is None:  # what the tokenizer's own call gives here
            encodings = backend.encode_batch(texts, add_special_tokens=False)
            ids_of, offsets_of = [e.ids for e in encodings], [e.offsets for e in encodings]
        else:
            enc = (
                self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False)
                if texts
                else {}
            )
            ids_of, offsets_of = enc.get("input_ids", []), enc.get("offset_mapping", [])
        length = np.fromiter(map(len, ids_of), dtype=np.int64, count=len(texts))
        n_tokens = int(length.sum())
        ids = np.fromiter(chain.from_iterable(ids_of), dtype=np.int64, count=n_tokens)
        starts = np.fromiter((o[0] for row in offsets_of for o in row), dtype=np.int64, count=n_tokens)
        word_len = np.fromiter((len(w) for words in sentences for w in words), dtype=np.int64, count=int(n_words.sum()))
        token_word, first, end = words_of_tokens(word_len, n_words, starts, length)
        return TokenizedSentences(
            ids=ids,
            word=token_word,
            offset=run_starts(length),
            length=length,
            word_offset=run_starts(n_words),
            n_words=n_words,
            first=first,
            end=end,
        )

    def directional_links(
        self, tok: TokenizedSentences, pairs: np.ndarray, progress: Progress = None
    ) -> tuple[DirectionalLinks, DirectionalLinks]:
        """A→B and B→A links of every pair, both oriented (src word, tgt word)."""
        n_pairs = len(pairs)
        rows = []
        for direction, (q_col, c_col) in enumerate(((0, 1), (1, 0))):
            q_sent, c_sent = pairs[:, q_col], pairs[:, c_col]
            counts = tok.n_words[q_sent]
            row_pair = np.repeat(np.arange(n_pairs), counts)
            row_word = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            rows.append((np.full(len(row_pair), direction), row_pair, row_word, q_sent[row_pair], c_sent[row_pair]))
        direction, row_pair, row_word, q_sent, c_sent = (np.concatenate(parts) for parts in zip(*rows))
        length = tok.length[q_sent] + tok.length[c_sent] + 2 * len(self.marker) + self.template.n_special
        order = np.argsort(length, kind="stable")
        starts, ends, scores = (
            np.empty(len(order), dtype=np.int64),
            np.empty(len(order), dtype=np.int64),
            np.empty(len(order), dtype=np.float32),
        )
        found = np.zeros(len(order), dtype=bool)
        asked, reported = 0, 0  # progress counts pairs: each question is 1/(its pair's questions)

        def prepare(batch: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
            at = tok.word_offset[q_sent[batch]] + row_word[batch]
            return batch, self.assemble_questions(
                tok, q_sent[batch], c_sent[batch], tok.first[at], tok.end[at], pin=self.device.type == "cuda"
            )

        def read(batch: np.ndarray, span: tuple[Any, ...], c_start: np.ndarray) -> None:
            nonlocal asked, reported
            found[batch], starts[batch], ends[batch], scores[batch] = self._read_batch(span, c_start)
            asked += len(batch)
            if progress is not None and (done := asked * n_pairs // max(1, len(order))) > reported:
                progress(done - reported)
                reported = done

        queued = None  # the batch on the device whose answers are not read yet
        for batch, arrays in _legacy_ahead(prepare, self._batches(order, length), self.prefetch):
            span = self._decode_batch(arrays)
            if queued is not None:
                read(*queued)  # waits for that batch only: this one is queued behind it
            queued = (batch, span, arrays["context_start"])
        if queued is not None:
            read(*queued)
        # token positions in the context -> words of the context sentence
        hit = np.nonzero(found)[0]
        c_off = tok.offset[c_sent[hit]]
        w_start = tok.word[c_off + starts[hit]]
        w_end = tok.word[c_off + ends[hit]]
        width = w_end - w_start + 1
        rep = np.repeat(np.arange(len(hit)), width)
        j = w_start[rep] + np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width)
        i, p, d = row_word[hit][rep], row_pair[hit][rep], direction[hit][rep]
        s, w = scores[hit][rep], width[rep]
        out = []
        for which in (0, 1):
            sel = d == which
            src, tgt = (i[sel], j[sel]) if which == 0 else (j[sel], i[sel])
            out.append(DirectionalLinks(p[sel], src, tgt, s[sel], w[sel]))
        return out[0], out[1]

    def assemble_questions(
        self,
        tok: TokenizedSentences,
        q_sent: np.ndarray,
        c_sent: np.ndarray,
        first: np.ndarray,
        end: np.ndarray,
        pin: bool = False,
    ) -> dict[str, Any]:
        """Padded input ids (and token types) of questions at token level, plus the context region;
        `pin`: the model's inputs also as torch tensors in pinned memory (`tensors`), for a GPU."""
        t = self.template
        m, n_prefix, n_middle = len(self.marker), len(t.prefix), len(t.middle)
        a_off, a_len = tok.offset[q_sent][:, None], tok.length[q_sent][:, None]
        b_off, b_len = tok.offset[c_sent][:, None], tok.length[c_sent][:, None]
        s, e = first[:, None], end[:, None]
        q_end = n_prefix + a_len + 2 * m
        c_start = q_end + n_middle
        c_end = c_start + b_len
        total = c_end + len(t.suffix)
        width = int(total.max())
        pos = np.arange(width)[None, :]
        # pool: sentence tokens, then prefix, middle, suffix, marker, pad
        base = len(tok.ids)
        pool = np.concatenate([tok.ids, t.prefix, t.middle, t.suffix, self.marker, [self.pad_id]]).astype(np.int64)
        pool_types = np.concatenate(
            [np.zeros(base, dtype=np.int64), t.prefix_types, t.middle_types, t.suffix_types, np.zeros(m + 1, dtype=np.int64)]
        )
        p_middle, p_suffix, p_marker, p_pad = (
            base + n_prefix,
            base + n_prefix + n_middle,
            base + t.n_special,
            base + t.n_special + m,
        )
        q = pos - n_prefix
        question = np.where(
            q < s, a_off + q,
            np.where(q < s + m, p_marker + q - s,
            np.where(q < e + m, a_off + q - m,
            np.where(q < e + 2 * m, p_marker + q - e - m, a_off + q - 2 * m))))  # fmt: skip
        index = np.where(
            pos < n_prefix, base + pos,
            np.where(pos < q_end, question,
            np.where(pos < c_start, p_middle + pos - q_end,
            np.where(pos < c_end, b_off + pos - c_start,
            np.where(pos < total, p_suffix + pos - c_end, p_pad)))))  # fmt: skip
        in_question = (pos >= n_prefix) & (pos < q_end)
        in_context = (pos >= c_start) & (pos < c_end)
        batch = {
            "input_ids": pool[index],
            "attention_mask": (pos < total).astype(np.int64),
            "context": in_context,
            "context_start": c_start[:, 0],
        }
        if self.token_types:
            types = pool_types[index]
            types[in_question] = t.question_type
            types[in_context] = t.context_type
            batch["token_type_ids"] = types
        if pin:
            import torch

            batch["tensors"] = {k: torch.from_numpy(batch[k]).pin_memory() for k in (*MODEL_INPUTS, "context") if k in batch}
        return batch

    def _decode_batch(self, batch: dict[str, Any]) -> tuple[Any, ...]:
        """Queue a batch of assembled questions: (span found, start, end token, score) per row, on the device."""
        import torch

        if "tensors" in batch:  # pinned: the copies do not make the host wait for the GPU
            tensors = {k: v.to(self.device, non_blocking=True) for k, v in batch["tensors"].items()}
        else:
            tensors = {k: torch.from_numpy(batch[k]).to(self.device) for k in (*MODEL_INPUTS, "context") if k in batch}
        inputs = {k: tensors[k] for k in MODEL_INPUTS if k in tensors}
        with torch.inference_mode(), compute_precision(self.device.type, self.settings.precision):
            output = self.model(**inputs)
        with torch.inference_mode():
            ids = inputs["input_ids"]
            allowed = tensors["context"]
            if self.cls_id is not None:
                allowed |= ids == self.cls_id
            start_p = _masked_softmax(output.start_logits.float(), allowed)
            end_p = _masked_softmax(output.end_logits.float(), allowed)
            null = start_p[:, 0] * end_p[:, 0]
            start_p[:, 0] = 0.0
            end_p[:, 0] = 0.0
            w = self.settings.max_answer_tokens
            band = start_p[:, :, None] * torch.nn.functional.pad(end_p, (0, w - 1)).unfold(1, w, 1)  # [rows, start, width]
            best, flat = band.flatten(1).max(dim=1)
            # torch.max returns the first maximal index on ties, as numpy's argmax does
            start = flat // w
            stop = start + flat % w
            found = (best > 0) & (best >= null)
        return found, start, stop, best

    @staticmethod
    def _read_batch(span: tuple[Any, ...], c_start: np.ndarray) -> tuple[np.ndarray, ...]:
        """(span found, start token, end token within the context, score) per row, on the host."""
        found, start, stop, best = span
        return (
            found.cpu().numpy(),
            start.cpu().numpy() - c_start,
            stop.cpu().numpy() - c_start,
            best.cpu().numpy().astype(np.float32),
        )


def _masked_softmax(logits: Any, allowed: Any) -> Any:
    import torch

    masked = torch.where(allowed, logits, torch.full_like(logits, MASKED))
    exp = torch.exp(masked - masked.max(dim=1, keepdim=True).values)
    return exp / exp.sum(dim=1, keepdim=True)


def _legacy_ahead(prepare: Callable[[np.ndarray], Any], batches: Iterable[np.ndarray], prefetch: bool) -> Iterator[Any]:
    """`prepare(batch)` of each batch in order; with `prefetch`, the next one is prepared by a worker
    thread while the caller uses the current one."""
    batches = list(batches)
    if not prefetch or len(batches) < 2:
        yield from map(prepare, batches)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="wspalign-assemble") as pool:
        coming = pool.submit(prepare, batches[0])
        for batch in batches[1:]:
            ready = coming.result()
            coming = pool.submit(prepare, batch)
            yield ready
        yield coming.result()
