"""The corpus stage at 1M to 30M (100M) line pairs: lines/s and peak memory, and the trend to 100M.

A synthetic English/Kazakh-like parallel corpus (two line-aligned text files, the `text`
source kind) with realistic sentences: lengths log-normal (median 17 words, 1 to 120;
about 100 characters a line, as in WikiMatrix),
words drawn Zipf-like from a 30,000-word vocabulary per language, and the noise a crawl has:
about 3% exact duplicate pairs, 2% near duplicates (capitalised, punctuation and a year
added, on both sides), 0.5% pairs whose Kazakh side is cut to one word (length ratio), 0.1%
empty lines. It is written streaming, once: the file of N lines is the first N lines of the
largest one, so every size is a prefix of the same stream.

Each size runs the real corpus stage (`tasks.stage.run_stage` on a local ArtifactStore, as
tests/tasks/corpus does) in a fresh child process under a hard address-space cap
(RLIMIT_AS, `--cap-gib`), with the filters a user runs at scale (min 3 and max 64 English
words, length ratio <= 3, exact dedupe, no sample: every surviving group is written) and
near_dedupe off and on; it reports wall time (source fingerprinting included), lines/s,
peak RSS (VmHWM) and the peak over the memory after imports.

    python benchmarks/corpus_scale.py [--lines 1000000 3000000 10000000 30000000]
        [--near off on] [--near-max N] [--extrapolate 100000000] [--dir /tmp/corpus17] [--cap-gib 8]

`--extrapolate N` fits seconds = a + b * lines and peak MiB = c + d * lines over the sizes
measured and predicts N; the stated error is that of the same fit made without the largest
size, predicting it (as benchmarks/corpus_stream.py does).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
VOCABULARY = 30_000
BLOCK_LINES = 100_000
DUPLICATE, NEAR_DUPLICATE, CUT_PIVOT, EMPTY = 0.03, 0.02, 0.005, 0.001
FILTERS = {"min_words": 3, "max_words": 64, "word_filter_langs": ["en"], "max_length_ratio": 3.0, "dedupe": True}
LATIN = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
# what a child hitting RLIMIT_AS prints (Python, Rust/polars, jemalloc, C++, the loader)
OUT_OF_MEMORY = (
    "MemoryError",
    "memory allocation",
    "Cannot allocate memory",
    "bad_alloc",
    "thread creation failed",
    "failed to map segment",
)
CYRILLIC = np.array(list("аеіоұүыуқғнрлтсдмзбкжшпгйяхвцчщэюфёъь"))


def vocabulary(letters: np.ndarray, rng: np.random.Generator, size: int = VOCABULARY) -> pa.Array:
    """`size` distinct lowercase words, about 4 letters at the frequent end and 11 at the rare end."""
    words: dict[str, None] = {}
    while len(words) < size:
        lengths = np.clip(rng.poisson(3 + 7 * np.arange(size) / size) + 1, 1, 18)
        text = "".join(rng.choice(letters, int(lengths.sum())))
        ends = np.cumsum(lengths)
        for end, length in zip(ends.tolist(), lengths.tolist()):
            words.setdefault(text[end - length : end])
            if len(words) == size:
                break
    return pa.array(list(words), type=pa.string())


def _join(words: pa.Array, ids: np.ndarray, lengths: np.ndarray) -> pa.Array:
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int32)
    return pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), pc.take(words, pa.array(ids))), " ")


def generate_blocks(lines: int, seed: int = 17) -> Iterator[tuple[pa.Array, pa.Array]]:
    """(English lines, Kazakh lines) in blocks of BLOCK_LINES; the first N lines never depend on `lines`."""
    rng = np.random.default_rng(seed)
    en_words, kk_words = vocabulary(LATIN, rng), vocabulary(CYRILLIC, rng)
    frequency = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.05
    # word id of each of 2**20 equal slices of the Zipf-like distribution (a table lookup per word)
    quantiles = (np.arange(1 << 20) + 0.5) / (1 << 20)
    word_of = np.minimum(np.searchsorted(np.cumsum(frequency / frequency.sum()), quantiles), VOCABULARY - 1).astype(np.int32)
    years = pa.array([f" ({y})." for y in range(1950, 2025)])
    previous: tuple[pa.Array, pa.Array] | None = None
    for start in range(0, lines, BLOCK_LINES):
        n = BLOCK_LINES  # whole blocks, so a prefix is the same whatever `lines` is; the last is cut
        lengths = np.clip(np.rint(rng.lognormal(np.log(17), 0.55, n)), 1, 120).astype(np.int64)
        ids = word_of[rng.integers(0, 1 << 20, int(lengths.sum()))]
        en, kk = _join(en_words, ids, lengths), _join(kk_words, ids, lengths)
        # noise: rows copied from earlier rows (this block's or the one before), on both sides
        pool_en = en if previous is None else pa.concat_arrays([previous[0], en])
        pool_kk = kk if previous is None else pa.concat_arrays([previous[1], kk])
        offset = 0 if previous is None else len(previous[0])
        source = np.arange(offset, offset + n)
        kind = rng.random(n)
        copied = kind < DUPLICATE + NEAR_DUPLICATE
        earliest = offset + np.arange(n)  # a row is copied from a row before it
        source[copied] = (rng.random(int(copied.sum())) * np.maximum(earliest[copied], 1)).astype(np.int64)
        source[copied & (earliest == 0)] = offset  # the very first row has nothing before it
        en, kk = pc.take(pool_en, pa.array(source)), pc.take(pool_kk, pa.array(source))
        near = pa.array((kind >= DUPLICATE) & copied)
        year = pc.take(years, pa.array(rng.integers(0, len(years), n)))
        en = pc.if_else(near, pc.binary_join_element_wise(pc.utf8_capitalize(en), year, ""), en)
        kk = pc.if_else(near, pc.binary_join_element_wise(pc.utf8_capitalize(kk), year, ""), kk)
        cut = pa.array((kind >= DUPLICATE + NEAR_DUPLICATE) & (kind < DUPLICATE + NEAR_DUPLICATE + CUT_PIVOT))
        kk = pc.if_else(cut, pc.utf8_slice_codeunits(kk, 0, 4), kk)
        empty = pa.array(kind >= 1 - EMPTY)
        en = pc.if_else(empty, pa.scalar("", pa.string()), en)
        previous = (en, kk)
        take = min(n, lines - start)
        yield en.slice(0, take), kk.slice(0, take)


def _text(lines: pa.Array) -> bytes:
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()), lines), "\n")
    return joined[0].as_buffer().to_pybytes() + b"\n"


def generate(directory: Path, sizes: Sequence[int], seed: int = 17) -> dict[int, dict[str, Path]]:
    """Write `{N}.en` / `{N}.kk` for every N in `sizes`, streaming, in one pass over the largest."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {n: {lang: directory / f"{n}.{lang}" for lang in ("en", "kk")} for n in sizes}
    handles = {n: {lang: open(path, "wb") for lang, path in paths.items()} for n, paths in files.items()}
    try:
        written = 0
        for en, kk in generate_blocks(max(sizes), seed):
            whole = {"en": _text(en), "kk": _text(kk)}  # joined once, written to every file it fits in
            for n, pair in handles.items():
                take = min(len(en), n - written)
                if take == len(en):
                    pair["en"].write(whole["en"])
                    pair["kk"].write(whole["kk"])
                elif take > 0:
                    pair["en"].write(_text(en.slice(0, take)))
                    pair["kk"].write(_text(kk.slice(0, take)))
            written += len(en)
    finally:
        for pair in handles.values():
            for handle in pair.values():
                handle.close()
    return files


def corpus_config(files: dict[str, str], near: bool) -> dict:
    return {"sources": [{"name": "scale", "kind": "text", "files": files}], "filters": {**FILTERS, "near_dedupe": near}}


def child(files: dict[str, str], near: bool, root: str) -> dict:
    """Run the stage here (a fresh process) and return its figures."""
    from benchmarks.shapes import peak_rss_bytes
    from storage import ArtifactStore
    from tasks.corpus.config import CorpusConfig
    from tasks.corpus.stage import CORPUS_STAGE
    from tasks.stage import run_stage

    after_imports = peak_rss_bytes()
    config = CorpusConfig.model_validate(corpus_config(files, near))
    started = time.perf_counter()
    _, manifest = run_stage(ArtifactStore(root), CORPUS_STAGE, config, {})
    seconds = time.perf_counter() - started
    peak = peak_rss_bytes()
    return {
        "seconds": seconds,
        "peak_mib": peak / 2**20,
        "imports_mib": after_imports / 2**20,
        "rows_in": manifest.rows_in,
        "rows_out": manifest.rows_out,
        "dropped": manifest.dropped,
    }


def measure(files: dict[str, Path], near: bool, root: str, cap_gib: float) -> dict:
    """`child` in a fresh process under an address-space cap; {"error": ...} when it did not fit or failed."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps({k: str(v) for k, v in files.items()})]
    command += ["--near", "on" if near else "off", "--root", root, "--cap-gib", str(cap_gib)]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    shutil.rmtree(root, ignore_errors=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        stderr = result.stderr.strip().splitlines()
        signs = [line for line in stderr if any(sign in line for sign in OUT_OF_MEMORY)]
        last = (signs or stderr or result.stdout.strip().splitlines() or ["no output"])[-1]
        if signs or result.returncode in (-6, -9, 134, 137):  # MemoryError, or an abort/kill in native code
            return {"error": f"did not fit under the {cap_gib:g} GiB cap (exit {result.returncode}: {last[:160]})"}
        return {"error": f"exit {result.returncode}: {last[:200]}"}
    return json.loads(lines[-1])


def fit(sizes: Sequence[int], values: Sequence[float], target: int) -> tuple[float, float, float]:
    """(slope, prediction at `target`, relative error): a least-squares line through (sizes, values);
    the error is |fit without the largest size, at it - measured| / measured (needs 3 sizes)."""
    x, y = np.asarray(sizes, dtype=float), np.asarray(values, dtype=float)
    if len(x) < 3:
        raise ValueError(f"an extrapolation with a stated error needs at least 3 sizes, got {len(x)}")
    slope, intercept = np.polyfit(x, y, 1)
    held = np.polyfit(x[:-1], y[:-1], 1)
    error = abs(float(np.polyval(held, x[-1])) - y[-1]) / abs(y[-1])
    return float(slope), float(intercept + slope * target), float(error)


def extrapolate(sizes: Sequence[int], results: Sequence[dict], target: int) -> dict:
    seconds = [r["seconds"] for r in results]
    peaks = [r["peak_mib"] for r in results]
    _, t, err_t = fit(sizes, seconds, target)
    per_line_mib, m, err_m = fit(sizes, peaks, target)
    return {
        "lines": target,
        "seconds": t,
        "lines_per_s": target / t,
        "seconds_error": err_t,
        "peak_mib": max(m, max(peaks)),
        "peak_error": err_m,
        "bytes_per_line": per_line_mib * 2**20,
    }


def run(
    sizes: Sequence[int], nears: Sequence[bool], directory: Path, cap_gib: float, near_max: int | None = None
) -> dict[bool, list[dict]]:
    started = time.perf_counter()
    files = generate(directory, sizes)
    print(
        f"generated {max(sizes):,} line pairs (+ prefixes) in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True
    )
    results: dict[bool, list[dict]] = {near: [] for near in nears}
    try:
        for near in nears:
            for n in sorted(sizes):
                if near and near_max is not None and n > near_max:
                    continue
                load = os.getloadavg()[0]
                result = measure(files[n], near, str(directory / f"store-{n}-{int(near)}"), cap_gib)
                result["lines"] = n
                result["load_before_after"] = [round(load, 2), round(os.getloadavg()[0], 2)]
                results[near].append(result)
                print(f"  {n:,} lines, near_dedupe {'on' if near else 'off'}: {json.dumps(result)}", file=sys.stderr, flush=True)
    finally:
        for paths in files.values():
            for path in paths.values():
                path.unlink(missing_ok=True)
    return results


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: lines/s and peak MiB at each size vs the same run at the smallest."""
    sizes = [20_000, 100_000] if quick else [1_000_000, 3_000_000, 10_000_000]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        results = run(sizes, [False, True], Path(tmp), cap_gib=8, near_max=sizes[1])  # near_dedupe on is ~3x slower
    for near, measured in results.items():
        base = measured[0]
        for result in measured[1:]:
            case = f"{result['lines']:,} vs {base['lines']:,} line pairs, near_dedupe {'on' if near else 'off'}"
            if "error" in result or "error" in base:
                raise RuntimeError(f"{case}: {result.get('error') or base.get('error')}")
            name = f"at {base['lines']:,}"
            rows.append(
                {
                    "case": case,
                    "measure": "lines/s",
                    "stage": result["lines"] / result["seconds"],
                    "reference": base["lines"] / base["seconds"],
                    "reference_name": name,
                    "higher_is_better": True,
                }
            )
            rows.append(
                {
                    "case": case,
                    "measure": "peak MiB",
                    "stage": result["peak_mib"],
                    "reference": base["peak_mib"],
                    "reference_name": name,
                    "higher_is_better": False,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000, 30_000_000])
    parser.add_argument("--near", choices=["off", "on"], nargs="+", default=["off", "on"])
    parser.add_argument("--near-max", type=int, help="largest size near_dedupe on runs at (it is the slower one)")
    parser.add_argument("--extrapolate", type=int, help="lines to extrapolate time and peak memory to (e.g. 100000000)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "corpus_scale")
    parser.add_argument("--cap-gib", type=float, default=8.0, help="RLIMIT_AS of each stage process")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        cap = int(args.cap_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        sys.path.insert(0, str(REPO))
        print(json.dumps(child(json.loads(args.child), args.near == ["on"], args.root)))
        return
    nears = [value == "on" for value in args.near]
    results = run(args.lines, nears, args.dir, args.cap_gib, args.near_max)
    print(
        f"{'near_dedupe':>11} | {'lines':>11} | {'seconds':>8} | {'lines/s':>9} | {'peak MiB':>8} | {'after imports':>13} | rows out"
    )
    for near, measured in results.items():
        for r in measured:
            if "error" in r:
                print(f"{'on' if near else 'off':>11} | {r['lines']:>11,} | {r['error']}")
                continue
            print(
                f"{'on' if near else 'off':>11} | {r['lines']:>11,} | {r['seconds']:>8.1f} | {r['lines'] / r['seconds']:>9,.0f} | "
                f"{r['peak_mib']:>8,.0f} | {r['imports_mib']:>13,.0f} | {r['rows_out']:,} {json.dumps(r['dropped'])}"
            )
        ok = [r for r in measured if "error" not in r]
        if args.extrapolate and len(ok) >= 3:
            e = extrapolate([r["lines"] for r in ok], ok, args.extrapolate)
            print(
                f"near_dedupe {'on' if near else 'off'}, extrapolated to {e['lines']:,} lines: {e['lines_per_s']:,.0f} lines/s "
                f"({e['seconds']:,.0f} s, +-{100 * e['seconds_error']:.0f}%), peak {e['peak_mib']:,.0f} MiB (+-{100 * e['peak_error']:.0f}%), "
                f"memory slope {e['bytes_per_line']:.1f} bytes/line; errors: the fit without {ok[-1]['lines']:,} lines predicting it"
            )
            measured.append({"extrapolated": e})
    if args.json:
        args.json.write_text(json.dumps({("on" if k else "off"): v for k, v in results.items()}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
