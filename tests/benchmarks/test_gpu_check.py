"""benchmarks/gpu_check.py (`make gpu-check`): it refuses a machine without CUDA in one line, and
its --cpu smoke runs every step (pytest, train plain and GradCache, sentence-transformers,
WSPAlign against the reference) at tiny sizes and prints the one summary table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", *args], cwd=ROOT, env=env or ENV, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_without_cuda_it_says_so_in_one_line_and_exits_nonzero() -> None:
    done = run(env={**ENV, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2
    assert done.stdout.strip().count("\n") == 0 and "no CUDA device visible" in done.stdout and "--cpu" in done.stdout


@pytest.mark.slow
def test_the_cpu_smoke_runs_every_step_and_prints_the_table() -> None:
    done = run("--cpu", "--repeat", "1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert (
        "| what | examples/s | tokens/s | MFU | questions/s | GPU waits (of the call) | GPU idle between batches | padding"
        " | identical links | syncs/step | peak GiB |"
    ) in out
    for row in (
        "xlembed TR, batch 16, plain",
        "xlembed TR, batch 16, GradCache chunk 4",
        "WSPAlign batched, fp32",
        "WSPAlign batched, bf16",
    ):
        assert f"| {row}" in out, row
    assert "batches assembled worker thread" in out or "batches assembled in turn" in out
    assert "| 6/6 |" in out  # fp32 batched links equal the one-question reference on every pair
    align_rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| WSPAlign batched")]
    assert len(align_rows) == 3 and all(
        row[7].endswith("%") and 0 <= float(row[7].rstrip("%")) < 50 for row in align_rows
    )  # padding
    assert "pytest on CPU" in out and " 0 failed" in out
    pytest.importorskip("sentence_transformers")
    assert "| sentence-transformers MNRL, batch 16 |" in out and "CachedMNRL" in out
    assert "xlembed TR, batch 16, plain / sentence-transformers MNRL, batch 16: " in out and "x examples/s" in out


class Stamp:
    """A recorded CUDA event as `gpu_waits` reads it: elapsed_time(other) in milliseconds."""

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def elapsed_time(self, other: Stamp) -> float:
        return other.ms - self.ms


def test_gpu_waits_counts_the_gaps_between_batches_and_the_call_outside_them() -> None:
    from benchmarks.gpu_check import gpu_waits

    # batches run 0-40 ms, 50-90 ms (10 ms idle before it) and 90-130 ms (queued in time)
    timeline = [(Stamp(a), Stamp(b), 8) for a, b in ((0, 40), (50, 90), (90, 130))]
    waits = gpu_waits(timeline, seconds=0.2)  # the whole call: 200 ms, 120 of them running batches
    assert waits["GPU idle between batches"] == pytest.approx(10 / 130)
    assert waits["GPU waits (of the call)"] == pytest.approx(1 - 120 / 200)
    assert waits["batches"] == 3
