"""Train step at XLM-R base's shape: time per objective combination vs TR, memory of plain vs GradCache.

    python benchmarks/train_shapes.py [--shape real|tiny] [--batch 8] [--memory-rows 64,256] [--chunk 32]

The base is a random-weight XLM-R base (benchmarks/shapes.py: hidden 768, 12 layers, 12 heads,
FFN 3072, vocabulary 250,002, 278M parameters, all trained: the word embeddings are not frozen)
with the tiny offline tokenizer; rows are the synthetic multi-way rows of the train tests
(benchmarks/train_step.py's synthetic inputs), max length 32 (the WACSE shape). `--shape tiny`
runs the same protocol on the tiny random BERT in seconds.

1. Step time of each objective combination (benchmarks/train_step.py's COMBINATIONS) relative to
   TR alone, on the same batch of `--batch` rows: one warm-up step, then the median of `--repeat`.
   WACSE trains at batch 32; on a 2-core CPU one 32-row step at this shape takes minutes, so the
   default here is 8 (say which one a table used).
2. Memory: for each row count in `--memory-rows`, plain TR and TR with GradCache (`--chunk` rows
   per chunk): a warm-up step (it creates AdamW's state), then the process peak RSS is reset
   (Linux clear_refs) and one step is measured: the peak above the RSS before the step is what
   the step itself needs (activations, gradients), the RSS before it is the model, its
   gradients' buffers and the optimizer state. Plain rows beyond `--plain-max` are not run (they
   would not fit in this machine's memory next to other work); the table extrapolates them
   linearly from the two smallest plain measurements and says so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GIB = 2**30


def build_base(shape: str, directory: Path) -> Path:
    if shape == "real":
        from benchmarks.shapes import XLMR_BASE, build_xlmr_shape

        return build_xlmr_shape(directory, XLMR_BASE, head="encoder")
    from tests.tasks.encoders.conftest import build_tiny_model

    return build_tiny_model(directory)


def one_config(config, inputs, repeat: int) -> dict[str, float]:  # noqa: ANN001
    """Warm-up step, then `repeat` timed steps; the peak RSS above the RSS before the first timed step."""
    import gc

    from benchmarks.shapes import peak_rss_bytes, peak_rss_reset, rss_bytes
    from tasks.train.trainer import Trainer

    trainer = Trainer(config, inputs)
    trainer.train_step(0)  # warm-up: AdamW's state exists from here on
    gc.collect()
    before = rss_bytes()
    peak_rss_reset()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        trainer.train_step(0)
        times.append(time.perf_counter() - t0)
    peak = peak_rss_bytes()
    batch = trainer.plan.batch(0)
    tokens = int(trainer.data.lengths[batch.text_ids[batch.text_ids >= 0]].sum())
    n_params = sum(p.numel() for p in trainer.model.parameters())
    del trainer
    gc.collect()
    return {"seconds": float(np.median(times)), "before": before / GIB, "step": max(0, peak - before) / GIB, "tokens": tokens, "params": n_params}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="real", choices=["real", "tiny"])
    parser.add_argument("--batch", type=int, default=8, help="rows per step for the combination timings (WACSE: 32)")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--memory-rows", default="64,256", help="comma-separated rows per step for plain vs GradCache")
    parser.add_argument("--plain-max", type=int, default=64, help="largest plain batch actually run (larger: extrapolated)")
    parser.add_argument("--chunk", type=int, default=32, help="GradCache chunk rows")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--combinations", default="TR,TR+AWP,TR+WTR,TR+AWP+WTR,TR+RTL,SupCon+reg,DuEAM")
    args = parser.parse_args(argv)

    import pyarrow as pa
    import torch

    torch.set_num_threads(args.threads)
    from benchmarks.train_step import COMBINATIONS
    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.corpus.schema import CORPUS_SCHEMA
    from tasks.train.config import TrainConfig
    from tasks.train.trainer import TrainInputs
    from tests.tasks.train.conftest import multiway_rows

    memory_rows = [int(x) for x in args.memory_rows.split(",") if x]
    started = time.perf_counter()
    base = build_base(args.shape, Path(tempfile.mkdtemp(prefix="xlembed-train-shapes-")) / "base")
    corpus, align = multiway_rows(max([args.batch, *memory_rows]) + 50, dev_every=10**9)
    inputs = TrainInputs(pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), base)
    common = {"max_length": args.max_length, "eval_every": 0, "checkpoint_every": 10**6, "dropout": 0.1,
              "torch_threads": args.threads, "freeze_word_embeddings": False}  # fmt: skip
    label = "XLM-R base shape" if args.shape == "real" else "tiny BERT"
    print(f"base: random {label} ({base}), built in {time.perf_counter() - started:.1f} s; torch threads {torch.get_num_threads()}")
    rows: list[dict] = []

    print(f"\n# step time per objective combination ({label}, batch {args.batch} rows, max_length {args.max_length}, CPU)")
    print("| combination | s/step | x TR | tokens/step |")
    print("|---|---|---|---|")
    tr = None
    for name in [c for c in args.combinations.split(",") if c]:
        views = 3 if name.startswith("SupCon") else 2
        cfg = TrainConfig.model_validate({**common, "objectives": COMBINATIONS[name], "batch_size": args.batch, "views": views})
        result = one_config(cfg, inputs, args.repeat)
        tr = tr or result["seconds"]
        print(f"| {name} | {result['seconds']:.2f} | {result['seconds'] / tr:.2f} | {result['tokens']} |", flush=True)
        if name != "TR":
            rows.append({"case": f"{label}: {name}, batch {args.batch}", "measure": "s/step", "stage": result["seconds"], "reference": tr,
                         "reference_name": "TR alone", "higher_is_better": False})  # fmt: skip

    if not memory_rows:
        return rows
    print(f"\n# memory per step: plain TR vs GradCache (chunk {args.chunk}), {label}, max_length {args.max_length}")
    print("| rows | setting | s/step | RSS before step GiB | step peak above it GiB | tokens/step |")
    print("|---|---|---|---|---|---|")
    plain: dict[int, float] = {}
    for n in memory_rows:
        for setting in ("plain", "gradcache"):
            if setting == "plain" and n > args.plain_max:
                continue
            extra = {"grad_cache_chunk": args.chunk} if setting == "gradcache" else {}
            if setting == "gradcache" and args.chunk >= n:
                continue
            cfg = TrainConfig.model_validate({**common, "objectives": COMBINATIONS["TR"], "batch_size": n, **extra})
            result = one_config(cfg, inputs, 1)
            print(f"| {n} | {setting} | {result['seconds']:.1f} | {result['before']:.2f} | {result['step']:.2f} | {result['tokens']} |", flush=True)
            if setting == "plain":
                plain[n] = result["step"]
            else:
                reference = plain.get(n)
                name = f"plain TR, {n} rows"
                if reference is None and len(plain) >= 1:  # linear in rows through the measured plain points
                    xs = sorted(plain)
                    if len(xs) >= 2:
                        slope = (plain[xs[-1]] - plain[xs[0]]) / (xs[-1] - xs[0])
                        reference = plain[xs[-1]] + slope * (n - xs[-1])
                    else:
                        reference = plain[xs[0]] * n / xs[0]
                    name = f"plain TR, {n} rows, extrapolated linearly from {', '.join(map(str, xs))} rows"
                    print(f"| {n} | plain (extrapolated) | | | {reference:.2f} | |")
                if reference:
                    rows.append({"case": f"{label}: GradCache (chunk {args.chunk}) at {n} rows", "measure": "step peak RSS GiB", "stage": result["step"],
                                 "reference": reference, "reference_name": name, "higher_is_better": False})  # fmt: skip
    return rows


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: objective mixes vs TR and GradCache memory at XLM-R base's shape (--quick: tiny BERT)."""
    if quick:
        return main(["--shape", "tiny", "--batch", "16", "--memory-rows", "64,256", "--plain-max", "256", "--chunk", "16", "--repeat", "2"])
    return main([])


if __name__ == "__main__":
    main()
