"""Training, alignment and encoding run where only the numeric stack is installed (torch,
transformers, numpy, pyarrow, polars, pydantic, safetensors, fsspec): a GPU machine set up
for `make gpu-check` need not have Prefect, faiss, s3fs or CTranslate2. A child process hides
those packages (an import of any of them raises ImportError) and runs a tiny train step, a
WSPAlign alignment and an encode."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = ("prefect", "faiss", "s3fs", "ctranslate2")

BLOCK = textwrap.dedent(
    f"""
    import importlib.abc, sys

    HIDDEN = {HIDDEN!r}

    class Hidden(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in HIDDEN:
                raise ImportError(f"{{name}} is not installed here (hidden by the test)")
            return None

    sys.meta_path.insert(0, Hidden())
    for name in [m for m in sys.modules if m.partition(".")[0] in HIDDEN]:
        del sys.modules[name]
    """
)

WORK = textwrap.dedent(
    """
    import sys, tempfile
    from pathlib import Path

    import numpy as np
    import pyarrow as pa

    from tasks.align.backends.wspalign import WspAligner, WspalignSettings
    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.corpus.schema import CORPUS_SCHEMA
    from tasks.encoders import Encoder, EncoderSpec
    from tasks.train.config import TrainConfig
    from tasks.train.trainer import Trainer, TrainInputs
    from tests.tasks.encoders.conftest import build_tiny_model
    from tests.tasks.train.conftest import multiway_rows

    model_dir = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
    vectors = Encoder.load(EncoderSpec(str(model_dir), device="cpu")).encode(["the river", "la rivière"])
    assert vectors.shape == (2, 32) and np.isfinite(vectors).all()

    corpus, align = multiway_rows(20)
    inputs = TrainInputs(pa.Table.from_pylist(corpus, schema=CORPUS_SCHEMA), pa.Table.from_pylist(align, schema=WORD_ALIGNMENT_SCHEMA), model_dir)
    config = TrainConfig.model_validate({"steps": 2, "batch_size": 4, "max_length": 16, "eval_every": 1, "device": "cpu",
        "torch_threads": 1, "objectives": {"translation_ranking": {"weight": 1.0}, "aligned_word_prediction": {"weight": 0.5}}})
    out = Path(tempfile.mkdtemp())
    metrics = Trainer(config, inputs).run(out / "out", out / "ckpt")  # dev retrieval every step, checkpoints, export
    assert 0 <= metrics["dev"]["mean"] <= 1 and (out / "out" / "model" / "model.safetensors").exists(), metrics

    aligner = WspAligner.load(WspalignSettings(source="tiny_random", device="cpu", threshold=0.0))
    links = aligner.align([["the", "river"], ["la", "rivière"]], [], np.array([[0, 1]]))
    assert links[0] is not None

    loaded = sorted(m for m in sys.modules if m.partition(".")[0] in HIDDEN)
    assert not loaded, loaded
    print("ran without", ", ".join(HIDDEN))
    """
)


@pytest.mark.slow
def test_train_align_and_encode_run_without_prefect_faiss_s3fs_and_ctranslate2() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", BLOCK + WORK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ran without prefect, faiss, s3fs, ctranslate2" in done.stdout


def test_the_hiding_works() -> None:
    """The check above means something only if an import of a hidden package does fail."""
    done = subprocess.run([sys.executable, "-c", BLOCK + "import prefect"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "prefect is not installed here" in done.stderr
