"""S3 faults between s3fs and moto: errors, lost answers, dropped connections, an endpoint that
stops mid-write (single PUTs and multipart uploads).

Every stage of `SCENARIOS` runs in-process against `s3://` through `FaultProxy`. A flaky
endpoint must be ridden out by retries, giving artifacts equal to a local run's; an endpoint
that stops taking writes must make the run fail with an error that names what it was writing,
with nothing committed that lacks a file (`xlembed artifacts verify`, checked directly against
moto), and a later run on a healthy endpoint must resume without redoing finished shards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from storage import ArtifactStore
from tests.reliability.driver import run as run_spec
from tests.reliability.invariants import artifact_files
from tests.reliability.s3proxy import FaultPolicy, FaultProxy
from tests.reliability.scenarios import SCENARIOS, StageScenario, scenario

pytestmark = pytest.mark.slow


@pytest.fixture
def s3(s3_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The moto endpoint, a fresh root, and a switch to talk through a fault proxy."""
    import s3fs

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    state = {"root": f"s3://{s3_server.bucket}/{uuid.uuid4().hex}", "server": s3_server}

    def use(endpoint: str) -> None:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        s3fs.S3FileSystem.clear_instance_cache()

    state["use"] = use
    yield state
    s3fs.S3FileSystem.clear_instance_cache()


def s3_files(root: str) -> dict[str, str]:
    return artifact_files(root)  # checksums from the manifests (timing-only files: read and compared without timings)


def verify_directly(s3: dict[str, Any]) -> None:
    """`xlembed artifacts verify` against moto itself: every committed artifact has all its files."""
    s3["use"](s3["server"].endpoint)
    result = CliRunner().invoke(app, ["artifacts", "verify", "--root", s3["root"]])
    assert result.exit_code == 0, result.output


def local_reference(chosen: StageScenario, tmp_path: Path, cache: Path) -> dict[str, str]:
    spec = chosen.spec(str(tmp_path / "reference"), tmp_path / "data", cache)
    run_spec(spec)
    return artifact_files(tmp_path / "reference")


STOP_AFTER = 150_000
FLAKY = [s for s in SCENARIOS if s.s3 != "off"]


@pytest.mark.parametrize("chosen", FLAKY, ids=lambda s: s.stage)
def test_flaky_endpoint_is_ridden_out_by_retries(
    chosen: StageScenario, s3: dict, tmp_path: Path, model_cache: Path, long_faults: bool, record
) -> None:
    if chosen.s3 == "long" and not long_faults:
        pytest.skip(f"{chosen.stage} meets the flaky endpoint in the long variant only")
    expected = local_reference(chosen, tmp_path, model_cache)
    seeds = range(3) if long_faults else range(1)
    for seed in seeds:
        root = f"{s3['root']}-{seed}"
        policy = FaultPolicy(seed=seed * 101 + len(chosen.stage), error_rate=0.12, lost_answer_rate=0.04, drop_rate=0.08)
        with FaultProxy(s3["server"].endpoint, policy) as proxy:
            s3["use"](proxy.endpoint)
            run_spec(chosen.spec(root, tmp_path / "data", model_cache))
        s3["use"](s3["server"].endpoint)
        assert s3_files(root) == {k: v for k, v in expected.items()}, "artifacts written through the flaky endpoint differ"
        verify_directly({**s3, "root": root})
        faults = {k: v for k, v in policy.counts.items() if k != "requests"}
        assert sum(faults.values()) > 0, "no fault was injected"
        record(
            "s3",
            f"{chosen.stage}: flaky endpoint (12% 500/503, 4% lost answers, 8% dropped connections), seed {seed}",
            "retried, artifacts equal to a local run",
            f"{policy.counts['requests']} requests, injected {faults}",
        )


def test_endpoint_that_stops_mid_write_fails_clearly_and_resumes(
    s3: dict, tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, record
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # the endpoint never comes back: fewer backoff sleeps, same outcome
    chosen = scenario("corpus")
    expected = local_reference(chosen, tmp_path, model_cache)
    spec = chosen.spec(s3["root"], tmp_path / "data", model_cache)
    policy = FaultPolicy(seed=7, stop_after_bytes=STOP_AFTER)
    with FaultProxy(s3["server"].endpoint, policy) as proxy:
        s3["use"](proxy.endpoint)
        with pytest.raises(Exception) as caught:
            run_spec(spec)
    message = f"{type(caught.value).__name__}: {caught.value}"
    assert policy.counts.get("cut_writes", 0) > 0
    assert s3["server"].bucket in message or "s3://" in message or "cannot write" in message, (
        f"the error does not say what failed: {message}"
    )
    s3["use"](s3["server"].endpoint)
    store = ArtifactStore(s3["root"])
    assert store.list_manifests() == [], "an artifact was committed although its writes failed"
    client = s3["server"].client()
    prefix = s3["root"].split("/", 3)[3]
    records = {
        o["Key"]: o["ETag"]
        for o in client.list_objects_v2(Bucket=s3["server"].bucket, Prefix=prefix).get("Contents", [])
        if "/shards/" in o["Key"]
    }
    assert records, "no shard finished before the stop: raise STOP_AFTER"
    record(
        "s3",
        f"endpoint stops taking writes after {STOP_AFTER // 1000} kB (PUT bodies cut halfway, no answer)",
        "clear error, nothing committed",
        f"`{message[:200]}`; {len(records)} finished shards kept; {policy.counts}",
    )
    run_spec(spec)  # healthy endpoint: resume
    assert s3_files(s3["root"]) == expected
    after = {
        o["Key"]: o["ETag"]
        for o in client.list_objects_v2(Bucket=s3["server"].bucket, Prefix=prefix).get("Contents", [])
        if "/shards/" in o["Key"]
    }
    assert all(after[k] == etag for k, etag in records.items()), "a shard finished before the stop was recomputed"
    verify_directly(s3)


def test_endpoint_lost_mid_run_through_the_cli_is_one_line_per_failing_shard(s3: dict, tmp_path: Path, record) -> None:
    """`xlembed run` itself (Prefect logging included) when the endpoint stops taking writes:
    each failed shard is one line, then the one-line summary; no traceback (they used to come
    with every failed shard and with the flow run: about 400 lines, six tracebacks)."""
    import subprocess
    import sys

    from flows.sweep import toml_document
    from tests.reliability.conftest import driver_env
    from tests.reliability.scenarios import corpus_section

    config = tmp_path / "pipeline.toml"
    pipeline = {"name": "lost-endpoint", "root": s3["root"], "max_workers": 2}
    config.write_text(toml_document({"pipeline": pipeline, "corpus": corpus_section(tmp_path / "data")}), encoding="utf-8")
    home = tmp_path / "prefect-home"
    home.mkdir()
    policy = FaultPolicy(seed=7, stop_after_bytes=STOP_AFTER)
    with FaultProxy(s3["server"].endpoint, policy) as proxy:
        env = driver_env(
            tmp_path,
            PREFECT_HOME=str(home),
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            AWS_ENDPOINT_URL=proxy.endpoint,
            AWS_MAX_ATTEMPTS="2",
        )
        env.pop("PREFECT_API_URL", None)
        env.pop("XLEMBED_DEBUG", None)
        result = subprocess.run(
            [sys.executable, "-m", "flows.cli", "run", str(config)], env=env, capture_output=True, text=True, timeout=400
        )
    output = result.stdout + result.stderr
    assert policy.counts.get("cut_writes", 0) > 0
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    client = s3["server"].client()
    prefix = s3["root"].split("/", 3)[3]
    listed = client.list_objects_v2(Bucket=s3["server"].bucket, Prefix=prefix).get("Contents", [])
    finished = {o["Key"].rsplit("/", 1)[1].removesuffix(".json") for o in listed if "/shards/" in o["Key"]}
    failed = {f"src{i}" for i in range(4)} - finished
    assert finished and failed, f"finished {finished}: move STOP_AFTER so that some shards finish and some fail"
    lines = result.stderr.splitlines()
    for shard in failed:
        about = [line for line in lines if f"'corpus:{shard}'" in line]
        assert len(about) == 1 and "Finished in state Failed(" in about[0] and "ConnectionClosedError" in about[0], output[-3000:]
    assert lines[-1].startswith("error: run failed: ") and "cannot reach the S3 endpoint" in lines[-1], output[-3000:]
    assert len(lines) <= 6 + 3 * len(finished) + 2 * len(failed), output[
        -3000:
    ]  # per finished shard: its rows, its state, progress
    record(
        "s3",
        "endpoint stops taking writes during `xlembed run` (Prefect's logs included)",
        "one line per failed shard and the summary",
        f"exit 1, {len(output.splitlines())} lines in all, {len(failed)} failed shards, no traceback; `{lines[-1][:160]}`",
    )


@pytest.mark.parametrize("mode", ["stops", "flaky"])
def test_multipart_upload_of_a_model_file(mode: str, s3: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record) -> None:
    """A 12 MiB weight file goes up in three 5 MiB parts; stopping after the first must leave no
    object, no open multipart upload and no manifest; a flaky endpoint must not matter."""
    import s3fs.core

    if mode == "stops":
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    monkeypatch.setattr(s3fs.core, "calculate_chunksize", lambda size, chunksize=None, max_parts=10_000: 5 * 2**20)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 8}', encoding="utf-8")
    (model / "model.safetensors").write_bytes(os.urandom(12 * 2**20))
    spec = {"root": s3["root"], "stages": ["base_model"], "configs": {"base_model": {"source": "local", "model": str(model)}}}
    policy = (
        FaultPolicy(seed=3, stop_after_bytes=7 * 2**20)
        if mode == "stops"
        else FaultPolicy(seed=5, error_rate=0.15, drop_rate=0.1)
    )
    client = s3["server"].client()
    prefix = s3["root"].split("/", 3)[3]
    with FaultProxy(s3["server"].endpoint, policy) as proxy:
        s3["use"](proxy.endpoint)
        if mode == "stops":
            with pytest.raises(Exception) as caught:
                run_spec(spec)
        else:
            run_spec(spec)
    s3["use"](s3["server"].endpoint)
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3["server"].bucket, Prefix=prefix).get("Contents", [])]
    if mode == "stops":
        message = f"{type(caught.value).__name__}: {caught.value}"
        assert not any(k.endswith("model.safetensors") for k in keys), "a half-uploaded object became visible"
        assert not any(k.endswith("manifest.json") for k in keys)
        uploads = client.list_multipart_uploads(Bucket=s3["server"].bucket, Prefix=prefix).get("Uploads", [])
        assert uploads == [], "the failed multipart upload was left open"
        record(
            "s3",
            "multipart upload (3 x 5 MiB parts) cut after 7 MiB",
            "clear error, nothing committed, upload aborted",
            f"`{message[:200]}`; {policy.counts}",
        )
        run_spec(spec)
    else:
        record(
            "s3",
            "multipart upload (3 x 5 MiB parts) through a flaky endpoint (15% errors, 10% drops)",
            "retried, committed whole",
            f"{policy.counts}",
        )
    verify_directly(s3)
    store = ArtifactStore(s3["root"])
    (manifest,) = store.list_manifests("base_model")
    assert any(f.path == "files/model.safetensors" and f.bytes == 12 * 2**20 for f in manifest.files)
