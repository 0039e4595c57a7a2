"""Seeded sampling, dedupe and train/dev split: reproducible, exact, leak-free, flat in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import ArtifactStore, Manifest
from tasks.corpus.config import CorpusConfig
from tasks.corpus.sampling import GroupSelector, SeenHashes, add_hashes
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage

REPO_ROOT = Path(__file__).resolve().parents[3]


def write_lines(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def run(tmp_path: Path, store_dir: str, files: dict[str, str], **settings: Any) -> tuple[Manifest, list[dict[str, Any]]]:
    sample = settings.pop("sample", None)
    source: dict[str, Any] = {"kind": "text", "name": "src", "files": files}
    if sample is not None:
        source["sample"] = sample
    store = ArtifactStore(tmp_path / store_dir)
    config = CorpusConfig.model_validate({"sources": [source], **settings})
    _, manifest = run_stage(store, CORPUS_STAGE, config, {})
    assert manifest.rows_in == manifest.rows_out + sum(manifest.dropped.values())
    rows = store.read_table("corpus", manifest.key).to_pylist()
    assert len(rows) == manifest.rows_out
    return manifest, rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """5000 distinct English/Kazakh pairs."""
    root = tmp_path_factory.mktemp("corpus")
    en = [f"english sentence number {i}" for i in range(5000)]
    kk = [f"қазақша сөйлем {i}" for i in range(5000)]
    return {"en": write_lines(root / "c.en", en), "kk": write_lines(root / "c.kk", kk)}


def groups_of(rows: list[dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["group_id"], []).append(row["text"])
    return {gid: tuple(texts) for gid, texts in out.items()}


def split_of(rows: list[dict[str, Any]]) -> dict[str, str]:
    return {row["group_id"]: row["split"] for row in rows}


# ------------------------------------------------------------------ the stage


def test_same_seed_same_sample_and_other_seed_other_sample(tmp_path: Path, corpus: dict[str, str]) -> None:
    m1, a = run(tmp_path, "a", corpus, sample=400, read_batch_lines=700)
    m2, b = run(tmp_path, "b", corpus, sample=400, read_batch_lines=700)
    assert a == b and m1.key == m2.key
    _, c = run(tmp_path, "c", corpus, sample=400, read_batch_lines=4096)  # batch size is not keyed, nor seen
    assert c == a
    _, d = run(tmp_path, "d", corpus, sample=400, read_batch_lines=700, seed=7)
    overlap = set(groups_of(a)) & set(groups_of(d))
    assert len(overlap) < 100  # two independent 8 % samples share about 32 groups


def test_sample_size_is_exact_and_a_subset_without_duplicates(tmp_path: Path, corpus: dict[str, str]) -> None:
    manifest, rows = run(tmp_path, "s", corpus, sample=1234, read_batch_lines=500)
    groups = groups_of(rows)
    assert len(groups) == 1234 == manifest.metrics["groups"]
    assert manifest.dropped == {"not_sampled": 2 * (5000 - 1234)}
    en = Path(corpus["en"]).read_text(encoding="utf-8").splitlines()
    kk = Path(corpus["kk"]).read_text(encoding="utf-8").splitlines()
    source = {(e, k) for e, k in zip(en, kk)}
    assert set(groups.values()) <= source
    assert len(set(groups.values())) == 1234
    for gid, (e, k) in groups.items():  # the group id points at the line the pair came from
        line = int(gid.rsplit(":", 1)[1])
        assert (en[line - 1], kk[line - 1]) == (e, k)
    # output in source order
    lines = [int(gid.rsplit(":", 1)[1]) for gid in groups]
    assert lines == sorted(lines)


def test_sample_is_the_bottom_k_of_the_seeded_hash(tmp_path: Path, corpus: dict[str, str]) -> None:
    """Uniform and reproducible: exactly the k groups with the smallest hashes, whatever the batching."""
    _, rows = run(tmp_path, "s", corpus, sample=300, read_batch_lines=333, seed=11, dev_fraction=0.2)
    frame = pl.DataFrame(
        {
            "eng_Latn": Path(corpus["en"]).read_text(encoding="utf-8").splitlines(),
            "kaz_Cyrl": Path(corpus["kk"]).read_text(encoding="utf-8").splitlines(),
        }
    )
    hashed = add_hashes(frame, ["eng_Latn", "kaz_Cyrl"], 11, 0.2).sort("h").head(300)
    expected = {(r["eng_Latn"], r["kaz_Cyrl"]): r["split"] for r in hashed.iter_rows(named=True)}
    got = {texts: split_of(rows)[gid] for gid, texts in groups_of(rows).items()}
    assert got == expected


def test_sample_larger_than_the_source_keeps_everything(tmp_path: Path, corpus: dict[str, str]) -> None:
    manifest, rows = run(tmp_path, "s", corpus, sample=10_000, read_batch_lines=999)
    assert len(groups_of(rows)) == 5000 and manifest.dropped == {}


def test_sampling_with_duplicates(tmp_path: Path) -> None:
    """Each distinct group at most once; duplicates and unsampled rows are all counted."""
    lines = [f"line {i % 700}" for i in range(3000)]  # 700 distinct, each 4-5 times
    path = write_lines(tmp_path / "dup.en", lines)
    manifest, rows = run(tmp_path, "s", {"en": path}, sample=500, read_batch_lines=256)
    texts = [r["text"] for r in rows]
    assert len(texts) == 500 == len(set(texts))
    assert set(texts) <= set(lines)
    assert manifest.rows_in == 3000
    assert manifest.dropped["duplicate"] + manifest.dropped["not_sampled"] == 2500
    # a duplicate is never kept in place of its first occurrence: group ids are first lines
    assert all(int(r["group_id"].rsplit(":", 1)[1]) <= 700 for r in rows)
    # without dedupe the sample may hold copies, but stays reproducible
    m2, a = run(tmp_path, "n1", {"en": path}, sample=500, read_batch_lines=256, filters={"dedupe": False})
    _, b = run(tmp_path, "n2", {"en": path}, sample=500, read_batch_lines=64, filters={"dedupe": False})
    assert a == b
    assert len(a) == 500 and m2.dropped == {"not_sampled": 2500}


def test_split_does_not_depend_on_the_sample_size(tmp_path: Path, corpus: dict[str, str]) -> None:
    _, full = run(tmp_path, "full", corpus, read_batch_lines=1000)
    _, small = run(tmp_path, "small", corpus, sample=500, read_batch_lines=1000)
    _, large = run(tmp_path, "large", corpus, sample=2000, read_batch_lines=1000)
    full_split = split_of(full)
    assert set(groups_of(small)) < set(groups_of(large))  # bottom-k samples nest
    for rows in (small, large):
        split = split_of(rows)
        assert all(full_split[gid] == s for gid, s in split.items())
    assert {"train", "dev"} <= set(split_of(small).values())


@pytest.mark.parametrize("fraction", [0.1, 0.3])
def test_dev_fraction_on_20k_groups(tmp_path: Path, fraction: float) -> None:
    path = write_lines(tmp_path / "many.en", [f"sentence {i} of twenty thousand" for i in range(20_000)])
    manifest, rows = run(tmp_path, "s", {"en": path}, dev_fraction=fraction)
    dev = sum(1 for r in rows if r["split"] == "dev") / len(rows)
    assert abs(dev - fraction) < 0.02
    assert manifest.metrics["rows_by_split"] == {"dev": round(dev * 20_000), "train": 20_000 - round(dev * 20_000)}


def test_no_dev_split(tmp_path: Path, corpus: dict[str, str]) -> None:
    _, rows = run(tmp_path, "s", corpus, dev_fraction=0.0)
    assert {r["split"] for r in rows} == {"train"}


def test_any_integer_seed(tmp_path: Path, corpus: dict[str, str]) -> None:
    _, neg = run(tmp_path, "neg", corpus, sample=50, seed=-3)
    _, big = run(tmp_path, "big", corpus, sample=50, seed=2**70)
    assert len(groups_of(neg)) == len(groups_of(big)) == 50


# ------------------------------------------------------------------ units


def selector_frame(h: list[int], seq: list[int], n_rows: int = 1) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "h": pl.Series(h, dtype=pl.UInt64),
            "seq": pl.Series(seq, dtype=pl.UInt64),
            "n_rows": pl.Series([n_rows] * len(h), dtype=pl.UInt32),
        }
    )


def test_group_selector_ties_go_to_source_order() -> None:
    selector = GroupSelector(3, dedupe=False)
    seq = 0
    for batch in ([9, 5, 5], [5, 5, 1], [5, 0]):
        assert list(selector.offer(selector_frame(batch, list(range(seq, seq + len(batch))), n_rows=2))) == []
        seq += len(batch)
    (kept,) = list(selector.finish())
    assert kept["seq"].to_list() == [1, 5, 7]  # h 5 (first seen), 1, 0
    assert selector.unsampled_rows == 2 * 5 and selector.duplicate_rows == 0


def test_group_selector_dedupes_across_batches_without_sampling() -> None:
    selector = GroupSelector(None, dedupe=True)
    out = []
    seq = 0
    for batch in ([1, 2, 2], [], [3, 1], [], [4, 3, 5]):
        for ready in selector.offer(selector_frame(batch, list(range(seq, seq + len(batch))), n_rows=3)):
            out.extend(ready["h"].to_list())
        seq += len(batch)
    assert out == [1, 2, 3, 4, 5]
    assert selector.duplicate_rows == 3 * 3
    assert list(selector.finish()) == []


uint64s = st.integers(0, 2**64 - 1)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.one_of(st.lists(uint64s, max_size=40), st.lists(st.integers(0, 30), max_size=40)), max_size=25),
    probes=st.lists(st.one_of(uint64s, st.integers(0, 30)), max_size=40),
)
def test_seen_hashes_behaves_like_a_set(batches: list[list[int]], probes: list[int]) -> None:
    seen, reference = SeenHashes(), set()
    for batch in batches:
        array = np.array(batch, dtype=np.uint64)
        assert seen.contains(array).tolist() == [x in reference for x in batch]
        seen.add(array)
        reference.update(batch)
        assert len(seen) == len(reference)
        query = np.array(probes + batch, dtype=np.uint64)
        assert seen.contains(query).tolist() == [x in reference for x in probes + batch]
        for level in seen.levels:  # sorted, without repeats, not empty
            assert len(level) and np.all(level[1:] > level[:-1])
        stored = np.concatenate(seen.levels) if seen.levels else np.array([], np.uint64)
        assert len(stored) == len(np.unique(stored))  # levels are disjoint
    # geometric levels: few of them however many batches
    assert len(seen.levels) <= max(1, 2 * int(np.log2(max(len(reference), 1))) + 2)


def test_seen_hashes_random_uint64() -> None:
    rng = np.random.default_rng(0)
    seen, reference = SeenHashes(), set()
    for _ in range(200):
        batch = rng.integers(0, 2**64, size=int(rng.integers(0, 500)), dtype=np.uint64, endpoint=False)
        if len(reference) and rng.random() < 0.5:  # re-offer some known members
            batch = np.concatenate([batch, np.array(list(reference)[:50], dtype=np.uint64)])
        assert seen.contains(batch).tolist() == [int(x) in reference for x in batch]
        fresh = batch[~seen.contains(batch)]
        seen.add(fresh)
        reference.update(int(x) for x in batch)
    assert len(seen) == len(reference)


# ------------------------------------------------------------------ memory

CHILD = r"""
import json, resource, sys
from storage import ArtifactStore
from tasks.corpus.config import CorpusConfig
from tasks.corpus.stage import CORPUS_STAGE
from tasks.stage import run_stage

path, store = sys.argv[1], sys.argv[2]
config = CorpusConfig.model_validate(
    {"sources": [{"kind": "text", "name": "big", "files": {"en": path}, "sample": 1000}], "read_batch_lines": 16384}
)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
_, manifest = run_stage(ArtifactStore(store), CORPUS_STAGE, config, {})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_mb": (after - before) / 1024, "rows_in": manifest.rows_in, "rows_out": manifest.rows_out}))
"""

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore"


def peak_growth_mb(tmp_path: Path, lines: int) -> tuple[float, int]:
    """Peak RSS growth of a fresh process sampling 1000 groups from a `lines`-line file."""
    path = tmp_path / f"big-{lines}.txt"
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{i} {FILLER}\n" for i in range(lines))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(tmp_path / f"store-{lines}")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows_in"] == lines and result["rows_out"] == 1000
    size = path.stat().st_size
    path.unlink()
    return result["peak_mb"], size


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux only")
def test_sampling_a_stream_keeps_memory_flat(tmp_path: Path) -> None:
    small_mb, _ = peak_growth_mb(tmp_path, 200_000)
    large_mb, large_bytes = peak_growth_mb(tmp_path, 2_000_000)
    assert large_bytes > 200 << 20
    assert large_mb < 2 * small_mb + 50, (small_mb, large_mb)
    # ten times the input (230 MB more text) may not cost more than a third of that
    assert large_mb - small_mb < large_bytes * 0.9 / 3 / 2**20, (small_mb, large_mb)
