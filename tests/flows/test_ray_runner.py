"""task_runner = "ray": shards on a Ray cluster (prefect-ray), optionally one GPU per shard."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flows.config import ConfigError, PipelineSettings, load_config
from storage import ArtifactStore
from tests.flows.toy_pipeline import REPO, cli, subprocess_env, write_config

HAVE_RAY = importlib.util.find_spec("ray") is not None and importlib.util.find_spec("prefect_ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="prefect-ray / ray not installed (pip install 'xlembed[ray]')")


def file_digests(root: Path) -> dict[str, list[str]]:
    store = ArtifactStore(root)
    return {m.stage: sorted(f.sha256 for f in m.files) for m in store.list_manifests()}


def ray_config(path: Path, toy_pipeline: dict, root: Path, extra: str) -> Path:
    config = write_config(path, root, toy_pipeline["text"], shards=4)
    config.write_text(config.read_text().replace("max_workers = 2", f"max_workers = 2\n{extra}"))
    return config


def test_ray_settings_validate(toy_pipeline: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = ray_config(tmp_path / "bad.toml", toy_pipeline, tmp_path / "a", 'task_runner = "ray"\nray_gpus_per_task = -1')
    with pytest.raises(ConfigError, match="ray_gpus_per_task"):
        load_config(bad)
    # without the packages the option is a config error that says what to install
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("ray", "prefect_ray") else real_find_spec(name, *a)
    )
    missing = ray_config(tmp_path / "missing.toml", toy_pipeline, tmp_path / "b", 'task_runner = "ray"')
    with pytest.raises(ConfigError, match=r"pipeline.task_runner: .*pip install 'xlembed\[ray\]'"):
        load_config(missing)


@needs_ray
def test_ray_runner_options() -> None:
    from flows.runners import make_task_runner

    local = make_task_runner(PipelineSettings(name="x", task_runner="ray", max_workers=3, ray_gpus_per_task=1))
    assert local.address is None and local.init_kwargs["num_cpus"] == 3 and local.gpus_per_task == 1
    copy = local.duplicate()  # what the flow engine runs with
    assert copy == local and copy.gpus_per_task == 1 and copy.init_kwargs == local.init_kwargs
    remote = make_task_runner(PipelineSettings(name="x", task_runner="ray", ray_address="ray://head:10001"))
    assert remote.address == "ray://head:10001" and "num_cpus" not in remote.init_kwargs and remote.gpus_per_task == 0
    assert remote != local


GPU_STAGES = "tests.flows.toy_stages:GPU_STAGES"
CORPUS_JSON = {"sources": [{"name": "a", "kind": "text", "files": {"en": "a.en", "kk": "a.kk"}}]}


def test_shard_resources_are_per_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """ray_gpus_per_task goes to the shards of stages that run a model, not to corpus shards
    (it used to go to every shard) nor to the planning and commit tasks."""
    from flows import runners

    monkeypatch.setenv("XLEMBED_STAGES", GPU_STAGES)
    from flows.stages import stage_registry

    stages = stage_registry()
    corpus_config = stages["corpus"].config_model.model_validate(CORPUS_JSON)

    def options(task: str, stage: str, config: Any, gpus: float = 1) -> dict[str, Any]:
        return runners.shard_resources(task, {"stage_name": stage, "config": config}, gpus)

    assert options("build-shard", "corpus", corpus_config) == {}
    assert options("build-shard", "corpus", corpus_config.model_dump(mode="json")) == {}  # a config as JSON
    assert options("build-shard", "encode", {"device": None}) == {"num_gpus": 1}  # unset: cuda when there is one
    assert options("build-shard", "encode", {"device": "cpu"}) == {}
    assert options("build-shard", "nested", {}) == {"num_gpus": 1}  # a backend's table counts too
    assert options("build-shard", "nested", {"backend": {"device": "cpu"}}) == {}
    assert options("build-shard", "declared", {}, 0.5) == {"num_gpus": 0.5}
    assert options("build-shard", "declared", {}, 0) == {}  # no GPUs configured: nothing reserved
    assert options("commit-artifact", "declared", {}) == options("plan-shards", "declared", {}) == {}


def test_real_stages_reserve_gpus_only_where_a_model_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped configs: corpus, base_model and translate_model shards take no GPU; translate,
    align, train and evaluate take ray_gpus_per_task, unless the config runs them on the CPU."""
    monkeypatch.delenv("XLEMBED_STAGES", raising=False)
    from flows.runners import shard_resources

    wanted = {
        "corpus": {},
        "translate_model": {},
        "base_model": {},
        "translate": {"num_gpus": 1},
        "align": {"num_gpus": 1},
        "train": {"num_gpus": 1},
        "evaluate": {"num_gpus": 1},
    }
    seen = {}
    for path in sorted((REPO / "configs").glob("*.toml")):
        config = load_config(path)
        for stage, stage_config in config.stage_configs.items():
            seen[stage] = shard_resources("build-shard", {"stage_name": stage, "config": stage_config}, 1)
            on_cpu = config.raw[stage].get("device") == "cpu"
            assert seen[stage] == ({} if on_cpu else wanted[stage]), (path.name, stage)
    assert set(seen) == set(wanted)


@needs_ray
def test_the_ray_runner_submits_each_shard_with_its_stage_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the runner hands Ray for a task: the remote options in force when RayTaskRunner.submit runs."""
    from prefect_ray import RayTaskRunner
    from prefect_ray.context import RemoteOptionsContext

    from flows.runners import make_task_runner

    monkeypatch.setenv("XLEMBED_STAGES", GPU_STAGES)
    seen: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(
        RayTaskRunner,
        "submit",
        lambda self, task, parameters, *a, **k: seen.append((task.name, dict(RemoteOptionsContext.get().current_remote_options))),
    )
    runner = make_task_runner(PipelineSettings(name="x", task_runner="ray", ray_gpus_per_task=1))
    for name, stage in (("build-shard", "corpus"), ("build-shard", "encode"), ("commit-artifact", "encode")):
        task = type("Task", (), {"name": name})()
        runner.submit(task, {"stage_name": stage, "config": CORPUS_JSON if stage == "corpus" else {}})
    assert seen == [("build-shard", {}), ("build-shard", {"num_gpus": 1}), ("commit-artifact", {})]


@needs_ray
@pytest.mark.slow
def test_ray_run_equals_thread_run(toy_pipeline: dict, tmp_path: Path) -> None:
    """`xlembed run` with a local Ray of 2 CPUs gives byte-identical artifacts to the thread run."""
    write_config(toy_pipeline["config"], toy_pipeline["root"], toy_pipeline["text"], shards=4)
    ray_root = tmp_path / "ray-artifacts"
    config = ray_config(tmp_path / "ray.toml", toy_pipeline, ray_root, 'task_runner = "ray"')
    logs = []
    for path in (toy_pipeline["config"], config):
        result = subprocess.run(
            cli("run", str(path)),
            env=subprocess_env(tmp_path, RAY_AUTH_MODE="disabled", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        logs.append(result.stdout + result.stderr)
    assert "Creating a local Ray instance" not in logs[0] and "Creating a local Ray instance" in logs[1]
    # Ray workers report to the run's one server (started by xlembed itself, flows/server.py): none starts its own
    assert logs[1].count("temporary Prefect server for this run") == 1 and "Starting temporary server" not in logs[1]
    assert file_digests(ray_root) == file_digests(toy_pipeline["root"])
    assert sorted(file_digests(ray_root)) == ["corpus", "histogram", "lengths"]


GPU_PROBE = """
import json, os, sys
import ray
from prefect import flow, task, unmapped
from flows.runners import make_task_runner
from flows.config import PipelineSettings

@task(name="build-shard")
def shard(stage_name, config, i):
    return {"stage": stage_name, "gpus": ray.get_gpu_ids(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}

@task(name="commit-artifact")
def commit():
    from prefect.settings import get_current_settings

    return {"gpus": ray.get_gpu_ids(), "api": get_current_settings().api.url, "flow_api": flow_api}

runner = make_task_runner(PipelineSettings(name="x", task_runner="ray", ray_gpus_per_task=1))
runner.init_kwargs["num_gpus"] = 2  # 2 logical GPUs for the local Ray it starts

flow_api = None

@flow(task_runner=runner)
def probe():
    from prefect.context import FlowRunContext

    global flow_api
    flow_api = str(FlowRunContext.get().client.api_url).rstrip("/")
    corpus = {"sources": [{"name": "a", "kind": "text", "files": {"en": "a.en", "kk": "a.kk"}}]}
    shards = [f.result() for f in shard.map(unmapped("encode"), unmapped({}), range(4))]
    shards += [f.result() for f in shard.map(unmapped("corpus"), unmapped(corpus), range(2))]
    return {"shards": shards, "commit": commit.submit().result(), "flow_api": flow_api}

print("RESULT " + json.dumps(probe()))
"""


@needs_ray
@pytest.mark.slow
def test_ray_gpus_per_task_reserves_a_gpu_for_each_shard(tmp_path: Path) -> None:
    """ray_gpus_per_task = 1: every shard task of a stage that runs a model holds one GPU (Ray sets
    CUDA_VISIBLE_DEVICES); corpus shards and the small tasks hold none. Ray is given 2 logical
    GPUs, so this runs on any machine."""
    script = tmp_path / "probe.py"
    script.write_text(GPU_PROBE)
    env = subprocess_env(
        tmp_path, RAY_AUTH_MODE="disabled", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", XLEMBED_STAGES=GPU_STAGES
    )
    result = subprocess.run([sys.executable, str(script)], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("RESULT "))
    found: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    assert [shard["stage"] for shard in found["shards"]] == ["encode"] * 4 + ["corpus"] * 2
    for shard in found["shards"][:4]:
        assert len(shard["gpus"]) == 1 and shard["cuda"] == str(shard["gpus"][0])
    assert all(shard["gpus"] == [] for shard in found["shards"][4:])
    assert found["commit"]["gpus"] == []
    # Ray workers report to the flow's (temporary) Prefect server instead of starting their own
    assert found["commit"]["api"] == found["flow_api"] and found["flow_api"].startswith("http://127.0.0.1:")
    assert (result.stdout + result.stderr).count("Starting temporary server") == 1
