"""`artifacts pull/push/head`: copying artifacts between a local root and a bucket, with checksums."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore, CorruptArtifact
from storage.refs import read_ref, set_ref
from storage.transfer import copy_artifact
from storage.verify import verify_artifact


@pytest.mark.slow
def test_push_then_pull_round_trip(local_root: str, s3_root: str, kit: Any, tmp_path: Path) -> None:
    local = ArtifactStore(local_root)
    first = kit.build(local, config={"v": 1}, rows=9)
    second = kit.build(local, config={"v": 2}, rows=5)
    set_ref(local, "demo", "embed", second.key)
    runner = CliRunner()
    pushed = runner.invoke(app, ["artifacts", "push", s3_root, "--root", local_root])
    assert pushed.exit_code == 0, pushed.output
    assert "2 of 2 artifacts copied" in pushed.output and "refs: 1 written" in pushed.output
    remote = ArtifactStore(s3_root)
    assert {m.key for m in remote.list_manifests()} == {first.key, second.key}
    assert all(verify_artifact(remote, m.stage, m.key) == [] for m in remote.list_manifests())
    assert read_ref(remote, "demo", "embed").key == second.key
    # pushing again copies nothing
    again = runner.invoke(app, ["artifacts", "push", s3_root, "--root", local_root])
    assert "0 of 2 artifacts copied" in again.output

    elsewhere = str(tmp_path / "elsewhere")
    pulled = runner.invoke(app, ["artifacts", "pull", s3_root, "embed", second.key[:10], "--root", elsewhere])
    assert pulled.exit_code == 0, pulled.output
    copy = ArtifactStore(elsewhere)
    assert [m.key for m in copy.list_manifests()] == [second.key]
    assert copy.read_table("embed", second.key).equals(local.read_table("embed", second.key))
    assert read_ref(copy, "demo", "embed").key == second.key


@pytest.mark.slow
def test_corrupt_source_file_is_not_copied(local_root: str, s3_root: str, kit: Any) -> None:
    local = ArtifactStore(local_root)
    manifest = kit.build(local, config={"v": 3}, rows=6)
    victim = Path(local.artifact_dir("embed", manifest.key)) / manifest.files[0].path
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    remote = ArtifactStore(s3_root)
    with pytest.raises(CorruptArtifact, match="does not match its manifest") as caught:
        copy_artifact(local, remote, "embed", manifest.key)
    assert str(caught.value).startswith(f"{local_root}: embed/{manifest.key}/{manifest.files[0].path} ")
    assert not remote.is_committed("embed", manifest.key)  # nothing visible on the other side


def test_a_source_file_that_is_gone_is_one_line_naming_it(local_root: str, s3_root: str, kit: Any) -> None:
    """The copy checks what it fetched as every read does: a missing file is a CorruptArtifact
    naming the source root and the file, not fsspec's FileNotFoundError."""
    remote = ArtifactStore(s3_root)
    manifest = kit.build(remote, config={"v": 5}, rows=4)
    victim = manifest.files[0].path
    remote.backend.fs.rm_file(f"{remote.artifact_dir('embed', manifest.key)}/{victim}")
    local = ArtifactStore(local_root)
    with pytest.raises(CorruptArtifact, match=f"^{s3_root}: embed/{manifest.key}/{victim} is missing"):
        copy_artifact(remote, local, "embed", manifest.key)
    assert not local.is_committed("embed", manifest.key)


def test_head_prints_first_rows(local_root: str, kit: Any) -> None:
    local = ArtifactStore(local_root)
    manifest = kit.build(local, config={"v": 4}, rows=30)
    result = CliRunner().invoke(app, ["artifacts", "head", "embed", manifest.key[:8], "-n", "3", "--root", local_root])
    assert result.exit_code == 0, result.output
    # into a pipe (CliRunner), the rows print as Markdown table rows, one line each
    lines = result.output.splitlines()
    assert lines[0].startswith("| id") and len([line for line in lines if line.startswith("| id-")]) == 3


def test_a_killed_transfers_scratch_is_found_and_removed_by_the_next_and_none_lands_in_the_system_temp(
    local_root: str, s3_root: str, kit: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys
    import tempfile

    from storage.transfer import SCRATCH_DIR
    from storage.user_cache import xlembed_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    system_temp = tmp_path / "system-temp"
    system_temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(system_temp))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    left = xlembed_cache_dir(*SCRATCH_DIR) / f"{dead.stdout.strip()}-killed"  # as a push killed mid-copy leaves it
    left.mkdir(parents=True)
    (left / "000000").write_bytes(b"x" * 4096)
    mine = xlembed_cache_dir(*SCRATCH_DIR) / f"{__import__('os').getpid()}-running"  # a live transfer's: kept
    mine.mkdir()

    local = ArtifactStore(local_root)
    manifest = kit.build(local, config={"v": 7}, rows=9, max_rows_per_file=2)
    assert len(manifest.files) > 1
    copy_artifact(local, ArtifactStore(s3_root), "embed", manifest.key)
    assert not left.exists() and mine.exists()
    assert [p.name for p in xlembed_cache_dir(*SCRATCH_DIR).iterdir()] == [mine.name]  # its own scratch removed
    assert list(system_temp.iterdir()) == []
