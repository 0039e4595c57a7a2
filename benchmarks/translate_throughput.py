"""Translate stage throughput: the stage's own overhead, and CTranslate2 vs transformers.

Builds a small random NLLB-architecture model locally (no hub; see tasks/tiny_models.py),
converts it with CTranslate2, and translates the same pre-tokenised, length-sorted
sentences (random English-like text, a different target language per sentence) with:

  stage     tasks.translate.engine.translate_tokens, the function the stage calls per shard
            (sorting, token batches, asynchronous submission, order restored)
  raw       Translator.translate_batch on the same inputs in one call, max_batch_size in
            tokens, batch_type="tokens": CTranslate2 alone
  generate  transformers' M2M100ForConditionalGeneration.generate, float32, on the same
            token batches (decoder prefix </s> + target language code, as NLLB decodes)

Every engine gets the same decoding options: beam size, a fixed output limit (so outputs
of a random model, which rarely stop, have the same length everywhere) and no sampling.
Stage and raw are timed alternately (median of --repeats) on the same Translator;
generate once after a warm-up batch. Prints sentences/s and output tokens/s, and the
ratios measured in the same run. On a shared machine the wall times are noisy: compare
ratios of one run, and rerun when the stage/raw ratio looks off.

--shape real-1.3b / real-3.3b: the same at NLLB-200-distilled-1.3B's / NLLB-200-3.3B's shape.
--shape real: NLLB-200-distilled-600M's shape (benchmarks/shapes.py: M2M100, d_model 1024,
12+12 layers, FFN 4096, 16 heads, vocabulary 256,206; random weights, the tiny tokenizer).
A random decoder never emits </s>, so every engine decodes exactly ceil(1.2 x longest source
in the batch + 5) tokens per planned token batch (the stage's own limit: DecodingConfig
max_length_ratio 1.2, max_length_extra 5; raw translate_batch gets min_decoding_length =
max_decoding_length, generate min_new_tokens = max_new_tokens); output token counts are
printed to show they agree. Also prints the peak RSS of each engine's run (after a reset of
the process peak, the previous engine freed) and the stage at --sweep batch sizes in tokens.

    python benchmarks/translate_throughput.py [--shape tiny|real|real-1.3b|real-3.3b] [--sentences 256] [--beam 2]
        [--max-tokens 48] [--d-model 256] [--layers 3] [--device auto] [--threads 0]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORDS = (
    "the river city bright small people water under over light night house green market old new "
    "town bridge school children morning evening rain mountain sea road train station library "
    "museum farmer bread kitchen doctor garden summer winter story friend village"
).split()
REAL_SHAPES = {"real": "NLLB_600M", "real-1.3b": "NLLB_1_3B", "real-3.3b": "NLLB_3_3B"}  # --shape -> benchmarks.shapes name
TARGETS = ["fra_Latn", "deu_Latn", "spa_Latn", "jpn_Jpan", "zho_Hans", "hin_Deva"]


def sentences(n: int, seed: int = 0, words: tuple[int, int] = (4, 30)) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))).capitalize() + "." for _ in range(n)]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--beam", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=24, help="output limit (tokens) for every engine")
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2 intra_threads and torch threads (0: library default)")
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument(
        "--shape", default="tiny", choices=["tiny", *REAL_SHAPES],
        help="real: NLLB-200-distilled-600M's shape, fixed output lengths; real-1.3b, real-3.3b: the larger NLLB-200 shapes",
    )  # fmt: skip
    parser.add_argument("--max-words", type=int, default=None, help="longest random sentence in words (default 30; real: 8)")
    parser.add_argument(
        "--sweep",
        default=None,
        help="comma-separated batch sizes in tokens for the stage (int8) besides --batch-tokens (real: 256)",
    )
    args = parser.parse_args(argv)
    if args.shape in REAL_SHAPES:  # what the defaults mean at 600M parameters on a CPU: minutes, not hours
        given = set(argv if argv is not None else sys.argv[1:])
        defaults = {"--sentences": ("sentences", 16), "--repeats": ("repeats", 1), "--batch-tokens": ("batch_tokens", 4096)}
        for flag, (name, value) in defaults.items():
            if flag not in given:
                setattr(args, name, value)
        args.max_words = args.max_words or 8
        args.sweep = "256" if args.sweep is None else args.sweep
    args.max_words = args.max_words or 30
    args.sweep = [int(x) for x in (args.sweep or "").split(",") if x]
    return args


def peak_rss_gib() -> float:
    from benchmarks.shapes import peak_rss_bytes

    return peak_rss_bytes() / 2**30


def reset_peak() -> None:
    import gc

    from benchmarks.shapes import peak_rss_reset

    gc.collect()
    peak_rss_reset()


def measure(args: argparse.Namespace) -> tuple[list[tuple[str, str, float, int, float]], dict[str, tuple[float, int]], int]:
    """(table rows (engine, compute, seconds, output tokens, peak RSS GiB), {engine-compute: (seconds, output tokens)}, sentences)."""
    work = Path(tempfile.mkdtemp(prefix="xlembed-translate-bench-"))
    try:
        return measure_in(args, work)
    finally:  # the real shapes leave 12 GB of checkpoints there (two runs once filled a 250 GB disk)
        shutil.rmtree(work, ignore_errors=True)


def measure_in(
    args: argparse.Namespace, work: Path
) -> tuple[list[tuple[str, str, float, int, float]], dict[str, tuple[float, int]], int]:
    """`measure`, its models built under `work`."""
    import ctranslate2
    import numpy as np
    import torch
    from transformers import M2M100ForConditionalGeneration

    from tasks.tiny_models import build_tiny_nllb
    from tasks.translate.config import DecodingConfig, TinyModelSpec
    from tasks.translate.engine import NllbTokenizer, get_translator, plan_batches, release_translators, translate_tokens
    from tasks.translate.model_stage import convert_checkpoint

    real = args.shape in REAL_SHAPES
    device = args.device if args.device != "auto" else ("cuda" if ctranslate2.get_cuda_device_count() else "cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    if real:
        from benchmarks import shapes

        shape = getattr(shapes, REAL_SHAPES[args.shape])
        checkpoint = shapes.build_nllb_shape(work / "hf", shape)
        described = f"{shape.name} shape: d_model {shape.d_model}, {shape.layers}+{shape.layers} layers, FFN {shape.ffn_dim}, vocab {shape.vocab_size}, random weights"
    else:
        spec = TinyModelSpec(
            seed=1,
            vocab_size=args.vocab,
            d_model=args.d_model,
            layers=args.layers,
            heads=max(1, args.d_model // 64),
            ffn_dim=4 * args.d_model,
            max_positions=512,
        )
        checkpoint = build_tiny_nllb(work / "hf", spec)
        described = f"d_model {spec.d_model}, {spec.layers}+{spec.layers} layers, vocab {spec.vocab_size + 203}"
    ct2_dirs = {}
    for quantization in ("int8", "float32"):
        ct2_dirs[quantization] = work / f"ct2-{quantization}"
        convert_checkpoint(checkpoint, ct2_dirs[quantization], quantization)
    print(f"model: {described}; built and converted in {time.perf_counter() - started:.1f} s; device {device}")

    tokenizer = NllbTokenizer(checkpoint / "tokenizer.json")
    texts = sentences(args.sentences, words=(3 if real else 4, args.max_words))
    sources = tokenizer.encode(texts, "eng_Latn", 512)
    prefixes = [[TARGETS[i % len(TARGETS)]] for i in range(len(texts))]
    order = np.argsort([len(s) for s in sources], kind="stable")
    sources = [sources[i] for i in order]  # pre-sorted, as the benchmark compares engines, not sorting
    prefixes = [prefixes[i] for i in order]
    if real:  # output length = ceil(1.2 x longest source of the token batch + 5), for every engine
        decoding = DecodingConfig(beam_size=args.beam, max_length_ratio=1.2, max_length_extra=5, max_decoding_length=512)
        limit_text = "1.2 x longest source in the batch + 5 tokens, exactly (min = max)"
    else:
        decoding = DecodingConfig(
            beam_size=args.beam, max_length_ratio=0, max_length_extra=args.max_tokens, max_decoding_length=args.max_tokens
        )
        limit_text = f"{args.max_tokens} tokens"
    print(
        f"{len(sources)} sentences, {sum(map(len, sources))} source tokens, beam {args.beam}, output limit {limit_text}, batches of <= {args.batch_tokens} tokens"
    )

    options = dict(
        beam_size=args.beam,
        length_penalty=decoding.length_penalty,
        repetition_penalty=decoding.repetition_penalty,
        no_repeat_ngram_size=decoding.no_repeat_ngram_size,
        max_input_length=decoding.max_input_length,
        sampling_topk=1,
    )
    lengths = np.array([len(s) for s in sources])

    def calls(batch_tokens: int) -> list[tuple[list[int], int]]:
        """The stage's planned batches, consecutive ones with the same output limit in one call (as the stage)."""
        out: list[tuple[list[int], int]] = []
        for batch in plan_batches(lengths, batch_tokens, decoding):
            if out and out[-1][1] == batch.max_decoding_length:
                out[-1][0].extend(batch.indices.tolist())
            else:
                out.append((batch.indices.tolist(), batch.max_decoding_length))
        return out

    def raw(translator, batch_tokens: int = args.batch_tokens):  # noqa: ANN001, ANN202
        produced: list[list[str]] = [[] for _ in sources]
        for idx, limit in calls(batch_tokens):
            fixed = {"min_decoding_length": limit} if real else {}
            results = translator.translate_batch(
                [sources[i] for i in idx], target_prefix=[prefixes[i] for i in idx], max_batch_size=batch_tokens, batch_type="tokens",
                max_decoding_length=limit, **fixed, **options,
            )  # fmt: skip
            for i, r in zip(idx, results):
                produced[i] = r.hypotheses[0][1:]
        return produced

    def stage(translator, batch_tokens: int = args.batch_tokens):  # noqa: ANN001, ANN202
        return translate_tokens(translator, sources, prefixes, decoding, batch_tokens)

    rows = []
    results: dict[str, tuple[float, int]] = {}
    for quantization, ct2_dir in ct2_dirs.items():
        compute_type = quantization if device == "cpu" else ("int8_float16" if quantization == "int8" else "float32")
        reset_peak()
        translator = get_translator(ct2_dir, device, compute_type, intra_threads=args.threads)
        warm = 2 if real else len(sources)  # at the real shape a warm-up on a few sentences is enough
        translate_tokens(translator, sources[:warm], prefixes[:warm], decoding, args.batch_tokens)
        times = {"raw": [], "stage": []}
        tokens = {}
        for _ in range(args.repeats):
            for name, fn in (("raw", raw), ("stage", stage)):
                t0 = time.perf_counter()
                out = fn(translator)
                times[name].append(time.perf_counter() - t0)
                tokens[name] = sum(len(o) for o in out)
        peak = peak_rss_gib()
        for name in ("raw", "stage"):
            seconds = statistics.median(times[name])
            results[f"{name}-{compute_type}"] = (seconds, tokens[name])
            rows.append((f"ctranslate2 {name}", compute_type, seconds, tokens[name], peak))
        if quantization == "int8":
            for batch_tokens in args.sweep:
                t0 = time.perf_counter()
                out = stage(translator, batch_tokens)
                seconds = time.perf_counter() - t0
                produced = sum(len(o) for o in out)
                results[f"sweep{batch_tokens}-{compute_type}"] = (seconds, produced)
                rows.append((f"stage, {batch_tokens} tok/batch", compute_type, seconds, produced, peak))
        del translator
        release_translators()

    if not args.skip_generate:
        reset_peak()
        model = M2M100ForConditionalGeneration.from_pretrained(checkpoint).eval()
        torch_device = "cuda" if device == "cuda" else "cpu"
        model.to(torch_device)
        ids = tokenizer.ids(sources)
        lang_ids = [tokenizer.vocab[p[0]] for p in prefixes]
        pad, eos = 1, 2
        batches = plan_batches(lengths, args.batch_tokens, decoding)

        def generate(limit: int | None = None, rows: int | None = None) -> int:
            produced = 0
            with torch.inference_mode():
                for batch in batches[:limit]:
                    idx = batch.indices.tolist()[:rows]
                    width = max(len(ids[i]) for i in idx)
                    input_ids = torch.tensor([[pad] * (width - len(ids[i])) + ids[i] for i in idx], device=torch_device)
                    mask = (input_ids != pad).long()
                    prefix = torch.tensor([[eos, lang_ids[i]] for i in idx], device=torch_device)
                    new = batch.max_decoding_length - 1  # CTranslate2's limit counts the language code
                    out = model.generate(
                        input_ids=input_ids,
                        attention_mask=mask,
                        decoder_input_ids=prefix,
                        num_beams=args.beam,
                        do_sample=False,
                        max_new_tokens=new,
                        min_new_tokens=new if real else 0,
                        early_stopping=True,
                    )
                    produced += int(((out[:, 2:] != pad) & (out[:, 2:] != eos)).sum())
            return produced

        generate(limit=1, rows=2 if real else None)  # warm-up
        t0 = time.perf_counter()
        produced = generate()  # once: it is the slow one
        seconds = time.perf_counter() - t0
        results["generate"] = (seconds, produced)
        rows.append(("transformers generate", "float32", seconds, produced, peak_rss_gib()))

    return rows, results, len(sources)


def report(rows: list[tuple[str, str, float, int, float]], results: dict[str, tuple[float, int]], n: int) -> None:
    print(f"\n{'engine':<26} {'compute':<10} {'seconds':>8} {'sent/s':>9} {'tokens':>7} {'tokens/s':>10} {'peak RSS':>9}")
    for name, compute, seconds, produced, peak in rows:
        print(
            f"{name:<26} {compute:<10} {seconds:>8.3f} {n / seconds:>9.2f} {produced:>7} {produced / seconds:>10.1f} {peak:>7.2f} G"
        )

    print("\nratios (same run)")
    for key in results:
        if key.startswith("stage-"):
            compute = key.removeprefix("stage-")
            s, r = results[key], results[f"raw-{compute}"]
            print(
                f"  stage / raw translate_batch, {compute:<12} sentences/s {r[0] / s[0]:.3f}   tokens/s {(s[1] / s[0]) / (r[1] / r[0]):.3f}"
            )
    if "generate" in results:
        g = results["generate"]
        for key in results:
            if key.startswith("raw-"):
                r = results[key]
                print(
                    f"  ctranslate2 {key.removeprefix('raw-'):<12} / transformers generate float32: sentences/s {g[0] / r[0]:.2f}x   tokens/s {(r[1] / r[0]) / (g[1] / g[0]):.2f}x"
                )


def main() -> None:
    report(*measure(parse_args()))


def protocol_rows(
    rows: list[tuple[str, str, float, int, float]], results: dict[str, tuple[float, int]], n: int, label: str
) -> list[dict]:
    out = []
    for key, (seconds, tokens) in results.items():
        if key.startswith("stage-"):
            compute = key.removeprefix("stage-")
            raw_s, raw_t = results[f"raw-{compute}"]
            case = f"{label}{n} sentences, {compute}"
            out.append(
                {
                    "case": case,
                    "measure": "sentences/s",
                    "stage": n / seconds,
                    "reference": n / raw_s,
                    "reference_name": "raw translate_batch",
                    "higher_is_better": True,
                }
            )
            out.append(
                {
                    "case": case,
                    "measure": "tokens/s",
                    "stage": tokens / seconds,
                    "reference": raw_t / raw_s,
                    "reference_name": "raw translate_batch",
                    "higher_is_better": True,
                }
            )
        if key.startswith("sweep"):
            size, compute = key.removeprefix("sweep").split("-", 1)
            default_s, default_t = results[f"stage-{compute}"]
            out.append({"case": f"{label}stage at {size} tokens/batch vs the default, {compute}", "measure": "tokens/s", "stage": tokens / seconds,
                        "reference": default_t / default_s, "reference_name": "stage at --batch-tokens", "higher_is_better": True})  # fmt: skip
    if "generate" in results:
        g_s, g_t = results["generate"]
        g_peak = next(r[4] for r in rows if r[0] == "transformers generate")
        for key, (seconds, tokens) in results.items():
            if key.startswith("raw-"):
                compute = key.removeprefix("raw-")
                out.append(
                    {
                        "case": f"{label}{n} sentences, ctranslate2 {compute}",
                        "measure": "tokens/s",
                        "stage": tokens / seconds,
                        "reference": g_t / g_s,
                        "reference_name": "transformers generate float32",
                        "higher_is_better": True,
                    }
                )
                if label:  # peak memory only means something at the real shape
                    peak = next(r[4] for r in rows if r[0] == "ctranslate2 raw" and r[1] == compute)
                    out.append({"case": f"{label}ctranslate2 {compute}", "measure": "peak RSS GiB", "stage": peak, "reference": g_peak,
                                "reference_name": "transformers generate float32", "higher_is_better": False})  # fmt: skip
    return out


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: the stage vs raw translate_batch, CTranslate2 vs generate;
    the full run adds NLLB-200-600M's shape (--shape real); --quick keeps the tiny model."""
    args = parse_args(["--sentences", "32", "--repeats", "3"] if quick else [])
    rows, results, n = measure(args)
    report(rows, results, n)
    out = protocol_rows(rows, results, n, "")
    if not quick:
        args = parse_args(["--shape", "real"])
        rows, results, n = measure(args)
        report(rows, results, n)
        out += protocol_rows(rows, results, n, "NLLB-600M shape: ")
    return out


if __name__ == "__main__":
    main()
