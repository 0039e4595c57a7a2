"""Ctrl-C and SIGTERM during `xlembed run` and `xlembed sweep`: stop at the next safe point.

The first SIGINT or SIGTERM sets `tasks.stop.STOP`: the running stage stops at its next safe
point (tasks/stop.py), the flow unwinds, the command prints what was kept and exits 130. A
second one exits at once (os._exit(130)), killing child process groups first.

Two things stand in the way, both Prefect's:
- its temporary server is a child process in xlembed's process group, so the terminal's
  Ctrl-C stopped it while the stage went on (then minutes of "EventsWorker failed" and a
  `ConnectError`). `start_prefect_server` starts it in a process group of its own; it is
  stopped at exit, after the flow has unwound.
- a flow run installs Prefect's SIGTERM handler, which raises inside the flow: the flow body
  calls `take_signals()` to put ours back (Prefect restores it after the run).

The processes of a local Dask or Ray cluster are in xlembed's process group too, and the
terminal's Ctrl-C killed Dask's workers mid-shard with pages of `KeyboardInterrupt`
tracebacks: Dask workers ignore SIGINT, a local Ray starts with it blocked
(`children_ignore_ctrl_c`), and the run cancels their shards and shuts the cluster down itself.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
import threading
import types
from collections.abc import Iterator

from tasks.stop import STOP, Interrupted, kill_children, own_process_group

EXIT_INTERRUPTED = 130
_active = False


def _handle(signum: int, frame: object) -> None:
    if STOP.is_set():
        os.write(2, b"\nstopping now\n")
        kill_children()
        os._exit(EXIT_INTERRUPTED)
    STOP.set()
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    os.write(
        2,
        f"\n{name}: stopping at the next safe point (a shard, a training step, an evaluation's next benchmark or batch); press Ctrl-C again to quit at once\n".encode(),
    )


def take_signals() -> None:
    """Install the handlers again (Prefect's flow engine replaces SIGTERM's). A no-op outside
    `stop_on_signals` and off the main thread."""
    if _active and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _handle)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT/SIGTERM set the stop event instead of raising, for as long as this lasts."""
    global _active
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    _active = True
    take_signals()
    try:
        yield
    finally:
        _active = False
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def children_ignore_ctrl_c() -> Iterator[None]:
    """Processes this thread starts in here (a local Ray's raylet and GCS server, and the
    workers they start) never see the terminal's Ctrl-C: SIGINT is blocked in this thread for as
    long as this lasts, and a blocked signal mask is inherited across fork and exec. A Ctrl-C in
    the meantime is delivered here when it ends. (A Dask cluster starts its workers from threads
    of its own: they ignore SIGINT instead, flows/runners.py `dask_setup`.)"""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def quiet_prefect_when_stopping() -> None:
    """Once a stop is requested, Prefect's console logs (failed task runs with tracebacks,
    "Finished in state Failed") say nothing the one-line summary does not: drop them."""
    for logger in [logging.getLogger(), *(logging.getLogger(n) for n in list(logging.root.manager.loggerDict))]:
        for handler in getattr(logger, "handlers", []):
            if type(handler).__name__ in ("PrefectConsoleHandler", "TerminalLogHandler") and not any(
                f is _drop_when_stopping for f in handler.filters
            ):
                handler.addFilter(_drop_when_stopping)


def _drop_when_stopping(record: logging.LogRecord) -> bool:
    return not STOP.is_set() or not record.name.startswith("prefect")


def start_prefect_server() -> None:
    """Start Prefect's temporary server now (when no PREFECT_API_URL is set), in a process group
    of its own, so that Ctrl-C in the terminal does not stop it under a running flow."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return
    from prefect.server.api import server as prefect_server

    class DetachedServer(prefect_server.SubprocessASGIServer):
        def _run_uvicorn_command(self) -> subprocess.Popen:
            module_subprocess = prefect_server.subprocess
            popen = functools.partial(subprocess.Popen, preexec_fn=own_process_group)
            prefect_server.subprocess = types.SimpleNamespace(Popen=popen)  # type: ignore[assignment]
            try:
                return super()._run_uvicorn_command()
            finally:
                prefect_server.subprocess = module_subprocess

    current = prefect_server.SubprocessASGIServer._instances.get(None)
    if current is not None and current.running:
        return
    server = object.__new__(DetachedServer)
    server.__init__(None)
    prefect_server.SubprocessASGIServer._instances[None] = server
    server.start()


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Around a flow run: signals stop it at a safe point (`Interrupted` comes out), Prefect's
    temporary server is out of the terminal's reach, Prefect's console logs end with the stop."""
    STOP.clear()
    with stop_on_signals():
        start_prefect_server()
        quiet_prefect_when_stopping()
        try:
            yield
        except Interrupted:
            raise
        except Exception as exc:
            if STOP.is_set():  # a worker that was cancelled or killed on the way out
                raise Interrupted(f"stopped ({type(exc).__name__}: {exc}); rerun resumes") from exc
            raise
