"""The `lid` filter's cost: the corpus stage with and without it, on the same input.

Input: `--rows` corpus rows, half English and half Kazakh groups of real sentences (FLORES-200
dev, cycled, each line given a number so that dedupe keeps them all; synthetic words when
../shared/data is absent). The stage runs in this process twice per case, into fresh stores:
without LID, then with `lid = {backend = "cld2"}` (every row is long enough to be checked).
Prints rows/s of both and the share of the stage's time the filter takes.

    python benchmarks/lid_throughput.py [--rows 1000000] [--sample 38000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLORES = REPO.parent / "shared" / "data" / "flores200-dev"


def write_inputs(directory: Path, groups: int) -> dict[str, str]:
    langs = {"en": "eng_Latn", "kk": "kaz_Cyrl"}
    files = {}
    for code, flores in langs.items():
        path = FLORES / f"{flores}.dev"
        if path.exists():
            base = path.read_text(encoding="utf-8").splitlines()
        else:  # no ../shared: synthetic sentences (LID then sees one language's words only)
            base = [" ".join(f"word{(i * 7 + j) % 50}" for j in range(12)) for i in range(997)]
        out = directory / f"input.{code}"
        with open(out, "w", encoding="utf-8") as stream:
            for start in range(0, groups, 100_000):
                stream.write("".join(f"{base[i % len(base)]} ({i})\n" for i in range(start, min(groups, start + 100_000))))
        files[code] = str(out)
    return files


def run_once(files: dict[str, str], root: str, sample: int | None, lid: bool) -> tuple[float, dict[str, int]]:
    sys.path.insert(0, str(REPO))
    from storage import ArtifactStore
    from tasks.corpus import CORPUS_STAGE
    from tasks.corpus.config import CorpusConfig
    from tasks.corpus.lid import lid_check
    from tasks.stage import run_stage

    filters: dict = {"lid": {"backend": "cld2"}} if lid else {}
    config = CorpusConfig.model_validate({"sources": [{"name": "bench", "kind": "text", "files": files, "sample": sample}], "filters": filters})
    if lid:
        lid_check(config.filters.lid)  # the backend loads once per process: not part of the rate
    started = time.perf_counter()
    _, manifest = run_stage(ArtifactStore(root), CORPUS_STAGE, config, {})
    return time.perf_counter() - started, dict(manifest.dropped)


def measure(rows: int, sample: int | None, tmp: str) -> dict:
    files = write_inputs(Path(tmp), rows // 2)
    plain, _ = run_once(files, f"{tmp}/plain-{rows}-{sample}", sample, lid=False)
    filtered, dropped = run_once(files, f"{tmp}/lid-{rows}-{sample}", sample, lid=True)
    return {"rows": rows, "plain_s": plain, "lid_s": filtered, "dropped": dropped}


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: rows/s of the corpus stage with the lid filter vs without."""
    sizes = [100_000] if quick else [1_000_000]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in sizes:
            m = measure(rows, 38_000, tmp)
            lid_share = (m["lid_s"] - m["plain_s"]) / m["lid_s"]
            out.append(
                {
                    "case": f"{rows:,} rows (en + kk), sample 38,000, cld2",
                    "measure": "rows/s",
                    "stage": rows / m["lid_s"],
                    "reference": rows / m["plain_s"],
                    "reference_name": "no lid filter",
                    "higher_is_better": True,
                    "note": f"LID is {lid_share:.0%} of the stage's time (goal: at most 30%)",
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--sample", type=int, default=38_000, help="0: keep every group")
    args = parser.parse_args()
    print("| rows | stage without lid | with lid (cld2) | rows/s without | rows/s with | lid's share of the time | dropped by lid |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            m = measure(rows, args.sample or None, tmp)
            share = (m["lid_s"] - m["plain_s"]) / m["lid_s"]
            lid_drops = {k: v for k, v in m["dropped"].items() if k.startswith("lid_")}
            print(
                f"| {rows:,} | {m['plain_s']:.1f} s | {m['lid_s']:.1f} s | {rows / m['plain_s']:,.0f} | {rows / m['lid_s']:,.0f} | "
                f"{share:.0%} | {lid_drops or 'none'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
