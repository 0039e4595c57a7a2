"""gc beside a running build, and transfers killed mid-copy.

A build commits its artifact and then moves its ref. gc run between the two (here: a driver
paused there by a hook, on a local root and on the moto S3 server) must keep the new artifact,
because the build holds a lock on it, whatever the grace period; once the build is killed its
lock is stale (its process is gone), gc says so and collects. A push or pull SIGKILLed between
two files leaves nothing in the system temp folder: its scratch lies under the destination
root (or the user's cache for a bucket) and the next transfer removes it.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore
from storage.layout import LOCKS_DIR, TRANSFER_SCRATCH_DIR
from storage.refs import read_ref
from tests.reliability.conftest import driver_command, driver_env
from tests.reliability.driver import run as run_spec
from tests.reliability.scenarios import dump_spec, scenario

pytestmark = pytest.mark.slow
PIPELINE = "faults"


@pytest.fixture(autouse=True)
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")


def a_root(backend: str, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> str:
    if backend == "s3":
        return f"s3://{request.getfixturevalue('s3_server').bucket}/{uuid.uuid4().hex}"
    return str(tmp_path / name)


def corpus_spec(root: str, tmp_path: Path, cache: Path) -> dict[str, Any]:
    return scenario("lengths").spec(root, tmp_path / "data", cache, upto="corpus")


def paused_build(spec: dict[str, Any], tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], str, Path]:
    """A driver stopped after committing corpus and before moving its ref: (process, key, release file)."""
    release = tmp_path / f"{name}.release"
    spec = {**spec, "pipeline": PIPELINE, "pause": {"stage": "corpus", "release": str(release)}}
    proc = subprocess.Popen(
        driver_command(dump_spec(spec, tmp_path / f"{name}.json")),
        env=driver_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("PAUSED corpus "):
            return proc, line.split()[2], release
    proc.wait(timeout=60)
    raise AssertionError(f"the driver never paused ({proc.returncode}): {proc.stderr.read()[-3000:] if proc.stderr else ''}")


def gc(root: str, *args: str) -> str:
    result = CliRunner().invoke(app, ["artifacts", "gc", *args, "--root", root])
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    return result.output


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_gc_beside_a_build_between_commit_and_ref_move(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, model_cache: Path, record
) -> None:
    root = a_root(backend, request, tmp_path, "store")
    spec = corpus_spec(root, tmp_path, model_cache)
    store = ArtifactStore(root)

    proc, key, release = paused_build(spec, tmp_path, "build")
    try:
        out = gc(root, "--grace", "0", "--yes")  # no grace: only the build's lock can keep it
        assert store.is_committed("corpus", key), f"gc deleted the artifact of a running build:\n{out}"
        assert f"corpus/{key[:12]} kept: a running build holds a lock on it (pid {proc.pid} on " in out, out
        assert "kept 1: 1 a running build holds a lock on it" in out and "nothing to collect" in out
    finally:
        release.touch()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    ref = read_ref(store, PIPELINE, "corpus")
    assert ref is not None and ref.key == key
    assert store.backend.find(f"{store.root_path}/{LOCKS_DIR}") == [], "the build left its lock behind"

    # a forced rebuild killed at the same point: its lock is stale (its process is gone)
    proc, forced, _ = paused_build({**spec, "force": ["corpus"]}, tmp_path, "forced")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert forced != key and store.is_committed("corpus", forced)
    dry = gc(root, "--grace", "0")
    assert f"stale lock corpus/{forced[:12]} ignored: its process (pid {proc.pid} on " in dry and "is gone" in dry, dry
    assert f"would delete corpus/{forced[:12]}" in dry and "kept 1: 1 a ref points to it" in dry
    assert store.backend.find(f"{store.root_path}/{LOCKS_DIR}"), "a dry run removed a lock file"
    assert "younger than the grace period (1h)" in gc(root, "--yes")  # the default grace still keeps it
    gc(root, "--grace", "0", "--yes")
    assert not store.is_committed("corpus", forced) and store.is_committed("corpus", key)
    assert store.backend.find(f"{store.root_path}/{LOCKS_DIR}") == [], "gc --yes left a stale lock"
    verify = CliRunner().invoke(app, ["artifacts", "verify", "--root", root])
    assert verify.exit_code == 0, verify.output
    record("gc", f"gc --grace 0 --yes beside a build paused between commit and ref move, {backend} root", "survived",
           "the build's lock kept its artifact; the build then moved its ref; a killed build's lock was reported "
           "stale and its unreferenced artifact collected")  # fmt: skip


@pytest.mark.parametrize("direction", ["pull", "push"])
def test_a_killed_transfer_leaves_no_scratch_in_the_system_temp_folder(
    direction: str, request: pytest.FixtureRequest, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, record
) -> None:
    bucket = f"s3://{request.getfixturevalue('s3_server').bucket}/{uuid.uuid4().hex}"
    local = str(tmp_path / "local")
    source, destination = (bucket, local) if direction == "pull" else (local, bucket)
    run_spec(corpus_spec(source, tmp_path, model_cache))
    files = sum(len(m.files) for m in ArtifactStore(source).list_manifests())
    assert files >= 2
    system_tmp, cache = tmp_path / "system-tmp", tmp_path / "cache"
    system_tmp.mkdir()
    spec = {"root": source, "stages": [], "transfer": {"source": source, "destination": destination},
            "kill": {"stage": "transfer", "event": 3}}  # fmt: skip
    killed = subprocess.run(
        driver_command(dump_spec(spec, tmp_path / "transfer.json")),
        env={**driver_env(system_tmp), "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL and "KILL transfer 3" in killed.stdout, killed.stderr[-3000:]
    assert list(system_tmp.iterdir()) == [], f"a killed {direction} left scratch in the system temp folder"
    scratch = Path(local) / TRANSFER_SCRATCH_DIR if direction == "pull" else cache / "xlembed" / "transfer-scratch"
    left = [p for p in scratch.rglob("*") if p.is_file()]
    assert left, "the kill landed before any scratch file: the test proves nothing"

    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    again = CliRunner().invoke(app, ["artifacts", direction, bucket, "--root", local])
    assert again.exit_code == 0, again.output
    assert not scratch.exists() or list(scratch.iterdir()) == [], "the next transfer did not clean the killed one's scratch"
    assert CliRunner().invoke(app, ["artifacts", "verify", "--root", destination]).exit_code == 0
    assert {m.key for m in ArtifactStore(destination).list_manifests()} == {m.key for m in ArtifactStore(source).list_manifests()}
    where = "under the destination root" if direction == "pull" else "in the user's cache"
    record("kill", f"SIGKILL of `artifacts {direction}` between two files", "survived",
           f"nothing in the system temp folder; {len(left)} scratch file(s) {where}, removed by the next {direction}, "
           "which completed and verified")  # fmt: skip
