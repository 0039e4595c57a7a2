"""The temporary Prefect server of `xlembed run` starts while the run plans (issue 15: start-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flows.server import plain_prefect_setup
from tests.flows.toy_pipeline import cli, subprocess_env, write_config, write_corpus_text

RUN_AND_REPORT = """
import sys
from flows.cli import entrypoint
sys.argv = ["xlembed", "run", sys.argv[1]]
try:
    entrypoint()
except SystemExit as exit:
    assert not exit.code, exit.code
print("server code imported here:", "prefect.server.api.server" in sys.modules)
"""


@pytest.mark.slow
def test_a_run_starts_the_server_beside_itself_and_never_imports_the_server_code(tmp_path: Path) -> None:
    config = write_config(tmp_path / "toy.toml", tmp_path / "artifacts", write_corpus_text(tmp_path / "data"))
    env = subprocess_env(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", RUN_AND_REPORT, str(config)], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Prefect's own temporary server would import FastAPI, SQLAlchemy and the API into the CLI (~3 s)
    assert "server code imported here: False" in result.stdout, result.stdout
    assert result.stderr.count("temporary Prefect server for this run at http://127.0.0.1:") == 1, result.stderr
    for noise in ("View at http://127.0.0.1", "Error logging to API", "EventsWorker", "Traceback"):
        assert noise not in result.stderr, result.stderr
    assert (tmp_path / "artifacts" / "refs").exists() or any((tmp_path / "artifacts").iterdir())


def test_no_early_server_when_prefect_is_told_to_use_another(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    for name in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH", "PREFECT_SERVER_ALLOW_EPHEMERAL_MODE"):
        monkeypatch.delenv(name, raising=False)
    assert plain_prefect_setup()  # nothing configured: Prefect would start a temporary server
    monkeypatch.setenv("PREFECT_API_URL", "http://prefect.example:4200/api")
    assert not plain_prefect_setup()
    monkeypatch.delenv("PREFECT_API_URL")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "profiles.toml").write_text(
        'active = "work"\n[profiles.work]\nPREFECT_API_URL = "http://prefect.example:4200/api"\n'
    )
    assert not plain_prefect_setup()  # the active profile names a server
    (tmp_path / "home" / "profiles.toml").write_text('active = "local"\n[profiles.local]\n')
    assert plain_prefect_setup()
    (tmp_path / "prefect.toml").write_text("[api]\nurl = 'http://prefect.example:4200/api'\n")
    assert not plain_prefect_setup()  # settings files here may say otherwise: leave it to Prefect


@pytest.mark.slow
def test_the_server_does_not_outlive_a_killed_run(tmp_path: Path) -> None:
    import os
    import signal
    import time

    import psutil

    config = write_config(
        tmp_path / "toy.toml", tmp_path / "artifacts", write_corpus_text(tmp_path / "data"), shards=4, max_workers=1
    )
    env = subprocess_env(tmp_path, TOY_SHARD_SECONDS="5.0")
    process = subprocess.Popen(cli("run", str(config)), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, servers = time.monotonic() + 120, []
        while not servers and time.monotonic() < deadline:
            time.sleep(0.2)
            servers = [p for p in psutil.Process(process.pid).children(recursive=True) if "uvicorn" in " ".join(p.cmdline())]
        assert servers, "no server started"
        assert servers[0].pid != process.pid and os.getsid(servers[0].pid) != os.getsid(process.pid)  # its own session
    finally:
        process.send_signal(signal.SIGKILL)  # the CLI alone, as the OOM killer would
        process.wait(timeout=30)
    gone, alive = psutil.wait_procs(servers, timeout=20)
    assert not alive, f"server {alive} outlived the run"
