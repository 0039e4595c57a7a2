"""The `lid` filter's cost: the corpus stage with and without it, on the same input.

Input: `--rows` corpus rows, half English and half Kazakh groups of real sentences (FLORES-200
dev, cycled, each line given a number so that dedupe keeps them all; synthetic words when
../shared/data is absent). Per size the stage runs in this process into fresh stores, back to
back: without LID; with `lid = {backend = "cld2"}` on every row (the path before
tasks/corpus/sampled_lid.py, `stage.LID_ON_SAMPLE_CANDIDATES = False`); with LID on the
sample's candidates only (the default); and, read whole (no sample), without and with LID.
Every row is long enough to be checked. Prints rows/s and the share of the stage's time LID
takes in each case, and checks that both LID paths keep the same rows.

    python benchmarks/lid_throughput.py [--rows 100000 1000000] [--sample 38000]
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


def run_once(files: dict[str, str], root: str, sample: int | None, lid: bool, candidates_only: bool = True) -> dict:
    sys.path.insert(0, str(REPO))
    from storage import ArtifactStore
    from tasks.corpus import CORPUS_STAGE, stage
    from tasks.corpus.config import CorpusConfig
    from tasks.corpus.lid import lid_check
    from tasks.stage import run_stage

    filters: dict = {"lid": {"backend": "cld2"}} if lid else {}
    config = CorpusConfig.model_validate(
        {"sources": [{"name": "bench", "kind": "text", "files": files, "sample": sample}], "filters": filters}
    )
    if lid:
        lid_check(config.filters.lid)  # the backend loads once per process: not part of the rate
    stage.LID_ON_SAMPLE_CANDIDATES = candidates_only
    store = ArtifactStore(root)
    try:
        started = time.perf_counter()
        _, manifest = run_stage(store, CORPUS_STAGE, config, {})
        seconds = time.perf_counter() - started
    finally:
        stage.LID_ON_SAMPLE_CANDIDATES = True
    ids = store.read_table("corpus", manifest.key).column("id").to_pylist()
    checked = manifest.metrics.get("lid", {}).get("checked_rows")
    return {"s": seconds, "dropped": dict(manifest.dropped), "ids": ids, "checked_rows": checked}


def measure(rows: int, sample: int | None, tmp: str) -> dict:
    """The stage on `rows` rows: without LID, LID on every row, LID on the candidates; and read whole."""
    files = write_inputs(Path(tmp), rows // 2)
    out = {"rows": rows}
    out["plain"] = run_once(files, f"{tmp}/plain-{rows}", sample, lid=False)
    out["every_row"] = run_once(files, f"{tmp}/every-{rows}", sample, lid=True, candidates_only=False)
    out["candidates"] = run_once(files, f"{tmp}/cand-{rows}", sample, lid=True)
    if out["every_row"]["ids"] != out["candidates"]["ids"]:
        raise AssertionError(f"{rows:,} rows: LID on the candidates kept other rows than LID on every row")
    out["whole_plain"] = run_once(files, f"{tmp}/whole-plain-{rows}", None, lid=False)
    out["whole_lid"] = run_once(files, f"{tmp}/whole-lid-{rows}", None, lid=True)
    return out


def share(with_lid: dict, without: dict) -> float:
    return (with_lid["s"] - without["s"]) / with_lid["s"]


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: rows/s of the corpus stage with the lid filter vs without."""
    sizes = [100_000] if quick else [1_000_000]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in sizes:
            m = measure(rows, 38_000, tmp)
            out.append(
                {
                    "case": f"{rows:,} rows (en + kk), sample 38,000, cld2 on the sample's candidates",
                    "measure": "rows/s",
                    "stage": rows / m["candidates"]["s"],
                    "reference": rows / m["plain"]["s"],
                    "reference_name": "no lid filter",
                    "higher_is_better": True,
                    "note": f"LID is {share(m['candidates'], m['plain']):.0%} of the stage's time (goal: at most 30%); "
                    f"on every row {share(m['every_row'], m['plain']):.0%}",
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--sample", type=int, default=38_000)
    args = parser.parse_args()
    print("| rows | source | lid | stage | rows/s | lid's share of the time | rows checked | dropped by lid |")
    print("| ---: | --- | --- | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            m = measure(rows, args.sample, tmp)
            cases = [
                (f"sample {args.sample:,}", "none", "plain", None),
                (f"sample {args.sample:,}", "every row", "every_row", "plain"),
                (f"sample {args.sample:,}", "sample candidates", "candidates", "plain"),
                ("read whole", "none", "whole_plain", None),
                ("read whole", "every row", "whole_lid", "whole_plain"),
            ]
            for source, lid, name, reference in cases:
                run = m[name]
                lid_drops = {k: v for k, v in run["dropped"].items() if k.startswith("lid_")}
                checked = "" if run["checked_rows"] is None else f"{run['checked_rows']:,}"
                print(
                    f"| {rows:,} | {source} | {lid} | {run['s']:.1f} s | {rows / run['s']:,.0f} | "
                    f"{'' if reference is None else f'{share(run, m[reference]):.0%}'} | {checked} | "
                    f"{(lid_drops or 'none') if reference else ''} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
