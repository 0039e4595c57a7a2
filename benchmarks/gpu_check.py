"""`make gpu-check`: on one CUDA GPU, the tests that must hold there and the GPU benchmarks, in
one summary table, within about 8 minutes.

    python benchmarks/gpu_check.py          # a CUDA machine; says so in one line and exits 2 on others
    python benchmarks/gpu_check.py --cpu    # the same steps at tiny sizes on the CPU (its test runs this)

1. pytest on CUDA: GradCache = plain gradient, exact resume, DDP gradient, batched WSPAlign =
   the one-question reference, Encoder = sentence-transformers, precision (fp32 default).
2. Train, TR at XLM-R base's shape (random weights), max length 32, synthetic rows, bf16:
   batch 1024 plain and GradCache (chunk 256); beside them sentence-transformers'
   MultipleNegativesRankingLoss / CachedMultipleNegativesRankingLoss (mini batch 256) on the
   same model, rows, batch and max length when sentence-transformers is importable.
3. WSPAlign at XLM-R base's shape (QA head) on 256 English-X FLORES pairs (real lengths;
   synthetic where ../shared/data is absent): questions/s, MFU and the padding fraction of its
   batches in fp32 (the default) and bf16; in fp32 the next batch assembled by a worker thread
   (the GPU default) and in turn (as before); how many of 64 pairs' links equal the
   one-question reference (fp32); the share of the align() call in which the GPU ran no batch
   ("GPU waits": tokenisation, the first assembly, and every gap while it waited for the host),
   and of its span from first to last batch that it sat idle between batches (CUDA events
   recorded around each batch, `WspAligner.gpu_timeline`).

Train rows also give the host-device synchronisations of one step (torch's sync debug mode),
and after the table the examples/s ratios xlembed / sentence-transformers (plain / MNRL,
GradCache / CachedMNRL; the issue asks for at least 1.3x).

Examples/s and tokens/s count the rows and the real (unpadded) tokens of a step; MFU is
model FLOPs / s (6 x non-embedding parameters x tokens for a training step, 2 x for a forward)
over `--peak-tflops` (H100 SXM dense bf16: 989). Peak memory: torch.cuda.max_memory_allocated.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GPU_TESTS = [
    "tests/tasks/train/test_trainer.py::test_grad_cache_gives_the_plain_step_gradient_at_dropout_zero",
    "tests/tasks/train/test_trainer.py::test_stopped_run_resumes_to_identical_weights",
    "tests/tasks/train/test_trainer.py::test_two_gloo_processes_match_one_process",
    "tests/tasks/train/test_distributed.py",
    "tests/tasks/align/test_wspalign.py",
    "tests/tasks/encoders/test_encoder.py",
    "tests/tasks/test_precision.py",
]
CPU_TESTS = ["tests/tasks/test_precision.py"]  # the smoke checks the mechanics; CI runs the rest anyway


def run_tests(paths: list[str], device_note: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *paths],
                              cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)  # fmt: skip
        seconds = time.perf_counter() - started
        tests = failures = skipped = 0
        for suite in ET.parse(report).getroot().iter("testsuite") if report.exists() else []:
            tests += int(suite.get("tests", 0))
            failures += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skipped += int(suite.get("skipped", 0))
    if done.returncode not in (0, 1) or failures:
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
    return {"what": f"pytest on {device_note}: {len(paths)} selections", "passed": tests - failures - skipped, "failed": failures,
            "skipped": skipped, "seconds": seconds, "ok": done.returncode == 0}  # fmt: skip


# ------------------------------------------------------------------------------- train


def train_inputs(n_groups: int, base: Path):
    import pyarrow as pa

    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.corpus.schema import CORPUS_SCHEMA
    from tasks.tiny_models import multiway_rows
    from tasks.train.trainer import TrainInputs

    corpus, align = multiway_rows(n_groups, dev_every=10**9)
    return TrainInputs(
        pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), base
    )


def _sync(device) -> None:  # noqa: ANN001
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _reset_peak(device) -> None:  # noqa: ANN001
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _peak(device) -> float | None:  # noqa: ANN001
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None


def count_syncs(device, fn) -> int | None:  # noqa: ANN001
    """How many times `fn` made the host wait for the GPU (torch's sync debug mode: `.item()`,
    boolean-mask indexing, blocking copies, ...); None off CUDA."""
    import warnings

    import torch

    if device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def bench_xlembed(inputs, batch: int, chunk: int | None, args) -> tuple[dict, list[list[str]]]:  # noqa: ANN001
    """One TR step timed `args.repeat` times after a warm-up; also the step's rows as text pairs."""
    from tasks.train.config import TrainConfig
    from tasks.train.trainer import Trainer

    cfg = TrainConfig.model_validate({"steps": 1, "batch_size": batch, "max_length": args.max_length, "eval_every": 0, "dropout": 0.0,
                                      "precision": args.precision, "grad_cache_chunk": chunk, "device": args.device,
                                      "objectives": {"translation_ranking": {"weight": 1.0}}})  # fmt: skip
    trainer = Trainer(cfg, inputs)
    _reset_peak(trainer.device)
    trainer.train_step(0)
    syncs = count_syncs(trainer.device, partial(trainer.train_step, 0))
    # steps back to back, the losses read once after them, as Trainer.run does between log lines
    _sync(trainer.device)
    t0 = time.perf_counter()
    trainer.read_values([(1 + k, trainer.train_step(0)) for k in range(args.repeat)])
    _sync(trainer.device)
    times = [(time.perf_counter() - t0) / args.repeat]
    step = trainer.plan.batch(0)
    ids = step.text_ids[step.text_ids >= 0]
    tokens = int(trainer.data.lengths[ids].sum())
    both = step.text_ids[(step.text_ids[:, :2] >= 0).all(axis=1), :2]
    texts = trainer.data.texts.take(both.reshape(-1)).to_pylist()
    texts = [texts[i : i + 2] for i in range(0, len(texts), 2)]
    non_embedding = sum(p.numel() for n, p in trainer.model.named_parameters() if "embed" not in n)
    seconds = float(np.median(times))
    name = f"xlembed TR, batch {batch}" + (f", GradCache chunk {chunk}" if chunk else ", plain")
    row = {"what": name, "examples/s": batch / seconds, "tokens/s": tokens / seconds,
           "MFU": 6 * non_embedding * tokens / seconds / (args.peak_tflops * 1e12), "peak GiB": _peak(trainer.device), "syncs/step": syncs,
           "versus": "cached" if chunk else "plain"}  # fmt: skip
    del trainer
    return row, texts


def bench_sentence_transformers(model_dir: Path, texts: list[list[str]], cached: bool, args) -> dict:  # noqa: ANN001
    """sentence-transformers training the same model on the same (anchor, positive) rows: its
    losses' forward, backward and AdamW step, as its trainer runs them, without the data loader."""
    import torch
    from sentence_transformers import SentenceTransformer, losses, models

    device = torch.device(args.device)
    transformer = models.Transformer(str(model_dir), max_seq_length=args.max_length)
    model = SentenceTransformer(
        modules=[transformer, models.Pooling(transformer.get_word_embedding_dimension(), "cls")], device=str(device)
    )
    loss = (
        losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=args.chunk)
        if cached
        else losses.MultipleNegativesRankingLoss(model)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=device.type == "cuda")
    anchors, positives = [a for a, _ in texts], [p for _, p in texts]
    use_bf16 = args.precision == "bf16" and device.type == "cuda"
    prepare = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 6 renamed it

    def step() -> None:
        features = [
            {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in prepare(side).items()}
            for side in (anchors, positives)
        ]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
            value = loss(features, None)
        value.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    _reset_peak(device)
    step()
    times = []
    for _ in range(args.repeat):
        _sync(device)
        t0 = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - t0)
    seconds = float(np.median(times))
    name = "sentence-transformers " + (
        f"CachedMNRL, batch {len(texts)}, mini batch {args.chunk}" if cached else f"MNRL, batch {len(texts)}"
    )
    return {
        "what": name,
        "examples/s": len(texts) / seconds,
        "peak GiB": _peak(device),
        "versus": "cached" if cached else "plain",
        "baseline": True,
    }


# ------------------------------------------------------------------------------- align


def gpu_waits(timeline: list, seconds: float) -> dict[str, float]:
    """From each batch's CUDA events (recorded in stream order: began, its work, done): the share of
    the GPU's span from the first batch to the last that it sat idle between batches (waiting for the
    host to queue the next one), and the share of the whole align() call (tokenisation included)
    that it was not running a batch. Idle time inside a batch (kernel launches slower than the
    kernels) is counted as busy."""
    first = timeline[0][0]
    began = [first.elapsed_time(b) / 1e3 for b, _, _ in timeline]
    done = [first.elapsed_time(d) / 1e3 for _, d, _ in timeline]
    span = done[-1]
    busy = sum(d - b for b, d in zip(began, done))
    return {
        "GPU idle between batches": max(0.0, 1.0 - busy / span) if span > 0 else 0.0,
        "GPU waits (of the call)": max(0.0, 1.0 - busy / seconds),
        "batches": float(len(timeline)),
    }


def bench_wspalign(model_dir: Path, n_pairs: int, reference_pairs: int, args) -> list[dict]:  # noqa: ANN001
    from benchmarks.align_throughput import load_pairs
    from tasks.align.backends.wspalign import WspAligner, WspalignSettings

    sentences, pairs, _ = load_pairs(4 * n_pairs)  # those too long for max_seq_length are left out
    source = "FLORES" if _flores_present() else "synthetic"
    rows = []
    for precision, prefetch in (("fp32", True), ("fp32", False), ("bf16", None)):
        aligner = WspAligner.load(WspalignSettings(source="local", model=str(model_dir), device=args.device, precision=precision))
        if prefetch is not None:
            aligner.prefetch = prefetch
        tok = aligner.tokenize(sentences)
        kept = pairs[aligner.sequence_lengths(tok, pairs) <= aligner.settings.max_seq_length][:n_pairs]
        # every question of a pair holds both sentences, the markers and the special tokens
        words = np.array([len(sentences[a]) + len(sentences[b]) for a, b in kept])
        tokens = int((aligner.sequence_lengths(tok, kept) * words).sum())
        questions = int(words.sum())
        aligner.align(sentences, [], kept[:2])  # warm-up
        _reset_peak(aligner.device)
        _sync(aligner.device)
        aligner.gpu_timeline = [] if aligner.device.type == "cuda" else None
        t0 = time.perf_counter()
        links = aligner.align(sentences, [], kept)
        _sync(aligner.device)
        seconds = time.perf_counter() - t0
        timeline, aligner.gpu_timeline = aligner.gpu_timeline, None
        non_embedding = sum(p.numel() for n, p in aligner.model.named_parameters() if "embed" not in n)
        assembly = "worker thread" if aligner.prefetch else "in turn"
        row = {"what": f"WSPAlign batched, {precision}, {len(kept)} {source} pairs, batches assembled {assembly}", "questions/s": questions / seconds,
               "tokens/s": tokens / seconds, "MFU": 2 * non_embedding * tokens / seconds / (args.peak_tflops * 1e12),
               "padding": aligner.padding_fraction(kept, tok), "peak GiB": _peak(aligner.device)}  # fmt: skip
        if timeline:
            row.update(gpu_waits(timeline, seconds))
        if precision == "fp32" and prefetch:
            same = 0
            for (a, b), got in list(zip(kept, links))[:reference_pairs]:
                want = aligner.align_reference(sentences[a], sentences[b])
                same += got is not None and all(np.array_equal(x, y) for x, y in zip(got[:2], want[:2]))
            row["identical links"] = f"{same}/{min(reference_pairs, len(kept))}"
        rows.append(row)
        del aligner
    return rows


def _flores_present() -> bool:
    from benchmarks.align_throughput import FLORES

    return FLORES.is_dir()


# ------------------------------------------------------------------------------- main


COLUMNS = (
    "examples/s",
    "tokens/s",
    "MFU",
    "questions/s",
    "GPU waits (of the call)",
    "GPU idle between batches",
    "padding",
    "identical links",
    "syncs/step",
    "peak GiB",
)
PERCENT = ("MFU", "padding", "GPU waits (of the call)", "GPU idle between batches")


def table(rows: list[dict], tests: dict, device: str) -> str:
    def cell(value) -> str:  # noqa: ANN001
        if value is None:
            return ""
        return f"{value:,.1f}" if isinstance(value, float) else str(value)

    lines = [f"gpu-check on {device}", "", "| what | " + " | ".join(COLUMNS) + " |", "| --- |" + " ---: |" * len(COLUMNS)]
    for row in rows:
        values = [f"{row[c]:.1%}" if c in PERCENT and c in row else cell(row.get(c)) for c in COLUMNS]
        lines.append(f"| {row['what']} | " + " | ".join(values) + " |")
    lines.append("")
    lines.append(
        f"{tests['what']}: {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped ({tests['seconds']:.0f} s)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="tiny sizes on the CPU: checks the script itself")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the GPU (H100 SXM: 989)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-tests", action="store_true")
    args = parser.parse_args(argv)

    import torch

    if not args.cpu and not torch.cuda.is_available():
        print(
            f"gpu-check: no CUDA device visible to torch {torch.__version__}; run it on a GPU machine (or --cpu for the small CPU smoke)"
        )
        return 2
    args.device = "cpu" if args.cpu else "cuda"
    device_name = "CPU (smoke, tiny sizes)" if args.cpu else torch.cuda.get_device_name(0)
    started = time.perf_counter()
    tests = {"what": "pytest skipped", "passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0, "ok": True}
    if not args.skip_tests:
        tests = run_tests(CPU_TESTS if args.cpu else GPU_TESTS, device_name)

    from benchmarks.shapes import build_xlmr_shape
    from benchmarks.train_step import scratch_dir

    scratch = scratch_dir("xlembed-gpu-check-")
    if args.cpu:
        from tasks.tiny_models import build_tiny_model, tiny_wspalign_dir

        args.max_length, args.precision, args.chunk = 16, "fp32", 4
        encoder_dir, qa_dir = build_tiny_model(scratch / "encoder"), tiny_wspalign_dir(0)
        batch, n_groups, n_pairs, reference_pairs = 16, 40, 6, 6
    else:
        args.max_length, args.precision, args.chunk = 32, "bf16", 256
        encoder_dir = build_xlmr_shape(scratch / "encoder", head="encoder")
        qa_dir = build_xlmr_shape(scratch / "qa", head="qa")
        batch, n_groups, n_pairs, reference_pairs = 1024, 1100, 256, 64

    rows = []
    inputs = train_inputs(n_groups, encoder_dir)
    plain, texts = bench_xlembed(inputs, batch, None, args)
    cached, _ = bench_xlembed(inputs, batch, args.chunk, args)
    rows += [plain, cached]
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        rows.append({"what": "sentence-transformers not importable: no comparison"})
    else:
        for use_cache in (False, True):
            rows.append(bench_sentence_transformers(encoder_dir, texts, use_cache, args))
    rows += bench_wspalign(qa_dir, n_pairs, reference_pairs, args)
    print(table(rows, tests, device_name))
    for kind in ("plain", "cached"):
        ours = [r for r in rows if r.get("versus") == kind and not r.get("baseline")]
        theirs = [r for r in rows if r.get("versus") == kind and r.get("baseline")]
        if ours and theirs:
            print(f"{ours[0]['what']} / {theirs[0]['what']}: {ours[0]['examples/s'] / theirs[0]['examples/s']:.2f}x examples/s")
    print(
        f"\ntotal {time.perf_counter() - started:.0f} s; precision of the train rows: {args.precision}; max length {args.max_length}"
    )
    return 0 if tests["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
