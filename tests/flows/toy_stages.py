"""Two small stages downstream of the real corpus stage, for testing DAG semantics.

`lengths` reads the corpus and writes one row per corpus row with its text length;
`histogram` reads `lengths` and writes a count per length bucket. They are real stages
(config, schema, shards, pure functions), just tiny.
"""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from storage import ArtifactStore, ShardRecord
from tasks.corpus import CORPUS_STAGE
from tasks.shard_context import ShardContext
from tasks.stage import Inputs, ShardSpec, Stage
from tasks.stage_config import StageConfig


class LengthsConfig(StageConfig):
    shards: int = 2
    unit: str = "chars"


LENGTHS_SCHEMA = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("length", pa.int64(), nullable=False)])


def plan_lengths(config: LengthsConfig, inputs: Inputs) -> list[ShardSpec]:
    return [ShardSpec(f"part-{i}", {"index": i}) for i in range(config.shards)]


def build_lengths(config: LengthsConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    delay = float(os.environ.get("TOY_SHARD_SECONDS", "0"))
    if delay:
        time.sleep(delay)
    table = inputs["corpus"].read_table(["id", "text"])
    n = table.num_rows
    lo, hi = shard.params["index"] * n // config.shards, (shard.params["index"] + 1) * n // config.shards
    part = table.slice(lo, hi - lo)
    context.read(part.num_rows)
    lengths = pc.utf8_length(part["text"]) if config.unit == "chars" else pc.binary_length(part["text"])
    yield pa.table({"id": part["id"], "length": pc.cast(lengths, pa.int64())})


class HistogramConfig(StageConfig):
    bucket: int = 10


HISTOGRAM_SCHEMA = pa.schema([pa.field("bucket", pa.int64(), nullable=False), pa.field("count", pa.int64(), nullable=False)])


def plan_histogram(config: HistogramConfig, inputs: Inputs) -> list[ShardSpec]:
    return [ShardSpec("all")]


def build_histogram(config: HistogramConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    if "lengths" in inputs:
        lengths = inputs["lengths"].read_table(["length"])["length"]
    else:  # the optional-input variant without a lengths stage: measure the corpus itself
        lengths = pc.cast(pc.utf8_length(inputs["corpus"].read_table(["text"])["text"]), pa.int64())
    context.read(len(lengths))
    buckets = pc.multiply(pc.divide(lengths, config.bucket), config.bucket)
    counts = buckets.value_counts()
    yield pa.table({"bucket": counts.field("values"), "count": counts.field("counts")}).sort_by("bucket")


def one_pixel_png(grey: int) -> bytes:
    """A valid 1x1 greyscale PNG, without matplotlib (the toy stages stay fast)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes([0, grey]))) + chunk(b"IEND", b"")


def summarize_histogram(
    config: HistogramConfig, store: ArtifactStore, key: str, records: list[ShardRecord], workdir: Path
) -> Mapping[str, Path]:
    """A human report beside the table, with a figure linked as evaluate's report links its
    figures (the flow shows report.md in the Prefect UI with the figures inlined)."""
    folder = workdir / "report"
    folder.mkdir(parents=True, exist_ok=True)
    # a table wider than the UI's content column, as evaluate's per-language tables are
    metrics = [f"accuracy_direction_{n}" for n in range(6)]
    header = ["Language / pair"] + [h for m in metrics for h in (m, f"Δ vs untrained base ({m})")]
    table = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    table += [f"| lang_{r} → eng_Latn | " + " | ".join(f"{r}{c}.0" for c in range(len(header) - 1)) + " |" for r in range(3)]
    (folder / "report.md").write_text(
        f"# Histogram\n\nbucket = {config.bucket}\n\n" + "\n".join(table) + "\n\n![Lengths](lengths.png)\n", encoding="utf-8"
    )
    (folder / "lengths.png").write_bytes(one_pixel_png(config.bucket % 256))
    return {"report/report.md": folder / "report.md", "report/lengths.png": folder / "lengths.png"}


LENGTHS_STAGE = Stage("lengths", "1", LengthsConfig, LENGTHS_SCHEMA, plan_lengths, build_lengths, inputs=("corpus",))
HISTOGRAM_STAGE = Stage(
    "histogram",
    "1",
    HistogramConfig,
    HISTOGRAM_SCHEMA,
    plan_histogram,
    build_histogram,
    inputs=("lengths",),
    summarize=summarize_histogram,
)

PIPELINE_STAGES = (CORPUS_STAGE, LENGTHS_STAGE, HISTOGRAM_STAGE)

# `histogram` with `lengths` as an optional input, for the optional-input tests.
OPTIONAL_HISTOGRAM_STAGE = Stage(
    "histogram",
    "1",
    HistogramConfig,
    HISTOGRAM_SCHEMA,
    plan_histogram,
    build_histogram,
    inputs=("corpus",),
    optional_inputs=("lengths",),
)
OPTIONAL_INPUT_STAGES = (CORPUS_STAGE, LENGTHS_STAGE, OPTIONAL_HISTOGRAM_STAGE)


# Stages that ask for resources (`Stage.resources`), for the per-stage GPU tests: `encode` names
# a device in its config (unset: cuda when there is one), `nested` in a backend's table, and
# `declared` is declared a GPU stage. They plan no shards; only what they ask for is tested.
class EncodeConfig(StageConfig):
    device: str | None = None


class BackendSettings(StageConfig):
    device: str = "cuda"


class NestedConfig(StageConfig):
    backend: BackendSettings = BackendSettings()


def plan_nothing(config: StageConfig, inputs: Inputs) -> list[ShardSpec]:
    return []


def build_nothing(config: StageConfig, inputs: Inputs, shard: ShardSpec, context: ShardContext) -> Iterator[pa.Table]:
    yield from ()


GPU_STAGES = (
    CORPUS_STAGE,
    Stage("encode", "1", EncodeConfig, None, plan_nothing, build_nothing, inputs=("corpus",)),
    Stage("nested", "1", NestedConfig, None, plan_nothing, build_nothing, inputs=("corpus",)),
    Stage("declared", "1", StageConfig, None, plan_nothing, build_nothing, inputs=("corpus",), uses_gpu=True),
)
