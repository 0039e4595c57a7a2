"""The `xlembed` command line.

Exit codes: 0 success, 1 the run or a check failed, 2 bad usage or config.
Heavy imports (Prefect, polars) happen only in the commands that need them, so
`xlembed plan` and an up-to-date `xlembed run` answer quickly.

One module per command group: `run` (plan, run, evaluate), `sweep`, `align`, `artifacts`
(inspection), `artifacts_admin` (pull, push, verify, gc, refs, rollback),
`deploy` (deploy, serve) and `export`; `common` holds the apps and what they share.
"""

from __future__ import annotations

import os
import sys

from rich.text import Text

# Each module registers its commands on `app` as it is imported; this order is the help's order.
from flows.cli import run  # noqa: F401, I001 - plan, run, evaluate
from flows.cli import sweep  # noqa: F401
from flows.cli import align  # noqa: F401
from flows.cli import artifacts  # noqa: F401 - ls, show, head, lineage, query, index, diff
from flows.cli import artifacts_admin  # noqa: F401 - pull, push, verify, gc, refs, rollback
from flows.cli import deploy  # noqa: F401 - deploy, serve
from flows.cli import export  # noqa: F401
from flows.cli.common import ROOT_ENV, app, err
from storage import StoreError
from storage.errors import explain

__all__ = ["app", "entrypoint"]


class _ReaderGone(Exception):
    """Standard output's reader closed the pipe (`xlembed artifacts ls | head -1`)."""


class _PipeAwareStdout:
    """Standard output whose closed pipe raises `_ReaderGone`: click turns a BrokenPipeError into
    exit 1, and a reader that stopped reading is not a failure of the command (cat, ls and git exit
    quietly too)."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise _ReaderGone from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _ReaderGone from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def _quiet_exit_on_closed_pipe() -> None:
    # later writes (the interpreter's final flush) go nowhere instead of raising again
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def entrypoint() -> None:
    """Console script: store problems become one clear line, not a traceback."""
    sys.stdout = _PipeAwareStdout(sys.stdout)  # type: ignore[assignment]
    try:
        app(prog_name="xlembed")
    except _ReaderGone:
        _quiet_exit_on_closed_pipe()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except StoreError as exc:
        if os.environ.get("XLEMBED_DEBUG"):
            raise
        err.print(Text.assemble(("error:", "red"), " ", str(exc)), highlight=False)
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - object-storage failures become one line too
        message = explain(exc, os.environ.get(ROOT_ENV))
        if message is None or os.environ.get("XLEMBED_DEBUG"):
            raise
        err.print(Text.assemble(("error:", "red"), " ", message), highlight=False)
        sys.exit(1)
