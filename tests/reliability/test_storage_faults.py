"""Disk full during a write, and corrupt files behind a manifest.

Disk full is real where the machine lets us mount a small tmpfs (root in a container that
allows it); RLIMIT_FSIZE in a subprocess (writes past the limit fail with EFBIG) needs no
privileges and always runs. Either way the run must fail with one clear line that names the
file, commit nothing, leave nothing half-written in sight, and resume once there is room.

Corruption: a byte flipped, a file truncated, a file swapped for another valid Parquet file,
a file deleted, a model weight file altered. `xlembed artifacts verify` must name each, and
every reader (`read_table`, `iter_batches`, a downstream stage, `local_dir`) must refuse the
file before parsing it.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore, CorruptArtifact, StoreError, StoreWriteError
from tasks.stage import run_stage
from tests.reliability.conftest import driver_command, driver_env
from tests.reliability.invariants import artifact_files, check_store, is_temporary
from tests.reliability.scenarios import corpus_section, dump_spec, scenario


def corpus_config(data: Path, sources: int = 3, lines: int = 6000):
    from tasks.corpus.config import CorpusConfig

    return CorpusConfig.model_validate(corpus_section(data, sources=sources, lines=lines))


def temporaries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and is_temporary(p))


# --------------------------------------------------------------------- disk full
@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not permitted'}); the RLIMIT_FSIZE test covers disk full"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.slow
def test_disk_full_on_a_small_tmpfs_fails_clearly_commits_nothing_and_resumes(tmp_path: Path, record) -> None:
    from tasks.corpus import CORPUS_STAGE

    config = corpus_config(tmp_path / "data")
    reference = ArtifactStore(tmp_path / "reference")
    run_stage(reference, CORPUS_STAGE, config, {})
    with small_tmpfs(tmp_path / "small", "160k") as mount:
        root = mount / "root"
        store = ArtifactStore(root)
        with pytest.raises(StoreWriteError) as caught:
            run_stage(store, CORPUS_STAGE, config, {})
        message = str(caught.value)
        assert caught.value.errno == 28 and "No space left on device" in message and str(root) in message
        assert isinstance(caught.value, OSError) and isinstance(caught.value, StoreError)
        assert store.list_manifests() == [], "an artifact was committed on a full disk"
        done = check_store(root)
        assert temporaries(root) == [], "temporary files were left on the full disk"
        record(
            "disk",
            "disk full (160 KiB tmpfs) while writing corpus part files",
            "clear error, nothing committed",
            f"`{type(caught.value).__name__}: {message[:160]}`; {len(done)} finished shards kept",
        )
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        run_stage(store, CORPUS_STAGE, config, {})
        assert artifact_files(root) == artifact_files(tmp_path / "reference")
        for rel, marker in done.items():
            assert (root / rel).stat().st_mtime_ns == marker.mtime_ns, "a finished shard was recomputed after the disk grew"


def _limit_file_size(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
@pytest.mark.parametrize("stage,limit", [("corpus", 20_000), ("base_model", 60_000)])
def test_file_size_limit_in_a_subprocess_fails_clearly_and_resumes(
    stage: str, limit: int, tmp_path: Path, model_cache: Path, record
) -> None:
    """RLIMIT_FSIZE: every write past `limit` bytes fails (EFBIG) as on a full quota."""
    chosen = scenario(stage)
    data = tmp_path / "data"
    spec = chosen.spec(str(tmp_path / "root"), data, model_cache)
    path = dump_spec(spec, tmp_path / "spec.json")
    limited = subprocess.run(
        driver_command(path),
        env=driver_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size(limit),
    )
    assert limited.returncode == 1, limited.stderr[-2000:]
    last = limited.stderr.strip().splitlines()[-1]
    # the file is named: a store write (StoreWriteError) or the stage's own scratch copy (OSError with both paths)
    assert (
        "File too large" in last
        and str(tmp_path) in last
        and last.split(":")[0].rsplit(".", 1)[-1] in ("StoreWriteError", "OSError")
    ), last
    assert ArtifactStore(tmp_path / "root").list_manifests() == []
    done = check_store(tmp_path / "root")
    record(
        "disk",
        f"file size limit {limit:,} B (RLIMIT_FSIZE) while writing {stage}",
        "clear error, nothing committed",
        f"`{last.split(': ', 1)[-1][:170]}`; {len(done)} finished shards kept",
    )
    resumed = subprocess.run(driver_command(path), env=driver_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    reference_spec = chosen.spec(str(tmp_path / "reference"), data, model_cache)
    subprocess.run(
        driver_command(dump_spec(reference_spec, tmp_path / "ref.json")),
        env=driver_env(tmp_path),
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert artifact_files(tmp_path / "root") == artifact_files(tmp_path / "reference")
    assert temporaries(tmp_path / "root") == []


def test_write_errors_remove_their_temporary_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ArtifactStore(tmp_path / "root")
    key = "a" * 64
    real_open = open

    def failing_open(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if "w" in mode and ".tmp-" in str(path):
            handle.close()
            raise OSError(28, "No space left on device")
        return handle

    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(StoreWriteError, match="cannot write .*manifest.json: No space left on device"):
        store.backend.write_object(f"{store.artifact_dir('embed', key)}/manifest.json", b"{}", exclusive=True)
    monkeypatch.undo()
    source = tmp_path / "weights.bin"
    source.write_bytes(b"x" * 1000)
    monkeypatch.setattr(
        shutil, "copyfile", lambda a, b: (Path(b).write_bytes(b"half"), (_ for _ in ()).throw(OSError(27, "File too large")))[1]
    )
    with pytest.raises(StoreWriteError, match="File too large"):
        store.backend.copy_local_file(str(source), f"{store.artifact_dir('embed', key)}/files/weights.bin")
    assert temporaries(tmp_path / "root") == []


# --------------------------------------------------------------------- corruption
def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def swap_for_other_parquet(path: Path) -> None:
    """A valid Parquet file with other rows: only the checksum can tell."""
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path, compression="zstd")


def delete(path: Path) -> None:
    path.unlink()


CORRUPTIONS = {"flipped byte": flip_byte, "truncated": truncate, "other valid Parquet": swap_for_other_parquet, "deleted": delete}


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> dict:
    """corpus + lengths committed once; each test copies it and corrupts the copy."""
    tmp = tmp_path_factory.mktemp("toy-store")
    spec = scenario("lengths").spec(str(tmp / "root"), tmp / "data", model_cache, upto="lengths")
    subprocess.run(
        driver_command(dump_spec(spec, tmp / "spec.json")), env=driver_env(tmp), check=True, capture_output=True, timeout=300
    )
    return {"root": tmp / "root", "spec": spec}


@pytest.mark.slow
@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_corrupt_parquet_is_found_by_verify_and_refused_by_readers(
    how: str, toy_store: dict, tmp_path: Path, model_cache: Path, record
) -> None:
    root = tmp_path / "root"
    shutil.copytree(toy_store["root"], root)
    store = ArtifactStore(root)
    corpus = store.list_manifests("corpus")[0]
    victim = corpus.table_files[-1].path
    CORRUPTIONS[how](root / "corpus" / corpus.key / victim)

    result = CliRunner().invoke(app, ["artifacts", "verify", "--root", str(root)])
    assert result.exit_code == 1 and "CORRUPT" in result.output and Path(victim).name in result.output, result.output
    with pytest.raises(CorruptArtifact, match=Path(victim).name):
        store.read_table("corpus", corpus.key)
    with pytest.raises(CorruptArtifact):
        list(store.iter_batches("corpus", corpus.key))
    # a downstream stage reading it fails before writing anything of its own
    from tests.flows.toy_stages import HISTOGRAM_STAGE, LENGTHS_STAGE, OPTIONAL_HISTOGRAM_STAGE  # noqa: F401

    config = LENGTHS_STAGE.config_model.model_validate({"shards": 3})
    with pytest.raises(CorruptArtifact):
        run_stage(store, LENGTHS_STAGE, config, {"corpus": corpus.key})
    fresh = [p for p in (root / "lengths").glob("*") if p.name != store.list_manifests("lengths")[0].key]
    assert all(not list(p.rglob("*.parquet")) for p in fresh), "a downstream shard was written from corrupt input"
    record(
        "corrupt",
        f"corpus data file {how} behind its manifest",
        "detected",
        "`artifacts verify` exit 1 naming the file; read_table, iter_batches and the downstream stage refuse it before parsing",
    )


@pytest.mark.slow
def test_corrupt_model_weights_are_refused_before_loading(tmp_path: Path, model_cache: Path, record) -> None:
    spec = scenario("base_model").spec(str(tmp_path / "root"), tmp_path / "data", model_cache)
    subprocess.run(
        driver_command(dump_spec(spec, tmp_path / "spec.json")),
        env=driver_env(tmp_path),
        check=True,
        capture_output=True,
        timeout=300,
    )
    store = ArtifactStore(tmp_path / "root")
    manifest = store.list_manifests("base_model")[0]
    weights = next(f for f in manifest.attached_files if f.path.endswith(".safetensors"))
    from tasks.stage import InputArtifact

    artifact = InputArtifact(store, "base_model", manifest.key)
    assert artifact.local_dir().is_dir()
    flip_byte(tmp_path / "root" / "base_model" / manifest.key / weights.path)
    with pytest.raises(CorruptArtifact, match="model.safetensors"):
        artifact.local_dir()
    record(
        "corrupt",
        "base model weights (safetensors) with a flipped byte",
        "detected",
        "`local_dir()` refuses the artifact before transformers loads it",
    )


@pytest.mark.slow
def test_corrupt_parquet_on_s3_is_refused(
    s3_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_s3fs: None, record
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    root = f"s3://{s3_server.bucket}/{uuid.uuid4().hex}"
    store = ArtifactStore(root)
    from tasks.corpus import CORPUS_STAGE

    ref, manifest = run_stage(store, CORPUS_STAGE, corpus_config(tmp_path / "data", sources=2, lines=500), {})
    assert store.read_table("corpus", ref.key).num_rows == manifest.rows_out
    victim = manifest.table_files[0]
    client = s3_server.client()
    object_key = f"{root.split('/', 3)[3]}/corpus/{ref.key}/{victim.path}"
    body = bytearray(client.get_object(Bucket=s3_server.bucket, Key=object_key)["Body"].read())
    body[len(body) // 2] ^= 0x01
    client.put_object(Bucket=s3_server.bucket, Key=object_key, Body=bytes(body))
    with pytest.raises(CorruptArtifact, match=victim.path):
        store.read_table("corpus", ref.key)
    result = CliRunner().invoke(app, ["artifacts", "verify", "--root", root])
    assert result.exit_code == 1 and "CORRUPT" in result.output
    assert not [p for p in tmp_path.glob(".read-*")], "the downloaded copy of a corrupt file was left behind"
    record(
        "corrupt",
        "corpus data object on S3 with a flipped byte",
        "detected",
        "`artifacts verify` exit 1; read_table refuses it after download, before parsing",
    )


def test_readers_of_sound_artifacts_still_stream(toy_store: dict) -> None:
    store = ArtifactStore(toy_store["root"])
    corpus = store.list_manifests("corpus")[0]
    batches = list(store.iter_batches("corpus", corpus.key, batch_size=100))
    assert sum(b.num_rows for b in batches) == corpus.rows_out and max(b.num_rows for b in batches) <= 100
    assert pa.Table.from_batches(batches).equals(store.read_table("corpus", corpus.key))
