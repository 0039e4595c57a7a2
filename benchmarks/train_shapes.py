"""Train step at XLM-R base's shape: time per objective combination vs TR, memory of plain vs GradCache.

    python benchmarks/train_shapes.py [--shape real|tiny] [--batch 32] [--memory-rows 64,256,1024] [--chunk 32]
                                      [--cap-gib 12] [--gradcache-cap-gib 11.5] [--settings plain,gradcache]
                                      [--base DIR] [--skip-timing] [--skip-memory]

GradCache alone at large batches, the cheapest honest run (one child per row count, one step each):

    python benchmarks/train_shapes.py --skip-timing --settings gradcache --memory-rows 1024 --gradcache-cap-gib 11.5 --base DIR

The base is a random-weight XLM-R base (benchmarks/shapes.py: hidden 768, 12 layers, 12 heads,
FFN 3072, vocabulary 250,002, 278M parameters, all trained: the word embeddings are not frozen)
with the tiny offline tokenizer; rows are the synthetic multi-way rows of the train tests
(benchmarks/train_step.py's synthetic inputs), max length 32 (the WACSE shape). `--shape tiny`
runs the same protocol on the tiny random BERT in seconds. `--base DIR` reuses a base built
by an earlier run (built there if DIR does not exist yet).

Every measurement runs in its own child process (`--threads` torch threads, niced, address
space capped at `--cap-gib` with RLIMIT_AS): a case that needs more memory fails in its child
with an allocation error and is reported as "did not fit under N GiB" instead of taking the
machine down, and one case's freed memory never flatters the next one's peak.

1. Step time of each objective combination (benchmarks/train_step.py's COMBINATIONS) relative to
   TR alone, on the same batch of `--batch` rows (WACSE: 32): one warm-up step, then the median
   of `--repeat` timed steps.
2. Memory: for each row count in `--memory-rows`, plain TR and TR with GradCache (`--chunk` rows
   per chunk). No warm-up step (at 1024 rows one step takes many minutes on CPU): AdamW's state
   is created by one optimizer step on zero gradients (no forward or backward), so the RSS
   before the measured step holds the model, AdamW's two moments and the process itself, as in
   steady state. Then the process peak RSS is reset (Linux clear_refs) and one step runs in
   two parts: the forward and backward passes, whose peak above the RSS before them is what
   the batch needs (the gradients, 4 bytes a parameter, and the activations), then AdamW's
   update, whose foreach temporaries (about two parameter-sized buffers on CPU, whatever the
   batch) can set the whole step's peak at small batches. A case that does not fit under the cap is reported as such, and the
   table extrapolates plain rows linearly in padded tokens from the two smallest plain
   measurements and says so. Each memory case also reports its peak address space (VmPeak,
   what RLIMIT_AS compares against: the RSS plus what the process maps without touching), so a
   table can say how close a case came to its cap. `--settings gradcache` runs GradCache alone
   (plain at 512 or 1024 rows cannot fit any cap this machine can hold, and at 1024 rows one
   GradCache step takes ~30 min on 2 loaded cores, so nothing else should run per case). The
   GradCache cases peak at ~10.7 GiB of address space at any batch (~8.1 GiB RSS + ~2.65 GiB
   mapped and never touched), so they need a cap above 10 GiB: 11.5 GiB. `fits_in_memory` then turns the per-token activation memory into
   the largest batch that fits a given memory (docs/benchmarks.md: 80 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GIB = 2**30
# what a child's stderr says when an allocation failed under RLIMIT_AS (Python, PyTorch's CPU
# allocator, NumPy, glibc/pthread, the dynamic loader mapping a library such as libtorch_cpu.so)
OUT_OF_MEMORY_MARKERS = ("MemoryError", "can't allocate memory", "Unable to allocate", "Cannot allocate memory", "std::bad_alloc", "out of memory",
                         "failed to map segment")  # fmt: skip


def build_base(shape: str, directory: Path) -> Path:
    if shape == "real":
        from benchmarks.shapes import XLMR_BASE, build_xlmr_shape

        return build_xlmr_shape(directory, XLMR_BASE, head="encoder")
    from tasks.tiny_models import build_tiny_model

    return build_tiny_model(directory)


# ------------------------------------------------------------------------------------ child


def _inputs(base: Path, rows: int):  # noqa: ANN202
    import pyarrow as pa

    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.corpus.schema import CORPUS_SCHEMA
    from tasks.tiny_models import multiway_rows
    from tasks.train.trainer import TrainInputs

    corpus, align = multiway_rows(rows + 50, dev_every=10**9)
    return TrainInputs(
        pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), base
    )


def prime_optimizer(trainer) -> None:  # noqa: ANN001
    """Create AdamW's state (two moments a parameter) without a forward or backward pass: one
    optimizer step on zero gradients. The parameters' values change (weight decay); their
    memory does not, which is all the memory measurement needs."""
    import torch

    for p in trainer.params:
        p.grad = torch.zeros_like(p)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)


def peak_address_space_bytes() -> int:
    """This process's peak virtual size since start (Linux VmPeak: what RLIMIT_AS limits; clear_refs does not reset it); 0 where unknown."""
    from benchmarks.shapes import proc_status_bytes

    return proc_status_bytes("VmPeak") or 0


def measure_case(case: dict) -> dict:
    """One case in this process: `case` = {base, rows, config (TrainConfig fields), mode: "time" | "memory", repeat, threads}."""
    import gc

    import torch

    from benchmarks.shapes import peak_rss_bytes, peak_rss_reset, rss_bytes
    from tasks.train.config import TrainConfig
    from tasks.train.trainer import Trainer

    torch.set_num_threads(case["threads"])
    config = TrainConfig.model_validate(case["config"])
    trainer = Trainer(config, _inputs(Path(case["base"]), case["rows"]))
    if case["mode"] == "time":
        trainer.train_step(0)  # warm-up: AdamW's state exists from here on
    else:
        prime_optimizer(trainer)
    gc.collect()
    before = rss_bytes()
    peak_rss_reset()
    times = []
    backward_peak = None
    for _ in range(case.get("repeat", 1)):
        t0 = time.perf_counter()
        if case["mode"] == "time":
            trainer.train_step(0)
        else:  # train_step in two parts, to tell the forward/backward peak from the optimizer's
            trainer.backward_step(0)
            backward_peak = peak_rss_bytes()
            trainer.optimizer.step()  # foreach AdamW: temporaries the size of the parameters
            trainer.optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    peak = peak_rss_bytes()
    batch = trainer.plan.batch(0)
    text_ids = batch.text_ids[batch.text_ids >= 0]
    lengths = trainer.data.lengths[text_ids]
    return {
        "seconds": float(np.median(times)),
        "before_gib": before / GIB,
        "step_gib": max(0, (backward_peak or peak) - before) / GIB,  # memory mode: forward + backward (gradients, activations)
        "with_optimizer_gib": max(0, peak - before) / GIB,  # the whole step, AdamW's update included
        "address_space_gib": peak_address_space_bytes() / GIB,  # the process's peak, setup included: against the cap
        "tokens": int(lengths.sum()),
        "padded_tokens": int(len(lengths) * lengths.max()),  # texts x the longest: what the encoder runs on (texts_to_arrays)
        "params": int(sum(p.numel() for p in trainer.params)),
    }


def _cap_and_nice(cap_bytes: int):  # noqa: ANN202
    def apply() -> None:
        import resource

        os.nice(10)
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    return apply


def classify_failure(returncode: int, stderr: str, cap_gib: float) -> str:
    """What a failed child's exit says: "did not fit under N GiB" for an allocation failure under
    the cap; "killed by signal N" for a kill from outside (SIGKILL: most often the kernel's OOM
    killer when the whole machine ran short, which says nothing about the cap); else the last
    line of its error."""
    if returncode < 0:
        return f"killed by signal {-returncode} (not the cap: the machine ran short of memory, or a kill from outside)"
    if any(marker in stderr for marker in OUT_OF_MEMORY_MARKERS):
        return f"did not fit under {cap_gib:g} GiB"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return f"failed (exit {returncode}): {lines[-1] if lines else 'no error output'}"


def run_case(case: dict, cap_gib: float, timeout: float | None = None) -> dict:
    """`measure_case` in a child process (niced, RLIMIT_AS = cap_gib): its result, or {"error": why, "detail": its last error line}."""
    env = {**os.environ, "OMP_NUM_THREADS": str(case["threads"]), "MKL_NUM_THREADS": str(case["threads"])}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(case)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=_cap_and_nice(int(cap_gib * GIB))
        )
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {timeout:g} s", "detail": "timeout"}
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        detail = lines[-1] if lines else f"exit {done.returncode}"
        return {"error": classify_failure(done.returncode, done.stderr, cap_gib), "detail": detail[:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ extrapolation


def activation_per_token(plain: dict[int, dict]) -> tuple[float, float, list[int]]:
    """(step memory GiB per padded token, intercept GiB, the row counts used): the line through
    the two smallest plain measurements, step peak against padded tokens."""
    xs = sorted(plain)[:2]
    if len(xs) < 2:
        raise ValueError(f"need two plain measurements to extrapolate, have {xs}")
    (t0, m0), (t1, m1) = ((plain[x]["padded_tokens"], plain[x]["step_gib"]) for x in xs)
    if t1 == t0:
        raise ValueError(f"plain measurements at {xs} rows have the same padded tokens ({t0}): no slope")
    slope = (m1 - m0) / (t1 - t0)
    return slope, m0 - slope * t0, xs


def fits_in_memory(
    memory_gib: float, *, params: int, per_token_gib: float, tokens_per_row: float, bytes_per_param: float = 16.0
) -> int:
    """Largest batch (rows) of plain training whose step fits `memory_gib`: weights, gradients
    and AdamW's two moments (`bytes_per_param`, 16 in fp32) plus `per_token_gib` a padded token.
    GradCache with chunk C fits any batch this allows for C rows (its activations are those of
    one chunk), up to the memory of the cached embeddings and the loss over all rows."""
    free = memory_gib - params * bytes_per_param / GIB
    if free <= 0:
        return 0
    return int(free / (per_token_gib * tokens_per_row))


# ------------------------------------------------------------------------------------ parent


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="real", choices=["real", "tiny"])
    parser.add_argument("--batch", type=int, default=32, help="rows per step for the combination timings (WACSE: 32)")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=1, help="timed steps per combination after one warm-up step")
    parser.add_argument("--memory-rows", default="64,256,1024", help="comma-separated rows per step for plain vs GradCache")
    parser.add_argument("--plain-max", type=int, default=10**9, help="largest plain batch run (larger: extrapolated, not run)")
    parser.add_argument("--chunk", type=int, default=32, help="GradCache chunk rows")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cap-gib", type=float, default=12.0, help="address-space cap of each child process (RLIMIT_AS)")
    parser.add_argument(
        "--gradcache-cap-gib",
        type=float,
        default=None,
        help="address-space cap of the GradCache memory cases (default: --cap-gib)",
    )
    parser.add_argument("--settings", default="plain,gradcache", help="memory cases to run: plain, gradcache or both")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per child process")
    parser.add_argument("--base", type=Path, default=None, help="reuse (or build once into) this base directory")
    parser.add_argument("--combinations", default="TR,TR+AWP,TR+WTR,TR+AWP+WTR,TR+RTL,SupCon+reg,DuEAM")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    settings = [x for x in args.settings.split(",") if x]
    unknown = sorted(set(settings) - {"plain", "gradcache"})
    if unknown or not settings:
        parser.error(f"--settings: {','.join(unknown) or 'nothing given'}: expected plain, gradcache or both, comma-separated")
    gradcache_cap = args.cap_gib if args.gradcache_cap_gib is None else args.gradcache_cap_gib
    if args.child:
        print(json.dumps(measure_case(json.loads(args.child))))
        return []

    from benchmarks.train_step import COMBINATIONS, scratch_dir

    started = time.perf_counter()
    base = args.base or scratch_dir("xlembed-train-shapes-") / "base"  # a random XLM-R-shaped model is about 1 GB
    if not (base / "config.json").exists():
        build_base(args.shape, base)
    common = {"max_length": args.max_length, "eval_every": 0, "checkpoint_every": 10**6, "dropout": 0.1,
              "torch_threads": args.threads, "freeze_word_embeddings": False}  # fmt: skip
    label = "XLM-R base shape" if args.shape == "real" else "tiny BERT"
    print(f"base: random {label} ({base}), ready in {time.perf_counter() - started:.1f} s; torch threads {args.threads}; "
          f"each case in a child process capped at {args.cap_gib:g} GiB (GradCache memory cases: {gradcache_cap:g} GiB); "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    rows: list[dict] = []

    def case(objectives: str, n: int, mode: str, **extra: object) -> dict:
        views = 3 if objectives.startswith("SupCon") else 2
        config = {**common, "objectives": COMBINATIONS[objectives], "batch_size": n, "views": views, **extra}
        return {"base": str(base), "rows": n, "config": config, "mode": mode, "repeat": args.repeat, "threads": args.threads}

    if not args.skip_timing:
        print(f"\n# step time per objective combination ({label}, batch {args.batch} rows, max_length {args.max_length}, CPU)")
        print("| combination | s/step | x TR | tokens/step | load average |")
        print("|---|---|---|---|---|")
        tr = None
        for name in [c for c in args.combinations.split(",") if c]:
            result = run_case(case(name, args.batch, "time"), args.cap_gib, args.timeout)
            if "error" in result:
                print(f"| {name} | {result['error']} | | | {os.getloadavg()[0]:.2f} |\n  ({result['detail']})", flush=True)
                continue
            tr = tr or result["seconds"]
            print(
                f"| {name} | {result['seconds']:.2f} | {result['seconds'] / tr:.2f} | {result['tokens']} | {os.getloadavg()[0]:.2f} |",
                flush=True,
            )
            if name != "TR":
                rows.append({"case": f"{label}: {name}, batch {args.batch}", "measure": "s/step", "stage": result["seconds"], "reference": tr,
                             "reference_name": "TR alone", "higher_is_better": False})  # fmt: skip

    memory_rows = [int(x) for x in args.memory_rows.split(",") if x]
    if args.skip_memory or not memory_rows:
        return rows
    print(f"\n# memory per step: {' vs '.join(settings)} (TR; GradCache chunk {args.chunk}), {label}, max_length {args.max_length}; "
          f"caps: plain {args.cap_gib:g} GiB, GradCache {gradcache_cap:g} GiB")  # fmt: skip
    print(
        "| rows | setting | s/step | RSS before step GiB | forward+backward peak above it GiB | with AdamW's update GiB | peak address space GiB | tokens/step | padded tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    plain: dict[int, dict] = {}
    gradcache: dict[int, dict] = {}
    for n in memory_rows:
        for setting in settings:
            if (setting == "plain" and n > args.plain_max) or (setting == "gradcache" and args.chunk >= n):
                continue
            extra = {"grad_cache_chunk": args.chunk} if setting == "gradcache" else {}
            cap = gradcache_cap if setting == "gradcache" else args.cap_gib
            # a start line: at 1024 rows one case runs most of an hour, and a log should say which
            print(
                f"  ({setting} at {n} rows: started {time.strftime('%H:%M:%S')}, load average {os.getloadavg()[0]:.2f})",
                file=sys.stderr,
                flush=True,
            )
            result = run_case(case("TR", n, "memory", **extra), cap, args.timeout)
            if "error" in result:
                print(f"| {n} | {setting} | {result['error']} | | | | | | |\n  ({result['detail']})", flush=True)
                continue
            print(f"| {n} | {setting} | {result['seconds']:.1f} | {result['before_gib']:.2f} | {result['step_gib']:.2f} | "
                  f"{result['with_optimizer_gib']:.2f} | {result['address_space_gib']:.2f} | {result['tokens']} | {result['padded_tokens']} |", flush=True)  # fmt: skip
            (plain if setting == "plain" else gradcache)[n] = result

    if len(plain) < 2:
        return rows
    slope, intercept, xs = activation_per_token(plain)
    params = next(iter(plain.values()))["params"]
    print(f"\nstep memory = {intercept:.3f} GiB + {slope * 1024:.4f} MiB per padded token (plain, fit through {xs[0]} and {xs[1]} rows; "
          f"the intercept is the gradients, {params * 4 / GIB:.2f} GiB for {params / 1e6:.0f}M fp32 parameters, plus noise)")  # fmt: skip
    for n, result in sorted(gradcache.items()):
        measured = plain.get(n)
        if measured is not None:
            reference, name = measured["step_gib"], f"plain TR, {n} rows"
        else:
            reference = intercept + slope * result["padded_tokens"]
            name = f"plain TR, {n} rows, extrapolated linearly in padded tokens from {xs[0]} and {xs[1]} rows"
            print(f"| {n} | plain (extrapolated, not measured) | | | {reference:.2f} | | | | {result['padded_tokens']} |")
        rows.append({"case": f"{label}: GradCache (chunk {args.chunk}) at {n} rows", "measure": "step peak RSS GiB", "stage": result["step_gib"],
                     "reference": reference, "reference_name": name, "higher_is_better": False})  # fmt: skip
    largest = plain[max(plain)]
    per_row = largest["padded_tokens"] / max(plain)
    widths = [(f"{per_row:.0f} padded tokens a row (these synthetic rows)", per_row),
              (f"{2 * args.max_length} padded tokens a row (2 texts at max length {args.max_length})", 2 * args.max_length)]  # fmt: skip
    for per_row_label, tokens_per_row in widths:
        fits = fits_in_memory(80e9 / GIB, params=params, per_token_gib=slope, tokens_per_row=tokens_per_row)
        print(f"fits in 80 GB (fp32, 16 bytes a parameter + measured activations), {per_row_label}: plain up to {fits} rows; "
              f"GradCache with chunk C <= {fits} rows: batch bounded by the cached embeddings and the loss, not the encoder")  # fmt: skip
    return rows


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: objective mixes vs TR and GradCache memory at XLM-R base's shape (--quick: tiny BERT)."""
    if quick:
        return main(
            ["--shape", "tiny", "--batch", "16", "--memory-rows", "64,256", "--chunk", "16", "--repeat", "2", "--cap-gib", "8"]
        )
    # plain measured at 64 and 112 rows, the line the docs extrapolate with (below 64 rows the
    # slope is lower: the peak comes late in the backward pass; 112 rows peak at 12.5 GiB of
    # address space, 128 do not fit 13 GiB), GradCache at 64 and 256 (10.7 GiB of address space
    # at any batch: a 10 GiB cap fails it); the command line's defaults (64, 256, 1024 rows;
    # GradCache at 1024 takes ~30 min on 2 loaded cores) are for manual runs
    return main(["--memory-rows", "64,112,256", "--plain-max", "112", "--cap-gib", "13", "--gradcache-cap-gib", "11.5"])


if __name__ == "__main__":
    main()
