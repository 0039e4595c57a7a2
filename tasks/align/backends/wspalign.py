"""WSPAlign (Wu et al., 2023): word alignment as span prediction with a question-answering model.

For word w_i of sentence A the question is A with w_i between ` ¶ ` markers and the context
is sentence B (SQuAD-v2 style): the predicted span of B, or the null answer, gives w_i's
aligned words with score P(start)·P(end). Both directions run, then `combine.py` merges them.

The authors run the transformers question-answering pipeline one question at a time. Here:

  * each sentence is tokenised once (`" ".join(words)`, offsets mapping tokens to words);
    questions are assembled at token level by inserting the marker's tokens around the
    word's subword span, which is exactly the tokenisation of the question string, since
    words hold no whitespace and the tokenizers split on it first; a batch's token ids are
    one `np.repeat` of ten runs per row into a pool of those tokens (no per-question Python);
  * every word of a pair, both directions, and many pairs share forward batches; rows are
    sorted by length (all questions of one pair-direction have the same length) and cut
    into batches of at most `batch_tokens` padded tokens (`padding_fraction` measures the
    waste: ~1% on FLORES-length pairs, benchmarks/align_throughput.py);
  * the next batch's questions are assembled by a worker thread while the model runs the
    current one (numpy, which releases the GIL), copied to a GPU from pinned memory without
    waiting; each batch's answers come back in one copy to pinned memory with its own CUDA
    event, read once the next batch is queued, so waiting for batch k-1 never waits for k
    and the GPU is not left idle between batches;
  * span decoding runs on the device for the whole batch: logits outside the context
    (except the first, CLS, position) are masked to -10000 as the pipeline does, softmax,
    null score = P(start=0)·P(end=0), then the best span of width <= max_answer_tokens from
    a [rows, context, width] band of P(start)·P(end) over each row's context (elsewhere
    both are exactly 0); a span wins over the null answer when its score is >= the null
    score (the pipeline's stable sort keeps the span on a tie); on a CPU on one intra-op
    thread (docs/align.md, "Host cost per question");
  * fp32 with TF32 off by default, so a GPU gives the CPU's links; `precision = "bf16"`
    autocasts the model (keyed: on the H100 it changed the links of 1 pair in 64); softmax
    and decoding in float32 either way.

`align_reference` is the one-question-at-a-time procedure (string questions, tokenizer pair
encoding, one forward per question, the pipeline's numpy decoding) that tests and the
benchmark compare against.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationInfo, model_validator

from tasks.align.backends.base import AlignBackend, AlignerSettings, Progress, is_local_dir, register_backend
from tasks.align.backends.wspalign_reference import MASKED
from tasks.align.backends.wspalign_reference import align_reference as reference_alignment
from tasks.align.backends.wspalign_tokens import (
    MARKER,
    MODEL_INPUTS,
    PairTemplate,
    TokenizedSentences,
    WspalignLoadError,
    run_starts,
    words_of_tokens,
)
from tasks.align.combine import DirectionalLinks, Links, combine_directions
from tasks.encoders.loading import quiet_transformers
from tasks.encoders.precision import Precision, compute_precision
from tasks.stage import folder_fingerprint
from tasks.stage_config import KEYED_UNLESS_DEFAULT, NOT_KEYED, HubIdOrPath, local_source_paths
from tasks.tiny_models import tiny_wspalign_dir

log = logging.getLogger(__name__)


@register_backend
class WspalignSettings(AlignerSettings):
    """Span-prediction alignment with a WSPAlign question-answering checkpoint (`[align.wspalign]`).

    For each word of sentence A the question is A with the word between ` ¶ ` markers and
    the context is sentence B; the predicted span of B (or the null answer) gives the aligned
    words with score P(start)·P(end). Both directions are run and combined:

      sum           the authors' inference script: for pairs found A→B, each direction's
                    score divided by its span width (in words), summed; pairs found only
                    B→A are dropped; kept when the sum > threshold. WACSE uses this with
                    threshold 0.9. The stored score is the sum / 2 (so it stays in [0, 1]).
      average       the authors' evaluation: (P_ab + P_ba^T) / 2 > threshold (they use 0.4)
      intersection  both directions > threshold; score = their mean
      union         either direction > threshold; score = the larger
    """

    name = "wspalign"
    description = "WSPAlign: word alignment as span prediction with a question-answering model (WACSE's aligner)"

    source: Literal["hub", "local", "tiny_random"] = Field(
        default="hub", description="hub id, local directory, or a seeded tiny random model built on the spot (mechanics tests)"
    )
    model: HubIdOrPath = Field(
        default="qiyuw/WSPAlign-xlm-base", description="hub id or local directory (safetensors weights only)"
    )

    @model_validator(mode="before")
    @classmethod
    def _local_model_path(cls, data: Any, info: ValidationInfo) -> Any:
        return local_source_paths(data, info, ("model",))

    revision: str | None = Field(default=None, description="hub revision (commit) to pin")
    seed: int = Field(default=0, description="seed of the tiny_random model")
    combine: Literal["sum", "average", "intersection", "union"] = "sum"
    threshold: float = Field(default=0.9, ge=0.0, le=2.0, description="WACSE: 0.9 with combine = 'sum'")
    max_seq_length: int = Field(default=384, ge=16, le=4096, description="pairs whose question+context is longer are dropped")
    max_answer_tokens: int = Field(default=15, ge=1, le=128, description="longest predicted span, in tokens")
    batch_tokens: int = Field(default=16_384, ge=256, json_schema_extra=NOT_KEYED, description="padded tokens per forward batch")
    device: str | None = Field(default=None, json_schema_extra=NOT_KEYED, description="default: cuda if available")
    precision: Precision = Field(
        default="fp32",
        json_schema_extra=KEYED_UNLESS_DEFAULT,
        description="fp32 (TF32 off: the CPU's links on a GPU) or bf16 autocast",
    )

    def located_fields(self) -> set[str]:
        # a local model folder is keyed by its files' contents (the backend's fingerprint), not its path
        return {"model"} if self.source == "local" and is_local_dir(self.model) else set()

    @model_validator(mode="after")
    def _model_named(self) -> WspalignSettings:
        if self.source != "tiny_random" and not self.model.strip():
            raise ValueError("wspalign.model must name a hub id or a local directory")
        return self

    def build(self, base_model: Path | None = None) -> WspAligner:
        return WspAligner.load(self, base_model)

    def fingerprint(self) -> dict[str, Any]:
        """A local model folder's files; for the tiny random model, the packages that build it."""
        from importlib.metadata import version

        if self.source == "local":
            root = Path(self.model).expanduser()
            if root.is_dir():
                return {"model_files": folder_fingerprint(root, (p for p in root.glob("*") if p.is_file()))}
        elif self.source == "tiny_random":  # random init and tokenizer training depend on these
            return {"packages": {name: version(name) for name in ("torch", "transformers", "tokenizers")}}
        return {}


class WspAligner(AlignBackend):
    """Batched WSPAlign. Build with `WspAligner.load(settings)` or from a tokenizer and model."""

    label = "wspalign"

    def __init__(self, tokenizer: Any, model: Any, settings: WspalignSettings) -> None:
        import torch

        self.tokenizer, self.model, self.settings = tokenizer, model, settings
        self.device = torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device).eval()
        self.template = PairTemplate.from_tokenizer(tokenizer)
        self.marker = np.array(tokenizer(MARKER, add_special_tokens=False)["input_ids"], dtype=np.int64)
        if not len(self.marker):
            raise WspalignLoadError(f"the tokenizer turns the marker {MARKER!r} into no tokens")
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.cls_id = tokenizer.cls_token_id
        self.token_types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        # assemble the next batch in a worker thread while a GPU runs this one; on a CPU the thread
        # would only take cores from the model's own threads
        self.prefetch = self.device.type == "cuda"
        # a list: each batch's (began, done, rows) CUDA events are appended (benchmarks/gpu_check.py)
        self.gpu_timeline: list[tuple[Any, Any, int]] | None = None

    @classmethod
    def load(cls, settings: WspalignSettings, base_model: Path | None = None) -> WspAligner:
        """Tokenizer and model named by `settings`: safetensors only, no remote code. (WSPAlign
        has its own model; the pipeline's base model is not used.)"""
        import torch
        import transformers

        kwargs: dict[str, Any] = {"trust_remote_code": False}
        model_dir: Path | None = None
        if settings.source == "tiny_random":
            model_dir = tiny_wspalign_dir(settings.seed)
        if settings.source == "local":
            model_dir = Path(settings.model).expanduser()
        if model_dir is not None:
            if not model_dir.is_dir():
                raise WspalignLoadError(f"WSPAlign model directory not found: {model_dir}")
            if not any(model_dir.glob("*.safetensors")):
                raise WspalignLoadError(f"{model_dir}: no .safetensors weights; pickled weights are not loaded")
            name, kwargs["local_files_only"] = str(model_dir), True
        else:
            name, kwargs["revision"] = settings.model, settings.revision
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(name, use_fast=True, **kwargs)

            with quiet_transformers():  # no "Loading weights" bar in the run's output
                model = transformers.AutoModelForQuestionAnswering.from_pretrained(
                    name, use_safetensors=True, dtype=torch.float32, **kwargs
                )
        except (OSError, ValueError, KeyError) as err:
            raise WspalignLoadError(f"cannot load WSPAlign model {name!r}: {err}") from err
        if not getattr(tokenizer, "is_fast", False):
            raise WspalignLoadError(f"{name}: a fast tokenizer (tokenizer.json) is required")
        return cls(tokenizer, model, settings)

    # ------------------------------------------------------------------ batched

    def tokenize(self, sentences: Sequence[list[str]]) -> TokenizedSentences:
        texts = [" ".join(words) for words in sentences]
        n_words = np.fromiter(map(len, sentences), dtype=np.int64, count=len(texts))
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
        # flattened by C iterators: no Python frame per token or word
        ids = np.fromiter(chain.from_iterable(ids_of), dtype=np.int64, count=n_tokens)
        spans = np.fromiter(chain.from_iterable(chain.from_iterable(offsets_of)), dtype=np.int64, count=2 * n_tokens)
        starts = spans[::2]
        word_len = np.fromiter(map(len, chain.from_iterable(sentences)), dtype=np.int64, count=int(n_words.sum()))
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

    def sequence_lengths(self, tok: TokenizedSentences, pairs: np.ndarray) -> np.ndarray:
        """Tokens of each pair's question+context sequence (the same in both directions)."""
        return tok.length[pairs[:, 0]] + tok.length[pairs[:, 1]] + 2 * len(self.marker) + self.template.n_special

    def align(
        self, sentences: Sequence[list[str]], langs: Sequence[str], pairs: np.ndarray, progress: Progress = None
    ) -> list[Links | None]:
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        tok = self.tokenize(sentences)
        fits = self.sequence_lengths(tok, pairs) <= self.settings.max_seq_length
        kept = np.nonzero(fits)[0]
        if progress is not None and len(kept) < len(pairs):
            progress(len(pairs) - len(kept))  # too long for the model: done, unaligned
        fwd, bwd = self.directional_links(tok, pairs[kept], progress)
        combined = combine_directions(len(kept), fwd, bwd, method=self.settings.combine, threshold=self.settings.threshold)
        out: list[Links | None] = [None] * len(pairs)
        for index, links in zip(kept, combined):
            out[index] = links
        return out

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

        def read(batch: np.ndarray, pending: Any) -> None:
            nonlocal asked, reported
            found[batch], starts[batch], ends[batch], scores[batch] = self._read_batch(pending)
            asked += len(batch)
            if progress is not None and (done := asked * n_pairs // max(1, len(order))) > reported:
                progress(done - reported)
                reported = done

        # While the device runs batch k, the host reads back k-1 (its own copy and event: waiting on
        # it does not wait for k) and a worker thread assembles k+1 (`prefetch`).
        queued = None  # the batch on the device whose answers are not read yet
        for batch, arrays in _ahead(prepare, self._batches(order, length), self.prefetch):
            pending = self._decode_batch(arrays)
            if queued is not None:
                read(*queued)
            queued = (batch, pending)
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

    def padding_fraction(self, pairs: np.ndarray, tok: TokenizedSentences, sort: bool = True) -> float:
        """Share of the padded tokens of every forward batch that are padding, for `pairs`' questions
        (both directions) batched as `directional_links` does (`sort=False`: in question order)."""
        counts = np.concatenate([tok.n_words[pairs[:, 0]], tok.n_words[pairs[:, 1]]])
        length = np.repeat(np.concatenate([self.sequence_lengths(tok, pairs)] * 2), counts)
        order = np.argsort(length, kind="stable") if sort else np.arange(len(length))
        padded = sum(len(b) * int(length[b].max()) for b in self._batches(order, length, sort=sort))
        return 1.0 - float(length.sum()) / padded if padded else 0.0

    def _batches(self, order: np.ndarray, length: np.ndarray, sort: bool = True) -> list[np.ndarray]:
        """Cut length-sorted rows into batches of at most batch_tokens padded tokens."""
        budget = self.settings.batch_tokens
        batches, start = [], 0
        while start < len(order):
            rest = length[order[start : start + budget]]  # a row holds at least one token
            # sorted ascending, a batch's width is its last row's length; in any other order its longest row's
            width = rest if sort else np.maximum.accumulate(rest)
            fit = np.nonzero(width * np.arange(1, len(rest) + 1) <= budget)[0]
            stop = start + (int(fit[-1]) + 1 if len(fit) else 1)
            batches.append(order[start:stop])
            start = stop
        return batches

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
        `pin`: the model's inputs also as torch tensors in pinned memory (`tensors`), for a GPU.

        A row is ten runs of consecutive tokens of one pool (the sentences' tokens, then the special
        tokens, the marker and a run of padding): prefix, A[:s], marker, A[s:e], marker, A[e:],
        middle, B, suffix, padding. All rows' token positions come from one `np.repeat` of the
        runs' starts and lengths: no per-row or per-question Python work."""
        t = self.template
        m, n_prefix, n_middle, n_suffix = len(self.marker), len(t.prefix), len(t.middle), len(t.suffix)
        rows = len(q_sent)
        a_off, a_len = tok.offset[q_sent], tok.length[q_sent]
        b_off, b_len = tok.offset[c_sent], tok.length[c_sent]
        c_start = n_prefix + a_len + 2 * m + n_middle
        total = c_start + b_len + n_suffix
        width = int(total.max()) if rows else 0
        base = len(tok.ids)
        p_prefix, p_middle, p_suffix = base, base + n_prefix, base + n_prefix + n_middle
        p_marker = base + t.n_special
        p_pad = p_marker + m
        pool = np.concatenate([tok.ids, t.prefix, t.middle, t.suffix, self.marker, np.full(width, self.pad_id)]).astype(np.int64)
        one = np.ones(rows, dtype=np.int64)
        starts = np.stack(
            [p_prefix * one, a_off, p_marker * one, a_off + first, p_marker * one, a_off + end, p_middle * one, b_off,
             p_suffix * one, p_pad * one],
            axis=1,
        )  # fmt: skip
        lengths = np.stack(
            [n_prefix * one, first, m * one, end - first, m * one, a_len - end, n_middle * one, b_len, n_suffix * one,
             width - total],
            axis=1,
        )  # fmt: skip
        flat = lengths.ravel()
        run_first = np.cumsum(flat) - flat  # position of each run in the flat [rows * width] batch
        index = (np.repeat(starts.ravel() - run_first, flat) + np.arange(rows * width)).reshape(rows, width)
        pos = np.arange(width)[None, :]
        in_context = (pos >= c_start[:, None]) & (pos < (c_start + b_len)[:, None])
        batch = {
            "input_ids": pool[index],
            "attention_mask": (pos < total[:, None]).astype(np.int64),
            "context": in_context,
            "context_start": c_start,
            "context_length": b_len,
        }
        if self.token_types:
            pool_types = np.concatenate(
                [
                    np.zeros(base, dtype=np.int64),
                    t.prefix_types,
                    t.middle_types,
                    t.suffix_types,
                    np.zeros(m + width, dtype=np.int64),
                ]
            )
            # the runs of the question (A and its markers) and the context take their segment's type
            kind = np.array([-1, t.question_type, t.question_type, t.question_type, t.question_type, t.question_type, -1,
                             t.context_type, -1, -1])  # fmt: skip
            override = np.repeat(np.broadcast_to(kind, (rows, 10)).ravel(), flat).reshape(rows, width)
            batch["token_type_ids"] = np.where(override >= 0, override, pool_types[index])
        if pin:
            import torch

            batch["tensors"] = {k: torch.from_numpy(batch[k]).pin_memory() for k in (*MODEL_INPUTS, "context") if k in batch}
        return batch

    def _decode_batch(self, batch: dict[str, Any]) -> Any:
        """Queue a batch of assembled questions: the model, then span decoding on the device, then one
        copy of (span found, start, end token within the context, score) per row to the host (on a
        GPU without waiting: `_read_batch` waits for this batch's copy only)."""
        import torch

        cuda = self.device.type == "cuda"
        timeline = self.gpu_timeline if cuda else None
        if timeline is not None:
            began = torch.cuda.Event(enable_timing=True)
            began.record()
        if "tensors" in batch:  # pinned: the copies do not make the host wait for the GPU
            tensors = {k: v.to(self.device, non_blocking=True) for k, v in batch["tensors"].items()}
        else:
            tensors = {k: torch.from_numpy(batch[k]).to(self.device) for k in (*MODEL_INPUTS, "context") if k in batch}
        inputs = {k: tensors[k] for k in MODEL_INPUTS if k in tensors}
        with torch.inference_mode(), compute_precision(self.device.type, self.settings.precision):
            output = self.model(**inputs)
        # On a CPU the decoding's small memory-bound ops gain nothing from intra-op threads, and when
        # another process holds the cores each op's thread barrier costs more than the op (measured:
        # the host path 0.07 ms/question on one thread, ~1 ms on two beside a training job)
        with torch.inference_mode(), _one_thread(not cuda):
            packed = self._decode_spans(output.start_logits, output.end_logits, inputs["input_ids"], tensors["context"], batch)
            if cuda:
                host = torch.empty(packed.shape, dtype=packed.dtype, pin_memory=True)
                host.copy_(packed, non_blocking=True)
                done = torch.cuda.Event(enable_timing=timeline is not None)
                done.record()
                if timeline is not None:
                    timeline.append((began, done, int(packed.shape[1])))
                return host, done
        return packed, None

    def _decode_spans(self, start_logits: Any, end_logits: Any, ids: Any, context: Any, batch: dict[str, Any]) -> Any:
        """The pipeline's span decoding for every row of a batch at once, as a float32 [4, rows] tensor
        (found 0/1, start and end token within the context, score; token positions < 2^24 are exact)."""
        import torch

        allowed = context | (ids == self.cls_id) if self.cls_id is not None else context
        start_p = _masked_softmax(start_logits.float(), allowed)
        end_p = _masked_softmax(end_logits.float(), allowed)
        null = start_p[:, 0] * end_p[:, 0]
        # Spans are scored only inside each row's context: everywhere else (CLS set aside as the
        # null answer) P(start) and P(end) are exactly 0, so the first maximal positive product,
        # its value and its position are those of the whole [rows, length, width] band.
        w = self.settings.max_answer_tokens
        c_len_np = batch["context_length"]
        span = max(1, int(c_len_np.max()))
        c_start = torch.from_numpy(batch["context_start"]).to(ids.device, non_blocking=True)
        c_len = torch.from_numpy(c_len_np).to(ids.device, non_blocking=True)
        offsets = torch.arange(span, device=ids.device)
        inside = offsets[None, :] < c_len[:, None]
        at = (c_start[:, None] + offsets[None, :]).clamp_(max=ids.shape[1] - 1)
        start_c = torch.where(inside, start_p.gather(1, at), 0.0)
        end_c = torch.where(inside, end_p.gather(1, at), 0.0)
        band = start_c[:, :, None] * torch.nn.functional.pad(end_c, (0, w - 1)).unfold(1, w, 1)  # [rows, start, width]
        best, flat = band.flatten(1).max(dim=1)
        # torch.max returns the first maximal index on ties, as numpy's argmax does
        start = flat // w
        found = (best > 0) & (best >= null)
        return torch.stack([found.float(), start.float(), (start + flat % w).float(), best])

    @staticmethod
    def _read_batch(pending: Any) -> tuple[np.ndarray, ...]:
        """(span found, start token, end token within the context, score) per row, on the host."""
        packed, done = pending
        if done is not None:
            done.synchronize()
        rows = packed.numpy()
        return rows[0] > 0, rows[1].astype(np.int64), rows[2].astype(np.int64), rows[3].copy()

    # ------------------------------------------------------------------ reference

    def align_reference(self, src_words: list[str], tgt_words: list[str]) -> Links:
        """One pair, one question per forward pass, decoded as the question-answering pipeline does
        (tasks/align/backends/wspalign_reference.py)."""
        return reference_alignment(self, src_words, tgt_words)


@contextmanager
def _one_thread(enabled: bool) -> Iterator[None]:
    """torch's intra-op thread count set to 1 inside, then restored. With torch's OpenMP backend the
    count is the calling thread's own (other threads, e.g. other shards' aligners, keep theirs);
    only speed depends on it, never the results."""
    import torch

    threads = torch.get_num_threads()
    if not enabled or threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _masked_softmax(logits: Any, allowed: Any) -> Any:
    import torch

    masked = torch.where(allowed, logits, MASKED)
    exp = torch.exp(masked - masked.max(dim=1, keepdim=True).values)
    return exp / exp.sum(dim=1, keepdim=True)


def _ahead(prepare: Callable[[np.ndarray], Any], batches: Iterable[np.ndarray], prefetch: bool) -> Iterator[Any]:
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
