"""Where xlembed keeps local caches (downloads, in-progress checkpoints, the hash index).

The XDG Base Directory rules: `$XDG_CACHE_HOME` when it is set to an absolute path, else
`~/.cache` (an empty or relative value is ignored, as the specification asks). Read on every
call, not at import, so a process that sets the variable after importing xlembed (a test, a
job runner) gets what it set.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_HOME_ENV = "XDG_CACHE_HOME"


def user_cache_home() -> Path:
    """`$XDG_CACHE_HOME` if it is an absolute path, else `~/.cache`."""
    configured = os.environ.get(CACHE_HOME_ENV, "")
    if configured and os.path.isabs(configured):
        return Path(configured)
    return Path("~/.cache").expanduser()


def xlembed_cache_dir(*parts: str) -> Path:
    """`{user cache home}/xlembed/{parts...}` (not created)."""
    return user_cache_home().joinpath("xlembed", *parts)
