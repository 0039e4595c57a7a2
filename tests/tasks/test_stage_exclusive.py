"""Stages marked one_at_a_time build one shard at a time per process, whatever the thread pool."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from storage import ArtifactStore
from tasks.stage import ShardSpec, Stage, run_shard
from tasks.stage_config import StageConfig

SCHEMA = pa.schema([pa.field("x", pa.int64(), nullable=False)])


class ToyConfig(StageConfig):
    n: int = 1


def toy_stage(name: str, one_at_a_time: bool, seen: list[int]) -> Stage[ToyConfig]:
    lock = threading.Lock()
    running = [0]

    def build(config, inputs, shard, context):
        with lock:
            running[0] += 1
            seen.append(running[0])
        time.sleep(0.3)  # long enough for the other thread to arrive
        with lock:
            running[0] -= 1
        yield pa.table({"x": [1]}, schema=SCHEMA)

    return Stage(
        name=name, code_version="1", config_model=ToyConfig, schema=SCHEMA,
        plan_shards=lambda config, inputs: [], build_shard=build, one_at_a_time=one_at_a_time,
    )  # fmt: skip


@pytest.mark.parametrize("one_at_a_time, most_at_once", [(True, 1), (False, 2)])
def test_one_at_a_time_stages_never_build_two_shards_at_once(tmp_path: Path, one_at_a_time: bool, most_at_once: int) -> None:
    store = ArtifactStore(tmp_path)
    seen: list[int] = []
    stage = toy_stage(f"toy{int(one_at_a_time)}", one_at_a_time, seen)
    shards = [ShardSpec(f"s{i}") for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        records = list(pool.map(lambda shard: run_shard(store, stage, "a" * 64, ToyConfig(), {}, shard), shards))
    assert [r.rows_out for r in records] == [1, 1]
    assert max(seen) == most_at_once


def test_the_checkpoint_lock_file_is_removed_when_the_run_ends_and_waiters_still_exclude_each_other(tmp_path: Path) -> None:
    """Lock files used to pile up, one per run, in the checkpoint folder; removing one while a
    second run waits on it must not let a third run in beside the second."""
    from tasks.train.stage import exclusive_checkpoints

    directory = tmp_path / "checkpoints" / "run-1"
    inside: list[int] = []
    overlaps: list[int] = []
    lock = threading.Lock()

    def train(n: int) -> None:
        with exclusive_checkpoints(directory):
            with lock:
                inside.append(n)
                if len(inside) > 1:
                    overlaps.append(n)
            time.sleep(0.05)
            with lock:
                inside.remove(n)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(train, range(8)))
    assert overlaps == []
    assert list((tmp_path / "checkpoints").iterdir()) == []  # no run-1.lock left behind
