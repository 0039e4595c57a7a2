"""Translate stage throughput: the stage's own overhead, and CTranslate2 vs transformers.

Builds a small random NLLB-architecture model locally (no hub; see tasks/translate/tiny.py),
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

    python benchmarks/translate_throughput.py [--sentences 256] [--beam 2] [--max-tokens 48]
        [--d-model 256] [--layers 3] [--device auto] [--threads 0]
"""

from __future__ import annotations

import argparse
import random
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
TARGETS = ["fra_Latn", "deu_Latn", "spa_Latn", "jpn_Jpan", "zho_Hans", "hin_Deva"]


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30))).capitalize() + "." for _ in range(n)]


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
    return parser.parse_args(argv)

def measure(args: argparse.Namespace) -> tuple[list[tuple[str, str, float, int]], dict[str, tuple[float, int]], int]:
    """(table rows, {engine-compute: (seconds, output tokens)}, sentences)."""
    import ctranslate2
    import numpy as np
    import torch
    from transformers import M2M100ForConditionalGeneration

    from tasks.translate.config import DecodingConfig, TinyModelSpec
    from tasks.translate.engine import NllbTokenizer, get_translator, plan_batches, translate_tokens
    from tasks.translate.model_stage import convert_checkpoint
    from tasks.translate.tiny import build_tiny_nllb

    device = args.device if args.device != "auto" else ("cuda" if ctranslate2.get_cuda_device_count() else "cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="xlembed-translate-bench-"))
    spec = TinyModelSpec(seed=1, vocab_size=args.vocab, d_model=args.d_model, layers=args.layers, heads=max(1, args.d_model // 64), ffn_dim=4 * args.d_model, max_positions=512)
    started = time.perf_counter()
    checkpoint = build_tiny_nllb(work / "hf", spec)
    ct2_dirs = {}
    for quantization in ("int8", "float32"):
        ct2_dirs[quantization] = work / f"ct2-{quantization}"
        convert_checkpoint(checkpoint, ct2_dirs[quantization], quantization)
    print(f"model: d_model {spec.d_model}, {spec.layers}+{spec.layers} layers, vocab {spec.vocab_size + 203}; built and converted in {time.perf_counter() - started:.1f} s; device {device}")

    tokenizer = NllbTokenizer(checkpoint / "tokenizer.json")
    texts = sentences(args.sentences)
    sources = tokenizer.encode(texts, "eng_Latn", 512)
    prefixes = [[TARGETS[i % len(TARGETS)]] for i in range(len(texts))]
    order = np.argsort([len(s) for s in sources], kind="stable")
    sources = [sources[i] for i in order]  # pre-sorted, as the benchmark compares engines, not sorting
    prefixes = [prefixes[i] for i in order]
    decoding = DecodingConfig(beam_size=args.beam, max_length_ratio=0, max_length_extra=args.max_tokens, max_decoding_length=args.max_tokens)
    print(f"{len(sources)} sentences, {sum(map(len, sources))} source tokens, beam {args.beam}, output limit {args.max_tokens} tokens, batches of <= {args.batch_tokens} tokens")

    options = dict(
        beam_size=args.beam,
        length_penalty=decoding.length_penalty,
        repetition_penalty=decoding.repetition_penalty,
        no_repeat_ngram_size=decoding.no_repeat_ngram_size,
        max_input_length=decoding.max_input_length,
        max_decoding_length=args.max_tokens,
        sampling_topk=1,
    )

    def raw(translator):  # noqa: ANN001, ANN202
        results = translator.translate_batch(sources, target_prefix=prefixes, max_batch_size=args.batch_tokens, batch_type="tokens", **options)
        return [r.hypotheses[0][1:] for r in results]

    def stage(translator):  # noqa: ANN001, ANN202
        return translate_tokens(translator, sources, prefixes, decoding, args.batch_tokens)

    rows = []
    results: dict[str, tuple[float, int]] = {}
    for quantization, ct2_dir in ct2_dirs.items():
        compute_type = quantization if device == "cpu" else ("int8_float16" if quantization == "int8" else "float32")
        translator = get_translator(ct2_dir, device, compute_type, intra_threads=args.threads)
        raw(translator)  # warm-up
        times = {"raw": [], "stage": []}
        tokens = {}
        for _ in range(args.repeats):
            for name, fn in (("raw", raw), ("stage", stage)):
                t0 = time.perf_counter()
                out = fn(translator)
                times[name].append(time.perf_counter() - t0)
                tokens[name] = sum(len(o) for o in out)
        for name in ("raw", "stage"):
            seconds = statistics.median(times[name])
            results[f"{name}-{compute_type}"] = (seconds, tokens[name])
            rows.append((f"ctranslate2 {name}", compute_type, seconds, tokens[name]))

    if not args.skip_generate:
        model = M2M100ForConditionalGeneration.from_pretrained(checkpoint).eval()
        torch_device = "cuda" if device == "cuda" else "cpu"
        model.to(torch_device)
        ids = tokenizer.ids(sources)
        lang_ids = [tokenizer.vocab[p[0]] for p in prefixes]
        pad, eos = 1, 2
        batches = plan_batches(np.array([len(s) for s in sources]), args.batch_tokens, decoding)

        def generate(limit: int | None = None) -> int:
            produced = 0
            with torch.inference_mode():
                for batch in batches[:limit]:
                    idx = batch.indices.tolist()
                    width = max(len(ids[i]) for i in idx)
                    input_ids = torch.tensor([[pad] * (width - len(ids[i])) + ids[i] for i in idx], device=torch_device)
                    mask = (input_ids != pad).long()
                    prefix = torch.tensor([[eos, lang_ids[i]] for i in idx], device=torch_device)
                    out = model.generate(
                        input_ids=input_ids, attention_mask=mask, decoder_input_ids=prefix, num_beams=args.beam,
                        do_sample=False, max_new_tokens=args.max_tokens - 1, min_new_tokens=0, early_stopping=True,
                    )
                    produced += int(((out[:, 2:] != pad) & (out[:, 2:] != eos)).sum())
            return produced

        generate(limit=1)  # warm-up
        t0 = time.perf_counter()
        produced = generate()  # once: it is the slow one
        seconds = time.perf_counter() - t0
        results["generate"] = (seconds, produced)
        rows.append(("transformers generate", "float32", seconds, produced))

    return rows, results, len(sources)


def report(rows: list[tuple[str, str, float, int]], results: dict[str, tuple[float, int]], n: int) -> None:
    print(f"\n{'engine':<22} {'compute':<10} {'seconds':>8} {'sent/s':>9} {'tokens/s':>10}")
    for name, compute, seconds, produced in rows:
        print(f"{name:<22} {compute:<10} {seconds:>8.3f} {n / seconds:>9.1f} {produced / seconds:>10.0f}")

    print("\nratios (same run)")
    for key in results:
        if key.startswith("stage-"):
            compute = key.removeprefix("stage-")
            s, r = results[key], results[f"raw-{compute}"]
            print(f"  stage / raw translate_batch, {compute:<12} sentences/s {r[0] / s[0]:.3f}   tokens/s {(s[1] / s[0]) / (r[1] / r[0]):.3f}")
    if "generate" in results:
        g = results["generate"]
        for key in results:
            if key.startswith("raw-"):
                r = results[key]
                print(f"  ctranslate2 {key.removeprefix('raw-'):<12} / transformers generate float32: sentences/s {g[0] / r[0]:.2f}x   tokens/s {(r[1] / r[0]) / (g[1] / g[0]):.2f}x")



def main() -> None:
    report(*measure(parse_args()))


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: the stage vs raw translate_batch, CTranslate2 vs generate."""
    args = parse_args(["--sentences", "32", "--repeats", "3"] if quick else [])
    rows, results, n = measure(args)
    report(rows, results, n)
    out = []
    for key, (seconds, tokens) in results.items():
        if key.startswith("stage-"):
            compute = key.removeprefix("stage-")
            raw_s, raw_t = results[f"raw-{compute}"]
            case = f"{n} sentences, {compute}"
            out.append({"case": case, "measure": "sentences/s", "stage": n / seconds, "reference": n / raw_s, "reference_name": "raw translate_batch", "higher_is_better": True})
            out.append({"case": case, "measure": "tokens/s", "stage": tokens / seconds, "reference": raw_t / raw_s, "reference_name": "raw translate_batch", "higher_is_better": True})
    if "generate" in results:
        g_s, g_t = results["generate"]
        for key, (seconds, tokens) in results.items():
            if key.startswith("raw-"):
                out.append({"case": f"{n} sentences, ctranslate2 {key.removeprefix('raw-')}", "measure": "tokens/s", "stage": tokens / seconds, "reference": g_t / g_s, "reference_name": "transformers generate float32", "higher_is_better": True})
    return out


if __name__ == "__main__":
    main()
