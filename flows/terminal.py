"""One terminal for a run: the live progress bars and every log line share a single rich Console.

rich draws a live display by moving the cursor over its own last lines; anything another
writer puts on stderr meanwhile lands in the middle of a bar (`ETA 0:00:0011:00:36 | INFO ...`).
So Prefect's console handler is a `TerminalLogHandler` (`use_terminal_handler`, through
Prefect's own override of its logging config), which prints through the same Console as the bars (rich then prints each line above them), keeps Prefect's format and
colours, and prints names literally (no markup, no emoji: a source named `ok` stays `ok`).

What the terminal shows, by the command line's verbosity:
- quiet (`-q`): warnings and errors only;
- default: Prefect's own per-task-run INFO lines ("Finished in state Completed()", one or
  more per shard) are left out; xlembed's lines and the flow's are kept;
- verbose (`-v`): everything.
The Prefect UI (the API handler) gets every line whatever the verbosity.

Third-party progress bars (Hugging Face downloads, transformers' "Loading weights" and
"Writing model shards", datasets' maps) draw their own tqdm lines over the bars: they are off.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

QUIET, DEFAULT, VERBOSE = "quiet", "default", "verbose"

_console: Any = None
_live_display: Any = None  # the rich Progress drawing the bars now (flows/progress.py sets it)


def set_live_display(display: Any) -> None:
    global _live_display
    _live_display = display


def terminal_console() -> Any:
    """The rich Console on stderr that the live bars and the log lines share (see the module doc)."""
    global _console
    if _console is None:
        from rich.console import Console

        # no `file`: it is sys.stderr when printing, so a redirected stderr is followed
        _console = Console(stderr=True, markup=False, emoji=False, highlight=False, soft_wrap=True)
    return _console


# Held while a line is printed and while the live bars start or stop. rich's `Live.stop()` draws
# the bars a last time into a buffer of its own thread and ends them with a newline; a line another
# thread printed in that window went straight to the terminal, after the last bar row's text:
# `... ETA 0:00:00 0:00:0107:41:02 | INFO | corpus: 1/2 shards`, when a shard's end closed the bars
# just as the flow logged it.
_terminal_lock = threading.RLock()


def terminal_lock() -> threading.RLock:
    """The lock that starting or stopping the live bars holds (see `_terminal_lock`)."""
    return _terminal_lock


def print_above_bars(renderable: Any) -> None:
    """Print on the shared Console, above the live bars when they are shown. The bars' refresh
    thread redraws under the live display's lock; printing under it too keeps a line from another
    thread from being positioned against a bar layout that has just changed (a glued line), and
    the terminal lock keeps it out of the bars' start and stop."""
    import contextlib

    with _terminal_lock:
        lock = getattr(getattr(_live_display, "live", None), "_lock", None) or contextlib.nullcontext()
        with lock:
            terminal_console().print(renderable, soft_wrap=True)


def silence_third_party_bars() -> None:
    """tqdm bars of the Hugging Face libraries off (environment first: read when they are imported)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import sys

    if "transformers" in sys.modules:  # already imported: its switch was read
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()


VERBOSITY_ENV = "XLEMBED_VERBOSITY"  # quiet, default or verbose: what TerminalLogHandler shows
PROGRESS_ENV = "XLEMBED_PROGRESS"  # "0": no progress bars (flows/progress.py); `--quiet` sets it
# The plan's notes (the hashing cost, a key-scheme change): the command line prints them under its
# plan table, then the flow plans again and logs them for the Prefect UI. A log record marked
# PLAN_NOTE is left off the terminal once the command line has printed the notes (it sets
# PLAN_NOTES_PRINTED_ENV); a flow run without it (a deployment, `xlembed serve`) shows them.
PLAN_NOTE = {"xlembed_plan_note": True}
PLAN_NOTES_PRINTED_ENV = "XLEMBED_PLAN_NOTES_PRINTED"
# Prefect's overrides of its logging.yml: its `console` handler (root, uvicorn, fastapi) and its
# `debug` handler (prefect._internal's warnings and errors), which would otherwise write to the
# stderr they found at configuration, under a live bar and not above it (a glued line)
_HANDLER_ENVS = ("PREFECT_LOGGING_HANDLERS_CONSOLE_CLASS", "PREFECT_LOGGING_HANDLERS_DEBUG_CLASS")


def use_terminal_handler(verbosity: str = DEFAULT) -> None:
    """Make Prefect's console and debug handlers TerminalLogHandlers, through Prefect's own override of its
    logging config (so every time Prefect configures logging, in Dask and Ray workers too), and
    set what it shows. Call before Prefect is imported; a user's own handler class wins."""
    for variable in _HANDLER_ENVS:
        os.environ.setdefault(variable, f"{__name__}.TerminalLogHandler")
    os.environ[VERBOSITY_ENV] = verbosity


def _prefect_package_dir() -> str:
    import prefect

    return os.path.dirname(prefect.__file__)


class TerminalLogHandler(logging.Handler):
    """Prefect's console handler, printing through `terminal_console()`: above the live bars,
    names literal, Prefect's colours; it shows what XLEMBED_VERBOSITY asks for (module doc).
    Its arguments are those Prefect's logging.yml gives its console handler."""

    def __init__(
        self, stream: Any = None, highlighter: Any = None, styles: dict[str, str] | None = None, level: int | str = logging.NOTSET
    ) -> None:
        super().__init__(level=level)
        from prefect.logging.highlighters import PrefectConsoleHighlighter
        from prefect.settings import PREFECT_LOGGING_COLORS
        from rich.highlighter import NullHighlighter
        from rich.theme import Theme

        coloured = PREFECT_LOGGING_COLORS.value()
        self.highlighter = (highlighter or PrefectConsoleHighlighter)() if coloured else NullHighlighter()
        self.theme = Theme(dict(styles or {}) if coloured else {}, inherit=True)
        self._prefect_dir = _prefect_package_dir()

    @staticmethod
    def verbosity() -> str:
        return os.environ.get(VERBOSITY_ENV, DEFAULT)

    def filter(self, record: logging.LogRecord) -> bool:  # type: ignore[override]
        if getattr(record, "xlembed_plan_note", False) and os.environ.get(PLAN_NOTES_PRINTED_ENV):
            return False  # printed once already, under the plan table
        if record.levelno < logging.WARNING:
            verbosity = self.verbosity()
            if verbosity == QUIET:
                return False
            if (
                verbosity == DEFAULT
                and record.name.startswith("prefect.task_runs")
                and record.pathname.startswith(self._prefect_dir)
            ):
                return False  # Prefect's own task-run chatter; xlembed's lines on that logger stay
        return bool(super().filter(record))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from rich.text import Text

            text = self.highlighter(Text(self.format(record)))  # a Text: no markup, no emoji codes
            console = terminal_console()
            with console.use_theme(self.theme):
                print_above_bars(text)
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging's own convention
            self.handleError(record)
