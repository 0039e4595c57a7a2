"""Forced rebuilds killed at every storage event, and concurrent runs of one config.

A forced rebuild builds the new version beside the one it replaces: whatever happens to the
process, the old artifact's files, its ref and `verify` are exactly as before, and a rerun of
the forced build resumes and moves the ref. Several processes running one config at once (a
nightly rebuild overlapping a manual rerun), with a train stage, on a local root and on the moto
S3 server: every one exits 0, nothing committed is rewritten, every ref points at a committed
artifact, and the artifacts equal an uninterrupted run's.
"""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from storage import ArtifactStore
from storage.refs import list_refs, read_ref
from storage.verify import verify_artifact
from tests.reliability.conftest import driver_command, driver_env
from tests.reliability.invariants import artifact_files, check_store, sha256
from tests.reliability.scenarios import StageScenario, dump_spec, scenario
from tests.reliability.test_kills import parse_events

pytestmark = pytest.mark.slow
SEED = 20261127
PIPELINE = "faults"
# the stages the issue names: a table stage with several shards, the model, and the evaluation
FORCED = ("corpus", "train", "evaluate")


def run(
    spec: dict[str, Any], tmp: Path, name: str, *, kill: tuple[str, int] | None = None, signal_ok: bool = False
) -> tuple[int, str]:
    if kill is not None:
        spec = {**spec, "kill": {"stage": kill[0], "event": kill[1]}}
    result = subprocess.run(
        driver_command(dump_spec(spec, tmp / f"{name}.json")), env=driver_env(tmp), capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0 and not (signal_ok and result.returncode == -signal.SIGKILL):
        raise AssertionError(f"driver {name} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return result.returncode, result.stdout


def committed_files(root: Path, stage: str, key: str) -> dict[str, tuple[str, int]]:
    """The files of one artifact with their checksum and mtime: proof that nothing rewrote them."""
    folder = root / stage / key
    return {p.relative_to(folder).as_posix(): (sha256(p), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def comparable(files: dict[str, str], stage: str, key: str) -> dict[str, str]:
    prefix = f"{stage}/{key}/"
    return {rel[len(prefix) :]: digest for rel, digest in files.items() if rel.startswith(prefix)}


@pytest.mark.parametrize("stage", FORCED)
def test_sigkill_during_a_forced_rebuild_never_touches_the_committed_version(
    stage: str, tmp_path: Path, model_cache: Path, long_faults: bool, record
) -> None:
    chosen: StageScenario = scenario(stage)
    data = tmp_path / "data"
    base = tmp_path / "base"
    spec = {**chosen.spec(str(base), data, model_cache), "pipeline": PIPELINE}
    run(spec, tmp_path, "base")
    store = ArtifactStore(base)
    old_key = read_ref(store, PIPELINE, stage).key
    # the uninterrupted forced rebuild: its event count, and the files every resumed one must equal
    reference_root = tmp_path / "reference"
    shutil.copytree(base, reference_root)
    _, stdout = run({**spec, "root": str(reference_root), "force": [stage]}, tmp_path, "reference")
    total = parse_events(stdout)[stage]
    reference = artifact_files(reference_root)
    new_key = read_ref(ArtifactStore(reference_root), PIPELINE, stage).key
    assert new_key != old_key and ArtifactStore(reference_root).manifest(stage, new_key).rebuild_of == old_key

    rng = random.Random(f"{SEED}-{stage}")
    events = sorted(rng.sample(range(1, total + 1), min(total, 8 if long_faults else 2)))
    for event in events:
        root = tmp_path / f"kill{event}"
        shutil.copytree(base, root)
        before = committed_files(root, stage, old_key)
        code, out = run(
            {**spec, "root": str(root), "force": [stage]}, tmp_path, f"kill{event}", kill=(stage, event), signal_ok=True
        )
        killed = code == -signal.SIGKILL
        killed_store = ArtifactStore(root)
        pointed = old_key
        if killed:
            check_store(root)  # every committed artifact whole; every visible file whole
            assert committed_files(root, stage, old_key) == before, (
                f"the committed {stage} artifact was modified by a killed --force"
            )
            # the ref still names the old version, or (a kill after the rebuild's commit, while or
            # after the ref was written) the committed rebuild: never anything uncommitted
            pointed = read_ref(killed_store, PIPELINE, stage).key
            assert pointed == old_key or killed_store.manifest(stage, pointed).rebuild_of == old_key, (
                "the ref moved to an uncommitted version"
            )
            assert verify_artifact(killed_store, stage, old_key) == []
        where = next((line.split(" ", 3)[-1] for line in out.splitlines() if line.startswith("KILL ")), "finished first")
        run({**spec, "root": str(root), "force": [stage]}, tmp_path, f"resume{event}")
        resumed = ArtifactStore(root)
        rebuilt = read_ref(resumed, PIPELINE, stage).key
        # the same rebuild an uninterrupted --force commits; a kill that landed after its commit but
        # before the ref moved leaves that one unreferenced (for gc), and the rerun builds the next
        assert rebuilt == new_key or (killed and resumed.is_committed(stage, new_key)), (
            "the rerun did not resume the killed rebuild"
        )
        assert resumed.manifest(stage, rebuilt).rebuild_of == old_key
        assert comparable(artifact_files(root), stage, rebuilt) == comparable(reference, stage, new_key), (
            "the rebuild differs from an uninterrupted one"
        )
        assert committed_files(root, stage, old_key) == before
        assert {h.key for h in read_ref(resumed, PIPELINE, stage).history} >= {old_key, rebuilt}
        check_store(root)
        if killed:
            record("kill", f"{stage}: SIGKILL during --force at storage event {event}/{total}", "survived",
                   f"{where}; old version untouched, its ref {'untouched' if pointed == old_key else 'already on the committed rebuild'}; "
                   "the rerun resumed and committed the rebuild beside it")  # fmt: skip


def _concurrent(spec: dict[str, Any], tmp: Path, processes: int) -> list[subprocess.CompletedProcess]:
    paths = [dump_spec(spec, tmp / f"concurrent{processes}-{i}.json") for i in range(processes)]
    children = [
        subprocess.Popen(driver_command(path), env=driver_env(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for path in paths
    ]
    results = []
    for child, path in zip(children, paths):
        stdout, stderr = child.communicate(timeout=900)
        results.append(subprocess.CompletedProcess(path, child.returncode, stdout, stderr))
    return results


@pytest.fixture(scope="module")
def train_reference(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """One uninterrupted run of the train scenario: its spec and its artifacts' files."""
    tmp = tmp_path_factory.mktemp("concurrent-reference")
    spec = {**scenario("train").spec(str(tmp / "root"), tmp / "data", model_cache), "pipeline": PIPELINE}
    run(spec, tmp, "reference")
    return spec, artifact_files(tmp / "root")


@pytest.mark.parametrize("backend", ["local", "s3"])
@pytest.mark.parametrize("processes", [2, pytest.param(4, marks=pytest.mark.long_faults)])
def test_concurrent_runs_of_one_config_with_a_train_stage(
    backend: str,
    processes: int,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    train_reference: tuple[dict[str, Any], dict[str, str]],
    record,
) -> None:
    chosen = scenario("train")
    spec, reference = train_reference
    if backend == "s3":
        server = request.getfixturevalue("s3_server")
        root = f"s3://{server.bucket}/{uuid.uuid4().hex}"
    else:
        root = str(tmp_path / "shared-root")
    results = _concurrent({**spec, "root": root}, tmp_path, processes)
    for result in results:
        assert result.returncode == 0, f"a concurrent run failed:\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}"
    store = ArtifactStore(root)
    assert artifact_files(root) == reference, "concurrent runs left artifacts that differ from one uninterrupted run"
    for manifest in store.list_manifests():
        assert verify_artifact(store, manifest.stage, manifest.key) == [], (
            f"{manifest.stage}/{manifest.key[:12]} is corrupt after concurrent runs"
        )
        assert manifest.attempt == 0
    refs = list_refs(store)
    assert sorted(r.stage for r in refs) == sorted(chosen.stages)
    assert all(store.is_committed(r.stage, r.key) for r in refs)
    keys = {
        line.split()[1]: line.split()[3]
        for result in results
        for line in result.stdout.splitlines()
        if line.startswith("STAGE ") and " DONE " in line
    }
    assert keys == {r.stage: r.key for r in refs}
    if backend == "local":
        check_store(Path(root), reference)
    record("concurrency", f"{processes} processes of one config (corpus, base_model, align, train) at once, {backend} root", "survived",
           "all exited 0; every artifact verified and equal to one uninterrupted run's; every ref at a committed artifact")  # fmt: skip
