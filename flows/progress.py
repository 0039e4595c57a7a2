"""Progress of long work: a bar in a terminal, timed lines elsewhere, and the Prefect UI.

A shard's builder reports through its ShardContext: `expect(total, unit)` names what it
counts (shards, sentences, pairs, steps), `progress(n)` advances, `report(line)` says
something worth keeping (the trainer's step line: losses, learning rate, speed, ETA).

- stderr is a terminal: one rich display shared by all threads of a run (rich allows one
  live display) with a bar per shard (done/total, rate, ETA, elapsed); reported lines, and
  the log lines (flows/terminal.py: the bars and the logs share one Console), are printed
  above the bars.
- stderr is not a terminal (CI, nohup, a scheduler's log): a line every
  XLEMBED_PROGRESS_EVERY seconds (default 30) and every reported line, through the task
  run's logger, so they reach both the log and the Prefect UI.
- either way, the timed and the reported lines go to the task run's logs in the Prefect UI.

XLEMBED_PROGRESS=0 turns the bar and the timed lines off; =lines asks for lines in a terminal,
=bar for the bar where stderr does not look like one.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flows.terminal import PROGRESS_ENV, print_above_bars, set_live_display, terminal_console, terminal_lock

_lock = threading.Lock()
_display: Any = None
_users = 0
log = logging.getLogger("xlembed.progress")

EVERY_ENV = "XLEMBED_PROGRESS_EVERY"


def live_display() -> Any:
    """The rich `Progress` that draws the bars of the shards running now (None: no bar shown)."""
    return _display


def mode() -> str:
    """ "bar", "lines" or "off"."""
    setting = os.environ.get(PROGRESS_ENV, "1").lower()
    if setting in ("0", "off", "false", "no"):
        return "off"
    if setting in ("lines", "bar"):
        return setting
    return "bar" if sys.stderr.isatty() else "lines"


def enabled() -> bool:
    return mode() == "bar"


def line_interval() -> float:
    try:
        return max(0.0, float(os.environ.get(EVERY_ENV, "30")))
    except ValueError:
        return 30.0


def format_duration(seconds: float) -> str:
    seconds = int(round(max(0.0, seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _rate_text(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


class StageProgress:
    """One shard's progress: call it with a count to advance; see the module docstring."""

    def __init__(self, description: str, unit: str = "rows", *, how: str | None = None, interval: float | None = None) -> None:
        self.description = description
        self.shard_description = description  # `expect(label=)` adds what is counted now to it
        self.unit = unit
        self.total: int | None = None
        self.done = 0
        self.status_line = ""
        self.mode = how or mode()
        self.interval = line_interval() if interval is None else interval
        self.started = time.monotonic()
        self._counted_from = self.started  # rate and ETA count from the first expect() or advance
        self._done_at_start = 0
        self._last_line = self.started
        self._bar: Any = None
        self._task_id: Any = None

    # ---------------------------------------------------------------- what builders call
    def __call__(self, n: int) -> None:
        self.advance(n)

    def expect(self, total: int | None, unit: str | None = None, done: int = 0, *, label: str | None = None) -> None:
        """Set what is counted: `total` units (None: unknown), `done` of them already (a resume);
        `label`: what they are (shown after the shard's name; None keeps the current one)."""
        if label is not None:
            self.description = f"{self.shard_description} {label}"
        self.total = total
        self.unit = unit or self.unit
        self.done = done
        self._done_at_start = done
        self._counted_from = time.monotonic()
        if self._bar is not None:
            self._bar.update(self._task_id, total=total, completed=done, unit=self.unit, rate="", description=self.description)

    def advance(self, n: int) -> None:
        self.done += n
        due = self.mode != "off" and time.monotonic() - self._last_line >= self.interval
        if self._bar is not None:
            self._bar.advance(self._task_id, n)
            if due:  # the terminal has the bar; the Prefect UI gets the line
                self._emit(self.summary(), to_console=False)
        elif due:
            self._emit(self.summary(), to_console=True)

    def report(self, line: str) -> None:
        """A line worth keeping (e.g. the trainer's every N steps): printed above the bars in a
        terminal, a log line otherwise; the Prefect UI gets it either way."""
        self.status_line = line
        if self._bar is not None:  # above the bars, which keep to one short row each
            from rich.text import Text

            print_above_bars(Text(line))
            self._emit(line, to_console=False)
        elif self.mode != "off":
            self._emit(line, to_console=True)

    # ---------------------------------------------------------------- text
    def rate(self) -> float | None:
        elapsed = time.monotonic() - self._counted_from
        counted = self.done - self._done_at_start
        return counted / elapsed if elapsed > 0 and counted > 0 else None

    def eta(self) -> float | None:
        rate = self.rate()
        if self.total is None or rate is None:
            return None
        return max(0, self.total - self.done) / rate

    def summary(self, final: bool = False) -> str:
        """ "align:shard-0001: 1,200/4,000 pairs (30%), 45.2 pairs/s, ETA 0:01:02, elapsed 0:00:26"."""
        count = (
            f"{self.done:,}/{self.total:,} {self.unit} ({100 * self.done / self.total:.0f}%)"
            if self.total
            else f"{self.done:,} {self.unit}"
        )
        parts = [count]
        rate, eta = self.rate(), self.eta()
        if rate is not None:
            parts.append(f"{_rate_text(rate)} {self.unit}/s")
        if eta is not None and not final:
            parts.append(f"ETA {format_duration(eta)}")
        parts.append(f"elapsed {format_duration(time.monotonic() - self.started)}")
        return f"{self.description}: " + ", ".join(parts)

    def _emit(self, line: str, *, to_console: bool) -> None:
        self._last_line = time.monotonic()
        if to_console:
            run_logger = _run_logger()
            if run_logger is not None:
                run_logger.info("%s", line)
            elif log.hasHandlers() and log.getEffectiveLevel() <= logging.INFO:
                log.info("%s", line)
            else:  # no logging set up (a stage run outside Prefect): plain stderr
                print(line, file=sys.stderr, flush=True)
        else:
            _to_prefect_ui(line)


def _run_logger() -> Any:
    try:
        from prefect.context import FlowRunContext, TaskRunContext
    except ImportError:  # pragma: no cover
        return None
    if TaskRunContext.get() is None and FlowRunContext.get() is None:
        return None
    from prefect import get_run_logger

    return get_run_logger()


_api_handler: Any = None


def _to_prefect_ui(line: str) -> None:
    """Send a line to the task run's logs in the Prefect UI only (the terminal has the bar)."""
    global _api_handler
    if _run_logger() is None:
        return
    from prefect.logging.handlers import APILogHandler

    if _api_handler is None:
        _api_handler = APILogHandler()
    record = logging.LogRecord("xlembed.progress", logging.INFO, __file__, 0, "%s", (line,), None)
    _api_handler.handle(record)


@contextmanager
def progress_bar(description: str, unit: str = "rows") -> Iterator[StageProgress]:
    """Yield a StageProgress for one shard; closes its bar (or writes its last line) at the end."""
    global _display, _users
    progress = StageProgress(description, unit)
    if progress.mode == "bar":
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        with _lock:
            if _display is None:
                _display = Progress(
                    SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(bar_width=24),
                    TextColumn("{task.completed:,}/{task.fields[total_text]} {task.fields[unit]}"),
                    TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(),
                    console=terminal_console(), transient=False, refresh_per_second=4,
                )  # fmt: skip
                with terminal_lock():
                    _display.start()
                    set_live_display(_display)
            _users += 1
            task_id = _display.add_task(description, total=None, unit=unit, total_text="?", rate="")
        progress._bar, progress._task_id = _RateBar(_display, progress), task_id
    try:
        yield progress
    finally:
        if progress.mode == "lines" and progress.done:
            progress._emit(progress.summary(final=True) + " (done)", to_console=True)
        if progress._bar is not None:
            with _lock:
                task = next(t for t in _display.tasks if t.id == progress._task_id)
                _display.update(progress._task_id, total=task.completed, total_text=f"{task.completed:,}")
                _users -= 1
                if _users == 0:
                    with terminal_lock():  # no line printed while the bars draw their last frame
                        _display.stop()
                        set_live_display(None)
                    _display = None


class _RateBar:
    """Forwards updates to rich, keeping the rate column in the shard's own unit."""

    def __init__(self, display: Any, progress: StageProgress) -> None:
        self.display, self.progress = display, progress

    def update(self, task_id: Any, **fields: Any) -> None:
        if "total" in fields:
            fields["total_text"] = f"{fields['total']:,}" if fields["total"] is not None else "?"
        self.display.update(task_id, **fields)

    def advance(self, task_id: Any, n: int) -> None:
        rate = self.progress.rate()
        self.display.update(task_id, advance=n, rate=f"{_rate_text(rate)} {self.progress.unit}/s" if rate else "")
