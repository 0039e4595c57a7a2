"""Stopping a run at its next safe point, when the user asks (Ctrl-C, SIGTERM).

The command line's signal handler sets `STOP`; stages poll it where stopping loses nothing
(before a shard starts, between batches of a shard, after a training step) and raise
`Interrupted`, whose message says what was kept ("train: stopped at step 37 of 100;
checkpoint at step 37 kept; rerun resumes from it"). A shard that stops writes nothing, so
a rerun builds it again; shards committed before it are kept. Nothing here knows about
Prefect or signals: tests set the event directly.

Child processes a stage starts (torchrun) run in their own process group, so a Ctrl-C in
the terminal reaches only xlembed, which asks them to stop; `register_child` lets a second
Ctrl-C kill them on its way out (`kill_children`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading

STOP = threading.Event()

_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_PR_SET_PDEATHSIG = 1


class Interrupted(Exception):
    """The run was asked to stop and stopped at a safe point; the message says what was kept."""


def stop_requested() -> bool:
    return STOP.is_set()


def raise_if_stopping(what: str) -> None:
    """Raise `Interrupted(what)` when a stop was requested (call it where stopping loses nothing)."""
    if STOP.is_set():
        raise Interrupted(what)


def _load_prctl():
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


_prctl = _load_prctl()


def own_process_group() -> None:
    """`preexec_fn` for children that must not see the terminal's Ctrl-C: a process group of
    their own, and (Linux) SIGTERM when the thread that started them dies, so that a killed
    xlembed leaves no orphans behind."""
    os.setpgid(0, 0)
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def register_child(process: subprocess.Popen) -> None:
    with _children_lock:
        _children.add(process)


def unregister_child(process: subprocess.Popen) -> None:
    with _children_lock:
        _children.discard(process)


def kill_children() -> None:
    """SIGKILL every registered child's process group (a second Ctrl-C: exit at once)."""
    with _children_lock:
        children = list(_children)
    for process in children:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
