"""`xlembed plan` over large unchanged inputs: the content-hash index vs hashing every time.

Artifact keys name local inputs by content (sha256). A Parquet dataset folder of synthetic
files (1 GiB in 64 files; --quick: 64 MiB in 16) is the one source of a corpus-only pipeline;
the plan is made three times in this process:
  first    an empty hash index: every file is read and hashed (from the page cache, since the
           files were just written; cold data reads slower)
  cached   the index knows every file unchanged: only stat calls and index lookups
  no index XLEMBED_HASH_INDEX=off: every file hashed again, as without the index
and the cached plan's time is compared with hashing every time. The files are left older
than the index's racy window (2 s) first, as real inputs are: a file modified within it of
being hashed is hashed again next time.

    python benchmarks/plan_hashing.py [--quick] [--files 64] [--mib-per-file 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_inputs(folder: Path, files: int, mib_per_file: int) -> int:
    """`files` parts of distinct pseudo-random bytes; returns the total size."""
    folder.mkdir(parents=True)
    block = os.urandom(1 << 20)
    for i in range(files):
        with open(folder / f"part-{i:04d}.parquet", "wb") as f:
            for j in range(mib_per_file):
                f.write(i.to_bytes(4, "little") + j.to_bytes(4, "little") + block[8:])
    return files * mib_per_file << 20


def plan_once(config_path: Path) -> tuple[float, str]:
    from flows.config import load_config
    from flows.plan import make_plan
    from flows.stages import stage_registry
    from storage import ArtifactStore

    started = time.perf_counter()
    config = load_config(config_path)
    plan = make_plan(config, ArtifactStore(config.settings.root), stage_registry())
    return time.perf_counter() - started, plan.notes()[-1]


def measure(files: int, mib_per_file: int) -> dict[str, float | str]:
    sys.path.insert(0, str(REPO))
    from storage import content_hash

    with tempfile.TemporaryDirectory(prefix="xlembed-plan-hashing-") as tmp:
        root = Path(tmp)
        total = write_inputs(root / "dataset", files, mib_per_file)
        config = root / "pipeline.toml"
        config.write_text(
            f'[pipeline]\nname = "bench"\nroot = "{root / "artifacts"}"\n\n'
            f'[corpus]\n[[corpus.sources]]\nname = "big"\nkind = "parquet"\npath = "{root / "dataset"}"\ncolumns = {{ en = "en", kk = "kk" }}\n',
            encoding="utf-8",
        )
        time.sleep(content_hash.RACY_NS / 1e9 + 0.1)  # inputs older than the racy window
        previous = os.environ.get(content_hash.INDEX_ENV)
        try:
            os.environ[content_hash.INDEX_ENV] = str(root / "hash-index.sqlite")
            first, first_note = plan_once(config)
            cached, cached_note = plan_once(config)
            os.environ[content_hash.INDEX_ENV] = "off"
            every_time, _ = plan_once(config)
        finally:
            if previous is None:
                os.environ.pop(content_hash.INDEX_ENV, None)
            else:
                os.environ[content_hash.INDEX_ENV] = previous
    return {
        "bytes": total,
        "first": first,
        "cached": cached,
        "every_time": every_time,
        "first_note": first_note,
        "cached_note": cached_note,
    }


def run_benchmark(quick: bool) -> list[dict]:
    """benchmarks/run_all.py protocol: plan seconds with the index vs hashing every time."""
    files, mib = (16, 4) if quick else (64, 16)
    result = measure(files, mib)
    case = f"{result['bytes'] / 2**30:.2f} GiB in {files} files, unchanged"
    return [
        {
            "case": case,
            "measure": "plan s, index warm",
            "stage": result["cached"],
            "reference": result["every_time"],
            "reference_name": "hash every time",
            "higher_is_better": False,
        },
        {
            "case": case,
            "measure": "plan s, first (index empty)",
            "stage": result["first"],
            "reference": result["every_time"],
            "reference_name": "hash every time",
            "higher_is_better": False,
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="64 MiB in 16 files instead of 1 GiB in 64")
    parser.add_argument("--files", type=int)
    parser.add_argument("--mib-per-file", type=int)
    args = parser.parse_args()
    files = args.files or (16 if args.quick else 64)
    mib = args.mib_per_file or (4 if args.quick else 16)
    result = measure(files, mib)
    print(f"inputs: {result['bytes'] / 2**20:,.0f} MiB in {files} files")
    print(f"first plan (index empty):   {result['first']:.3f} s   [{result['first_note']}]")
    print(f"cached plan (index warm):   {result['cached']:.3f} s   [{result['cached_note']}]")
    print(f"plan hashing every time:    {result['every_time']:.3f} s")
    print(f"cached plan is {result['every_time'] / result['cached']:.1f}x faster than hashing every time")


if __name__ == "__main__":
    main()
