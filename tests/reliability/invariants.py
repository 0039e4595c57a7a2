"""What must hold in a store at any moment, whatever was killed when (local roots).

`check_store` looks at everything a reader could see: every committed artifact is whole
(verify, and its tables read), every visible data or attached file is a whole file (byte-equal
to the same file of an uninterrupted reference run, and whole Parquet), every shard record
lists files that are there with its checksums. It returns the shard records seen, so that a
later check can prove none of them was rewritten (no completed shard recomputed).

Files are compared by SHA-256, except the few that record how long a run took (`VOLATILE`):
those are compared by the SHA-256 of their JSON without the timing keys, so that a resumed run
still has to write every other byte exactly as the uninterrupted run did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pyarrow.parquet as pq

from storage import ArtifactStore, ShardRecord
from storage.verify import verify_artifact

# (stage, path pattern inside the artifact) -> keys that hold wall-clock timings (differ run to run)
VOLATILE: dict[tuple[str, str], tuple[str, ...]] = {
    ("train", "files/metrics.json"): ("train_seconds", "examples_per_second"),
    # MTEB result files carry the seconds the benchmark took (MTEB's `evaluation_time`)
    ("evaluate", "files/mteb/*.json"): ("evaluation_time",),
}


def volatile_keys(stage: str, path: str) -> tuple[str, ...]:
    return next((keys for (s, pattern), keys in VOLATILE.items() if s == stage and fnmatch(path, pattern)), ())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def without_timings(data: bytes, keys: tuple[str, ...]) -> str:
    """SHA-256 of a JSON object without `keys` (marked, so it never equals a plain checksum)."""
    value = json.loads(data)
    for key in keys:
        value.pop(key, None)
    return "no-timings:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def comparable_digest(rel: str, data: bytes) -> str:
    """The digest compared with the reference run for `stage/key/path`."""
    stage, _, path = rel.split("/", 2)
    keys = volatile_keys(stage, path)
    return without_timings(data, keys) if keys else hashlib.sha256(data).hexdigest()


def is_temporary(path: Path) -> bool:
    """Names the store gives files before they are whole: dot-temps and `*.tmp-<uuid>`."""
    return path.name.startswith(".") or ".tmp-" in path.name


@dataclass(frozen=True)
class Marker:
    mtime_ns: int
    sha256: str


def artifact_files(root: Path | str) -> dict[str, str]:
    """Final files of every committed artifact: 'stage/key/path' -> sha256 (from the manifests;
    for `VOLATILE` files, the digest without timings, read from the store: local or s3://)."""
    store = ArtifactStore(root)
    files = {}
    for m in store.list_manifests():
        for f in m.files:
            if "events.out.tfevents." in f.path:
                # TensorBoard event files are named and stamped by wall clock and pid; a resumed
                # run writes two (the second drops what the first logged after its checkpoint).
                # Their scalars after a resume are checked in tests/tasks/train/test_trainer.py.
                files[f"{m.stage}/{m.key}/{f.path.rsplit('/', 1)[0]}/events.out.tfevents.*"] = "tensorboard event files"
            elif volatile_keys(m.stage, f.path):
                data = store.backend.fs.cat_file(f"{store.artifact_dir(m.stage, m.key)}/{f.path}")
                files[f"{m.stage}/{m.key}/{f.path}"] = comparable_digest(f"{m.stage}/{m.key}/{f.path}", data)
            else:
                files[f"{m.stage}/{m.key}/{f.path}"] = f.sha256
    return files


def check_store(root: Path, reference: dict[str, str] | None = None) -> dict[str, Marker]:
    """Assert the reader-visible invariants; return shard records: path -> (mtime, sha256)."""
    store = ArtifactStore(root)
    for manifest in store.list_manifests():
        problems = verify_artifact(store, manifest.stage, manifest.key)
        assert problems == [], f"committed {manifest.stage}/{manifest.key[:12]} is not whole: {problems}"
        if manifest.table_files:
            assert store.read_table(manifest.stage, manifest.key).num_rows == manifest.rows_out
    markers: dict[str, Marker] = {}
    if not root.exists():
        return markers
    for artifact in (p for p in root.glob("*/*") if p.is_dir() and p.parent.name != "refs"):
        rel_artifact = f"{artifact.parent.name}/{artifact.name}"
        for path in artifact.rglob("*"):
            if not path.is_file() or is_temporary(path):
                continue
            rel = f"{rel_artifact}/{path.relative_to(artifact).as_posix()}"
            if path.parent.name == "shards":
                record = ShardRecord.model_validate_json(path.read_bytes())
                for entry in record.files:
                    listed = artifact / entry.path
                    assert listed.is_file(), f"shard record {rel} lists {entry.path}, which is not there"
                    assert listed.stat().st_size == entry.bytes and sha256(listed) == entry.sha256, (
                        f"{rel}: {entry.path} differs from its record"
                    )
                markers[rel] = Marker(path.stat().st_mtime_ns, sha256(path))
                continue
            if path.name == "manifest.json":
                continue
            if reference is not None and rel in reference:
                assert comparable_digest(rel, path.read_bytes()) == reference[rel], (
                    f"visible file {rel} is not the whole file an uninterrupted run writes"
                )
            if path.suffix == ".parquet":
                pq.read_table(path)  # a half-written Parquet file has no footer and fails here
    return markers


def assert_markers_unchanged(before: dict[str, Marker], root: Path) -> None:
    """Shard records seen earlier are untouched: the resumed run did not recompute their shards."""
    for rel, marker in before.items():
        path = root / rel
        assert path.is_file(), f"shard record {rel} disappeared"
        now = Marker(path.stat().st_mtime_ns, sha256(path))
        assert now == marker, f"completed shard {rel} was recomputed (record rewritten)"
