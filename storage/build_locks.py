"""Lock files that say "a build is using this artifact": `gc` keeps what one holds.

A build commits its artifact and then moves its ref; between the two, the artifact is
referenced by nothing, and gc would take it for garbage. So a build holds a lock on the key it
builds (or reuses) from before its first write until its ref has moved:

    {root}/_locks/{stage}/{key}/{host}-{pid}-{nonce}.json   {"pid", "host", "started_at", "refreshed_at", "what"}

One file per holder (two runs of one config may build the same key at once), written whole
(local: temp file + rename; S3: one PUT), and removed when the holder lets go. A holder that
was killed never removes its file, so a lock is *stale*, and gc ignores it (and says so), when
its process is gone (same host: the pid no longer exists) or when it has not been refreshed
for `STALE_AFTER` (another host's pid cannot be checked; a holder refreshes its file every
`REFRESH_EVERY` while it lives). A lock file that cannot be parsed is stale too: it guards
nothing anyone can name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from storage.errors import StoreError
from storage.keys import KEY_PATTERN, NAME_PATTERN, check_key, check_name
from storage.layout import LOCKS_DIR
from storage.store import ArtifactStore

REFRESH_EVERY = timedelta(minutes=10)
STALE_AFTER = timedelta(hours=2)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildLock:
    stage: str
    key: str
    path: str  # the lock file, as the store's filesystem names it
    pid: int | None
    host: str | None
    started_at: datetime | None
    refreshed_at: datetime | None
    what: str = "build"

    def holder(self) -> str:
        return f"pid {self.pid} on {self.host}" if self.pid is not None else "an unknown process"

    def stale_reason(self, now: datetime, host: str | None = None) -> str | None:
        """Why this lock no longer guards anything (None: a live holder may still need it)."""
        if self.pid is None or self.refreshed_at is None:
            return "its file cannot be read"
        if self.host == (host or socket.gethostname()) and not process_alive(self.pid):
            return f"its process ({self.holder()}) is gone"
        age = now - self.refreshed_at
        if age > STALE_AFTER:
            return f"{self.holder()} has not refreshed it for {_hours(age)}"
        return None


def _hours(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:.1f}h" if hours < 48 else f"{hours / 24:.0f}d"


def process_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return True
    return True


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _record(pid: int, host: str, started: datetime, what: str) -> bytes:
    body = {"pid": pid, "host": host, "started_at": started.isoformat(), "refreshed_at": _now().isoformat(), "what": what}
    return json.dumps(body).encode("utf-8")


def lock_dir(store: ArtifactStore, stage: str, key: str) -> str:
    return f"{store.root_path}/{LOCKS_DIR}/{check_name(stage, 'stage')}/{check_key(key)}"


@contextlib.contextmanager
def hold_build_lock(store: ArtifactStore, stage: str, key: str, what: str = "build") -> Iterator[BuildLock]:
    """Hold a lock on `stage/key` for the body's duration; refreshed every `REFRESH_EVERY`."""
    pid, host, started = os.getpid(), socket.gethostname(), _now()
    safe_host = "".join(c if c.isalnum() or c in "-_" else "_" for c in host)[:64] or "host"
    path = f"{lock_dir(store, stage, key)}/{safe_host}-{pid}-{uuid.uuid4().hex[:8]}.json"
    store.backend.write_object(path, _record(pid, host, started, what))
    stop = threading.Event()

    def refresh() -> None:
        while not stop.wait(REFRESH_EVERY.total_seconds()):
            try:
                store.backend.write_object(path, _record(pid, host, started, what))
            except (OSError, StoreError) as exc:  # a missed refresh only shortens the lock's life
                log.warning("could not refresh the build lock %s: %s", path, exc)

    keeper = threading.Thread(target=refresh, name=f"xlembed-lock-{stage}", daemon=True)
    keeper.start()
    try:
        yield BuildLock(stage, key, path, pid, host, started, started, what)
    finally:
        stop.set()
        keeper.join()
        try:
            store.backend.remove(path)
        except FileNotFoundError:
            pass
        except (OSError, StoreError) as exc:  # left behind, it goes stale once this process is gone
            log.warning("could not remove the build lock %s: %s", path, exc)


@contextlib.contextmanager
def hold_all(store: ArtifactStore, items: list[tuple[str, str]], what: str = "build") -> Iterator[None]:
    """Hold a lock on each (stage, key) until the body ends."""
    with contextlib.ExitStack() as stack:
        for stage, key in dict.fromkeys(items):
            stack.enter_context(hold_build_lock(store, stage, key, what))
        yield


def _parse(stage: str, key: str, path: str, blob: bytes | None) -> BuildLock:
    try:
        body = json.loads(blob or b"")
        pid, host = int(body["pid"]), str(body["host"])
        started = _when(body["started_at"])
        refreshed = _when(body["refreshed_at"])
        what = str(body.get("what", "build"))
    except (ValueError, TypeError, KeyError):
        return BuildLock(stage, key, path, None, None, None, None)
    return BuildLock(stage, key, path, pid, host, started, refreshed, what)


def _when(text: object) -> datetime:
    when = datetime.fromisoformat(str(text))
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def list_locks(store: ArtifactStore) -> list[BuildLock]:
    """Every lock file under `{root}/_locks/` (live and stale alike)."""
    base = f"{store.root_path}/{LOCKS_DIR}"
    try:
        files = store.backend.find(base)
    except FileNotFoundError:
        return []
    found = []
    for path in sorted(files):
        parts = path[len(base) :].strip("/").split("/")
        if len(parts) != 3 or not parts[2].endswith(".json") or ".tmp-" in parts[2]:
            continue
        stage, key = parts[0], parts[1]
        if not NAME_PATTERN.match(stage) or not KEY_PATTERN.match(key):
            continue
        found.append(_parse(stage, key, path, store.backend.read_bytes(path)))
    return found


def held(
    store: ArtifactStore, now: datetime | None = None
) -> tuple[dict[tuple[str, str], BuildLock], list[tuple[BuildLock, str]]]:
    """(stage, key) -> a live lock on it; and the stale locks, each with why it is stale."""
    now = now or _now()
    host = socket.gethostname()
    live: dict[tuple[str, str], BuildLock] = {}
    stale: list[tuple[BuildLock, str]] = []
    for lock in list_locks(store):
        reason = lock.stale_reason(now, host)
        if reason is None:
            live.setdefault((lock.stage, lock.key), lock)
        else:
            stale.append((lock, reason))
    return live, stale
