"""Signal handling of `xlembed run` (flows/interrupts.py), in a child process: the first SIGINT
asks the run to stop and lets it go on to a safe point; a second one exits at once with 130,
even when the stage never reaches a safe point. (The whole path, a real stage through the CLI,
is tests/reliability/test_interrupt.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.flows.toy_pipeline import REPO

SCRIPT = """
import sys, time
from flows.interrupts import stop_on_signals
from tasks.stop import STOP
with stop_on_signals():
    print("ready", flush=True)
    while not STOP.is_set():
        time.sleep(0.05)
    print("stop seen", flush=True)
    time.sleep(60)  # a stage that does not reach its safe point
"""


@pytest.mark.slow
def test_first_sigint_asks_to_stop_and_a_second_exits_at_once() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline().strip() == "stop seen"
        assert child.poll() is None, "the first Ctrl-C must not end the process"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=10) == 130
        assert time.monotonic() - sent < 5
    finally:
        if child.poll() is None:
            child.kill()
    stderr = child.stderr.read()
    assert "Ctrl-C: stopping at the next safe point" in stderr and "press Ctrl-C again to quit at once" in stderr
    assert "stopping now" in stderr
