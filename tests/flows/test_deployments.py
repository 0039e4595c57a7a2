"""Deployments and schedules against a real `prefect server start` (SQLite, temporary home).

What runs here is what an operator runs: `xlembed deploy` registers the deployments, the
server's scheduler creates the scheduled flow runs, `prefect worker start --type process`
executes them, and the artifacts land in S3 (moto's server on a local port). Then
`prefect deploy --all` registers prefect.yaml's deployments and `prefect deployment run
... -p only=...` reruns one stage; and `xlembed serve` runs a schedule with no worker.
Flow runs use the toy stages (tests/flows/toy_stages.py), so each takes seconds.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage.refs import read_ref
from tests.flows.toy_pipeline import REPO, cli, subprocess_env, write_config, write_corpus_text

pytestmark = pytest.mark.slow

BUCKET = "xlembed-deploy-test"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing-key",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
CHILD_PREFECT_ENV = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_CLI_PROMPT": "false",
    "PREFECT_WORKER_QUERY_SECONDS": "1",  # the worker polls its pool every second
    "PREFECT_RUNNER_POLL_FREQUENCY": "1",  # so does `xlembed serve`
    "PREFECT_LOGGING_LEVEL": "INFO",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """moto's S3 server on a local port; returns the AWS environment that points at it."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    import boto3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    aws_home = tmp_path_factory.mktemp("aws-home")
    env = {
        **AWS_ENV,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_CONFIG_FILE": str(aws_home / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(aws_home / "credentials"),
    }
    with pytest.MonkeyPatch.context() as mp:
        for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(var, raising=False)
        for name, value in env.items():
            mp.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        try:
            yield env
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`prefect server start` on a free port, SQLite in a temporary PREFECT_HOME; yields the API URL."""
    import httpx
    import sqlalchemy
    from packaging.version import Version

    if Version(sqlalchemy.__version__) >= Version("2.1"):
        # Prefect 3.8.8's scheduler bulk-inserts flow runs with a `state` key, a hybrid property
        # that SQLAlchemy 2.1 refuses in bulk DML ("please supply a bulk_dml decorated
        # function"): the server then never creates a scheduled run. The pins must hold 2.0.x.
        pytest.fail(f"SQLAlchemy {sqlalchemy.__version__} breaks the Prefect server's scheduler; pin SQLAlchemy==2.0.58")
    home = tmp_path_factory.mktemp("prefect-server-home")
    port = free_port()
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="1",  # schedule new deployments' runs at once
        PREFECT_SERVER_LOGGING_LEVEL="WARNING",
    )
    log = home / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/api"

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"prefect server exited with {process.returncode}:\n{tail(log)}")
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, 120, "the Prefect server's /api/health")
        yield url
    finally:
        stop(process, signal.SIGINT)


@pytest.fixture
def client(prefect_api: str) -> Iterator[Any]:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: prefect_api}):
        with get_client(sync_client=True) as c:
            yield c


def delete_deployments(client: Any) -> None:
    """Each test starts from no xlembed deployments (a deployment's concurrency slot held by a
    run its stopped worker left behind would otherwise delay the next test's runs)."""
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    for deployment in client.read_deployments(flow_filter=FlowFilter(name=FlowFilterName(any_=["xlembed-pipeline"]))):
        client.delete_deployment(deployment.id)


@pytest.fixture
def toy(tmp_path: Path, s3_endpoint: dict[str, str], prefect_api: str, client: Any) -> Iterator[dict[str, Any]]:
    text = write_corpus_text(tmp_path / "data")
    config = write_config(tmp_path / "toy.toml", tmp_path / "local-artifacts", text)
    env = subprocess_env(tmp_path, PREFECT_API_URL=prefect_api, **s3_endpoint, **CHILD_PREFECT_ENV)
    delete_deployments(client)
    yield {"config": config, "env": env, "tmp": tmp_path, "root": f"s3://{BUCKET}/{uuid.uuid4().hex}"}
    delete_deployments(client)


def flow_runs(client: Any, deployment_id: Any) -> list[Any]:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    return client.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])))


def completed_run(client: Any, deployment_id: Any, root: str) -> Any:
    """A COMPLETED run of the deployment that wrote to `root` (each test has its own); fails on a failed one."""
    runs = [r for r in flow_runs(client, deployment_id) if r.parameters.get("root") == root]
    failed = [r for r in runs if r.state_type is not None and r.state_type.value in ("FAILED", "CRASHED")]
    assert not failed, (
        f"flow run {failed[0].name} ended {failed[0].state_type.value}: {failed[0].state.message if failed[0].state else ''}"
    )
    return next((r for r in runs if r.state_type is not None and r.state_type.value == "COMPLETED"), None)


def manifests(root: str) -> dict[str, str]:
    from storage import ArtifactStore

    store = ArtifactStore(root)
    store.backend.fs.invalidate_cache()
    return {m.stage: m.key for m in store.list_manifests()}


def test_deploy_schedule_worker_run_and_single_stage_rerun(toy: dict[str, Any], client: Any) -> None:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    env, tmp = toy["env"], toy["tmp"]
    # 1. xlembed deploy: both deployments, the rebuild every 10 s (a cron with a seconds field)
    deployed = subprocess.run(
        cli("deploy", "--config", str(toy["config"]), "--pool", "xlembed", "--cron", "* * * * * */10", "--root", toy["root"]),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert deployed.returncode == 0, deployed.stdout[-3000:] + deployed.stderr[-3000:]
    assert "xlembed-pipeline/xlembed-rebuild" in deployed.stdout and "xlembed-pipeline/xlembed-stage" in deployed.stdout

    rebuild = client.read_deployment_by_name("xlembed-pipeline/xlembed-rebuild")
    stage = client.read_deployment_by_name("xlembed-pipeline/xlembed-stage")
    assert rebuild.entrypoint == stage.entrypoint == "flows.deployments.deployment_flow"
    assert rebuild.work_pool_name == stage.work_pool_name == "xlembed"
    assert client.read_work_pool("xlembed").type == "process"  # created by `xlembed deploy`
    assert [s.schedule.cron for s in rebuild.schedules] == ["* * * * * */10"] and stage.schedules == []
    assert rebuild.parameters == {"config_path": str(toy["config"].resolve()), "root": toy["root"]}

    # 2. the server's scheduler creates runs of the rebuild, on the cron's 10-second marks
    scheduled = wait_until(
        lambda: [r for r in flow_runs(client, rebuild.id) if r.state_type.value == "SCHEDULED"], 60, "scheduled flow runs"
    )
    assert all(r.expected_start_time.second % 10 == 0 for r in scheduled)
    assert all(r.parameters == rebuild.parameters for r in scheduled)
    assert not flow_runs(client, stage.id)  # the on-demand deployment has no schedule

    # 3. a process worker runs a scheduled run to COMPLETED; the artifacts are in S3
    worker_log = tmp / "worker.log"
    with worker_log.open("wb") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "prefect", "worker", "start", "--pool", "xlembed", "--type", "process"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        try:
            done = wait_until(lambda: completed_run(client, rebuild.id, toy["root"]), 150, "a completed scheduled run")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nworker log:\n{tail(worker_log)}") from None
        assert done.auto_scheduled
        client.pause_deployment(rebuild.id)  # no more scheduled rebuilds while we go on
        built = manifests(toy["root"])
        assert sorted(built) == ["corpus", "histogram", "lengths"]

        # 4. prefect.yaml: `prefect deploy --all` registers the same two deployments (file entrypoint)
        yaml_deploy = subprocess.run(
            [sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert yaml_deploy.returncode == 0, yaml_deploy.stdout[-3000:] + yaml_deploy.stderr[-3000:]
        stage = client.read_deployment_by_name("xlembed-pipeline/xlembed-stage")
        rebuild = client.read_deployment_by_name("xlembed-pipeline/xlembed-rebuild")
        assert stage.entrypoint == rebuild.entrypoint == "flows/deployments.py:deployment_flow"
        assert [s.schedule.cron for s in rebuild.schedules] == ["0 3 * * *"]
        assert stage.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(REPO)}}]

        # 5. rerun one stage after a data change: one documented command, the worker runs it
        before = {r.id for r in flow_runs(client, stage.id)}
        rerun = subprocess.run(
            [
                sys.executable,
                "-m",
                "prefect",
                "deployment",
                "run",
                "xlembed-pipeline/xlembed-stage",
                "-p",
                "only=lengths",
                "-p",
                'force=["lengths"]',
                "-p",
                f"config_path={toy['config']}",
                "-p",
                f"root={toy['root']}",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
        try:
            wait_until(
                lambda: (r := completed_run(client, stage.id, toy["root"])) and r.id not in before and r,
                150,
                "the single-stage run",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nworker log:\n{tail(worker_log)}") from None
    finally:
        stop(worker)
    run = completed_run(client, stage.id, toy["root"])
    assert run.parameters["only"] == "lengths" and run.parameters["force"] == ["lengths"]
    names = {t.name for t in client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))}
    built_stages = {n.split(":")[0] for n in names if ":" in n}
    assert built_stages == {"lengths"}, names  # corpus cached, histogram not asked for
    # recomputed beside the version it replaces, which stays committed; the ref moved to the rebuild
    from storage import ArtifactStore

    store = ArtifactStore(toy["root"])
    store.backend.fs.invalidate_cache()
    lengths = {m.key: m for m in store.list_manifests("lengths")}
    rebuilt = next(key for key, m in lengths.items() if m.rebuild_of == built["lengths"])
    assert set(lengths) == {built["lengths"], rebuilt}
    assert {m.stage: m.key for m in store.list_manifests() if m.stage != "lengths"} == {
        k: v for k, v in built.items() if k != "lengths"
    }
    assert read_ref(store, "toy", "lengths").key == rebuilt


def test_serve_runs_a_schedule_without_a_worker(toy: dict[str, Any], client: Any) -> None:
    env, tmp = toy["env"], toy["tmp"]
    log = tmp / "serve.log"
    with log.open("wb") as sink:
        served = subprocess.Popen(
            cli("serve", "--config", str(toy["config"]), "--interval", "5", "--root", toy["root"]),
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def rebuild_served() -> Any:
            try:
                deployment = client.read_deployment_by_name("xlembed-pipeline/xlembed-rebuild")
            except Exception:  # noqa: BLE001 - not registered yet
                return None
            intervals = [s.schedule.interval.total_seconds() for s in deployment.schedules if hasattr(s.schedule, "interval")]
            return deployment if intervals == [5.0] else None

        try:
            rebuild = wait_until(rebuild_served, 90, "xlembed serve to register its deployments")
            done = wait_until(
                lambda: completed_run(client, rebuild.id, toy["root"]), 150, "a scheduled run executed by xlembed serve"
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nserve log:\n{tail(log)}") from None
        assert done.auto_scheduled
        assert sorted(manifests(toy["root"])) == ["corpus", "histogram", "lengths"]
    finally:
        stop(served, signal.SIGINT, timeout=30)
    assert served.returncode in (0, -signal.SIGINT, 130), tail(log)
    # stopping the served process pauses its schedule: nothing runs while nobody serves
    rebuild = client.read_deployment_by_name("xlembed-pipeline/xlembed-rebuild")
    assert rebuild.paused or not any(s.active for s in rebuild.schedules)


def test_deploy_without_a_server_is_a_usage_error(tmp_path: Path) -> None:
    text = write_corpus_text(tmp_path / "data")
    config = write_config(tmp_path / "toy.toml", tmp_path / "artifacts", text)
    env = subprocess_env(tmp_path)  # no PREFECT_API_URL
    for command in ("deploy", "serve"):
        result = subprocess.run(cli(command, "--config", str(config)), env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "PREFECT_API_URL" in result.stderr
    bad_cron = subprocess.run(
        cli("deploy", "--config", str(config), "--cron", "every day"), env=env, capture_output=True, text=True, timeout=120
    )
    assert bad_cron.returncode == 2 and "cron" in bad_cron.stderr.lower()


def test_prefect_yaml_declares_both_deployments() -> None:
    import yaml

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    by_name = {d["name"]: d for d in spec["deployments"]}
    assert set(by_name) == {"xlembed-rebuild", "xlembed-stage"}
    for d in by_name.values():
        assert d["entrypoint"] == "flows/deployments.py:deployment_flow"
        assert d["work_pool"]["name"] == "xlembed"
        assert Path(REPO / d["parameters"]["config_path"]).is_file()
    assert [s["cron"] for s in by_name["xlembed-rebuild"]["schedules"]] == ["0 3 * * *"]
    assert by_name["xlembed-stage"]["schedules"] == []
    from flows.pipeline import pipeline_flow

    # every parameter a deployment sets is one the flow takes
    accepted = set(pipeline_flow.parameters.properties)
    assert {"config_path", "only", "from_stage", "force", "root"} <= accepted
    assert all(set(d["parameters"]) <= accepted for d in by_name.values())
    json.dumps(spec)  # plain data: no YAML-only types slipped in


def test_deployed_flow_runs_shards_on_the_configs_task_runner(toy_pipeline: dict, prefect_server: None) -> None:
    """A deployment run takes its task runner from its config, as `xlembed run` does."""
    from prefect import flow
    from prefect.context import FlowRunContext
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.deployments import ConfiguredTaskRunner, deployment_flow
    from flows.pipeline import pipeline_flow

    assert deployment_flow.name == pipeline_flow.name == "xlembed-pipeline"
    assert deployment_flow.parameters == pipeline_flow.parameters
    config = toy_pipeline["config"]
    config.write_text(config.read_text().replace("max_workers = 2", "max_workers = 3"))

    @flow(task_runner=ConfiguredTaskRunner())
    def probe(config_path: str, root: str | None = None) -> list:
        runner = FlowRunContext.get().task_runner
        inner = runner.configured()
        return [type(inner).__name__, inner._max_workers]  # Prefect's runner keeps its size private

    assert probe(str(config)) == [ThreadPoolTaskRunner.__name__, 3]
    keys = deployment_flow(config_path=str(config))  # the real flow, through that runner
    assert sorted(keys) == ["corpus", "histogram", "lengths"]
