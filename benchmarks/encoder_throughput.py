"""Encoder throughput vs a naive batching loop, measured in the same run.

N synthetic multilingual sentences of 3..120 words (uniform, shuffled) are encoded by
  encoder  tasks.encoders.Encoder: length-sorted batches, inference_mode, order restored
  naive    the obvious loop: batches of the same size in input order, each padded to its
           longest text by the tokenizer, forward under torch.no_grad(), same pooling
with the same model, tokenizer, batch size and max_length; prints sentences/s for each,
the ratio, and the largest difference between the two outputs.

By default the model is a tiny random BERT (hidden 32, 2 layers) built in a temp dir by
the test suite's builder; `--model DIR` uses a real one (transformers or
sentence-transformers dir; the agreement check is skipped for ST dirs with a Dense head).

    python benchmarks/encoder_throughput.py [--n 4000] [--batch-size 64] [--max-length 128] [--model DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tasks.encoders import POOLING_MODES, Encoder, EncoderSpec  # noqa: E402
from tasks.encoders.pooling import pool  # noqa: E402
from tasks.tiny_models import WORDS, build_tiny_model  # noqa: E402


def sentences(n: int, words: dict[str, list[str]], seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    langs = sorted(words)
    out = [" ".join(rng.choice(words[rng.choice(langs)]) for _ in range(rng.randint(3, 120))) + "." for _ in range(n)]
    rng.shuffle(out)
    return out


def naive_encode(enc: Encoder, texts: list[str], batch_size: int) -> np.ndarray:
    out = []
    for start in range(0, len(texts), batch_size):
        batch = [enc.spec.prefix + t for t in texts[start : start + batch_size]]
        inputs = enc.tokenizer(batch, padding=True, truncation=True, max_length=enc.max_length, return_tensors="pt").to(
            enc.device
        )
        with torch.no_grad():
            result = enc.model(**inputs)
        vectors = pool(enc.pooling, result.last_hidden_state, inputs["attention_mask"], getattr(result, "pooler_output", None))
        out.append(torch.nn.functional.normalize(vectors, dim=-1).cpu().numpy())
    return np.concatenate(out)


def timed(fn, *args) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: sentences/s of the encoder vs the naive loop (tiny random BERT)."""
    n, batch_size = (600, 64) if quick else (4000, 64)
    with tempfile.TemporaryDirectory() as tmp:
        enc = Encoder.load(EncoderSpec(str(build_tiny_model(Path(tmp) / "tiny")), max_length=128, batch_size=batch_size))
        texts = sentences(n, WORDS)
        warm = texts[: batch_size * 2]
        enc.encode(warm)
        naive_encode(enc, warm, batch_size)
        t_naive, _ = timed(naive_encode, enc, texts, batch_size)
        t_enc, _ = timed(enc.encode, texts)
    return [
        {
            "case": f"tiny random BERT, {n:,} sentences of 3-120 words, batch {batch_size}",
            "measure": "sentences/s",
            "stage": n / t_enc,
            "reference": n / t_naive,
            "reference_name": "naive loop",
            "higher_is_better": True,
        }
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4000, help="sentences")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--model", help="a real model dir (default: a tiny random BERT built here)")
    parser.add_argument("--pooling", choices=POOLING_MODES, default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or str(build_tiny_model(Path(tmp) / "tiny"))
        enc = Encoder.load(EncoderSpec(model, pooling=args.pooling, max_length=args.max_length, batch_size=args.batch_size))
        texts = sentences(args.n, WORDS)
        lengths = [len(ids) for ids in enc.tokenizer(texts, truncation=True, max_length=enc.max_length)["input_ids"]]
        print(f"model {model} ({enc.pooling}, dim {enc.dim}, device {enc.device}, torch threads {torch.get_num_threads()})")
        print(
            f"{args.n} sentences, 3..120 words, tokens min/median/max {min(lengths)}/{int(np.median(lengths))}/{max(lengths)}, batch {args.batch_size}"
        )

        warm = texts[: args.batch_size * 2]
        enc.encode(warm)
        naive_encode(enc, warm, args.batch_size)
        t_naive, naive = timed(naive_encode, enc, texts, args.batch_size)
        t_enc, ours = timed(enc.encode, texts)

    print(f"naive    {args.n / t_naive:10,.0f} sentences/s  ({t_naive:.2f} s)")
    print(f"encoder  {args.n / t_enc:10,.0f} sentences/s  ({t_enc:.2f} s)")
    print(f"ratio    {t_naive / t_enc:10.2f}x")
    if enc.dim == naive.shape[1]:
        print(f"max |encoder - naive| = {np.abs(ours - naive).max():.2e}")


if __name__ == "__main__":
    main()
