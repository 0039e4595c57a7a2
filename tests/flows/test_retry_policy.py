"""Which failures the flow retries: storage hiccups yes; bad data, full disks and bugs no."""

from __future__ import annotations

import errno

import pytest

from flows.pipeline import is_transient
from storage.store import StoreWriteError


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (ConnectionResetError(errno.ECONNRESET, "reset by peer"), True),
        (TimeoutError("read timed out"), True),
        (StoreWriteError(errno.EIO, "cannot write x: Input/output error"), True),
        (StoreWriteError(errno.ENOSPC, "cannot write x: No space left on device"), False),
        (StoreWriteError(errno.EFBIG, "cannot write x: File too large"), False),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), False),
        (FileNotFoundError(errno.ENOENT, "missing"), False),
        (ValueError("bad config"), False),
        (RuntimeError("a bug"), False),
    ],
)
def test_retry_policy(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient
