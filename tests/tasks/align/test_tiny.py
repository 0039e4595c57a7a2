"""The tiny random WSPAlign model is the same in every process (regression: the Unigram trainer's
hash-set order gave other token ids, hence other alignments, in each process, so a resumed
align run mixed shards aligned by two different models under one key)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
BUILD = "import sys; from pathlib import Path; from tasks.tiny_models import build_tiny_wspalign; build_tiny_wspalign(Path(sys.argv[1]))"


@pytest.mark.slow
def test_tiny_wspalign_is_identical_across_processes(tmp_path: Path) -> None:
    digests = []
    for i in range(3):  # separate processes: each has its own hash seeds
        target = tmp_path / f"tiny{i}"
        env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false"}
        subprocess.run([sys.executable, "-c", BUILD, str(target)], env=env, check=True, capture_output=True)
        digests.append(
            {name: hashlib.sha256((target / name).read_bytes()).hexdigest() for name in ("tokenizer.json", "model.safetensors")}
        )
    assert digests[0] == digests[1] == digests[2]
