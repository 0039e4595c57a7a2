"""A temporary Prefect server for one `xlembed run`, started while the run plans.

Without PREFECT_API_URL, Prefect starts a temporary server of its own when the flow starts:
it imports the whole server (FastAPI, SQLAlchemy: about 3 s on 2 busy cores) into the CLI's
process, then waits while a subprocess imports it again, migrates its SQLite database and
starts up (about 5 s more), and only then runs the first task. Here the same server
(Prefect's own `uvicorn prefect.server.api.server:create_app`, as Prefect runs it) is
started in the background before planning, so its start-up overlaps the plan, the data
checks and the import of Prefect in the CLI; the CLI never imports the server code. It runs
in a session of its own, so a Ctrl-C in the terminal reaches the run, which stops its stage
and then this server, instead of killing the server under a running stage; on Linux it gets
SIGTERM if the CLI dies (even by SIGKILL).

Nothing is started when a Prefect API is configured (PREFECT_API_URL, a profile) or
ephemeral mode is off; XLEMBED_EARLY_SERVER=0 leaves it to Prefect as before. When the plan
finds nothing to compute, the server is stopped unused.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


class TemporaryServer:
    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self._log = tempfile.TemporaryFile()

    @classmethod
    def start_early(cls) -> TemporaryServer:
        """Start the server now, unless Prefect is configured to use another (or none)."""
        server = cls()
        if os.environ.get("XLEMBED_EARLY_SERVER", "1") != "0" and plain_prefect_setup():
            try:
                server._start()
                atexit.register(server.stop)
            except OSError:  # Prefect starts its own, as before
                server.process = None
        return server

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _start(self) -> None:
        self.port = _free_port()
        app_dir = Path(importlib.util.find_spec("prefect").origin).parent.parent  # type: ignore[union-attr]
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory", "prefect.server.api.server:create_app",
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True, preexec_fn=_die_with_parent,
        )  # fmt: skip

    def _wait_ready(self) -> bool:
        timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    @contextlib.contextmanager
    def connected(self) -> Iterator[None]:
        """Run the block against this server (or, if it did not start, as Prefect would have)."""
        if self.process is None or not self._wait_ready():
            self.stop()
            yield
            return
        import logging

        from prefect.logging import get_logger
        from prefect.settings import PREFECT_API_URL, temporary_settings

        address = self.api_url.removesuffix("/api")
        get_logger().info("Starting temporary server on %s", address)
        no_ui_links = _DropPrefix(f"View at {address}/")  # this server serves no UI
        logging.getLogger("prefect.flow_runs").addFilter(no_ui_links)
        try:
            with temporary_settings(updates={PREFECT_API_URL: self.api_url}):
                try:
                    yield
                finally:
                    _drain_prefect_workers()  # logs and events reach the server before it stops
        finally:
            logging.getLogger("prefect.flow_runs").removeFilter(no_ui_links)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def plain_prefect_setup() -> bool:
    """True when Prefect would start a temporary server of its own: no API URL in the
    environment or the active profile, ephemeral mode allowed, and no prefect.toml, .env or
    [tool.prefect] here that could say otherwise (read without importing Prefect)."""
    import tomllib

    if os.environ.get("PREFECT_API_URL") or os.environ.get("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "").lower() in ("0", "false"):
        return False
    here = Path.cwd()
    if (here / "prefect.toml").exists() or (here / ".env").exists():
        return False
    with contextlib.suppress(OSError, ValueError):
        if "prefect" in tomllib.loads((here / "pyproject.toml").read_text(encoding="utf-8")).get("tool", {}):
            return False
    home = Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser()
    profiles_path = Path(os.environ.get("PREFECT_PROFILES_PATH", home / "profiles.toml")).expanduser()
    try:
        profiles = tomllib.loads(profiles_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    settings = profiles.get("profiles", {}).get(active, {})
    return not settings.get("PREFECT_API_URL") and str(
        settings.get("PREFECT_SERVER_ALLOW_EPHEMERAL_MODE", "true")
    ).lower() not in ("0", "false")


def _die_with_parent() -> None:
    """In the server's process before it starts (Linux): SIGTERM when the CLI dies, even by
    SIGKILL, so that no server outlives its run."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _DropPrefix:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def filter(self, record: object) -> bool:
        return not str(getattr(record, "msg", "")).startswith(self.prefix) and not _message(record).startswith(self.prefix)


def _message(record: object) -> str:
    try:
        return record.getMessage()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return ""


def _drain_prefect_workers() -> None:
    with contextlib.suppress(Exception):
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=5)
    with contextlib.suppress(Exception):
        from prefect.events.worker import EventsWorker

        EventsWorker.drain_all(timeout=5)
