"""Content hashes of local files, remembered in a local index so unchanged files are not re-read.

Artifact keys name their local inputs by content (sha256), so that `touch`, a fresh checkout
or the same bytes at another path keep the cache. Hashing a gigabyte on every `plan` would be
slow, so a small SQLite index (as git's index and DVC's state do) maps a file's absolute
path and stat signature (size, mtime_ns, ctime_ns, inode) to the sha256 read last time; a
file whose signature is unchanged is not read again. ctime is in the signature because it
cannot be set back: `cp -p` or `rsync -t` over an existing file keep size, mtime and inode.

A file modified within `RACY_NS` of being hashed could change again without its mtime moving
(coarse timestamps), so such an entry is not trusted: it is hashed again next time (git calls
these "racily clean"). The index is an optimisation only: if it cannot be opened or written,
files are hashed every time, with a warning.

`hash_stats()` collects what hashing cost (files read, bytes, seconds, index hits) for a
report such as `xlembed plan`'s. Nothing here knows what the files contain.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from storage.user_cache import xlembed_cache_dir

logger = logging.getLogger(__name__)

INDEX_ENV = "XLEMBED_HASH_INDEX"
"""Path of the index file; `off` disables it (every file is hashed every time)."""
INDEX_NAME = "hash-index.sqlite"
RACY_NS = 2_000_000_000
"""A file whose mtime is this close to the moment it was hashed is hashed again next time (FAT
has 2 s timestamps; most filesystems are far finer)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    hashed_at_ns INTEGER NOT NULL
)
"""


def default_index_path() -> Path | None:
    """`$XLEMBED_HASH_INDEX`, else `$XDG_CACHE_HOME/xlembed/hash-index.sqlite` (~/.cache by default)."""
    configured = os.environ.get(INDEX_ENV)
    if configured:
        return None if configured.lower() == "off" else Path(configured).expanduser()
    return xlembed_cache_dir(INDEX_NAME)


@dataclass
class HashStats:
    """What hashing cost while it was collected: files read and their bytes, the seconds spent
    reading them, and files whose hash came from the index unread. `paths` maps each digest
    seen to a path that had it, so a report can name the file behind a changed hash."""

    hashed_files: int = 0
    hashed_bytes: int = 0
    seconds: float = 0.0
    from_index: int = 0
    paths: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, path: str, digest: str, size: int, seconds: float | None) -> None:
        with self._lock:
            self.paths.setdefault(digest, path)
            if seconds is None:
                self.from_index += 1
            else:
                self.hashed_files += 1
                self.hashed_bytes += size
                self.seconds += seconds

    @classmethod
    def combined(cls, parts: Iterable[HashStats]) -> HashStats:
        """The cost of several collections together (a sweep plans each variant in turn)."""
        total = cls()
        for part in parts:
            total.hashed_files += part.hashed_files
            total.hashed_bytes += part.hashed_bytes
            total.seconds += part.seconds
            total.from_index += part.from_index
            for digest, path in part.paths.items():
                total.paths.setdefault(digest, path)
        return total

    def summary(self) -> str:
        """E.g. "hashed 3 files (12.4 MB) in 0.05 s; 120 unchanged from the index"."""
        if not self.hashed_files and not self.from_index:
            return "no local input files to hash"
        files = "file" if self.hashed_files == 1 else "files"
        text = f"hashed {self.hashed_files} {files} ({self.hashed_bytes / 1e6:.1f} MB) in {self.seconds:.2f} s"
        return f"{text}; {self.from_index} unchanged from the index"


_STATS: contextvars.ContextVar[HashStats | None] = contextvars.ContextVar("xlembed_hash_stats", default=None)


@contextlib.contextmanager
def hash_stats() -> Iterator[HashStats]:
    """Collect the cost of every `file_sha256` call made in this context (same thread or task)."""
    stats = HashStats()
    token = _STATS.set(stats)
    try:
        yield stats
    finally:
        _STATS.reset(token)


def sha256_of(path: Path) -> str:
    """Stream a file through sha256 (hashlib reads it in chunks: files may be many GB)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class HashIndex:
    """The SQLite index of content hashes; one connection per thread and process (WAL mode, so
    several processes planning at once read and write it safely)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._local = threading.local()
        self._broken = path is None

    def _connection(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            logger.warning("content-hash index %s unusable (%s): hashing every input file", self.path, exc)
            self._broken = True
            return None
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def lookup(self, path: str, stat: os.stat_result) -> str | None:
        conn = self._connection()
        if conn is None:
            return None
        try:
            row = conn.execute(
                "SELECT sha256, hashed_at_ns FROM files WHERE path = ? AND size = ? AND mtime_ns = ? AND ctime_ns = ? AND inode = ?",
                (path, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino),
            ).fetchone()
        except sqlite3.Error as exc:
            logger.warning("content-hash index %s: %s", self.path, exc)
            return None
        if row is None or _racy(stat, row[1]):
            return None
        return row[0]

    def record(self, path: str, stat: os.stat_result, digest: str, hashed_at_ns: int) -> None:
        conn = self._connection()
        if conn is None:
            return
        try:
            conn.execute(
                "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                (path, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, digest, hashed_at_ns),
            )
        except sqlite3.Error as exc:  # a read-only or full cache disk: go on without remembering
            logger.warning("content-hash index %s not updated: %s", self.path, exc)


def _racy(stat: os.stat_result, hashed_at_ns: int) -> bool:
    return max(stat.st_mtime_ns, stat.st_ctime_ns) >= hashed_at_ns - RACY_NS


_INDEXES: dict[Path | None, HashIndex] = {}
_INDEXES_LOCK = threading.Lock()


def _index() -> HashIndex:
    path = default_index_path()
    with _INDEXES_LOCK:
        if path not in _INDEXES:
            _INDEXES[path] = HashIndex(path)
        return _INDEXES[path]


def file_sha256(path: Path | str) -> str:
    """sha256 of a local file's bytes, read only if the index has no hash for its current
    stat signature. Raises FileNotFoundError / IsADirectoryError like `open`."""
    resolved = Path(path).expanduser().resolve()
    key = str(resolved)
    stat = resolved.stat()
    stats = _STATS.get()
    index = _index()
    digest = index.lookup(key, stat)
    if digest is not None:
        if stats is not None:
            stats.add(key, digest, stat.st_size, None)
        return digest
    hashed_at = time.time_ns()
    started = time.perf_counter()
    digest = sha256_of(resolved)
    elapsed = time.perf_counter() - started
    after = resolved.stat()
    if (after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino) == (
        stat.st_size,
        stat.st_mtime_ns,
        stat.st_ctime_ns,
        stat.st_ino,
    ):
        index.record(key, stat, digest, hashed_at)  # not when it changed while being read
    if stats is not None:
        stats.add(key, digest, stat.st_size, elapsed)
    return digest
