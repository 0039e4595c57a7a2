"""Run every benchmark under benchmarks/ and write one Markdown table of ratios to docs/benchmarks.md.

    python benchmarks/run_all.py [--quick] [--only NAME ...] [--timeout 1800] [--output docs/benchmarks.md] [--print]

Protocol (see docs/benchmarks.md): a benchmark script `benchmarks/NAME.py` joins by defining

    def run_benchmark(quick: bool) -> list[dict]

returning rows {"case", "measure", "stage", "reference", "reference_name", "higher_is_better"}
(+ optional "note"): the stage's figure and the raw/reference approach's figure, measured in
the same run. Each script runs in its own process (its imports, memory and crashes stay its
own) with a time limit; scripts without `run_benchmark` are listed as not in the protocol,
failures are listed with their last line. The table goes between the markers
`<!-- run_all:start -->` and `<!-- run_all:end -->` (appended if absent); the rest of the
file is left as written.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
START, END = "<!-- run_all:start -->", "<!-- run_all:end -->"
REQUIRED = ("case", "measure", "stage", "reference", "reference_name", "higher_is_better")
HELPERS = {"shapes.py"}  # modules the benchmarks import (model builders), not benchmarks themselves


def discover(only: list[str] | None = None) -> tuple[list[Path], list[Path]]:
    """(scripts that define run_benchmark, scripts that do not), by reading their source only."""
    joined, other = [], []
    for path in sorted(HERE.glob("*.py")):
        if path.name == Path(__file__).name or path.name.startswith("_") or path.name in HELPERS:
            continue
        if only and path.stem not in only:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            other.append(path)
            continue
        defines = any(isinstance(n, ast.FunctionDef) and n.name == "run_benchmark" for n in tree.body)
        (joined if defines else other).append(path)
    return joined, other


def child(path: Path, quick: bool) -> None:
    sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = module.run_benchmark(quick)
    print("RESULT " + json.dumps(rows))


def run_one(path: Path, quick: bool, timeout: float) -> tuple[list[dict[str, Any]], str | None, float]:
    started = time.perf_counter()
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(path)] + (["--quick"] if quick else [])
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)}
        )
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:.0f} s", time.perf_counter() - started
    seconds = time.perf_counter() - started
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        last = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
        return [], f"exit {result.returncode}: {last[:200]}", seconds
    rows = json.loads(lines[-1][len("RESULT ") :])
    bad = [row for row in rows if any(k not in row for k in REQUIRED)]
    if bad:
        return [], f"rows without {REQUIRED}: {bad[:1]}", seconds
    return rows, None, seconds


def ratio(row: dict[str, Any]) -> float | None:
    stage, reference = float(row["stage"]), float(row["reference"])
    if stage <= 0 or reference <= 0:
        return None
    return stage / reference if row["higher_is_better"] else reference / stage


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = ""
    try:
        kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")))
        memory = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    gpu = "no GPU"
    try:
        import torch

        if torch.cuda.is_available():
            gpu = f"GPU {torch.cuda.get_device_name(0)}"
        torch_version = f", torch {torch.__version__}"
    except ImportError:
        torch_version = ""
    return f"{cpu}, {cores} cores available{memory}, {gpu}; {platform.system()} {platform.release()}, Python {platform.python_version()}{torch_version}"


def fmt(value: float) -> str:
    value = float(value)
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def table(results: dict[str, tuple[list[dict[str, Any]], str | None, float]], skipped: list[Path], quick: bool) -> str:
    lines = [
        START,
        "## All benchmarks in one run",
        "",
        f"`python benchmarks/run_all.py{' --quick' if quick else ''}` on {dt.date.today().isoformat()}: {machine()}.",
        "Each ratio compares the stage with the raw or reference approach measured in the same run; "
        "above 1 means the stage is better (faster, or less memory). Machines are noisy; no test asserts these.",
        "",
        "| benchmark | case | measure | stage | reference | ratio |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for name, (rows, error, seconds) in results.items():
        if error:
            lines.append(f"| {name} | failed: {error.replace('|', '/')} | | | | |")
            continue
        for row in rows:
            r = ratio(row)
            note = f" ({row['note']})" if row.get("note") else ""
            lines.append(
                f"| {name} | {row['case']}{note} | {row['measure']} | {fmt(row['stage'])} | {fmt(row['reference'])} {row['reference_name']} | "
                f"{'n/a' if r is None else f'{r:.2f}x'} |"
            )
    timings = ", ".join(f"{name} {seconds:.0f} s" for name, (_, _, seconds) in results.items())
    lines += ["", f"Wall time per script: {timings or 'none'}."]
    if skipped:
        lines.append(f"Not in the `run_benchmark` protocol yet (run by hand): {', '.join(p.name for p in skipped)}.")
    lines.append(END)
    return "\n".join(lines) + "\n"


def write(output: Path, section: str) -> None:
    text = output.read_text(encoding="utf-8") if output.exists() else "# Benchmarks\n"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        text = before + section + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    output.write_text(text, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="each benchmark's small variant (minutes, not hours)")
    parser.add_argument("--only", nargs="*", help="benchmark names (file stems)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per benchmark script")
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--print", action="store_true", help="print the table instead of writing the file")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.quick)
        return 0
    joined, skipped = discover(args.only)
    results = {}
    for path in joined:
        print(f"running {path.name} ...", file=sys.stderr, flush=True)
        results[path.stem] = run_one(path, args.quick, args.timeout)
        rows, error, seconds = results[path.stem]
        print(f"  {path.stem}: {error or f'{len(rows)} rows'} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    section = table(results, skipped, args.quick)
    if args.print:
        print(section)
    else:
        write(args.output, section)
        print(f"wrote {args.output}", file=sys.stderr)
    return 1 if any(error for _, error, _ in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
