"""Ctrl-C and SIGTERM during `xlembed run`, as a user sends them: a real signal to a real CLI
process running a real stage, then a rerun that resumes, compared with an uninterrupted run.

Issue 15 (1): Ctrl-C during training stopped Prefect's temporary server but not the stage; it
trained on for minutes among "EventsWorker failed" messages and exited 1 with a `ConnectError`.
Now the stage stops at its next safe point, the command says what was kept and exits 130, no
process of the run is left, and a rerun resumes to the artifacts of an uninterrupted run.

The upstream stages are built by the fault tests' driver (no Prefect: quicker); the stage
under test runs through the CLI, in a session of its own as a terminal's foreground job is.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from flows.sweep import toml_document
from tests.reliability.conftest import driver_command, driver_env
from tests.reliability.invariants import artifact_files, check_store
from tests.reliability.scenarios import dump_spec, scenario

pytestmark = pytest.mark.slow
NOISE = ("EventsWorker", "ConnectError", "Traceback", "Crashed")


def prepare(
    stage: str, tmp: Path, cache: Path, pipeline: dict[str, Any] | None = None, **overrides: Any
) -> tuple[Path, Path, Path]:
    """Upstream stages built into `root`; a copy of it, `reference`, with `stage` and those after
    it built too (uninterrupted); and the CLI config of the pipeline over `root` (`pipeline`:
    more `[pipeline]` settings)."""
    sc = scenario(stage)
    root, reference = tmp / "root", tmp / "reference"
    spec = sc.spec(str(root), tmp / "data", cache)
    spec["configs"][stage].update(overrides)
    upstream = {**spec, "stages": spec["stages"][: spec["stages"].index(stage)]}
    subprocess.run(
        driver_command(dump_spec(upstream, tmp / "upstream.json")),
        env=driver_env(tmp),
        check=True,
        capture_output=True,
        timeout=300,
    )
    shutil.copytree(root, reference)
    subprocess.run(
        driver_command(dump_spec({**spec, "root": str(reference)}, tmp / "reference.json")),
        env=driver_env(tmp),
        check=True,
        capture_output=True,
        timeout=300,
    )
    sections = {name: spec["configs"][name] for name in spec["stages"]}
    config = tmp / "pipeline.toml"
    config.write_text(
        toml_document(
            {"pipeline": {"name": f"interrupt-{stage}", "root": str(root), "max_workers": 1, **(pipeline or {})}, **sections}
        ),
        encoding="utf-8",
    )
    return root, reference, config


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    home = tmp / "prefect-home"
    home.mkdir(exist_ok=True)
    env = driver_env(tmp, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", **extra)
    env.pop("PREFECT_API_URL", None)
    return env


def start_run(config: Path, tmp: Path, name: str, args: tuple[str, ...] = ("run",), **env: str) -> tuple[subprocess.Popen, Path]:
    log = tmp / f"{name}.log"
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "flows.cli", *args, str(config)],
            env=cli_env(tmp, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, log


def wait_until(condition, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the run ended (rc {process.returncode}) before the moment to interrupt it"
        assert time.monotonic() < deadline, "the moment to interrupt never came"
        time.sleep(0.1)


def assert_group_gone(pgid: int, timeout: float = 15) -> None:
    """Nothing of the run is left: no Prefect server, no worker, no torchrun."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    left = subprocess.run(["ps", "-o", "pid,args", "-g", str(pgid)], capture_output=True, text=True).stdout
    raise AssertionError(f"processes of the interrupted run are still alive:\n{left}")


def assert_all_gone(pids: set[int], timeout: float = 15) -> None:
    """Every process the run started, wherever its process group, has ended."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in map(_process, pids) if p is not None and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                "processes of the interrupted run are still alive:\n"
                + "\n".join(f"{p.pid} {' '.join(p.cmdline())[:200]}" for p in alive)
            )
        time.sleep(0.2)


def _process(pid: int) -> Any:
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


def descendants(pid: int) -> set[int]:
    import psutil

    return {child.pid for child in psutil.Process(pid).children(recursive=True)}


def finish_and_compare(config: Path, tmp: Path, root: Path, reference: Path, args: tuple[str, ...] = ("run",), **env: str) -> str:
    rerun = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args, str(config)],
        env=cli_env(tmp, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    check_store(root)
    assert artifact_files(root) == artifact_files(reference), "the resumed run's artifacts differ from the uninterrupted run's"
    return rerun.stdout + rerun.stderr


def test_ctrl_c_during_training_stops_at_a_step_keeps_a_checkpoint_and_resumes(tmp_path: Path, model_cache: Path, record) -> None:
    root, reference, config = prepare("train", tmp_path, model_cache, steps=40, checkpoint_every=10)
    checkpoints = tmp_path / "data" / "train-checkpoints"
    process, log = start_run(config, tmp_path, "interrupted")
    try:
        wait_until(lambda: any(checkpoints.glob("*/latest.json")), process, 300)  # trained 10 steps
        os.killpg(process.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole foreground group
        sent = time.monotonic()
        rc = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text(encoding="utf-8")
    assert rc == 130, output[-3000:]
    assert time.monotonic() - sent < 60, "stopping took too long"
    assert "interrupted: train: stopped at step " in output and "rerun resumes" in output, output[-3000:]
    assert not [word for word in NOISE if word in output], output[-3000:]
    assert_group_gone(process.pid)
    stopped = int(output.split("stopped at step ", 1)[1].split()[0])
    assert 10 <= stopped < 40
    import json

    latest = json.loads(next(checkpoints.glob("*/latest.json")).read_text(encoding="utf-8"))
    assert latest["step"] == stopped, "the stop point's checkpoint was not written"
    assert not list(root.glob("train/*/manifest.json")), "a stopped train committed an artifact"
    summary = next(line for line in output.splitlines() if line.startswith("interrupted:"))
    finish_and_compare(config, tmp_path, root, reference)
    assert not any(checkpoints.glob("*/latest.json")), "the finished run left its checkpoints"
    record(
        "interrupt",
        "Ctrl-C (SIGINT to the process group) during train",
        "stopped and resumed",
        f"exit 130, '{summary}'; rerun: same artifacts as an uninterrupted run",
    )


def test_sigterm_during_align_stops_at_a_shard_and_resumes(tmp_path: Path, model_cache: Path, record) -> None:
    root, reference, config = prepare("align", tmp_path, model_cache, groups_per_shard=10)  # 15 shards
    process, log = start_run(config, tmp_path, "interrupted")
    try:
        wait_until(lambda: any(root.glob("align/*/shards/*.json")), process, 300)
        process.send_signal(signal.SIGTERM)  # a scheduler stopping the job: the main process only
        rc = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text(encoding="utf-8")
    assert rc == 130, output[-3000:]
    assert "interrupted: align: stopped; " in output and " of 15 shards kept; rerun resumes" in output, output[-3000:]
    assert not [word for word in NOISE if word in output], output[-3000:]
    assert_group_gone(process.pid)
    kept = int(output.split("align: stopped; ", 1)[1].split()[0])
    assert 1 <= kept < 15
    assert len(list(root.glob("align/*/shards/*.json"))) == kept
    summary = next(line for line in output.splitlines() if line.startswith("interrupted:"))
    finish_and_compare(config, tmp_path, root, reference)
    record(
        "interrupt",
        "SIGTERM to the main process during align",
        "stopped and resumed",
        f"exit 130, '{summary}'; rerun: same artifacts as an uninterrupted run",
    )


# ------------------------------------------------------------------ Dask and Ray task runners
# The toy `lengths` stage (6 shards, each sleeping TOY_SHARD_SECONDS before its work): the
# cheapest stage whose shards take seconds, so that the signal lands with shards committed,
# running and not yet started. Its shards run in the cluster's worker processes.


def _ray_starts() -> str | None:
    """None when a local Ray starts here within 60 s, else why not."""
    probe = "import ray, time; t = time.monotonic(); ray.init(num_cpus=1, include_dashboard=False); ray.shutdown(); print(time.monotonic() - t)"
    try:
        with tempfile.TemporaryDirectory(prefix="xlembed-ray-", dir="/tmp") as ray_tmp:
            started = subprocess.run(
                [sys.executable, "-c", probe],
                capture_output=True,
                text=True,
                timeout=60,
                env={**os.environ, "RAY_TMPDIR": ray_tmp},
            )
    except subprocess.TimeoutExpired:
        return "a local Ray did not start within 60 s here"
    if started.returncode != 0:
        return "a local Ray cannot start here: " + (started.stderr.strip().splitlines() or ["?"])[-1][:200]
    return None


@pytest.mark.parametrize("runner", ["dask", "ray"])
def test_ctrl_c_with_a_cluster_task_runner_stops_its_workers_and_resumes(
    runner: str, request: pytest.FixtureRequest, tmp_path: Path, model_cache: Path, record
) -> None:
    toy = {"XLEMBED_STAGES": scenario("lengths").registry, "TOY_SHARD_SECONDS": "2"}
    if runner == "ray":
        if why := _ray_starts():
            pytest.skip(why)
        # Ray's socket paths must stay under 108 bytes: not under pytest's long TMPDIR
        ray_tmp = tempfile.mkdtemp(prefix="xlembed-ray-", dir="/tmp")
        request.addfinalizer(lambda: shutil.rmtree(ray_tmp, ignore_errors=True))
        toy["RAY_TMPDIR"] = ray_tmp
    root, reference, config = prepare("lengths", tmp_path, model_cache, pipeline={"task_runner": runner, "max_workers": 2})
    process, log = start_run(config, tmp_path, "interrupted", **toy)
    started: set[int] = set()
    try:

        def one_shard_kept() -> bool:
            started.update(descendants(process.pid))
            return any(root.glob("lengths/*/shards/*.json"))

        wait_until(one_shard_kept, process, 120)
        started.update(descendants(process.pid))
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        rc = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text(encoding="utf-8")
    assert rc == 130, output[-3000:]
    assert "interrupted: lengths: stopped; " in output and " of 6 shards kept; rerun resumes" in output, output[-3000:]
    assert not [word for word in NOISE if word in output], output[-3000:]
    assert_group_gone(process.pid)
    assert_all_gone(started)
    kept = int(output.split("lengths: stopped; ", 1)[1].split()[0])
    assert 1 <= kept < 6
    summary = next(line for line in output.splitlines() if line.startswith("interrupted:"))
    finish_and_compare(config, tmp_path, root, reference, **toy)
    record(
        "interrupt",
        f"Ctrl-C during a stage with the {runner} task runner",
        "stopped and resumed",
        f"exit 130, '{summary}', no worker left; rerun: same artifacts as an uninterrupted run",
    )


def test_ctrl_c_during_a_sweep_stops_and_a_rerun_completes(tmp_path: Path, model_cache: Path, record) -> None:
    """`xlembed sweep` over the toy pipeline, a grid of 2 variants sharing the `lengths` stage."""
    toy = {"XLEMBED_STAGES": scenario("lengths").registry, "TOY_SHARD_SECONDS": "2"}
    root, _, config = prepare("lengths", tmp_path, model_cache)
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\n"histogram.bucket" = [5, 10]\n', encoding="utf-8")
    args = ("sweep", "--grid", str(grid))
    process, log = start_run(config, tmp_path, "interrupted", args, **toy)
    try:
        wait_until(lambda: any(root.glob("lengths/*/shards/*.json")), process, 120)
        os.killpg(process.pid, signal.SIGINT)
        rc = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    output = log.read_text(encoding="utf-8")
    assert rc == 130, output[-3000:]
    summary = next((line for line in output.splitlines() if line.startswith("interrupted:")), "")
    assert "rerun resumes" in summary, output[-3000:]
    assert not [word for word in NOISE if word in output], output[-3000:]
    assert_group_gone(process.pid)
    rerun = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args, str(config)],
        env=cli_env(tmp_path, **toy),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    check_store(root)
    assert len(list(root.glob("histogram/*/manifest.json"))) == 2, "the rerun did not build both variants"
    record(
        "interrupt",
        "Ctrl-C (SIGINT to the process group) during xlembed sweep",
        "stopped and resumed",
        f"exit 130, '{summary}'; rerun completes both variants",
    )
