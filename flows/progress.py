"""Progress bars for long work, shared by all threads of a run (rich allows one live display)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_progress = None
_users = 0


def enabled() -> bool:
    return sys.stderr.isatty() and os.environ.get("XLEMBED_PROGRESS", "1") != "0"


@contextmanager
def progress_bar(description: str, unit: str = "rows") -> Iterator[Callable[[int], None]]:
    """Yield an `advance(n)` callback; a no-op when stderr is not a terminal (CI, logs)."""
    global _progress, _users
    if not enabled():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with _lock:
        if _progress is None:
            _progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                TextColumn("{task.completed:,} " + unit), TimeElapsedColumn(),
                console=Console(stderr=True), transient=False,
            )
            _progress.start()
        _users += 1
        task_id = _progress.add_task(description, total=None)
    bar = _progress
    try:
        yield lambda n: bar.advance(task_id, n)
    finally:
        with _lock:
            bar.update(task_id, total=bar.tasks[task_id].completed)
            _users -= 1
            if _users == 0:
                bar.stop()
                _progress = None
