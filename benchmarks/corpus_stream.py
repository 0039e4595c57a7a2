"""Corpus stage: memory stays flat as the input grows, and throughput vs a naive reader.

For inputs of growing size (synthetic English/Kazakh-like line pairs), run in fresh
processes:
  stage  the corpus stage (streaming, vectorised filters, bottom-k sample of 38,000 groups)
  naive  the obvious script: read both files whole, zip, filter and dedupe with Python
         loops and a set, random.sample
and print peak RSS and lines/s for each, with the ratios measured in the same run.

    python benchmarks/corpus_stream.py [--lines 250000 1000000 4000000] [--sample 38000]
        [--naive-max 4000000] [--extrapolate 100000000]

`--extrapolate N` fits the stage's seconds = a + b * lines over the measured sizes and prints
its lines/s and peak memory at N lines, with the error of the same fit made without the
largest size and used to predict it (the stated error); sizes above `--naive-max` run the
stage only (the naive script holds the whole input in memory).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = "the river city bright small people water under over light night house green market".split()


def generate(directory: Path, lines: int) -> dict[str, Path]:
    rng = random.Random(lines)
    en, kk = directory / f"{lines}.en", directory / f"{lines}.kk"
    with open(en, "w", encoding="utf-8") as fe, open(kk, "w", encoding="utf-8") as fk:
        for start in range(0, lines, 100_000):
            block = []
            for i in range(start, min(lines, start + 100_000)):
                n = rng.randint(3, 25)
                block.append(" ".join(rng.choice(WORDS) for _ in range(n)) + f" {i % 500_000}")
            fe.write("\n".join(block) + "\n")
            fk.write("\n".join(s.upper() for s in block) + "\n")
    return {"en": en, "kk": kk}


def run_stage(files: dict[str, str], sample: int, root: str) -> int:
    sys.path.insert(0, str(REPO))
    from storage import ArtifactStore
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.stage import run_stage as run

    config = CorpusConfig.model_validate(
        {
            "sources": [{"name": "bench", "kind": "text", "files": files, "sample": sample}],
            "filters": {"min_words": 5, "max_length_ratio": 3.0},
        }
    )
    _, manifest = run(ArtifactStore(root), CORPUS_STAGE, config, {})
    return manifest.rows_out


def run_naive(files: dict[str, str], sample: int) -> int:
    with open(files["en"], encoding="utf-8") as f:
        english = f.read().splitlines()
    with open(files["kk"], encoding="utf-8") as f:
        kazakh = f.read().splitlines()
    seen, kept = set(), []
    for a, b in zip(english, kazakh):
        a, b = a.strip(), b.strip()
        if not a or not b or len(a.split()) < 5 or max(len(a), len(b)) / max(1, min(len(a), len(b))) > 3.0:
            continue
        if (a, b) in seen:
            continue
        seen.add((a, b))
        kept.append((a, b))
    chosen = random.Random(42).sample(kept, min(sample, len(kept)))
    return 2 * len(chosen)


def child(args: argparse.Namespace) -> None:
    files = json.loads(args.files)
    started = time.perf_counter()
    rows = run_stage(files, args.sample, args.root) if args.mode == "stage" else run_naive(files, args.sample)
    seconds = time.perf_counter() - started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "rows": rows}))


def measure(mode: str, files: dict[str, Path], sample: int, root: str) -> dict:
    command = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--files",
        json.dumps({k: str(v) for k, v in files.items()}),
        "--sample",
        str(sample),
        "--root",
        root,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: peak memory and lines/s of the stage vs the naive script."""
    sizes, sample = ([50_000, 200_000], 10_000) if quick else ([250_000, 1_000_000, 4_000_000], 38_000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for lines in sizes:
            files = generate(Path(tmp), lines)
            stage = measure("stage", files, sample, f"{tmp}/store-{lines}")
            naive = measure("naive", files, sample, "")
            case = f"{lines:,} lines, sample {sample:,}"
            rows.append(
                {
                    "case": case,
                    "measure": "peak MiB",
                    "stage": stage["peak_mib"],
                    "reference": naive["peak_mib"],
                    "reference_name": "naive",
                    "higher_is_better": False,
                }
            )
            rows.append(
                {
                    "case": case,
                    "measure": "lines/s",
                    "stage": lines / stage["seconds"],
                    "reference": lines / naive["seconds"],
                    "reference_name": "naive",
                    "higher_is_better": True,
                }
            )
            for path in files.values():
                path.unlink()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--sample", type=int, default=38_000)
    parser.add_argument("--naive-max", type=int, default=4_000_000, help="largest size the naive script runs at")
    parser.add_argument("--extrapolate", type=int, help="lines to extrapolate the stage's speed and memory to (e.g. 100000000)")
    parser.add_argument("--child", choices=["stage", "naive"])
    parser.add_argument("--files")
    parser.add_argument("--root")
    args = parser.parse_args()
    if args.child:
        args.mode = args.child
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(
            f"{'lines':>10} | {'stage MiB':>9} {'naive MiB':>9} {'mem ratio':>9} | {'stage l/s':>10} {'naive l/s':>10} {'speed ratio':>11}"
        )
        first_peak = None
        stages = []
        for lines in args.lines:
            files = generate(Path(tmp), lines)
            stage = measure("stage", files, args.sample, f"{tmp}/store-{lines}")
            stages.append((lines, stage))
            first_peak = first_peak or stage["peak_mib"]
            if lines <= args.naive_max:
                naive = measure("naive", files, args.sample, "")
                print(
                    f"{lines:>10,} | {stage['peak_mib']:>9.0f} {naive['peak_mib']:>9.0f} {naive['peak_mib'] / stage['peak_mib']:>8.1f}x |"
                    f" {lines / stage['seconds']:>10,.0f} {lines / naive['seconds']:>10,.0f} {naive['seconds'] / stage['seconds']:>10.1f}x"
                )
            else:
                print(
                    f"{lines:>10,} | {stage['peak_mib']:>9.0f} {'-':>9} {'-':>9} | {lines / stage['seconds']:>10,.0f} {'-':>10} {'-':>11}"
                )
            for path in files.values():
                path.unlink()
        print(
            f"stage peak memory grows {stage['peak_mib'] / first_peak:.2f}x while input grows {args.lines[-1] / args.lines[0]:.0f}x"
        )
        if args.extrapolate and len(stages) >= 3:
            print(extrapolate(stages, args.extrapolate))


def extrapolate(stages: list[tuple[int, dict]], target: int) -> str:
    """Lines/s and peak MiB at `target` lines from a linear fit of seconds and of peak MiB on
    lines; the error is that of the fit without the largest size, predicting it."""
    import numpy as np

    lines = np.array([n for n, _ in stages], dtype=float)
    seconds = np.array([s["seconds"] for _, s in stages])
    peaks = np.array([s["peak_mib"] for _, s in stages])
    fit_s, fit_m = np.polyfit(lines, seconds, 1), np.polyfit(lines, peaks, 1)
    held_s, held_m = np.polyfit(lines[:-1], seconds[:-1], 1), np.polyfit(lines[:-1], peaks[:-1], 1)
    err_s = abs(np.polyval(held_s, lines[-1]) - seconds[-1]) / seconds[-1]
    err_m = abs(np.polyval(held_m, lines[-1]) - peaks[-1]) / peaks[-1]
    t, m = np.polyval(fit_s, target), max(np.polyval(fit_m, target), peaks.max())
    return (
        f"extrapolated to {target:,} lines: {target / t:,.0f} lines/s ({t:,.0f} s, +-{100 * err_s:.0f}%), "
        f"peak {m:,.0f} MiB (+-{100 * err_m:.0f}%); errors: the fit without {int(lines[-1]):,} lines predicting it"
    )


if __name__ == "__main__":
    main()
