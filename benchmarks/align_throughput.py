"""Word-alignment throughput: batched WSPAlign vs one question at a time, and every backend.

    python benchmarks/align_throughput.py [--pairs 24] [--hidden 32 --layers 2] [--encoder DIR]
    python benchmarks/align_throughput.py --shape real [--pairs 6]   # XLM-R base's shape

WSPAlign: a seeded random XLM-R question-answering model (no hub weights here; `--hidden
768 --layers 12` gives XLM-R base's shape) on English-X pairs of FLORES-200 dev (or
synthetic sentences when ../shared/data is absent). The reference is the procedure the
authors run (transformers question-answering pipeline semantics): one question per
forward pass, string questions, numpy decoding. Both must give identical links; the
script fails otherwise, at either shape. It also prints the tie margin of the questions
(relative gap between the best and second-best answer, from the reference's logits in
float64: a margin near 0 means float rounding picks the answer, so identical links are
not to be expected there), the largest difference between a batched row's logits and the
single sequence's, and how many reference questions the batch did not ask token for token
(0, or the batching assembles other inputs). SimAlign runs on `--encoder` (default: the tiny
test encoder built here), eflomal on more pairs (it needs statistics). Pairs/s of each
backend and the batched/reference ratio are printed, all measured in this run.

Then the batched path's own costs, in the same run on the same pairs: the padding fraction of
its forward batches (questions sorted by length, as it runs them, vs in question order at the
same `batch_tokens`), questions/s with the next batch assembled by a worker thread (new, the
default on a GPU) vs in turn on the calling thread (before, still the default on a CPU), in
alternating rounds, and the sentences' tokenisation
with tokens mapped to words in one search (now) vs sentence by sentence (before).

The host path alone (issue 37): the model replaced by `fixed_logits_qa` (logits of the right
shape from seeded tables, one gather), the current path against the one before it
(benchmarks/align_legacy.py), at 1 torch thread ("one core") and at the default count, ms per
question and questions/s, medians of alternating rounds, and whether both give the same links
(the script fails otherwise); then, with the real model, each run's time split into the forward
(hooks around it) and the rest, and batched / reference for both. `--profile` prints a cProfile
of the current host path (fixed logits, 1 thread). `--wspalign-only` skips SimAlign and eflomal.

--shape real: WSPAlign at XLM-R base's shape (benchmarks/shapes.py: hidden 768, 12 layers,
12 heads, FFN 3072, vocabulary 250,002, QA head; random weights with XLM-R's initialiser,
the tiny tokenizer; `--wspalign-model DIR` reuses one built before), on fewer and shorter
pairs (default 6 pairs of the synthetic 3-12-word sentences of tasks/tiny_models.py,
`--source flores` for FLORES' ~25-word ones: each word is a forward pass of an
86M-parameter encoder, twice per run); the peak RSS of each WSPAlign run is printed.
SimAlign (itermax) and eflomal run on the same pairs: SimAlign on the same random XLM-R
base at layer 8 (SimAlign's layer for XLM-R: the encoder cut after 8 layers, whose last
state is the full model's hidden_states[8]), eflomal training included, which on 6 pairs
is nearly all its time (its pairs/s grows with the pairs it is given).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tasks.align.words import split_words  # noqa: E402

FLORES = ROOT.parent / "shared" / "data" / "flores200-dev"
LANGS = ("fra_Latn", "kaz_Cyrl", "hin_Deva", "zho_Hans")


def load_pairs(n: int, offset: int = 0, synthetic: bool = False) -> tuple[list[list[str]], np.ndarray, list[str]]:
    sentences, langs, pairs = [], [], []
    if FLORES.is_dir() and not synthetic:
        rows = {code: (FLORES / f"{code}.dev").read_text(encoding="utf-8").splitlines() for code in ("eng_Latn", *LANGS)}
    else:
        from tasks.tiny_models import QA_WORDS, synthetic_sentences

        rows = {
            code: synthetic_sentences(offset + n, seed=k, words_by_lang=QA_WORDS) for k, code in enumerate(("eng_Latn", *LANGS))
        }
    for k in range(n):
        row, lang = offset + k // len(LANGS), LANGS[k % len(LANGS)]
        pairs.append((len(sentences), len(sentences) + 1))
        sentences += [split_words(rows["eng_Latn"][row], "eng_Latn"), split_words(rows[lang][row], lang)]
        langs += ["eng_Latn", lang]
    return sentences, np.array(pairs), langs


def tokenize_sentence_by_sentence(aligner, sentences: list[list[str]]):  # noqa: ANN001
    """The tokenisation's word map as it was computed before: a Python loop over the sentences."""
    from tasks.align.backends.base import word_of_tokens

    enc = aligner.tokenizer(
        [" ".join(w) for w in sentences], add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False
    )
    out = []
    for words, offsets in zip(sentences, enc["offset_mapping"]):
        starts = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[:, 0]
        token_word = word_of_tokens(np.fromiter(map(len, words), dtype=np.int64, count=len(words)), starts)
        out.append(
            (
                token_word,
                np.searchsorted(token_word, np.arange(len(words))),
                np.searchsorted(token_word, np.arange(len(words)), side="right"),
            )
        )
    return out


def batched_costs(aligner, sentences, langs, pairs, rounds: int = 3) -> dict:  # noqa: ANN001
    """Padding fraction (sorted vs question order), questions/s with and without the assembling
    worker thread, tokenisation in one search vs sentence by sentence; one run, alternating rounds."""
    tok, default = aligner.tokenize(sentences), aligner.prefetch
    questions = int(sum(len(sentences[a]) + len(sentences[b]) for a, b in pairs))
    seconds: dict[bool, list[float]] = {True: [], False: []}
    tokenize: dict[str, list[float]] = {"search": [], "loop": []}
    for r in range(rounds):
        for prefetch in (True, False) if r % 2 == 0 else (False, True):  # the default on a CPU: False
            aligner.prefetch = prefetch
            seconds[prefetch].append(timed(lambda: aligner.align(sentences, langs, pairs))[1])
        tokenize["search"].append(timed(lambda: aligner.tokenize(sentences))[1])
        tokenize["loop"].append(timed(lambda: tokenize_sentence_by_sentence(aligner, sentences))[1])
    aligner.prefetch = default
    med = lambda v: float(np.median(v))  # noqa: E731
    return {
        "questions": questions,
        "padding_sorted": aligner.padding_fraction(pairs, tok),
        "padding_unsorted": aligner.padding_fraction(pairs, tok, sort=False),
        "qps_now": questions / med(seconds[True]),
        "qps_before": questions / med(seconds[False]),
        "tokenize_now": med(tokenize["search"]),
        "tokenize_before": med(tokenize["loop"]),
    }


def fixed_logits_qa(vocab_size: int, seed: int = 0):  # noqa: ANN201
    """Stand-in for the question-answering model, to time the host path alone: logits of the right
    shape from seeded tables indexed by token id and position (fixed, so spans and null answers
    both occur), at the cost of one gather."""
    import torch
    from transformers.modeling_outputs import QuestionAnsweringModelOutput

    class _FixedLogitsQA(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            g = torch.Generator().manual_seed(seed)
            self.register_buffer("by_token", 3.0 * torch.randn(vocab_size, 2, generator=g))
            self.register_buffer("by_position", torch.randn(4096, 2, generator=g))

        def forward(self, input_ids, attention_mask=None, token_type_ids=None):  # noqa: ANN001, ANN202
            logits = self.by_token[input_ids] + self.by_position[: input_ids.shape[1]]
            return QuestionAnsweringModelOutput(start_logits=logits[..., 0], end_logits=logits[..., 1])

    return _FixedLogitsQA()


class ForwardClock:
    """Seconds spent inside a model's forward calls (hooks around it; on a CPU the forward is synchronous)."""

    def __init__(self, model) -> None:  # noqa: ANN001
        self.model, self.seconds, self.handles, self._t = model, 0.0, [], 0.0

    def __enter__(self) -> ForwardClock:
        def before(*_):  # noqa: ANN002, ANN202
            self._t = time.perf_counter()

        def after(*_):  # noqa: ANN002, ANN202
            self.seconds += time.perf_counter() - self._t

        self.handles = [self.model.register_forward_pre_hook(before), self.model.register_forward_hook(after)]
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        for handle in self.handles:
            handle.remove()


def host_path(aligner, sentences, langs, pairs, threads: tuple[int, ...], rounds: int = 3) -> dict:  # noqa: ANN001
    """The current host path against the one before issue 37 (`benchmarks/align_legacy.py`), both with
    the model replaced by `fixed_logits_qa`: seconds per run at each torch thread count (median of
    alternating rounds), and whether both give the same links. Also the host share of a run with the
    real model (everything but the forward, timed around it), before and now."""
    import torch

    from benchmarks.align_legacy import LegacyWspAligner
    from tasks.align.backends.wspalign import WspAligner

    stub = fixed_logits_qa(len(aligner.tokenizer))
    paths = {
        "now": WspAligner(aligner.tokenizer, stub, aligner.settings),
        "before": LegacyWspAligner(aligner.tokenizer, stub, aligner.settings),
    }
    real = {
        "now": aligner,
        "before": LegacyWspAligner(aligner.tokenizer, aligner.model, aligner.settings),
    }
    default_threads = torch.get_num_threads()
    out: dict = {"stub": {}, "real": {}}
    links = {}
    try:
        for n in threads:
            torch.set_num_threads(n)
            seconds = {name: [] for name in paths}
            for name, path in paths.items():
                links[name] = path.align(sentences, langs, pairs)  # warm-up, and the links compared
            for r in range(rounds):
                for name in paths if r % 2 == 0 else reversed(paths):
                    seconds[name].append(timed(lambda p=paths[name]: p.align(sentences, langs, pairs))[1])
            out["stub"][n] = {name: float(np.median(v)) for name, v in seconds.items()}
        torch.set_num_threads(default_threads)
        for name, path in real.items():
            with ForwardClock(path.model) as clock:
                _, total = timed(lambda p=path: p.align(sentences, langs, pairs))
            out["real"][name] = {"total": total, "forward": clock.seconds}
    finally:
        torch.set_num_threads(default_threads)
    out["identical"] = all(
        (a is None and b is None) or (a is not None and b is not None and all(np.array_equal(x, y) for x, y in zip(a, b)))
        for a, b in zip(links["now"], links["before"])
    )
    return out


def profile_host_path(aligner, sentences, langs, pairs, top: int = 14) -> str:  # noqa: ANN001
    """cProfile of the current host path (stand-in model, one torch thread): the functions with the most own time."""
    import cProfile
    import io
    import pstats

    import torch

    from tasks.align.backends.wspalign import WspAligner

    path = WspAligner(aligner.tokenizer, fixed_logits_qa(len(aligner.tokenizer)), aligner.settings)
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        path.align(sentences, langs, pairs)
        profiler = cProfile.Profile()
        profiler.enable()
        path.align(sentences, langs, pairs)
        profiler.disable()
    finally:
        torch.set_num_threads(default_threads)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


class ForwardCapture:
    """Keeps every forward pass's (input ids, start logits, end logits) of a QA model, per row.

    A forward hook that only holds references (no copies while timed); `rows()` turns them
    into one (token ids, start logits, end logits) per question, padding cut off."""

    def __init__(self, model) -> None:  # noqa: ANN001
        self.model, self.calls, self.handle = model, [], None

    def __enter__(self) -> ForwardCapture:
        def hook(module, args, kwargs, output):  # noqa: ANN001, ANN202
            self.calls.append((kwargs["input_ids"], kwargs["attention_mask"], output.start_logits, output.end_logits))

        self.handle = self.model.register_forward_hook(hook, with_kwargs=True)
        return self

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        self.handle.remove()

    def rows(self) -> list[tuple[tuple[int, ...], np.ndarray, np.ndarray]]:
        out = []
        for ids, mask, start, end in self.calls:
            ids, n = ids.cpu().numpy(), mask.sum(dim=1).cpu().numpy()
            start, end = start.double().cpu().numpy(), end.double().cpu().numpy()
            out += [(tuple(ids[r, : n[r]].tolist()), start[r, : n[r]], end[r, : n[r]]) for r in range(len(ids))]
        return out


def context_region(ids: np.ndarray, template, cls_id: int | None) -> np.ndarray:  # noqa: ANN001
    """Positions a WSPAlign answer may take (`prefix Q middle C suffix`): the context, and CLS."""
    n_prefix, middle = len(template.prefix), list(template.middle)
    starts = [k for k in range(n_prefix, len(ids) - len(middle) + 1) if list(ids[k : k + len(middle)]) == middle]
    if not starts:
        raise ValueError("sequence does not hold the tokenizer's question/context separator")
    allowed = np.zeros(len(ids), dtype=bool)
    allowed[starts[0] + len(middle) : len(ids) - len(template.suffix)] = True
    if cls_id is not None:
        allowed |= ids == cls_id
    return allowed


def answer_margin(start_logits: np.ndarray, end_logits: np.ndarray, allowed: np.ndarray, max_answer_tokens: int) -> float:
    """Relative gap between the best and the second-best answer of one question (float64).

    The answers are the null answer, score P(start=0)·P(end=0), and every span of at most
    max_answer_tokens in `allowed`, score P(start)·P(end), as WSPAlign decodes them. 0 means a
    tie: which answer wins is then decided by float rounding, not by the model."""

    def softmax(logits: np.ndarray) -> np.ndarray:
        logits = np.where(allowed, logits, -10_000.0)
        exp = np.exp(logits - logits.max())
        return exp / exp.sum()

    start, end = softmax(start_logits), softmax(end_logits)
    null = start[0] * end[0]
    start[0] = end[0] = 0.0
    spans = np.tril(np.triu(np.outer(start, end)), max_answer_tokens - 1)
    scores = np.sort(np.concatenate([spans[spans > 0], [null]]))[::-1]
    return float((scores[0] - scores[1]) / scores[0]) if len(scores) > 1 and scores[0] > 0 else 1.0


def compare_forwards(batched: list, reference: list, aligner) -> dict:  # noqa: ANN001
    """Tie margins of the reference's questions, and how far the batched rows' logits are from them."""
    rows = {ids: (start, end) for ids, start, end in batched}
    margins, diffs, missing = [], [], 0
    for ids, start, end in reference:
        allowed = context_region(np.array(ids), aligner.template, aligner.cls_id)
        margins.append(answer_margin(start, end, allowed, aligner.settings.max_answer_tokens))
        if ids not in rows:
            missing += 1  # the batched code asked another question than the reference
            continue
        diffs.append(max(np.abs(rows[ids][0] - start).max(), np.abs(rows[ids][1] - end).max()))
    margins = np.array(margins)
    spreads = [np.ptp(start[context_region(np.array(ids), aligner.template, None)]) for ids, start, _ in reference]
    return {
        "questions": len(reference),
        "missing": missing,
        "margin_min": float(margins.min()) if len(margins) else 1.0,
        "margin_median": float(np.median(margins)) if len(margins) else 1.0,
        "logit_diff": float(max(diffs, default=0.0)),
        "logit_spread": float(np.median(spreads)) if spreads else 0.0,
    }


SIMALIGN_XLMR_LAYER = 8  # SimAlign's layer for XLM-R (its EmbeddingLoader: hidden_states[8])


def xlmr_layer_encoder(qa_dir: Path, out_dir: Path, layer: int) -> Path:
    """The encoder of the QA checkpoint `qa_dir` cut after `layer` layers: its last hidden state is the
    full model's hidden_states[layer], the vectors SimAlign takes (SimAlign runs every layer and
    discards the ones above; the cut model does only the work those vectors need)."""
    from transformers import AutoTokenizer, XLMRobertaModel

    from tasks.encoders.loading import quiet_transformers

    with quiet_transformers():
        model = XLMRobertaModel.from_pretrained(str(qa_dir), add_pooling_layer=False)
        if layer > model.config.num_hidden_layers:
            raise ValueError(f"{qa_dir}: {model.config.num_hidden_layers} layers, no layer {layer}")
        model.encoder.layer = model.encoder.layer[:layer]
        model.config.num_hidden_layers = layer
        model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(str(qa_dir)).save_pretrained(out_dir)
    del model
    return Path(out_dir)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=24, help="pairs for WSPAlign (batched and reference)")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--encoder", type=str, default=None, help="SimAlign encoder dir (default: a tiny random BERT)")
    parser.add_argument("--eflomal-pairs", type=int, default=400)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--source",
        default=None,
        choices=["flores", "synthetic"],
        help="WSPAlign's pairs (default: flores; real shape: synthetic)",
    )
    parser.add_argument(
        "--wspalign-model", type=str, default=None, help="real shape: a model build_xlmr_shape wrote (skips building)"
    )
    parser.add_argument(
        "--shape", default="tiny", choices=["tiny", "real"], help="real: XLM-R base's shape (ignores --hidden/--layers)"
    )
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the host path (fixed logits, 1 thread)")
    parser.add_argument("--wspalign-only", action="store_true", help="skip SimAlign and eflomal")
    args = parser.parse_args(argv)
    given = set(argv if argv is not None else sys.argv[1:])
    if args.shape == "real" and "--pairs" not in given:
        args.pairs = 6
    args.source = args.source or ("synthetic" if args.shape == "real" else "flores")

    import torch

    from tasks.align.backends.eflomal_backend import EflomalSettings
    from tasks.align.backends.simalign import SimalignSettings
    from tasks.align.backends.wspalign import WspAligner, WspalignSettings
    from tasks.tiny_models import build_tiny_wspalign

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="align-bench-"))
    if args.shape == "real":
        from benchmarks.shapes import XLMR_BASE, build_xlmr_shape

        model_dir = Path(args.wspalign_model) if args.wspalign_model else build_xlmr_shape(tmp / "wspalign", XLMR_BASE, head="qa")
        described = f"XLM-R base shape ({XLMR_BASE.hidden} x {XLMR_BASE.layers} layers, vocab {XLMR_BASE.vocab_size}, QA head)"
    else:
        model_dir = build_tiny_wspalign(tmp / "wspalign", hidden_size=args.hidden, layers=args.layers)
        described = f"{args.hidden}x{args.layers}"
    settings = WspalignSettings(source="local", model=str(model_dir), combine="union", threshold=0.0, device="cpu")
    aligner = WspAligner.load(settings)
    sentences, pairs, langs = load_pairs(args.pairs * 2, synthetic=args.source == "synthetic")
    fits = aligner.sequence_lengths(aligner.tokenize(sentences), pairs) <= settings.max_seq_length
    pairs = pairs[fits][: args.pairs]  # both sides see the same pairs, all within max_seq_length
    if not len(pairs):
        raise SystemExit(
            f"none of the first {2 * args.pairs} {args.source} pairs fits max_seq_length {settings.max_seq_length}: ask for more --pairs"
        )
    words = sum(len(sentences[a]) + len(sentences[b]) for a, b in pairs)
    print(f"device cpu, torch threads {torch.get_num_threads()}, WSPAlign random XLM-R {described}")
    print(f"{len(pairs)} English-X pairs ({', '.join(LANGS)}; {args.source}), {words} words = {words} questions per run")

    from benchmarks.shapes import peak_rss_bytes, peak_rss_reset

    aligner.align(sentences, langs, pairs[:2])  # warm-up
    peak_rss_reset()
    with ForwardCapture(aligner.model) as batched_forwards:
        batched, t_batched = timed(lambda: aligner.align(sentences, langs, pairs))
    peak_batched = peak_rss_bytes() / 2**30
    peak_rss_reset()
    with ForwardCapture(aligner.model) as reference_forwards:
        reference, t_reference = timed(lambda: [aligner.align_reference(sentences[a], sentences[b]) for a, b in pairs])
    peak_reference = peak_rss_bytes() / 2**30
    forwards = compare_forwards(batched_forwards.rows(), reference_forwards.rows(), aligner)
    same = [b is not None and np.array_equal(b[0], r[0]) and np.array_equal(b[1], r[1]) for b, r in zip(batched, reference)]
    identical = all(same)
    max_diff = max(
        (float(np.abs(b[2] - r[2]).max()) for b, r, ok in zip(batched, reference, same) if ok and len(b[2])), default=0.0
    )
    links = sum(len(b[0]) for b in batched if b is not None)
    print(
        f"wspalign batched    {len(pairs) / t_batched:9.2f} pairs/s  ({t_batched:.2f} s, {links} links, peak RSS {peak_batched:.2f} GiB)"
    )
    print(
        f"wspalign reference  {len(pairs) / t_reference:9.2f} pairs/s  ({t_reference:.2f} s, one question per forward, peak RSS {peak_reference:.2f} GiB)"
    )
    print(
        f"batched / reference: {t_reference / t_batched:.1f}x   identical links: {'yes' if identical else 'no'}   max |score diff| (identical pairs): {max_diff:.2e}"
    )
    print(
        f"tie margin (best vs second-best answer, relative, {forwards['questions']} questions): min {forwards['margin_min']:.2e},"
        f" median {forwards['margin_median']:.2e}; QA logits: spread over the context {forwards['logit_spread']:.2e} (median),"
        f" max |batched - single| {forwards['logit_diff']:.2e}; questions the batch did not ask token for token: {forwards['missing']}"
    )
    costs = batched_costs(aligner, sentences, langs, pairs)
    print(
        f"batched padding (batch_tokens {settings.batch_tokens}): {costs['padding_sorted']:.1%} sorted by length (now),"
        f" {costs['padding_unsorted']:.1%} in question order"
    )
    print(
        f"batched questions/s: {costs['qps_now']:.1f} next batch assembled by a worker thread (new; the default on a GPU), {costs['qps_before']:.1f} in turn (before; still the default on a CPU):"
        f" {costs['qps_now'] / costs['qps_before']:.2f}x; tokenisation {costs['tokenize_now'] * 1e3:.1f} ms one search (now),"
        f" {costs['tokenize_before'] * 1e3:.1f} ms sentence by sentence: {costs['tokenize_before'] / costs['tokenize_now']:.1f}x"
    )
    threads = tuple(sorted({1, torch.get_num_threads()}))
    host = host_path(aligner, sentences, langs, pairs, threads)
    q = costs["questions"]
    print(
        f"host path alone (model replaced by fixed logits), {q} questions; identical links now vs before: {'yes' if host['identical'] else 'NO'}"
    )
    for n in threads:
        now, before = host["stub"][n]["now"], host["stub"][n]["before"]
        print(
            f"  {n} torch thread{'s' if n > 1 else ' '}: now {now / q * 1e3:.3f} ms/question ({q / now:,.0f} questions/s),"
            f" before {before / q * 1e3:.3f} ms/question ({q / before:,.0f} questions/s): {before / now:.1f}x"
        )
    for name in ("now", "before"):
        run = host["real"][name]
        print(
            f"  with the model ({torch.get_num_threads()} threads), {name:6}: {run['total'] / q * 1e3:.3f} ms/question,"
            f" of which forward {run['forward'] / q * 1e3:.3f}, the rest {(run['total'] - run['forward']) / q * 1e3:.3f};"
            f" batched / reference {t_reference / run['total']:.1f}x"
        )
    if args.profile:
        print(profile_host_path(aligner, sentences, langs, pairs))
    one = host["stub"][1]
    host_row = (
        {
            "case": f"{q} questions, host path alone (fixed logits for the model), 1 torch thread, identical links: {'yes' if host['identical'] else 'NO'}",
            "measure": "questions/s",
            "stage": q / one["now"],
            "reference": q / one["before"],
            "reference_name": "host path before issue 37",
            "higher_is_better": True,
        },
    )
    for k, (b, r, ok) in enumerate(zip(batched, reference, same)):
        if ok:
            continue
        mine = {} if b is None else {(int(i), int(j)): float(v) for i, j, v in zip(*b)}
        theirs = {(int(i), int(j)): float(v) for i, j, v in zip(*r)}
        only_b = {key: mine[key] for key in mine.keys() - theirs.keys()}
        only_r = {key: theirs[key] for key in theirs.keys() - mine.keys()}
        print(
            f"  pair {k}: {len(mine)} vs {len(theirs)} links; only batched {sorted(only_b.items())[:6]}; only reference {sorted(only_r.items())[:6]}"
        )
    identical_text = "yes" if identical else f"NO, {len(same) - sum(same)} of {len(same)} pairs differ"
    rows = [
        {
            "case": f"{len(pairs)} {args.source} pairs, random XLM-R {described}, identical links: {identical_text}",
            "measure": "pairs/s",
            "stage": len(pairs) / t_batched,
            "reference": len(pairs) / t_reference,
            "reference_name": "one question per forward",
            "higher_is_better": True,
        },
        {
            "case": f"{costs['questions']} questions, random XLM-R {described}, padding {costs['padding_sorted']:.1%} (question order: {costs['padding_unsorted']:.1%})",
            "measure": "questions/s",
            "stage": costs["qps_now"],
            "reference": costs["qps_before"],
            "reference_name": "batches assembled in turn",
            "higher_is_better": True,
        },
    ]

    rows += host_row
    if args.wspalign_only:
        shutil.rmtree(tmp, ignore_errors=True)
        if not host["identical"]:
            raise SystemExit("the host path now and before (benchmarks/align_legacy.py) give different links")
        if not identical:
            raise SystemExit(f"batched and reference alignments differ ({identical_text})")
        return rows

    from tasks.align.backends.simalign import SimAligner

    if args.shape == "real":  # the same pairs as WSPAlign, the same random XLM-R base, its layer 8
        del aligner, batched_forwards, reference_forwards
        encoder_dir = args.encoder or str(xlmr_layer_encoder(model_dir, tmp / "encoder", SIMALIGN_XLMR_LAYER))
        sim_sentences, sim_pairs, sim_langs = sentences, pairs, langs
        sim_what = f"the {len(pairs)} WSPAlign pairs, " + (
            f"random XLM-R base at layer {SIMALIGN_XLMR_LAYER}" if args.encoder is None else f"encoder {encoder_dir}"
        )
    else:
        encoder_dir = args.encoder
        if encoder_dir is None:
            from tasks.tiny_models import build_tiny_model

            encoder_dir = str(build_tiny_model(tmp / "encoder"))
        sim_sentences, sim_pairs, sim_langs = load_pairs(max(args.pairs, 200))
        sim_what = f"{len(sim_pairs)} pairs, encoder {encoder_dir}"
    sim = SimAligner.load(SimalignSettings(model=encoder_dir, method="itermax", device="cpu"))
    sim.align(sim_sentences, sim_langs, sim_pairs[:2])  # warm-up
    _, t_sim = timed(lambda: sim.align(sim_sentences, sim_langs, sim_pairs))
    sim = None  # frees the model before the next one loads
    print(f"simalign itermax    {len(sim_pairs) / t_sim:9.2f} pairs/s  ({t_sim:.2f} s; {sim_what})")
    notes = [f"SimAlign itermax {len(sim_pairs) / t_sim:.2f} pairs/s"]

    try:
        from tasks.align.backends.eflomal_backend import EflomalAligner

        ef = EflomalAligner(EflomalSettings())
    except ImportError:
        print("eflomal             not installed")
    else:
        if args.shape == "real":  # the same pairs: eflomal's time is then mostly fitting its model on them
            ef_sentences, ef_pairs, ef_langs = sentences, pairs, langs
        else:
            ef_sentences, ef_pairs, ef_langs = load_pairs(args.eflomal_pairs)
        _, t_ef = timed(lambda: ef.align(ef_sentences, ef_langs, ef_pairs))
        n_lang_pairs = len({ef_langs[b] for _, b in ef_pairs})
        print(
            f"eflomal             {len(ef_pairs) / t_ef:9.2f} pairs/s  ({t_ef:.2f} s; {len(ef_pairs)} pairs in {n_lang_pairs} language pairs, training included)"
        )
        notes.append(f"eflomal {len(ef_pairs) / t_ef:.2f} pairs/s, training included")
    if args.shape == "real":
        rows[0]["note"] = "; ".join(notes) + ", same pairs"
    shutil.rmtree(tmp, ignore_errors=True)  # the real shape leaves ~2 GB of models there
    if not host["identical"]:
        raise SystemExit("the host path now and before (benchmarks/align_legacy.py) give different links")
    if not identical:
        raise SystemExit(
            f"batched and reference alignments differ ({identical_text}; smallest tie margin {forwards['margin_min']:.1e})"
        )
    return rows


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: batched WSPAlign vs one question per forward (the full run adds XLM-R base's shape)."""
    if quick:
        return main(["--pairs", "8", "--eflomal-pairs", "100"])
    return main([]) + main(["--shape", "real"])


if __name__ == "__main__":
    main()
